//! One camera's live video as HLS (fMP4 segments), for players that ask for a playlist: Home
//! Assistant's generic camera, Safari, VLC, ffplay.
//!
//! A segment is one keyframe interval of the feed's fragments as they are (nothing re-encoded,
//! nothing rebuilt); the playlist names the last [`SEGMENTS`] of them. The segmenter runs only
//! while someone asks: the first request starts it (a task that receives the feed like any
//! viewer), and it ends [`IDLE`] after the last request, dropping its segments; a new start of the
//! stream (other parameter sets) starts the segments over with a discontinuity. Owns: the
//! segmenter, its segments and the playlist's text. Must not: hold more than [`SEGMENTS`]
//! segments of at most `super::feed::MAX_GOP_BYTES` each, or wait on the feed.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use super::feed::{CameraFeed, FeedItem, StreamStart, MAX_GOP_BYTES};
use crate::record::mp4::TIMESCALE;
use crate::sys::lock::lock;

/// Segments the playlist names: with the camera's keyframe every second or two, a player that
/// starts three segments from the end is 3–6 s behind.
pub const SEGMENTS: usize = 6;
/// The segmenter stops this long after the last request.
pub const IDLE: Duration = Duration::from_secs(30);

/// One finished segment.
#[derive(Debug, Clone)]
struct Segment {
    sequence: u64,
    duration_s: f64,
    /// Whether the stream started again before it (the player must read the new init segment).
    discontinuity: bool,
    data: Bytes,
}

#[derive(Debug, Default)]
struct State {
    running: bool,
    last_request: Option<Instant>,
    start: Option<Arc<StreamStart>>,
    segments: VecDeque<Segment>,
    next_sequence: u64,
    /// The segment being gathered: its first fragment's ticks and its bytes so far.
    current: Option<(u64, BytesMut)>,
    discontinuity: bool,
}

/// A camera's HLS stream.
#[derive(Debug)]
pub struct HlsStream {
    feed: Arc<CameraFeed>,
    state: Arc<Mutex<State>>,
}

impl HlsStream {
    pub fn new(feed: Arc<CameraFeed>) -> HlsStream {
        HlsStream { feed, state: Arc::default() }
    }

    /// The playlist, `None` while it has no segment yet (the segmenter is started if it was not
    /// running).
    pub fn playlist(&self, stopping: &watch::Receiver<bool>) -> Option<String> {
        let mut state = lock(&self.state);
        state.last_request = Some(Instant::now());
        if !state.running && !*stopping.borrow() {
            state.running = true;
            tokio::spawn(segment(self.feed.clone(), self.state.clone(), stopping.clone()));
        }
        render(&state)
    }

    /// The init segment of start `version`, if it is the stream's now.
    pub fn init(&self, version: u64) -> Option<Bytes> {
        let state = lock(&self.state);
        state.start.as_ref().filter(|start| start.version == version).map(|start| start.init.clone())
    }

    /// Segment `sequence`, while the playlist names it.
    pub fn segment(&self, sequence: u64) -> Option<Bytes> {
        let mut state = lock(&self.state);
        state.last_request = Some(Instant::now());
        state.segments.iter().find(|segment| segment.sequence == sequence).map(|segment| segment.data.clone())
    }
}

/// The playlist of `state`'s segments; `None` before the first.
fn render(state: &State) -> Option<String> {
    let start = state.start.as_ref()?;
    let first = state.segments.front()?;
    let target = state.segments.iter().map(|segment| segment.duration_s.ceil() as u64).max().unwrap_or(1).max(1);
    let mut text = String::from("#EXTM3U\n#EXT-X-VERSION:7\n");
    let _ = writeln!(text, "#EXT-X-TARGETDURATION:{target}");
    let _ = writeln!(text, "#EXT-X-MEDIA-SEQUENCE:{}", first.sequence);
    let _ = writeln!(text, "#EXT-X-MAP:URI=\"hls/init-{}.mp4\"", start.version);
    for segment in &state.segments {
        if segment.discontinuity && segment.sequence != first.sequence {
            text.push_str("#EXT-X-DISCONTINUITY\n");
        }
        let _ = writeln!(text, "#EXTINF:{:.3},\nhls/{}.m4s", segment.duration_s, segment.sequence);
    }
    Some(text)
}

/// The segmenter: receives the feed until nobody asked for [`IDLE`] or the daemon stops.
async fn segment(feed: Arc<CameraFeed>, state: Arc<Mutex<State>>, mut stopping: watch::Receiver<bool>) {
    let (items, mut receiver) = feed.join();
    for item in items {
        gather(&mut lock(&state), item);
    }
    loop {
        let item = tokio::select! {
            item = receiver.recv() => item,
            _ = stopping.wait_for(|stopping| *stopping) => break,
            () = tokio::time::sleep(IDLE) => Err(RecvError::Closed),
        };
        let mut state = lock(&state);
        let idle = state.last_request.is_none_or(|at| at.elapsed() > IDLE);
        match item {
            _ if idle => break,
            Ok(item) => gather(&mut state, item),
            // Fragments were lost: the segment being gathered would not play through.
            Err(RecvError::Lagged(_)) => {
                state.current = None;
                state.discontinuity = true;
            }
            Err(RecvError::Closed) => break,
        }
    }
    let mut state = lock(&state);
    *state = State::default();
}

/// One item of the feed into the segments.
fn gather(state: &mut State, item: FeedItem) {
    match item {
        FeedItem::Start(start) => {
            if state.start.as_ref().is_some_and(|known| known.version != start.version) {
                state.segments.clear();
                state.discontinuity = true;
            }
            state.current = None;
            state.start = Some(start);
        }
        FeedItem::Media(fragment) => {
            if fragment.keyframe {
                if let Some((first, data)) = state.current.take() {
                    let duration_s = fragment.ticks.saturating_sub(first) as f64 / f64::from(TIMESCALE);
                    let sequence = state.next_sequence;
                    state.next_sequence += 1;
                    let discontinuity = std::mem::take(&mut state.discontinuity);
                    state.segments.push_back(Segment { sequence, duration_s, discontinuity, data: data.freeze() });
                    if state.segments.len() > SEGMENTS {
                        state.segments.pop_front();
                    }
                }
                state.current = Some((fragment.ticks, BytesMut::new()));
            }
            if let Some((_, data)) = state.current.as_mut() {
                data.extend_from_slice(&fragment.data);
                if data.len() > MAX_GOP_BYTES {
                    state.current = None;
                    state.discontinuity = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::feed::Fragment;

    fn start(version: u64) -> FeedItem {
        FeedItem::Start(Arc::new(StreamStart {
            codecs: "avc1.42c01e".into(),
            init: Bytes::from_static(b"init"),
            version,
        }))
    }

    /// Unit `n` of a 10 fps stream, a keyframe every 10th.
    fn unit(n: u64) -> FeedItem {
        let data = Bytes::from(vec![n as u8; 3]);
        FeedItem::Media(Arc::new(Fragment { keyframe: n.is_multiple_of(10), ticks: n * 9000, duration: 9000, data }))
    }

    #[test]
    fn a_segment_is_a_keyframe_interval_and_the_playlist_names_the_last_six() {
        let mut state = State::default();
        gather(&mut state, start(1));
        for n in 5..15 {
            gather(&mut state, unit(n));
        }
        assert!(render(&state).is_none(), "the first interval is not whole yet (it began before a keyframe)");
        for n in 15..95 {
            gather(&mut state, unit(n));
        }
        let text = render(&state).expect("segments");
        assert!(
            text.starts_with("#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:2\n"),
            "{text}"
        );
        assert!(text.contains("#EXT-X-MAP:URI=\"hls/init-1.mp4\"\n#EXTINF:1.000,\nhls/2.m4s\n"), "{text}");
        assert_eq!(text.matches("#EXTINF").count(), SEGMENTS, "units 30 to 89 in six, the two before gone: {text}");
        assert_eq!(state.segments.back().map(|segment| segment.data.len()), Some(30), "ten fragments of 3 bytes");
        gather(&mut state, start(2));
        for n in 100..121 {
            gather(&mut state, unit(n));
        }
        let text = render(&state).expect("segments");
        assert!(text.contains("hls/init-2.mp4") && !text.contains("hls/7.m4s") && text.contains("hls/9.m4s"), "{text}");
    }
}
