//! What this device would build for one configured model: the engine identities it accepts and
//! what its timing cache must have been measured with. Engine packs are checked against it
//! (`crate::backend::fleet::pack`).
//!
//! Owns: [`ExpectedModel`] and the comparison of another device's engine or timing-cache sidecar
//! with it. Pure Rust and always compiled. Must not: compute identities (`crate::backend::load::expected_models`
//! does, through the toolchain that builds here), read packs or write the cache.

use crate::backend::engine::cache::{EngineCache, EngineIdentity, TimingCacheSidecar};
use crate::backend::engine::device_key::DeviceIdentity;

/// One model of the config on this device.
#[derive(Debug, Clone)]
pub struct ExpectedModel {
    /// The model's files in the engine cache (its stem names them).
    pub cache: EngineCache,
    /// The engine's identity with the input profiles of a dynamic-input model, and without them
    /// (a static-input model's engine is cached under that one): either is this model's engine.
    pub identities: [EngineIdentity; 2],
    /// The TensorRT version and the device a timing cache must come from.
    pub tensorrt_version: String,
    pub device: DeviceIdentity,
}

impl ExpectedModel {
    pub fn stem(&self) -> &str {
        self.cache.stem()
    }

    /// Whether `identity` is one this model's engine may have.
    pub fn accepts(&self, identity: &EngineIdentity) -> bool {
        self.identities.contains(identity)
    }

    /// What differs between `identity` and this model's nearest accepted identity (`field:
    /// packed → here`), naming the first field a reader needs.
    pub fn engine_differences(&self, identity: &EngineIdentity) -> Vec<String> {
        let [dynamic, fixed] = &self.identities;
        let (a, b) = (identity.differences(dynamic), identity.differences(fixed));
        if b.len() < a.len() {
            b
        } else {
            a
        }
    }

    /// What differs between a timing cache's sidecar and what this device measures with.
    pub fn timing_differences(&self, sidecar: &TimingCacheSidecar) -> Vec<String> {
        sidecar.differences(&TimingCacheSidecar::new(&self.tensorrt_version, &self.device, &[]))
    }
}
