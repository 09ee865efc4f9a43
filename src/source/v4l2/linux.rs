//! The real V4L2 device: direct ioctls on `/dev/videoN` with mmap or user-pointer streaming buffers.
//!
//! Owns: the handful of `#[repr(C)]` kernel structs and ioctl numbers the capture path needs
//! (QUERYCAP, S_FMT, S_PARM, REQBUFS, QUERYBUF, QBUF, DQBUF, STREAMON/OFF), the buffer mappings
//! and their release, holding user-pointer buffers' memory until the driver has let go of it, and
//! the translation of errno values into [`DeviceError`]s.
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
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::device::{
    monotonic_to_wall, Capabilities, CaptureDevice, DriverFormat, Filled, FourCc, RawFrame, UserptrStart,
};
use super::userptr::UserBuffer;
use crate::source::reconnect::DeviceError;

const BUF_TYPE_VIDEO_CAPTURE: u32 = 1;
const MEMORY_MMAP: u32 = 1;
const MEMORY_USERPTR: u32 = 2;
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

/// `union m` of `struct v4l2_buffer`: `offset` for MMAP buffers, `userptr` (an `unsigned long`,
/// 64 bits on both 64-bit targets) for USERPTR buffers. The union's other members (`planes`, a
/// pointer, and `fd`) are no larger, so it is 8 bytes, 8-aligned.
#[repr(C)]
#[derive(Clone, Copy)]
union V4l2BufferM {
    offset: u32,
    userptr: libc::c_ulong,
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
    m: V4l2BufferM,
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
    // `struct v4l2_buffer` on LP64 (x86_64, aarch64): timeval is two 64-bit longs at 24, the
    // union `m` 8 bytes at 64 after `memory` at 60, `length` at 72, the struct padded to 88.
    assert!(std::mem::size_of::<V4l2Buffer>() == 88);
    assert!(std::mem::align_of::<V4l2Buffer>() == 8);
    assert!(std::mem::offset_of!(V4l2Buffer, timestamp) == 24);
    assert!(std::mem::offset_of!(V4l2Buffer, timecode) == 40);
    assert!(std::mem::offset_of!(V4l2Buffer, sequence) == 56);
    assert!(std::mem::offset_of!(V4l2Buffer, memory) == 60);
    assert!(std::mem::offset_of!(V4l2Buffer, m) == 64);
    assert!(std::mem::size_of::<V4l2BufferM>() == 8);
    assert!(std::mem::offset_of!(V4l2Buffer, length) == 72);
    assert!(std::mem::offset_of!(V4l2Buffer, request_fd) == 80);
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
    // module, made of integers, byte arrays, `timeval` and a union of integers, for which all-zero bytes are valid.
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

/// The kernel's page size, which user-pointer buffers start on and are whole multiples of.
pub fn page_size() -> usize {
    // SAFETY: sysconf only reads a constant of the running system; it has no pointer arguments.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|&size| size > 0).unwrap_or(4096)
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

/// The buffers a device streams into.
enum Buffers {
    None,
    /// Driver memory, mapped into the process.
    Mapped(Vec<Mapping>),
    /// Slot memory the driver writes through user pointers. Kept until the device is dropped:
    /// after STREAMOFF and closing the descriptor the driver no longer writes to it.
    User(Vec<Arc<UserBuffer>>),
}

/// An open V4L2 capture device. Dropping it stops streaming, unmaps and frees the driver's
/// buffers and closes the descriptor.
pub struct LinuxCaptureDevice {
    fd: OwnedFd,
    /// Declared after `fd`: user-pointer memory is released only after the descriptor is closed
    /// (Drop has already stopped streaming and freed the driver's buffers by then).
    buffers: Buffers,
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
        Ok(LinuxCaptureDevice { fd, buffers: Buffers::None, streaming: false })
    }

    fn request_buffers(&self, count: u32, memory: u32) -> io::Result<u32> {
        let mut request: V4l2RequestBuffers = zeroed();
        request.count = count;
        request.kind = BUF_TYPE_VIDEO_CAPTURE;
        request.memory = memory;
        ioctl(&self.fd, VIDIOC_REQBUFS, &mut request)?;
        Ok(request.count)
    }

    fn queue(&self, index: u32) -> io::Result<()> {
        let mut buffer: V4l2Buffer = zeroed();
        buffer.index = index;
        buffer.kind = BUF_TYPE_VIDEO_CAPTURE;
        match &self.buffers {
            // The kernel writes a frame through this address after the call returns, outside
            // `buffer`: sound because `self.buffers` keeps the memory alive until Drop has stopped
            // streaming and closed the descriptor, and the source queues a buffer only while no
            // slot holds it (`userptr::UserBuffers`), so no Rust reference to the bytes exists
            // while the driver owns them.
            Buffers::User(user) => {
                let memory = user.get(index as usize).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
                buffer.memory = MEMORY_USERPTR;
                buffer.m = V4l2BufferM { userptr: memory.address() as libc::c_ulong };
                buffer.length =
                    u32::try_from(memory.length()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            }
            Buffers::Mapped(_) | Buffers::None => buffer.memory = MEMORY_MMAP,
        }
        ioctl(&self.fd, VIDIOC_QBUF, &mut buffer)
    }

    fn stream_on(&mut self) -> Result<(), DeviceError> {
        let mut kind = BUF_TYPE_VIDEO_CAPTURE as libc::c_int;
        ioctl(&self.fd, VIDIOC_STREAMON, &mut kind).map_err(|err| classify("VIDIOC_STREAMON", err))?;
        self.streaming = true;
        Ok(())
    }

    /// Waits up to `timeout` for a filled buffer and dequeues it; `None` when none came.
    fn dequeue_buffer(&self, timeout: Duration, memory: u32) -> Result<Option<V4l2Buffer>, DeviceError> {
        if !self.wait_readable(timeout).map_err(|err| DeviceError::Transient(format!("poll: {err}")))? {
            return Ok(None);
        }
        let mut buffer: V4l2Buffer = zeroed();
        buffer.kind = BUF_TYPE_VIDEO_CAPTURE;
        buffer.memory = memory;
        match ioctl(&self.fd, VIDIOC_DQBUF, &mut buffer) {
            Ok(()) => Ok(Some(buffer)),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Ok(None),
            // Any DQBUF failure on a streaming device (EIO, ENODEV after unplug) means reopening.
            Err(err) => Err(DeviceError::Transient(format!("VIDIOC_DQBUF: {err}"))),
        }
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

    /// Gives the driver's user-pointer buffers back after a failed start, so that mmap buffers
    /// can be requested instead.
    fn abandon_user_buffers(&mut self) {
        if self.streaming {
            let mut kind = BUF_TYPE_VIDEO_CAPTURE as libc::c_int;
            let _ = ioctl(&self.fd, VIDIOC_STREAMOFF, &mut kind);
            self.streaming = false;
        }
        let _ = self.request_buffers(0, MEMORY_USERPTR);
        // Not streaming, the driver writes to none of the memory (and REQBUFS 0 released it).
        self.buffers = Buffers::None;
    }
}

/// Wall-clock capture time of a dequeued buffer: its monotonic driver timestamp where it has one.
fn capture_time(buffer: &V4l2Buffer) -> SystemTime {
    if buffer.flags & BUF_FLAG_TIMESTAMP_MASK == BUF_FLAG_TIMESTAMP_MONOTONIC {
        let stamp = Duration::new(
            buffer.timestamp.tv_sec.max(0) as u64,
            (buffer.timestamp.tv_usec.clamp(0, 999_999) as u32) * 1000,
        );
        monotonic_to_wall(stamp, monotonic_now(), SystemTime::now())
    } else {
        SystemTime::now()
    }
}

/// Whether a failed user-pointer start means the driver refuses these buffers (fall back to
/// mmap) rather than that the device is in trouble (reopen it).
fn refuses_user_pointers(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EINVAL | libc::EFAULT | libc::ENOMEM | libc::ENOTTY | libc::EOPNOTSUPP))
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
        let granted = self.request_buffers(buffer_count, MEMORY_MMAP).map_err(|err| classify("VIDIOC_REQBUFS", err))?;
        if granted < 2 {
            return Err(DeviceError::Transient(format!("the driver granted {granted} capture buffers, need 2")));
        }
        self.buffers = Buffers::Mapped(Vec::new());
        for index in 0..granted {
            let mut buffer: V4l2Buffer = zeroed();
            buffer.index = index;
            buffer.kind = BUF_TYPE_VIDEO_CAPTURE;
            buffer.memory = MEMORY_MMAP;
            ioctl(&self.fd, VIDIOC_QUERYBUF, &mut buffer).map_err(|err| classify("VIDIOC_QUERYBUF", err))?;
            // SAFETY: QUERYBUF of an MMAP buffer fills the union's `offset` member.
            let offset = unsafe { buffer.m.offset };
            let mapping =
                Mapping::new(&self.fd, offset, buffer.length as usize).map_err(|err| classify("mmap", err))?;
            if let Buffers::Mapped(mappings) = &mut self.buffers {
                mappings.push(mapping);
            }
        }
        for index in 0..granted {
            self.queue(index).map_err(|err| classify("VIDIOC_QBUF", err))?;
        }
        self.stream_on()
    }

    fn start_userptr(&mut self, buffers: &[Arc<UserBuffer>]) -> Result<UserptrStart, DeviceError> {
        let wanted = u32::try_from(buffers.len()).unwrap_or(u32::MAX);
        let granted = match self.request_buffers(wanted, MEMORY_USERPTR) {
            Ok(granted) => granted,
            Err(err) if refuses_user_pointers(&err) => {
                return Ok(UserptrStart::Refused(format!("the driver takes no user pointers (VIDIOC_REQBUFS: {err})")))
            }
            Err(err) => return Err(classify("VIDIOC_REQBUFS", err)),
        };
        // A driver may grant more than asked for when it needs that many queued to stream; all of
        // them must then be ours, so more than offered is a refusal too.
        let count = granted as usize;
        if count < 2 || count > buffers.len() {
            self.abandon_user_buffers();
            return Ok(UserptrStart::Refused(format!(
                "the driver granted {granted} user-pointer buffers for the {} offered",
                buffers.len()
            )));
        }
        self.buffers = Buffers::User(buffers[..count].to_vec());
        for index in 0..count as u32 {
            match self.queue(index) {
                Ok(()) => {}
                Err(err) if refuses_user_pointers(&err) => {
                    self.abandon_user_buffers();
                    return Ok(UserptrStart::Refused(format!(
                        "the driver refuses slot memory as a user pointer (VIDIOC_QBUF: {err})"
                    )));
                }
                Err(err) => return Err(classify("VIDIOC_QBUF", err)),
            }
        }
        self.stream_on()?;
        Ok(UserptrStart::Started(count as u32))
    }

    fn requeue(&mut self, index: u32) -> Result<(), DeviceError> {
        self.queue(index).map_err(|err| DeviceError::Transient(format!("VIDIOC_QBUF: {err}")))
    }

    fn dequeue_user(&mut self, timeout: Duration) -> Result<Option<Filled>, DeviceError> {
        let Some(buffer) = self.dequeue_buffer(timeout, MEMORY_USERPTR)? else { return Ok(None) };
        let Buffers::User(user) = &self.buffers else {
            return Err(DeviceError::Transient("a user-pointer buffer was dequeued from an mmap stream".into()));
        };
        // SAFETY: DQBUF of a USERPTR buffer fills the union's `userptr` member.
        let address = unsafe { buffer.m.userptr } as usize;
        match user.get(buffer.index as usize) {
            Some(memory) if memory.address() == address => {}
            _ => {
                return Err(DeviceError::Transient(format!(
                    "the driver returned user buffer {} at {address:#x}, which is not ours",
                    buffer.index
                )))
            }
        }
        Ok(Some(Filled {
            index: buffer.index,
            bytes_used: buffer.bytesused as usize,
            captured_at: capture_time(&buffer),
            flagged_corrupt: buffer.flags & BUF_FLAG_ERROR != 0,
        }))
    }

    fn dequeue(&mut self, timeout: Duration, consume: &mut dyn FnMut(RawFrame<'_>)) -> Result<bool, DeviceError> {
        let Some(buffer) = self.dequeue_buffer(timeout, MEMORY_MMAP)? else { return Ok(false) };
        let mapping = match &self.buffers {
            Buffers::Mapped(mappings) => mappings.get(buffer.index as usize),
            Buffers::User(_) | Buffers::None => None,
        }
        .ok_or_else(|| DeviceError::Transient(format!("driver returned unknown buffer {}", buffer.index)))?;
        consume(RawFrame {
            data: mapping.bytes(buffer.bytesused as usize),
            captured_at: capture_time(&buffer),
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
        let memory = match &self.buffers {
            Buffers::None => return,
            Buffers::Mapped(_) => MEMORY_MMAP,
            Buffers::User(_) => MEMORY_USERPTR,
        };
        if let Buffers::Mapped(mappings) = &mut self.buffers {
            mappings.clear();
        }
        let _ = self.request_buffers(0, memory);
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

    /// The numbers `linux/videodev2.h` gives on 64-bit Linux, printed by a C program compiled
    /// against the x86_64 and the aarch64 header (identical on both): the ioctl numbers encode
    /// the struct sizes, so a wrong layout would be a different request the kernel refuses.
    #[test]
    fn ioctl_numbers_and_the_buffer_layout_match_the_kernel_header() {
        // `libc::Ioctl` is 64 bits on glibc, 32 on musl; the number is the low 32 bits either way.
        let number = |request: libc::Ioctl| request as u32;
        assert_eq!(number(VIDIOC_QBUF), 0xc058_560f);
        assert_eq!(number(VIDIOC_DQBUF), 0xc058_5611);
        assert_eq!(number(VIDIOC_QUERYBUF), 0xc058_5609);
        assert_eq!(number(VIDIOC_REQBUFS), 0xc014_5608);
        assert_eq!(MEMORY_USERPTR, 2);
        assert_eq!(std::mem::size_of::<V4l2Buffer>(), 88);
        assert_eq!(std::mem::offset_of!(V4l2Buffer, m), 64);
        assert_eq!(std::mem::offset_of!(V4l2Buffer, length), 72);
        let mut buffer: V4l2Buffer = zeroed();
        buffer.m = V4l2BufferM { userptr: 0x7f00_1234_5000 };
        // SAFETY: the member just written is read back.
        assert_eq!(unsafe { buffer.m.userptr }, 0x7f00_1234_5000, "a 64-bit address fits the union");
    }

    #[test]
    fn user_pointer_refusals_are_told_from_device_trouble() {
        for errno in [libc::EINVAL, libc::EFAULT, libc::ENOMEM, libc::ENOTTY] {
            assert!(refuses_user_pointers(&io::Error::from_raw_os_error(errno)), "errno {errno}");
        }
        for errno in [libc::ENODEV, libc::EIO, libc::EBUSY] {
            assert!(!refuses_user_pointers(&io::Error::from_raw_os_error(errno)), "errno {errno}");
        }
        assert!(page_size().is_power_of_two() && page_size() >= 4096);
    }
}
