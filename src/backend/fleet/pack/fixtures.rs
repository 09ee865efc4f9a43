//! Test fixtures of the pack modules: a device, a model's identities, engines and packs made of
//! plain bytes (packs never need TensorRT: the cache and the packs only deal in bytes).

use std::collections::BTreeMap;
use std::path::Path;

use super::format::{Pack, PackManifest, PackedEngine, PackedTimingCache, PACK_SCHEMA};
use crate::backend::engine::cache::{
    sha256_hex, BuildOptions, EngineCache, EngineIdentity, EngineSidecar, InputProfiles, ModelDigest, ShapeProfile,
    TimingCacheSidecar,
};
use crate::backend::engine::device_key::DeviceIdentity;
use crate::backend::trt::expected_model::ExpectedModel;
use crate::config::Precision;

pub const TENSORRT: &str = "10.3.0";

pub fn orin_nano() -> DeviceIdentity {
    DeviceIdentity {
        name: "Orin".into(),
        compute_capability: (8, 7),
        multiprocessors: 8,
        total_memory_bytes: 7_990_000_000,
        board: "NVIDIA Jetson Orin Nano Developer Kit".into(),
    }
}

fn options(profiles: bool) -> BuildOptions {
    BuildOptions {
        builder: "shim 0123456789ab, TensorRT headers 10.3.0".into(),
        precision: Precision::Fp16,
        workspace_bytes: 1 << 30,
        dla_core: None,
        optimization_level: 3,
        input_profiles: profiles
            .then(|| InputProfiles { shape: ShapeProfile::fixed("image", &[1, 300, 300, 3]), count: 1 }),
    }
}

/// The identity of `model`'s engine (a model named by its bytes) on `device` with `tensorrt`.
pub fn identity(model: &[u8], tensorrt: &str, device: &DeviceIdentity) -> EngineIdentity {
    let digest = ModelDigest { sha256: sha256_hex(model), external_data: BTreeMap::new() };
    EngineIdentity::new(&digest, tensorrt, device, &options(true))
}

/// What this device (an Orin Nano with TensorRT 10.3) accepts for model `stem` (its bytes are
/// `stem` too), caching into `dir`.
pub fn expected(dir: &Path, stem: &str) -> ExpectedModel {
    let digest = ModelDigest { sha256: sha256_hex(stem.as_bytes()), external_data: BTreeMap::new() };
    ExpectedModel {
        cache: EngineCache::open(dir, Path::new(&format!("/models/{stem}.onnx"))).expect("cache"),
        identities: [
            EngineIdentity::new(&digest, TENSORRT, &orin_nano(), &options(true)),
            EngineIdentity::new(&digest, TENSORRT, &orin_nano(), &options(false)),
        ],
        tensorrt_version: TENSORRT.into(),
        device: orin_nano(),
    }
}

/// Stand-in engine bytes, distinct per seed.
pub fn engine_bytes(seed: u8) -> Vec<u8> {
    (0..4096u32).map(|i| (i * 31 % 251) as u8 ^ seed).collect()
}

/// A pack of one engine with `identity` for model `stem`, and a timing cache when `timing` holds
/// the TensorRT version and device it was measured with.
pub fn pack(stem: &str, identity: &EngineIdentity, timing: Option<(&str, &DeviceIdentity)>) -> Pack {
    let engine = engine_bytes(7);
    let mut manifest = PackManifest {
        schema: PACK_SCHEMA,
        created_by: "test".into(),
        engines: vec![PackedEngine { model: stem.into(), sidecar: EngineSidecar::new(identity, &engine) }],
        timing_caches: Vec::new(),
    };
    let mut timing_caches = Vec::new();
    if let Some((tensorrt, device)) = timing {
        let cache = b"timing cache bytes".to_vec();
        let sidecar = TimingCacheSidecar::new(tensorrt, device, &cache);
        manifest.timing_caches.push(PackedTimingCache { model: stem.into(), sidecar });
        timing_caches.push(cache);
    }
    Pack { manifest, engines: vec![engine], timing_caches }
}
