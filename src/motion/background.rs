//! The background: what each cell of a camera's grid usually looks like, following the scene
//! slowly, so that light that changes over minutes is never motion while anything that changes
//! within a few frames is.
//!
//! Owns: the per-cell background luma (f32), its exponential follow with a time constant (so it
//! adapts alike at 2 and 30 frames per second: a frame `dt` seconds after the previous one moves
//! each cell `1 − e^(−dt/τ)` of the way to the new value), and the comparison that marks changed
//! cells. Must not: know about masks, regions or gating.

use super::luma::{CellGrid, LumaImage};

#[derive(Debug, Default)]
pub(super) struct Background {
    grid: Option<CellGrid>,
    values: Vec<f32>,
    /// Capture time (seconds) of the last frame followed.
    at: f64,
}

impl Background {
    /// Whether it holds a background for frames of `grid` (else the next frame starts one).
    pub(super) fn knows(&self, grid: CellGrid) -> bool {
        self.grid == Some(grid)
    }

    /// Starts again from `luma`, captured at `at` seconds.
    pub(super) fn restart(&mut self, luma: &LumaImage, at: f64) {
        self.grid = Some(luma.grid());
        self.values.clear();
        self.values.extend(luma.values().iter().map(|&v| v as f32));
        self.at = at;
    }

    /// Marks in `changed` (one per cell) the cells of `luma` that differ from the background by
    /// more than `threshold` levels. `luma` must be of the grid it [`knows`](Self::knows).
    pub(super) fn compare(&self, luma: &LumaImage, threshold: u8, changed: &mut Vec<bool>) {
        changed.clear();
        let threshold = threshold as f32;
        changed.extend(luma.values().iter().zip(&self.values).map(|(&v, &b)| (v as f32 - b).abs() > threshold));
    }

    /// Moves every cell towards `luma`, captured at `at` seconds, with time constant `tau`
    /// seconds. A frame whose time is not after the last one's moves nothing (a clock that went
    /// back waits for its time to pass again).
    pub(super) fn follow(&mut self, luma: &LumaImage, at: f64, tau: f32) {
        let dt = at - self.at;
        // Also false for NaN.
        if dt.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return;
        }
        self.at = at;
        let step = (1.0 - (-dt / tau as f64).exp()) as f32;
        for (b, &v) in self.values.iter_mut().zip(luma.values()) {
            *b += step * (v as f32 - *b);
        }
    }

    #[cfg(test)]
    pub(super) fn values(&self) -> &[f32] {
        &self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(value: u8) -> LumaImage {
        let mut luma = LumaImage::default();
        luma.prepare(CellGrid::new(4, 4)).fill(value);
        luma
    }

    #[test]
    fn the_background_moves_towards_the_scene_by_its_time_constant() {
        let mut background = Background::default();
        background.restart(&image(100), 0.0);
        // One time constant later, 63 % of the way from 100 to 200.
        background.follow(&image(200), 10.0, 10.0);
        assert!((background.values()[0] - 163.2).abs() < 0.1, "{}", background.values()[0]);
        // Many small steps make the same way as one big one.
        let mut stepped = Background::default();
        stepped.restart(&image(100), 0.0);
        for i in 1..=50 {
            stepped.follow(&image(200), i as f64 * 0.2, 10.0);
        }
        assert!((stepped.values()[0] - background.values()[0]).abs() < 0.01);
    }

    #[test]
    fn a_frame_from_the_past_moves_nothing() {
        let mut background = Background::default();
        background.restart(&image(100), 5.0);
        background.follow(&image(200), 4.0, 10.0);
        background.follow(&image(200), 5.0, 10.0);
        assert_eq!(background.values()[0], 100.0);
    }

    #[test]
    fn cells_further_than_the_threshold_have_changed() {
        let mut background = Background::default();
        background.restart(&image(100), 0.0);
        let mut luma = image(100);
        luma.prepare(CellGrid::new(4, 4))[..3].copy_from_slice(&[120, 121, 79]);
        let mut changed = Vec::new();
        background.compare(&luma, 20, &mut changed);
        assert_eq!(&changed[..4], &[false, true, true, false]);
    }
}
