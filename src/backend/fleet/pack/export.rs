//! Making a pack of what this device has cached (`engine export`, a store upload).
//!
//! Owns: collecting each model's cached engine (validated as a cache lookup validates it) with its
//! sidecar, and its timing cache when it has a valid one, into a [`Pack`]. Must not: build an
//! engine (a model without a cached one is an error that says to build it first) or write files.

use super::format::{Pack, PackManifest, PackedEngine, PackedTimingCache, PACK_SCHEMA};
use crate::backend::engine::cache::{EngineLookup, EngineSidecar, MissReason, TimingCacheSidecar};
use crate::backend::trt::expected_model::ExpectedModel;

#[derive(Debug, thiserror::Error)]
#[error("model {model} has no usable cached engine ({reason}); build it first (`jetson-detectd build-engine`)")]
pub struct ExportError {
    pub model: String,
    pub reason: MissReason,
}

/// Which parts of a model a pack carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// The engine and, when there is a valid one, the timing cache (`engine export`).
    EngineAndTimingCache,
    /// The engine alone (a store's engine pack; timing caches travel apart there).
    Engine,
    /// The timing cache alone (a store's timing pack); a model without one adds nothing.
    TimingCache,
}

/// A pack of `models`' cached files.
pub fn export_pack(models: &[ExpectedModel], contents: Contents) -> Result<Pack, ExportError> {
    let mut manifest = PackManifest {
        schema: PACK_SCHEMA,
        created_by: format!("jetson-detectd {}", env!("CARGO_PKG_VERSION")),
        engines: Vec::new(),
        timing_caches: Vec::new(),
    };
    let mut pack = Pack { manifest: manifest.clone(), engines: Vec::new(), timing_caches: Vec::new() };
    for model in models {
        if contents != Contents::TimingCache {
            let (identity, bytes) = cached_engine(model)?;
            manifest
                .engines
                .push(PackedEngine { model: model.stem().to_owned(), sidecar: EngineSidecar::new(identity, &bytes) });
            pack.engines.push(bytes);
        }
        if contents != Contents::Engine {
            if let Ok(bytes) = model.cache.load_timing_cache(&model.tensorrt_version, &model.device) {
                let sidecar = TimingCacheSidecar::new(&model.tensorrt_version, &model.device, &bytes);
                manifest.timing_caches.push(PackedTimingCache { model: model.stem().to_owned(), sidecar });
                pack.timing_caches.push(bytes);
            }
        }
    }
    pack.manifest = manifest;
    Ok(pack)
}

/// The model's cached engine under either of its identities, and which one.
fn cached_engine(
    model: &ExpectedModel,
) -> Result<(&crate::backend::engine::cache::EngineIdentity, Vec<u8>), ExportError> {
    let mut first_reason = None;
    for identity in &model.identities {
        match model.cache.lookup(identity) {
            EngineLookup::Hit { bytes, .. } => return Ok((identity, bytes)),
            EngineLookup::Miss(reason) => {
                first_reason.get_or_insert(reason);
            }
        }
    }
    Err(ExportError {
        model: model.stem().to_owned(),
        reason: first_reason.unwrap_or(MissReason::Missing { stale: Vec::new() }),
    })
}
