//! What event clips cost (cargo feature `gstreamer`), on a 1080p30 H.264 stream of about 4 Mbit/s
//! with a keyframe every second (`videotestsrc pattern=snow` through x264, made once in memory):
//!
//! 1. Passthrough, per camera: the tap's work on the GStreamer thread (the access unit copied and
//!    handed over, timed on this thread) and the recorder thread's (pre-roll, and a clip written
//!    for the whole stream: NAL units rewritten, fragments written and synced), as CPU time per
//!    second of video, i.e. the share of one core at 30 frames/s.
//! 2. Memory, 4 cameras: the pre-roll of 4 recorder threads fed the stream in real time
//!    (`pre_s` = 5), as their own counters say, against bitrate × span + one GOP. (This process's
//!    RSS cannot show it: the allocator reuses what building the stream freed.)
//! 3. The software encoder (x264 on one thread, `superfast`) per 1080p frame, encoding at 1280 wide
//!    (the default `max_width`) and at 1920: CPU time of the whole process per frame.
//!
//! Not a test: it prints numbers and asserts nothing about time.
//!
//!     cargo bench --features gstreamer --bench record [-- SECONDS]
//!
//! SECONDS (default 12) is how long the memory part feeds the cameras in real time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use jetson_detectd::config::record::{EncoderChoice, EncoderConfig, Recording};
use jetson_detectd::frame::PixelFormat;
use jetson_detectd::record::camera::{CameraContext, CameraRecordStats, CameraThread, Pause};
use jetson_detectd::record::clip::clip_name;
use jetson_detectd::record::encode::{choose, Encoder};
use jetson_detectd::record::index::ClipIndex;
use jetson_detectd::record::plan::{Command, EVENT_LAG};
use jetson_detectd::record::retention::Retention;
use jetson_detectd::source::tap::{AccessUnit, RawFrame, RecordTap, StreamFormat, VideoCodec};

#[path = "common/proc_cpu.rs"]
mod proc_cpu;

use proc_cpu::{process_cpu_time, thread_cpu_time};

const FPS: u64 = 30;
const STREAM_SECONDS: u64 = 20;
const PRE_S: u64 = 5;

/// A pipeline's appsink samples, pulled to the end of the stream.
fn pull_all(description: &str) -> Vec<gst::Sample> {
    let pipeline = gst::parse::launch(description).expect("pipeline").downcast::<gst::Pipeline>().expect("a pipeline");
    let sink = pipeline.by_name("sink").and_then(|e| e.downcast::<gst_app::AppSink>().ok()).expect("appsink sink");
    pipeline.set_state(gst::State::Playing).expect("play");
    let mut samples = Vec::new();
    while let Ok(sample) = sink.pull_sample() {
        samples.push(sample);
    }
    let _ = pipeline.set_state(gst::State::Null);
    samples
}

/// The stream: access units stamped as if captured from `start` on.
fn stream(start: SystemTime) -> Vec<AccessUnit> {
    let frames = STREAM_SECONDS * FPS;
    let samples = pull_all(&format!(
        "videotestsrc num-buffers={frames} pattern=snow ! video/x-raw,width=1920,height=1080,framerate={FPS}/1 ! \
         x264enc tune=zerolatency speed-preset=ultrafast bitrate=4000 key-int-max={FPS} ! h264parse ! \
         video/x-h264,stream-format=byte-stream,alignment=au ! appsink name=sink sync=false"
    ));
    let format = Arc::new(StreamFormat {
        codec: VideoCodec::H264,
        width: 1920,
        height: 1080,
        nal_length_size: None,
        codec_data: None,
    });
    samples
        .iter()
        .filter_map(|sample| {
            let buffer = sample.buffer()?;
            let map = buffer.map_readable().ok()?;
            let segment = sample.segment()?.downcast_ref::<gst::ClockTime>()?.clone();
            let running = Duration::from_nanos(segment.to_running_time(buffer.pts()?)?.nseconds());
            Some(AccessUnit {
                data: Arc::from(map.as_slice()),
                format: format.clone(),
                keyframe: !buffer.flags().contains(gst::BufferFlags::DELTA_UNIT),
                dts: None,
                pts: Some(running),
                captured_at: start + running,
            })
        })
        .collect()
}

fn recording() -> Recording {
    Recording {
        pre: Duration::from_secs(PRE_S),
        post: Duration::from_secs(5),
        labels: Vec::new(),
        zones: Vec::new(),
        min_event: Duration::ZERO,
        max_clip: Duration::from_secs(300),
        preroll_max_bytes: 32 << 20,
        encoder: EncoderConfig { kind: EncoderChoice::None, fps: 5.0, max_width: 1280, bitrate_kbps: 2000 },
    }
}

/// A recorder thread for camera `name` writing into `root`; returns its tap, its command sender,
/// its figures and the thread, which returns its own CPU time.
fn recorder(
    name: &str,
    root: &std::path::Path,
    stop: &Arc<AtomicBool>,
) -> (RecordTap, std::sync::mpsc::SyncSender<Command>, Arc<CameraRecordStats>, std::thread::JoinHandle<Duration>) {
    let (tap, items) = RecordTap::new(None);
    let (commands, command_rx) = sync_channel(16);
    let stats = Arc::new(CameraRecordStats::new(tap.stats().clone()));
    let (finished, _) = sync_channel(1);
    let index = Arc::new(ClipIndex::default());
    let context = CameraContext {
        camera: name.into(),
        recording: recording(),
        span: Duration::from_secs(PRE_S) + EVENT_LAG,
        root: root.to_path_buf(),
        retention: Arc::new(Retention::new(root.to_path_buf(), index.clone(), u64::MAX, None)),
        index,
        pause: Arc::new(Pause::default()),
        stats: stats.clone(),
        finished,
    };
    let stop = stop.clone();
    // No processed frames: the bench measures the video's path alone.
    let (_, boxes_rx) = sync_channel(1);
    let thread = std::thread::spawn(move || {
        let start = thread_cpu_time();
        CameraThread::new(context).run(items, command_rx, boxes_rx, &stop);
        thread_cpu_time() - start
    });
    (tap, commands, stats, thread)
}

fn passthrough(units: &[AccessUnit], dir: &std::path::Path) {
    let stop = Arc::new(AtomicBool::new(false));
    let (tap, commands, stats, thread) = recorder("pass", dir, &stop);
    let first = units[0].captured_at;
    commands.send(Command::Start { name: clip_name("pass", first, 1), track: 1, from: UNIX_EPOCH }).expect("command");
    // Ten times real time: the recorder's queue never fills. The pacing's own CPU time (the
    // sleeps) is measured apart and taken off.
    let pause = Duration::from_micros(1_000_000 / FPS / 10);
    let pacing = {
        let started = thread_cpu_time();
        units.iter().for_each(|_| std::thread::sleep(pause));
        thread_cpu_time() - started
    };
    let started = thread_cpu_time();
    for unit in units {
        // The probe's work: the access unit's bytes copied out of the buffer, handed over.
        let copy = AccessUnit { data: Arc::from(&unit.data[..]), ..unit.clone() };
        tap.offer_unit(copy);
        std::thread::sleep(pause);
    }
    let tap_cpu = (thread_cpu_time() - started).saturating_sub(pacing);
    drop(tap);
    let recorder_cpu = thread.join().expect("the recorder thread");
    let seconds = units.len() as f64 / FPS as f64;
    let dropped = stats.tap.dropped.load(Ordering::Relaxed);
    let bytes: u64 = units.iter().map(|u| u.data.len() as u64).sum();
    let share = |cpu: Duration| cpu.as_secs_f64() / seconds * 100.0;
    println!(
        "passthrough, 1080p{FPS} H.264 at {:.1} Mbit/s, {seconds:.0} s recorded into one clip ({} fragments' fsync): \
         tap {:.4} % of one core ({:.1} µs a unit), recorder thread {:.3} % ({:.1} µs a unit), together {:.3} %; \
         {dropped} dropped",
        bytes as f64 * 8.0 / seconds / 1e6,
        seconds as u64,
        share(tap_cpu),
        tap_cpu.as_secs_f64() * 1e6 / units.len() as f64,
        share(recorder_cpu),
        recorder_cpu.as_secs_f64() * 1e6 / units.len() as f64,
        share(tap_cpu + recorder_cpu),
    );
}

fn memory(units: &[AccessUnit], dir: &std::path::Path, seconds: u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let cameras: Vec<_> = (0..4).map(|n| recorder(&format!("cam{n}"), dir, &stop)).collect();
    let started = Instant::now();
    let start = SystemTime::now();
    let mut sent = 0usize;
    while started.elapsed() < Duration::from_secs(seconds) {
        let due = (started.elapsed().as_secs_f64() * FPS as f64) as usize;
        while sent <= due {
            let unit = &units[sent % units.len()];
            let restamped = AccessUnit {
                data: Arc::from(&unit.data[..]),
                pts: Some(Duration::from_nanos(sent as u64 * 1_000_000_000 / FPS)),
                captured_at: start + Duration::from_nanos(sent as u64 * 1_000_000_000 / FPS),
                ..unit.clone()
            };
            for (tap, _, _, _) in &cameras {
                tap.offer_unit(restamped.clone());
            }
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    let preroll: u64 = cameras.iter().map(|(_, _, stats, _)| stats.preroll_bytes.load(Ordering::Relaxed)).sum();
    let gop: u64 = units.iter().take(FPS as usize).map(|u| u.data.len() as u64).sum();
    let per_second: u64 = units.iter().map(|u| u.data.len() as u64).sum::<u64>() / STREAM_SECONDS;
    let span = PRE_S + EVENT_LAG.as_secs();
    println!(
        "4 cameras, pre_s = {PRE_S} (+ {} s of event lag) in real time for {seconds} s: pre-roll {:.1} MiB in all, \
         {:.2} MiB a camera (bitrate x {span} s + one GOP = {:.2} MiB)",
        EVENT_LAG.as_secs(),
        preroll as f64 / 1048576.0,
        preroll as f64 / 4.0 / 1048576.0,
        (per_second * span + gop) as f64 / 1048576.0,
    );
    stop.store(true, Ordering::SeqCst);
    for (tap, commands, _, thread) in cameras {
        drop((tap, commands));
        let _ = thread.join();
    }
}

fn software_encoder(max_width: u32) {
    let Ok(kind) = choose(EncoderChoice::Software) else {
        println!("software encoder: no x264enc here");
        return;
    };
    let frames: Vec<Vec<u8>> = pull_all(
        "videotestsrc num-buffers=60 pattern=ball ! video/x-raw,format=NV12,width=1920,height=1080,framerate=30/1 ! \
         appsink name=sink sync=false",
    )
    .iter()
    .filter_map(|sample| Some(sample.buffer()?.map_readable().ok()?.as_slice().to_vec()))
    .collect();
    let config = EncoderConfig { kind: EncoderChoice::Software, fps: 5.0, max_width, bitrate_kbps: 2000 };
    let mut encoder = Encoder::new(kind, config);
    let start = SystemTime::now();
    let mut units = Vec::new();
    let (cpu_started, wall_started) = (process_cpu_time(), Instant::now());
    for (n, data) in frames.into_iter().enumerate() {
        let captured_at = start + Duration::from_millis(n as u64 * 200);
        let frame = RawFrame { data, width: 1920, height: 1080, format: PixelFormat::Nv12, captured_at };
        encoder.encode(frame).expect("encode");
        // One frame at a time, as a camera sends them at the encoder's rate.
        let deadline = Instant::now() + Duration::from_secs(30);
        while units.len() <= n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            encoder.drain(&mut units);
        }
    }
    let (cpu, wall) = (process_cpu_time() - cpu_started, wall_started.elapsed());
    let n = units.len().max(1) as f64;
    let width = units.first().map_or(0, |u| u.format.width);
    let per_frame = cpu.as_secs_f64() * 1000.0 / n;
    println!(
        "software encoder ({}, 1 thread, superfast), 1080p NV12 in, {width} wide out: {per_frame:.1} ms of CPU a frame \
         ({:.1} ms wall), {:.0} % of one core at 5 frames/s; {} frames, {} dropped",
        kind.name(),
        wall.as_secs_f64() * 1000.0 / n,
        per_frame * 5.0 / 10.0,
        units.len(),
        encoder.dropped
    );
}

fn main() {
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(12);
    gst::init().expect("GStreamer");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    let dir = tempfile::tempdir().expect("tempdir");
    let units = stream(SystemTime::now());
    passthrough(&units, dir.path());
    memory(&units, dir.path(), seconds);
    software_encoder(1280);
    software_encoder(1920);
}
