//! The gate: whether a frame goes to the detector, from its motion, the camera's floor rate and
//! what the tracking needs.
//!
//! Owns: [`Gate`] and its rules. A frame goes to inference ([`Verdict::Detect`], with the first
//! reason that holds) when:
//! 1. gating is off for the camera (the run-time switch) — motion is still judged, for the sensor;
//! 2. the detector is learning (the first frame, a new frame size) or saw a change of light;
//! 3. something moved;
//! 4. something moved on the previous frame: the frame after motion shows where things came to
//!    rest, or that they left (so the tracker sees an object gone as it would without gating);
//! 5. the tracking is not settled: a track waits for confirmation or has been missed lately, and
//!    without every frame it would start or end late;
//! 6. `detect_interval_s` has passed since the last inference: the floor rate at which an object
//!    that came without motion (under a mask, too slowly) is still found.
//!
//! Otherwise the frame is held: inference is skipped and the tracking is told that nothing moved,
//! so the tracks it has stay as they are (a parked car keeps its track and its id).
//!
//! Must not: judge motion (`super::detector` does) or read clocks (times come with the frames).

use super::detector::MotionState;

/// Why a frame goes to inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    GatingOff,
    Learning,
    LightChange,
    Motion,
    AfterMotion,
    Tracking,
    Interval,
}

/// The gate's answer for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Detect(Reason),
    /// Nothing moved: skip inference, the tracks hold.
    Hold,
}

impl Verdict {
    pub fn detects(self) -> bool {
        matches!(self, Verdict::Detect(_))
    }
}

/// One camera's gate.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    /// Capture time (seconds) of the last frame sent to inference.
    last_detect: Option<f64>,
    moving_before: bool,
}

/// What the gate weighs for one frame besides its motion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateInputs {
    /// The camera's run-time gating switch.
    pub gating: bool,
    /// The tracking has no track waiting for confirmation or missed lately.
    pub tracking_settled: bool,
    /// The floor rate: at least one inference this often (seconds).
    pub detect_interval_s: f64,
}

impl Gate {
    /// The verdict on a frame captured at `at` seconds whose motion was `state`.
    pub fn judge(&mut self, state: MotionState, at: f64, inputs: GateInputs) -> Verdict {
        let moving_before = std::mem::replace(&mut self.moving_before, state == MotionState::Moving);
        // A clock that went back also counts as due.
        let due = self.last_detect.is_none_or(|last| !(at - last < inputs.detect_interval_s && at >= last));
        let reason = if !inputs.gating {
            Some(Reason::GatingOff)
        } else {
            match state {
                MotionState::Learning => Some(Reason::Learning),
                MotionState::LightChange => Some(Reason::LightChange),
                MotionState::Moving => Some(Reason::Motion),
                MotionState::Still if moving_before => Some(Reason::AfterMotion),
                MotionState::Still if !inputs.tracking_settled => Some(Reason::Tracking),
                MotionState::Still if due => Some(Reason::Interval),
                MotionState::Still => None,
            }
        };
        match reason {
            Some(reason) => {
                self.last_detect = Some(at);
                Verdict::Detect(reason)
            }
            None => Verdict::Hold,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: GateInputs = GateInputs { gating: true, tracking_settled: true, detect_interval_s: 5.0 };

    #[test]
    fn a_still_camera_is_detected_at_the_floor_rate_only() {
        let mut gate = Gate::default();
        let detected: Vec<u32> = (0..60)
            .filter(|&i| {
                let state = if i == 0 { MotionState::Learning } else { MotionState::Still };
                gate.judge(state, i as f64 * 0.2, ON).detects()
            })
            .collect();
        // 5 frames a second, 12 s: the first frame, then every 5 s.
        assert_eq!(detected, vec![0, 25, 50]);
    }

    #[test]
    fn motion_and_the_frame_after_it_are_detected() {
        let mut gate = Gate::default();
        gate.judge(MotionState::Learning, 0.0, ON);
        assert_eq!(gate.judge(MotionState::Still, 0.2, ON), Verdict::Hold);
        assert_eq!(gate.judge(MotionState::Moving, 0.4, ON), Verdict::Detect(Reason::Motion));
        assert_eq!(gate.judge(MotionState::Still, 0.6, ON), Verdict::Detect(Reason::AfterMotion));
        assert_eq!(gate.judge(MotionState::Still, 0.8, ON), Verdict::Hold);
        assert_eq!(gate.judge(MotionState::LightChange, 1.0, ON), Verdict::Detect(Reason::LightChange));
    }

    #[test]
    fn unsettled_tracking_and_gating_off_detect_every_frame() {
        let mut gate = Gate::default();
        gate.judge(MotionState::Learning, 0.0, ON);
        let unsettled = GateInputs { tracking_settled: false, ..ON };
        assert_eq!(gate.judge(MotionState::Still, 0.2, unsettled), Verdict::Detect(Reason::Tracking));
        let off = GateInputs { gating: false, ..ON };
        assert_eq!(gate.judge(MotionState::Still, 0.4, off), Verdict::Detect(Reason::GatingOff));
        assert_eq!(gate.judge(MotionState::Still, 0.6, ON), Verdict::Hold);
    }

    #[test]
    fn a_clock_that_goes_back_makes_the_floor_due() {
        let mut gate = Gate::default();
        gate.judge(MotionState::Learning, 100.0, ON);
        assert_eq!(gate.judge(MotionState::Still, 50.0, ON), Verdict::Detect(Reason::Interval));
    }
}
