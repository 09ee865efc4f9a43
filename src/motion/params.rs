//! The settings motion is judged with, as the detector takes them.
//!
//! Owns: [`MotionParams`] and [`Fraction`] (a share of the frame, 0..=1, checked where it is
//! made). Must not: read the config (the config builds these from `[motion]` and a
//! camera's overrides).

/// A share of something (of the frame, of its cells), between 0 and 1 inclusive.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Fraction(f32);

impl Fraction {
    /// `value` when it lies in 0..=1 (NaN does not).
    pub fn new(value: f32) -> Option<Fraction> {
        (0.0..=1.0).contains(&value).then_some(Fraction(value))
    }

    pub fn get(self) -> f32 {
        self.0
    }
}

/// How a camera's motion is judged (`[motion]` with the camera's overrides).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MotionParams {
    /// A cell whose mean luma differs from the background by more than this many levels has
    /// changed.
    pub threshold: u8,
    /// Changed cells that touch (sides or corners) make a region; a region is motion when it
    /// covers at least this share of the frame.
    pub min_area: Fraction,
    /// The background follows the scene with this time constant, in seconds (positive): light
    /// that changes slowly, and an object that stays put for a few times this long, become
    /// background.
    pub background_s: f32,
    /// More than this share of the unmasked cells changing at once is a change of light (a cloud,
    /// a lamp, the camera switching to night mode), not an object: the background starts again
    /// from that frame.
    pub light_change: Fraction,
}

impl Default for MotionParams {
    /// The built-in config's `[motion]` values.
    fn default() -> Self {
        MotionParams { threshold: 20, min_area: Fraction(0.001), background_s: 10.0, light_change: Fraction(0.8) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fraction_lies_between_0_and_1() {
        assert_eq!(Fraction::new(0.5).map(Fraction::get), Some(0.5));
        assert!(Fraction::new(0.0).is_some() && Fraction::new(1.0).is_some());
        assert!(Fraction::new(-0.01).is_none() && Fraction::new(1.01).is_none() && Fraction::new(f32::NAN).is_none());
    }
}
