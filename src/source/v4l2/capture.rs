//! The V4L2 capture source itself (USB UVC cameras: MJPEG and YUYV).
//!
//! Owns: format negotiation (what to ask the driver for and what to accept back), the reconnect
//! state machine (an unplugged, failing or stalled camera is closed and reopened with backoff while
//! the daemon keeps running), and turning each captured buffer into a frame in the slot: MJPEG is
//! decoded to RGB straight into the slot, YUYV is copied raw (row padding dropped) for the GPU
//! kernel to convert, or not copied at all: see below. The device itself sits behind
//! [`CaptureDevice`] ([`super::device`]) so that all of this is tested with a fake; `super::linux`
//! is the real one (direct
//! ioctls, mmap or user-pointer streaming buffers).
//! Must not: preprocess, block for longer than [`V4l2Options::poll_interval`] without checking the
//! stop flag, or end the camera because the device went away.
//!
//! What the driver is asked for and what is accepted back: the configured size and format are
//! requested with `VIDIOC_S_FMT`. Drivers answer with the nearest mode they support; a different
//! size is accepted (logged, frames carry the real size), and so is the other of MJPEG/YUYV. Any
//! other pixel format is a configuration error that names what the driver offered. The frame rate
//! is requested with `VIDIOC_S_PARM`; a driver that cannot set it keeps its own rate.
//!
//! How frames leave the driver ([`CapturePlan`], logged once per change, shown by `probe`): YUYV
//! with tightly packed rows (`bytesperline` = 2 × width) streams into user-pointer buffers
//! (`V4L2_MEMORY_USERPTR`) of slot memory from the camera's [`SlotAllocator`] (page-locked on the
//! GPU backend), page aligned, and each filled buffer is lent to the slot ([`super::userptr`]): no copy.
//! The source queues a buffer again only after the slot has let go of it; when slots hold all of
//! them it waits. A driver that refuses user pointers (uvcvideo takes them), padded rows, and MJPEG
//! (decoded anyway) stream mmap buffers: one copy, or the decode.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::convert::{self, ConvertError};
use super::device::{CaptureDevice, DeviceOpener, DriverFormat, FourCc, RawFrame, UserptrStart};
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
use super::linux;
use super::userptr::UserBuffers;
use crate::frame::{CaptureMode, FrameSlot, PixelFormat, SlotAllocator};
use crate::source::error::SourceError;
use crate::source::frame_source::{Capture, FrameSource};
use crate::source::image_decode::{self, Decoded};
use crate::source::limits::LimitsConfig;
use crate::source::reconnect::{Backoff, Connection, DeviceError};
use crate::source::status::{SourceState, SourceStatus};
use crate::sys::log_limit::RateLimitedLog;

/// The camera as configured (`[camera.source] kind = "v4l2"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V4l2Request {
    pub device: PathBuf,
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub format: V4l2Format,
    /// Frames larger than these are skipped (and counted), never decoded.
    pub limits: LimitsConfig,
}

/// Timing knobs of the source; the defaults are what the daemon uses.
#[derive(Debug, Clone)]
pub struct V4l2Options {
    /// Longest single wait for a buffer (or a backoff step) before the stop flag is checked again.
    pub poll_interval: Duration,
    /// No good frame for this long counts as a lost camera: it is closed and reopened.
    pub stall_timeout: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Streaming buffers to ask the driver for.
    pub buffer_count: u32,
    /// Memory for user-pointer buffers (the camera's slot memory); `None` streams mmap buffers.
    pub slots: Option<SlotAllocator>,
}

impl Default for V4l2Options {
    fn default() -> Self {
        V4l2Options {
            poll_interval: Duration::from_millis(200),
            stall_timeout: Duration::from_secs(5),
            initial_backoff: crate::source::reconnect::INITIAL_BACKOFF,
            max_backoff: crate::source::reconnect::MAX_BACKOFF,
            buffer_count: 4,
            slots: None,
        }
    }
}

/// How frames arrive once negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// One JPEG per buffer, decoded to RGB.
    Mjpeg,
    /// Packed 4:2:2 rows of `bytes_per_line` bytes, copied raw.
    Yuyv,
}

/// The frame layout agreed with the driver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Negotiated {
    pub width: u32,
    pub height: u32,
    pub encoding: Encoding,
    /// Row stride of YUYV buffers (0 for MJPEG).
    pub bytes_per_line: u32,
    /// The frame rate the driver reports, when it can set one.
    pub fps: Option<f64>,
    /// Largest buffer the driver fills (`sizeimage`).
    pub size_image: u32,
}

/// How frames leave the driver, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturePlan {
    /// [`CaptureMode::Userptr`], [`CaptureMode::Copy`] (mmap + one copy) or
    /// [`CaptureMode::Decode`] (MJPEG from mmap buffers).
    pub mode: CaptureMode,
    pub reason: String,
}

impl CapturePlan {
    /// The plan as `probe` names it: `userptr`, `mmap+copy` or `mmap+decode`.
    pub fn label(&self) -> &'static str {
        match self.mode {
            CaptureMode::Userptr => "userptr",
            CaptureMode::Decode => "mmap+decode",
            _ => "mmap+copy",
        }
    }
}

/// What streaming started with: the plan, and the user-pointer buffers when frames are lent.
pub struct Streaming {
    pub plan: CapturePlan,
    user: Option<UserBuffers>,
}

/// The format a camera is asked for (`format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum V4l2Format {
    Mjpeg,
    Yuyv,
}

fn wanted_fourcc(format: V4l2Format) -> FourCc {
    match format {
        V4l2Format::Mjpeg => FourCc::MJPG,
        V4l2Format::Yuyv => FourCc::YUYV,
    }
}

fn format_name(format: V4l2Format) -> &'static str {
    match format {
        V4l2Format::Mjpeg => "MJPEG",
        V4l2Format::Yuyv => "YUYV",
    }
}

/// Checks what `VIDIOC_S_FMT` answered against the request: accepts another size or the other
/// supported encoding (with a warning), rejects what cannot be captured.
pub fn accept_driver_format(request: &V4l2Request, got: &DriverFormat) -> Result<Negotiated, DeviceError> {
    let device = request.device.display();
    let encoding = match got.fourcc {
        FourCc::MJPG | FourCc::JPEG => Encoding::Mjpeg,
        FourCc::YUYV => Encoding::Yuyv,
        other => {
            return Err(DeviceError::Permanent(format!(
                "{device}: asked for {} {}x{}, the driver offers {other} {}x{}; only MJPEG and YUYV are \
                 supported (`v4l2-ctl -d {device} --list-formats-ext` lists the modes)",
                format_name(request.format),
                request.width,
                request.height,
                got.width,
                got.height
            )))
        }
    };
    if got.width == 0 || got.height == 0 {
        return Err(DeviceError::Permanent(format!("{device}: the driver set an empty frame size")));
    }
    let requested_encoding = match request.format {
        V4l2Format::Mjpeg => Encoding::Mjpeg,
        V4l2Format::Yuyv => Encoding::Yuyv,
    };
    if encoding != requested_encoding {
        log::warn!(
            "{device}: asked for {}, the driver chose {}; using {}",
            format_name(request.format),
            got.fourcc,
            got.fourcc
        );
    }
    if (got.width, got.height) != (request.width, request.height) {
        log::warn!(
            "{device}: asked for {}x{}, the driver chose {}x{}; frames will be {}x{}",
            request.width,
            request.height,
            got.width,
            got.height,
            got.width,
            got.height
        );
    }
    let bytes_per_line = match encoding {
        Encoding::Mjpeg => 0,
        Encoding::Yuyv => {
            let row_bytes = got.width.checked_mul(2).filter(|_| got.width.is_multiple_of(2)).ok_or_else(|| {
                DeviceError::Permanent(format!("{device}: YUYV needs an even width, the driver set {}", got.width))
            })?;
            match got.bytes_per_line {
                0 => row_bytes,
                stride if stride >= row_bytes => stride,
                stride => {
                    return Err(DeviceError::Permanent(format!(
                        "{device}: the driver's YUYV stride {stride} is shorter than a {}-pixel row",
                        got.width
                    )))
                }
            }
        }
    };
    Ok(Negotiated {
        width: got.width,
        height: got.height,
        encoding,
        bytes_per_line,
        fps: None,
        size_image: got.size_image,
    })
}

/// Brings an opened device to streaming: checks it is a streaming capture device, negotiates the
/// format and frame rate, and starts streaming (into user-pointer buffers where it can).
pub fn negotiate(
    device: &mut dyn CaptureDevice,
    request: &V4l2Request,
    options: &V4l2Options,
) -> Result<(Negotiated, Streaming), DeviceError> {
    let path = request.device.display();
    let caps = device.capabilities()?;
    if !caps.video_capture {
        return Err(DeviceError::Permanent(format!(
            "{path} ({} / {}) is not a video capture node",
            caps.card, caps.driver
        )));
    }
    if !caps.streaming {
        return Err(DeviceError::Permanent(format!("{path} ({}) does not support streaming I/O", caps.card)));
    }
    let driver_format = device.set_format(request.width, request.height, wanted_fourcc(request.format))?;
    let mut negotiated = accept_driver_format(request, &driver_format)?;
    negotiated.fps = match device.set_frame_rate(request.fps) {
        Ok(fps) => fps,
        Err(err) => {
            log::warn!("{path}: cannot set {} fps ({err}); the camera keeps its own rate", request.fps);
            None
        }
    };
    if let Some(fps) = negotiated.fps {
        if (fps - f64::from(request.fps)).abs() > 0.5 {
            log::warn!("{path}: asked for {} fps, the driver set {fps:.1}", request.fps);
        }
    }
    let streaming = start_streaming(device, request, &negotiated, options)?;
    Ok((negotiated, streaming))
}

/// Starts streaming into user-pointer buffers of slot memory where the format and the driver allow
/// it, else into mmap buffers.
fn start_streaming(
    device: &mut dyn CaptureDevice,
    request: &V4l2Request,
    negotiated: &Negotiated,
    options: &V4l2Options,
) -> Result<Streaming, DeviceError> {
    let mmap = |device: &mut dyn CaptureDevice, mode, reason| {
        device.start(options.buffer_count)?;
        Ok(Streaming { plan: CapturePlan { mode, reason }, user: None })
    };
    let (slots, frame_bytes) = match user_pointer_candidate(request, negotiated, options) {
        Ok(candidate) => candidate,
        Err((mode, reason)) => return mmap(device, mode, reason),
    };
    let mut buffers = match UserBuffers::allocate(slots, options.buffer_count, frame_bytes, page_size()) {
        Ok(buffers) => buffers,
        Err(reason) => return mmap(device, CaptureMode::Copy, reason),
    };
    match device.start_userptr(buffers.buffers())? {
        UserptrStart::Started(count) => {
            buffers.truncate(count as usize);
            let reason = format!(
                "the driver writes each frame into one of {count} page-aligned slot buffers (V4L2_MEMORY_USERPTR), \
                 no copy"
            );
            Ok(Streaming { plan: CapturePlan { mode: CaptureMode::Userptr, reason }, user: Some(buffers) })
        }
        UserptrStart::Refused(reason) => mmap(device, CaptureMode::Copy, reason),
    }
}

/// The slot memory and buffer size for user-pointer streaming, or the mode instead and why not.
fn user_pointer_candidate<'a>(
    request: &V4l2Request,
    negotiated: &Negotiated,
    options: &'a V4l2Options,
) -> Result<(&'a SlotAllocator, usize), (CaptureMode, String)> {
    if negotiated.encoding == Encoding::Mjpeg {
        return Err((CaptureMode::Decode, "MJPEG is decoded from the driver's mmap buffers into the slot".into()));
    }
    let row_bytes = negotiated.width * 2;
    if negotiated.bytes_per_line != row_bytes {
        return Err((
            CaptureMode::Copy,
            format!(
                "the driver pads YUYV rows ({} bytes per line for {row_bytes} bytes of pixels): one copy drops the padding",
                negotiated.bytes_per_line
            ),
        ));
    }
    let (width, height) = (negotiated.width, negotiated.height);
    if let Err(err) = image_decode::check_frame(width, height, PixelFormat::Yuyv, &request.limits) {
        return Err((CaptureMode::Copy, format!("frames are skipped: {err}")));
    }
    let Some(slots) = &options.slots else {
        return Err((CaptureMode::Copy, "no slot memory to lend the driver".into()));
    };
    let frame_bytes = PixelFormat::Yuyv
        .frame_bytes(width, height)
        .ok_or_else(|| (CaptureMode::Copy, format!("impossible YUYV frame size {width}x{height}")))?;
    Ok((slots, frame_bytes.max(negotiated.size_image as usize)))
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn page_size() -> usize {
    linux::page_size()
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn page_size() -> usize {
    4096
}

/// Logs how frames leave the driver when that differs from what was logged last, so a camera that
/// reconnects the same way says it once. Whether it logged.
fn log_plan(logged: &mut Option<CapturePlan>, description: &str, plan: &CapturePlan) -> bool {
    if logged.as_ref() == Some(plan) {
        return false;
    }
    log::info!("{description}: capture {}: {}", plan.label(), plan.reason);
    *logged = Some(plan.clone());
    true
}

fn write_frame(
    raw: RawFrame<'_>,
    format: &Negotiated,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
    mjpeg_scratch: &mut Vec<u8>,
) -> Result<(SystemTime, Decoded), ConvertError> {
    if raw.flagged_corrupt {
        return Err(ConvertError::Corrupt("the driver flagged the buffer as damaged".into()));
    }
    let (width, height) = (format.width, format.height);
    let decoded = match format.encoding {
        Encoding::Mjpeg => convert::write_mjpeg(raw.data, width, height, limits, slot, mjpeg_scratch)?,
        Encoding::Yuyv => {
            convert::write_yuyv(raw.data, width, height, format.bytes_per_line, limits, slot)?;
            Decoded::Whole
        }
    };
    Ok((raw.captured_at, decoded))
}

/// An open, streaming device.
struct OpenDevice {
    device: Box<dyn CaptureDevice>,
    format: Negotiated,
    streaming: Streaming,
    last_good_frame: Instant,
}

/// A V4L2 camera as a [`FrameSource`]. Reopens the device with backoff whenever it fails; its
/// [`SourceStatus`] tells telemetry whether it is streaming or reconnecting.
pub struct V4l2Source {
    request: V4l2Request,
    options: V4l2Options,
    opener: Box<dyn DeviceOpener>,
    stop: Arc<AtomicBool>,
    connection: Connection<OpenDevice>,
    corrupt_log: RateLimitedLog,
    /// A truncated MJPEG frame was logged: later ones are only counted.
    truncated_logged: bool,
    mjpeg_scratch: Vec<u8>,
    description: String,
    /// The capture plan last logged.
    logged_plan: Option<CapturePlan>,
}

/// The major number of every V4L2 device node on Linux (`VIDEO_MAJOR`,
/// `include/uapi/linux/major.h`).
const VIDEO_MAJOR: u32 = 81;

/// Checks, without opening it, that `device` is a V4L2 device node, or absent (a camera that is
/// plugged in later is waited for). `/dev/null`, a regular file or a directory is refused.
pub fn check_device_node(device: &Path) -> Result<(), SourceError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let refuse = |message: String| SourceError::Open { source_name: format!("v4l2:{}", device.display()), message };
    let metadata = match std::fs::metadata(device) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(refuse(format!("cannot inspect: {e}"))),
    };
    if !metadata.file_type().is_char_device() || libc::major(metadata.rdev()) != VIDEO_MAJOR {
        return Err(refuse(format!("not a V4L2 device node (those are character devices of major {VIDEO_MAJOR})")));
    }
    Ok(())
}

impl V4l2Source {
    /// Opens a real V4L2 device. A device that is missing or failing right now is not an error:
    /// the source starts in the reconnecting state. Only what reopening cannot fix (not a capture
    /// device, unsupported format, no permission) fails here. User-pointer buffers are allocated
    /// through `slots`.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        device: &Path,
        width: u32,
        height: u32,
        fps: u32,
        format: V4l2Format,
        limits: LimitsConfig,
        stop: Arc<AtomicBool>,
        slots: &SlotAllocator,
    ) -> Result<V4l2Source, SourceError> {
        let request = V4l2Request { device: device.to_path_buf(), width, height, fps, format, limits };
        let options = V4l2Options { slots: Some(slots.clone()), ..V4l2Options::default() };
        V4l2Source::with_opener(request, options, open_system_device, stop)
    }

    /// Like [`V4l2Source::open`] with any device layer (tests use a fake one).
    pub fn with_opener(
        request: V4l2Request,
        options: V4l2Options,
        opener: impl DeviceOpener + 'static,
        stop: Arc<AtomicBool>,
    ) -> Result<V4l2Source, SourceError> {
        let description = format!(
            "v4l2:{} {}x{} {} {}fps",
            request.device.display(),
            request.width,
            request.height,
            format_name(request.format),
            request.fps
        );
        let mut opener: Box<dyn DeviceOpener> = Box::new(opener);
        let mut logged_plan = None;
        let connection = Connection::opened(
            description.clone(),
            Backoff::new(options.initial_backoff, options.max_backoff),
            options.poll_interval,
            "reopening",
            || {
                connect(opener.as_mut(), &request, &options).inspect(|open| {
                    log_plan(&mut logged_plan, &description, &open.streaming.plan);
                })
            },
        )?;
        Ok(V4l2Source {
            request,
            options,
            opener,
            stop,
            connection,
            corrupt_log: RateLimitedLog::new(Duration::from_secs(10)),
            truncated_logged: false,
            mjpeg_scratch: Vec::new(),
            description,
            logged_plan,
        })
    }

    /// The state now (telemetry keeps [`FrameSource::connection_status`] to read it from any
    /// thread).
    pub fn state(&self) -> SourceState {
        self.connection.state()
    }

    /// The layout agreed with the driver while the device is open.
    pub fn negotiated(&self) -> Option<Negotiated> {
        self.connection.link().map(|open| open.format)
    }

    /// How frames leave the driver while the device is open, and why.
    pub fn capture_plan(&self) -> Option<CapturePlan> {
        self.connection.link().map(|open| open.streaming.plan.clone())
    }
}

/// Opens the device and agrees on a format with its driver.
fn connect(
    opener: &mut dyn DeviceOpener,
    request: &V4l2Request,
    options: &V4l2Options,
) -> Result<OpenDevice, DeviceError> {
    let mut device = opener.open(&request.device)?;
    let (format, streaming) = negotiate(device.as_mut(), request, options)?;
    Ok(OpenDevice { device, format, streaming, last_good_frame: Instant::now() })
}

/// What one wait for a frame came to, before the source judges it.
enum Received {
    Frame(Result<(SystemTime, Decoded), ConvertError>),
    /// No buffer arrived in time.
    Nothing,
    /// Slots hold every user-pointer buffer: the driver had none to fill, the camera is not stalled.
    Waiting,
}

/// Waits up to `timeout` for a filled mmap buffer and copies or decodes it into `slot`.
fn copy_next(
    device: &mut dyn CaptureDevice,
    format: &Negotiated,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
    scratch: &mut Vec<u8>,
    timeout: Duration,
) -> Result<Received, DeviceError> {
    let mut converted = None;
    device.dequeue(timeout, &mut |raw| converted = Some(write_frame(raw, format, limits, slot, scratch)))?;
    Ok(converted.map_or(Received::Nothing, Received::Frame))
}

/// Queues the user-pointer buffers slots gave back, then waits up to `timeout` for a filled one and
/// lends it to `slot`. While slots hold every buffer, waits up to `timeout` for one to come back
/// instead: no buffer a slot holds is ever queued, and none is added.
fn lend_next(
    device: &mut dyn CaptureDevice,
    buffers: &mut UserBuffers,
    format: &Negotiated,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
    timeout: Duration,
) -> Result<Received, DeviceError> {
    for index in buffers.take_returned() {
        device.requeue(index)?;
    }
    if buffers.all_lent() {
        buffers.wait_for_return(timeout);
        return Ok(Received::Waiting);
    }
    let Some(filled) = device.dequeue_user(timeout)? else { return Ok(Received::Nothing) };
    let frame = buffers.lend(filled.index, filled.bytes_used).ok_or_else(|| {
        DeviceError::Transient(format!(
            "the driver returned user-pointer buffer {}, which was not queued",
            filled.index
        ))
    })?;
    if filled.flagged_corrupt {
        return Ok(Received::Frame(Err(ConvertError::Corrupt("the driver flagged the buffer as damaged".into()))));
    }
    let lent = convert::lend_yuyv(frame, format.width, format.height, limits, slot);
    Ok(Received::Frame(lent.map(|()| (filled.captured_at, Decoded::Whole))))
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn open_system_device(path: &Path) -> Result<Box<dyn CaptureDevice>, DeviceError> {
    Ok(Box::new(linux::LinuxCaptureDevice::open(path)?))
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn open_system_device(path: &Path) -> Result<Box<dyn CaptureDevice>, DeviceError> {
    Err(DeviceError::Permanent(format!("{}: V4L2 capture is only built for 64-bit Linux", path.display())))
}

/// What one wait on an open device came to.
enum Step {
    Frame(SystemTime, Decoded),
    Corrupt(String),
    OverLimit(String),
    Nothing,
    SlotTooSmall(String),
    Lost(DeviceError),
}

impl FrameSource for V4l2Source {
    fn describe(&self) -> String {
        self.description.clone()
    }

    /// The plan streaming started with ([`CapturePlan`]); while reconnecting, MJPEG is decoded and
    /// YUYV counted as copied.
    fn capture_mode(&self) -> CaptureMode {
        match self.connection.link() {
            Some(open) => open.streaming.plan.mode,
            None if self.request.format == V4l2Format::Mjpeg => CaptureMode::Decode,
            None => CaptureMode::Copy,
        }
    }

    fn connection_status(&self) -> Option<SourceStatus> {
        Some(self.connection.status().clone())
    }

    /// Returns [`Capture::End`] once the stop flag is set (and closes the device).
    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<Capture, SourceError> {
        let (opener, request, options) = (&mut self.opener, &self.request, &self.options);
        let (logged, description) = (&mut self.logged_plan, &self.description);
        let linked = self.connection.next_link(&self.stop, || {
            connect(opener.as_mut(), request, options).inspect(|open| {
                log_plan(logged, description, &open.streaming.plan);
            })
        });
        let step = match linked {
            Err(capture) => return Ok(capture),
            Ok(OpenDevice { device, format, streaming, last_good_frame }) => {
                let limits = &self.request.limits;
                let timeout = self.options.poll_interval;
                let received = match streaming.user.as_mut() {
                    Some(buffers) => lend_next(device.as_mut(), buffers, format, limits, slot, timeout),
                    None => copy_next(device.as_mut(), format, limits, slot, &mut self.mjpeg_scratch, timeout),
                };
                match received {
                    Err(err) => Step::Lost(err),
                    Ok(Received::Frame(Ok((captured_at, decoded)))) => {
                        *last_good_frame = Instant::now();
                        Step::Frame(captured_at, decoded)
                    }
                    Ok(Received::Frame(Err(ConvertError::Corrupt(message)))) => Step::Corrupt(message),
                    Ok(Received::Frame(Err(ConvertError::OverLimit(message)))) => Step::OverLimit(message),
                    Ok(Received::Frame(Err(ConvertError::Slot(message)))) => Step::SlotTooSmall(message),
                    // The stall clock runs only while the driver has a buffer to fill.
                    Ok(Received::Waiting) => {
                        *last_good_frame = Instant::now();
                        Step::Nothing
                    }
                    Ok(Received::Nothing) if last_good_frame.elapsed() >= self.options.stall_timeout => {
                        Step::Lost(DeviceError::Transient(format!(
                            "no frame for {:.1} s",
                            last_good_frame.elapsed().as_secs_f64()
                        )))
                    }
                    Ok(Received::Nothing) => Step::Nothing,
                }
            }
        };
        match step {
            Step::Frame(captured_at, decoded) => {
                slot.meta_mut().captured_at = captured_at;
                self.connection.frame_arrived();
                if decoded == Decoded::Whole {
                    return Ok(Capture::Frame);
                }
                if !std::mem::replace(&mut self.truncated_logged, true) {
                    log::warn!(
                        "{}: a truncated MJPEG frame (no end-of-image marker) was decoded with the missing part \
                         grey; further ones are only counted (telemetry: cameras.<name>.truncated)",
                        self.description
                    );
                }
                Ok(Capture::TruncatedFrame)
            }
            Step::Corrupt(message) => {
                self.corrupt_log.skipped(&self.description, "a corrupt frame", &message);
                Ok(Capture::Retry)
            }
            Step::OverLimit(message) => {
                self.corrupt_log.skipped(&self.description, "a frame over the limits", &message);
                Ok(Capture::OverLimit)
            }
            Step::Nothing => Ok(Capture::Retry),
            Step::SlotTooSmall(message) => Err(SourceError::Read { source_name: self.description.clone(), message }),
            Step::Lost(err) => {
                self.connection.down(&err);
                Ok(Capture::Retry)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameRing, HeapMemory, SlotMemory};
    use crate::source::v4l2::device::{Capabilities, Filled};
    use crate::source::v4l2::userptr::PageAlignedHeap;
    use crate::source::v4l2::userptr::UserBuffer;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicU8, Ordering};
    use std::sync::Mutex;

    const LIMITS: LimitsConfig = LimitsConfig { max_width: 16384, max_height: 16384, max_alloc_mib: 256 };

    /// What the fake device does on one `dequeue` call.
    #[derive(Clone)]
    enum Event {
        Frame(Vec<u8>),
        Damaged(Vec<u8>),
        Nothing,
        Fail(DeviceError),
    }

    struct FakeDevice {
        caps: Capabilities,
        answer: DriverFormat,
        fps: Result<Option<f64>, DeviceError>,
        events: VecDeque<Event>,
        journal: Arc<Mutex<Vec<String>>>,
        /// Why the driver refuses user pointers; `None`: it takes them, as uvcvideo does.
        userptr_refusal: Option<String>,
        /// User-pointer buffers the driver holds, in the order it fills them.
        queued: VecDeque<u32>,
        /// The user-pointer buffers streaming started with (the fake keeps them as a driver does).
        user_buffers: Vec<Arc<UserBuffer>>,
    }

    impl FakeDevice {
        fn new(answer: DriverFormat, events: Vec<Event>, journal: &Arc<Mutex<Vec<String>>>) -> FakeDevice {
            FakeDevice {
                caps: Capabilities {
                    driver: "uvcvideo".into(),
                    card: "Fake Cam".into(),
                    video_capture: true,
                    streaming: true,
                },
                answer,
                fps: Ok(Some(30.0)),
                events: events.into(),
                journal: journal.clone(),
                userptr_refusal: None,
                queued: VecDeque::new(),
                user_buffers: Vec::new(),
            }
        }

        /// Fills the next queued user-pointer buffer as the driver would (the fake writes no
        /// bytes: the test's slot memory carries a pattern per buffer).
        fn fill(&mut self, bytes_used: usize, flagged_corrupt: bool) -> Option<Filled> {
            let index = self.queued.pop_front()?;
            self.note(format!("DQBUF {index}"));
            Some(Filled { index, bytes_used, captured_at: SystemTime::UNIX_EPOCH, flagged_corrupt })
        }

        fn note(&self, entry: String) {
            self.journal.lock().expect("journal").push(entry);
        }
    }

    impl CaptureDevice for FakeDevice {
        fn capabilities(&mut self) -> Result<Capabilities, DeviceError> {
            Ok(self.caps.clone())
        }
        fn set_format(&mut self, width: u32, height: u32, fourcc: FourCc) -> Result<DriverFormat, DeviceError> {
            self.note(format!("S_FMT {width}x{height} {fourcc}"));
            Ok(self.answer)
        }
        fn set_frame_rate(&mut self, fps: u32) -> Result<Option<f64>, DeviceError> {
            self.note(format!("S_PARM {fps}"));
            self.fps.clone()
        }
        fn start(&mut self, buffer_count: u32) -> Result<(), DeviceError> {
            self.note(format!("STREAMON {buffer_count}"));
            Ok(())
        }
        fn dequeue(&mut self, _: Duration, consume: &mut dyn FnMut(RawFrame<'_>)) -> Result<bool, DeviceError> {
            match self.events.pop_front().unwrap_or(Event::Nothing) {
                Event::Frame(data) => {
                    consume(RawFrame { data: &data, captured_at: SystemTime::UNIX_EPOCH, flagged_corrupt: false });
                    Ok(true)
                }
                Event::Damaged(data) => {
                    consume(RawFrame { data: &data, captured_at: SystemTime::UNIX_EPOCH, flagged_corrupt: true });
                    Ok(true)
                }
                Event::Nothing => Ok(false),
                Event::Fail(err) => Err(err),
            }
        }
        fn start_userptr(&mut self, buffers: &[Arc<UserBuffer>]) -> Result<UserptrStart, DeviceError> {
            self.note(format!("REQBUFS USERPTR {}", buffers.len()));
            if let Some(reason) = &self.userptr_refusal {
                return Ok(UserptrStart::Refused(reason.clone()));
            }
            self.user_buffers = buffers.to_vec();
            for index in 0..buffers.len() as u32 {
                self.note(format!("QBUF {index}"));
                self.queued.push_back(index);
            }
            self.note(format!("STREAMON USERPTR {}", buffers.len()));
            Ok(UserptrStart::Started(buffers.len() as u32))
        }
        fn requeue(&mut self, index: u32) -> Result<(), DeviceError> {
            assert!(!self.queued.contains(&index), "buffer {index} queued twice");
            assert!((index as usize) < self.user_buffers.len(), "buffer {index} was never queued");
            self.note(format!("QBUF {index}"));
            self.queued.push_back(index);
            Ok(())
        }
        fn dequeue_user(&mut self, _: Duration) -> Result<Option<Filled>, DeviceError> {
            if self.queued.is_empty() {
                return Ok(None);
            }
            match self.events.pop_front().unwrap_or(Event::Nothing) {
                Event::Frame(data) => Ok(self.fill(data.len(), false)),
                Event::Damaged(data) => Ok(self.fill(data.len(), true)),
                Event::Nothing => Ok(None),
                Event::Fail(err) => Err(err),
            }
        }
    }

    impl Drop for FakeDevice {
        fn drop(&mut self) {
            self.note("closed".into());
        }
    }

    fn yuyv_answer(width: u32, height: u32) -> DriverFormat {
        DriverFormat { width, height, fourcc: FourCc::YUYV, bytes_per_line: width * 2, size_image: width * height * 2 }
    }

    fn request(format: V4l2Format) -> V4l2Request {
        V4l2Request { device: "/dev/video9".into(), width: 4, height: 2, fps: 30, format, limits: LIMITS }
    }

    fn quick_options() -> V4l2Options {
        V4l2Options {
            poll_interval: Duration::from_millis(1),
            stall_timeout: Duration::from_secs(3600),
            initial_backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
            buffer_count: 4,
            slots: None,
        }
    }

    /// Slot memory that lends user pointers: page-aligned, each buffer filled with its own byte
    /// (1, 2, 3, … in allocation order) so a frame shows which buffer it is.
    fn patterned_slots() -> SlotAllocator {
        let next = Arc::new(AtomicU8::new(1));
        SlotAllocator::new(move || {
            let mut memory = PageAlignedHeap::new(page_size(), page_size());
            memory.as_mut_slice().fill(next.fetch_add(1, Ordering::SeqCst));
            Ok(Box::new(memory))
        })
    }

    fn userptr_options() -> V4l2Options {
        V4l2Options { slots: Some(patterned_slots()), ..quick_options() }
    }

    /// A source opened on `device` alone, asking for `format`.
    fn source_on(format: V4l2Format, device: FakeDevice) -> V4l2Source {
        let stop = Arc::new(AtomicBool::new(false));
        V4l2Source::with_opener(request(format), quick_options(), scripted_opener(vec![Ok(device)]), stop)
            .expect("open")
    }

    fn userptr_source(options: V4l2Options, devices: Vec<Result<FakeDevice, DeviceError>>) -> V4l2Source {
        let stop = Arc::new(AtomicBool::new(false));
        V4l2Source::with_opener(request(V4l2Format::Yuyv), options, scripted_opener(devices), stop).expect("open")
    }

    fn journal_of(journal: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
        journal.lock().expect("journal").clone()
    }

    /// An opener that hands out scripted results in order, then transient "missing" errors.
    fn scripted_opener(
        results: Vec<Result<FakeDevice, DeviceError>>,
    ) -> impl FnMut(&Path) -> Result<Box<dyn CaptureDevice>, DeviceError> + Send {
        let mut results: VecDeque<_> = results.into();
        move |path: &Path| match results.pop_front() {
            Some(Ok(device)) => Ok(Box::new(device) as Box<dyn CaptureDevice>),
            Some(Err(err)) => Err(err),
            None => Err(DeviceError::Transient(format!("open {}: No such file or directory", path.display()))),
        }
    }

    fn heap_slot() -> FrameSlot {
        FrameSlot::new(Box::new(HeapMemory::default()))
    }

    fn yuyv_frame(fill: u8) -> Vec<u8> {
        vec![fill; 4 * 2 * 2]
    }

    fn gone() -> DeviceError {
        DeviceError::Transient("VIDIOC_DQBUF: Input/output error (os error 5)".into())
    }

    #[test]
    fn driver_format_is_accepted_with_its_own_size_and_stride() {
        let req = request(V4l2Format::Yuyv);
        let got = DriverFormat { bytes_per_line: 0, ..yuyv_answer(8, 6) };
        let negotiated = accept_driver_format(&req, &got).expect("accepted");
        assert_eq!((negotiated.width, negotiated.height, negotiated.bytes_per_line), (8, 6, 16));
        let padded = DriverFormat { bytes_per_line: 32, ..yuyv_answer(8, 6) };
        assert_eq!(accept_driver_format(&req, &padded).expect("accepted").bytes_per_line, 32);
    }

    #[test]
    fn the_other_supported_encoding_is_accepted() {
        let negotiated = accept_driver_format(&request(V4l2Format::Mjpeg), &yuyv_answer(4, 2)).expect("accepted");
        assert_eq!(negotiated.encoding, Encoding::Yuyv);
        let jpeg = DriverFormat { fourcc: FourCc::JPEG, ..yuyv_answer(4, 2) };
        assert_eq!(
            accept_driver_format(&request(V4l2Format::Yuyv), &jpeg).expect("accepted").encoding,
            Encoding::Mjpeg
        );
    }

    #[test]
    fn unusable_driver_formats_are_permanent_errors() {
        let req = request(V4l2Format::Mjpeg);
        let h264 = DriverFormat { fourcc: FourCc::new(*b"H264"), ..yuyv_answer(4, 2) };
        let err = accept_driver_format(&req, &h264).expect_err("H264");
        assert!(
            matches!(&err, DeviceError::Permanent(m) if m.contains("H264") && m.contains("list-formats-ext")),
            "{err}"
        );
        let short_stride = DriverFormat { bytes_per_line: 6, ..yuyv_answer(4, 2) };
        assert!(matches!(accept_driver_format(&req, &short_stride), Err(DeviceError::Permanent(_))));
        let odd = yuyv_answer(5, 2);
        assert!(matches!(accept_driver_format(&req, &odd), Err(DeviceError::Permanent(_))));
        let empty = yuyv_answer(0, 2);
        assert!(matches!(accept_driver_format(&req, &empty), Err(DeviceError::Permanent(_))));
    }

    #[test]
    fn negotiation_asks_for_the_configured_mode_and_tolerates_fixed_frame_rates() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let mut device = FakeDevice::new(yuyv_answer(4, 2), vec![], &journal);
        device.fps = Err(DeviceError::Permanent("VIDIOC_S_PARM: Inappropriate ioctl".into()));
        let options = V4l2Options { buffer_count: 3, ..quick_options() };
        let (negotiated, _) = negotiate(&mut device, &request(V4l2Format::Yuyv), &options).expect("negotiated");
        assert_eq!(negotiated.fps, None);
        drop(device);
        assert_eq!(*journal.lock().expect("journal"), ["S_FMT 4x2 YUYV", "S_PARM 30", "STREAMON 3", "closed"]);
    }

    #[test]
    fn non_capture_devices_are_rejected_before_touching_the_format() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let mut device = FakeDevice::new(yuyv_answer(4, 2), vec![], &journal);
        device.caps.video_capture = false;
        let err = negotiate(&mut device, &request(V4l2Format::Yuyv), &quick_options()).err().expect("metadata node");
        assert!(err.to_string().contains("not a video capture node"), "{err}");
        device.caps.video_capture = true;
        device.caps.streaming = false;
        assert!(matches!(
            negotiate(&mut device, &request(V4l2Format::Yuyv), &quick_options()),
            Err(DeviceError::Permanent(_))
        ));
        assert!(journal.lock().expect("journal").iter().all(|entry| !entry.starts_with("S_FMT")));
    }

    #[test]
    fn frames_flow_into_the_slot_with_the_driver_timestamp() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let device = FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(7))], &journal);
        let mut source = source_on(V4l2Format::Yuyv, device);
        let mut slot = heap_slot();
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        assert_eq!((slot.meta().width, slot.meta().height, slot.meta().format), (4, 2, PixelFormat::Yuyv));
        assert_eq!(slot.data(), &yuyv_frame(7)[..]);
        assert_eq!(slot.meta().captured_at, SystemTime::UNIX_EPOCH);
        assert_eq!(source.state(), SourceState::Streaming);
        assert_eq!(source.describe(), "v4l2:/dev/video9 4x2 YUYV 30fps");
    }

    #[test]
    fn a_missing_camera_at_start_is_retried_not_fatal() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let device = FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(1))], &journal);
        let opener = scripted_opener(vec![Err(DeviceError::Transient("open: ENOENT".into())), Ok(device)]);
        let stop = Arc::new(AtomicBool::new(false));
        let mut source =
            V4l2Source::with_opener(request(V4l2Format::Yuyv), quick_options(), opener, stop).expect("open");
        assert_eq!(source.state(), SourceState::Reconnecting { attempt: 1, last_error: "open: ENOENT".into() });
        let mut slot = heap_slot();
        assert_eq!(source.next_frame(&mut slot).expect("reopen"), Capture::Retry);
        assert_eq!(source.state(), SourceState::Connecting { attempt: 1 }, "open, no frame yet");
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        assert_eq!(source.state(), SourceState::Streaming);
    }

    #[test]
    fn a_permanent_error_at_start_ends_the_camera() {
        let stop = Arc::new(AtomicBool::new(false));
        let opener = scripted_opener(vec![Err(DeviceError::Permanent("open /dev/video9: Permission denied".into()))]);
        let err = V4l2Source::with_opener(request(V4l2Format::Yuyv), quick_options(), opener, stop)
            .err()
            .expect("permission denied is not retried");
        assert!(err.to_string().contains("Permission denied"), "{err}");
    }

    #[test]
    fn unplug_reopens_with_growing_attempts_and_a_good_frame_resets_them() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let first =
            FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(1)), Event::Fail(gone())], &journal);
        let second =
            FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(2)), Event::Fail(gone())], &journal);
        let opener = scripted_opener(vec![
            Ok(first),
            Err(DeviceError::Transient("open: ENODEV".into())),
            Err(DeviceError::Permanent("VIDIOC_QUERYCAP: Inappropriate ioctl".into())),
            Ok(second),
        ]);
        let stop = Arc::new(AtomicBool::new(false));
        let mut source =
            V4l2Source::with_opener(request(V4l2Format::Yuyv), quick_options(), opener, stop).expect("open");
        let status = source.connection_status().expect("a camera has a connection");
        let mut slot = heap_slot();

        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        assert_eq!(source.next_frame(&mut slot).expect("EIO"), Capture::Retry);
        assert_eq!(status.get(), SourceState::Reconnecting { attempt: 1, last_error: gone().to_string() });
        assert!(source.negotiated().is_none(), "the failed device is closed");
        assert_eq!(journal.lock().expect("journal").last().map(String::as_str), Some("closed"));

        assert_eq!(source.next_frame(&mut slot).expect("ENODEV"), Capture::Retry);
        assert_eq!(status.get(), SourceState::Reconnecting { attempt: 2, last_error: "open: ENODEV".into() });
        assert_eq!(source.next_frame(&mut slot).expect("other device"), Capture::Retry);
        assert!(
            matches!(status.get(), SourceState::Reconnecting { attempt: 3, .. }),
            "permanent errors are retried once running"
        );
        assert_eq!(source.next_frame(&mut slot).expect("reopened"), Capture::Retry);
        assert_eq!(status.get(), SourceState::Connecting { attempt: 3 });
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        assert_eq!(status.get(), SourceState::Streaming);
        assert_eq!(slot.data()[0], 2);

        assert_eq!(source.next_frame(&mut slot).expect("EIO again"), Capture::Retry);
        assert!(
            matches!(status.get(), SourceState::Reconnecting { attempt: 1, .. }),
            "the good frame reset the backoff"
        );
    }

    #[test]
    fn a_stalled_camera_is_reopened() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let device = FakeDevice::new(yuyv_answer(4, 2), vec![Event::Nothing], &journal);
        let options = V4l2Options { stall_timeout: Duration::ZERO, ..quick_options() };
        let stop = Arc::new(AtomicBool::new(false));
        let mut source =
            V4l2Source::with_opener(request(V4l2Format::Yuyv), options, scripted_opener(vec![Ok(device)]), stop)
                .expect("open");
        assert_eq!(source.next_frame(&mut heap_slot()).expect("stall"), Capture::Retry);
        assert!(
            matches!(source.state(), SourceState::Reconnecting { attempt: 1, last_error } if last_error.starts_with("no frame for")),
            "{:?}",
            source.state()
        );
    }

    #[test]
    fn an_idle_poll_within_the_stall_timeout_keeps_the_device() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let device = FakeDevice::new(yuyv_answer(4, 2), vec![Event::Nothing, Event::Frame(yuyv_frame(3))], &journal);
        let mut source = source_on(V4l2Format::Yuyv, device);
        let mut slot = heap_slot();
        assert_eq!(source.next_frame(&mut slot).expect("idle"), Capture::Retry);
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
    }

    #[test]
    fn corrupt_frames_are_skipped_without_reconnecting() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let events = vec![
            Event::Frame(b"\xFF\xD8garbage".to_vec()),
            Event::Damaged(yuyv_frame(0)),
            Event::Frame(yuyv_frame(5)[..3].to_vec()),
        ];
        let mut device = FakeDevice::new(yuyv_answer(4, 2), events, &journal);
        device.answer.fourcc = FourCc::MJPG;
        let mut source = source_on(V4l2Format::Mjpeg, device);
        let mut slot = heap_slot();
        for _ in 0..3 {
            assert_eq!(source.next_frame(&mut slot).expect("skip"), Capture::Retry);
        }
        assert_eq!(source.state(), SourceState::Connecting { attempt: 0 }, "open, no usable frame yet");
        assert!(source.negotiated().is_some());
    }

    #[test]
    fn frames_over_the_limits_are_skipped_and_reported_as_such() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let device = FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(1))], &journal);
        let stop = Arc::new(AtomicBool::new(false));
        let narrow = V4l2Request { limits: LimitsConfig { max_width: 2, ..LIMITS }, ..request(V4l2Format::Yuyv) };
        let mut source =
            V4l2Source::with_opener(narrow, quick_options(), scripted_opener(vec![Ok(device)]), stop).expect("open");
        assert_eq!(source.next_frame(&mut heap_slot()).expect("skip"), Capture::OverLimit);
        assert_eq!(source.state(), SourceState::Connecting { attempt: 0 }, "open, no usable frame yet");
    }

    /// Fixed-size memory, like a pinned slot sized for a smaller camera mode.
    struct FixedMemory(Vec<u8>);

    impl SlotMemory for FixedMemory {
        fn capacity(&self) -> usize {
            self.0.len()
        }
        fn reserve(&mut self, len: usize) -> Result<(), String> {
            if len > self.0.len() {
                return Err(format!("{len} bytes exceed the slot's {}", self.0.len()));
            }
            Ok(())
        }
        fn as_slice(&self) -> &[u8] {
            &self.0
        }
        fn as_mut_slice(&mut self) -> &mut [u8] {
            &mut self.0
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    #[test]
    fn a_slot_too_small_for_the_negotiated_mode_ends_the_camera() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let device = FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(1))], &journal);
        let mut source = source_on(V4l2Format::Yuyv, device);
        let mut slot = FrameSlot::new(Box::new(FixedMemory(vec![0; 8])));
        let err = source.next_frame(&mut slot).expect_err("slot too small");
        assert!(matches!(err, SourceError::Read { .. }), "{err}");
    }

    #[test]
    fn the_stop_flag_ends_the_source_and_closes_the_device() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let device = FakeDevice::new(yuyv_answer(4, 2), vec![], &journal);
        let stop = Arc::new(AtomicBool::new(false));
        let mut source = V4l2Source::with_opener(
            request(V4l2Format::Yuyv),
            quick_options(),
            scripted_opener(vec![Ok(device)]),
            stop.clone(),
        )
        .expect("open");
        stop.store(true, Ordering::Relaxed);
        assert_eq!(source.next_frame(&mut heap_slot()).expect("end"), Capture::End);
        assert_eq!(source.state(), SourceState::Stopped);
        assert_eq!(journal.lock().expect("journal").last().map(String::as_str), Some("closed"));
    }
    #[test]
    fn tight_yuyv_frames_are_lent_from_user_pointer_buffers_without_a_copy() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let device = FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(0))], &journal);
        let mut source = userptr_source(userptr_options(), vec![Ok(device)]);
        let mut slot = heap_slot();
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        assert!(slot.is_lent(), "the slot holds the driver's buffer");
        assert_eq!(slot.copies(), 0);
        assert_eq!(slot.data(), &[1; 16], "the bytes of buffer 0, where the driver wrote them");
        assert_eq!((slot.meta().width, slot.meta().format), (4, PixelFormat::Yuyv));
        assert_eq!(slot.memory().as_slice().as_ptr() as usize % page_size(), 0);
        assert_eq!(source.capture_mode(), CaptureMode::Userptr);
        let plan = source.capture_plan().expect("open");
        assert_eq!(plan.label(), "userptr");
        assert!(plan.reason.contains("V4L2_MEMORY_USERPTR"), "{}", plan.reason);
        assert_eq!(
            journal_of(&journal),
            [
                "S_FMT 4x2 YUYV",
                "S_PARM 30",
                "REQBUFS USERPTR 4",
                "QBUF 0",
                "QBUF 1",
                "QBUF 2",
                "QBUF 3",
                "STREAMON USERPTR 4",
                "DQBUF 0"
            ]
        );
    }

    #[test]
    fn a_lent_buffer_goes_back_to_the_driver_only_after_the_ring_releases_its_slot() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let frames = (0..6).map(|_| Event::Frame(yuyv_frame(0))).collect();
        let device = FakeDevice::new(yuyv_answer(4, 2), frames, &journal);
        let mut source = userptr_source(userptr_options(), vec![Ok(device)]);
        let ring = FrameRing::with_heap_slots(3, 0);
        let mut slot = ring.acquire_for_write().expect("slot");
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        ring.publish(slot);
        let processing = ring.take_ready(Duration::from_millis(1)).expect("the worker takes frame 0");
        assert_eq!(processing.data()[0], 1);
        for _ in 0..3 {
            let mut slot = ring.acquire_for_write().expect("slot");
            assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
            ring.publish(slot);
        }
        let log = journal_of(&journal);
        let streaming = log.iter().position(|entry| entry.starts_with("STREAMON")).expect("streaming");
        assert!(
            !log[streaming..].contains(&"QBUF 0".to_string()),
            "buffer 0 stays out of the driver while the worker has it: {log:?}"
        );
        ring.release(processing);
        let mut slot = ring.acquire_for_write().expect("slot");
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        let log = journal_of(&journal);
        assert!(log[streaming..].contains(&"QBUF 0".to_string()), "given back once released: {log:?}");
        ring.release(slot);
    }

    #[test]
    fn a_driver_that_refuses_user_pointers_streams_mmap_buffers_and_copies_once() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let mut device = FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(7))], &journal);
        device.userptr_refusal = Some("the driver takes no user pointers (VIDIOC_REQBUFS: Invalid argument)".into());
        let mut source = userptr_source(userptr_options(), vec![Ok(device)]);
        let mut slot = heap_slot();
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        assert!(!slot.is_lent());
        assert_eq!((slot.copies(), slot.data()), (1, &yuyv_frame(7)[..]));
        assert_eq!(source.capture_mode(), CaptureMode::Copy);
        let plan = source.capture_plan().expect("open");
        assert_eq!(plan.label(), "mmap+copy");
        assert!(plan.reason.contains("VIDIOC_REQBUFS"), "{}", plan.reason);
        let log = journal_of(&journal);
        assert_eq!(log[2..], ["REQBUFS USERPTR 4", "STREAMON 4"]);
    }

    #[test]
    fn the_capture_plan_is_logged_once_until_it_changes() {
        let mut logged = None;
        let refused = CapturePlan { mode: CaptureMode::Copy, reason: "VIDIOC_REQBUFS: Invalid argument".into() };
        assert!(log_plan(&mut logged, "v4l2:/dev/video9", &refused));
        assert!(!log_plan(&mut logged, "v4l2:/dev/video9", &refused), "a reconnect the same way says nothing");
        let lent = CapturePlan { mode: CaptureMode::Userptr, reason: "user pointers".into() };
        assert!(log_plan(&mut logged, "v4l2:/dev/video9", &lent));
    }

    #[test]
    fn padded_rows_and_mjpeg_stream_mmap_buffers_without_asking_for_user_pointers() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let padded = DriverFormat { bytes_per_line: 16, size_image: 32, ..yuyv_answer(4, 2) };
        let device = FakeDevice::new(padded, vec![Event::Frame(vec![3; 32])], &journal);
        let mut source = userptr_source(userptr_options(), vec![Ok(device)]);
        let mut slot = heap_slot();
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        assert!(!slot.is_lent());
        assert_eq!((slot.copies(), slot.data().len()), (1, 16), "the copy dropped the padding");
        let plan = source.capture_plan().expect("open");
        assert!(plan.mode == CaptureMode::Copy && plan.reason.contains("pads"), "{plan:?}");

        let mut mjpeg = FakeDevice::new(yuyv_answer(4, 2), vec![], &journal);
        mjpeg.answer.fourcc = FourCc::MJPG;
        let stop = Arc::new(AtomicBool::new(false));
        let source = V4l2Source::with_opener(
            request(V4l2Format::Mjpeg),
            userptr_options(),
            scripted_opener(vec![Ok(mjpeg)]),
            stop,
        )
        .expect("open");
        assert_eq!(source.capture_plan().map(|plan| plan.label()), Some("mmap+decode"));
        assert!(journal_of(&journal).iter().all(|entry| !entry.contains("USERPTR")), "{:?}", journal_of(&journal));
    }

    #[test]
    fn with_every_buffer_held_the_source_waits_and_queues_none_of_them() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let frames = (0..3).map(|_| Event::Frame(yuyv_frame(0))).collect();
        let device = FakeDevice::new(yuyv_answer(4, 2), frames, &journal);
        let options = V4l2Options { buffer_count: 2, stall_timeout: Duration::ZERO, ..userptr_options() };
        let mut source = userptr_source(options, vec![Ok(device)]);
        let (mut first, mut second, mut third) = (heap_slot(), heap_slot(), heap_slot());
        assert_eq!(source.next_frame(&mut first).expect("frame"), Capture::Frame);
        assert_eq!(source.next_frame(&mut second).expect("frame"), Capture::Frame);
        let before = journal_of(&journal);
        for _ in 0..3 {
            assert_eq!(source.next_frame(&mut third).expect("waits"), Capture::Retry);
        }
        assert_eq!(journal_of(&journal), before, "no QBUF of a held buffer, no DQBUF without one queued");
        assert_eq!(source.state(), SourceState::Streaming, "waiting for slots is no stalled camera");
        assert!(!third.is_lent());
        drop(first);
        assert_eq!(source.next_frame(&mut third).expect("frame"), Capture::Frame);
        assert_eq!(journal_of(&journal)[before.len()..], ["QBUF 0", "DQBUF 0"]);
        assert_eq!((second.data()[0], third.data()[0]), (2, 1));
    }

    #[test]
    fn frames_held_across_a_reconnect_stay_readable_and_never_reach_the_new_device() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let first =
            FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(0)), Event::Fail(gone())], &journal);
        let second = FakeDevice::new(yuyv_answer(4, 2), vec![Event::Frame(yuyv_frame(0))], &journal);
        let mut source = userptr_source(userptr_options(), vec![Ok(first), Ok(second)]);
        let (mut held, mut slot) = (heap_slot(), heap_slot());
        assert_eq!(source.next_frame(&mut held).expect("frame"), Capture::Frame);
        assert_eq!(source.next_frame(&mut slot).expect("EIO"), Capture::Retry);
        assert_eq!(journal_of(&journal).last().map(String::as_str), Some("closed"));
        assert_eq!(held.data(), &[1; 16], "the old device's buffer outlives it");
        assert_eq!(source.next_frame(&mut slot).expect("reopened"), Capture::Retry);
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        assert_eq!(slot.data(), &[5; 16], "buffer 0 of the new device's own four");
        let reopened = journal_of(&journal).len();
        drop(held);
        assert_eq!(source.next_frame(&mut slot).expect("idle"), Capture::Retry);
        assert_eq!(journal_of(&journal).len(), reopened, "the old buffer 0 is not queued on the new device");
    }

    #[test]
    fn damaged_or_short_user_pointer_frames_are_skipped_and_their_buffers_reused() {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let events = vec![Event::Damaged(yuyv_frame(0)), Event::Frame(vec![0; 3]), Event::Frame(yuyv_frame(0))];
        let device = FakeDevice::new(yuyv_answer(4, 2), events, &journal);
        let options = V4l2Options { buffer_count: 2, ..userptr_options() };
        let mut source = userptr_source(options, vec![Ok(device)]);
        let mut slot = heap_slot();
        assert_eq!(source.next_frame(&mut slot).expect("damaged"), Capture::Retry);
        assert_eq!(source.next_frame(&mut slot).expect("short"), Capture::Retry);
        assert!(!slot.is_lent());
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        assert!(slot.is_lent());
        let log = journal_of(&journal);
        let streaming = log.iter().position(|entry| entry.starts_with("STREAMON")).expect("streaming");
        assert_eq!(
            log[streaming + 1..],
            ["DQBUF 0", "QBUF 0", "DQBUF 1", "QBUF 1", "DQBUF 0"],
            "each skipped buffer is queued again"
        );
    }
}
