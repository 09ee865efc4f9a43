//! H.264 encoding of a raw camera's frames for its clips (cargo feature `gstreamer`).
//!
//! Owns: the choice of encoder ([`choose`]: `nvv4l2h264enc` where the board has one, else x264 as
//! `[record.encoder]` allows), the GStreamer pipeline `appsrc → convert/scale → encoder → appsink`
//! (whole access units of Annex B, no parser: it would hold each one back until the next), and
//! turning its output into [`AccessUnit`]s stamped with the frames' capture times.
//! Must not: block the recorder on the encoder (frames beyond [`MAX_QUEUED_FRAMES`] waiting in it
//! are dropped and counted, its output is pulled without waiting), or run on the inference path.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use crate::config::record::{EncoderChoice, EncoderConfig};
use crate::frame::PixelFormat;
use crate::source::tap::{AccessUnit, RawFrame, StreamFormat, VideoCodec};

/// The Jetson's hardware H.264 encoder (Orin NX/AGX; the Orin Nano has none) and its converter.
pub const HARDWARE_ENCODER: &str = "nvv4l2h264enc";
const HARDWARE_CONVERTER: &str = "nvvidconv";
/// The software encoder.
pub const SOFTWARE_ENCODER: &str = "x264enc";
/// Frames that may wait inside the encoder before new ones are dropped.
pub const MAX_QUEUED_FRAMES: u64 = 3;
/// Threads x264 encodes one camera with: what it costs is bounded to one core, the others stay
/// with detection, and no frame waits for another thread (x264's frame threads hold back one
/// frame per extra thread).
const SOFTWARE_THREADS: u32 = 1;
/// x264's speed preset: the fastest that still compresses a static scene well.
const SOFTWARE_PRESET: &str = "superfast";

/// Which encoder a raw camera gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderKind {
    Hardware,
    Software,
}

impl EncoderKind {
    pub fn name(self) -> &'static str {
        match self {
            EncoderKind::Hardware => HARDWARE_ENCODER,
            EncoderKind::Software => SOFTWARE_ENCODER,
        }
    }
}

/// The encoder `choice` gives on this machine, or why a raw camera cannot be recorded here.
pub fn choose(choice: EncoderChoice) -> Result<EncoderKind, String> {
    gst::init().map_err(|e| format!("cannot initialise GStreamer: {e}"))?;
    let has = |name: &str| gst::ElementFactory::find(name).is_some();
    let hardware = has(HARDWARE_ENCODER) && has(HARDWARE_CONVERTER);
    let software = has(SOFTWARE_ENCODER) && has("videoconvert") && has("videoscale");
    match choice {
        EncoderChoice::None => Err("record.encoder.kind = \"none\": raw cameras are not encoded".into()),
        EncoderChoice::Hardware if hardware => Ok(EncoderKind::Hardware),
        EncoderChoice::Hardware => Err(format!(
            "record.encoder.kind = \"hardware\", but this machine has no {HARDWARE_ENCODER} (the Orin Nano has no \
             hardware encoder): set kind = \"software\" or \"auto\" for x264"
        )),
        EncoderChoice::Auto if hardware => Ok(EncoderKind::Hardware),
        EncoderChoice::Auto | EncoderChoice::Software if software => Ok(EncoderKind::Software),
        EncoderChoice::Auto | EncoderChoice::Software => {
            Err(format!("no {SOFTWARE_ENCODER} (apt-get install gstreamer1.0-plugins-ugly)"))
        }
    }
}

/// The size frames of `width` x `height` are encoded at: at most `max_width` wide, aspect kept,
/// both sides even.
pub fn encoded_size(width: u32, height: u32, max_width: u32) -> (u32, u32) {
    let (w, h) = if width > max_width {
        (max_width, (u64::from(height) * u64::from(max_width) / u64::from(width.max(1))) as u32)
    } else {
        (width, height)
    };
    ((w & !1).max(2), (h & !1).max(2))
}

fn raw_format(format: PixelFormat) -> &'static str {
    match format {
        PixelFormat::Rgb8 => "RGB",
        PixelFormat::Bgr8 => "BGR",
        PixelFormat::Rgba8 => "RGBA",
        PixelFormat::Yuyv => "YUY2",
        PixelFormat::Nv12 => "NV12",
    }
}

/// The frames of one camera on their way to H.264.
pub struct Encoder {
    kind: EncoderKind,
    config: EncoderConfig,
    pipeline: Option<Running>,
    /// Capture time of the first frame: the stream's time 0.
    origin: Option<SystemTime>,
    last_pts: Option<Duration>,
    /// Frames dropped because the encoder was behind.
    pub dropped: u64,
}

struct Running {
    pipeline: gst::Pipeline,
    appsrc: gst_app::AppSrc,
    appsink: gst_app::AppSink,
    /// Input caps: width, height, format.
    input: (u32, u32, PixelFormat),
    frame_bytes: u64,
    format: Option<(gst::Caps, Arc<StreamFormat>)>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

impl Encoder {
    pub fn new(kind: EncoderKind, config: EncoderConfig) -> Encoder {
        Encoder { kind, config, pipeline: None, origin: None, last_pts: None, dropped: 0 }
    }

    pub fn kind(&self) -> EncoderKind {
        self.kind
    }

    fn launch(&self, width: u32, height: u32, format: PixelFormat) -> Result<Running, String> {
        let (out_w, out_h) = encoded_size(width, height, self.config.max_width);
        let keyframes = (self.config.fps * 2.0).round().max(1.0) as u32;
        let encoder = match self.kind {
            EncoderKind::Software => format!(
                "videoconvert ! videoscale ! video/x-raw,format=I420,width={out_w},height={out_h} ! \
                 {SOFTWARE_ENCODER} tune=zerolatency speed-preset={SOFTWARE_PRESET} threads={SOFTWARE_THREADS} \
                 bitrate={} key-int-max={keyframes}",
                self.config.bitrate_kbps
            ),
            EncoderKind::Hardware => format!(
                "videoconvert ! video/x-raw,format=NV12 ! {HARDWARE_CONVERTER} ! \
                 video/x-raw(memory:NVMM),format=NV12,width={out_w},height={out_h} ! \
                 {HARDWARE_ENCODER} bitrate={} iframeinterval={keyframes} insert-sps-pps=true",
                u64::from(self.config.bitrate_kbps) * 1000
            ),
        };
        let description = format!(
            "appsrc name=src is-live=true format=time do-timestamp=false \
             caps=video/x-raw,format={},width={width},height={height},framerate={}/1000 ! {encoder} ! \
             video/x-h264,stream-format=byte-stream,alignment=au ! \
             appsink name=sink sync=false max-buffers=16 drop=false",
            raw_format(format),
            // The nominal rate: without one the encoder holds each frame until the next arrives.
            (self.config.fps * 1000.0).round().max(1.0) as u32
        );
        let pipeline = gst::parse::launch(&description)
            .map_err(|e| format!("cannot build the encoder pipeline: {e}"))?
            .downcast::<gst::Pipeline>()
            .map_err(|_| "the encoder pipeline is not a pipeline".to_owned())?;
        let appsrc = pipeline
            .by_name("src")
            .and_then(|e| e.downcast::<gst_app::AppSrc>().ok())
            .ok_or("the encoder pipeline has no appsrc")?;
        let appsink = pipeline
            .by_name("sink")
            .and_then(|e| e.downcast::<gst_app::AppSink>().ok())
            .ok_or("the encoder pipeline has no appsink")?;
        pipeline.set_state(gst::State::Playing).map_err(|_| format!("{} refused to start", self.kind.name()))?;
        let frame_bytes = format.frame_bytes(width, height).unwrap_or(0) as u64;
        Ok(Running { pipeline, appsrc, appsink, input: (width, height, format), frame_bytes, format: None })
    }

    /// Hands one frame to the encoder (starting it, or restarting it when the frame size or
    /// format changed); dropped and counted when the encoder is behind.
    pub fn encode(&mut self, frame: RawFrame) -> Result<(), String> {
        let input = (frame.width, frame.height, frame.format);
        if self.pipeline.as_ref().is_some_and(|running| running.input != input) {
            self.pipeline = None;
        }
        if self.pipeline.is_none() {
            self.pipeline = Some(self.launch(frame.width, frame.height, frame.format)?);
        }
        let Some(running) = self.pipeline.as_ref() else { return Ok(()) };
        let queued = running.appsrc.property::<u64>("current-level-bytes");
        if queued >= running.frame_bytes.max(1) * MAX_QUEUED_FRAMES {
            self.dropped += 1;
            return Ok(());
        }
        let origin = *self.origin.get_or_insert(frame.captured_at);
        let mut pts = frame.captured_at.duration_since(origin).unwrap_or_default();
        // Timestamps must rise: a clock step back (NTP) continues a millisecond after the last.
        if let Some(last) = self.last_pts.filter(|last| pts <= *last) {
            pts = last + Duration::from_millis(1);
        }
        self.last_pts = Some(pts);
        let mut buffer = gst::Buffer::from_mut_slice(frame.data);
        if let Some(buffer) = buffer.get_mut() {
            buffer.set_pts(gst::ClockTime::from_nseconds(pts.as_nanos() as u64));
        }
        running.appsrc.push_buffer(buffer).map_err(|e| format!("{} refused a frame: {e}", self.kind.name()))?;
        Ok(())
    }

    /// The access units the encoder has finished, without waiting.
    pub fn drain(&mut self, out: &mut Vec<AccessUnit>) {
        let (Some(running), Some(origin)) = (self.pipeline.as_mut(), self.origin) else { return };
        while let Some(sample) = running.appsink.try_pull_sample(gst::ClockTime::ZERO) {
            let (Some(buffer), Some(caps)) = (sample.buffer(), sample.caps()) else { continue };
            let format = match &running.format {
                Some((known, format)) if known.as_ptr() == caps.as_ptr() || known == caps => format.clone(),
                _ => {
                    let structure = caps.structure(0);
                    let size = |field: &str| structure.and_then(|s| s.get::<i32>(field).ok()).unwrap_or(0).max(0);
                    let format = Arc::new(StreamFormat {
                        codec: VideoCodec::H264,
                        width: size("width") as u32,
                        height: size("height") as u32,
                        nal_length_size: None,
                        codec_data: None,
                    });
                    running.format = Some((caps.to_owned(), format.clone()));
                    format
                }
            };
            let Ok(map) = buffer.map_readable() else { continue };
            let nanos = |time: gst::ClockTime| Duration::from_nanos(time.nseconds());
            // Encoders shift their output timestamps (x264enc by 1000 hours, so that decode times
            // never go negative) and their segment with them: the running time is the frame's.
            let segment = sample.segment().and_then(|segment| segment.downcast_ref::<gst::ClockTime>().cloned());
            let running = buffer.pts().and_then(|pts| segment.as_ref().and_then(|s| s.to_running_time(pts)));
            out.push(AccessUnit {
                data: Arc::from(map.as_slice()),
                format,
                keyframe: !buffer.flags().contains(gst::BufferFlags::DELTA_UNIT),
                dts: buffer.dts().map(nanos),
                pts: buffer.pts().map(nanos),
                captured_at: origin + running.map(nanos).unwrap_or_default(),
            });
        }
    }

    /// An error the encoder's pipeline reported, if any (the pipeline is then restarted at the
    /// next frame).
    pub fn failure(&mut self) -> Option<String> {
        let running = self.pipeline.as_ref()?;
        let bus = running.pipeline.bus()?;
        let mut failure = None;
        while let Some(message) = bus.pop() {
            if let gst::MessageView::Error(err) = message.view() {
                failure.get_or_insert_with(|| err.error().to_string());
            }
        }
        if failure.is_some() {
            self.pipeline = None;
        }
        failure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_wider_than_the_limit_are_scaled_down_keeping_the_aspect_and_even_sides() {
        assert_eq!(encoded_size(1920, 1080, 1280), (1280, 720));
        assert_eq!(encoded_size(640, 480, 1280), (640, 480));
        assert_eq!(encoded_size(1001, 333, 640), (640, 212));
        assert_eq!(encoded_size(3, 3, 1280), (2, 2));
    }

    #[test]
    fn the_software_encoder_turns_frames_into_keyframe_led_h264_stamped_with_their_capture_times() {
        let Ok(kind) = choose(EncoderChoice::Software) else {
            eprintln!("skipped: no x264enc here");
            return;
        };
        let config = EncoderConfig { kind: EncoderChoice::Software, fps: 10.0, max_width: 160, bitrate_kbps: 500 };
        let mut encoder = Encoder::new(kind, config);
        let start = SystemTime::now();
        let mut units = Vec::new();
        for n in 0..30u64 {
            let data = vec![(n * 8) as u8; 320 * 240 * 3];
            let captured_at = start + Duration::from_millis(n * 100);
            let frame = RawFrame { data, width: 320, height: 240, format: PixelFormat::Rgb8, captured_at };
            encoder.encode(frame).expect("encode");
            // One frame at a time, as a camera delivers them: each is encoded before the next.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while units.len() as u64 <= n && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
                encoder.drain(&mut units);
            }
        }
        assert_eq!(encoder.failure(), None);
        assert_eq!((units.len(), encoder.dropped), (30, 0));
        assert!(units[0].keyframe, "the stream starts with a keyframe");
        assert_eq!((units[0].format.width, units[0].format.height), (160, 120));
        assert_eq!(units[3].captured_at, start + Duration::from_millis(300));
        assert!(units.iter().filter(|u| u.keyframe).count() >= 2, "a keyframe every 2 s of 10 fps");
    }
}
