//! The real V4L2 device: direct ioctls on `/dev/videoN` with mmap streaming buffers.
//!
//! Owns: the handful of `#[repr(C)]` kernel structs and ioctl numbers the capture path needs
//! (QUERYCAP, S_FMT, S_PARM, REQBUFS, QUERYBUF, QBUF, DQBUF, STREAMON/OFF), the buffer mappings
//! and their release, and the translation of errno values into [`DeviceError`]s.
//! Must not: decide about formats, frames or reconnecting (that is the source's job, tested
//! against a fake device). Written against the kernel UAPI (`linux/videodev2.h`) by hand instead
//! of bindgen so that it cross-compiles for aarch64 without libclang or a sysroot; the struct
//! sizes are checked at compile time for 64-bit Linux, the only targets this module builds for.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::NonNull;
use std::time::{Duration, SystemTime};

use super::{monotonic_to_wall, Capabilities, CaptureDevice, DeviceError, DriverFormat, FourCc, RawFrame};

const BUF_TYPE_VIDEO_CAPTURE: u32 = 1;
const MEMORY_MMAP: u32 = 1;
const FIELD_ANY: u32 = 0;
const CAP_TIMEPERFRAME: u32 = 0x1000;
const BUF_FLAG_ERROR: u32 = 0x40;
const BUF_FLAG_TIMESTAMP_MASK: u32 = 0xe000;
const BUF_FLAG_TIMESTAMP_MONOTONIC: u32 = 0x2000;

#[repr(C)]
struct V4l2Capability {
    driver: [u8; 16],
    card: [u8; 32],
    bus_info: [u8; 32],
    version: u32,
    capabilities: u32,
    device_caps: u32,
    reserved: [u32; 3],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct V4l2PixFormat {
    width: u32,
    height: u32,
    pixelformat: u32,
    field: u32,
    bytesperline: u32,
    sizeimage: u32,
    colorspace: u32,
    private: u32,
    flags: u32,
    ycbcr_enc: u32,
    quantization: u32,
    xfer_func: u32,
}

/// `struct v4l2_format` with the `pix` member of its 200-byte union; the union holds pointers,
/// so on 64-bit it starts at offset 8.
#[repr(C)]
struct V4l2Format {
    kind: u32,
    union_alignment: u32,
    pix: V4l2PixFormat,
    rest_of_union: [u8; 200 - std::mem::size_of::<V4l2PixFormat>()],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct V4l2Fract {
    numerator: u32,
    denominator: u32,
}

#[repr(C)]
struct V4l2CaptureParm {
    capability: u32,
    capturemode: u32,
    timeperframe: V4l2Fract,
    extendedmode: u32,
    readbuffers: u32,
    reserved: [u32; 4],
}

/// `struct v4l2_streamparm` with the `capture` member of its 200-byte union.
#[repr(C)]
struct V4l2StreamParm {
    kind: u32,
    capture: V4l2CaptureParm,
    rest_of_union: [u8; 200 - std::mem::size_of::<V4l2CaptureParm>()],
}

#[repr(C)]
struct V4l2RequestBuffers {
    count: u32,
    kind: u32,
    memory: u32,
    capabilities: u32,
    flags: u8,
    reserved: [u8; 3],
}

#[repr(C)]
struct V4l2Timecode {
    kind: u32,
    flags: u32,
    frames: u8,
    seconds: u8,
    minutes: u8,
    hours: u8,
    userbits: [u8; 4],
}

#[repr(C)]
struct V4l2Buffer {
    index: u32,
    kind: u32,
    bytesused: u32,
    flags: u32,
    field: u32,
    timestamp: libc::timeval,
    timecode: V4l2Timecode,
    sequence: u32,
    memory: u32,
    /// `union m`: the `offset` member for MMAP buffers, then the rest of the pointer-sized union.
    m_offset: u32,
    m_rest: u32,
    length: u32,
    reserved2: u32,
    request_fd: i32,
}

const _: () = {
    assert!(std::mem::size_of::<V4l2Capability>() == 104);
    assert!(std::mem::size_of::<V4l2Format>() == 208);
    assert!(std::mem::offset_of!(V4l2Format, pix) == 8);
    assert!(std::mem::size_of::<V4l2StreamParm>() == 204);
    assert!(std::mem::size_of::<V4l2RequestBuffers>() == 20);
    assert!(std::mem::size_of::<V4l2Buffer>() == 88);
    assert!(std::mem::offset_of!(V4l2Buffer, timestamp) == 24);
    assert!(std::mem::offset_of!(V4l2Buffer, m_offset) == 64);
};

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `_IOC(dir, 'V', nr, size)` of the generic Linux ioctl encoding (x86_64 and aarch64).
const fn vidioc(dir: u32, nr: u32, size: usize) -> libc::Ioctl {
    ((dir << 30) | ((size as u32) << 16) | ((b'V' as u32) << 8) | nr) as libc::Ioctl
}

const VIDIOC_QUERYCAP: libc::Ioctl = vidioc(IOC_READ, 0, std::mem::size_of::<V4l2Capability>());
const VIDIOC_S_FMT: libc::Ioctl = vidioc(IOC_READ | IOC_WRITE, 5, std::mem::size_of::<V4l2Format>());
const VIDIOC_REQBUFS: libc::Ioctl = vidioc(IOC_READ | IOC_WRITE, 8, std::mem::size_of::<V4l2RequestBuffers>());
const VIDIOC_QUERYBUF: libc::Ioctl = vidioc(IOC_READ | IOC_WRITE, 9, std::mem::size_of::<V4l2Buffer>());
const VIDIOC_QBUF: libc::Ioctl = vidioc(IOC_READ | IOC_WRITE, 15, std::mem::size_of::<V4l2Buffer>());
const VIDIOC_DQBUF: libc::Ioctl = vidioc(IOC_READ | IOC_WRITE, 17, std::mem::size_of::<V4l2Buffer>());
const VIDIOC_STREAMON: libc::Ioctl = vidioc(IOC_WRITE, 18, std::mem::size_of::<libc::c_int>());
const VIDIOC_STREAMOFF: libc::Ioctl = vidioc(IOC_WRITE, 19, std::mem::size_of::<libc::c_int>());
const VIDIOC_S_PARM: libc::Ioctl = vidioc(IOC_READ | IOC_WRITE, 22, std::mem::size_of::<V4l2StreamParm>());

/// errno values after which reopening the device cannot help. ENOSYS and EOPNOTSUPP say the ioctl
/// is not implemented at all (qemu-user answers unknown ioctls with ENOSYS where a kernel says
/// ENOTTY).
fn classify(action: &str, err: io::Error) -> DeviceError {
    let message = format!("{action}: {err}");
    match err.raw_os_error() {
        Some(libc::EACCES | libc::EPERM | libc::ENOTTY | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
            DeviceError::Permanent(message)
        }
        _ => DeviceError::Transient(message),
    }
}

/// Runs one ioctl on `fd` with `arg`, retrying when a signal interrupts it.
fn ioctl<T>(fd: &OwnedFd, request: libc::Ioctl, arg: &mut T) -> io::Result<()> {
    loop {
        // SAFETY: `request` encodes the size of `T` (the constants above are built from
        // `size_of` of the matching `#[repr(C)]` struct, whose layout is asserted at compile
        // time), so the kernel reads and writes only within `*arg`, which is valid and exclusive
        // for the duration of the call. `fd` is an open descriptor owned by the caller.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request, arg as *mut T) };
        if rc != -1 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// All-zero value of one of the kernel structs above, which is how the V4L2 API wants them
/// initialised (reserved fields must be zero).
fn zeroed<T: KernelStruct>() -> T {
    // SAFETY: `KernelStruct` is implemented only for the plain-data `#[repr(C)]` structs of this
    // module, made of integers, byte arrays and `timeval`, for which all-zero bytes are valid.
    unsafe { std::mem::zeroed() }
}

/// Marker for the plain-data kernel structs that [`zeroed`] may create.
trait KernelStruct {}
impl KernelStruct for V4l2Capability {}
impl KernelStruct for V4l2Format {}
impl KernelStruct for V4l2StreamParm {}
impl KernelStruct for V4l2RequestBuffers {}
impl KernelStruct for V4l2Buffer {}

/// CLOCK_MONOTONIC now, the clock V4L2 drivers stamp buffers with.
fn monotonic_now() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, exclusive timespec; CLOCK_MONOTONIC always exists on Linux, so
    // the call cannot fail and leaves `now` set.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    Duration::new(now.tv_sec.max(0) as u64, now.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// One mmap'ed driver buffer; unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(fd: &OwnedFd, offset: u32, len: usize) -> io::Result<Mapping> {
        // SAFETY: maps `len` bytes of the device at the offset QUERYBUF returned for this
        // buffer; a null hint lets the kernel choose the address. The result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                libc::off_t::from(offset),
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(ptr.cast::<u8>()).map(|ptr| Mapping { ptr, len }).ok_or_else(|| io::Error::other("mmap gave null"))
    }

    fn bytes(&self, len: usize) -> &[u8] {
        // SAFETY: the mapping is `self.len` bytes long and lives as long as `self`; the driver
        // writes into it only while the buffer is queued, and callers read only a dequeued buffer
        // (before queueing it again), so nothing writes to these bytes while the slice exists.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len.min(self.len)) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and no slice borrowed from the
        // mapping outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: a `Mapping` exclusively owns its memory region (nothing else in the process holds the
// pointer), so moving it to another thread is sound; it is not shared (`!Sync` stays).
unsafe impl Send for Mapping {}

/// An open V4L2 capture device. Dropping it stops streaming, unmaps and frees the driver's
/// buffers and closes the descriptor.
pub struct LinuxCaptureDevice {
    fd: OwnedFd,
    mappings: Vec<Mapping>,
    streaming: bool,
}

impl LinuxCaptureDevice {
    /// Opens `path` non-blocking (dequeueing waits in `poll` with a timeout instead).
    pub fn open(path: &Path) -> Result<LinuxCaptureDevice, DeviceError> {
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| DeviceError::Permanent(format!("{}: path contains a NUL byte", path.display())))?;
        // SAFETY: `c_path` is a valid NUL-terminated string for the duration of the call.
        let raw = unsafe { libc::open(c_path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(classify(&format!("open {}", path.display()), io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a freshly opened descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(LinuxCaptureDevice { fd, mappings: Vec::new(), streaming: false })
    }

    fn request_buffers(&mut self, count: u32) -> io::Result<u32> {
        let mut request: V4l2RequestBuffers = zeroed();
        request.count = count;
        request.kind = BUF_TYPE_VIDEO_CAPTURE;
        request.memory = MEMORY_MMAP;
        ioctl(&self.fd, VIDIOC_REQBUFS, &mut request)?;
        Ok(request.count)
    }

    fn queue(&self, index: u32) -> io::Result<()> {
        let mut buffer: V4l2Buffer = zeroed();
        buffer.index = index;
        buffer.kind = BUF_TYPE_VIDEO_CAPTURE;
        buffer.memory = MEMORY_MMAP;
        ioctl(&self.fd, VIDIOC_QBUF, &mut buffer)
    }

    /// Waits up to `timeout` for the descriptor to become readable.
    fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        let mut pollfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let timeout_ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `pollfd` is one valid, exclusive pollfd, matching the count of 1.
        let rc = unsafe { libc::poll(&mut pollfd, 1, timeout_ms) };
        match rc {
            -1 => {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    Ok(false)
                } else {
                    Err(err)
                }
            }
            0 => Ok(false),
            _ if pollfd.revents & libc::POLLIN != 0 => Ok(true),
            _ => Err(io::Error::other(format!("poll reported device events {:#x}", pollfd.revents))),
        }
    }
}

impl CaptureDevice for LinuxCaptureDevice {
    fn capabilities(&mut self) -> Result<Capabilities, DeviceError> {
        let mut cap: V4l2Capability = zeroed();
        ioctl(&self.fd, VIDIOC_QUERYCAP, &mut cap).map_err(|err| classify("VIDIOC_QUERYCAP", err))?;
        Ok(Capabilities::from_querycap(&cap.driver, &cap.card, cap.capabilities, cap.device_caps))
    }

    fn set_format(&mut self, width: u32, height: u32, fourcc: FourCc) -> Result<DriverFormat, DeviceError> {
        let mut format: V4l2Format = zeroed();
        format.kind = BUF_TYPE_VIDEO_CAPTURE;
        format.pix.width = width;
        format.pix.height = height;
        format.pix.pixelformat = fourcc.0;
        format.pix.field = FIELD_ANY;
        ioctl(&self.fd, VIDIOC_S_FMT, &mut format).map_err(|err| classify("VIDIOC_S_FMT", err))?;
        Ok(DriverFormat {
            width: format.pix.width,
            height: format.pix.height,
            fourcc: FourCc(format.pix.pixelformat),
            bytes_per_line: format.pix.bytesperline,
            size_image: format.pix.sizeimage,
        })
    }

    fn set_frame_rate(&mut self, fps: u32) -> Result<Option<f64>, DeviceError> {
        let mut parm: V4l2StreamParm = zeroed();
        parm.kind = BUF_TYPE_VIDEO_CAPTURE;
        parm.capture.timeperframe = V4l2Fract { numerator: 1, denominator: fps };
        ioctl(&self.fd, VIDIOC_S_PARM, &mut parm).map_err(|err| classify("VIDIOC_S_PARM", err))?;
        if parm.capture.capability & CAP_TIMEPERFRAME == 0 {
            return Ok(None);
        }
        let frame_time = parm.capture.timeperframe;
        Ok((frame_time.numerator != 0).then(|| f64::from(frame_time.denominator) / f64::from(frame_time.numerator)))
    }

    fn start(&mut self, buffer_count: u32) -> Result<(), DeviceError> {
        let granted = self.request_buffers(buffer_count).map_err(|err| classify("VIDIOC_REQBUFS", err))?;
        if granted < 2 {
            return Err(DeviceError::Transient(format!("the driver granted {granted} capture buffers, need 2")));
        }
        for index in 0..granted {
            let mut buffer: V4l2Buffer = zeroed();
            buffer.index = index;
            buffer.kind = BUF_TYPE_VIDEO_CAPTURE;
            buffer.memory = MEMORY_MMAP;
            ioctl(&self.fd, VIDIOC_QUERYBUF, &mut buffer).map_err(|err| classify("VIDIOC_QUERYBUF", err))?;
            let mapping =
                Mapping::new(&self.fd, buffer.m_offset, buffer.length as usize).map_err(|err| classify("mmap", err))?;
            self.mappings.push(mapping);
        }
        for index in 0..granted {
            self.queue(index).map_err(|err| classify("VIDIOC_QBUF", err))?;
        }
        let mut kind = BUF_TYPE_VIDEO_CAPTURE as libc::c_int;
        ioctl(&self.fd, VIDIOC_STREAMON, &mut kind).map_err(|err| classify("VIDIOC_STREAMON", err))?;
        self.streaming = true;
        Ok(())
    }

    fn dequeue(&mut self, timeout: Duration, consume: &mut dyn FnMut(RawFrame<'_>)) -> Result<bool, DeviceError> {
        if !self.wait_readable(timeout).map_err(|err| DeviceError::Transient(format!("poll: {err}")))? {
            return Ok(false);
        }
        let mut buffer: V4l2Buffer = zeroed();
        buffer.kind = BUF_TYPE_VIDEO_CAPTURE;
        buffer.memory = MEMORY_MMAP;
        match ioctl(&self.fd, VIDIOC_DQBUF, &mut buffer) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            // Any DQBUF failure on a streaming device (EIO, ENODEV after unplug) means reopening.
            Err(err) => return Err(DeviceError::Transient(format!("VIDIOC_DQBUF: {err}"))),
        }
        let mapping = self
            .mappings
            .get(buffer.index as usize)
            .ok_or_else(|| DeviceError::Transient(format!("driver returned unknown buffer {}", buffer.index)))?;
        let captured_at = if buffer.flags & BUF_FLAG_TIMESTAMP_MASK == BUF_FLAG_TIMESTAMP_MONOTONIC {
            let stamp = Duration::new(
                buffer.timestamp.tv_sec.max(0) as u64,
                (buffer.timestamp.tv_usec.clamp(0, 999_999) as u32) * 1000,
            );
            monotonic_to_wall(stamp, monotonic_now(), SystemTime::now())
        } else {
            SystemTime::now()
        };
        consume(RawFrame {
            data: mapping.bytes(buffer.bytesused as usize),
            captured_at,
            flagged_corrupt: buffer.flags & BUF_FLAG_ERROR != 0,
        });
        self.queue(buffer.index).map_err(|err| DeviceError::Transient(format!("VIDIOC_QBUF: {err}")))?;
        Ok(true)
    }
}

impl Drop for LinuxCaptureDevice {
    fn drop(&mut self) {
        // Teardown errors are expected after an unplug and change nothing: the descriptor is
        // closed either way, which releases everything the driver still holds for it.
        if self.streaming {
            let mut kind = BUF_TYPE_VIDEO_CAPTURE as libc::c_int;
            let _ = ioctl(&self.fd, VIDIOC_STREAMOFF, &mut kind);
        }
        let had_buffers = !self.mappings.is_empty();
        self.mappings.clear();
        if had_buffers {
            let _ = self.request_buffers(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unimplemented_or_refused_ioctls_are_permanent_and_device_trouble_is_transient() {
        for errno in [libc::ENOTTY, libc::ENOSYS, libc::EOPNOTSUPP, libc::EACCES, libc::EINVAL] {
            let error = classify("VIDIOC_QUERYCAP", io::Error::from_raw_os_error(errno));
            assert!(matches!(error, DeviceError::Permanent(_)), "errno {errno}");
        }
        for errno in [libc::ENODEV, libc::EIO, libc::EBUSY, libc::ENOENT] {
            let error = classify("VIDIOC_DQBUF", io::Error::from_raw_os_error(errno));
            assert!(matches!(error, DeviceError::Transient(_)), "errno {errno}");
        }
    }
}
