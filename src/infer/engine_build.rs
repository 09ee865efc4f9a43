//! Engines acquired while the daemon serves: the thread that builds (or fetches) the engines the
//! workers wait for, checks each against its model, and hands it over.
//!
//! Owns: [`EngineBuilds`], one `engine-build` thread that runs each pending model's
//! [`EngineChain`] in turn (one build at a time: on a Jetson two builds double the RAM), with a
//! [`Vet`] that compares the new engine with the model's CPU reference ([`check_engine`], on
//! recent frames of the model's cameras and the bundled sample pictures, `super::agreement`)
//! before the chain caches it, then offers it to the model's [`Handover`] (the workers swap at
//! their next frame); the status of every pending model ([`ModelBuildReport`]: building, waiting,
//! checking, ready, refused, failed, stopped; the phase and percent; which engine serves) that
//! telemetry, Home Assistant, the page and `/metrics` show; stopping promptly on shutdown. Must
//! not: serve frames, touch the workers' sessions, or block the caller (everything runs on its
//! own thread; the status is a snapshot).
//!
//! [`Vet`]: crate::backend::engine::Vet

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::agreement::{compare_detectors, Agreement, Verdict};
use super::per_track::kind::PerTrackKind;
use crate::backend::engine::{EngineChain, EngineError, Progress, ProgressReporter};
use crate::backend::handover::Handover;
use crate::backend::Backend;
use crate::config::{LimitsConfig, OnDisagreement};
use crate::decode::DecodeParams;
use crate::detection::Labels;
use crate::frame::{FrameCopy, FrameSlot, HeapMemory};
use crate::sys::lock::lock;

/// Sample pictures added to a model's recent frames for its check, at most.
const MAX_SAMPLES: usize = 8;

/// What a model's answers are, for its check.
#[derive(Clone)]
pub enum CheckSubject {
    /// Boxes, decoded with `params` (the threshold users run with), named by `labels`.
    Detector { params: DecodeParams, labels: Arc<Labels> },
    /// A per-track model's answers, one per crop: its kind compares them.
    PerTrack(Arc<dyn PerTrackKind>),
}

/// How engines are checked: `engine.min_agreement`, `engine.on_disagreement`, and the sample
/// pictures (with the limits they are decoded within).
#[derive(Debug, Clone)]
pub struct CheckPolicy {
    pub min_agreement: f64,
    pub on_disagreement: OnDisagreement,
    pub samples: PathBuf,
    pub limits: LimitsConfig,
}

/// A model the CPU serves until its engine is there.
pub struct PendingModel {
    /// `model` or `models.<name>`.
    pub name: String,
    pub chain: Box<EngineChain>,
    /// Why the cache had no engine.
    pub reason: String,
    /// The CPU backend that serves meanwhile: the check's reference.
    pub cpu: Arc<dyn Backend>,
    pub handover: Arc<Handover>,
    pub subject: CheckSubject,
}

/// Where a pending model is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildState {
    /// Queued behind another model's build, or building.
    Building,
    /// Another process or device builds this engine; it is looked for again until it appears.
    Waiting,
    /// Built or fetched, compared with the CPU reference.
    Checking,
    /// Handed over: the workers run it from their next frame on.
    Ready,
    /// It disagreed with its model (`engine.on_disagreement = "refuse"`): the CPU keeps serving.
    Refused,
    /// The build failed: the CPU keeps serving.
    Failed,
    /// The daemon stopped during the build.
    Stopped,
}

impl BuildState {
    /// Telemetry's and the metrics' name of it.
    pub fn name(self) -> &'static str {
        match self {
            BuildState::Building => "building",
            BuildState::Waiting => "waiting",
            BuildState::Checking => "checking",
            BuildState::Ready => "ready",
            BuildState::Refused => "refused",
            BuildState::Failed => "failed",
            BuildState::Stopped => "stopped",
        }
    }
}

/// One pending model's state, as telemetry reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelBuildReport {
    pub model: String,
    pub status: BuildState,
    /// `cpu` until every worker runs the engine, then its kind (`tensorrt`; `stand-in` in tests).
    pub serving: &'static str,
    /// The build's progress line (as systemd's `STATUS=` shows it).
    pub progress: String,
    /// The builder's outermost phase and how far it is, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    /// Why the engine is built.
    pub reason: String,
    /// Seconds since the build of this model started (0 while queued).
    pub elapsed_s: f64,
    /// The check's figures, once it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agreement: Option<Agreement>,
    /// Why it was refused or failed, or the warning it serves with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// A pending model's state and its hand-over (which says what serves).
struct Entry {
    report: ModelBuildReport,
    started: Option<Instant>,
    handover: Arc<Handover>,
    engine_kind: &'static str,
}

/// What the thread and the readers share.
#[derive(Default)]
struct Status {
    entries: Mutex<Vec<Entry>>,
}

impl Status {
    fn update(&self, index: usize, change: impl FnOnce(&mut ModelBuildReport)) {
        if let Some(entry) = lock(&self.entries).get_mut(index) {
            change(&mut entry.report);
        }
    }

    fn start(&self, index: usize) {
        if let Some(entry) = lock(&self.entries).get_mut(index) {
            entry.started = Some(Instant::now());
        }
    }
}

/// The engine-build thread and the status of the models it serves (see the module doc).
pub struct EngineBuilds {
    thread: Option<JoinHandle<()>>,
    cancel: Arc<AtomicBool>,
    status: Arc<Status>,
}

impl EngineBuilds {
    /// Starts the thread on `models`, in order.
    pub fn start(models: Vec<PendingModel>, policy: CheckPolicy) -> std::io::Result<EngineBuilds> {
        let status = Arc::new(Status::default());
        *lock(&status.entries) = models
            .iter()
            .map(|model| Entry {
                report: ModelBuildReport {
                    model: model.name.clone(),
                    status: BuildState::Building,
                    serving: "cpu",
                    progress: "queued".into(),
                    phase: None,
                    percent: None,
                    reason: model.reason.clone(),
                    elapsed_s: 0.0,
                    agreement: None,
                    problem: None,
                },
                started: None,
                handover: model.handover.clone(),
                engine_kind: model.chain.toolchain().target().kind,
            })
            .collect();
        let cancel = Arc::new(AtomicBool::new(false));
        let (thread_status, thread_cancel) = (status.clone(), cancel.clone());
        let thread = std::thread::Builder::new()
            .name("engine-build".into())
            .spawn(move || run(models, &policy, &thread_status, &thread_cancel))?;
        Ok(EngineBuilds { thread: Some(thread), cancel, status })
    }

    /// Every pending model's state now.
    pub fn report(&self) -> Vec<ModelBuildReport> {
        lock(&self.status.entries)
            .iter()
            .map(|entry| {
                let mut report = entry.report.clone();
                if entry.handover.swapped() {
                    report.serving = entry.engine_kind;
                }
                if let (Some(started), BuildState::Building | BuildState::Waiting | BuildState::Checking) =
                    (entry.started, report.status)
                {
                    report.elapsed_s = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
                }
                report
            })
            .collect()
    }

    /// Cancels the build and waits for the thread up to `within`: a build that cannot be cancelled
    /// (TensorRT 8.x) is left to the end of the process, which writes nothing half (staging and
    /// atomic writes).
    pub fn stop(&mut self, within: Duration) {
        self.cancel.store(true, Ordering::SeqCst);
        let Some(thread) = self.thread.take() else { return };
        let until = Instant::now() + within;
        while !thread.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        if thread.is_finished() {
            let _ = thread.join();
        } else {
            log::warn!("the engine build did not stop within {} ms; the daemon stops without it", within.as_millis());
        }
    }
}

impl Drop for EngineBuilds {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
    }
}

/// The thread: each model's chain in turn, until done or cancelled.
fn run(models: Vec<PendingModel>, policy: &CheckPolicy, status: &Status, cancel: &AtomicBool) {
    for (index, model) in models.into_iter().enumerate() {
        if cancel.load(Ordering::SeqCst) {
            status.update(index, |report| report.status = BuildState::Stopped);
            continue;
        }
        status.start(index);
        let PendingModel { name, mut chain, reason: _, cpu, handover, subject } = model;
        let mut reporter = ProgressReporter::new(false);
        let mut progress = |event: Progress| {
            reporter.report(&event);
            let waiting = reporter.waiting_for().is_some();
            let line = reporter.line();
            let phase = reporter.phase().map(|(phase, percent)| (phase.to_owned(), (percent * 10.0).round() / 10.0));
            status.update(index, |report| {
                report.status = if waiting { BuildState::Waiting } else { BuildState::Building };
                report.progress = line;
                (report.phase, report.percent) = phase.unzip();
            });
        };
        let mut vet = |engine: &Arc<dyn Backend>| {
            status.update(index, |report| report.status = BuildState::Checking);
            let frames = check_frames(handover.recent_frames(), policy);
            let (outcome, agreement) = check_engine(&name, engine.as_ref(), cpu.as_ref(), &frames, &subject, policy);
            status.update(index, |report| {
                report.agreement = agreement;
                report.problem = outcome.as_ref().err().cloned().or_else(|| outcome.clone().ok().flatten());
            });
            outcome.map(drop)
        };
        let acquired = chain.acquire(&mut vet, &mut progress, cancel);
        // The check's reference goes now: the workers' CPU sessions are all that keeps it after.
        drop(cpu);
        match acquired {
            Ok(acquired) => {
                log::info!("{name}: {} is ready; the workers take it over at their next frame", acquired.origin);
                handover.offer(acquired.backend);
                status.update(index, |report| {
                    report.status = BuildState::Ready;
                    report.progress = acquired.origin.to_string();
                });
            }
            Err(EngineError::Cancelled) => status.update(index, |report| report.status = BuildState::Stopped),
            Err(EngineError::Refused(why)) => {
                log::error!("{name}: the new engine is refused, the CPU keeps serving: {why}");
                status.update(index, |report| {
                    report.status = BuildState::Refused;
                    report.problem = Some(why);
                });
            }
            Err(error) => {
                log::error!("{name}: the engine could not be built or fetched, the CPU keeps serving: {error}");
                status.update(index, |report| {
                    report.status = BuildState::Failed;
                    report.problem = Some(error.to_string());
                });
            }
        }
    }
}

/// The frames an engine is checked on: `recent` ones of its cameras, then the sample pictures
/// (at most [`MAX_SAMPLES`], each decoded within the limits; one that cannot be is left out).
pub fn check_frames(mut recent: Vec<FrameCopy>, policy: &CheckPolicy) -> Vec<FrameCopy> {
    recent.extend(sample_frames(&policy.samples, &policy.limits, MAX_SAMPLES));
    recent
}

/// The first `max` pictures at `path` (a file or a directory), each decoded within `limits`; one
/// that cannot be is left out (a debug line says why).
pub fn sample_frames(path: &Path, limits: &LimitsConfig, max: usize) -> Vec<FrameCopy> {
    let Ok(files) = crate::source::images::list_images(path) else { return Vec::new() };
    let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
    files
        .iter()
        .take(max)
        .filter_map(|file| match crate::source::image_decode::decode_file(file, limits, &mut slot) {
            Ok(_) => Some(FrameCopy::of(&slot)),
            Err(error) => {
                log::debug!("{}: not a sample for the engine check: {error}", file.display());
                None
            }
        })
        .collect()
}

/// The check of `name`'s new `engine` against its CPU `reference` on `frames`: `Ok(None)` when it
/// agrees, `Ok(Some(warning))` when it serves with a warning (it disagrees and
/// `engine.on_disagreement = "warn"`, or nothing on the frames could be compared), `Err(why)` when
/// it is refused; with the figures when the comparison ran. A comparison that cannot run refuses
/// the engine: one that cannot run the check's frames cannot be trusted with the cameras'.
pub fn check_engine(
    name: &str,
    engine: &dyn Backend,
    reference: &dyn Backend,
    frames: &[FrameCopy],
    subject: &CheckSubject,
    policy: &CheckPolicy,
) -> (Result<Option<String>, String>, Option<Agreement>) {
    let started = Instant::now();
    let compared = match subject {
        CheckSubject::Detector { params, labels } => compare_detectors(reference, engine, frames, params, labels),
        CheckSubject::PerTrack(kind) => kind.compare(reference, engine, frames),
    };
    let agreement = match compared {
        Ok(agreement) => agreement,
        Err(error) => return (Err(format!("the check against the CPU could not run: {error}")), None),
    };
    log::info!(
        "{name}: the new engine against the CPU: {} ({} ms)",
        agreement.summary(),
        started.elapsed().as_millis()
    );
    let outcome = match (agreement.verdict(policy.min_agreement), policy.on_disagreement) {
        (Verdict::Agrees, _) => Ok(None),
        (Verdict::Inconclusive, _) => {
            let note = format!("nothing to compare: neither engine found an object on {} frame(s)", agreement.frames);
            log::warn!("{name}: {note}; the engine serves unchecked");
            Ok(Some(note))
        }
        (Verdict::Disagrees(why), OnDisagreement::Refuse) => Err(why),
        (Verdict::Disagrees(why), OnDisagreement::Warn) => {
            log::warn!("{name}: the new engine disagrees with the CPU ({why}); it serves as engine.on_disagreement = \"warn\" says");
            Ok(Some(format!("disagrees with the CPU: {why}")))
        }
    };
    (outcome, Some(agreement))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_pictures_are_decoded_and_what_is_not_a_picture_is_left_out() {
        let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samples");
        let limits = crate::config::Config::embedded_default().expect("default").limits;
        let frames = sample_frames(&samples, &limits, MAX_SAMPLES);
        assert_eq!(frames.len(), 5, "the bundled pictures, not their NOTICE.md");
        assert!(frames.iter().all(|frame| frame.data.len() == (frame.width * frame.height * 3) as usize));
        assert_eq!(sample_frames(&samples, &limits, 2).len(), 2);
        assert!(sample_frames(Path::new("/nonexistent"), &limits, MAX_SAMPLES).is_empty());
    }
}
