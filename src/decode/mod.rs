//! Raw model outputs → detections in source-frame pixels.
//!
//! Owns: the output decoders (SSD, YOLOv5, YOLOv8/11, end-to-end NMS), score thresholding, the class
//! allow-list, per-class NMS, max detections, and mapping boxes back through the resize geometry.
//! Must not: run models, read files, or know about MQTT.
