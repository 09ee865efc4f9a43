//! One camera's gate, on its source thread: judges each captured frame for motion (the luma image
//! of the frame in its slot, by the CPU's SIMD downscale) and says whether it goes to inference.
//!
//! Owns: the camera's downscaler, luma image, motion detector and gate, and the last verdict.
//! Must not: touch the ring or the sink (the source thread routes the frame by the answer), or
//! block: a frame it cannot judge (a size its format cannot have) goes to inference, as if it moved.

use super::config::CameraMotion;
use crate::frame::FrameSlot;
use crate::motion::{Gate, GateInputs, LumaDownscaler, LumaImage, Motion, MotionDetector, Verdict};
use crate::track::scene_tracker::seconds;

/// A camera's motion gate.
#[derive(Debug)]
pub struct CameraGate {
    downscaler: LumaDownscaler,
    luma: LumaImage,
    detector: MotionDetector,
    gate: Gate,
    detect_interval_s: f64,
    /// Warned once that a frame could not be judged.
    warned: bool,
}

impl CameraGate {
    pub fn new(settings: CameraMotion) -> CameraGate {
        CameraGate {
            downscaler: LumaDownscaler::new(),
            luma: LumaImage::default(),
            detector: MotionDetector::new(settings.params, settings.masks),
            gate: Gate::default(),
            detect_interval_s: settings.detect_interval_s,
            warned: false,
        }
    }

    /// The verdict on the frame in `slot` (timed by its capture time): `gating` is the camera's
    /// run-time switch, `tracking_settled` whether its tracks allow a frame to be held
    /// (`crate::track::tracker::Tracker::is_settled`).
    pub fn judge(&mut self, camera: &str, slot: &FrameSlot, gating: bool, tracking_settled: bool) -> Verdict {
        let meta = slot.meta();
        let at = seconds(meta.captured_at);
        let state = match self.downscaler.run(slot.data(), meta, &mut self.luma) {
            Ok(()) => self.detector.observe(&self.luma, at).state,
            Err(e) => {
                if !std::mem::replace(&mut self.warned, true) {
                    log::warn!("camera {camera}: motion cannot judge a frame ({e}); such frames go to inference");
                }
                return Verdict::Detect(crate::motion::Reason::Learning);
            }
        };
        let inputs = GateInputs { gating, tracking_settled, detect_interval_s: self.detect_interval_s };
        self.gate.judge(state, at, inputs)
    }

    /// What the last frame judged showed.
    pub fn motion(&self) -> &Motion {
        self.detector.motion()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::frame::{HeapMemory, PixelFormat};
    use crate::motion::MotionParams;

    fn frame(slot: &mut FrameSlot, at_s: f64, square: bool) {
        let pixels = slot.prepare(64, 48, PixelFormat::Rgb8).expect("slot");
        pixels.fill(80);
        if square {
            for y in 10..30 {
                pixels[(y * 64 + 10) * 3..(y * 64 + 30) * 3].fill(220);
            }
        }
        slot.meta_mut().captured_at = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(1e9 + at_s);
    }

    #[test]
    fn still_frames_are_held_between_the_floor_rate_and_motion_goes_to_inference() {
        let settings = CameraMotion { params: MotionParams::default(), masks: Vec::new(), detect_interval_s: 5.0 };
        let mut gate = CameraGate::new(settings);
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        let mut verdicts = Vec::new();
        for i in 0..10 {
            frame(&mut slot, i as f64 * 0.2, i == 6);
            verdicts.push(gate.judge("test", &slot, true, true).detects());
        }
        // Learning, held, then the square and the frame after it.
        assert_eq!(verdicts, [true, false, false, false, false, false, true, true, false, false]);
        assert!(gate.motion().regions.is_empty());
        frame(&mut slot, 2.0, false);
        assert!(gate.judge("test", &slot, false, true).detects(), "gating off");
    }

    #[test]
    fn a_frame_that_cannot_be_judged_goes_to_inference() {
        let settings = CameraMotion { params: MotionParams::default(), masks: Vec::new(), detect_interval_s: 5.0 };
        let mut gate = CameraGate::new(settings);
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        frame(&mut slot, 0.0, false);
        slot.meta_mut().width = 65;
        assert!(gate.judge("test", &slot, true, true).detects());
    }
}
