//! CPU time of a GStreamer camera's source thread per frame, with the slot pool (upstream writes
//! each frame into slot memory; the slot borrows the buffer) against the one copy into the slot,
//! in the same run: 1080p H.264 decoded in software (`avdec_h264 ! videoconvert` to NV12, the
//! RTSP pipeline's chain) and paced at 30 frames/s by the pipeline clock.
//!
//! Not a test: it prints numbers and asserts nothing about time.
//!
//!     cargo bench --features gstreamer --bench gst_capture [-- SECONDS_PER_ROUND ROUNDS]
//!
//! The clip (10 s of `videotestsrc` encoded by x264) is made once into a temporary directory. Each
//! round runs the pool and the copy variant one after the other (alternating which goes first)
//! for SECONDS_PER_ROUND (default 10) and reports, per frame: the source thread's CPU time (taking
//! the sample, and copying it or lending it) and the process's CPU time (the GStreamer threads that
//! parse, decode and convert included).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jetson_detectd::config::LimitsConfig;
use jetson_detectd::frame::{FrameRing, SlotAllocator};
use jetson_detectd::source::gstreamer::{GstreamerOptions, GstreamerSource, PipelineSpec};
use jetson_detectd::source::{Capture, FrameSource};

#[path = "common/proc_cpu.rs"]
mod proc_cpu;

use proc_cpu::{process_cpu_time, thread_cpu_time};

const LIMITS: LimitsConfig = LimitsConfig { max_width: 4096, max_height: 4096, max_alloc_mib: 256 };
const CLIP_FRAMES: u32 = 300;

fn make_clip(path: &std::path::Path) {
    let description = format!(
        "videotestsrc num-buffers={CLIP_FRAMES} pattern=ball ! video/x-raw,width=1920,height=1080,framerate=30/1 ! \
         x264enc speed-preset=ultrafast key-int-max=30 ! video/x-h264,stream-format=byte-stream ! filesink location={}",
        path.display()
    );
    let status = std::process::Command::new("gst-launch-1.0")
        .args(["-q"])
        .args(description.split_whitespace())
        .status()
        .expect("gst-launch-1.0 (gstreamer1.0-tools) runs");
    assert!(status.success(), "making the clip failed");
}

struct Round {
    frames: u64,
    source_thread: Duration,
    process: Duration,
    wall: Duration,
    copies: u64,
}

fn run(clip: &std::path::Path, offer_pool: bool, seconds: u64) -> Round {
    // The clip loops (multifilesrc) so a round can be longer than the clip; identity paces it.
    let pipeline = format!(
        "multifilesrc location={} loop=true caps=video/x-h264,stream-format=byte-stream,framerate=30/1 ! h264parse ! \
         avdec_h264 ! identity sync=true ! videoconvert ! video/x-raw,format=NV12 ! appsink name=sink",
        clip.display()
    );
    let options = GstreamerOptions { offer_pool, slots: SlotAllocator::heap(), ..GstreamerOptions::default() };
    let stop = Arc::new(AtomicBool::new(false));
    let mut source =
        GstreamerSource::with_options(PipelineSpec::Launch(pipeline), options, LIMITS, stop).expect("pipeline starts");
    let ring = FrameRing::with_heap_slots(3, 0);
    let mut next = |count: bool, round: &mut Round| {
        let mut slot = ring.acquire_for_write().expect("a free slot");
        let captured = source.next_frame(&mut slot).expect("a frame");
        if captured == Capture::Frame && count {
            round.frames += 1;
            round.copies += u64::from(slot.copies());
        }
        ring.publish(slot);
        if let Some(done) = ring.try_take_ready() {
            ring.release(done);
        }
    };
    let mut round =
        Round { frames: 0, source_thread: Duration::ZERO, process: Duration::ZERO, wall: Duration::ZERO, copies: 0 };
    let warm_until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < warm_until {
        next(false, &mut round);
    }
    let (thread0, process0, wall0) = (thread_cpu_time(), process_cpu_time(), Instant::now());
    while wall0.elapsed() < Duration::from_secs(seconds) {
        next(true, &mut round);
    }
    round.source_thread = thread_cpu_time() - thread0;
    round.process = process_cpu_time() - process0;
    round.wall = wall0.elapsed();
    assert_eq!(source.capture_mode() == jetson_detectd::frame::CaptureMode::Pool, offer_pool, "capture mode");
    round
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|arg| arg != "--bench");
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let dir = tempfile::tempdir().expect("temporary directory");
    let clip = dir.path().join("clip.h264");
    make_clip(&clip);
    println!("1080p H.264 at 30 fps (avdec_h264 ! videoconvert -> NV12), {seconds} s per variant and round");
    println!("round | variant | frames/s | source thread ms/frame | process CPU ms/frame | copies/frame");
    for round in 0..rounds {
        let order = if round % 2 == 0 { [true, false] } else { [false, true] };
        for offer_pool in order {
            let result = run(&clip, offer_pool, seconds);
            let per_frame = |total: Duration| total.as_secs_f64() * 1000.0 / result.frames.max(1) as f64;
            println!(
                "{round} | {} | {:.1} | {:.3} | {:.2} | {:.2}",
                if offer_pool { "pool" } else { "copy" },
                result.frames as f64 / result.wall.as_secs_f64(),
                per_frame(result.source_thread),
                per_frame(result.process),
                result.copies as f64 / result.frames.max(1) as f64
            );
        }
    }
}
