//! One camera's motion detector: a luma image in, what moved out.
//!
//! Owns: the camera's background, masks and thresholds in step, frame after frame: cells that
//! differ from the background by more than the threshold (outside the masks) have changed;
//! changed cells that touch make regions; a region of at least the minimum area is motion; most of
//! the frame changing at once is a change of light; then the background follows the frame. Time
//! comes in with each frame (its capture time, in seconds), as for the tracker, so tests drive it
//! with synthetic times. Must not: read frames (the luma image is made before: `super::luma` on
//! the CPU, the CUDA kernel on the GPU), read clocks, or decide whether inference runs
//! (`super::gate` does).

use super::background::Background;
use super::luma::LumaImage;
use super::mask::MaskRaster;
use super::params::MotionParams;
use super::regions::{Components, Region};
use crate::track::zones::Polygon;

/// Regions a [`Motion`] lists at most (the largest): what the page draws and the sensor reports.
pub const MAX_REGIONS: usize = 16;

/// What a frame showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MotionState {
    /// The first frame of its size: the background starts from it, and nothing is known yet.
    #[default]
    Learning,
    /// No region reached the minimum area.
    Still,
    /// At least one region reached the minimum area.
    Moving,
    /// More than `light_change` of the unmasked cells changed at once: light, not an object. The
    /// background starts again from this frame.
    LightChange,
}

/// The verdict on one frame.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Motion {
    pub state: MotionState,
    /// Share of the unmasked cells that changed (0..=1).
    pub changed: f32,
    /// The regions that are motion, largest first, at most [`MAX_REGIONS`].
    pub regions: Vec<Region>,
}

impl Motion {
    pub fn is_moving(&self) -> bool {
        self.state == MotionState::Moving
    }
}

/// A camera's motion detector.
#[derive(Debug)]
pub struct MotionDetector {
    params: MotionParams,
    masks: Vec<Polygon>,
    raster: MaskRaster,
    background: Background,
    /// Per cell of the last frame: changed and not masked.
    changed: Vec<bool>,
    components: Components,
    motion: Motion,
}

impl MotionDetector {
    /// A detector judging with `params`, ignoring changes inside `masks` (frame fractions).
    pub fn new(params: MotionParams, masks: Vec<Polygon>) -> MotionDetector {
        MotionDetector {
            params,
            masks,
            raster: MaskRaster::default(),
            background: Background::default(),
            changed: Vec::new(),
            components: Components::default(),
            motion: Motion::default(),
        }
    }

    /// New settings and masks (a reload, a mask saved from the page); the background stays.
    pub fn reconfigure(&mut self, params: MotionParams, masks: Vec<Polygon>) {
        self.params = params;
        self.masks = masks;
        self.raster.invalidate();
    }

    pub fn params(&self) -> &MotionParams {
        &self.params
    }

    /// The last frame's verdict.
    pub fn motion(&self) -> &Motion {
        &self.motion
    }

    /// Judges the frame whose luma image is `luma`, captured at `at` seconds, and lets the
    /// background follow it.
    pub fn observe(&mut self, luma: &LumaImage, at: f64) -> &Motion {
        let grid = luma.grid();
        self.motion.regions.clear();
        self.motion.changed = 0.0;
        if !self.background.knows(grid) {
            self.background.restart(luma, at);
            self.motion.state = MotionState::Learning;
            return &self.motion;
        }
        self.background.compare(luma, self.params.threshold, &mut self.changed);
        let raster = self.raster.for_grid(grid, &self.masks);
        for (index, changed) in self.changed.iter_mut().enumerate() {
            *changed &= !raster.is_masked(index);
        }
        let changed = self.changed.iter().filter(|c| **c).count();
        self.motion.changed = changed as f32 / raster.open_cells().max(1) as f32;
        if changed > 0 && self.motion.changed > self.params.light_change.get() {
            self.background.restart(luma, at);
            self.motion.state = MotionState::LightChange;
            return &self.motion;
        }
        let min_cells = ((self.params.min_area.get() as f64 * grid.len() as f64).ceil() as u32).max(1);
        let regions = &mut self.motion.regions;
        self.components.find(grid, &self.changed, |region| {
            if region.cells >= min_cells {
                regions.push(region);
            }
        });
        regions.sort_by_key(|region| std::cmp::Reverse(region.cells));
        regions.truncate(MAX_REGIONS);
        self.motion.state = if regions.is_empty() { MotionState::Still } else { MotionState::Moving };
        self.background.follow(luma, at, self.params.background_s);
        &self.motion
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::motion::luma::CellGrid;
    use crate::motion::params::Fraction;

    /// A 160x90 grid (1080p) of one value, with a square of another.
    fn scene(value: u8, square: Option<(u32, u32, u32, u8)>) -> LumaImage {
        let grid = CellGrid::new(1920, 1080);
        let mut luma = LumaImage::default();
        let values = luma.prepare(grid);
        values.fill(value);
        if let Some((col, row, side, inside)) = square {
            for r in row..row + side {
                for c in col..col + side {
                    values[(r * grid.cols + c) as usize] = inside;
                }
            }
        }
        luma
    }

    fn params() -> MotionParams {
        MotionParams { min_area: Fraction::new(0.001).expect("fraction"), ..MotionParams::default() }
    }

    #[test]
    fn the_first_frame_is_learnt_and_a_still_scene_stays_still() {
        let mut detector = MotionDetector::new(params(), Vec::new());
        assert_eq!(detector.observe(&scene(80, None), 0.0).state, MotionState::Learning);
        for i in 1..10 {
            assert_eq!(detector.observe(&scene(80, None), i as f64 * 0.2).state, MotionState::Still);
        }
    }

    #[test]
    fn a_square_large_enough_is_motion_with_its_box() {
        let mut detector = MotionDetector::new(params(), Vec::new());
        detector.observe(&scene(80, None), 0.0);
        // 0.1 % of 14 400 cells is 15 cells: a 3x3 square is too small, 4x4 is enough.
        assert_eq!(detector.observe(&scene(80, Some((10, 10, 3, 200))), 0.2).state, MotionState::Still);
        let motion = detector.observe(&scene(80, Some((100, 50, 4, 200))), 0.4);
        assert_eq!(motion.state, MotionState::Moving);
        assert_eq!(motion.regions, vec![Region { x: 1200, y: 600, width: 48, height: 48, cells: 16 }]);
    }

    #[test]
    fn changes_under_a_mask_are_not_motion() {
        let right = Polygon::new(&[[0.5, 0.0], [1.0, 0.0], [1.0, 1.0], [0.5, 1.0]]).expect("polygon");
        let mut detector = MotionDetector::new(params(), vec![right]);
        detector.observe(&scene(80, None), 0.0);
        assert_eq!(detector.observe(&scene(80, Some((100, 10, 20, 200))), 0.2).state, MotionState::Still);
        assert_eq!(detector.observe(&scene(80, Some((10, 10, 20, 200))), 0.4).state, MotionState::Moving);
    }

    #[test]
    fn most_of_the_frame_changing_at_once_is_light_and_restarts_the_background() {
        let mut detector = MotionDetector::new(params(), Vec::new());
        detector.observe(&scene(80, None), 0.0);
        let motion = detector.observe(&scene(160, None), 0.2);
        assert_eq!(motion.state, MotionState::LightChange);
        assert_eq!(motion.changed, 1.0);
        assert_eq!(detector.observe(&scene(160, None), 0.4).state, MotionState::Still);
    }

    #[test]
    fn light_that_changes_slowly_is_never_motion() {
        // From 40 to 200 levels in 160 s, 5 frames a second: one level a second.
        let mut detector = MotionDetector::new(params(), Vec::new());
        for i in 0..800 {
            let at = i as f64 * 0.2;
            let state = detector.observe(&scene(40 + (at as u32) as u8, None), at).state;
            assert!(matches!(state, MotionState::Learning | MotionState::Still), "frame {i}: {state:?}");
        }
    }

    #[test]
    fn an_object_that_stays_becomes_background() {
        let mut detector = MotionDetector::new(params(), Vec::new());
        detector.observe(&scene(80, None), 0.0);
        let parked = scene(80, Some((50, 50, 10, 200)));
        assert!(detector.observe(&parked, 0.2).is_moving());
        let still_after = (1..600).map(|i| i as f64 * 0.2).find(|&at| !detector.observe(&parked, at).is_moving());
        // 120 levels against a threshold of 20: e^(-t/10) < 20/120 after about 18 s.
        let at = still_after.expect("absorbed");
        assert!((17.0..20.0).contains(&at), "{at}");
    }
}
