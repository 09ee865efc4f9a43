//! One camera's side of the pipeline: a source thread fills the camera's frame slots; the
//! inference workers (`crate::infer::scheduler`) take them from there, shared by every camera.
//!
//! Owns: the camera's source thread, its fps cap, its frame ring (slots sized by what the source
//! delivers), the camera's [`SourceStatus`] (from a source that reconnects, else kept here; the
//! sink hears when it goes from streaming to offline, [`FrameSink::camera_offline`]), the
//! source thread's [`Liveness`] party (it beats on every turn of its loop), releasing frames
//! from inference while the camera's detection is switched off ([`Switch::Detect`]: the sink gets
//! them for the camera's picture, [`FrameSink::picture`], then they go back to the ring), and
//! offering each frame to a camera's [`StreamTap`] (which copies one only when its recorder
//! needs raw frames; recording goes on while detection is off), and, with `[motion]`
//! gating, keeping a frame without motion from inference (its [`CameraGate`] says so, unless the
//! camera's gating is switched off, [`Switch::Gating`]; the sink holds its tracks,
//! [`FrameSink::held`], and gets it for the picture; the gate's [`MotionLink`] brings it masks
//! saved from the page and shows its motion to whoever watches). The gate gets the backend's luma
//! sampler (the GPU's kernel on its slots) when the backend has one, [`Backend::luma_sampler`].
//! Must not: run inference (the scheduler's workers do, through `super::step`), publish, format
//! payloads, or block on the network.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::gating::{CameraGate, MotionGates, MotionLink};
use super::scheduler::Scheduler;
use super::step::{FrameSink, PipelineError};
use crate::backend::traits::Backend;
use crate::config::{CameraConfig, LimitsConfig};
use crate::controls::{Controls, Switch};
use crate::frame::{FrameRing, FrameSlot, SlotAllocator, Stage};
use crate::motion::LumaSampler;
use crate::service::notify::{Liveness, LivenessHandle};
use crate::source::tap::StreamTap;
use crate::source::{Capture, FrameSource, Opening, SourceError, SourceReport, SourceState, SourceStatus};

/// How often a blocked source thread looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// A source that asks to be called again gets this pause, so a flapping device cannot spin a core.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// What every camera pipeline of a daemon shares.
#[derive(Clone)]
pub struct PipelineShared {
    /// Frame slots per camera ring (`engine.frame_slots`).
    pub slots: usize,
    /// The bounds on every frame a source decodes (`[limits]`).
    pub limits: LimitsConfig,
    /// The inference workers every camera's frames go to.
    pub scheduler: Arc<Scheduler>,
    pub sink: Arc<dyn FrameSink>,
    /// The daemon's shutdown flag.
    pub stop: Arc<AtomicBool>,
    /// Where the source threads register for the watchdog.
    pub liveness: Arc<Liveness>,
    /// The run-time switches: a camera whose detection is off sends no frame to inference.
    pub controls: Arc<Controls>,
    /// With `[motion]` enabled: each camera's gate, which keeps frames without motion from
    /// inference, its settings and its link.
    pub motion: Option<Arc<MotionGates>>,
}

/// A running camera.
pub struct CameraPipeline {
    name: String,
    ring: Arc<FrameRing>,
    status: SourceStatus,
    source_thread: Option<JoinHandle<()>>,
}

impl CameraPipeline {
    /// Opens the camera's source (errors here mean the camera never started), starts its source
    /// thread and hands its ring to the scheduler. Every frame the source decodes is bounded by
    /// `shared.limits`.
    pub fn start(camera: &CameraConfig, shared: &PipelineShared) -> Result<CameraPipeline, PipelineError> {
        CameraPipeline::start_recorded(camera, shared, None)
    }

    /// [`CameraPipeline::start`] for a camera that records or is watched live: its source hands
    /// `record` its compressed stream, or else the source thread hands it raw frames.
    pub fn start_recorded(
        camera: &CameraConfig,
        shared: &PipelineShared,
        record: Option<StreamTap>,
    ) -> Result<CameraPipeline, PipelineError> {
        let backend = shared.scheduler.backend().clone();
        let slots = SlotAllocator::new(move || backend.slot_memory().map_err(|e| e.to_string()));
        let opening = Opening { limits: shared.limits, stop: shared.stop.clone(), slots: &slots, tap: record.clone() };
        let source = camera
            .source
            .kind()
            .open(&camera.name, opening)
            .map_err(|source| PipelineError::Source { camera: camera.name.clone(), source })?;
        CameraPipeline::run(camera, source, shared, record)
    }

    /// Starts the source thread on a source that is already open (`camera.source` is not used).
    pub fn start_with_source(
        camera: &CameraConfig,
        source: Box<dyn FrameSource>,
        shared: &PipelineShared,
    ) -> Result<CameraPipeline, PipelineError> {
        CameraPipeline::run(camera, source, shared, None)
    }

    fn run(
        camera: &CameraConfig,
        source: Box<dyn FrameSource>,
        shared: &PipelineShared,
        record: Option<StreamTap>,
    ) -> Result<CameraPipeline, PipelineError> {
        let name = camera.name.clone();
        let backend = shared.scheduler.backend();
        let memories = (0..shared.slots)
            .map(|_| backend.slot_memory().map(FrameSlot::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| PipelineError::Backend { camera: name.clone(), source })?;
        let ring = Arc::new(FrameRing::with_doorbell(memories, shared.scheduler.doorbell()));
        let status = source.connection_status().unwrap_or_else(|| SourceStatus::new(SourceState::Streaming));
        let frame_interval = camera.frame_interval();
        log::info!("camera {name}: {} (fps cap: {})", source.describe(), fps_text(camera.fps));

        let gate = match shared.motion.as_deref() {
            Some(gates) => {
                let settings = gates.settings(&name).map_err(|(key, message)| PipelineError::Motion {
                    camera: name.clone(),
                    message: format!("{key}: {message}"),
                })?;
                Some((
                    CameraGate::new(settings).with_sampler(luma_sampler(&name, backend.as_ref())),
                    gates.link(&name).cloned().unwrap_or_default(),
                ))
            }
            None => None,
        };
        let liveness = shared.liveness.register(format!("camera {name}: source"));
        let switches = shared.controls.camera(&name).cloned();
        let source_thread = {
            let (name, ring, status) = (name.clone(), ring.clone(), status.clone());
            let (sink, stop) = (shared.sink.clone(), shared.stop.clone());
            spawn(&format!("{}-source", camera.name), &camera.name, move || {
                // A frame captured while detection is off goes to the camera's picture alone.
                let detecting = || switches.as_ref().is_none_or(|switches| switches.get(Switch::Detect));
                let gating = || switches.as_ref().is_none_or(|switches| switches.get(Switch::Gating));
                let picture = |slot: &FrameSlot| sink.picture(&name, slot);
                let offline = || sink.camera_offline(&name);
                let held = |slot: &FrameSlot| sink.held(&name, slot);
                let settled = || sink.tracking_settled(&name);
                let motion = |moving: bool| sink.motion(&name, moving);
                let gate = gate.map(|(gate, link)| Gating {
                    camera: &name,
                    gate,
                    link,
                    gating: &gating,
                    held: &held,
                    settled: &settled,
                    motion: &motion,
                });
                let mut routes =
                    FrameRoutes { detecting: &detecting, picture: &picture, offline: &offline, record, gate };
                let result = run_source(source, &ring, frame_interval, &stop, &status, &liveness, &mut routes)
                    .map_err(|source| PipelineError::Source { camera: name.clone(), source });
                ring.close();
                match result {
                    Ok(()) => liveness.finish(),
                    // The handle is dropped unfinished: the watchdog counts the thread as dead.
                    Err(_) => sink.camera_ended(&name, &result),
                }
            })?
        };
        shared.scheduler.add_camera(&name, ring.clone());
        Ok(CameraPipeline { name, ring, status, source_thread: Some(source_thread) })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The ring's counters (frames produced, frames dropped because inference was behind).
    pub fn ring(&self) -> &FrameRing {
        &self.ring
    }

    /// The camera's source state (streaming, reconnecting, ended, stopped) and since when.
    pub fn source_report(&self) -> SourceReport {
        self.status.report()
    }

    /// Waits for the source thread (after the stop flag was set or the source ended).
    pub fn join(mut self) -> Result<(), PipelineError> {
        match self.source_thread.take().map(JoinHandle::join) {
            Some(Err(_)) => Err(PipelineError::Panicked { camera: format!("camera {}", self.name) }),
            _ => Ok(()),
        }
    }
}

/// The backend's luma sampler for the camera's motion gate (the GPU's kernel on its slots), or
/// none: the CPU downscales. One that cannot be made costs the camera nothing but the CPU's time.
fn luma_sampler(camera: &str, backend: &dyn Backend) -> Option<Box<dyn LumaSampler>> {
    match backend.luma_sampler() {
        Ok(Some(sampler)) => {
            log::info!("camera {camera}: motion is judged on the GPU's luma image of each frame's slot");
            Some(sampler)
        }
        Ok(None) => None,
        Err(e) => {
            log::warn!("camera {camera}: no GPU luma sampler ({e}); motion is judged on the CPU");
            None
        }
    }
}

fn fps_text(fps: f32) -> String {
    if fps > 0.0 {
        format!("{fps}/s")
    } else {
        "none".into()
    }
}

fn spawn(
    thread_name: &str,
    camera: &str,
    body: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, PipelineError> {
    std::thread::Builder::new()
        .name(thread_name.chars().take(15).collect())
        .spawn(body)
        .map_err(|source| PipelineError::Thread { camera: camera.to_string(), source })
}

/// Sleeps until `deadline` in short steps, beating `liveness` after each; false when asked to stop
/// meanwhile.
fn sleep_until(deadline: Instant, stop: &AtomicBool, liveness: &LivenessHandle) -> bool {
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(POLL));
        liveness.beat();
    }
}

/// Who takes a captured frame besides the ring.
struct FrameRoutes<'a> {
    /// Inference takes it while this says yes.
    detecting: &'a dyn Fn() -> bool,
    /// Else the camera's picture does (no inference), on this thread.
    picture: &'a dyn Fn(&FrameSlot),
    /// Told when the camera goes from streaming to offline (its source reconnects).
    offline: &'a dyn Fn(),
    /// The camera's recorder, which copies raw frames at its rate (whether detection is on or not).
    record: Option<StreamTap>,
    /// With `[motion]` gating: what keeps a frame without motion from inference.
    gate: Option<Gating<'a>>,
}

/// A camera's gate and where the frames it holds go.
struct Gating<'a> {
    camera: &'a str,
    gate: CameraGate,
    /// Masks saved from the page come in, the motion of each frame goes out to a watcher.
    link: Arc<MotionLink>,
    /// The camera's gating switch ([`Switch::Gating`]): off, every frame passes.
    gating: &'a dyn Fn() -> bool,
    /// A held frame: its tracks hold, the picture goes on.
    held: &'a dyn Fn(&FrameSlot),
    /// Whether the camera's tracks let a frame be held.
    settled: &'a dyn Fn() -> bool,
    /// The camera's motion sensor changed.
    motion: &'a dyn Fn(bool),
}

impl Gating<'_> {
    /// Whether the frame in `slot` goes to inference; a frame that does not went to `held`.
    fn passes(&mut self, slot: &FrameSlot) -> bool {
        if let Some(masks) = self.link.take_masks() {
            self.gate.set_masks(masks);
        }
        let verdict = self.gate.judge(self.camera, slot, (self.gating)(), (self.settled)());
        self.link.show(self.gate.motion(), slot.meta(), !verdict.detects());
        if let Some(moving) = self.gate.sensor_changed() {
            (self.motion)(moving);
        }
        if !verdict.detects() {
            (self.held)(slot);
        }
        verdict.detects()
    }
}

/// Captures until the source ends or the daemon stops; a frame captured while `routes.detecting`
/// says no goes to `routes.picture`, and one the camera's gate holds to its `held`, then back to
/// the ring (no drop is counted: nothing was behind).
fn run_source(
    mut source: Box<dyn FrameSource>,
    ring: &FrameRing,
    frame_interval: Option<Duration>,
    stop: &AtomicBool,
    status: &SourceStatus,
    liveness: &LivenessHandle,
    routes: &mut FrameRoutes<'_>,
) -> Result<(), SourceError> {
    let mut sequence = 0u64;
    let mut next_due = Instant::now();
    let keeps_every_frame = source.keeps_every_frame();
    let mut was_streaming = false;
    while !stop.load(Ordering::SeqCst) {
        if let Some(interval) = frame_interval {
            if !sleep_until(next_due, stop, liveness) {
                break;
            }
            // After a stall, resume the cadence from now rather than bursting to catch up.
            next_due = (next_due + interval).max(Instant::now());
        }
        let slot = if keeps_every_frame { wait_for_free_slot(ring, stop, liveness) } else { ring.acquire_for_write() };
        let Some(mut slot) = slot else {
            std::thread::sleep(RETRY_PAUSE);
            liveness.beat();
            continue;
        };
        let started = Instant::now();
        liveness.enter(Stage::Source);
        let captured = source.next_frame(&mut slot);
        // A reconnecting source returns here after each backoff step: it is alive, whatever
        // its camera's state.
        liveness.beat();
        let state = status.get();
        if was_streaming && state.is_offline() {
            (routes.offline)();
        }
        was_streaming = state == SourceState::Streaming;
        match captured {
            Ok(captured @ (Capture::Frame | Capture::TruncatedFrame)) => {
                if captured == Capture::TruncatedFrame {
                    ring.stats().truncated.fetch_add(1, Ordering::Relaxed);
                }
                ring.stats().set_capture_mode(source.capture_mode());
                if let Some(record) = &routes.record {
                    record.offer_frame(&slot);
                }
                if !(routes.detecting)() {
                    (routes.picture)(&slot);
                    ring.release(slot);
                    continue;
                }
                if !routes.gate.as_mut().is_none_or(|gate| gate.passes(&slot)) {
                    ring.release(slot);
                    continue;
                }
                slot.set_capture_time(started.elapsed());
                slot.meta_mut().sequence = sequence;
                sequence += 1;
                ring.publish(slot);
            }
            Ok(Capture::Retry) => {
                ring.release(slot);
                std::thread::sleep(RETRY_PAUSE);
            }
            Ok(Capture::OverLimit) => {
                ring.stats().over_limit.fetch_add(1, Ordering::Relaxed);
                ring.release(slot);
                std::thread::sleep(RETRY_PAUSE);
            }
            Ok(Capture::End) => {
                ring.release(slot);
                if !stop.load(Ordering::SeqCst) {
                    log::info!("{}: no more frames", source.describe());
                    status.set(SourceState::Ended);
                }
                break;
            }
            Err(e) => {
                ring.release(slot);
                return Err(e);
            }
        }
    }
    if stop.load(Ordering::SeqCst) {
        status.set(SourceState::Stopped);
    }
    Ok(())
}

/// A free slot for a source that must not drop frames; `None` when asked to stop meanwhile. Waiting
/// for inference to free a slot is the source being alive (the inference worker has its own party).
fn wait_for_free_slot(ring: &FrameRing, stop: &AtomicBool, liveness: &LivenessHandle) -> Option<FrameSlot> {
    while !stop.load(Ordering::SeqCst) {
        if let Some(slot) = ring.acquire_free(POLL) {
            return Some(slot);
        }
        liveness.beat();
    }
    None
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::frame::{HeapMemory, PixelFormat};
    use crate::infer::gating::CameraMotion;
    use crate::motion::{MotionParams, MotionState};
    use crate::track::zones::Polygon;

    /// A still grey frame captured at `at_s`.
    fn still_frame(slot: &mut FrameSlot, at_s: f64) {
        slot.prepare(64, 48, PixelFormat::Rgb8).expect("slot").fill(80);
        slot.meta_mut().captured_at = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(1e9 + at_s);
    }

    #[test]
    fn a_camera_whose_gating_is_switched_off_sends_its_still_frames_to_inference() {
        let controls = Controls::with_cameras(["front".to_string()], false, 0.4);
        let switches = controls.camera("front").expect("front").clone();
        let settings = CameraMotion { params: MotionParams::default(), masks: Vec::new(), detect_interval_s: 5.0 };
        let held_frames = Cell::new(0);
        let (gating, held) = (|| switches.get(Switch::Gating), |_: &FrameSlot| held_frames.set(held_frames.get() + 1));
        let (settled, motion) = (|| true, |_: bool| {});
        let mut gate = Gating {
            camera: "front",
            gate: CameraGate::new(settings),
            link: Arc::default(),
            gating: &gating,
            held: &held,
            settled: &settled,
            motion: &motion,
        };
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        let mut passes = Vec::new();
        for i in 0..6 {
            if i == 3 {
                controls.set("front", Switch::Gating, false).expect("a known camera");
            }
            still_frame(&mut slot, f64::from(i) * 0.2);
            passes.push(gate.passes(&slot));
        }
        // The first frame teaches the background, the next two are held; switched off, none is.
        assert_eq!(passes, [true, false, false, true, true, true]);
        assert_eq!(held_frames.get(), 2);
    }

    #[test]
    fn masks_handed_to_the_link_apply_from_the_next_frame_and_a_watcher_sees_each_frames_motion() {
        let settings = CameraMotion { params: MotionParams::default(), masks: Vec::new(), detect_interval_s: 5.0 };
        let (gating, held, settled, motion) = (|| true, |_: &FrameSlot| {}, || true, |_: bool| {});
        let link = Arc::new(MotionLink::default());
        let mut gate = Gating {
            camera: "front",
            gate: CameraGate::new(settings),
            link: link.clone(),
            gating: &gating,
            held: &held,
            settled: &settled,
            motion: &motion,
        };
        let mut watcher = link.watch();
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        // A bright square that moves 8 px a frame on a grey picture.
        let mut frame = |i: u32| {
            still_frame(&mut slot, f64::from(i) * 0.2);
            let pixels = slot.prepare(64, 48, PixelFormat::Rgb8).expect("slot");
            for y in 10..30 {
                let x = 8 * i as usize;
                pixels[(y * 64 + x) * 3..(y * 64 + x + 16) * 3].fill(230);
            }
            gate.passes(&slot)
        };
        assert!(frame(0), "learning");
        assert!(frame(1), "the square moved");
        let seen = watcher.borrow_and_update().clone();
        assert_eq!((seen.state, seen.gated, seen.regions.is_empty()), (MotionState::Moving, false, false));
        let whole = Polygon::new(&[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]).expect("polygon");
        link.set_masks(vec![whole]);
        assert!(frame(2), "the frame after motion");
        assert!(!frame(3), "masked: no motion, held");
        let seen = watcher.borrow_and_update().clone();
        assert_eq!((seen.state, seen.gated, seen.regions.len()), (MotionState::Still, true, 0));
    }
}
