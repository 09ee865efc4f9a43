//! Camera sources end to end: generated MJPEG and YUYV frames go through a fake V4L2 device into
//! the real `V4l2Source`, across a `FrameRing` to a consumer thread; a real `/dev/video*` smoke
//! test and (with `--features gstreamer`) a real `videotestsrc` pipeline run where they can, alone
//! and through the whole daemon to MQTT.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use image::codecs::jpeg::JpegEncoder;
use jetson_detectd::config::{Config, LimitsConfig};
use jetson_detectd::frame::{FrameRing, PixelFormat, SlotAllocator};
use jetson_detectd::source::v4l2::{
    Capabilities, CaptureDevice, DeviceError, DriverFormat, Filled, FourCc, RawFrame, SourceState, UserBuffer,
    UserptrStart, V4l2Format, V4l2Options, V4l2Request, V4l2Source,
};
use jetson_detectd::source::{Capture, FrameSource};

/// The default `[limits]`.
fn limits() -> LimitsConfig {
    Config::embedded_default().expect("embedded default config").limits
}

/// A camera that plays back recorded buffers, then raises the stop flag as a daemon shutdown would.
struct RecordedCamera {
    format: DriverFormat,
    buffers: VecDeque<Vec<u8>>,
    stop: Arc<AtomicBool>,
}

impl CaptureDevice for RecordedCamera {
    fn capabilities(&mut self) -> Result<Capabilities, DeviceError> {
        Ok(Capabilities::from_querycap(b"uvcvideo\0", b"Recorded Camera\0", 0x8400_0001, 0x0400_0001))
    }
    fn set_format(&mut self, _: u32, _: u32, _: FourCc) -> Result<DriverFormat, DeviceError> {
        Ok(self.format)
    }
    fn set_frame_rate(&mut self, fps: u32) -> Result<Option<f64>, DeviceError> {
        Ok(Some(f64::from(fps)))
    }
    fn start(&mut self, _: u32) -> Result<(), DeviceError> {
        Ok(())
    }
    fn start_userptr(&mut self, _: &[Arc<UserBuffer>]) -> Result<UserptrStart, DeviceError> {
        Ok(UserptrStart::Refused("a recording plays back from its own buffers".into()))
    }
    fn requeue(&mut self, index: u32) -> Result<(), DeviceError> {
        Err(DeviceError::Permanent(format!("no user-pointer buffer {index} was dequeued")))
    }
    fn dequeue_user(&mut self, _: Duration) -> Result<Option<Filled>, DeviceError> {
        Ok(None)
    }
    fn dequeue(&mut self, _: Duration, consume: &mut dyn FnMut(RawFrame<'_>)) -> Result<bool, DeviceError> {
        match self.buffers.pop_front() {
            Some(buffer) => {
                consume(RawFrame { data: &buffer, captured_at: SystemTime::now(), flagged_corrupt: false });
                Ok(true)
            }
            None => {
                self.stop.store(true, Ordering::Relaxed);
                Ok(false)
            }
        }
    }
}

struct Captured {
    width: u32,
    height: u32,
    format: PixelFormat,
    data: Vec<u8>,
}

/// Plays `buffers` through a V4L2 source on a producer thread into a frame ring and returns what
/// the consumer thread received. The ring has a slot more than there are buffers, so drop-oldest
/// never hides a frame from the check.
fn capture_through_ring(format: V4l2Format, driver_format: DriverFormat, buffers: Vec<Vec<u8>>) -> Vec<Captured> {
    let stop = Arc::new(AtomicBool::new(false));
    let ring = Arc::new(FrameRing::with_heap_slots(buffers.len() + 1, 0));
    let request = V4l2Request {
        device: "/dev/video-recorded".into(),
        width: driver_format.width,
        height: driver_format.height,
        fps: 30,
        format,
        limits: limits(),
    };
    let mut recorded = Some(RecordedCamera { format: driver_format, buffers: buffers.into(), stop: stop.clone() });
    let opener = move |_: &Path| -> Result<Box<dyn CaptureDevice>, DeviceError> {
        let camera = recorded.take().ok_or_else(|| DeviceError::Transient("the recording was played once".into()))?;
        Ok(Box::new(camera))
    };
    let mut source = V4l2Source::with_opener(request, V4l2Options::default(), opener, stop).expect("open");
    let status = source.connection_status().expect("a camera has a connection");

    let producer_ring = ring.clone();
    let producer = std::thread::spawn(move || {
        loop {
            let mut slot = producer_ring.acquire_for_write().expect("a free slot");
            match source.next_frame(&mut slot).expect("no source error") {
                Capture::Frame | Capture::TruncatedFrame => producer_ring.publish(slot),
                Capture::Retry | Capture::OverLimit => producer_ring.release(slot),
                Capture::End => {
                    producer_ring.release(slot);
                    break;
                }
            }
        }
        producer_ring.close();
    });
    let mut frames = Vec::new();
    while !ring.is_finished() {
        if let Some(slot) = ring.take_ready(Duration::from_millis(50)) {
            let meta = slot.meta();
            frames.push(Captured {
                width: meta.width,
                height: meta.height,
                format: meta.format,
                data: slot.data().to_vec(),
            });
            ring.release(slot);
        }
    }
    producer.join().expect("producer thread");
    assert_eq!(ring.stats().dropped.load(Ordering::Relaxed), 0);
    assert_eq!(status.get(), SourceState::Stopped);
    frames
}

/// A frame whose left half is `left` and right half `right`, so that decoding mistakes (swapped
/// channels, wrong size, mirrored rows) show up.
fn two_tone_rgb(width: u32, height: u32, left: [u8; 3], right: [u8; 3]) -> Vec<u8> {
    (0..height).flat_map(|_| (0..width).flat_map(move |x| if x < width / 2 { left } else { right })).collect()
}

fn encode_jpeg(rgb: &[u8], width: u32, height: u32) -> Vec<u8> {
    let mut jpeg = Vec::new();
    JpegEncoder::new_with_quality(&mut jpeg, 95)
        .encode(rgb, width, height, image::ExtendedColorType::Rgb8)
        .expect("encode");
    jpeg
}

/// Turns an ordinary JPEG into what UVC cameras send: an `AVI1` APP0 marker and no Huffman tables.
fn as_uvc_mjpeg(jpeg: &[u8]) -> Vec<u8> {
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&[0xFF, 0xE0, 0x00, 0x07, b'A', b'V', b'I', b'1', 0x00]);
    let mut at = 2;
    while jpeg[at] == 0xFF && jpeg[at + 1] != 0xDA {
        let len = usize::from(u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]));
        if jpeg[at + 1] != 0xC4 && jpeg[at + 1] != 0xE0 {
            out.extend_from_slice(&jpeg[at..at + 2 + len]);
        }
        at += 2 + len;
    }
    out.extend_from_slice(&jpeg[at..]);
    out
}

fn assert_pixel_close(actual: &[u8], expected: [u8; 3], what: &str) {
    for (a, e) in actual.iter().zip(expected) {
        assert!(a.abs_diff(e) <= 6, "{what}: {actual:?} vs {expected:?}");
    }
}

#[test]
fn recorded_mjpeg_frames_arrive_decoded_as_rgb() {
    let (width, height) = (64, 48);
    let colours = [([250, 10, 10], [10, 10, 250]), ([20, 200, 40], [240, 240, 240]), ([0, 0, 0], [128, 64, 32])];
    let mut buffers: Vec<Vec<u8>> = colours
        .iter()
        .map(|&(left, right)| encode_jpeg(&two_tone_rgb(width, height, left, right), width, height))
        .collect();
    buffers[1] = as_uvc_mjpeg(&buffers[1]);
    let corrupt = buffers[0][..buffers[0].len() / 3].to_vec();
    buffers.insert(1, corrupt);
    let driver_format =
        DriverFormat { width, height, fourcc: FourCc::MJPG, bytes_per_line: 0, size_image: width * height * 2 };

    let frames = capture_through_ring(V4l2Format::Mjpeg, driver_format, buffers);

    assert_eq!(frames.len(), 3, "the truncated JPEG is skipped, the rest arrive");
    for (frame, &(left, right)) in frames.iter().zip(&colours) {
        assert_eq!((frame.width, frame.height, frame.format), (width, height, PixelFormat::Rgb8));
        assert_eq!(frame.data.len(), (width * height * 3) as usize);
        let row = (height as usize / 2) * width as usize * 3;
        assert_pixel_close(&frame.data[row + 8 * 3..row + 9 * 3], left, "left half");
        assert_pixel_close(&frame.data[row + 56 * 3..row + 57 * 3], right, "right half");
    }
}

#[test]
fn recorded_yuyv_frames_arrive_raw_without_row_padding() {
    let (width, height, padding) = (32u32, 6u32, 16u32);
    let stride = width * 2 + padding;
    let frame_bytes = |seed: u8| -> Vec<u8> {
        (0..height)
            .flat_map(|row| {
                (0..stride)
                    .map(move |col| if col < width * 2 { seed.wrapping_add((row * 7 + col) as u8) } else { 0xEE })
            })
            .collect()
    };
    let buffers = vec![frame_bytes(0), frame_bytes(100), frame_bytes(200)];
    let driver_format =
        DriverFormat { width, height, fourcc: FourCc::YUYV, bytes_per_line: stride, size_image: stride * height };

    let frames = capture_through_ring(V4l2Format::Yuyv, driver_format, buffers.clone());

    assert_eq!(frames.len(), 3);
    for (frame, buffer) in frames.iter().zip(&buffers) {
        assert_eq!((frame.width, frame.height, frame.format), (width, height, PixelFormat::Yuyv));
        let expected: Vec<u8> =
            buffer.chunks_exact(stride as usize).flat_map(|row| row[..(width * 2) as usize].to_vec()).collect();
        assert_eq!(frame.data, expected);
    }
}

#[test]
fn a_file_that_is_not_a_v4l2_device_fails_at_open_with_the_ioctl_named() {
    let stop = Arc::new(AtomicBool::new(false));
    let err = V4l2Source::open(
        Path::new("/dev/null"),
        640,
        480,
        30,
        V4l2Format::Yuyv,
        limits(),
        stop,
        &SlotAllocator::heap(),
    )
    .err()
    .expect("/dev/null answers VIDIOC_QUERYCAP with ENOTTY");
    assert!(err.to_string().contains("VIDIOC_QUERYCAP"), "{err}");
}

#[test]
fn a_missing_device_starts_reconnecting_and_stops_on_request() {
    let stop = Arc::new(AtomicBool::new(false));
    let device = Path::new("/dev/video-jetson-detectd-test-missing");
    let mut source =
        V4l2Source::open(device, 640, 480, 30, V4l2Format::Mjpeg, limits(), stop.clone(), &SlotAllocator::heap())
            .expect("a missing camera is retried");
    match source.state() {
        SourceState::Reconnecting { attempt: 1, last_error } => {
            assert!(last_error.contains("No such file"), "{last_error}")
        }
        other => panic!("unexpected state {other:?}"),
    }
    let ring = FrameRing::with_heap_slots(2, 0);
    let mut slot = ring.acquire_for_write().expect("slot");
    assert_eq!(source.next_frame(&mut slot).expect("waiting"), Capture::Retry);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(source.next_frame(&mut slot).expect("stopped"), Capture::End);
    assert_eq!(source.state(), SourceState::Stopped);
}

/// A real camera, when this machine has one: the first capture node must open and stream. Nodes
/// that are not capture nodes (a UVC camera's metadata node) are passed over; any other failure
/// to open fails the test. With `JETSON_DETECTD_REQUIRE_CAMERA=1` (a bench with a camera
/// attached), finding no capture node fails it too.
#[test]
fn real_v4l2_camera_smoke_test() {
    let required = std::env::var_os("JETSON_DETECTD_REQUIRE_CAMERA").is_some_and(|v| v == "1");
    let mut devices: Vec<_> = std::fs::read_dir("/dev")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("video")))
                .collect()
        })
        .unwrap_or_default();
    devices.sort();
    let mut passed_over = Vec::new();
    let opened = devices.iter().find_map(|device| {
        let stop = Arc::new(AtomicBool::new(false));
        match V4l2Source::open(device, 640, 480, 30, V4l2Format::Mjpeg, limits(), stop, &SlotAllocator::heap()) {
            Ok(source) => Some(source),
            Err(err) if err.to_string().contains("is not a video capture node") => {
                passed_over.push(format!("{}: {err}", device.display()));
                None
            }
            Err(err) => panic!("{} is a V4L2 node but does not open: {err}", device.display()),
        }
    });
    let Some(mut source) = opened else {
        let why = format!("no V4L2 capture node on this machine ({devices:?}; passed over: {passed_over:?})");
        assert!(!required, "JETSON_DETECTD_REQUIRE_CAMERA=1, but {why}");
        eprintln!("skipped: {why}");
        return;
    };
    let ring = FrameRing::with_heap_slots(2, 0);
    let mut slot = ring.acquire_for_write().expect("slot");
    let got_frame = (0..100).any(|_| source.next_frame(&mut slot).expect("no source error") == Capture::Frame);
    assert!(got_frame, "{} streamed no frame; state {:?}", source.describe(), source.state());
    assert!(slot.meta().width > 0 && !slot.data().is_empty());
}

#[cfg(feature = "gstreamer")]
mod gstreamer_pipeline {
    use super::*;
    use crate::prerequisite::{gstreamer_element, or_skip};
    use jetson_detectd::frame::FrameSlot;
    use jetson_detectd::frame::HeapMemory;
    use jetson_detectd::source::gstreamer::{GstreamerSource, PipelineSpec};

    /// `Ok` when the test can run, else why not.
    fn plugins() -> Result<(), String> {
        ["videotestsrc", "videoconvert", "appsink"]
            .into_iter()
            .try_for_each(|element| gstreamer_element(element, "gstreamer1.0-tools gstreamer1.0-plugins-base"))
    }

    /// Calls `next_frame` until `want` returns true for an outcome, at most `calls` times.
    fn pull_until(
        source: &mut GstreamerSource,
        slot: &mut FrameSlot,
        calls: usize,
        mut want: impl FnMut(Capture, &GstreamerSource, &FrameSlot) -> bool,
    ) -> bool {
        (0..calls).any(|_| {
            let outcome = source.next_frame(slot).expect("no source error");
            assert_ne!(outcome, Capture::End, "the stop flag was not set");
            want(outcome, source, slot)
        })
    }

    /// A frame is stamped when its buffer was captured, not when the appsink hands it over: a live
    /// source whose buffers are held 300 ms on the way (`identity sleep-time`) gives frames at
    /// least that old when they reach the slot.
    #[test]
    fn a_frame_is_stamped_with_its_buffer_capture_time_not_the_handover() {
        if or_skip(plugins()).is_none() {
            return;
        }
        const HELD: Duration = Duration::from_millis(300);
        let pipeline = format!(
            "videotestsrc is-live=true ! video/x-raw,format=RGB,width=64,height=48,framerate=30/1 \
             ! identity sleep-time={} ! appsink name=sink",
            HELD.as_micros()
        );
        let stop = Arc::new(AtomicBool::new(false));
        let mut source = GstreamerSource::open(PipelineSpec::Launch(pipeline), limits(), stop).expect("open");
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        let got = pull_until(&mut source, &mut slot, 500, |outcome, _, _| outcome == Capture::Frame);
        assert!(got, "no frame");
        let age = std::time::SystemTime::now().duration_since(slot.meta().captured_at).expect("not in the future");
        assert!(age >= HELD, "stamped {age:?} before it reached the slot; the buffer was held {HELD:?}");
    }

    #[test]
    fn videotestsrc_frames_reach_the_slot_and_end_of_stream_restarts_the_pipeline() {
        if or_skip(plugins()).is_none() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let pipeline =
            "videotestsrc num-buffers=5 ! video/x-raw,width=320,height=240 ! videoconvert ! appsink name=sink";
        let mut source =
            GstreamerSource::open(PipelineSpec::Launch(pipeline.into()), limits(), stop.clone()).expect("open");
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));

        let mut frames = 0;
        let got_five = pull_until(&mut source, &mut slot, 500, |outcome, _, slot| {
            if outcome == Capture::Frame {
                let meta = slot.meta();
                assert_eq!((meta.width, meta.height), (320, 240));
                // videoconvert picks any format the appsink's default caps allow.
                let allowed = [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8, PixelFormat::Nv12];
                assert!(allowed.contains(&meta.format), "{:?}", meta.format);
                assert_eq!(Some(slot.data().len()), meta.format.frame_bytes(320, 240));
                frames += 1;
            }
            frames == 5
        });
        assert!(got_five, "got {frames} of 5 frames");

        let restarting = pull_until(
            &mut source,
            &mut slot,
            500,
            |_, source, _| matches!(source.state(), SourceState::Reconnecting { attempt: 1, last_error } if last_error == "end of stream"),
        );
        assert!(restarting, "end of stream was not reported: {:?}", source.state());
        let restarted = pull_until(&mut source, &mut slot, 500, |outcome, _, _| outcome == Capture::Frame);
        assert!(restarted, "no frame after the restart: {:?}", source.state());
        assert_eq!(source.state(), SourceState::Streaming);

        stop.store(true, Ordering::Relaxed);
        assert_eq!(source.next_frame(&mut slot).expect("end"), Capture::End);
        assert_eq!(source.state(), SourceState::Stopped);
    }

    /// The whole daemon on a `videotestsrc` camera: frames go through the pipeline and the model
    /// and come out as detections messages on the camera's own topic.
    #[test]
    fn a_videotestsrc_camera_publishes_detections_messages_through_the_daemon() {
        use crate::broker::{Broker, Subscriber};
        use jetson_detectd::publish::payload::DetectionsMessage;

        if or_skip(plugins()).is_none() {
            return;
        }
        let broker = Broker::start();
        let prefix = "it-gstreamer-daemon";
        let subscriber = Subscriber::connect(&broker, "it-gstreamer-daemon-sub", &[&format!("{prefix}/#")]);
        let dir = tempfile::tempdir().expect("temp dir");
        let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
        let config = format!(
            r#"
            [device]
            backend = "cpu"
            [model]
            onnx = "{models}/ssd_mobilenet_v2_coco_prenms_fp32.onnx"
            labels = "{models}/coco_labels.txt"
            decoder = "ssd"
            [model.input]
            width = 300
            height = 300
            layout = "nhwc"
            dtype = "u8"
            [[camera]]
            name = "testsrc"
            fps = 5.0
            source = {{ kind = "gstreamer", pipeline = "videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=10/1 ! videoconvert ! appsink name=sink" }}
            [mqtt]
            host = "{host}"
            port = {port}
            prefix = "{prefix}"
            publish = "every_frame"
            [telemetry]
            interval_s = 0
            "#,
            models = models.display(),
            host = broker.host(),
            port = broker.port(),
        );
        let config_path = dir.path().join("gstreamer.toml");
        std::fs::write(&config_path, config).expect("write config");
        let mut daemon = crate::arch::daemon_command()
            .args(["run", "--config"])
            .arg(&config_path)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("start jetson-detectd");

        let topic = format!("{prefix}/testsrc/detections");
        let wait = crate::pace::Pace::measured().daemon_wait();
        let messages = subscriber.wait_until_within(wait, &topic, "two detections messages", |m| m.len() >= 2);
        let _ = std::process::Command::new("kill").args(["-TERM", &daemon.id().to_string()]).status();
        let status = daemon.wait().expect("wait for jetson-detectd");
        for received in &messages {
            let message: DetectionsMessage = serde_json::from_slice(&received.payload).expect("schema 1 JSON");
            assert_eq!((message.envelope.schema, message.camera.as_str()), (1, "testsrc"));
            assert_eq!((message.width, message.height), (320, 240));
        }
        subscriber.wait_for_payload(&format!("{prefix}/status"), b"offline");
        assert!(status.success(), "jetson-detectd exited with {status}");
    }

    /// A stream whose caps announce a frame over `[limits]` is skipped sample by sample, reported
    /// as over the limit (telemetry counts it), and never copied into the slot.
    #[test]
    fn samples_over_the_limits_are_skipped_without_touching_the_slot() {
        if or_skip(plugins()).is_none() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let pipeline = "videotestsrc num-buffers=3 ! video/x-raw,width=64,height=48,format=RGB ! appsink name=sink";
        let narrow = LimitsConfig { max_width: 32, ..limits() };
        let mut source = GstreamerSource::open(PipelineSpec::Launch(pipeline.into()), narrow, stop).expect("open");
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        let mut outcomes = Vec::new();
        let got = pull_until(&mut source, &mut slot, 500, |outcome, _, _| {
            outcomes.push(outcome);
            outcome == Capture::OverLimit
        });
        assert!(got, "no sample was reported over the limits: {:?}", source.state());
        assert!(!outcomes.contains(&Capture::Frame), "{outcomes:?}");
        assert_eq!(slot.memory().capacity(), 0, "nothing was copied");
    }

    #[test]
    fn nv12_caps_from_the_pipeline_are_copied_plane_by_plane() {
        if or_skip(plugins()).is_none() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        // 66 pixels wide: GStreamer pads NV12 rows to a multiple of 4, so the copy must drop padding.
        let pipeline = "videotestsrc num-buffers=2 pattern=solid-color foreground-color=0xff808080 \
                        ! video/x-raw,width=66,height=48,format=NV12 ! appsink name=sink";
        let mut source = GstreamerSource::open(PipelineSpec::Launch(pipeline.into()), limits(), stop).expect("open");
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        let got = pull_until(&mut source, &mut slot, 500, |outcome, _, _| outcome == Capture::Frame);
        assert!(got, "no NV12 frame: {:?}", source.state());
        assert_eq!((slot.meta().width, slot.meta().height, slot.meta().format), (66, 48, PixelFormat::Nv12));
        assert_eq!(slot.data().len(), 66 * 48 * 3 / 2);
        assert_eq!(slot.copies(), 1, "the sample is copied once into the slot");
        let (luma, chroma) = slot.data().split_at(66 * 48);
        let luma_level = luma[0];
        assert!(luma.iter().all(|&y| y == luma_level), "a solid grey frame has one luma level");
        assert!(chroma.iter().all(|&c| c.abs_diff(128) <= 2), "grey has neutral chroma");
    }
}
