//! What the V4L2 source needs of a capture device, so that all of the source is tested with a
//! fake: the [`CaptureDevice`] and [`DeviceOpener`] traits and the values they pass (what
//! `VIDIOC_QUERYCAP` and `VIDIOC_S_FMT` answer, dequeued buffers, a user-pointer start), and the
//! wall-clock time of a driver's monotonic timestamp. `super::linux` is the real device.
//!
//! Owns: the device seam. Must not: negotiate, reconnect or write frames (`super::capture` does).

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::userptr::UserBuffer;
use crate::source::reconnect::DeviceError;

/// A V4L2 pixel format code (`v4l2_fourcc`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FourCc(pub u32);

impl FourCc {
    pub const MJPG: FourCc = FourCc::new(*b"MJPG");
    /// Some drivers report baseline JPEG under this code; it is handled like MJPG.
    pub const JPEG: FourCc = FourCc::new(*b"JPEG");
    pub const YUYV: FourCc = FourCc::new(*b"YUYV");

    pub const fn new(code: [u8; 4]) -> FourCc {
        FourCc(u32::from_le_bytes(code))
    }
}

impl fmt::Display for FourCc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0.to_le_bytes() {
            let shown = if byte.is_ascii_graphic() || byte == b' ' { char::from(byte) } else { '?' };
            write!(f, "{shown}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for FourCc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FourCc({self})")
    }
}

/// What `VIDIOC_QUERYCAP` says about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    pub driver: String,
    pub card: String,
    pub video_capture: bool,
    pub streaming: bool,
}

impl Capabilities {
    const CAP_VIDEO_CAPTURE: u32 = 0x0000_0001;
    const CAP_STREAMING: u32 = 0x0400_0000;
    const CAP_DEVICE_CAPS: u32 = 0x8000_0000;

    /// Parses the raw QUERYCAP fields. `capabilities` describes the whole physical device;
    /// when it has `V4L2_CAP_DEVICE_CAPS`, `device_caps` describes the opened node, which is
    /// what matters (a UVC camera's metadata node is not a capture node).
    pub fn from_querycap(driver: &[u8], card: &[u8], capabilities: u32, device_caps: u32) -> Capabilities {
        let node_caps = if capabilities & Self::CAP_DEVICE_CAPS != 0 { device_caps } else { capabilities };
        let text = |bytes: &[u8]| {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        };
        Capabilities {
            driver: text(driver),
            card: text(card),
            video_capture: node_caps & Self::CAP_VIDEO_CAPTURE != 0,
            streaming: node_caps & Self::CAP_STREAMING != 0,
        }
    }
}

/// The format the driver actually set (`VIDIOC_S_FMT`'s answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverFormat {
    pub width: u32,
    pub height: u32,
    pub fourcc: FourCc,
    /// Row stride in bytes for packed formats; 0 when the driver leaves it to the application.
    pub bytes_per_line: u32,
    /// Largest buffer the driver will fill (for MJPEG an upper bound of one compressed frame).
    pub size_image: u32,
}

/// One dequeued buffer, valid only during the callback it is passed to.
#[derive(Debug)]
pub struct RawFrame<'a> {
    /// The bytes the driver filled (`bytesused` of the mapped buffer).
    pub data: &'a [u8],
    /// Wall-clock capture time, from the driver's timestamp where it has a monotonic one.
    pub captured_at: SystemTime,
    /// The driver marked the buffer as damaged (`V4L2_BUF_FLAG_ERROR`).
    pub flagged_corrupt: bool,
}

/// One user-pointer buffer the driver filled ([`CaptureDevice::dequeue_user`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filled {
    pub index: u32,
    /// Bytes the driver wrote (`bytesused`).
    pub bytes_used: usize,
    /// Wall-clock capture time, from the driver's timestamp where it has a monotonic one.
    pub captured_at: SystemTime,
    /// The driver marked the buffer as damaged (`V4L2_BUF_FLAG_ERROR`).
    pub flagged_corrupt: bool,
}

/// How [`CaptureDevice::start_userptr`] went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserptrStart {
    /// Streaming into the first this many buffers, all queued.
    Started(u32),
    /// The driver does not take user pointers, or not this memory: why. The device holds no
    /// buffers, so mmap streaming can start instead.
    Refused(String),
}

/// The device operations the source needs. Dropping the device stops streaming and releases
/// its buffers.
pub trait CaptureDevice: Send {
    /// `VIDIOC_QUERYCAP`.
    fn capabilities(&mut self) -> Result<Capabilities, DeviceError>;
    /// `VIDIOC_S_FMT`: asks for a size and pixel format, returns what the driver set.
    fn set_format(&mut self, width: u32, height: u32, fourcc: FourCc) -> Result<DriverFormat, DeviceError>;
    /// `VIDIOC_S_PARM`: asks for `fps`, returns the rate the driver set, or `None` when the driver
    /// cannot set one.
    fn set_frame_rate(&mut self, fps: u32) -> Result<Option<f64>, DeviceError>;
    /// Allocates (up to) `buffer_count` mmap streaming buffers, queues them and starts streaming.
    fn start(&mut self, buffer_count: u32) -> Result<(), DeviceError>;
    /// Waits up to `timeout` for a filled mmap buffer, hands it to `consume` and queues it again.
    /// `Ok(false)` when no buffer arrived in time.
    fn dequeue(&mut self, timeout: Duration, consume: &mut dyn FnMut(RawFrame<'_>)) -> Result<bool, DeviceError>;
    /// Streams into `buffers` instead of mmap buffers (`V4L2_MEMORY_USERPTR`): asks the driver for
    /// that many user-pointer buffers, queues them all and starts streaming. The device keeps the
    /// buffers' memory until it is dropped, so the driver never writes to freed memory.
    fn start_userptr(&mut self, buffers: &[Arc<UserBuffer>]) -> Result<UserptrStart, DeviceError>;
    /// Queues user-pointer buffer `index` again (its slot let go of it).
    fn requeue(&mut self, index: u32) -> Result<(), DeviceError>;
    /// Waits up to `timeout` for a filled user-pointer buffer, which stays out of the driver's
    /// hands until [`CaptureDevice::requeue`]. `None` when none arrived in time.
    fn dequeue_user(&mut self, timeout: Duration) -> Result<Option<Filled>, DeviceError>;
}

/// Opens the device at a path; called again for every reconnect.
pub trait DeviceOpener: Send {
    fn open(&mut self, path: &Path) -> Result<Box<dyn CaptureDevice>, DeviceError>;
}

impl<F> DeviceOpener for F
where
    F: FnMut(&Path) -> Result<Box<dyn CaptureDevice>, DeviceError> + Send,
{
    fn open(&mut self, path: &Path) -> Result<Box<dyn CaptureDevice>, DeviceError> {
        self(path)
    }
}

/// Wall-clock time of a driver timestamp taken on CLOCK_MONOTONIC, given both clocks read now.
/// A timestamp from the future (clock confusion) maps to `now_wall`.
pub fn monotonic_to_wall(stamp: Duration, now_monotonic: Duration, now_wall: SystemTime) -> SystemTime {
    now_wall.checked_sub(now_monotonic.saturating_sub(stamp)).unwrap_or(now_wall)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fourcc_round_trips_and_prints() {
        assert_eq!(FourCc::MJPG.0, 0x4750_4A4D, "v4l2_fourcc('M','J','P','G')");
        assert_eq!(FourCc::YUYV.to_string(), "YUYV");
        assert_eq!(FourCc(0x0000_0031).to_string(), "1???");
    }

    #[test]
    fn querycap_uses_the_node_capabilities_when_present() {
        let mut driver = [0u8; 16];
        driver[..8].copy_from_slice(b"uvcvideo");
        let caps = Capabilities::from_querycap(&driver, b"Cam\0junk", 0x8400_0001, 0x0080_0000);
        assert_eq!((caps.driver.as_str(), caps.card.as_str()), ("uvcvideo", "Cam"));
        assert!(!caps.video_capture && !caps.streaming, "a metadata node of a capture device is not capturable");
        let caps = Capabilities::from_querycap(b"x", b"y", 0x0400_0001, 0);
        assert!(caps.video_capture && caps.streaming);
    }

    #[test]
    fn monotonic_timestamps_become_wall_time() {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = monotonic_to_wall(Duration::from_millis(9_950), Duration::from_secs(10), wall);
        assert_eq!(wall.duration_since(at).expect("earlier"), Duration::from_millis(50));
        assert_eq!(monotonic_to_wall(Duration::from_secs(11), Duration::from_secs(10), wall), wall);
    }
}
