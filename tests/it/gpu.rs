//! GPU tests against a real device: the preprocessing kernels against the CPU implementation (bit
//! for bit), also on regions of interest (classifier crops), batches whose rows come from different cameras, and the mapped, pinned and heap slot
//! paths (frames copied into slots, and frames lent to them) against each other. They run only with `JETSON_DETECTD_GPU_TESTS=1 cargo test --features
//! cuda`; otherwise each prints why it skipped.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use jetson_detectd::config::{ColorOrder, ResizeFilter, ResizeKind, TensorDtype, TensorLayout};
use jetson_detectd::frame::{FrameMeta, FrameSlot, HeapMemory, LentFrame, PixelFormat, SlotMemory};
use jetson_detectd::gpu::{
    self, CudaSlice, CudaStream, GpuDevice, GpuPreprocessor, HostMemoryKind, HostSlotMemory, TAP_CACHE_SIZES,
};
use jetson_detectd::preprocess::{preprocess_cpu, CpuPreprocessor, PreprocessSpec, Roi};

const FORMATS: [PixelFormat; 5] =
    [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8, PixelFormat::Yuyv, PixelFormat::Nv12];
const LAYOUTS: [TensorLayout; 2] = [TensorLayout::Nchw, TensorLayout::Nhwc];
const DTYPES: [TensorDtype; 3] = [TensorDtype::U8, TensorDtype::F16, TensorDtype::F32];
const RESIZES: [ResizeKind; 2] = [ResizeKind::Stretch, ResizeKind::Letterbox];
const FILTERS: [ResizeFilter; 2] = [ResizeFilter::Bilinear, ResizeFilter::Antialias];

/// The device, or `None` (with the reason on stderr, past the test harness's capture) when GPU
/// tests are not enabled.
pub(crate) fn gpu_or_skip(test: &str) -> Option<GpuDevice> {
    if std::env::var("JETSON_DETECTD_GPU_TESTS").as_deref() != Ok("1") {
        let _ = writeln!(std::io::stderr(), "skipped {test}: set JETSON_DETECTD_GPU_TESTS=1 to run GPU tests");
        return None;
    }
    assert!(gpu::driver_present(), "JETSON_DETECTD_GPU_TESTS=1 but libcuda not found: no NVIDIA driver");
    Some(GpuDevice::open(0).expect("open CUDA device 0"))
}

/// xorshift64*, seeded from the clock: every run draws fresh inputs; the seed is printed so a
/// failure can be replayed with JETSON_DETECTD_GPU_SEED.
struct Random(u64);

impl Random {
    fn fresh(test: &str) -> Self {
        let seed = std::env::var("JETSON_DETECTD_GPU_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1);
        let _ = writeln!(std::io::stderr(), "{test}: JETSON_DETECTD_GPU_SEED={seed}");
        Random(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, bound: u32) -> u32 {
        (self.next() >> 33) as u32 % bound
    }
    fn range(&mut self, low: u32, high: u32) -> u32 {
        low + self.below(high - low + 1)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| (self.next() >> 56) as u8).collect()
    }
}

fn random_frame_size(random: &mut Random, format: PixelFormat) -> (u32, u32) {
    let (mut width, mut height) = (random.range(1, 240), random.range(1, 160));
    if matches!(format, PixelFormat::Yuyv | PixelFormat::Nv12) {
        width = (width + 1) & !1;
    }
    if format == PixelFormat::Nv12 {
        height = (height + 1) & !1;
    }
    (width, height)
}

fn random_spec(
    random: &mut Random,
    layout: TensorLayout,
    dtype: TensorDtype,
    resize: ResizeKind,
    filter: ResizeFilter,
) -> PreprocessSpec {
    let float = dtype != TensorDtype::U8;
    let mut channel = |low: f32, span: f32| [0; 3].map(|_| low + span * random.unit());
    let (mean, std) = if float { (channel(0.0, 255.0), channel(0.5, 100.0)) } else { ([0.0; 3], [1.0; 3]) };
    PreprocessSpec {
        name: None,
        width: random.range(1, 130),
        height: random.range(1, 130),
        layout,
        dtype,
        color: if random.below(2) == 0 { ColorOrder::Rgb } else { ColorOrder::Bgr },
        resize,
        filter,
        pad: random.below(256) as u8,
        mean,
        std,
    }
}

fn meta(width: u32, height: u32, format: PixelFormat) -> FrameMeta {
    FrameMeta { width, height, format, sequence: 0, captured_at: SystemTime::now() }
}

fn filled_slot(memory: Box<dyn SlotMemory>, frame: &[u8], meta: &FrameMeta) -> FrameSlot {
    let mut slot = FrameSlot::new(memory);
    slot.prepare(meta.width, meta.height, meta.format).expect("prepare slot").copy_from_slice(frame);
    slot
}

/// Runs the kernel twice into `dst`, once over a 0x00 and once over a 0xFF poison, and returns the
/// tensor after checking both runs agree (so every byte was written).
fn run_poisoned(
    preprocessor: &mut GpuPreprocessor,
    stream: &std::sync::Arc<CudaStream>,
    slot: &FrameSlot,
    dst: &mut CudaSlice<u8>,
) -> Vec<u8> {
    let mut results = [0x00u8, 0xFF].map(|poison| {
        stream.memcpy_htod(&vec![poison; dst.len()], dst).expect("poison output");
        preprocessor.run(slot, dst).expect("enqueue preprocessing");
        let tensor = stream.clone_dtoh(dst).expect("download tensor");
        stream.synchronize().expect("kernel ran without error");
        tensor
    });
    assert!(results[0] == results[1], "some output bytes were not written (they kept the poison)");
    std::mem::take(&mut results[0])
}

fn ulp_f32(value: f32) -> f32 {
    let magnitude = value.abs();
    f32::from_bits(magnitude.to_bits() + 1) - magnitude
}

fn ulp_f16(value: f32) -> f32 {
    let magnitude = half::f16::from_f32(value.abs());
    half::f16::from_bits(magnitude.to_bits() + 1).to_f32() - magnitude.to_f32()
}

/// Largest difference between the two tensors in LSBs of the dtype (ulps of the reference value
/// for floats).
fn max_error_lsb(dtype: TensorDtype, gpu: &[u8], cpu: &[u8]) -> f32 {
    match dtype {
        TensorDtype::U8 => gpu.iter().zip(cpu).map(|(g, c)| g.abs_diff(*c) as f32).fold(0.0, f32::max),
        TensorDtype::F16 => gpu
            .chunks_exact(2)
            .zip(cpu.chunks_exact(2))
            .map(|(g, c)| {
                let g = half::f16::from_ne_bytes([g[0], g[1]]).to_f32();
                let c = half::f16::from_ne_bytes([c[0], c[1]]).to_f32();
                if g.is_nan() || c.is_nan() {
                    f32::INFINITY
                } else {
                    (g - c).abs() / ulp_f16(c)
                }
            })
            .fold(0.0, f32::max),
        TensorDtype::F32 => gpu
            .chunks_exact(4)
            .zip(cpu.chunks_exact(4))
            .map(|(g, c)| {
                let g = f32::from_ne_bytes([g[0], g[1], g[2], g[3]]);
                let c = f32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                if g.is_nan() || c.is_nan() {
                    f32::INFINITY
                } else {
                    (g - c).abs() / ulp_f32(c)
                }
            })
            .fold(0.0, f32::max),
    }
}

/// Asserts the GPU tensor equals the CPU reference bit for bit; the message gives the largest
/// difference in LSBs.
fn assert_bit_identical(dtype: TensorDtype, gpu: &[u8], cpu: &[u8], case: &dyn std::fmt::Display) {
    assert_eq!(gpu.len(), cpu.len(), "{case}: tensor sizes differ");
    if gpu != cpu {
        let first = gpu.iter().zip(cpu).position(|(g, c)| g != c).unwrap_or(0);
        panic!("{case}: GPU differs from CPU by up to {} LSB (first at byte {first})", max_error_lsb(dtype, gpu, cpu));
    }
}

/// A frame slot of the given kind holding `frame`.
fn slot_of_kind(device: &GpuDevice, kind: usize, frame: &[u8], meta: &FrameMeta) -> FrameSlot {
    let memory: Box<dyn SlotMemory> = match kind % 3 {
        0 => Box::new(HostSlotMemory::new(device, frame.len(), HostMemoryKind::Mapped).expect("mapped")),
        1 => Box::new(HostSlotMemory::new(device, frame.len(), HostMemoryKind::Pinned).expect("pinned")),
        _ => Box::new(HeapMemory::with_capacity(frame.len())),
    };
    filled_slot(memory, frame, meta)
}

#[test]
fn probe_describes_the_device() {
    let Some(device) = gpu_or_skip("probe_describes_the_device") else { return };
    let probe = device.probe();
    let _ = writeln!(std::io::stderr(), "{}", serde_json::to_string(probe).expect("probe serialises"));
    assert!(!probe.name.is_empty());
    assert!(probe.total_memory_bytes >= probe.free_memory_bytes && probe.free_memory_bytes > 0);
    assert!(probe.compute_capability.contains('.') && probe.multiprocessors > 0);
    assert_eq!(gpu::probe(0).expect("probe").name, probe.name);
}

#[test]
fn kernel_matches_cpu_for_every_format_layout_dtype_resize_and_filter() {
    let Some(device) = gpu_or_skip("kernel_matches_cpu_for_every_format_layout_dtype_resize_and_filter") else {
        return;
    };
    let stream = device.new_stream().expect("stream");
    let cache = tempfile::tempdir().expect("cache dir");
    let mut random = Random::fresh("kernel_matches_cpu");
    let mut cases = 0;
    for format in FORMATS {
        for layout in LAYOUTS {
            for dtype in DTYPES {
                for (resize, filter) in RESIZES.into_iter().flat_map(|r| FILTERS.map(|f| (r, f))) {
                    for _ in 0..3 {
                        let (width, height) = random_frame_size(&mut random, format);
                        let spec = random_spec(&mut random, layout, dtype, resize, filter);
                        let meta = meta(width, height, format);
                        let frame = random.bytes(format.frame_bytes(width, height).expect("frame size"));
                        let mut cpu = vec![0u8; spec.bytes()];
                        preprocess_cpu(&frame, &meta, &spec, &mut cpu).expect("cpu preprocessing");
                        let mut preprocessor =
                            GpuPreprocessor::new(&device, stream.clone(), &spec, Some(cache.path()), frame.len())
                                .expect("preprocessor");
                        let slot = filled_slot(gpu::slot_memory(&device).expect("slot"), &frame, &meta);
                        let mut dst = stream.alloc_zeros::<u8>(spec.bytes()).expect("output");
                        let tensor = run_poisoned(&mut preprocessor, &stream, &slot, &mut dst);
                        let case = format!("{} {width}x{height} → {spec:?}", format.name());
                        assert_bit_identical(dtype, &tensor, &cpu, &case);
                        cases += 1;
                    }
                }
            }
        }
    }
    let _ = writeln!(std::io::stderr(), "{cases} cases, all bit-identical to the CPU implementation");
    assert!(std::fs::read_dir(cache.path()).expect("cache").count() >= 1, "the compiled kernel was cached");
}

#[test]
fn kernel_matches_cpu_on_full_size_frames() {
    let Some(device) = gpu_or_skip("kernel_matches_cpu_on_full_size_frames") else { return };
    let stream = device.new_stream().expect("stream");
    let mut random = Random::fresh("full_size");
    use {ResizeFilter::*, ResizeKind::*, TensorDtype::*, TensorLayout::*};
    let cases = [
        (1920, 1080, PixelFormat::Yuyv, 640, 640, Nchw, F16, Letterbox, Bilinear),
        (1920, 1080, PixelFormat::Yuyv, 640, 640, Nchw, F16, Letterbox, Antialias),
        (1920, 1080, PixelFormat::Rgb8, 300, 300, Nhwc, U8, Stretch, Antialias),
        (1280, 720, PixelFormat::Nv12, 300, 300, Nhwc, U8, Stretch, Bilinear),
        (1280, 720, PixelFormat::Nv12, 300, 300, Nhwc, F32, Stretch, Antialias),
        (640, 480, PixelFormat::Bgr8, 1280, 736, Nchw, F32, Letterbox, Bilinear),
        (640, 480, PixelFormat::Bgr8, 1280, 736, Nchw, F32, Letterbox, Antialias),
        // Shrinks by 12.8 × 7.2: resample tiles of fewer rows, over 48 KiB of shared memory.
        (3840, 2160, PixelFormat::Yuyv, 300, 300, Nchw, F16, Stretch, Antialias),
        (3840, 2160, PixelFormat::Rgba8, 300, 300, Nhwc, U8, Letterbox, Antialias),
        // One output column takes 6000 source pixels: no tile fits shared memory, the single-pass
        // kernel runs.
        (24000, 4, PixelFormat::Rgb8, 4, 4, Nhwc, F32, Stretch, Antialias),
    ];
    for (width, height, format, out_w, out_h, layout, dtype, resize, filter) in cases {
        let mut spec = random_spec(&mut random, layout, dtype, resize, filter);
        (spec.width, spec.height) = (out_w, out_h);
        let meta = meta(width, height, format);
        let frame = random.bytes(format.frame_bytes(width, height).expect("frame size"));
        let mut cpu = vec![0u8; spec.bytes()];
        preprocess_cpu(&frame, &meta, &spec, &mut cpu).expect("cpu preprocessing");
        let mut preprocessor =
            GpuPreprocessor::new(&device, stream.clone(), &spec, None, frame.len()).expect("preprocessor");
        let slot = filled_slot(gpu::slot_memory(&device).expect("slot"), &frame, &meta);
        let mut dst = stream.alloc_zeros::<u8>(spec.bytes()).expect("output");
        let tensor = run_poisoned(&mut preprocessor, &stream, &slot, &mut dst);
        assert_bit_identical(dtype, &tensor, &cpu, &format!("{} {width}x{height} → {spec:?}", format.name()));
    }
}

/// A random frame of `format`, an NCHW antialiased letterbox into `dtype`, a preprocessor for it
/// and its output buffer: the set-up of the tests that compare ways of getting a frame into a slot.
struct SlotCase {
    meta: FrameMeta,
    frame: Vec<u8>,
    preprocessor: GpuPreprocessor,
    dst: CudaSlice<u8>,
}

fn slot_case(
    device: &GpuDevice,
    stream: &std::sync::Arc<CudaStream>,
    random: &mut Random,
    format: PixelFormat,
    dtype: TensorDtype,
) -> SlotCase {
    let (width, height) = random_frame_size(random, format);
    let spec = random_spec(random, TensorLayout::Nchw, dtype, ResizeKind::Letterbox, ResizeFilter::Antialias);
    let frame = random.bytes(format.frame_bytes(width, height).expect("frame size"));
    let preprocessor = GpuPreprocessor::new(device, stream.clone(), &spec, None, frame.len()).expect("preprocessor");
    let dst = stream.alloc_zeros::<u8>(spec.bytes()).expect("output");
    SlotCase { meta: meta(width, height, format), frame, preprocessor, dst }
}

#[test]
fn mapped_pinned_and_heap_slots_give_identical_tensors() {
    let Some(device) = gpu_or_skip("mapped_pinned_and_heap_slots_give_identical_tensors") else { return };
    let stream = device.new_stream().expect("stream");
    let mut random = Random::fresh("slot_paths");
    for format in FORMATS {
        let SlotCase { meta, frame, mut preprocessor, mut dst } =
            slot_case(&device, &stream, &mut random, format, TensorDtype::F32);
        let memories: [(&str, Box<dyn SlotMemory>); 3] = [
            ("mapped", Box::new(HostSlotMemory::new(&device, frame.len(), HostMemoryKind::Mapped).expect("mapped"))),
            ("pinned", Box::new(HostSlotMemory::new(&device, frame.len(), HostMemoryKind::Pinned).expect("pinned"))),
            ("heap", Box::new(HeapMemory::with_capacity(frame.len()))),
        ];
        let tensors = memories.map(|(name, memory)| {
            let slot = filled_slot(memory, &frame, &meta);
            (name, run_poisoned(&mut preprocessor, &stream, &slot, &mut dst))
        });
        for (name, tensor) in &tensors[1..] {
            assert!(*tensor == tensors[0].1, "{} {name} slot differs from the mapped slot", format.name());
        }
    }
}

/// A frame a source lends its slot: written into page-locked memory before the slot sees it, as a
/// GStreamer pool buffer or a V4L2 user-pointer buffer is.
struct Loan(Box<dyn SlotMemory>);

impl LentFrame for Loan {
    fn bytes(&self) -> &[u8] {
        self.0.as_slice()
    }
    fn memory(&self) -> &dyn SlotMemory {
        self.0.as_ref()
    }
}

#[test]
fn frames_lent_in_mapped_or_pinned_memory_give_the_tensors_of_copied_frames() {
    let Some(device) = gpu_or_skip("frames_lent_in_mapped_or_pinned_memory_give_the_tensors_of_copied_frames") else {
        return;
    };
    let stream = device.new_stream().expect("stream");
    let mut random = Random::fresh("lent_frames");
    for format in FORMATS {
        let SlotCase { meta, frame, mut preprocessor, mut dst } =
            slot_case(&device, &stream, &mut random, format, TensorDtype::F16);
        let (width, height) = (meta.width, meta.height);
        let copied = filled_slot(Box::new(HeapMemory::with_capacity(frame.len())), &frame, &meta);
        let expected = run_poisoned(&mut preprocessor, &stream, &copied, &mut dst);
        for kind in [HostMemoryKind::Mapped, HostMemoryKind::Pinned] {
            // A pool buffer may be larger than the frame; the slot reads only the frame.
            let mut memory = HostSlotMemory::new(&device, frame.len() + 4096, kind).expect("page-locked");
            memory.as_mut_slice()[..frame.len()].copy_from_slice(&frame);
            memory.as_mut_slice()[frame.len()..].fill(0xEE);
            let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
            slot.lend(width, height, format, Box::new(Loan(Box::new(memory)))).expect("lend");
            let tensor = run_poisoned(&mut preprocessor, &stream, &slot, &mut dst);
            assert!(
                tensor == expected,
                "{} frame lent in {kind:?} memory differs from the copied frame",
                format.name()
            );
        }
    }
}

#[test]
fn one_preprocessor_follows_frame_size_changes() {
    let Some(device) = gpu_or_skip("one_preprocessor_follows_frame_size_changes") else { return };
    let stream = device.new_stream().expect("stream");
    let mut random = Random::fresh("size_changes");
    let spec =
        random_spec(&mut random, TensorLayout::Nhwc, TensorDtype::U8, ResizeKind::Letterbox, ResizeFilter::Antialias);
    let sizes = [(640, 480), (1280, 720), (640, 480), (96, 200)];
    let capacity = sizes.iter().map(|(w, h)| PixelFormat::Yuyv.frame_bytes(*w, *h).expect("size")).max().unwrap_or(0);
    let mut preprocessor = GpuPreprocessor::new(&device, stream.clone(), &spec, None, capacity).expect("preprocessor");
    let mut dst = stream.alloc_zeros::<u8>(spec.bytes()).expect("output");
    for (width, height) in sizes {
        let meta = meta(width, height, PixelFormat::Yuyv);
        let frame = random.bytes(PixelFormat::Yuyv.frame_bytes(width, height).expect("frame size"));
        let mut cpu = vec![0u8; spec.bytes()];
        preprocess_cpu(&frame, &meta, &spec, &mut cpu).expect("cpu preprocessing");
        let slot = filled_slot(gpu::slot_memory(&device).expect("slot"), &frame, &meta);
        let tensor = run_poisoned(&mut preprocessor, &stream, &slot, &mut dst);
        assert_bit_identical(TensorDtype::U8, &tensor, &cpu, &format!("{width}x{height} after a size change"));
    }
}

/// Preprocesses `cameras` (frame, meta, slot kind) into rows `rows` of one batch of `batch_rows`
/// rows poisoned with `poison`, with one synchronisation at the end, and returns the batch.
fn run_batch(
    device: &GpuDevice,
    preprocessor: &mut GpuPreprocessor,
    stream: &std::sync::Arc<CudaStream>,
    cameras: &[(Vec<u8>, FrameMeta)],
    rows: &[usize],
    batch_rows: usize,
    poison: u8,
) -> Vec<u8> {
    let row_bytes = preprocessor.spec().bytes();
    let mut batch = stream.clone_htod(&vec![poison; row_bytes * batch_rows]).expect("poisoned batch");
    let slots: Vec<FrameSlot> =
        cameras.iter().enumerate().map(|(i, (frame, meta))| slot_of_kind(device, i, frame, meta)).collect();
    for (slot, row) in slots.iter().zip(rows) {
        preprocessor.enqueue_row(slot, &mut batch, *row).expect("enqueue row");
    }
    let tensor = stream.clone_dtoh(&batch).expect("download batch");
    stream.synchronize().expect("kernels ran without error");
    tensor
}

#[test]
fn batched_rows_from_different_cameras_match_cpu_row_by_row() {
    let Some(device) = gpu_or_skip("batched_rows_from_different_cameras_match_cpu_row_by_row") else { return };
    let stream = device.new_stream().expect("stream");
    let mut random = Random::fresh("batched_rows");
    // Rows 2 and 5 stay unwritten: they must keep the poison.
    let (rows, guards, batch_rows) = ([0usize, 1, 3, 4, 6, 7], [2usize, 5], 8);
    for layout in LAYOUTS {
        for dtype in DTYPES {
            for (resize, filter) in RESIZES.into_iter().flat_map(|r| FILTERS.map(|f| (r, f))) {
                let spec = random_spec(&mut random, layout, dtype, resize, filter);
                // Five cameras, one per format, each its own size, and a sixth with the YUYV
                // camera's size in RGBA (one set of tap tables, two formats).
                let mut cameras: Vec<(Vec<u8>, FrameMeta)> = FORMATS
                    .iter()
                    .map(|format| {
                        let (width, height) = random_frame_size(&mut random, *format);
                        let frame = random.bytes(format.frame_bytes(width, height).expect("frame size"));
                        (frame, meta(width, height, *format))
                    })
                    .collect();
                let (width, height) = (cameras[3].1.width, cameras[3].1.height);
                let frame = random.bytes(PixelFormat::Rgba8.frame_bytes(width, height).expect("frame size"));
                cameras.push((frame, meta(width, height, PixelFormat::Rgba8)));
                let largest = cameras.iter().map(|(frame, _)| frame.len()).max().unwrap_or(1);
                let mut preprocessor =
                    GpuPreprocessor::new(&device, stream.clone(), &spec, None, largest).expect("preprocessor");
                let batches = [0x00u8, 0xFF]
                    .map(|poison| run_batch(&device, &mut preprocessor, &stream, &cameras, &rows, batch_rows, poison));
                let row_bytes = spec.bytes();
                let row_of = |batch: &[u8], row: usize| batch[row * row_bytes..(row + 1) * row_bytes].to_vec();
                for ((frame, meta), row) in cameras.iter().zip(rows) {
                    let mut cpu = vec![0u8; row_bytes];
                    preprocess_cpu(frame, meta, &spec, &mut cpu).expect("cpu preprocessing");
                    let case = format!("row {row}: {} {}x{} → {spec:?}", meta.format.name(), meta.width, meta.height);
                    for batch in &batches {
                        assert_bit_identical(dtype, &row_of(batch, row), &cpu, &case);
                    }
                }
                for (batch, poison) in batches.iter().zip([0x00u8, 0xFF]) {
                    for guard in guards {
                        assert!(row_of(batch, guard).iter().all(|b| *b == poison), "row {guard} was written to");
                    }
                }
            }
        }
    }
}

#[test]
fn tap_cache_evicts_sizes_while_earlier_rows_are_queued() {
    let Some(device) = gpu_or_skip("tap_cache_evicts_sizes_while_earlier_rows_are_queued") else { return };
    let stream = device.new_stream().expect("stream");
    let mut random = Random::fresh("tap_cache");
    let spec =
        random_spec(&mut random, TensorLayout::Nchw, TensorDtype::F16, ResizeKind::Letterbox, ResizeFilter::Antialias);
    // More sizes than the cache holds, then the first size again (rebuilt after eviction).
    let mut cameras: Vec<(Vec<u8>, FrameMeta)> = (0..TAP_CACHE_SIZES + 3)
        .map(|i| {
            let format = FORMATS[i % FORMATS.len()];
            let (width, height) = (2 * (20 + 7 * i as u32), 2 * (12 + 5 * i as u32));
            (random.bytes(format.frame_bytes(width, height).expect("frame size")), meta(width, height, format))
        })
        .collect();
    cameras.push(cameras[0].clone());
    let rows: Vec<usize> = (0..cameras.len()).collect();
    let largest = cameras.iter().map(|(frame, _)| frame.len()).max().unwrap_or(1);
    let mut preprocessor = GpuPreprocessor::new(&device, stream.clone(), &spec, None, largest).expect("preprocessor");
    let batch = run_batch(&device, &mut preprocessor, &stream, &cameras, &rows, rows.len(), 0xA5);
    let row_bytes = spec.bytes();
    for ((frame, meta), row) in cameras.iter().zip(rows) {
        let mut cpu = vec![0u8; row_bytes];
        preprocess_cpu(frame, meta, &spec, &mut cpu).expect("cpu preprocessing");
        let case = format!("row {row}: {} {}x{}", meta.format.name(), meta.width, meta.height);
        assert_bit_identical(TensorDtype::F16, &batch[row * row_bytes..(row + 1) * row_bytes], &cpu, &case);
    }
}

#[test]
fn rows_outside_the_batch_are_refused() {
    let Some(device) = gpu_or_skip("rows_outside_the_batch_are_refused") else { return };
    let stream = device.new_stream().expect("stream");
    let mut random = Random::fresh("row_bounds");
    let spec =
        random_spec(&mut random, TensorLayout::Nhwc, TensorDtype::U8, ResizeKind::Stretch, ResizeFilter::Bilinear);
    let frame = random.bytes(12);
    let meta = meta(2, 2, PixelFormat::Rgb8);
    let slot = filled_slot(Box::new(HeapMemory::with_capacity(12)), &frame, &meta);
    let mut preprocessor = GpuPreprocessor::new(&device, stream.clone(), &spec, None, 12).expect("preprocessor");
    let mut batch = stream.alloc_zeros::<u8>(3 * spec.bytes()).expect("batch");
    assert!(preprocessor.enqueue_row(&slot, &mut batch, 2).is_ok());
    assert!(preprocessor.enqueue_row(&slot, &mut batch, 3).is_err(), "row 3 of 3");
    let mut ragged = stream.alloc_zeros::<u8>(3 * spec.bytes() + 1).expect("ragged batch");
    assert!(preprocessor.enqueue_row(&slot, &mut ragged, 0).is_err(), "not a whole number of rows");
    assert!(preprocessor.run(&slot, &mut batch).is_err(), "run takes a batch of one");
    stream.synchronize().expect("sync");
}

#[test]
fn page_locked_slots_are_sized_by_the_frames_written_into_them() {
    let Some(device) = gpu_or_skip("page_locked_slots_are_sized_by_the_frames_written_into_them") else { return };
    let memory = gpu::slot_memory(&device).expect("slot");
    assert_eq!(memory.capacity(), 0, "nothing is pinned before the first frame");
    let mut slot = FrameSlot::new(memory);
    slot.prepare(4, 4, PixelFormat::Rgba8).expect("first frame").fill(7);
    assert_eq!(slot.memory().capacity(), 64);
    slot.prepare(2, 2, PixelFormat::Rgba8).expect("a smaller frame fits");
    assert_eq!(slot.memory().capacity(), 64, "a smaller frame does not reallocate");
    slot.prepare(8, 8, PixelFormat::Rgba8).expect("a larger frame grows the slot");
    assert_eq!(slot.memory().capacity(), 256);
    assert!(slot.data().iter().all(|b| *b == 0), "a grown slot holds no stale bytes");
}

/// Telemetry's GPU section is sampled every period, not read once at start: memory taken after the
/// sampler was made shows in its next section.
#[test]
fn the_telemetry_gpu_section_sees_memory_taken_after_start() {
    let Some(device) = gpu_or_skip("the_telemetry_gpu_section_sees_memory_taken_after_start") else {
        return;
    };
    let sampler = jetson_detectd::backend::load::GpuSampler::new(0, true);
    let free = |section: serde_json::Value| section["device"]["free_memory_bytes"].as_u64().expect("free memory");
    let before = free(sampler.section());
    const TAKEN: usize = 512 << 20;
    let stream = device.new_stream().expect("stream");
    let buffer = stream.alloc_zeros::<u8>(TAKEN).expect("allocate 512 MiB");
    stream.synchronize().expect("sync");
    let after = free(sampler.section());
    drop(buffer);
    assert!(before.saturating_sub(after) >= (TAKEN as u64) / 2, "free memory {before} -> {after} after taking {TAKEN}");
}

#[test]
fn kernel_matches_cpu_on_regions_of_interest_of_every_slot_kind() {
    let Some(device) = gpu_or_skip("kernel_matches_cpu_on_regions_of_interest_of_every_slot_kind") else { return };
    let stream = device.new_stream().expect("stream");
    let mut random = Random::fresh("kernel_matches_cpu_on_regions_of_interest");
    let mut cases = 0;
    for format in FORMATS {
        for (resize, filter) in RESIZES.into_iter().flat_map(|r| FILTERS.map(|f| (r, f))) {
            for case in 0..6 {
                let (width, height) = random_frame_size(&mut random, format);
                let layout = LAYOUTS[case % 2];
                let dtype = DTYPES[case % 3];
                let spec = random_spec(&mut random, layout, dtype, resize, filter);
                let meta = meta(width, height, format);
                let frame = random.bytes(format.frame_bytes(width, height).expect("frame size"));
                let (x1, y1) = (random.below(width) as f32, random.below(height) as f32);
                let (x2, y2) = (x1 + 1.0 + random.below(width) as f32, y1 + 1.0 + random.below(height) as f32);
                let roi = Roi::around_box(&meta, x1, y1, x2, y2).expect("a region inside the frame");
                let mut cpu = vec![0u8; spec.bytes()];
                CpuPreprocessor::new().run_roi(&frame, &meta, roi, &spec, &mut cpu).expect("cpu preprocessing");
                let mut preprocessor =
                    GpuPreprocessor::new(&device, stream.clone(), &spec, None, frame.len()).expect("preprocessor");
                let slot = slot_of_kind(&device, case, &frame, &meta);
                let mut dst = stream.alloc_zeros::<u8>(spec.bytes()).expect("output");
                let results = [0x00u8, 0xFF].map(|poison| {
                    stream.memcpy_htod(&vec![poison; dst.len()], &mut dst).expect("poison output");
                    preprocessor.enqueue_roi_row(&slot, roi, &mut dst, 0).expect("enqueue preprocessing");
                    let tensor = stream.clone_dtoh(&dst).expect("download tensor");
                    stream.synchronize().expect("kernel ran without error");
                    tensor
                });
                assert!(results[0] == results[1], "some output bytes were not written");
                let label = format!("{} {width}x{height} region {roi} → {spec:?}", format.name());
                assert_bit_identical(dtype, &results[0], &cpu, &label);
                cases += 1;
            }
        }
    }
    let outside = Roi { x: 1, y: 0, width: 4, height: 4 };
    let spec =
        random_spec(&mut random, TensorLayout::Nchw, TensorDtype::U8, ResizeKind::Stretch, ResizeFilter::Bilinear);
    let nv12 = meta(16, 16, PixelFormat::Nv12);
    let frame = vec![0u8; PixelFormat::Nv12.frame_bytes(16, 16).expect("size")];
    let mut preprocessor =
        GpuPreprocessor::new(&device, stream.clone(), &spec, None, frame.len()).expect("preprocessor");
    let slot = slot_of_kind(&device, 2, &frame, &nv12);
    let mut dst = stream.alloc_zeros::<u8>(spec.bytes()).expect("output");
    assert!(preprocessor.enqueue_roi_row(&slot, outside, &mut dst, 0).is_err(), "an odd NV12 origin is refused");
    let _ = writeln!(std::io::stderr(), "{cases} region cases, all bit-identical to the CPU implementation");
}

/// Motion (issue 48): the luma kernel gives the CPU reference's bytes on random frames of every
/// format and size, from mapped, pinned and heap slots and from device memory, including frames
/// whose height gives cells of more than one pixel and sizes that leave columns and rows out.
#[test]
fn the_motion_luma_kernel_gives_the_cpu_references_bytes() {
    use jetson_detectd::gpu::GpuLumaSampler;
    use jetson_detectd::motion::{downscale_reference, LumaImage};

    let test = "the_motion_luma_kernel_gives_the_cpu_references_bytes";
    let Some(device) = gpu_or_skip(test) else { return };
    let mut random = Random::fresh(test);
    let mut sampler = GpuLumaSampler::new(&device, None).expect("luma sampler");
    let stream = device.new_stream().expect("stream");
    let (mut expected, mut actual) = (LumaImage::default(), LumaImage::default());
    for round in 0..40 {
        for format in FORMATS {
            let (mut width, mut height) = match round {
                0 => (1920, 1080),
                1 => (1282, 722),
                // 256-pixel cells, the largest: a column of one cell sums 65 280.
                2 => (64, 23_040),
                _ => (random.range(1, 700), random.range(1, 800)),
            };
            if matches!(format, PixelFormat::Yuyv | PixelFormat::Nv12) {
                width = (width + 1) & !1;
            }
            if format == PixelFormat::Nv12 {
                height = (height + 1) & !1;
            }
            let frame = random.bytes(format.frame_bytes(width, height).expect("size"));
            let meta = meta(width, height, format);
            downscale_reference(&frame, &meta, &mut expected).expect("reference");
            let case = format!("{format:?} {width}x{height}");
            for kind in 0..3 {
                let slot = slot_of_kind(&device, kind, &frame, &meta);
                sampler.run(&slot, &mut actual).expect("luma from a slot");
                assert_eq!(actual, expected, "{case}, slot kind {kind}");
            }
            let on_device = stream.clone_htod(&frame).expect("copy the frame");
            sampler.run_device(&on_device, &meta, &mut actual).expect("luma from device memory");
            assert_eq!(actual, expected, "{case}, device memory");
        }
    }
}

/// Motion gating on the GPU path (issue 48): a camera's gate with the GPU's luma sampler judges
/// every frame as the CPU-only gate does (verdicts and regions), from mapped, pinned and heap
/// slots, with the sampler's own bound and with a bound of zero, which makes most frames late and
/// declined (the gate then downscales them on the CPU, and the kernel is not asked again until the
/// late one is done). A sampler given time makes every frame's image itself, the CPU reference's
/// bytes.
#[test]
fn the_motion_gate_with_the_gpu_sampler_judges_as_on_the_cpu_also_when_the_kernel_is_late() {
    use std::time::Duration;

    use jetson_detectd::gpu::{GpuLumaSampler, LATE_AFTER};
    use jetson_detectd::infer::gating::{CameraGate, CameraMotion};
    use jetson_detectd::motion::{downscale_reference, luma_bytes, LumaImage, LumaSampler, MotionParams, Sampled};

    let test = "the_motion_gate_with_the_gpu_sampler_judges_as_on_the_cpu_also_when_the_kernel_is_late";
    let Some(device) = gpu_or_skip(test) else { return };
    let mut random = Random::fresh(test);
    let settings = || CameraMotion { params: MotionParams::default(), masks: Vec::new(), detect_interval_s: 5.0 };
    let (width, height) = (1920, 1080);
    let (mut declined, mut frames) = (0, 0);
    for format in FORMATS {
        let base = random.bytes(format.frame_bytes(width, height).expect("size"));
        let row_bytes = width as usize * luma_bytes(format);
        // Frame `i`: the still scene, with a bright block crossing it on frames 5..12.
        let frame = |i: usize| {
            let mut frame = base.clone();
            if (5..12).contains(&i) {
                let left = i * 120 * luma_bytes(format);
                for y in 400..600 {
                    frame[y * row_bytes + left..y * row_bytes + left + 240 * luma_bytes(format)].fill(235);
                }
            }
            frame
        };
        for kind in 0..3 {
            for bound in [LATE_AFTER, Duration::ZERO] {
                let case = format!("{format:?}, slot kind {kind}, bound {bound:?}");
                let sampler = GpuLumaSampler::new(&device, None).expect("luma sampler").late_after(bound);
                let mut gpu_gate = CameraGate::new(settings()).with_sampler(Some(Box::new(sampler)));
                let mut cpu_gate = CameraGate::new(settings());
                let mut slot = slot_of_kind(&device, kind, &frame(0), &meta(width, height, format));
                for i in 0..20 {
                    slot.prepare(width, height, format).expect("slot").copy_from_slice(&frame(i));
                    slot.meta_mut().captured_at = UNIX_EPOCH + Duration::from_secs_f64(1e9 + i as f64 * 0.2);
                    let on_gpu = gpu_gate.judge("gpu", &slot, true, true);
                    let on_cpu = cpu_gate.judge("cpu", &slot, true, true);
                    assert_eq!(on_gpu, on_cpu, "{case}, frame {i}");
                    assert_eq!(gpu_gate.motion(), cpu_gate.motion(), "{case}, frame {i}");
                }
                // The sampler alone, given time (a failure guard, not a measure): always ready.
                let mut sampler = GpuLumaSampler::new(&device, None).expect("luma sampler").late_after(bound);
                let patient = Duration::from_secs(60);
                let mut waited = GpuLumaSampler::new(&device, None).expect("luma sampler").late_after(patient);
                let (mut expected, mut actual) = (LumaImage::default(), LumaImage::default());
                for i in 0..20 {
                    slot.prepare(width, height, format).expect("slot").copy_from_slice(&frame(i));
                    downscale_reference(slot.data(), slot.meta(), &mut expected).expect("reference");
                    frames += 1;
                    match sampler.sample(&slot, &mut actual).expect("the sampler works") {
                        Sampled::Ready => assert_eq!(actual, expected, "{case}, frame {i}"),
                        Sampled::Declined => declined += 1,
                    }
                    assert_eq!(waited.sample(&slot, &mut actual), Ok(Sampled::Ready), "{case}, frame {i}");
                    assert_eq!(actual, expected, "{case}, frame {i}, given time");
                }
            }
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "{test}: {declined} of {frames} frames declined (half the rounds with a zero bound)"
    );
}
