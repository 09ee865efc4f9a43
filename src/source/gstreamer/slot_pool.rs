//! Zero-copy capture: a GStreamer buffer pool whose buffers are frame-slot memory, offered to the
//! element before the appsink so that it writes each frame where inference reads it.
//!
//! Owns: the pool (a `GstBufferPool` subclass that allocates every buffer through the camera's
//! [`SlotAllocator`]: page-locked, and mapped on integrated GPUs), answering the appsink's
//! ALLOCATION query with it, and turning a sample whose buffer came from it into a [`LentFrame`]
//! that keeps the buffer out of the pool until the ring gives it back.
//! Must not: copy frames, offer the pool for a layout the slots cannot read tightly packed (row
//! padding, a plane where the slot does not expect it), or block GStreamer's streaming threads.
//!
//! Upstream is free to refuse the pool (an element with its own memory, NVMM on a Jetson); then
//! samples arrive in other memory, [`PoolOffer::lend`] returns them, and the source copies them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::prelude::*;
use gstreamer::subclass::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use crate::frame::{LentFrame, PixelFormat, SlotAllocator, SlotMemory};
use crate::sys::lock::lock;

/// Buffers the pool may hold at once. The frames in the camera's ring, the appsink's two queued
/// samples and the one being read are at most a handful; the rest is headroom for a decoder that
/// keeps its reference frames in downstream buffers (H.264 keeps at most 16).
const MAX_BUFFERS: u32 = 32;

/// The tightly packed layout of raw video caps that a slot can hold as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TightLayout {
    pub width: u32,
    pub height: u32,
    pub format: PixelFormat,
    /// Bytes of one frame: [`PixelFormat::frame_bytes`].
    pub bytes: usize,
}

/// Plane offsets and row strides of a tightly packed frame.
fn planes(layout: &TightLayout) -> (Vec<usize>, Vec<usize>) {
    let (w, h) = (layout.width as usize, layout.height as usize);
    match layout.format {
        PixelFormat::Nv12 => (vec![0, w * h], vec![w, w]),
        PixelFormat::Rgba8 => (vec![0], vec![w * 4]),
        PixelFormat::Rgb8 | PixelFormat::Bgr8 => (vec![0], vec![w * 3]),
        PixelFormat::Yuyv => (vec![0], vec![w * 2]),
    }
}

/// The frame layout `info` describes if it is tightly packed, else why a slot cannot hold it as it is.
fn tight_layout(info: &gst_video::VideoInfo, format: PixelFormat) -> Result<TightLayout, String> {
    let (width, height) = (info.width(), info.height());
    let bytes = format
        .frame_bytes(width, height)
        .ok_or_else(|| format!("impossible {} frame size {width}x{height}", format.name()))?;
    let (offsets, strides) = planes(&TightLayout { width, height, format, bytes });
    let actual_strides: Vec<usize> = info.stride().iter().map(|&s| usize::try_from(s).unwrap_or(usize::MAX)).collect();
    if actual_strides != strides || info.offset() != offsets.as_slice() || info.size() != bytes {
        return Err(format!(
            "GStreamer lays a {width}x{height} {} frame out with row padding (strides {:?}, {} bytes; a slot holds {bytes})",
            format.name(),
            info.stride(),
            info.size()
        ));
    }
    Ok(TightLayout { width, height, format, bytes })
}

/// The layout of `caps` if a slot can hold its frames as GStreamer lays them out by default.
pub fn layout_of(caps: &gst::CapsRef) -> Result<TightLayout, String> {
    let info = gst_video::VideoInfo::from_caps(caps).map_err(|err| format!("caps {caps} are not raw video: {err}"))?;
    let format = super::buffer::pixel_format(info.format())
        .ok_or_else(|| format!("{:?} is not a format the slots take", info.format()))?;
    tight_layout(&info, format)
}

/// One buffer's memory: slot memory of the pool's size, shared between the GStreamer buffer that
/// upstream writes through and, while a slot holds the frame, the [`PooledFrame`] that reads it.
struct PoolMemory {
    memory: Box<dyn SlotMemory>,
}

/// What GStreamer's wrapped memory owns: the pool memory and a pointer through which upstream
/// writes it.
struct WritableBytes {
    /// Keeps the memory `base` points into alive as long as GStreamer's buffer.
    _shared: Arc<PoolMemory>,
    base: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: `base` points into `_shared`'s allocation, which lives as long as `_shared`; page-locked
// and heap memory may be written from any thread.
unsafe impl Send for WritableBytes {}

impl AsMut<[u8]> for WritableBytes {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `base` came from `as_mut_slice` of the memory `_shared` keeps alive and covers
        // `len` bytes (checked at allocation). GStreamer asks for this slice once, when it wraps
        // the memory, and then writes through it only while it owns the buffer: a buffer is in
        // upstream's hands or in a slot ([`PooledFrame`] holds a reference, so the pool cannot
        // hand it out), never both, so no read of the same bytes overlaps a write.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr(), self.len) }
    }
}

/// The pool memories of one camera, found again by address when their buffers come out of the
/// appsink. Weak: a memory lives as long as its GStreamer buffer or a slot holding it.
#[derive(Default)]
struct Registry {
    memories: Mutex<Vec<Weak<PoolMemory>>>,
}

impl Registry {
    fn insert(&self, memory: &Arc<PoolMemory>) {
        let mut memories = lock(&self.memories);
        memories.retain(|known| known.strong_count() > 0);
        memories.push(Arc::downgrade(memory));
    }

    fn find(&self, address: *const u8) -> Option<Arc<PoolMemory>> {
        lock(&self.memories)
            .iter()
            .filter_map(Weak::upgrade)
            .find(|memory| std::ptr::eq(memory.memory.as_slice().as_ptr(), address))
    }
}

mod imp {
    use super::*;

    /// What the pool needs to allocate a buffer, set when it is created.
    pub(super) struct Allocation {
        pub(super) allocator: SlotAllocator,
        pub(super) registry: Arc<Registry>,
        pub(super) camera: String,
    }

    #[derive(Default)]
    pub struct SlotBufferPool {
        pub(super) allocation: Mutex<Option<Allocation>>,
        /// Bytes of one buffer, from the configuration upstream set.
        pub(super) size: Mutex<usize>,
    }

    #[glib::object_subclass]
    impl ObjectSubclass for SlotBufferPool {
        const NAME: &'static str = "JetsonDetectdSlotBufferPool";
        type Type = super::SlotBufferPool;
        type ParentType = gst::BufferPool;
    }

    impl ObjectImpl for SlotBufferPool {}
    impl GstObjectImpl for SlotBufferPool {}

    impl BufferPoolImpl for SlotBufferPool {
        fn set_config(&self, config: &mut gst::BufferPoolConfigRef) -> bool {
            let Some((_caps, size, _min, _max)) = config.params() else {
                return false;
            };
            *lock(&self.size) = size as usize;
            self.parent_set_config(config)
        }

        fn alloc_buffer(&self, _params: Option<&gst::BufferPoolAcquireParams>) -> Result<gst::Buffer, gst::FlowError> {
            let size = *lock(&self.size);
            let allocation = lock(&self.allocation);
            let Some(Allocation { allocator, registry, camera }) = allocation.as_ref() else {
                return Err(gst::FlowError::NotNegotiated);
            };
            let mut memory = allocator.allocate(size).map_err(|message| {
                log::warn!("camera {camera}: cannot allocate a {size}-byte frame buffer: {message}");
                gst::FlowError::Error
            })?;
            let bytes = memory.as_mut_slice();
            if bytes.len() < size {
                log::warn!("camera {camera}: slot memory of {} bytes for a {size}-byte frame", bytes.len());
                return Err(gst::FlowError::Error);
            }
            let base = std::ptr::NonNull::new(bytes.as_mut_ptr()).ok_or(gst::FlowError::Error)?;
            let shared = Arc::new(PoolMemory { memory });
            registry.insert(&shared);
            Ok(gst::Buffer::from_mut_slice(WritableBytes { _shared: shared, base, len: size }))
        }
    }
}

glib::wrapper! {
    /// A buffer pool of frame-slot memory.
    pub struct SlotBufferPool(ObjectSubclass<imp::SlotBufferPool>) @extends gst::BufferPool, gst::Object;
}

impl SlotBufferPool {
    fn new(allocator: SlotAllocator, registry: Arc<Registry>, camera: &str) -> SlotBufferPool {
        let pool: SlotBufferPool = glib::Object::new();
        *lock(&pool.imp().allocation) = Some(imp::Allocation { allocator, registry, camera: camera.to_owned() });
        pool
    }
}

/// A frame upstream wrote into a pool buffer: the buffer stays out of the pool until this is
/// dropped (the ring releases the slot, or drops the frame unread).
struct PooledFrame {
    mapped: gst::MappedBuffer<gst::buffer::Readable>,
    memory: Arc<PoolMemory>,
}

impl LentFrame for PooledFrame {
    fn bytes(&self) -> &[u8] {
        self.mapped.as_slice()
    }

    fn memory(&self) -> &dyn SlotMemory {
        self.memory.memory.as_ref()
    }
}

/// What the appsink of one camera offers upstream, and how its samples are recognised.
#[derive(Clone)]
pub struct PoolOffer {
    allocator: SlotAllocator,
    registry: Arc<Registry>,
    camera: String,
    /// Why the latest ALLOCATION query was not answered with the pool (`None`: it was, or none came).
    declined: Arc<Mutex<Option<String>>>,
    /// An ALLOCATION query reached the appsink since the pipeline started.
    asked: Arc<AtomicBool>,
}

impl PoolOffer {
    pub fn new(allocator: SlotAllocator, camera: &str) -> PoolOffer {
        PoolOffer {
            allocator,
            registry: Arc::default(),
            camera: camera.to_owned(),
            declined: Arc::default(),
            asked: Arc::default(),
        }
    }

    /// Answers the ALLOCATION queries that reach `appsink` with a pool of slot memory for the
    /// queried caps (when a slot can hold their frames as they are); other queries pass.
    pub fn install(&self, appsink: &gst_app::AppSink) -> Result<(), String> {
        let pad = appsink.static_pad("sink").ok_or("the appsink has no sink pad")?;
        let offer = self.clone();
        offer.asked.store(false, Ordering::Relaxed);
        pad.add_probe(gst::PadProbeType::QUERY_DOWNSTREAM | gst::PadProbeType::PUSH, move |_pad, info| {
            let Some(query) = info.query_mut() else {
                return gst::PadProbeReturn::Ok;
            };
            let gst::QueryViewMut::Allocation(allocation) = query.view_mut() else {
                return gst::PadProbeReturn::Ok;
            };
            offer.asked.store(true, Ordering::Relaxed);
            let caps = allocation.get().0.map(gst::CapsRef::to_owned);
            let layout = match caps.as_deref().ok_or_else(|| "the query names no caps".to_owned()).and_then(layout_of) {
                Ok(layout) => layout,
                Err(reason) => {
                    *lock(&offer.declined) = Some(reason);
                    return gst::PadProbeReturn::Ok;
                }
            };
            let Ok(size) = u32::try_from(layout.bytes) else {
                return gst::PadProbeReturn::Ok;
            };
            let pool = SlotBufferPool::new(offer.allocator.clone(), offer.registry.clone(), &offer.camera);
            let mut config = pool.config();
            config.set_params(caps.as_ref(), size, 2, MAX_BUFFERS);
            if pool.set_config(config).is_err() {
                *lock(&offer.declined) = Some("the slot pool refused its configuration".into());
                return gst::PadProbeReturn::Ok;
            }
            *lock(&offer.declined) = None;
            allocation.add_allocation_pool(Some(&pool), size, 2, MAX_BUFFERS);
            gst::PadProbeReturn::Handled
        })
        .ok_or("cannot watch the appsink's allocation queries")?;
        Ok(())
    }

    /// Why samples are not in pool memory, as far as the appsink saw: for the one log line that
    /// says the source falls back to copying.
    pub fn why_not_pooled(&self) -> String {
        if let Some(reason) = lock(&self.declined).clone() {
            return reason;
        }
        if self.asked.load(Ordering::Relaxed) {
            "the element before the appsink was offered slot memory but allocates its own buffers".into()
        } else {
            "the element before the appsink never asked where to write (it allocates its own buffers)".into()
        }
    }

    /// The sample's frame as a [`LentFrame`] when upstream wrote it into one of this camera's
    /// pool buffers, tightly packed; `Err` gives the sample's buffer back for copying.
    pub fn lend(&self, buffer: gst::Buffer, layout: &TightLayout) -> Result<Box<dyn LentFrame>, gst::Buffer> {
        if buffer.n_memory() != 1 || has_other_layout(&buffer, layout) {
            return Err(buffer);
        }
        let mapped = buffer.into_mapped_buffer_readable()?;
        match self.registry.find(mapped.as_ptr()) {
            Some(memory) if mapped.len() >= layout.bytes => Ok(Box::new(PooledFrame { mapped, memory })),
            _ => Err(mapped.into_buffer()),
        }
    }
}

/// Whether the buffer says (with a video meta) that its planes are not where the default layout
/// puts them.
fn has_other_layout(buffer: &gst::BufferRef, layout: &TightLayout) -> bool {
    let Some(meta) = buffer.meta::<gst_video::VideoMeta>() else {
        return false;
    };
    let (offsets, strides) = planes(layout);
    meta.width() != layout.width
        || meta.height() != layout.height
        || meta.offset() != offsets.as_slice()
        || meta.stride().iter().map(|&stride| usize::try_from(stride).ok()).ne(strides.iter().map(|&s| Some(s)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use crate::frame::{CaptureMode, FrameSlot, HeapMemory, PixelFormat, SlotAllocator};
    use crate::source::frame_source::{Capture, FrameSource};
    use crate::source::gstreamer::appsink::{GstreamerOptions, GstreamerSource, PipelineSpec};
    use crate::source::limits::LimitsConfig;

    const LIMITS: LimitsConfig = LimitsConfig { max_width: 4096, max_height: 4096, max_alloc_mib: 64 };

    fn source(pipeline: &str, slots: SlotAllocator) -> GstreamerSource {
        let options = GstreamerOptions { slots, ..GstreamerOptions::default() };
        GstreamerSource::with_options(
            PipelineSpec::Launch(pipeline.into()),
            options,
            LIMITS,
            Arc::new(AtomicBool::new(false)),
        )
        .expect("open")
    }

    fn empty_slot() -> FrameSlot {
        FrameSlot::new(Box::new(HeapMemory::default()))
    }

    /// The next frame, retrying while the pipeline starts.
    fn next(source: &mut GstreamerSource, slot: &mut FrameSlot) {
        for _ in 0..200 {
            match source.next_frame(slot).expect("frame") {
                Capture::Frame => return,
                Capture::Retry => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
        panic!("no frame from {}", source.describe());
    }

    #[test]
    fn a_source_element_writes_straight_into_slot_memory_and_each_slot_holds_its_own_buffer() {
        let allocated = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = allocated.clone();
        let slots = SlotAllocator::new(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Box::new(HeapMemory::default()))
        });
        let mut source = source(
            "videotestsrc pattern=white num-buffers=40 ! video/x-raw,format=NV12,width=64,height=48 ! appsink name=sink",
            slots,
        );
        let mut held: Vec<FrameSlot> = (0..5).map(|_| empty_slot()).collect();
        for slot in &mut held {
            next(&mut source, slot);
            assert!(
                slot.is_lent(),
                "upstream wrote into the pool; {}",
                source.offer.as_ref().expect("offered").why_not_pooled()
            );
            assert_eq!(slot.copies(), 0);
            assert_eq!((slot.meta().width, slot.meta().height, slot.meta().format), (64, 48, PixelFormat::Nv12));
            assert_eq!(slot.data().len(), 64 * 48 * 3 / 2);
            assert!(slot.data()[..64 * 48].iter().all(|&luma| luma == 235), "white luma in limited range");
            assert!(slot.data()[64 * 48..].iter().all(|&chroma| chroma == 128), "no colour");
        }
        assert_eq!(source.capture_mode(), CaptureMode::Pool);
        let mut addresses: Vec<*const u8> = held.iter().map(|slot| slot.data().as_ptr()).collect();
        addresses.sort();
        addresses.dedup();
        assert_eq!(addresses.len(), held.len(), "five frames held at once are five buffers");
        assert!(allocated.load(std::sync::atomic::Ordering::SeqCst) >= 5, "the pool memory came from the allocator");
        drop(source);
        assert!(held.iter().all(|slot| slot.data()[0] == 235), "held frames outlive their pipeline");
    }

    #[test]
    fn a_converter_before_the_appsink_writes_into_slot_memory_too() {
        let mut source = source(
            "videotestsrc pattern=black num-buffers=10 ! video/x-raw,format=I420,width=32,height=16 ! videoconvert ! \
             video/x-raw,format=NV12 ! appsink name=sink",
            SlotAllocator::heap(),
        );
        let mut slot = empty_slot();
        for _ in 0..3 {
            next(&mut source, &mut slot);
            assert!(slot.is_lent(), "{}", source.offer.as_ref().expect("offered").why_not_pooled());
            assert!(slot.data()[..32 * 16].iter().all(|&luma| luma == 16), "black luma in limited range");
        }
    }

    #[test]
    fn frames_with_row_padding_are_copied_once_and_the_log_reason_names_the_padding() {
        // 30 RGB pixels are 90 bytes; GStreamer pads rows to 92.
        let mut source = source(
            "videotestsrc pattern=white num-buffers=5 ! video/x-raw,format=RGB,width=30,height=4 ! appsink name=sink",
            SlotAllocator::heap(),
        );
        let mut slot = empty_slot();
        next(&mut source, &mut slot);
        assert!(!slot.is_lent());
        assert_eq!(slot.copies(), 1);
        assert_eq!(source.capture_mode(), CaptureMode::Copy);
        assert_eq!(slot.data().len(), 30 * 4 * 3, "tightly packed in the slot");
        let caps = gstreamer::Caps::builder("video/x-raw")
            .field("format", "RGB")
            .field("width", 30)
            .field("height", 4)
            .field("framerate", gstreamer::Fraction::new(30, 1))
            .build();
        let reason = super::layout_of(&caps).expect_err("padded");
        assert!(reason.contains("row padding"), "{reason}");
        let caps = gstreamer::Caps::builder("video/x-raw")
            .field("format", "RGB")
            .field("width", 32)
            .field("height", 4)
            .field("framerate", gstreamer::Fraction::new(30, 1))
            .build();
        assert_eq!(super::layout_of(&caps).expect("tight").bytes, 32 * 4 * 3);
    }

    #[test]
    fn a_pool_whose_memory_cannot_be_allocated_fails_the_pipeline_instead_of_writing_elsewhere() {
        let slots = SlotAllocator::new(|| Err("no page-locked memory left".into()));
        let options = GstreamerOptions { slots, ..GstreamerOptions::default() };
        let pipeline = "videotestsrc num-buffers=5 ! video/x-raw,format=NV12,width=64,height=48 ! appsink name=sink";
        let stop = Arc::new(AtomicBool::new(false));
        match GstreamerSource::with_options(PipelineSpec::Launch(pipeline.into()), options, LIMITS, stop) {
            Err(error) => assert!(!error.to_string().is_empty()),
            Ok(mut source) => {
                let mut slot = empty_slot();
                for _ in 0..20 {
                    assert!(
                        !matches!(source.next_frame(&mut slot), Ok(Capture::Frame)),
                        "no frame can be written without memory"
                    );
                }
            }
        }
    }
}
