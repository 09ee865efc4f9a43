//! The systemd watchdog against real camera pipelines: [`CameraPipeline`] source threads with real
//! or test sources and an inference worker on a test backend, the daemon's [`Liveness`] and [`WatchdogKeeper`], and a real Unix
//! datagram socket standing in for systemd.
//!
//! A camera that is offline (a V4L2 device that does not exist, reopened with backoff) keeps
//! `WATCHDOG=1` flowing and shows its state; an inference worker stuck on a frame, or a source thread
//! stuck inside a call, stops the keep-alives, and they resume once it moves again. The allowed
//! silence is [`Pace::thread_silence`]; waits are [`Pace::daemon_wait`] failure guards.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use jetson_detectd::backend::{Backend, BackendError, BackendInfo, BackendTimings, InferenceSession};
use jetson_detectd::config::{CameraConfig, ClassScores, Config, DecoderKind};
use jetson_detectd::controls::Controls;
use jetson_detectd::decode::DecodeParams;
use jetson_detectd::detection::Detection;
use jetson_detectd::frame::{CaptureMode, FrameSlot, PixelFormat};
use jetson_detectd::frame::{FrameTimings, Stage};
use jetson_detectd::infer::camera::{CameraPipeline, PipelineShared};
use jetson_detectd::infer::per_track::PerTrackSessions;
use jetson_detectd::infer::scheduler::{SchedulePlan, Scheduler};
use jetson_detectd::infer::step::{FrameSink, PipelineError};
use jetson_detectd::model::ModelOutputs;
use jetson_detectd::preprocess::PreprocessSpec;
use jetson_detectd::service::notify::{Liveness, WatchdogKeeper, WatchdogTick};
use jetson_detectd::service::telemetry::{status_line, CameraStats};
use jetson_detectd::source::{Capture, FrameSource, SourceError, SourceState};

use crate::notify::FakeSystemd;
use crate::pace::Pace;

/// A door a test thread can shut on a pipeline thread: the next call that passes it blocks until
/// the test opens it again.
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    shut: bool,
    /// A thread is waiting at the shut gate.
    blocked: bool,
    passed: u64,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate { state: Mutex::new(GateState::default()), changed: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_shut(&self, shut: bool) {
        self.lock().shut = shut;
        self.changed.notify_all();
    }

    /// Called by the pipeline thread: blocks while the gate is shut.
    fn pass(&self) {
        let mut state = self.lock();
        state.passed += 1;
        state.blocked = state.shut;
        self.changed.notify_all();
        let mut state = self.changed.wait_while(state, |s| s.shut).unwrap_or_else(PoisonError::into_inner);
        state.blocked = false;
    }

    /// Waits until `condition` holds; panics after [`Pace::daemon_wait`] saying `what`.
    fn wait_for(&self, what: &str, condition: impl Fn(&GateState) -> bool) {
        let (state, timeout) = self
            .changed
            .wait_timeout_while(self.lock(), Pace::measured().daemon_wait(), |s| !condition(s))
            .unwrap_or_else(PoisonError::into_inner);
        assert!(!timeout.timed_out(), "timed out waiting for {what} ({} passed)", state.passed);
    }
}

/// A backend that rejects every frame (the pipeline skips it as a bad frame), after passing its gate.
struct GatedBackend {
    spec: PreprocessSpec,
    gate: Arc<Gate>,
}

struct GatedSession {
    gate: Arc<Gate>,
}

impl Backend for GatedBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo { kind: "cpu", model: "gated test backend".into(), detail: String::new() }
    }
    fn spec(&self) -> &PreprocessSpec {
        &self.spec
    }
    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
        Ok(Box::new(GatedSession { gate: self.gate.clone() }))
    }
}

impl InferenceSession for GatedSession {
    fn run(&mut self, _slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        self.gate.pass();
        Err(BackendError::Preprocess("the gated test backend rejects every frame".into()))
    }
}

/// A source that delivers a small grey frame after passing its gate, until the stop flag is set.
struct GatedSource {
    gate: Arc<Gate>,
    stop: Arc<AtomicBool>,
}

impl FrameSource for GatedSource {
    fn describe(&self) -> String {
        "gated test source".into()
    }
    fn capture_mode(&self) -> CaptureMode {
        CaptureMode::Generate
    }
    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<Capture, SourceError> {
        if self.stop.load(Ordering::SeqCst) {
            return Ok(Capture::End);
        }
        self.gate.pass();
        slot.prepare(8, 8, PixelFormat::Rgb8)
            .map_err(|message| SourceError::Read { source_name: self.describe(), message })?
            .fill(128);
        slot.meta_mut().captured_at = SystemTime::now();
        Ok(Capture::Frame)
    }
}

struct NullSink;

impl FrameSink for NullSink {
    fn frame(&self, _: &str, _: &FrameSlot, _: &[Detection], _: &FrameTimings, _: &mut PerTrackSessions) {}
    fn camera_ended(&self, _: &str, _: &Result<(), PipelineError>) {}
    fn worker_failed(&self, _: &str, _: &PipelineError) {}
}

/// One camera and the parts a daemon would give it, with a keeper on a fake systemd.
struct Rig {
    systemd: FakeSystemd,
    keeper: WatchdogKeeper,
    shared: PipelineShared,
    backend_gate: Arc<Gate>,
}

impl Rig {
    fn new() -> Rig {
        let silence = Pace::measured().thread_silence();
        let (systemd, notifier) = FakeSystemd::start(Some(silence * 2));
        let liveness = Liveness::new();
        let keeper = WatchdogKeeper::new(Arc::new(notifier), liveness.clone(), silence);
        let config = Config::embedded_default().expect("embedded default config");
        let backend_gate = Gate::new();
        let backend = Arc::new(GatedBackend { spec: config.model.input.clone(), gate: backend_gate.clone() });
        let (sink, stop) = (Arc::new(NullSink), Arc::new(AtomicBool::new(false)));
        let plan = SchedulePlan { workers: 1, max_batch: 1, batch_timeout: Duration::ZERO };
        let scheduler = Scheduler::start(backend, params(), plan, sink.clone(), stop.clone(), &liveness)
            .expect("start the inference worker");
        let controls = Arc::new(Controls::new(&config));
        let shared =
            PipelineShared { slots: 2, limits: config.limits, scheduler, sink, stop, liveness, controls, motion: None };
        Rig { systemd, keeper, shared, backend_gate }
    }

    /// Ticks the keeper every quarter of the allowed silence until a tick is what `wanted` accepts;
    /// returns that tick.
    fn tick_until(&mut self, what: &str, wanted: impl Fn(&WatchdogTick) -> bool) -> WatchdogTick {
        let deadline = Instant::now() + Pace::measured().daemon_wait();
        loop {
            let tick = self.keeper.tick();
            if wanted(&tick) {
                return tick;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; last tick: {tick:?}");
            std::thread::sleep(Pace::measured().thread_silence() / 4);
        }
    }

    fn stop(self, pipeline: CameraPipeline) {
        self.shared.stop.store(true, Ordering::SeqCst);
        pipeline.join().expect("the source thread ends cleanly");
        self.shared.scheduler.join().expect("the inference worker ends cleanly");
    }
}

fn camera(name: &str, fps: f32, source: &str) -> CameraConfig {
    let text = format!("name = {name:?}\nfps = {fps:?}\nsource = {source}\n");
    toml::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn params() -> DecodeParams {
    DecodeParams {
        kind: DecoderKind::Ssd,
        score_threshold: 0.5,
        nms_iou: 0.5,
        max_detections: 10,
        allowed_classes: None,
        class_scores: ClassScores::Sigmoid,
        label_count: None,
    }
}

#[test]
fn an_offline_camera_keeps_the_keep_alives_flowing_and_shows_its_state() {
    let mut rig = Rig::new();
    let silence = Pace::measured().thread_silence();
    let device = "/dev/video-jetson-detectd-test-offline";
    let gate = camera(
        "gate",
        0.0,
        &format!("{{ kind = \"v4l2\", device = {device:?}, width = 640, height = 480, format = \"mjpeg\" }}"),
    );
    let started = SystemTime::now();
    let pipeline = CameraPipeline::start(&gate, &rig.shared).expect("a missing camera is retried");

    // Offline for more than twice the allowed silence: every check keeps systemd happy.
    let until = Instant::now() + silence * 2 + silence / 2;
    let mut ticks = 0;
    while Instant::now() < until {
        assert_eq!(rig.keeper.tick(), WatchdogTick::KeptAlive, "an offline camera is not a hung daemon");
        ticks += 1;
        std::thread::sleep(silence / 4);
    }
    assert_eq!(rig.systemd.received(), vec!["WATCHDOG=1\n"; ticks]);

    let report = pipeline.source_report();
    match &report.state {
        SourceState::Reconnecting { attempt, last_error } => {
            assert!(*attempt >= 2, "the source kept retrying: attempt {attempt}");
            assert!(last_error.contains("No such file"), "{last_error}");
        }
        other => panic!("the camera should be reconnecting, not {other:?}"),
    }
    assert!(report.since <= started + Duration::from_secs(1), "offline since it was opened: {report:?}");
    let line = status_line(&[CameraStats::new("gate").snapshot().with_source(report)], &[("mqtt", true)]);
    assert!(line.contains("gate: reconnecting for ") && line.contains("No such file"), "{line}");
    rig.stop(pipeline);
}

#[test]
fn an_inference_worker_stuck_on_a_frame_stops_the_keep_alives_until_it_finishes() {
    let mut rig = Rig::new();
    let front = camera("front", 20.0, "{ kind = \"synthetic\", width = 64, height = 48 }");
    let pipeline = CameraPipeline::start(&front, &rig.shared).expect("start");
    let backend = rig.backend_gate.clone();
    backend.wait_for("two frames through inference", |s| s.passed >= 2);
    assert_eq!(rig.keeper.tick(), WatchdogTick::KeptAlive);
    rig.systemd.received();

    backend.set_shut(true);
    backend.wait_for("inference to block on a frame", |s| s.blocked);
    let tick = rig.tick_until("the keep-alives to stop", |tick| matches!(tick, WatchdogTick::Withheld(_)));
    let WatchdogTick::Withheld(stalls) = tick else { unreachable!() };
    assert_eq!(stalls.len(), 1, "only the inference worker is stuck; the source keeps looping: {stalls:?}");
    assert_eq!(stalls[0].name, "inference worker 0");
    assert_eq!(stalls[0].stage, Some(Stage::Infer));
    assert!(!stalls[0].abandoned && stalls[0].silent_for > Pace::measured().thread_silence(), "{stalls:?}");
    // Keep-alives went out while the frame was merely slow; none while it counts as hung.
    rig.systemd.received();
    assert!(matches!(rig.keeper.tick(), WatchdogTick::Withheld(_)), "still stuck");
    assert!(rig.systemd.received().is_empty(), "no WATCHDOG=1 while inference hangs");

    backend.set_shut(false);
    rig.tick_until("the keep-alives to resume", |tick| *tick == WatchdogTick::KeptAlive);
    assert_eq!(rig.systemd.received().last().map(String::as_str), Some("WATCHDOG=1\n"));
    rig.stop(pipeline);
}

#[test]
fn a_source_stuck_inside_a_call_stops_the_keep_alives_while_idle_inference_does_not() {
    let mut rig = Rig::new();
    let source_gate = Gate::new();
    let source = GatedSource { gate: source_gate.clone(), stop: rig.shared.stop.clone() };
    let door = camera("door", 20.0, "{ kind = \"synthetic\" }");
    let pipeline = CameraPipeline::start_with_source(&door, Box::new(source), &rig.shared).expect("start");
    rig.backend_gate.wait_for("two frames through inference", |s| s.passed >= 2);
    assert_eq!(rig.keeper.tick(), WatchdogTick::KeptAlive);

    source_gate.set_shut(true);
    source_gate.wait_for("the source to block inside next_frame", |s| s.blocked);
    let tick = rig.tick_until("the keep-alives to stop", |tick| matches!(tick, WatchdogTick::Withheld(_)));
    let WatchdogTick::Withheld(stalls) = tick else { unreachable!() };
    let names: Vec<&str> = stalls.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["camera door: source"], "the inference worker, idle without frames, is alive");
    assert_eq!(stalls[0].stage, Some(Stage::Source));

    source_gate.set_shut(false);
    rig.tick_until("the keep-alives to resume", |tick| *tick == WatchdogTick::KeptAlive);
    rig.stop(pipeline);
}
