//! The tap on a camera's video: what a source hands over besides its decoded frames, to the
//! recorder (event clips) and to the live view's feed (live video), and the hand-over itself.
//!
//! Owns: [`StreamTap`], given to a camera's source side when the camera records or can be watched
//! live, [`RecordTap`], the recorder's part of it, and [`UnitListener`], the live feed's. A
//! source whose camera sends H.264/H.265 offers each parsed access unit *before the decoder*
//! ([`StreamTap::offer_unit`]: a reference-counted copy of the compressed bytes, nothing decoded);
//! for any other camera the source thread offers raw frames at the recorder's reduced rate
//! ([`StreamTap::offer_frame`], one copy), which the recorder encodes. The recorder's go through
//! one bounded queue with `try_send`: when the recorder is behind, the newest item is dropped and
//! counted ([`TapStats::dropped`]); the listener takes a unit at once, without waiting. So a source
//! thread never waits on either. Must not: block, allocate a frame copy the recorder will not take,
//! or know files, clips, viewers or GStreamer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::frame::{FrameSlot, PixelFormat};

/// Items the hand-over holds at most: about two seconds of 30 fps video, so a recorder that stalls
/// on a slow disk for a moment loses nothing, and one that stalls longer costs bounded memory.
pub const TAP_QUEUE: usize = 64;

/// A compressed video codec the recorder stores without re-encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VideoCodec {
    H264,
    H265,
}

/// How a stream's access units are framed and what the stream is, as the parser's caps say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFormat {
    pub codec: VideoCodec,
    pub width: u32,
    pub height: u32,
    /// `None`: Annex B byte-stream (start codes; parameter sets in band). `Some(n)`: each NAL unit
    /// is prefixed with its length in `n` bytes (`stream-format=avc`/`hvc1`), and `codec_data`
    /// holds the decoder configuration record.
    pub nal_length_size: Option<u8>,
    /// `avcC`/`hvcC` from the caps, for length-prefixed streams.
    pub codec_data: Option<Arc<[u8]>>,
}

/// One compressed access unit (a whole picture) of a camera's stream.
#[derive(Debug, Clone)]
pub struct AccessUnit {
    pub data: Arc<[u8]>,
    pub format: Arc<StreamFormat>,
    /// An IDR/IRAP picture: a clip may start here.
    pub keyframe: bool,
    /// Decode and presentation times on the stream's own clock (restart at a reconnect).
    pub dts: Option<Duration>,
    pub pts: Option<Duration>,
    /// When the picture was captured, on the same clock as the frames' `captured_at` (what the
    /// events are stamped with).
    pub captured_at: SystemTime,
}

/// Watches a camera's compressed stream as it arrives (the live view's feed): called on the
/// source's streaming thread for every access unit, so it must return at once, never waiting on
/// a lock that is held across I/O.
pub trait UnitListener: Send + Sync {
    fn unit(&self, unit: &AccessUnit);
}

/// What a camera's source side hands its video to: the recorder, a live listener, or both.
#[derive(Clone, Default)]
pub struct StreamTap {
    pub record: Option<RecordTap>,
    pub live: Option<Arc<dyn UnitListener>>,
}

impl std::fmt::Debug for StreamTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamTap").field("record", &self.record.is_some()).field("live", &self.live.is_some()).finish()
    }
}

impl StreamTap {
    /// A tap to `record` and `live`; `None` when neither wants anything.
    pub fn new(record: Option<RecordTap>, live: Option<Arc<dyn UnitListener>>) -> Option<StreamTap> {
        (record.is_some() || live.is_some()).then_some(StreamTap { record, live })
    }

    /// Hands over one access unit, to the listener first; never waits.
    pub fn offer_unit(&self, unit: AccessUnit) {
        if let Some(live) = &self.live {
            live.unit(&unit);
        }
        if let Some(record) = &self.record {
            record.offer_unit(unit);
        }
    }

    /// Offers the slot's frame to the recorder (see [`RecordTap::offer_frame`]).
    pub fn offer_frame(&self, slot: &FrameSlot) {
        if let Some(record) = &self.record {
            record.offer_frame(slot);
        }
    }
}

/// A raw frame for the recorder's encoder.
#[derive(Debug)]
pub struct RawFrame {
    pub data: Vec<u8>,
    pub width: u32,
    pub height: u32,
    pub format: PixelFormat,
    pub captured_at: SystemTime,
}

/// What a source hands the recorder.
#[derive(Debug)]
pub enum TapItem {
    Unit(AccessUnit),
    Frame(RawFrame),
}

/// Counters of a tap, shared with the recorder's statistics.
#[derive(Debug, Default)]
pub struct TapStats {
    /// Access units handed over.
    pub units: AtomicU64,
    /// Raw frames handed over.
    pub frames: AtomicU64,
    /// Items dropped because the recorder's queue was full.
    pub dropped: AtomicU64,
    /// Compressed bytes handed over.
    pub bytes: AtomicU64,
}

/// The source side of one camera's recorder.
#[derive(Debug, Clone)]
pub struct RecordTap {
    sender: SyncSender<TapItem>,
    stats: Arc<TapStats>,
    /// Set at the first access unit: the camera's compressed stream is recorded, so raw frames
    /// are not needed.
    encoded: Arc<AtomicBool>,
    /// The raw frames' rate: at most one per this interval (`None`: no raw frames wanted).
    frame_interval: Option<Duration>,
    /// Capture time of the last raw frame taken, nanoseconds since the epoch.
    last_frame: Arc<AtomicU64>,
}

impl RecordTap {
    /// A tap and the recorder's end of it. `frame_interval`: how often raw frames are wanted when
    /// the camera sends no compressed stream (`None`: never, the recorder has no encoder).
    pub fn new(frame_interval: Option<Duration>) -> (RecordTap, Receiver<TapItem>) {
        let (sender, receiver) = sync_channel(TAP_QUEUE);
        let tap = RecordTap {
            sender,
            stats: Arc::default(),
            encoded: Arc::default(),
            frame_interval,
            last_frame: Arc::default(),
        };
        (tap, receiver)
    }

    pub fn stats(&self) -> &Arc<TapStats> {
        &self.stats
    }

    /// Whether the camera's compressed stream reaches the recorder.
    pub fn is_encoded(&self) -> bool {
        self.encoded.load(Ordering::Relaxed)
    }

    /// Hands over one access unit; never waits.
    pub fn offer_unit(&self, unit: AccessUnit) {
        self.encoded.store(true, Ordering::Relaxed);
        let bytes = unit.data.len() as u64;
        if self.send(TapItem::Unit(unit)) {
            self.stats.units.fetch_add(1, Ordering::Relaxed);
            self.stats.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Offers the slot's frame: copied and handed over when the camera sends no compressed stream
    /// and a frame is due at the recorder's rate; otherwise nothing is copied. Never waits.
    pub fn offer_frame(&self, slot: &FrameSlot) {
        let Some(interval) = self.frame_interval else { return };
        if self.is_encoded() {
            return;
        }
        let meta = slot.meta();
        let at = meta.captured_at.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
        let last = self.last_frame.load(Ordering::Relaxed);
        // A clock that steps back (NTP) must not stop the frames: a frame older than the last one
        // taken is due too.
        if last != 0 && at >= last && at - last < interval.as_nanos() as u64 {
            return;
        }
        self.last_frame.store(at, Ordering::Relaxed);
        let frame = RawFrame {
            data: slot.data().to_vec(),
            width: meta.width,
            height: meta.height,
            format: meta.format,
            captured_at: meta.captured_at,
        };
        if self.send(TapItem::Frame(frame)) {
            self.stats.frames.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn send(&self, item: TapItem) -> bool {
        match self.sender.try_send(item) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
            // The recorder has stopped (shutdown): nothing to count.
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::HeapMemory;

    fn unit(n: u8) -> AccessUnit {
        AccessUnit {
            data: Arc::from(vec![n; 10]),
            format: Arc::new(StreamFormat {
                codec: VideoCodec::H264,
                width: 64,
                height: 48,
                nal_length_size: None,
                codec_data: None,
            }),
            keyframe: n == 0,
            dts: None,
            pts: Some(Duration::from_millis(u64::from(n) * 33)),
            captured_at: SystemTime::now(),
        }
    }

    fn slot_at(captured_at: SystemTime) -> FrameSlot {
        let mut slot = FrameSlot::new(Box::new(HeapMemory::with_capacity(64 * 48 * 3)));
        slot.prepare(64, 48, PixelFormat::Rgb8).expect("room");
        slot.meta_mut().captured_at = captured_at;
        slot
    }

    #[test]
    fn a_unit_reaches_the_listener_and_the_recorder_and_a_tap_wanted_by_nobody_is_none() {
        #[derive(Default)]
        struct Seen(std::sync::Mutex<Vec<u8>>);
        impl UnitListener for Seen {
            fn unit(&self, unit: &AccessUnit) {
                self.0.lock().expect("not poisoned").push(unit.data[0]);
            }
        }
        let seen = Arc::new(Seen::default());
        let (record, receiver) = RecordTap::new(None);
        let tap = StreamTap::new(Some(record), Some(seen.clone())).expect("a tap");
        tap.offer_unit(unit(3));
        assert_eq!(*seen.0.lock().expect("not poisoned"), [3]);
        assert_eq!(receiver.try_iter().count(), 1);
        assert!(StreamTap::new(None, None).is_none());
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let (tap, receiver) = RecordTap::new(None);
        for n in 0..TAP_QUEUE as u8 + 5 {
            tap.offer_unit(unit(n));
        }
        assert_eq!(tap.stats().units.load(Ordering::Relaxed), TAP_QUEUE as u64);
        assert_eq!(tap.stats().dropped.load(Ordering::Relaxed), 5);
        assert_eq!(tap.stats().bytes.load(Ordering::Relaxed), TAP_QUEUE as u64 * 10);
        assert_eq!(receiver.try_iter().count(), TAP_QUEUE);
    }

    #[test]
    fn raw_frames_are_copied_at_the_recorders_rate_and_not_at_all_once_the_stream_is_compressed() {
        let (tap, receiver) = RecordTap::new(Some(Duration::from_millis(200)));
        let start = SystemTime::now();
        for ms in [0, 50, 100, 199, 200, 260, 400] {
            tap.offer_frame(&slot_at(start + Duration::from_millis(ms)));
        }
        let taken: Vec<u128> = receiver
            .try_iter()
            .map(|item| match item {
                TapItem::Frame(frame) => frame.captured_at.duration_since(start).unwrap_or_default().as_millis(),
                TapItem::Unit(_) => panic!("no units were offered"),
            })
            .collect();
        assert_eq!(taken, [0, 200, 400]);
        tap.offer_unit(unit(0));
        tap.offer_frame(&slot_at(start + Duration::from_secs(10)));
        assert!(matches!(receiver.try_iter().collect::<Vec<_>>().as_slice(), [TapItem::Unit(_)]));
        let (no_encoder, receiver) = RecordTap::new(None);
        no_encoder.offer_frame(&slot_at(start));
        assert_eq!(receiver.try_iter().count(), 0, "a recorder without an encoder takes no frames");
    }
}
