//! One camera's gate, on its source thread: judges each captured frame for motion (the luma image
//! of the frame in its slot, by the CPU's SIMD downscale) and says whether it goes to inference.
//!
//! Owns: the camera's downscaler, luma image, motion detector and gate, the last verdict, and
//! the camera's motion sensor: on with a frame that moved, off once none has for
//! [`MOTION_OFF_S`] seconds of capture time (so that a person who pauses does not flicker it).
//! Must not: touch the ring or the sink (the source thread routes the frame by the answer), or
//! block: a frame it cannot judge (a size its format cannot have) goes to inference, as if it moved.

use super::config::CameraMotion;
use crate::frame::FrameSlot;
use crate::motion::{Gate, GateInputs, LumaDownscaler, LumaImage, Motion, MotionDetector, MotionState, Verdict};
use crate::track::scene_tracker::seconds;
use crate::track::zones::Polygon;

/// Seconds without motion after which the camera's motion sensor goes off.
pub const MOTION_OFF_S: f64 = 5.0;

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
    /// Capture time of the last frame that moved.
    last_motion: Option<f64>,
    /// The sensor as last reported (`None` before the first frame).
    sensor: Option<bool>,
    /// The sensor's new value when the last frame changed it.
    sensor_changed: Option<bool>,
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
            last_motion: None,
            sensor: None,
            sensor_changed: None,
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
        if state == MotionState::Moving {
            self.last_motion = Some(at);
        }
        let moving = self.last_motion.is_some_and(|last| (0.0..MOTION_OFF_S).contains(&(at - last)));
        self.sensor_changed = (self.sensor != Some(moving)).then_some(moving);
        self.sensor = Some(moving);
        let inputs = GateInputs { gating, tracking_settled, detect_interval_s: self.detect_interval_s };
        self.gate.judge(state, at, inputs)
    }

    /// The motion sensor's new value when the last frame judged changed it (the first frame
    /// always does): what the camera's `motion` topic says.
    pub fn sensor_changed(&self) -> Option<bool> {
        self.sensor_changed
    }

    /// New masks (saved from the page) from the next frame on; the background stays.
    pub fn set_masks(&mut self, masks: Vec<Polygon>) {
        self.detector.reconfigure(*self.detector.params(), masks);
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
        assert_eq!(gate.sensor_changed(), None, "on since frame 6, for 5 s");
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

    #[test]
    fn the_sensor_goes_on_with_motion_and_off_after_five_still_seconds() {
        let settings = CameraMotion { params: MotionParams::default(), masks: Vec::new(), detect_interval_s: 5.0 };
        let mut gate = CameraGate::new(settings);
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        let mut changes = Vec::new();
        for i in 0..50 {
            frame(&mut slot, i as f64 * 0.2, i == 10);
            gate.judge("test", &slot, true, true);
            changes.extend(gate.sensor_changed().map(|moving| (i, moving)));
        }
        // Off at the first frame, on with the square at 2 s, off 5 s later.
        assert_eq!(changes, [(0, false), (10, true), (35, false)]);
    }
}
