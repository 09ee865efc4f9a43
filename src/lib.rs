//! jetson-detectd: camera frames → object detections → MQTT, on Jetson (CUDA + TensorRT) or any
//! Linux box (CPU backend). `main.rs` is only the CLI; everything else lives here so that the
//! integration tests and benches can drive the same code.
//!
//! A frame flows `source` ① → `infer` ② (camera rings, the scheduler, the per-frame step) →
//! `preprocess` ③ / `gpu` → `backend` ④ (CPU, TensorRT) → `decode` ⑤ → `track` ⑥ → `publish` ⑦
//! (the outlets: MQTT with Home Assistant, the live view; snapshots, telemetry). `http` (the page,
//! the API, `/metrics`) reads what `publish` and `service` expose. `service` is the daemon's life
//! under systemd (notify, telemetry, logging) and `cmd` holds the subcommands that wire the stages
//! together.
//!
//! The modules are declared below floor by floor, top first, and this order is the single source
//! of truth for the layering: a module imports only from the floors below its own, never from its
//! own floor or above (`tests/it/layering.rs` checks every `crate::` path of `src/` against it).
//! The floors follow who drives whom, not the flow: `infer` drives `source`, `backend` and
//! `decode`; `publish` drives `track`; `config` turns the TOML into the types of the floors below
//! it. Each floor's comment says what it holds (DESIGN.md's stages in circles).

// The crate's documentation is read with its private items (`cargo doc --document-private-items`,
// which CI builds): a public item's doc may point at the private one that does the work.
#![allow(rustdoc::private_intra_doc_links)]

// cmd: the subcommands, which wire everything below together
pub mod cmd;
// http: the page, the API and /metrics, reading what publish and service expose
pub mod http;
// watch: live video of each camera from its own stream (fMP4, HLS) and each frame's boxes over it
pub mod watch;
// record ⑧: event clips (pre-roll of the compressed stream, clip files, their index, retention)
pub mod record;
// publish ⑦: the per-frame sink (tracking, snapshots), the outlets it feeds (MQTT with Home Assistant,
// the live view), telemetry
pub mod publish;
// infer ②: camera threads and their rings, the scheduler (one worker per GPU), the per-frame step
pub mod infer;
// service: systemd notify and the watchdog's liveness, telemetry, logging
pub mod service;
// controls: the run-time switches and threshold that MQTT commands and the HTTP API set and the
// pipeline reads, and their file
pub mod controls;
// onnx: what a model file says about itself (its interface, the decoder and input it calls for),
// completing a loaded config's model description
pub mod onnx;
// backend ④ (CPU and TensorRT inference) and decode ⑤ (outputs → detections): peers
pub mod backend;
pub mod decode;
// gpu: the CUDA layer (probe, slots, the preprocessing kernel); model: what a model is (its spec,
// the device settings it is loaded with, its outputs)
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod model;
// config: the typed configuration, made of the types of the floors below
pub mod config;
// source ①: frames in (images, synthetic, V4L2, GStreamer), one reconnect helper; each kind's
// config (a camera's `source` table) and the bounds on decoding (`[limits]`)
pub mod source;
// motion: where a frame changed (its luma image, the background, masks, regions) and the gate
// that skips inference where nothing moved; masks are track's polygons
pub mod motion;
// preprocess ③ (the input contract, the CPU reference and fast path), track ⑥ (tracker, zones,
// lines, events; pure: no config, payload or snapshot) and reid (appearances and their gallery
// across cameras; pure too): peers
pub mod preprocess;
pub mod reid;
pub mod track;
// detection and frame: what a detection is; frames, their slots and rings
pub mod detection;
pub mod frame;
// sys: panic-proof locks, bounded file reads, atomic writes, the wire form of a time; protobuf:
// the protobuf wire format (ONNX files), read in place
pub mod protobuf;
pub mod sys;

// test support (cfg(test) only)
#[cfg(test)]
mod proptest_support;
