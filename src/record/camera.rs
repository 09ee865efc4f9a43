//! One camera's recorder thread: its pre-roll, its clip being written, its encoder for raw frames.
//!
//! Owns: the thread's loop (what the source's tap hands over, the planner's [`Command`]s, each
//! processed frame's boxes, the encoder's output), the boxes of the pre-roll's span (a clip starts
//! with the boxes of its pre-roll in its metadata track), the clip's life (started from the
//! pre-roll at the keyframe before the event's `from`, fed live until the capture time passes
//! `until`, continued in a new clip at a keyframe past `max_clip` or when the stream's format
//! changes, ended at once when the camera goes offline), the camera's figures
//! ([`CameraRecordStats`]) and the index entries of its clips (room in the budget for every write
//! is retention's: [`Retention::make_room`], which the clip writer asks). A full disk pauses every
//! camera ([`Pause`]); other write errors end the clip with what was written. Must not: wait on
//! anything but its own queue, or write outside its camera's folder.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::boxes::BoxFrame;
use super::clip::{clip_name, ClipError, ClipWriter};
use super::index::ClipIndex;
use super::nal::{self, ParameterSets};
use super::plan::Command;
use super::preroll::Preroll;
use super::retention::Retention;
use crate::config::record::Recording;
use crate::source::tap::{AccessUnit, RawFrame, StreamFormat, TapItem, TapStats};
use crate::sys::lock::lock;

/// How long the thread waits for its queue before looking at its commands and clocks again.
const IDLE_WAIT: Duration = Duration::from_millis(200);
/// While encoding, it looks at the encoder's output this often.
const ENCODER_POLL: Duration = Duration::from_millis(40);
/// A clip whose `until` passed this long ago by the wall clock ends even without frames (the
/// camera stopped sending).
const STALE_AFTER: Duration = Duration::from_secs(10);
/// Box frames the pre-roll keeps at most (besides its span): a minute of 30 fps detection.
const PREROLL_BOXES: usize = 1800;

/// Why recording is paused, shared by every camera; `None` while it runs.
#[derive(Debug, Default)]
pub struct Pause {
    reason: Mutex<Option<String>>,
    paused: AtomicBool,
}

impl Pause {
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    pub fn reason(&self) -> Option<String> {
        lock(&self.reason).clone()
    }

    /// Pauses, saying why in the log when this is news.
    pub fn pause(&self, reason: &str) {
        let mut current = lock(&self.reason);
        if current.is_none() {
            log::error!("record: recording paused: {reason}; detection and MQTT go on");
        }
        *current = Some(reason.to_owned());
        self.paused.store(true, Ordering::Relaxed);
    }

    pub fn resume(&self, why: &str) {
        let mut current = lock(&self.reason);
        if current.take().is_some() {
            log::info!("record: recording resumed: {why}");
        }
        self.paused.store(false, Ordering::Relaxed);
    }
}

/// How a camera's video reaches its clips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Feed {
    /// Nothing has arrived yet.
    Waiting,
    /// The camera's own H.264/H.265, stored as it arrives.
    Passthrough,
    /// Raw frames, encoded here.
    Encoded,
    /// Raw frames that cannot be encoded here (the log says why): the camera has no clips.
    Refused,
}

impl Feed {
    fn index(self) -> u8 {
        match self {
            Feed::Waiting => 0,
            Feed::Passthrough => 1,
            Feed::Encoded => 2,
            Feed::Refused => 3,
        }
    }

    fn from_index(index: u8) -> Feed {
        [Feed::Waiting, Feed::Passthrough, Feed::Encoded, Feed::Refused]
            .into_iter()
            .find(|feed| feed.index() == index)
            .unwrap_or(Feed::Waiting)
    }
}

/// A camera's recording figures, updated by its thread, read by telemetry, `/metrics` and the page.
#[derive(Debug, Default)]
pub struct CameraRecordStats {
    pub tap: Arc<TapStats>,
    feed: AtomicU8,
    /// Clips finished since start, and their bytes.
    pub clips: AtomicU64,
    pub bytes: AtomicU64,
    /// Bytes held in the pre-roll now.
    pub preroll_bytes: AtomicU64,
    /// Units dropped from the pre-roll to its byte bound, frames the encoder could not keep up
    /// with, units that could not be read.
    pub preroll_dropped: AtomicU64,
    /// Times the pre-roll was emptied because one keyframe interval alone was over its bound.
    pub preroll_cuts: AtomicU64,
    pub encoder_dropped: AtomicU64,
    /// Processed frames' boxes dropped because the thread's queue of them was full.
    pub boxes_dropped: AtomicU64,
    /// Units left out after a drop until the next keyframe (they refer to what was dropped).
    pub resync_skipped: AtomicU64,
    pub malformed: AtomicU64,
    /// Clips that could not be started or written (the log says why).
    pub failed: AtomicU64,
    /// A clip is being written now.
    pub recording: AtomicBool,
    /// The pre-roll holds a keyframe: a clip could start now.
    pub ready: AtomicBool,
}

impl CameraRecordStats {
    /// Figures of a camera whose source hands over through a tap with these counters.
    pub fn new(tap: Arc<TapStats>) -> CameraRecordStats {
        CameraRecordStats { tap, ..CameraRecordStats::default() }
    }

    pub fn feed(&self) -> Feed {
        Feed::from_index(self.feed.load(Ordering::Relaxed))
    }

    fn set_feed(&self, feed: Feed) {
        self.feed.store(feed.index(), Ordering::Relaxed);
    }
}

/// The clip the planner asked for.
#[derive(Debug)]
struct Target {
    name: String,
    tracks: Vec<u64>,
    from: SystemTime,
    until: Option<SystemTime>,
}

/// What the thread needs from the recorder.
pub struct CameraContext {
    pub camera: String,
    pub recording: Recording,
    /// Capture time the pre-roll holds.
    pub span: Duration,
    pub root: PathBuf,
    pub index: Arc<ClipIndex>,
    /// Makes room in the budget before each write of a clip.
    pub retention: Arc<Retention>,
    pub pause: Arc<Pause>,
    pub stats: Arc<CameraRecordStats>,
    /// Nudged when a clip is finished (retention runs then).
    pub finished: SyncSender<()>,
}

/// The recorder thread of one camera.
pub struct CameraThread {
    context: CameraContext,
    preroll: Preroll,
    format: Option<Arc<StreamFormat>>,
    sets: ParameterSets,
    writer: Option<ClipWriter>,
    target: Option<Target>,
    /// The boxes of the frames in the pre-roll's span, oldest first.
    boxes: VecDeque<BoxFrame>,
    /// The tap's drop count as last seen, and whether units wait for a keyframe after a drop.
    dropped_seen: u64,
    resync: bool,
    #[cfg(feature = "gstreamer")]
    encoder: Option<super::encode::Encoder>,
}

impl CameraThread {
    pub fn new(context: CameraContext) -> CameraThread {
        let preroll = Preroll::new(context.span, context.recording.preroll_max_bytes);
        CameraThread {
            context,
            preroll,
            format: None,
            sets: ParameterSets::default(),
            writer: None,
            target: None,
            boxes: VecDeque::new(),
            dropped_seen: 0,
            resync: false,
            #[cfg(feature = "gstreamer")]
            encoder: None,
        }
    }

    /// Runs until the tap's senders are gone (the camera's source ended) or `stop` is set, then
    /// finishes the clip being written. `boxes`: each processed frame's boxes.
    pub fn run(
        mut self,
        items: Receiver<TapItem>,
        commands: Receiver<Command>,
        boxes: Receiver<BoxFrame>,
        stop: &AtomicBool,
    ) {
        while !stop.load(Ordering::Relaxed) {
            let wait = if self.encoding() { ENCODER_POLL } else { IDLE_WAIT };
            match items.recv_timeout(wait) {
                Ok(TapItem::Unit(unit)) => self.camera_unit(unit),
                Ok(TapItem::Frame(frame)) => self.frame(frame),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            while let Ok(command) = commands.try_recv() {
                self.command(command);
            }
            while let Ok(frame) = boxes.try_recv() {
                self.boxes(frame);
            }
            self.drain_encoder();
            self.check_wall_clock();
        }
        self.finish_clip();
    }

    fn encoding(&self) -> bool {
        #[cfg(feature = "gstreamer")]
        {
            self.encoder.is_some()
        }
        #[cfg(not(feature = "gstreamer"))]
        {
            false
        }
    }

    fn camera(&self) -> &str {
        &self.context.camera
    }

    fn command(&mut self, command: Command) {
        match command {
            Command::Start { name, track, from } => {
                // The planner saw the last clip's post-roll end on its events; the stream here
                // may lag behind: that clip ends now.
                self.finish_clip();
                self.target = Some(Target { name, tracks: vec![track], from, until: None });
                self.try_start();
            }
            Command::Join { track } => {
                if let Some(target) = self.target.as_mut() {
                    if !target.tracks.contains(&track) {
                        target.tracks.push(track);
                    }
                    if let Some(writer) = self.writer.as_mut() {
                        writer.add_track(track);
                    }
                }
            }
            Command::Until(until) => {
                if let Some(target) = self.target.as_mut() {
                    target.until = until;
                }
            }
            Command::Offline => {
                self.finish_clip();
                self.target = None;
                self.preroll.clear();
                self.context.stats.preroll_bytes.store(0, Ordering::Relaxed);
                self.context.stats.ready.store(false, Ordering::Relaxed);
            }
        }
    }

    /// A processed frame's boxes: kept for the pre-roll's span, and written into the clip being
    /// recorded.
    pub fn boxes(&mut self, frame: BoxFrame) {
        let newest = frame.captured_at;
        while self.boxes.len() >= PREROLL_BOXES
            || self.boxes.front().is_some_and(|oldest| {
                newest.duration_since(oldest.captured_at).is_ok_and(|age| age > self.context.span)
            })
        {
            self.boxes.pop_front();
        }
        if let Some(writer) = self.writer.as_mut() {
            writer.push_boxes(frame.clone());
        }
        self.boxes.push_back(frame);
    }

    /// An access unit of the camera's own stream.
    fn camera_unit(&mut self, unit: AccessUnit) {
        #[cfg(feature = "gstreamer")]
        if self.encoder.take().is_some() {
            log::info!("camera {}: its compressed stream is recorded; the encoder stops", self.camera());
        }
        self.context.stats.set_feed(Feed::Passthrough);
        // A unit dropped on the way (the queue was full) leaves the units after it without their
        // reference: nothing is kept until the next keyframe, so every clip decodes.
        let dropped = self.context.stats.tap.dropped.load(Ordering::Relaxed);
        if dropped != self.dropped_seen {
            self.dropped_seen = dropped;
            self.resync = true;
        }
        if self.resync && !unit.keyframe {
            self.context.stats.resync_skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.resync = false;
        self.unit(unit);
    }

    /// A unit of the stream clips are made of (the camera's own, or the encoder's).
    fn unit(&mut self, unit: AccessUnit) {
        let new_format =
            self.format.as_ref().is_none_or(|known| !Arc::ptr_eq(known, &unit.format) && **known != *unit.format);
        if new_format {
            self.sets = match &unit.format.codec_data {
                Some(record) => ParameterSets::from_record(unit.format.codec, record).unwrap_or_default(),
                None => ParameterSets::default(),
            };
            self.format = Some(unit.format.clone());
            self.continue_in_new_clip(None);
        }
        let units = match unit.format.nal_length_size {
            None => Ok(nal::split_annex_b(&unit.data)),
            Some(size) => nal::split_length_prefixed(&unit.data, size),
        };
        let Ok(units) = units else {
            self.context.stats.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // New parameter sets need a new sample entry: a new clip from their keyframe.
        let new_sets = self.sets.update(unit.format.codec, &units) && unit.keyframe;
        drop(units);
        self.preroll.push(unit.clone());
        let stats = &self.context.stats;
        stats.preroll_bytes.store(self.preroll.bytes() as u64, Ordering::Relaxed);
        stats.preroll_dropped.store(self.preroll.dropped(), Ordering::Relaxed);
        stats.preroll_cuts.store(self.preroll.cuts(), Ordering::Relaxed);
        stats.ready.store(self.preroll.bytes() > 0, Ordering::Relaxed);
        if self.writer.is_none() {
            self.try_start();
            return;
        }
        let until = self.target.as_ref().and_then(|target| target.until);
        if until.is_some_and(|until| unit.captured_at > until) {
            self.finish_clip();
            self.target = None;
            return;
        }
        let too_long = self.writer.as_ref().is_some_and(|writer| writer.duration() >= self.context.recording.max_clip);
        if new_sets || too_long && unit.keyframe {
            // The new clip starts with this unit: it is not written again here.
            self.continue_in_new_clip(Some(&unit));
            return;
        }
        self.write(&unit);
    }

    /// Ends the clip being written and goes on in a new one: at `keyframe` (which the new clip
    /// starts with), or at the next keyframe.
    fn continue_in_new_clip(&mut self, keyframe: Option<&AccessUnit>) {
        if self.writer.is_none() {
            return;
        }
        self.finish_clip();
        let camera = self.context.camera.clone();
        let Some(target) = self.target.as_mut() else { return };
        let at = keyframe.map_or_else(SystemTime::now, |unit| unit.captured_at);
        target.name = clip_name(&camera, at, target.tracks[0]);
        target.from = at;
        if let Some(unit) = keyframe {
            self.start(std::slice::from_ref(unit));
        }
    }

    /// Starts the asked-for clip from the pre-roll, once it holds a keyframe early enough.
    fn try_start(&mut self) {
        let Some(target) = self.target.as_ref() else { return };
        if self.writer.is_some() {
            return;
        }
        if self.context.pause.is_paused() {
            log::warn!(
                "camera {}: recording is paused ({}); event {} gets no clip",
                self.camera(),
                self.context.pause.reason().unwrap_or_default(),
                target.tracks[0]
            );
            self.context.stats.failed.fetch_add(1, Ordering::Relaxed);
            self.target = None;
            return;
        }
        let units = self.preroll.since(target.from);
        if units.first().is_some_and(|first| first.keyframe)
            && self.format.as_ref().is_some_and(|f| self.sets.is_complete(f.codec))
        {
            self.start(&units);
        }
    }

    /// Creates the clip and writes `units` (the first a keyframe) into it.
    fn start(&mut self, units: &[AccessUnit]) {
        let (Some(target), Some(first)) = (self.target.as_ref(), units.first()) else { return };
        let retention = self.context.retention.clone();
        let created = ClipWriter::create(
            &self.context.root,
            &self.context.camera,
            &target.name,
            target.tracks[0],
            first,
            &self.sets,
            Box::new(move |bytes| retention.make_room(bytes)),
        );
        match created {
            Ok(mut writer) => {
                for track in &target.tracks[1..] {
                    writer.add_track(*track);
                }
                log::info!("camera {}: recording {}", self.camera(), target.name);
                self.context.index.put(writer.entry().clone());
                self.context.stats.recording.store(true, Ordering::Relaxed);
                let from = first.captured_at;
                self.writer = Some(writer);
                for unit in units {
                    self.write(unit);
                }
                // The pre-roll's boxes, once their units are in the clip.
                if let Some(writer) = self.writer.as_mut() {
                    for frame in self.boxes.iter().filter(|frame| frame.captured_at >= from) {
                        writer.push_boxes(frame.clone());
                    }
                }
            }
            Err(e) => {
                self.failed(&e);
                self.target = None;
            }
        }
    }

    fn write(&mut self, unit: &AccessUnit) {
        let Some(writer) = self.writer.as_mut() else { return };
        let before = writer.entry().bytes;
        match writer.push(unit) {
            Ok(()) => {
                if writer.entry().bytes != before {
                    self.context.index.put(writer.entry().clone());
                }
            }
            Err(e) => {
                self.failed(&e);
                self.finish_clip();
                self.target = None;
            }
        }
    }

    fn failed(&self, error: &ClipError) {
        self.context.stats.failed.fetch_add(1, Ordering::Relaxed);
        if error.is_disk_full() {
            self.context.pause.pause(&format!("the disk of {} is full", self.context.root.display()));
        } else {
            log::error!("camera {}: a clip failed: {error}", self.camera());
        }
    }

    /// Finishes the clip being written, if any, and puts it in the index.
    fn finish_clip(&mut self) {
        let Some(writer) = self.writer.take() else { return };
        let path = writer.entry().path.clone();
        self.context.stats.recording.store(false, Ordering::Relaxed);
        match writer.finish() {
            Ok(entry) => {
                log::info!(
                    "camera {}: clip {} done ({:.1} s, {} KiB)",
                    self.camera(),
                    entry.path,
                    entry.end.duration_since(entry.start).unwrap_or_default().as_secs_f64(),
                    entry.bytes / 1024
                );
                self.context.stats.clips.fetch_add(1, Ordering::Relaxed);
                self.context.stats.bytes.fetch_add(entry.bytes, Ordering::Relaxed);
                self.context.index.put(entry);
            }
            Err(e) => {
                self.failed(&e);
                self.context.index.remove(&path);
            }
        }
        match self.context.finished.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }

    /// Ends a clip whose end passed long ago when the camera stopped sending.
    fn check_wall_clock(&mut self) {
        let until = self.target.as_ref().and_then(|target| target.until);
        if until.is_some_and(|until| SystemTime::now().duration_since(until).is_ok_and(|since| since > STALE_AFTER)) {
            self.finish_clip();
            self.target = None;
        }
    }

    /// A raw frame: encoded where the camera sends no compressed stream.
    #[cfg(feature = "gstreamer")]
    fn frame(&mut self, frame: RawFrame) {
        use super::encode::{choose, Encoder};
        let stats = self.context.stats.clone();
        if matches!(stats.feed(), Feed::Passthrough | Feed::Refused) {
            return;
        }
        if self.encoder.is_none() {
            match choose(self.context.recording.encoder.kind) {
                Ok(kind) => {
                    log::info!("camera {}: raw frames are encoded with {} for its clips", self.camera(), kind.name());
                    self.encoder = Some(Encoder::new(kind, self.context.recording.encoder));
                    stats.set_feed(Feed::Encoded);
                }
                Err(reason) => {
                    log::error!(
                        "camera {}: it sends raw video, which cannot be recorded here: {reason}",
                        self.camera()
                    );
                    stats.set_feed(Feed::Refused);
                    return;
                }
            }
        }
        let Some(encoder) = self.encoder.as_mut() else { return };
        if let Err(reason) = encoder.encode(frame) {
            log::warn!("camera {}: the clip encoder: {reason}", self.context.camera);
        }
        stats.encoder_dropped.store(encoder.dropped, Ordering::Relaxed);
    }

    #[cfg(not(feature = "gstreamer"))]
    fn frame(&mut self, _frame: RawFrame) {
        if self.context.stats.feed() != Feed::Refused {
            log::error!(
                "camera {}: it sends raw video, which needs a binary built with GStreamer to be encoded (`bash .ci/build`)",
                self.camera()
            );
            self.context.stats.set_feed(Feed::Refused);
        }
    }

    fn drain_encoder(&mut self) {
        #[cfg(feature = "gstreamer")]
        {
            let Some(encoder) = self.encoder.as_mut() else { return };
            if let Some(failure) = encoder.failure() {
                log::warn!("camera {}: the clip encoder failed ({failure}); restarting it", self.context.camera);
            }
            let mut units = Vec::new();
            encoder.drain(&mut units);
            for unit in units {
                self.unit(unit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::sync_channel;

    use super::*;
    use crate::config::record::{EncoderChoice, EncoderConfig};
    use crate::source::tap::VideoCodec;

    const SPS: [u8; 11] = [0x67, 0x42, 0xc0, 0x1e, 0xd9, 0x00, 0xa0, 0x47, 0xfe, 0xc8, 0x04];
    const PPS: [u8; 4] = [0x68, 0xce, 0x3c, 0x80];

    fn recording() -> Recording {
        Recording {
            pre: Duration::from_secs(1),
            post: Duration::from_secs(1),
            labels: Vec::new(),
            zones: Vec::new(),
            min_event: Duration::ZERO,
            max_clip: Duration::from_secs(10),
            preroll_max_bytes: 1 << 20,
            encoder: EncoderConfig { kind: EncoderChoice::None, fps: 5.0, max_width: 640, bitrate_kbps: 1000 },
        }
    }

    struct Rig {
        thread: CameraThread,
        start: SystemTime,
        format: Arc<StreamFormat>,
        /// The SPS the keyframes carry.
        sps: Vec<u8>,
        _dir: tempfile::TempDir,
        index: Arc<ClipIndex>,
        pause: Arc<Pause>,
    }

    fn rig() -> Rig {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = Arc::new(ClipIndex::default());
        let pause = Arc::new(Pause::default());
        let (finished, _) = sync_channel(1);
        let context = CameraContext {
            camera: "gate".into(),
            recording: recording(),
            span: Duration::from_secs(3),
            root: dir.path().to_path_buf(),
            index: index.clone(),
            retention: Arc::new(Retention::new(dir.path().to_path_buf(), index.clone(), u64::MAX, None)),
            pause: pause.clone(),
            stats: Arc::default(),
            finished,
        };
        let format = Arc::new(StreamFormat {
            codec: VideoCodec::H264,
            width: 160,
            height: 120,
            nal_length_size: None,
            codec_data: None,
        });
        let sps = SPS.to_vec();
        Rig { thread: CameraThread::new(context), start: SystemTime::now(), format, sps, _dir: dir, index, pause }
    }

    impl Rig {
        fn time(&self, n: u64) -> SystemTime {
            self.start + Duration::from_millis(n * 100)
        }

        /// Unit `n` of a 10 fps stream with a keyframe every 10 units.
        fn push(&mut self, n: u64) {
            let key = n.is_multiple_of(10);
            let mut data = Vec::new();
            if key {
                for set in [&self.sps[..], &PPS[..]] {
                    data.extend_from_slice(&[0, 0, 0, 1]);
                    data.extend_from_slice(set);
                }
            }
            data.extend_from_slice(&[0, 0, 0, 1, if key { 0x65 } else { 0x41 }, 0x88, n as u8]);
            let unit = AccessUnit {
                data: Arc::from(data),
                format: self.format.clone(),
                keyframe: key,
                dts: None,
                pts: Some(Duration::from_millis(n * 100)),
                captured_at: self.time(n),
            };
            self.thread.camera_unit(unit);
        }
    }

    #[test]
    fn a_clip_starts_at_the_keyframe_before_from_and_ends_after_until() {
        let mut rig = rig();
        for n in 0..25 {
            rig.push(n);
        }
        let name = clip_name("gate", rig.time(15), 1);
        rig.thread.command(Command::Start { name: name.clone(), track: 1, from: rig.time(15) });
        for n in 25..40 {
            rig.push(n);
        }
        rig.thread.command(Command::Until(Some(rig.time(45))));
        for n in 40..50 {
            rig.push(n);
        }
        let entry = rig.index.get(&name).expect("indexed");
        assert!(!entry.recording, "finished after until");
        assert_eq!(entry.start, rig.time(10), "the keyframe before from");
        assert_eq!(entry.end, rig.time(46), "through the first unit after until, exclusive");
        assert_eq!(rig.thread.context.stats.clips.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_clip_past_max_clip_goes_on_in_a_new_one_at_a_keyframe() {
        let mut rig = rig();
        rig.push(0);
        rig.thread.command(Command::Start { name: clip_name("gate", rig.time(0), 1), track: 1, from: rig.time(0) });
        for n in 1..125 {
            rig.push(n);
        }
        let clips = rig.index.list(Some("gate"), 10);
        assert_eq!(clips.len(), 2, "{clips:?}");
        assert_eq!(clips[1].end, rig.time(100), "10 s, ended at the keyframe that starts the next one");
        assert_eq!(clips[0].start, rig.time(100));
        assert!(clips[0].recording);
    }

    #[test]
    fn new_parameter_sets_go_on_in_a_new_clip_that_shows_their_keyframe_once() {
        let mut rig = rig();
        rig.push(0);
        rig.thread.command(Command::Start { name: clip_name("gate", rig.time(0), 1), track: 1, from: rig.time(0) });
        for n in 1..30 {
            rig.push(n);
        }
        // The camera changes its level: a new SPS with the keyframe at unit 30.
        rig.sps[3] = 0x1f;
        for n in 30..45 {
            rig.push(n);
        }
        rig.thread.command(Command::Until(Some(rig.time(44))));
        rig.push(45);
        let clips = rig.index.list(Some("gate"), 10);
        assert_eq!(clips.len(), 2, "{clips:?}");
        assert_eq!((clips[1].start, clips[1].end), (rig.time(0), rig.time(30)));
        // Units 30 to 44, each 0.1 s long: a keyframe written twice would make it 0.1 s longer.
        assert_eq!((clips[0].start, clips[0].end), (rig.time(30), rig.time(45)), "{clips:?}");
        assert!(!clips[0].recording);
    }

    #[test]
    fn after_a_drop_nothing_is_kept_until_the_next_keyframe() {
        let mut rig = rig();
        for n in 0..14 {
            rig.push(n);
        }
        rig.thread.command(Command::Start { name: clip_name("gate", rig.time(0), 1), track: 1, from: rig.time(0) });
        rig.thread.context.stats.tap.dropped.fetch_add(1, Ordering::Relaxed);
        for n in 15..25 {
            rig.push(n);
        }
        assert_eq!(rig.thread.context.stats.resync_skipped.load(Ordering::Relaxed), 5, "units 15 to 19");
        rig.thread.command(Command::Until(Some(rig.time(22))));
        rig.push(25);
        let entry = rig.index.list(Some("gate"), 1).pop().expect("the clip");
        assert_eq!((entry.start, entry.end), (rig.time(0), rig.time(25)), "0-13, then 20-24 (the last 0.1 s long)");
    }

    /// Issue 49: the clip of an RTSP camera that went offline stayed `.part` (409) for as long as
    /// the camera was away.
    #[test]
    fn a_camera_going_offline_finishes_its_clip_and_empties_the_preroll() {
        let mut rig = rig();
        for n in 0..15 {
            rig.push(n);
        }
        let name = clip_name("gate", rig.time(12), 1);
        rig.thread.command(Command::Start { name: name.clone(), track: 1, from: rig.time(12) });
        for n in 15..25 {
            rig.push(n);
        }
        assert!(rig.index.get(&name).expect("indexed").recording);
        rig.thread.command(Command::Until(Some(rig.time(24) + Duration::from_secs(60))));
        rig.thread.command(Command::Offline);
        let entry = rig.index.get(&name).expect("indexed");
        assert!(!entry.recording, "finished at once, not 60 s of capture time later");
        assert_eq!((entry.start, entry.end), (rig.time(10), rig.time(25)));
        assert_eq!(rig.thread.preroll.bytes(), 0, "nothing from before the outage is kept");
        assert!(!rig.thread.context.stats.ready.load(Ordering::Relaxed));
    }

    #[test]
    fn while_paused_a_clip_is_not_started() {
        let mut rig = rig();
        rig.push(0);
        rig.pause.pause("test");
        rig.thread.command(Command::Start { name: clip_name("gate", rig.time(0), 1), track: 1, from: rig.time(0) });
        rig.push(1);
        assert!(rig.index.list(None, 10).is_empty());
        assert_eq!(rig.thread.context.stats.failed.load(Ordering::Relaxed), 1);
    }
}
