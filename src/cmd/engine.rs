//! `jetson-detectd engine …`: this device's engines as a pack for the others (`export`), a pack
//! from another device into the engine cache (`import`), and the fleet's signing key (`keygen`,
//! `sign`).
//!
//! Owns: which models a config packs (`[model]` and every `[models.<name>]` built from ONNX), the
//! trust an import applies (`[engine.store]`), writing a pack file atomically, and each command's
//! JSON report. Must not: read or check a pack itself (`crate::backend::fleet::pack` does), or build
//! an engine (export packs what `build-engine` or `run` cached).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::backend::fleet::pack::{
    export_pack, import_pack, Contents, ExportError, ImportError, Imported, KeyError, Pack, PackError, PrivateKey,
    Trust,
};
use crate::backend::trt::expected_model::ExpectedModel;
use crate::config::{Config, ConfigError};
use crate::model::ModelSpec;
use crate::sys::exit::{Classified, ExitClass};
use crate::sys::files::{self, ReadError, WriteError};

/// Largest pack file read: every engine of a config, each at most the engine cache's bound.
pub const MAX_PACK_FILE_BYTES: u64 = 16 << 30;

#[derive(Debug, thiserror::Error)]
pub enum EngineCommandError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("pack {path}: {source}")]
    Read { path: PathBuf, source: ReadError },
    #[error("pack {path}: {source}")]
    Pack { path: PathBuf, source: PackError },
    #[error("pack {path}: {source}")]
    Import { path: PathBuf, source: ImportError },
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error("writing {0}")]
    Write(#[from] WriteError),
    #[error("{0}")]
    Tensorrt(String),
}

impl Classified for EngineCommandError {
    /// The config, or a key file it names, is at fault: the config's (exit 78, no restart). A pack
    /// that cannot be read, checked, imported or written, and TensorRT: a failure.
    fn exit_class(&self) -> ExitClass {
        match self {
            EngineCommandError::Config(error) => error.exit_class(),
            EngineCommandError::Key(_) => ExitClass::Configuration,
            EngineCommandError::Read { .. }
            | EngineCommandError::Pack { .. }
            | EngineCommandError::Import { .. }
            | EngineCommandError::Export(_)
            | EngineCommandError::Write(_)
            | EngineCommandError::Tensorrt(_) => ExitClass::Failure,
        }
    }
}

/// What `engine keygen` wrote.
#[derive(Debug, Serialize)]
pub struct KeygenReport {
    pub private_key: PathBuf,
    pub public_key: PathBuf,
    pub key_id: String,
}

/// What `engine export` and `engine sign` wrote.
#[derive(Debug, Serialize)]
pub struct PackReport {
    pub pack: PathBuf,
    pub bytes: u64,
    /// Model file stems of the engines in it.
    pub engines: Vec<String>,
    pub timing_caches: Vec<String>,
    /// Key id of the signer, when signed.
    pub signed_by: Option<String>,
}

/// `engine keygen KEY`: a new signing key in `private` (a secret: 0600, or root:jetson-detectd
/// 0640) and its public half in `<private>.pub`, for `engine.store.public_key` on every device.
pub fn keygen(private: &Path) -> Result<KeygenReport, EngineCommandError> {
    let key = PrivateKey::generate()?;
    let public_key = key.write(private)?;
    Ok(KeygenReport { private_key: private.to_path_buf(), public_key, key_id: key.public().id() })
}

/// `engine sign --key KEY PACK`: signs (or signs again) the pack at `path` in place, atomically.
/// The pack's files are checked against its manifest first: a damaged pack is not signed.
pub fn sign(key: &Path, path: &Path) -> Result<PackReport, EngineCommandError> {
    let key = PrivateKey::read(key)?;
    let bytes = read_pack_file(path)?;
    let (pack, _) = Pack::read(bytes.as_slice(), &Trust::Unverified)
        .map_err(|source| EngineCommandError::Pack { path: path.to_path_buf(), source })?;
    write_pack_file(path, &pack, Some(&key))
}

/// `engine import PACK`: the pack's engines (and timing caches) for this config's models into the
/// engine cache, checked against `[engine.store]`'s trust and this device.
pub fn import(config: &Config, path: &Path) -> Result<Imported, EngineCommandError> {
    let store = &config.engine.store;
    let trust = Trust::new(store.public_key.as_deref(), store.verify)?;
    let models = expected_models(config)?;
    let bytes = read_pack_file(path)?;
    import_pack(bytes.as_slice(), &trust, &models)
        .map_err(|source| EngineCommandError::Import { path: path.to_path_buf(), source })
}

/// `engine export [--key KEY] PACK`: this config's cached engines and timing caches in one pack.
pub fn export(config: &Config, key: Option<&Path>, path: &Path) -> Result<PackReport, EngineCommandError> {
    let key = key.map(PrivateKey::read).transpose()?;
    let models = expected_models(config)?;
    let pack = export_pack(&models, Contents::EngineAndTimingCache)?;
    write_pack_file(path, &pack, key.as_ref())
}

/// Every model of `config` (the `[model]` and each `[models.<name>]`).
fn model_specs(config: &Config) -> Result<Vec<ModelSpec>, ConfigError> {
    let mut specs = vec![ModelSpec::from_config(config)?];
    for name in config.models.keys() {
        if let Some(spec) = ModelSpec::named(config, name) {
            specs.push(spec?);
        }
    }
    Ok(specs)
}

/// What this device accepts for each model of `config` built from ONNX: through the toolchain
/// that builds here (TensorRT, or the tests' stand-in).
fn expected_models(config: &Config) -> Result<Vec<ExpectedModel>, EngineCommandError> {
    let specs = model_specs(config)?;
    crate::backend::load::expected_models(&specs, &crate::model::DeviceSpec::from_config(config))
        .map_err(|e| EngineCommandError::Tensorrt(e.to_string()))
}

fn read_pack_file(path: &Path) -> Result<Vec<u8>, EngineCommandError> {
    files::read(path, MAX_PACK_FILE_BYTES)
        .map_err(|source| EngineCommandError::Read { path: path.to_path_buf(), source })
}

fn write_pack_file(path: &Path, pack: &Pack, key: Option<&PrivateKey>) -> Result<PackReport, EngineCommandError> {
    let bytes = pack.to_bytes(key).map_err(|source| EngineCommandError::Pack { path: path.to_path_buf(), source })?;
    files::atomic_write(path, &bytes)?;
    Ok(PackReport {
        pack: path.to_path_buf(),
        bytes: bytes.len() as u64,
        engines: pack.manifest.engines.iter().map(|engine| engine.model.clone()).collect(),
        timing_caches: pack.manifest.timing_caches.iter().map(|cache| cache.model.clone()).collect(),
        signed_by: key.map(|key| key.public().id()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exit statuses `engine …` had before its error said its class: 78 for the config or a
    /// key file, 1 for the rest.
    #[test]
    fn the_config_and_a_key_file_are_the_configurations_fault_and_the_rest_a_failure() {
        let path = PathBuf::from("fleet.key");
        let config = ConfigError::Parse { origin: crate::config::ConfigOrigin::Embedded, message: "x".into() };
        assert_eq!(EngineCommandError::Config(config).exit_class().code(), 78);
        let key = KeyError::Invalid { path: path.clone(), message: "not a key".into() };
        assert_eq!(EngineCommandError::Key(key).exit_class().code(), 78);
        let tensorrt = EngineCommandError::Tensorrt("no TensorRT here".into());
        assert_eq!(tensorrt.exit_class().code(), 1);
        let read = ReadError::NotUtf8;
        assert_eq!(EngineCommandError::Read { path, source: read }.exit_class().code(), 1);
    }
}
