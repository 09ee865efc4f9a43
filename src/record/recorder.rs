//! The [`Recorder`]: for every recording camera a planner (`plan`: which events get a clip, named
//! as the first event asks for it), a [`RecordTap`] for the camera's source side and a recorder
//! thread (`camera`: pre-roll, clip file with its metadata track of each processed frame's boxes,
//! encoder for raw frames); the one [`ClipIndex`] of the record directory, retention within
//! `[record]`'s byte and age budget (`retention`: the clips being written count), pausing while the
//! disk is too full, and each camera's run-time `record` switch (`crate::controls`: off, its events
//! start no clip). As an outlet it reports its figures and finishes its clips at stop. Must not:
//! slow detection (a camera records on its own thread, fed through bounded queues that drop and
//! count; the planner does no I/O).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::config::record::EncoderChoice;
use crate::config::Config;
use crate::controls::{CameraControls, Controls, Switch};
use crate::detection::Labels;
use crate::publish::clips::ClipNaming;
use crate::publish::figures::OutletFigures;
use crate::publish::object_event::{ClipRef, ObjectEvent};
use crate::publish::outlet::{FrameResult, Outlet, Stop, Stopping};
use crate::source::tap::RecordTap;
use crate::sys::lock::lock;

use super::boxes::BoxFrame;
use super::camera::{CameraContext, CameraRecordStats, CameraThread, Pause};
use super::clip_ref::clip_ref;
use super::dir;
use super::error::RecordError;
use super::figures;
use super::index::ClipIndex;
use super::plan::{ClipPlanner, Command, EventFacts};
use super::report::{CameraRecordReport, RecordReport};
use super::retention::Retention;

/// Commands a camera's recorder thread may have waiting (a few per event; it reads them at least
/// every 200 ms).
const COMMAND_QUEUE: usize = 256;
/// Processed frames' boxes a camera's recorder thread may have waiting: two seconds of 30 fps.
const BOX_QUEUE: usize = 64;
/// How often the disk's free space is looked at.
const ROOM_CHECK: Duration = Duration::from_secs(2);
/// How often retention runs besides after every finished clip.
const RETENTION_PERIOD: Duration = Duration::from_secs(60);
/// Free space needed beyond `min_free_mib` before a paused recorder resumes, so that it does not
/// pause and resume with every clip.
const RESUME_MARGIN: u64 = 32 << 20;
/// Longest wait at shutdown for the cameras' recorder threads to write what their queues hold.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// One recording camera, as the recorder keeps it.
struct CameraEntry {
    name: String,
    /// Its run-time switches: with `record` off, its events start no clip.
    switches: Option<Arc<CameraControls>>,
    planner: Mutex<ClipPlanner>,
    commands: SyncSender<Command>,
    /// Each processed frame's boxes, for the clips' metadata track.
    boxes: SyncSender<BoxFrame>,
    /// Taken by the camera's source side at its start.
    tap: Mutex<Option<RecordTap>>,
    stats: Arc<CameraRecordStats>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The recorder of every recording camera.
pub struct Recorder {
    root: PathBuf,
    /// Names the events' labels for the trigger.
    labels: Arc<Labels>,
    index: Arc<ClipIndex>,
    pause: Arc<Pause>,
    cameras: Vec<CameraEntry>,
    retention: Arc<Retention>,
    stop: Arc<AtomicBool>,
    janitor: Mutex<Option<JoinHandle<()>>>,
    /// The recording cameras' folders, this process's for as long as it records.
    _folders: Vec<(String, dir::FolderLock)>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("root", &self.root).field("cameras", &self.cameras.len()).finish()
    }
}

impl Recorder {
    /// Creates the record directory, rebuilds the index from it (recovering clips cut short) and
    /// starts a recorder thread per recording camera and the retention thread; `None` when no
    /// camera records.
    /// `controls`: the run-time switches, whose `record` turns a camera's new clips off and on.
    pub fn start(
        config: &Config,
        labels: Arc<Labels>,
        controls: Arc<Controls>,
    ) -> Result<Option<Arc<Recorder>>, RecordError> {
        if !config.records() {
            return Ok(None);
        }
        let root = config.record.dir.clone();
        std::fs::create_dir_all(&root).map_err(|source| RecordError::Dir { path: root.clone(), source })?;
        // Each recording camera's folder is this process's before anything is read there.
        let mut folders = Vec::new();
        for camera in config.cameras.iter().filter(|camera| config.recording(camera).is_some()) {
            let lock = dir::FolderLock::take(&root.join(&camera.name))
                .map_err(|source| RecordError::Shared { camera: camera.name.clone(), source })?;
            folders.push((camera.name.clone(), lock));
        }
        let ours: Vec<&str> = folders.iter().map(|(camera, _)| camera.as_str()).collect();
        let (index, rebuilt) = ClipIndex::rebuild(&root, &ours);
        log::info!(
            "record: {} clip(s) in {} ({} recovered after being cut short, {} removed)",
            rebuilt.clips,
            root.display(),
            rebuilt.recovered,
            rebuilt.removed
        );
        let index = Arc::new(index);
        let retention = Arc::new(Retention::new(
            root.clone(),
            index.clone(),
            (config.record.max_gib * (1u64 << 30) as f64) as u64,
            (config.record.max_days > 0).then(|| Duration::from_secs(u64::from(config.record.max_days) * 86_400)),
        ));
        let pause = Arc::new(Pause::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (finished, nudges) = sync_channel(1);
        let mut cameras = Vec::new();
        for camera in &config.cameras {
            let Some(recording) = config.recording(camera) else { continue };
            let planner = ClipPlanner::new(&camera.name, recording.clone());
            let span = planner.preroll_span();
            let frame_interval = (recording.encoder.kind != EncoderChoice::None)
                .then(|| Duration::from_secs_f32(1.0 / recording.encoder.fps));
            let (tap, items) = RecordTap::new(frame_interval);
            let (commands, command_rx) = sync_channel(COMMAND_QUEUE);
            let (boxes, boxes_rx) = sync_channel(BOX_QUEUE);
            let stats = Arc::new(CameraRecordStats::new(tap.stats().clone()));
            let context = CameraContext {
                camera: camera.name.clone(),
                recording,
                span,
                root: root.clone(),
                index: index.clone(),
                retention: retention.clone(),
                pause: pause.clone(),
                stats: stats.clone(),
                finished: finished.clone(),
            };
            let thread_stop = stop.clone();
            let thread = std::thread::Builder::new()
                .name(format!("rec-{}", camera.name).chars().take(15).collect())
                .spawn(move || CameraThread::new(context).run(items, command_rx, boxes_rx, &thread_stop))
                .map_err(RecordError::Thread)?;
            cameras.push(CameraEntry {
                name: camera.name.clone(),
                switches: controls.camera(&camera.name).cloned(),
                planner: Mutex::new(planner),
                commands,
                boxes,
                tap: Mutex::new(Some(tap)),
                stats,
                thread: Mutex::new(Some(thread)),
            });
        }
        let budget = Budget { root: root.clone(), min_free: u64::from(config.record.min_free_mib) << 20 };
        let janitor = {
            let (retention, pause, stop) = (retention.clone(), pause.clone(), stop.clone());
            std::thread::Builder::new()
                .name("rec-retention".into())
                .spawn(move || budget.keep(&retention, &pause, &nudges, &stop))
                .map_err(RecordError::Thread)?
        };
        Ok(Some(Arc::new(Recorder {
            root,
            labels,
            index,
            pause,
            cameras,
            retention,
            stop,
            janitor: Mutex::new(Some(janitor)),
            _folders: folders,
        })))
    }

    fn camera(&self, name: &str) -> Option<&CameraEntry> {
        self.cameras.iter().find(|camera| camera.name == name)
    }

    /// The tap `camera`'s source side hands its stream or frames over with (once; `None` for a
    /// camera that does not record).
    pub fn take_tap(&self, camera: &str) -> Option<RecordTap> {
        lock(&self.camera(camera)?.tap).take()
    }

    /// An event of `camera`: returns the clip it belongs to, if any, and tells the camera's
    /// recorder what to record. Never waits.
    pub fn event(&self, camera: &str, event: &EventFacts<'_>) -> Option<ClipRef> {
        let entry = self.camera(camera)?;
        let mut commands = Vec::new();
        let clip = lock(&entry.planner).event(event, self.can_record(entry), &mut commands);
        self.send(entry, commands);
        clip.map(|path| clip_ref(&path))
    }

    /// A processed frame of `camera`, captured at `at`: events waiting for `min_event_s` may
    /// start their clips. Never waits.
    pub fn frame_at(&self, camera: &str, at: SystemTime) {
        let Some(entry) = self.camera(camera) else { return };
        let mut commands = Vec::new();
        lock(&entry.planner).frame(at, self.can_record(entry), &mut commands);
        self.send(entry, commands);
    }

    /// `camera` lost its stream: its clip being written ends now. Never waits.
    pub fn camera_offline(&self, camera: &str) {
        let Some(entry) = self.camera(camera) else { return };
        let mut commands = Vec::new();
        lock(&entry.planner).offline(&mut commands);
        self.send(entry, commands);
    }

    /// Whether a new clip of `entry` could start now: recording not paused, switched on, and a
    /// keyframe in the camera's pre-roll.
    fn can_record(&self, entry: &CameraEntry) -> bool {
        let switched_on = entry.switches.as_ref().is_none_or(|switches| switches.get(Switch::Record));
        !self.pause.is_paused() && switched_on && entry.stats.ready.load(Ordering::Relaxed)
    }

    fn send(&self, entry: &CameraEntry, commands: Vec<Command>) {
        for command in commands {
            if let Err(TrySendError::Full(_)) = entry.commands.try_send(command) {
                entry.stats.failed.fetch_add(1, Ordering::Relaxed);
                log::error!("camera {}: its recorder is not keeping up; a clip command was dropped", entry.name);
            }
        }
    }

    /// The record directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn index(&self) -> &ClipIndex {
        &self.index
    }

    /// Whether `camera` records.
    pub fn records(&self, camera: &str) -> bool {
        self.camera(camera).is_some()
    }

    /// The recorder's figures: telemetry's `outlets.record`, `/metrics`, the page.
    pub fn report(&self) -> RecordReport {
        let totals = self.index.totals();
        let cameras = self
            .cameras
            .iter()
            .map(|entry| {
                let stats = &entry.stats;
                let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
                let (clips, bytes) = totals.get(&entry.name).copied().unwrap_or_default();
                let report = CameraRecordReport {
                    feed: stats.feed(),
                    recording: stats.recording.load(Ordering::Relaxed),
                    clips,
                    bytes,
                    written: load(&stats.clips),
                    written_bytes: load(&stats.bytes),
                    preroll_bytes: load(&stats.preroll_bytes),
                    preroll_cut: load(&stats.preroll_cuts),
                    dropped: load(&stats.tap.dropped)
                        + load(&stats.preroll_dropped)
                        + load(&stats.encoder_dropped)
                        + load(&stats.resync_skipped)
                        + load(&stats.boxes_dropped),
                    failed: load(&stats.failed) + load(&stats.malformed),
                };
                (entry.name.clone(), report)
            })
            .collect();
        RecordReport {
            dir: self.root.display().to_string(),
            paused: self.pause.is_paused(),
            paused_reason: self.pause.reason(),
            clips: totals.values().map(|(clips, _)| clips).sum(),
            bytes: totals.values().map(|(_, bytes)| bytes).sum(),
            max_bytes: self.retention.max_bytes(),
            removed: self.retention.removed(),
            cameras,
        }
    }

    /// Finishes every clip being written and stops the threads (after the cameras stopped: a
    /// camera's thread first writes what its queue still holds, for at most [`STOP_GRACE`]).
    /// Blocks: the daemon calls it off its async threads ([`Outlet::stop`]).
    pub fn finish(&self) {
        for entry in &self.cameras {
            lock(&entry.tap).take();
        }
        let deadline = Instant::now() + STOP_GRACE;
        let finished =
            || self.cameras.iter().all(|entry| lock(&entry.thread).as_ref().is_none_or(JoinHandle::is_finished));
        while !finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, Ordering::SeqCst);
        for entry in &self.cameras {
            if let Some(thread) = lock(&entry.thread).take() {
                if thread.join().is_err() {
                    log::error!("camera {}: its recorder thread panicked", entry.name);
                }
            }
        }
        if let Some(thread) = lock(&self.janitor).take() {
            let _ = thread.join();
        }
    }
}

/// The recorder as an outlet: each processed frame lets events waiting for `min_event_s` start
/// their clips and hands its boxes to the camera's recorder thread (the clips' metadata track); a
/// camera that goes offline finishes its clip at once; its figures are its report; stopping it
/// finishes the clips being written.
impl Outlet for Recorder {
    fn name(&self) -> &str {
        "record"
    }

    fn frame(&self, frame: &FrameResult<'_>) {
        self.frame_at(frame.camera, frame.slot.meta().captured_at);
        if let Some(entry) = self.camera(frame.camera) {
            if let Err(TrySendError::Full(_)) = entry.boxes.try_send(BoxFrame::from_frame(frame, &self.labels)) {
                entry.stats.boxes_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn camera_offline(&self, camera: &str) {
        Recorder::camera_offline(self, camera);
    }

    fn figures(&self) -> Option<OutletFigures> {
        Some(figures::figures(&self.report()))
    }

    /// Finishes the clips being written (their post-roll cut at the camera's last frame), off the
    /// async threads; at most [`STOP_GRACE`] for the queues, then the threads are joined.
    fn stop(self: Arc<Self>, _why: Stop) -> Stopping {
        Box::pin(async move {
            if let Err(error) = tokio::task::spawn_blocking(move || self.finish()).await {
                log::error!("record: finishing the clips failed: {error}");
            }
        })
    }
}

/// The recorder names each event's clip (and tells the camera's recorder thread what to record)
/// before the outlets see the event.
impl ClipNaming for Recorder {
    fn clip_of(&self, camera: &str, event: &ObjectEvent) -> Option<ClipRef> {
        let label = self.labels.name(event.class_id);
        let facts = EventFacts {
            kind: event.kind,
            track: event.track_id,
            label: &label,
            zones: &event.zones,
            first_seen: event.first_seen,
            last_seen: event.last_seen,
        };
        self.event(camera, &facts)
    }
}

/// The retention thread's work: the age limit (and the budget again) after every clip and
/// periodically, and the free-space watch.
struct Budget {
    root: PathBuf,
    min_free: u64,
}

impl Budget {
    fn keep(self, retention: &Retention, pause: &Pause, nudges: &Receiver<()>, stop: &AtomicBool) {
        let mut last_retention: Option<Instant> = None;
        while !stop.load(Ordering::Relaxed) {
            let nudged = match nudges.recv_timeout(ROOM_CHECK) {
                Ok(()) => true,
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            if nudged || last_retention.is_none_or(|at| at.elapsed() >= RETENTION_PERIOD) {
                last_retention = Some(Instant::now());
                retention.run(SystemTime::now());
            }
            self.watch_room(pause);
        }
    }

    fn watch_room(&self, pause: &Pause) {
        let Ok(room) = crate::sys::disk::room(&self.root) else { return };
        let mib = |bytes: u64| bytes >> 20;
        if room.available < self.min_free.max(1) {
            pause.pause(&format!(
                "only {} MiB free on the disk of {} (record.min_free_mib = {})",
                mib(room.available),
                self.root.display(),
                mib(self.min_free)
            ));
        } else if pause.is_paused() && room.available >= self.min_free + RESUME_MARGIN {
            pause.resume(&format!("{} MiB free on the disk of {}", mib(room.available), self.root.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::config::ConfigOrigin;
    use crate::track::events::EventKind;

    fn try_recorder(dir: &Path) -> (Result<Option<Arc<Recorder>>, RecordError>, Arc<Controls>) {
        let text = format!(
            "[record]\nenabled = true\ndir = {:?}\n[[camera]]\nname = \"gate\"\nsource = {{ kind = \"synthetic\" }}\n",
            dir.display().to_string()
        );
        let config = Config::from_toml(&text, ConfigOrigin::File("test.toml".into()), Path::new("/")).expect("config");
        let labels = Arc::new(Labels::parse("person\n", Path::new("labels")).expect("labels"));
        let controls = Arc::new(Controls::new(&config));
        (Recorder::start(&config, labels, controls.clone()), controls)
    }

    fn recorder(dir: &Path) -> (Arc<Recorder>, Arc<Controls>) {
        let (recorder, controls) = try_recorder(dir);
        (recorder.expect("start").expect("a camera records"), controls)
    }

    /// Issue 49: two daemons sharing a record directory: the second "recovered" the first one's
    /// clip being written. It now refuses to record a camera whose folder the first holds.
    #[test]
    fn a_second_recorder_of_the_same_camera_into_the_same_directory_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (first, _) = recorder(dir.path());
        let (second, _) = try_recorder(dir.path());
        let error = second.expect_err("refused").to_string();
        assert!(error.contains("camera gate") && error.contains("another process records"), "{error}");
        first.finish();
        drop(first);
        let (third, _) = recorder(dir.path());
        third.finish();
    }

    fn start(track: u64) -> EventFacts<'static> {
        let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000 + track * 100);
        EventFacts { kind: EventKind::Start, track, label: "person", zones: &[], first_seen: at, last_seen: at }
    }

    #[test]
    fn an_event_gets_a_clip_with_its_url_only_while_the_camera_can_record_and_is_switched_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (recorder, controls) = recorder(dir.path());
        assert_eq!(recorder.event("gate", &start(1)), None, "no keyframe in the pre-roll yet");
        recorder.cameras[0].stats.ready.store(true, Ordering::Relaxed);
        let clip = recorder.event("gate", &start(2)).expect("a clip");
        let file = clip.path.strip_prefix("gate/").expect("the camera's folder");
        assert_eq!(clip.url, format!("/api/cameras/gate/clips/{file}"));
        assert_eq!(controls.set("gate", Switch::Record, false), Ok(true));
        assert_eq!(recorder.event("gate", &start(3)), None, "switched off");
        assert_eq!(recorder.event("side", &start(4)), None, "not a recording camera");
        recorder.finish();
    }
}
