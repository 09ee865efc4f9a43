//! One camera's gate, on its source thread: judges each captured frame for motion (the luma image
//! of the frame in its slot: by the backend's [`LumaSampler`] where it has one, the GPU's kernel
//! on its page-locked slots, else by the CPU's SIMD downscale) and says whether it goes to
//! inference.
//!
//! Owns: the camera's downscaler and sampler, luma image, motion detector and gate, the last
//! verdict, and the camera's motion sensor: on with a frame that moved, off once none has for
//! [`MOTION_OFF_S`] seconds of capture time (so that a person who pauses does not flicker it).
//! Must not: touch the ring or the sink (the source thread routes the frame by the answer), or
//! block: a frame the sampler declines (late, busy) is downscaled on the CPU, a sampler that fails
//! is not asked again, and a frame it cannot judge (a size its format cannot have) goes to
//! inference, as if it moved.

use super::config::CameraMotion;
use crate::frame::FrameSlot;
use crate::motion::{
    Gate, GateInputs, LumaDownscaler, LumaImage, LumaSampler, Motion, MotionDetector, MotionError, MotionState,
    Sampled, Verdict,
};
use crate::track::scene_tracker::seconds;
use crate::track::zones::Polygon;

/// Seconds without motion after which the camera's motion sensor goes off.
pub const MOTION_OFF_S: f64 = 5.0;

/// A camera's motion gate.
pub struct CameraGate {
    downscaler: LumaDownscaler,
    /// Makes the luma image where the backend's slots allow (the GPU); `None`: the CPU does,
    /// also after the sampler failed.
    sampler: Option<Box<dyn LumaSampler>>,
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
            sampler: None,
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

    /// The gate with the frames' luma images made by `sampler` (the backend's, for its slots),
    /// the CPU's downscale making those it declines.
    pub fn with_sampler(mut self, sampler: Option<Box<dyn LumaSampler>>) -> CameraGate {
        self.sampler = sampler;
        self
    }

    /// The verdict on the frame in `slot` (timed by its capture time): `gating` is the camera's
    /// run-time switch, `tracking_settled` whether its tracks allow a frame to be held
    /// (`crate::track::tracker::Tracker::is_settled`).
    pub fn judge(&mut self, camera: &str, slot: &FrameSlot, gating: bool, tracking_settled: bool) -> Verdict {
        let meta = slot.meta();
        let at = seconds(meta.captured_at);
        let state = match self.luma_image(camera, slot) {
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

    /// The luma image of the frame in `slot`: the sampler's when it makes it, else the CPU's.
    fn luma_image(&mut self, camera: &str, slot: &FrameSlot) -> Result<(), MotionError> {
        if let Some(sampler) = self.sampler.as_mut() {
            match sampler.sample(slot, &mut self.luma) {
                Ok(Sampled::Ready) => return Ok(()),
                Ok(Sampled::Declined) => {}
                Err(e) => {
                    log::warn!(
                        "camera {camera}: the luma sampler failed ({e}); motion is judged on the CPU from now on"
                    );
                    self.sampler = None;
                }
            }
        }
        self.downscaler.run(slot.data(), slot.meta(), &mut self.luma)
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
    use crate::motion::{MotionParams, SamplerFailed};

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

    /// A sampler that answers from a script, counting its calls, and makes the CPU's image when
    /// it answers `Ready` (as the GPU's kernel does: the same bytes).
    struct Scripted {
        answers: Vec<Result<Sampled, SamplerFailed>>,
        calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl LumaSampler for Scripted {
        fn sample(&mut self, slot: &FrameSlot, out: &mut LumaImage) -> Result<Sampled, SamplerFailed> {
            let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let answer = self.answers.get(call).cloned().unwrap_or(Ok(Sampled::Ready));
            if answer == Ok(Sampled::Ready) {
                crate::motion::downscale_reference(slot.data(), slot.meta(), out).expect("a frame of its size");
            }
            answer
        }
    }

    #[test]
    fn a_gate_with_a_sampler_judges_as_the_cpu_whether_the_sampler_makes_declines_or_fails() {
        let settings = || CameraMotion { params: MotionParams::default(), masks: Vec::new(), detect_interval_s: 5.0 };
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (ready, declined) = (Ok(Sampled::Ready), Ok(Sampled::Declined));
        let failed = Err(SamplerFailed("the device is gone".into()));
        let answers = vec![ready.clone(), declined.clone(), ready, declined, failed];
        let sampler = Scripted { answers, calls: calls.clone() };
        let mut sampled = CameraGate::new(settings()).with_sampler(Some(Box::new(sampler)));
        let mut cpu = CameraGate::new(settings());
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        for i in 0..12 {
            frame(&mut slot, i as f64 * 0.2, i == 3 || i == 8);
            let (with, without) = (sampled.judge("test", &slot, true, true), cpu.judge("test", &slot, true, true));
            assert_eq!(with, without, "frame {i}");
            assert_eq!(sampled.motion(), cpu.motion(), "frame {i}");
        }
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 5, "a sampler that failed is not asked again");
    }
}
