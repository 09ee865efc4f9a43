//! Engine packs: a device's built engines and timing caches in one signed file, so that a fleet
//! builds each engine once (`engine export`/`import`/`keygen`/`sign`, and the engine stores).
//!
//! Modules: [`format`](mod@format) (the archive, read as untrusted input), [`signature`] (ed25519 keys and the
//! manifest's signature), [`import`] (a pack into the engine cache, checked against what this
//! device accepts: `crate::backend::trt::expected_model`) and [`export`] (the engine cache into a
//! pack). Pure Rust, always compiled: tested without TensorRT.

pub mod export;
#[cfg(test)]
mod fixtures;
pub mod format;
pub mod import;
pub mod signature;

pub use export::{export_pack, Contents, ExportError};
pub use format::{read_pack, OpenedPack, Pack, PackError, PackManifest, PackedEngine, PackedTimingCache, Selection};
pub use import::{import_pack, ImportError, Imported};
pub use signature::{KeyError, PackSignature, PrivateKey, PublicKey, SignatureError, Trust};
