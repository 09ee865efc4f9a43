//! Raw model outputs → detections in source-frame pixels.
//!
//! Owns: the output decoders (SSD, YOLOv5, YOLOv8/11, end-to-end NMS, NMS-free YOLOv10/YOLO26, the
//! DETR family, NanoDet's GFL head, classifiers' class scores in [`classify`] and embedders'
//! vectors in [`embed`]), score thresholding, the class allow-list, per-class NMS, max
//! detections, and mapping boxes back through the resize geometry.
//! Must not: run models, read files, or know about MQTT. Malformed outputs (wrong count, shape or
//! length, invalid values) are a [`DecodeError`], never a panic.
//!
//! Files: [`decoder`] (one model's outputs frame after frame: the kind's decoder, then NMS),
//! [`params`] (what to keep), [`candidate`] (the filters every decoder shares), [`error`], one file
//! per kind, [`nms`], [`tensor`] (reading output tensors). This file only declares and re-exports.

mod candidate;
pub mod classify;
mod decoder;
mod detr;
pub mod embed;
mod end2end;
mod error;
pub mod nanodet;
mod nms;
mod nms_free;
mod params;
mod ssd;
mod tensor;
mod yolo;

pub use decoder::Decoder;
pub use detr::{BOX_NAMES as DETR_BOX_NAMES, LOGIT_NAMES as DETR_LOGIT_NAMES};
pub use error::DecodeError;
pub use params::DecodeParams;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod test_support;
