//! V4L2 capture source (USB UVC cameras: MJPEG and YUYV).
//!
//! Files: [`capture`] (the [`V4l2Source`]: format negotiation, the capture plan, the reconnect
//! state machine, frames into slots), [`device`] (what the source needs of a device, so that a
//! fake stands in for it in tests), `linux` (the real device: direct ioctls, mmap or user-pointer
//! streaming buffers), [`userptr`] (slot memory the driver writes into), [`convert`] (a captured
//! buffer into a frame). This file only declares and re-exports.

pub mod capture;
mod convert;
pub mod device;
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
mod linux;
mod userptr;

pub use crate::source::reconnect::{Backoff, DeviceError};
pub use crate::source::status::{SourceState, SourceStatus};
pub use capture::{
    accept_driver_format, check_device_node, negotiate, CapturePlan, Encoding, Negotiated, Streaming, V4l2Format,
    V4l2Options, V4l2Request, V4l2Source,
};
pub use convert::ConvertError;
pub use device::{
    monotonic_to_wall, Capabilities, CaptureDevice, DeviceOpener, DriverFormat, Filled, FourCc, RawFrame, UserptrStart,
};
pub use userptr::UserBuffer;
