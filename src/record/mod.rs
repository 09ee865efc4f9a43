//! ⑧ Event clips: per camera a pre-roll of its compressed stream, and the clips that events start.
//!
//! Owns: the recorder of every recording camera, the clip files and their index, retention
//! within `[record]`'s budget, and pausing while the disk is full. Must not: slow detection (each
//! camera records on its own thread, fed through a bounded queue that drops and counts), decode
//! or re-encode an encoded camera's stream, or serialise events (the MQTT outlet does).

pub mod clip;
pub mod mp4;
pub mod nal;
pub mod preroll;
