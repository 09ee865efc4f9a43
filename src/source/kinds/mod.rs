//! The kinds of camera source, each as the daemon sees it: its table (keys, defaults, the lines of
//! the built-in default that document it), its checks, secrets and paths, what it delivers, and
//! how it is checked and opened ([`crate::source::kind::SourceKind`]) through its implementation
//! beside this folder (`images`, `synthetic`, `v4l2/`, `gstreamer/`). `crate::source::config`
//! registers each in one line. This file only declares.

pub mod csi;
mod frame_size;
pub mod images;
pub mod pipeline;
pub mod rtsp;
pub mod synthetic;
pub mod through_gstreamer;
pub mod v4l2;
