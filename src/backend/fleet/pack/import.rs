//! Taking a pack into this device's engine cache (`engine import`, a store hit).
//!
//! Owns: matching a pack's engines and timing caches to the config's models (by identity: model
//! sha256, TensorRT version, builder, GPU and board, options), refusing the whole pack — naming
//! the engine, the model and the fields that differ — when one of them is for a configured model
//! but was built for something else, and writing what matches through the cache's atomic writes
//! (engine, then sidecar). A timing cache replaces none that this device measured itself: one is
//! written only where the model has no valid one. Must not: read the pack's bytes itself
//! (`super::format` does, checking sizes, signature and sha256) or log (callers say what happened).

use std::path::PathBuf;

use super::format::{read_pack, PackError, Selection};
use super::signature::Trust;
use crate::backend::engine::cache::CacheError;
use crate::backend::trt::expected_model::ExpectedModel;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Pack(#[from] PackError),
    #[error("refused: engine {key} for model {model} was built for something else: {}", differences.join(", "))]
    ForeignEngine { model: String, key: String, differences: Vec<String> },
    #[error("refused: the timing cache for model {model} was measured elsewhere: {}", differences.join(", "))]
    ForeignTimingCache { model: String, differences: Vec<String> },
    #[error("the pack holds nothing for this config's models ({wanted}); it holds engines for: {held}")]
    NothingForThisConfig { wanted: String, held: String },
    #[error("caching the pack's files: {0}")]
    Cache(#[from] CacheError),
}

/// What an import wrote, and what it left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Imported {
    /// The engines written into the cache.
    pub engines: Vec<PathBuf>,
    /// The timing caches written (where the model had none of its own).
    pub timing_caches: Vec<PathBuf>,
    /// Models whose own timing cache was kept over the pack's.
    pub timing_caches_kept: Vec<String>,
    /// Engines of models this config does not have (by model file stem).
    pub skipped: Vec<String>,
    /// The key id of the signer; `None` for an unsigned pack read with `verify = false`.
    pub signer: Option<String>,
}

/// Reads the pack from `reader` (checking it against `trust`), matches its contents to `models`
/// and caches what matches. Nothing is written when anything is refused.
pub fn import_pack(
    reader: impl std::io::Read,
    trust: &Trust,
    models: &[ExpectedModel],
) -> Result<Imported, ImportError> {
    let mut engine_models = Vec::new();
    let mut timing_models = Vec::new();
    let mut skipped = Vec::new();
    let opened = read_pack(reader, trust, |manifest| {
        let mut selection = Selection::default();
        for (index, packed) in manifest.engines.iter().enumerate() {
            let identity = &packed.sidecar.identity;
            if let Some(model) = models.iter().position(|model| model.accepts(identity)) {
                selection.engines.push(index);
                engine_models.push(model);
            } else if let Some(model) = models.iter().find(|model| model.stem() == packed.model) {
                return Err(ImportError::ForeignEngine {
                    model: packed.model.clone(),
                    key: packed.sidecar.key.clone(),
                    differences: model.engine_differences(identity),
                });
            } else {
                skipped.push(packed.model.clone());
            }
        }
        for (index, packed) in manifest.timing_caches.iter().enumerate() {
            let Some(model) = models.iter().position(|model| model.stem() == packed.model) else { continue };
            let differences = models[model].timing_differences(&packed.sidecar);
            if !differences.is_empty() {
                return Err(ImportError::ForeignTimingCache { model: packed.model.clone(), differences });
            }
            selection.timing_caches.push(index);
            timing_models.push(model);
        }
        if selection.engines.is_empty() && selection.timing_caches.is_empty() {
            let wanted: Vec<&str> = models.iter().map(ExpectedModel::stem).collect();
            let held: Vec<&str> = manifest.engines.iter().map(|engine| engine.model.as_str()).collect();
            return Err(ImportError::NothingForThisConfig { wanted: wanted.join(", "), held: held.join(", ") });
        }
        Ok(selection)
    })?;
    let mut imported = Imported { skipped, signer: opened.signer.clone(), ..Imported::default() };
    for ((index, bytes), model) in opened.engines.iter().zip(&engine_models) {
        let identity = &opened.manifest.engines[*index].sidecar.identity;
        imported.engines.push(models[*model].cache.store(identity, bytes)?);
    }
    for ((_, bytes), model) in opened.timing_caches.iter().zip(&timing_models) {
        let model = &models[*model];
        if model.cache.load_timing_cache(&model.tensorrt_version, &model.device).is_ok() {
            imported.timing_caches_kept.push(model.stem().to_owned());
        } else {
            imported.timing_caches.push(model.cache.store_timing_cache(
                &model.tensorrt_version,
                &model.device,
                bytes,
            )?);
        }
    }
    Ok(imported)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::engine::cache::EngineLookup;
    use crate::backend::engine::device_key::DeviceIdentity;
    use crate::backend::fleet::pack::export::{export_pack, Contents};
    use crate::backend::fleet::pack::fixtures::{expected, identity, orin_nano, pack, TENSORRT};
    use crate::backend::fleet::pack::signature::PrivateKey;

    fn import(bytes: &[u8], key: &PrivateKey, models: &[ExpectedModel]) -> Result<Imported, ImportError> {
        import_pack(bytes, &Trust::Key(key.public()), models)
    }

    fn files_in(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).expect("list").count()
    }

    #[test]
    fn an_engine_built_for_this_device_is_cached_and_then_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = PrivateKey::generate().expect("key");
        let model = expected(dir.path(), "ssd");
        let bytes =
            pack("ssd", &model.identities[0], Some((TENSORRT, &orin_nano()))).to_bytes(Some(&key)).expect("pack");
        let imported = import(&bytes, &key, std::slice::from_ref(&model)).expect("imported");
        assert_eq!(imported.engines, [model.cache.engine_path(&model.identities[0].key())]);
        assert_eq!(imported.timing_caches, [model.cache.timing_cache_path()]);
        assert_eq!(imported.signer, Some(key.public().id()));
        assert!(matches!(model.cache.lookup(&model.identities[0]), EngineLookup::Hit { .. }));
        assert!(model.cache.load_timing_cache(TENSORRT, &orin_nano()).is_ok());
    }

    #[test]
    fn a_pack_for_another_tensorrt_or_board_is_refused_naming_the_field_and_nothing_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = PrivateKey::generate().expect("key");
        let model = expected(dir.path(), "ssd");
        let agx = DeviceIdentity {
            multiprocessors: 16,
            total_memory_bytes: 64 << 30,
            board: "NVIDIA Jetson AGX Orin Developer Kit".into(),
            ..orin_nano()
        };
        let cases = [
            (identity(b"ssd", "10.4.0", &orin_nano()), "TensorRT: 10.4.0 → 10.3.0"),
            (identity(b"ssd", TENSORRT, &agx), "board: NVIDIA Jetson AGX Orin Developer Kit → NVIDIA Jetson Orin Nano"),
            (identity(b"ssd v2", TENSORRT, &orin_nano()), "model sha256"),
        ];
        let before = files_in(dir.path());
        for (foreign, field) in cases {
            let bytes = pack("ssd", &foreign, None).to_bytes(Some(&key)).expect("pack");
            let message = import(&bytes, &key, std::slice::from_ref(&model)).expect_err("foreign").to_string();
            assert!(message.contains("refused") && message.contains(field), "{message}");
        }
        // A timing cache measured on the AGX, beside a matching engine: refused too.
        let bytes = pack("ssd", &model.identities[0], Some((TENSORRT, &agx))).to_bytes(Some(&key)).expect("pack");
        let message = import(&bytes, &key, std::slice::from_ref(&model)).expect_err("foreign timing").to_string();
        assert!(message.contains("timing cache") && message.contains("AGX"), "{message}");
        assert_eq!(files_in(dir.path()), before, "a refused pack leaves nothing behind");
    }

    #[test]
    fn engines_of_models_this_config_lacks_are_skipped_and_a_pack_without_any_of_its_models_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = PrivateKey::generate().expect("key");
        let ssd = expected(dir.path(), "ssd");
        let yard = expected(dir.path(), "yard");
        let mut both = pack("ssd", &ssd.identities[0], None);
        let other = pack("yard", &yard.identities[1], None);
        both.manifest.engines.extend(other.manifest.engines);
        both.engines.extend(other.engines);
        let bytes = both.to_bytes(Some(&key)).expect("pack");
        let imported = import(&bytes, &key, std::slice::from_ref(&ssd)).expect("the ssd engine");
        assert_eq!((imported.engines.len(), imported.skipped.as_slice()), (1, ["yard".to_owned()].as_slice()));

        let only_yard = pack("yard", &yard.identities[0], None).to_bytes(Some(&key)).expect("pack");
        let message = import(&only_yard, &key, std::slice::from_ref(&ssd)).expect_err("nothing").to_string();
        assert!(message.contains("nothing for this config's models (ssd)") && message.contains("yard"), "{message}");
    }

    #[test]
    fn a_timing_cache_this_device_measured_is_kept_over_a_packs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = PrivateKey::generate().expect("key");
        let model = expected(dir.path(), "ssd");
        model.cache.store_timing_cache(TENSORRT, &orin_nano(), b"our own").expect("store");
        let bytes =
            pack("ssd", &model.identities[0], Some((TENSORRT, &orin_nano()))).to_bytes(Some(&key)).expect("pack");
        let imported = import(&bytes, &key, std::slice::from_ref(&model)).expect("imported");
        assert_eq!(imported.timing_caches_kept, ["ssd"]);
        assert_eq!(model.cache.load_timing_cache(TENSORRT, &orin_nano()).expect("kept"), b"our own");
    }

    #[test]
    fn an_export_imports_on_a_second_device_of_the_same_kind() {
        let (first, second) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        let key = PrivateKey::generate().expect("key");
        let built = expected(first.path(), "ssd");
        built.cache.store(&built.identities[1], b"a static-input engine").expect("store");
        built.cache.store_timing_cache(TENSORRT, &orin_nano(), b"timing").expect("store");
        let bytes = export_pack(std::slice::from_ref(&built), Contents::EngineAndTimingCache)
            .expect("export")
            .to_bytes(Some(&key))
            .expect("pack");
        let fresh = expected(second.path(), "ssd");
        let imported = import(&bytes, &key, std::slice::from_ref(&fresh)).expect("imported");
        assert_eq!(imported.engines, [fresh.cache.engine_path(&fresh.identities[1].key())]);
        match fresh.cache.lookup(&fresh.identities[1]) {
            EngineLookup::Hit { bytes, .. } => assert_eq!(bytes, b"a static-input engine"),
            EngineLookup::Miss(reason) => panic!("not cached: {reason}"),
        }
        let message = export_pack(&[expected(second.path(), "yard")], Contents::Engine).expect_err("none").to_string();
        assert!(
            message.contains("model yard has no usable cached engine") && message.contains("build-engine"),
            "{message}"
        );
    }
}
