//! One camera's live feed: its compressed stream, as the source hands it over before the decoder,
//! made into fragmented MP4 once for every viewer, and each processed frame's boxes placed on the
//! same timeline.
//!
//! Every access unit becomes one fragment (`moof` + `mdat`, the video track of
//! `crate::record::mp4`), sent as soon as it arrives: nothing waits for a second unit. The feed
//! keeps the stream's start (its init segment, [`StreamStart`]) and the units since the last
//! keyframe, so a viewer who joins starts at once from that keyframe; it keeps no more. The
//! fragments go out on one bounded broadcast channel ([`FEED_QUEUE`] items), the boxes on another
//! ([`BOX_QUEUE`]): a viewer that falls that far behind loses the oldest and is told so
//! ([`broadcast::error::RecvError::Lagged`]); it then skips to the next keyframe
//! (`super::viewer`). Sending never waits, so the source's streaming thread, and detection behind
//! it, never wait on a viewer.
//!
//! While nobody watches, a unit costs a lock, the timeline's arithmetic and an `Arc` clone kept
//! until the next keyframe: its fragment is built only for a viewer, and a frame's boxes are not
//! even serialised. Owns: the feed's state, its items, and placing a frame's boxes at the picture
//! captured with them ([`UnitTimes`]). Must not: block, decode, or know sockets and HTTP.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::broadcast;

use crate::record::boxes::{BoxFrame, FrameBox};
use crate::record::mp4::{self, Sample, Track, TIMESCALE};
use crate::record::nal::{self, ParameterSets};
use crate::record::timeline::{raw_times, ticks_duration, Timeline, UnitTimes};
use crate::source::tap::{AccessUnit, StreamFormat, UnitListener};
use crate::sys::lock::lock;

/// Fragments a viewer may be behind before it loses the oldest: about four seconds of 30 fps.
pub const FEED_QUEUE: usize = 128;
/// Box messages a boxes viewer may be behind before it loses the oldest.
pub const BOX_QUEUE: usize = 64;
/// Bytes of the current keyframe interval kept for joining viewers at most: a camera whose
/// interval is larger makes a joining viewer wait for its next keyframe instead.
pub const MAX_GOP_BYTES: usize = 16 << 20;
/// Units whose capture times are kept to place boxes: ten seconds of 30 fps, more than
/// detection lags.
const UNIT_TIMES: usize = 300;

/// What a viewer needs before the stream's fragments: the init segment and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamStart {
    /// The `codecs` parameter of the video (`avc1.42c01e`), for Media Source's `addSourceBuffer`.
    pub codecs: String,
    /// `ftyp` + `moov`.
    pub init: Bytes,
    /// Counts the starts of this feed: a new one (the camera changed its parameter sets or
    /// reconnected with another format) needs the new init segment.
    pub version: u64,
}

/// One access unit as a fragment.
#[derive(Debug, Clone)]
pub struct Fragment {
    pub keyframe: bool,
    /// Decode time and duration on the feed's timeline, ticks of [`TIMESCALE`].
    pub ticks: u64,
    pub duration: u32,
    pub data: Bytes,
}

/// What the feed sends its video viewers.
#[derive(Debug, Clone)]
pub enum FeedItem {
    Start(Arc<StreamStart>),
    Media(Arc<Fragment>),
}

/// One line of the boxes stream: `{"t":seconds,"boxes":[...]}`.
#[derive(Serialize)]
struct BoxesLine<'a> {
    /// Seconds on the video's timeline: the `mediaTime` at which a browser shows the picture.
    t: f64,
    boxes: &'a [FrameBox],
}

/// A unit since the last keyframe, and its fragment once one was built.
struct GopUnit {
    unit: AccessUnit,
    sequence: u32,
    ticks: u64,
    duration: u32,
    composition_offset: i32,
    fragment: Option<Arc<Fragment>>,
}

#[derive(Default)]
struct State {
    format: Option<Arc<StreamFormat>>,
    sets: ParameterSets,
    start: Option<Arc<StreamStart>>,
    starts: u64,
    timeline: Timeline,
    sequence: u32,
    /// The units since the last keyframe (empty while waiting for one).
    gop: Vec<GopUnit>,
    gop_bytes: usize,
    times: Option<UnitTimes>,
}

/// The feed's figures.
#[derive(Debug, Default)]
pub struct FeedFigures {
    /// Access units handed over, and units that could not be read.
    pub units: AtomicU64,
    pub malformed: AtomicU64,
    /// Viewers that fell [`FEED_QUEUE`] items behind and skipped to a keyframe, and the items
    /// they lost.
    pub lagged: AtomicU64,
    pub skipped_items: AtomicU64,
}

/// One camera's live feed.
pub struct CameraFeed {
    pub camera: String,
    state: Mutex<State>,
    media: broadcast::Sender<FeedItem>,
    boxes: broadcast::Sender<Bytes>,
    pub figures: FeedFigures,
}

impl std::fmt::Debug for CameraFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CameraFeed").field("camera", &self.camera).finish_non_exhaustive()
    }
}

impl CameraFeed {
    pub fn new(camera: &str) -> CameraFeed {
        CameraFeed {
            camera: camera.to_owned(),
            state: Mutex::default(),
            media: broadcast::channel(FEED_QUEUE).0,
            boxes: broadcast::channel(BOX_QUEUE).0,
            figures: FeedFigures::default(),
        }
    }

    /// Whether anyone receives the feed's video now.
    pub fn is_watched(&self) -> bool {
        self.media.receiver_count() > 0
    }

    /// The stream's start, once its parameter sets and a keyframe came.
    pub fn start(&self) -> Option<Arc<StreamStart>> {
        lock(&self.state).start.clone()
    }

    /// Joins the feed's video: the items that bring a new viewer to the present (the start and
    /// the fragments since the last keyframe; none before the stream's first keyframe) and the
    /// receiver of everything after them, with nothing lost or repeated between the two.
    pub fn join(&self) -> (Vec<FeedItem>, broadcast::Receiver<FeedItem>) {
        let mut state = lock(&self.state);
        let receiver = self.media.subscribe();
        let mut items = Vec::new();
        if let Some(start) = state.start.clone() {
            items.push(FeedItem::Start(start));
            for gop_unit in &mut state.gop {
                items.push(FeedItem::Media(fragment(gop_unit)));
            }
        }
        (items, receiver)
    }

    /// Joins the feed's boxes: one line of JSON per processed frame from now on.
    pub fn join_boxes(&self) -> broadcast::Receiver<Bytes> {
        self.boxes.subscribe()
    }

    /// Whether anyone receives the feed's boxes now.
    pub fn boxes_watched(&self) -> bool {
        self.boxes.receiver_count() > 0
    }

    /// A processed frame's boxes: sent to the boxes viewers at the presentation time of the
    /// picture they were found on (dropped when that is no longer known, or nobody watches).
    pub fn frame_boxes(&self, frame: &BoxFrame) {
        if !self.boxes_watched() {
            return;
        }
        let ticks = lock(&self.state).times.as_ref().and_then(|times| times.find(frame.captured_at));
        let Some(ticks) = ticks else { return };
        let line = BoxesLine { t: ticks as f64 / f64::from(TIMESCALE), boxes: &frame.boxes };
        let Ok(mut json) = serde_json::to_vec(&line) else { return };
        json.push(b'\n');
        let _ = self.boxes.send(Bytes::from(json));
    }

    /// The source side: one access unit.
    fn unit(&self, unit: &AccessUnit) {
        self.figures.units.fetch_add(1, Ordering::Relaxed);
        let mut state = lock(&self.state);
        let state = &mut *state;
        let new_format =
            state.format.as_ref().is_none_or(|known| !Arc::ptr_eq(known, &unit.format) && **known != *unit.format);
        if new_format {
            state.sets = match &unit.format.codec_data {
                Some(record) => ParameterSets::from_record(unit.format.codec, record).unwrap_or_default(),
                None => ParameterSets::default(),
            };
            state.format = Some(unit.format.clone());
            state.start = None;
            state.gop.clear();
            state.gop_bytes = 0;
        }
        let codec = unit.format.codec;
        let units = match unit.format.nal_length_size {
            None => Ok(nal::split_annex_b(&unit.data)),
            Some(size) => nal::split_length_prefixed(&unit.data, size),
        };
        let Ok(units) = units else {
            self.figures.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let sets_changed = (unit.keyframe || state.start.is_none()) && state.sets.update(codec, &units);
        drop(units);
        let (raw, composition_offset) = raw_times(unit);
        let step = state.timeline.last_step();
        let ticks = state.timeline.ticks(raw);
        let times = state.times.get_or_insert_with(|| UnitTimes::new(UNIT_TIMES));
        times.push(unit.captured_at, ticks + composition_offset.max(0) as u64, ticks_duration(u64::from(step)));
        if unit.keyframe && (state.start.is_none() || sets_changed) && state.sets.is_complete(codec) {
            match start_of(&unit.format, &state.sets, state.starts + 1) {
                Some(start) => {
                    state.starts += 1;
                    state.start = Some(start.clone());
                    state.gop.clear();
                    state.gop_bytes = 0;
                    let _ = self.media.send(FeedItem::Start(start));
                }
                None => {
                    self.figures.malformed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
        if state.start.is_none() {
            return;
        }
        if unit.keyframe {
            state.gop.clear();
            state.gop_bytes = 0;
        } else if state.gop.is_empty() {
            // Waiting for a keyframe: the interval kept grew past its bound.
            return;
        }
        state.sequence = state.sequence.wrapping_add(1);
        let mut gop_unit = GopUnit {
            unit: unit.clone(),
            sequence: state.sequence,
            ticks,
            duration: state.timeline.last_step(),
            composition_offset,
            fragment: None,
        };
        if self.is_watched() {
            let _ = self.media.send(FeedItem::Media(fragment(&mut gop_unit)));
        }
        state.gop_bytes += unit.data.len();
        if state.gop_bytes > MAX_GOP_BYTES {
            state.gop.clear();
            state.gop_bytes = 0;
        } else {
            state.gop.push(gop_unit);
        }
    }
}

impl UnitListener for CameraFeed {
    fn unit(&self, unit: &AccessUnit) {
        CameraFeed::unit(self, unit);
    }
}

/// The start of a stream of `format` with parameter sets `sets`; `None` when they do not make a
/// decoder configuration record.
fn start_of(format: &StreamFormat, sets: &ParameterSets, version: u64) -> Option<Arc<StreamStart>> {
    let track = Track {
        codec: format.codec,
        width: format.width,
        height: format.height,
        decoder_record: sets.decoder_record(format.codec).ok()?,
    };
    Some(Arc::new(StreamStart {
        codecs: track.codecs()?,
        init: Bytes::from(mp4::init_segment(&track, false)),
        version,
    }))
}

/// The unit's fragment, built the first time it is asked for.
fn fragment(gop_unit: &mut GopUnit) -> Arc<Fragment> {
    if let Some(fragment) = &gop_unit.fragment {
        return fragment.clone();
    }
    let unit = &gop_unit.unit;
    let units = match unit.format.nal_length_size {
        None => Ok(nal::split_annex_b(&unit.data)),
        Some(size) => nal::split_length_prefixed(&unit.data, size),
    };
    let mut data = Vec::with_capacity(unit.data.len() + 16);
    let written = units.and_then(|units| nal::write_sample(unit.format.codec, &units, &mut data));
    let keyframe = written.unwrap_or(false) || unit.keyframe;
    let sample = Sample {
        data: &data,
        duration: gop_unit.duration.max(1),
        composition_offset: gop_unit.composition_offset,
        keyframe,
    };
    let built = Arc::new(Fragment {
        keyframe,
        ticks: gop_unit.ticks,
        duration: gop_unit.duration,
        data: Bytes::from(mp4::fragment(gop_unit.sequence, gop_unit.ticks, &[sample])),
    });
    gop_unit.fragment = Some(built.clone());
    built
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::record::test_stream::{self, format};
    use crate::watch::viewer::{Joined, Next, Viewer};

    fn start() -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_795_000_000_123)
    }

    fn unit(format: &Arc<StreamFormat>, n: u64) -> AccessUnit {
        test_stream::unit(format, start(), n)
    }

    /// The unit a fragment holds, by its decode time (`moof`'s `tfdt`; 100 ms a unit).
    fn unit_of(fragment: &[u8]) -> u64 {
        let samples = mp4::sample_times(fragment);
        samples.first().and_then(|(_, times)| times.first().copied()).expect("one sample") / 9000
    }

    #[test]
    fn a_viewer_joins_at_the_last_keyframe_and_gets_every_unit_after_it_as_a_fragment() {
        let feed = Arc::new(CameraFeed::new("gate"));
        let f = format();
        assert!(Viewer::join(feed.clone()).is_none(), "no keyframe yet");
        for n in 0..13 {
            feed.unit(&unit(&f, n));
        }
        let Joined { mut viewer, start, first, mut receiver } = Viewer::join(feed.clone()).expect("a start");
        assert_eq!(start.codecs, "avc1.42c01e");
        assert_eq!(first[0], start.init, "the init segment first");
        let units: Vec<u64> = first[1..].iter().map(|fragment| unit_of(fragment)).collect();
        assert_eq!(units, [10, 11, 12], "from the last keyframe, on the feed's timeline");
        feed.unit(&unit(&f, 13));
        let Next::Send(next) = viewer.item(receiver.try_recv().expect("unit 13")) else { panic!("sent") };
        assert_eq!(unit_of(&next), 13);
    }

    #[test]
    fn a_viewer_that_falls_behind_skips_to_the_next_keyframe_and_the_source_never_waits() {
        let feed = Arc::new(CameraFeed::new("gate"));
        let f = format();
        feed.unit(&unit(&f, 0));
        let Joined { mut viewer, mut receiver, .. } = Viewer::join(feed.clone()).expect("a start");
        // The viewer reads nothing while the camera sends twice the queue.
        for n in 1..=(2 * FEED_QUEUE as u64 + 5) {
            feed.unit(&unit(&f, n));
        }
        let mut sent = Vec::new();
        loop {
            match receiver.try_recv() {
                Ok(item) => {
                    if let Next::Send(bytes) = viewer.item(item) {
                        sent.push(unit_of(&bytes));
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(missed)) => viewer.lagged(missed),
                Err(_) => break,
            }
        }
        assert!(sent[0] % 10 == 0 && sent[0] > 5, "after the gap, a keyframe first: {sent:?}");
        assert_eq!(feed.figures.lagged.load(Ordering::Relaxed), 1);
        assert!(sent.windows(2).all(|pair| pair[1] == pair[0] + 1), "then every unit: {sent:?}");
        assert_eq!(sent.last(), Some(&(2 * FEED_QUEUE as u64 + 5)));
    }

    #[test]
    fn a_frames_boxes_are_sent_at_its_pictures_time_only_while_someone_watches_them() {
        let feed = Arc::new(CameraFeed::new("gate"));
        let f = format();
        let frame = |n: u64| BoxFrame {
            captured_at: start() + Duration::from_millis(n * 100),
            boxes: vec![FrameBox {
                label: "person".into(),
                score: 0.9,
                track: Some(3),
                zones: vec![],
                bbox: [0.1, 0.2, 0.3, 0.4],
            }],
        };
        for n in 0..5 {
            feed.unit(&unit(&f, n));
        }
        assert!(!feed.boxes_watched());
        let mut boxes = feed.join_boxes();
        feed.frame_boxes(&frame(3));
        feed.frame_boxes(&frame(40));
        let line = boxes.try_recv().expect("frame 3's boxes");
        assert_eq!(
            std::str::from_utf8(&line).expect("UTF-8"),
            "{\"t\":0.3,\"boxes\":[{\"label\":\"person\",\"score\":0.9,\"track\":3,\"box\":[0.1,0.2,0.3,0.4]}]}\n"
        );
        assert!(boxes.try_recv().is_err(), "no unit was captured with frame 40");
    }
}
