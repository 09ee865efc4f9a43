//! On-disk cache of built TensorRT engines and their timing cache.
//!
//! Owns: the cache key (what an engine depends on: the model as read once by [`ModelInput`] with
//! its external-data files, the TensorRT version, the builder fingerprint, the device, the build
//! options), file names in the cache directory, the sidecar JSON next to every engine, validation
//! of engine bytes *before* TensorRT sees them, the order of its atomic writes (each one
//! `crate::sys::files::atomic_write`: temp file, fsync, rename, fsync of the directory), sweeping
//! the temp files an interrupted write left, and the cross-process build lock ([`BuildLock`]).
//! The device part of the key is `super::device_key`'s. Pure Rust and always compiled, so
//! everything here is tested without TensorRT.
//! Must not: call TensorRT or CUDA, or decide whether to rebuild beyond reporting *why* a cached
//! engine cannot be used ([`MissReason`]); the TensorRT layer does the building.
//!
//! Layout in the cache directory (`<stem>` is the model file name without extension):
//! - `<stem>.<key>.engine` + `<stem>.<key>.engine.json` (sidecar: [`EngineIdentity`] in clear text,
//!   the engine's size and sha256);
//! - `<stem>.timing.cache` + `<stem>.timing.cache.json`, shared by every key of one device and
//!   TensorRT version: it is what makes a rebuild after a model or option change fast;
//! - `build.lock`, flocked by the process that builds and saves an engine (one at a time).
//!
//! A power cut can interrupt a write at any point; because every file is replaced by rename and
//! the sidecar is written after its engine, a reader sees either the old pair, the new pair, or a
//! new engine with an old sidecar — which fails the sha256 check and is rebuilt, never trusted.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Seek, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::device_key::DeviceIdentity;
use super::onnx_external_data::external_data_locations;
use crate::config::Precision;
use crate::sys::files::{adopt_dir_owner, atomic_write, WriteError, TEMP_INFIX};

/// Version of the sidecar format and of the key derivation; bumping it invalidates every cache.
/// 2: the device is identified by SM count, memory and board too; external-data files are hashed.
pub const CACHE_SCHEMA: u32 = 2;

/// Hex digits of the key in file names (64 bits: collisions between configs of one model are
/// not a practical concern, and the sidecar is compared field by field anyway).
const KEY_HEX_DIGITS: usize = 16;

/// Larger files are rejected before being read: no engine for a Jetson-class device comes close,
/// and reading one into memory must stay bounded.
pub const MAX_ENGINE_BYTES: u64 = 4 << 30;

/// Sidecars and timing caches beyond this are not ours.
const MAX_SIDECAR_BYTES: u64 = 64 << 10;
pub const MAX_TIMING_CACHE_BYTES: u64 = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("engine cache {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("model {path}: {reason}")]
    Model { path: PathBuf, reason: String },
    #[error("engine {path}: {reason}")]
    InvalidEngine { path: PathBuf, reason: MissReason },
    #[error(
        "waited {} s for the engine build lock {path}, held by {holder}; giving up (engine.build_timeout_s): \
         if that process hangs, stop it",
        waited.as_secs()
    )]
    LockTimeout { path: PathBuf, holder: String, waited: Duration },
}

impl From<WriteError> for CacheError {
    fn from(WriteError { path, source }: WriteError) -> Self {
        CacheError::Io { path, source }
    }
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> CacheError + '_ {
    move |source| CacheError::Io { path: path.to_path_buf(), source }
}

/// Largest ONNX file read: protobuf caps a message at 2 GiB (bigger models keep their weights in
/// external-data files), and the whole file is held in memory for the parser.
pub const MAX_ONNX_BYTES: u64 = 2 << 30;

/// What an engine's model is, for the key: the `.onnx` file's hash and the hash of every
/// external-data file it references (TensorRT's parser reads those from the model's directory, so
/// new weights in them must make a new engine).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelDigest {
    /// sha256 of the `.onnx` bytes, hex.
    pub sha256: String,
    /// External-data location (relative to the model's directory) → its sha256, hex.
    pub external_data: BTreeMap<String, String>,
}

/// An ONNX model as an engine build sees it: read once, so that the bytes hashed into the key are
/// exactly the bytes handed to TensorRT's parser (a model replaced between the two would otherwise
/// be cached under the old model's key).
#[derive(Debug, Clone)]
pub struct ModelInput {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub digest: ModelDigest,
}

impl ModelInput {
    pub fn read(path: &Path) -> Result<ModelInput, CacheError> {
        let too_large = |bytes: u64| CacheError::Model {
            path: path.to_path_buf(),
            reason: format!("{bytes} bytes is more than an ONNX file can hold ({MAX_ONNX_BYTES})"),
        };
        let file = File::open(path).map_err(io_error(path))?;
        let length = file.metadata().map_err(io_error(path))?.len();
        if length > MAX_ONNX_BYTES {
            return Err(too_large(length));
        }
        let mut bytes = Vec::with_capacity(length as usize);
        file.take(MAX_ONNX_BYTES + 1).read_to_end(&mut bytes).map_err(io_error(path))?;
        if bytes.len() as u64 > MAX_ONNX_BYTES {
            return Err(too_large(bytes.len() as u64));
        }
        let sha256 = sha256_hex(&bytes);
        let external_data = hash_external_data(path, &bytes)?;
        Ok(ModelInput { path: path.to_path_buf(), bytes, digest: ModelDigest { sha256, external_data } })
    }

    /// Frees the bytes once they are not needed (a cache hit): the hash stays.
    pub fn release_bytes(&mut self) {
        self.bytes = Vec::new();
    }
}

/// Hashes the external-data files `model` (the bytes of the file at `path`) references. Locations
/// are untrusted input: one that is absolute or climbs out of the model's directory is refused (the
/// ONNX checker refuses them too), and a referenced file that cannot be read is an error here
/// rather than a parse failure minutes into a build. Bytes that are not a protobuf message are
/// left to TensorRT's parser to refuse with its own words; only the `.onnx` file is hashed then.
fn hash_external_data(path: &Path, model: &[u8]) -> Result<BTreeMap<String, String>, CacheError> {
    let invalid = |reason: String| CacheError::Model { path: path.to_path_buf(), reason };
    let locations = match external_data_locations(model) {
        Ok(locations) => locations,
        Err(error) => {
            log::warn!(
                "{}: cannot list its external-data files ({error}); only the file itself is hashed",
                path.display()
            );
            return Ok(BTreeMap::new());
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut hashes = BTreeMap::new();
    for location in locations {
        let relative = Path::new(&location);
        let escapes = relative.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
        if location.is_empty() || escapes {
            return Err(invalid(format!(
                "external-data location {location:?} is not a path inside the model's directory"
            )));
        }
        let file = dir.join(relative);
        let sha256 = sha256_file(&file)
            .map_err(|e| invalid(format!("external-data file {} cannot be read: {e}", file.display())))?;
        hashes.insert(location, sha256);
    }
    Ok(hashes)
}

/// Shape range of one dynamic model input (TensorRT optimisation profile).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeProfile {
    /// Input tensor name.
    pub input: String,
    pub min: Vec<i64>,
    pub opt: Vec<i64>,
    pub max: Vec<i64>,
}

impl ShapeProfile {
    /// A profile that allows exactly one shape (what a camera pipeline feeds).
    pub fn fixed(input: impl Into<String>, shape: &[i64]) -> Self {
        ShapeProfile { input: input.into(), min: shape.to_vec(), opt: shape.to_vec(), max: shape.to_vec() }
    }
}

/// The optimisation profiles of a model with dynamic input dimensions: `count` copies of `shape`.
/// TensorRT needs a profile per execution context in concurrent use, so `count` is the number of
/// contexts that can run at once (one per inference worker), and `shape` ranges over the batch
/// sizes a worker runs (1..=`engine.max_batch`). Unused (and the engine
/// gets TensorRT's single implicit profile) when the model's input dimensions are all fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputProfiles {
    pub shape: ShapeProfile,
    pub count: u32,
}

/// Builder options that change the engine (and therefore the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOptions {
    /// What builds the engine: a fingerprint of the TensorRT shim (its source and the TensorRT
    /// headers it was compiled against). It changes by itself whenever the builder calls could,
    /// so no hand-bumped version number has to remember to.
    pub builder: String,
    pub precision: Precision,
    pub workspace_bytes: u64,
    pub dla_core: Option<u32>,
    pub optimization_level: u8,
    /// Applied to the input when the model's input has dynamic dimensions.
    pub input_profiles: Option<InputProfiles>,
}

pub fn precision_name(precision: Precision) -> &'static str {
    match precision {
        Precision::Fp32 => "fp32",
        Precision::Fp16 => "fp16",
        Precision::Int8 => "int8",
    }
}

/// Everything a built engine depends on; hashed into the key and recorded in the sidecar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineIdentity {
    /// sha256 of the ONNX file, hex.
    pub model_sha256: String,
    /// sha256 of each external-data file the model references, by location.
    pub external_data: BTreeMap<String, String>,
    /// `major.minor.patch` of the TensorRT library that builds/loads the engine.
    pub tensorrt_version: String,
    /// [`BuildOptions::builder`].
    pub builder: String,
    pub device_name: String,
    /// `major.minor`, e.g. `8.7` for Orin.
    pub compute_capability: String,
    pub multiprocessors: u32,
    pub total_memory_bytes: u64,
    /// See [`DeviceIdentity::board`].
    pub board: String,
    pub precision: String,
    pub workspace_bytes: u64,
    pub dla_core: Option<u32>,
    pub optimization_level: u8,
    pub input_profile: Option<ShapeProfile>,
    /// Copies of `input_profile` (one per concurrently running context); 0 without a profile.
    pub profile_count: u32,
}

impl EngineIdentity {
    pub fn new(model: &ModelDigest, tensorrt_version: &str, device: &DeviceIdentity, options: &BuildOptions) -> Self {
        EngineIdentity {
            model_sha256: model.sha256.clone(),
            external_data: model.external_data.clone(),
            tensorrt_version: tensorrt_version.to_owned(),
            builder: options.builder.clone(),
            device_name: device.name.clone(),
            compute_capability: format!("{}.{}", device.compute_capability.0, device.compute_capability.1),
            multiprocessors: device.multiprocessors,
            total_memory_bytes: device.total_memory_bytes,
            board: device.board.clone(),
            precision: precision_name(options.precision).to_owned(),
            workspace_bytes: options.workspace_bytes,
            dla_core: options.dla_core,
            optimization_level: options.optimization_level,
            input_profile: options.input_profiles.as_ref().map(|p| p.shape.clone()),
            profile_count: options.input_profiles.as_ref().map_or(0, |p| p.count),
        }
    }

    /// Short hash of every field. Each field is fed with its name and length so that no two
    /// different identities produce the same byte stream.
    pub fn key(&self) -> String {
        let mut hasher = Sha256::new();
        let mut field = |name: &str, value: &str| {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update((value.len() as u64).to_le_bytes());
            hasher.update(value.as_bytes());
        };
        field("schema", &CACHE_SCHEMA.to_string());
        field("model_sha256", &self.model_sha256);
        field("external_data", &self.external_data.len().to_string());
        for (location, sha256) in &self.external_data {
            field("location", location);
            field("sha256", sha256);
        }
        field("tensorrt_version", &self.tensorrt_version);
        field("builder", &self.builder);
        field("device_name", &self.device_name);
        field("compute_capability", &self.compute_capability);
        field("multiprocessors", &self.multiprocessors.to_string());
        field("total_memory_bytes", &self.total_memory_bytes.to_string());
        field("board", &self.board);
        field("precision", &self.precision);
        field("workspace_bytes", &self.workspace_bytes.to_string());
        field("dla_core", &self.dla_core.map(|c| c.to_string()).unwrap_or_default());
        field("optimization_level", &self.optimization_level.to_string());
        match &self.input_profile {
            None => field("input_profile", ""),
            Some(profile) => {
                field("input_profile", &profile.input);
                field("min", &format!("{:?}", profile.min));
                field("opt", &format!("{:?}", profile.opt));
                field("max", &format!("{:?}", profile.max));
            }
        }
        field("profile_count", &self.profile_count.to_string());
        let mut key = to_hex(&hasher.finalize());
        key.truncate(KEY_HEX_DIGITS);
        key
    }

    /// Human-readable list of the fields that differ from `other` (`field: old → new`).
    pub fn differences(&self, newer: &EngineIdentity) -> Vec<String> {
        let mut changed = Vec::new();
        let mut compare = |name: &str, old: String, new: String| {
            if old != new {
                changed.push(format!("{name}: {old} → {new}"));
            }
        };
        compare("model sha256", short(&self.model_sha256), short(&newer.model_sha256));
        let external = |map: &BTreeMap<String, String>| {
            let entries: Vec<String> = map.iter().map(|(location, sha)| format!("{location}@{}", short(sha))).collect();
            format!("[{}]", entries.join(", "))
        };
        compare("external data", external(&self.external_data), external(&newer.external_data));
        compare("TensorRT", self.tensorrt_version.clone(), newer.tensorrt_version.clone());
        compare("builder", self.builder.clone(), newer.builder.clone());
        compare("device", self.device_name.clone(), newer.device_name.clone());
        compare("compute capability", self.compute_capability.clone(), newer.compute_capability.clone());
        compare("SMs", self.multiprocessors.to_string(), newer.multiprocessors.to_string());
        compare("GPU memory bytes", self.total_memory_bytes.to_string(), newer.total_memory_bytes.to_string());
        compare("board", self.board.clone(), newer.board.clone());
        compare("precision", self.precision.clone(), newer.precision.clone());
        compare("workspace bytes", self.workspace_bytes.to_string(), newer.workspace_bytes.to_string());
        compare("DLA core", format!("{:?}", self.dla_core), format!("{:?}", newer.dla_core));
        compare("optimisation level", self.optimization_level.to_string(), newer.optimization_level.to_string());
        compare("input profile", format!("{:?}", self.input_profile), format!("{:?}", newer.input_profile));
        compare("optimisation profiles", self.profile_count.to_string(), newer.profile_count.to_string());
        changed
    }
}

fn short(hash: &str) -> String {
    hash.chars().take(12).collect()
}

/// The JSON file next to an engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSidecar {
    pub schema: u32,
    pub key: String,
    pub identity: EngineIdentity,
    pub engine_bytes: u64,
    pub engine_sha256: String,
}

impl EngineSidecar {
    /// The sidecar of `engine`, built for `identity`.
    pub fn new(identity: &EngineIdentity, engine: &[u8]) -> EngineSidecar {
        EngineSidecar {
            schema: CACHE_SCHEMA,
            key: identity.key(),
            identity: identity.clone(),
            engine_bytes: engine.len() as u64,
            engine_sha256: sha256_hex(engine),
        }
    }
}

/// The JSON file next to the timing cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingCacheSidecar {
    pub schema: u32,
    pub tensorrt_version: String,
    pub device_name: String,
    pub compute_capability: String,
    pub multiprocessors: u32,
    pub total_memory_bytes: u64,
    pub board: String,
    pub cache_bytes: u64,
    pub cache_sha256: String,
}

impl TimingCacheSidecar {
    /// The sidecar of timing cache `cache`, measured by `tensorrt_version` on `device`.
    pub fn new(tensorrt_version: &str, device: &DeviceIdentity, cache: &[u8]) -> TimingCacheSidecar {
        TimingCacheSidecar {
            schema: CACHE_SCHEMA,
            tensorrt_version: tensorrt_version.to_owned(),
            device_name: device.name.clone(),
            compute_capability: format!("{}.{}", device.compute_capability.0, device.compute_capability.1),
            multiprocessors: device.multiprocessors,
            total_memory_bytes: device.total_memory_bytes,
            board: device.board.clone(),
            cache_bytes: cache.len() as u64,
            cache_sha256: sha256_hex(cache),
        }
    }

    /// What differs from `expected` in what the cache was measured with (`field: old → new`):
    /// the TensorRT version and the device, not the bytes.
    pub fn differences(&self, expected: &TimingCacheSidecar) -> Vec<String> {
        let mut changed = Vec::new();
        if self.tensorrt_version != expected.tensorrt_version {
            changed.push(format!("TensorRT: {} → {}", self.tensorrt_version, expected.tensorrt_version));
        }
        let device_of = |s: &TimingCacheSidecar| {
            format!(
                "{} ({}, {} SMs, {} bytes, {})",
                s.device_name, s.compute_capability, s.multiprocessors, s.total_memory_bytes, s.board
            )
        };
        if device_of(self) != device_of(expected) {
            changed.push(format!("device: {} → {}", device_of(self), device_of(expected)));
        }
        changed
    }
}

/// Why a cached (or user-supplied) engine or timing cache is not used. Logged before a rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissReason {
    /// No engine for this key; `stale` lists what changed against engines of the same model that
    /// exist for other keys.
    Missing {
        stale: Vec<String>,
    },
    SidecarMissing,
    SidecarInvalid(String),
    /// The sidecar describes a different build (should not happen for a key-named file).
    IdentityMismatch(Vec<String>),
    Truncated {
        expected: u64,
        actual: u64,
    },
    TooLarge {
        bytes: u64,
    },
    Empty,
    /// Same size, different content: corruption, or a file that is not this engine.
    ChecksumMismatch,
    Unreadable(String),
    /// TensorRT refused to deserialise it (other TensorRT version, other device, corrupt).
    Deserialize(String),
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissReason::Missing { stale } if stale.is_empty() => f.write_str("no cached engine"),
            MissReason::Missing { stale } => {
                write!(f, "no cached engine for this build; changed: {}", stale.join(", "))
            }
            MissReason::SidecarMissing => f.write_str("its .json sidecar is missing (interrupted write?)"),
            MissReason::SidecarInvalid(why) => write!(f, "its .json sidecar is invalid: {why}"),
            MissReason::IdentityMismatch(changed) => write!(f, "built for something else: {}", changed.join(", ")),
            MissReason::Truncated { expected, actual } => {
                write!(f, "truncated: {actual} bytes, the sidecar records {expected}")
            }
            MissReason::TooLarge { bytes } => write!(f, "{bytes} bytes is more than the {MAX_ENGINE_BYTES} allowed"),
            MissReason::Empty => f.write_str("the file is empty"),
            MissReason::ChecksumMismatch => {
                f.write_str("its sha256 does not match the sidecar (corrupt or foreign file)")
            }
            MissReason::Unreadable(why) => write!(f, "cannot read it: {why}"),
            MissReason::Deserialize(why) => write!(f, "TensorRT cannot deserialise it: {why}"),
        }
    }
}

/// Result of looking up an engine.
#[derive(Debug)]
pub enum EngineLookup {
    Hit { path: PathBuf, bytes: Vec<u8> },
    Miss(MissReason),
}

/// The cache files of one model in one directory.
#[derive(Debug, Clone)]
pub struct EngineCache {
    dir: PathBuf,
    stem: String,
}

impl EngineCache {
    /// Creates the directory if needed and removes temp files left by an interrupted write.
    pub fn open(dir: &Path, model_path: &Path) -> Result<Self, CacheError> {
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        let stem = model_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
        let cache = EngineCache { dir: dir.to_path_buf(), stem };
        cache.remove_temp_leftovers()?;
        Ok(cache)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The model's file stem, which names its files here.
    pub fn stem(&self) -> &str {
        &self.stem
    }

    pub fn engine_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{}.{key}.engine", self.stem))
    }

    pub fn timing_cache_path(&self) -> PathBuf {
        self.dir.join(format!("{}.timing.cache", self.stem))
    }

    fn remove_temp_leftovers(&self) -> Result<(), CacheError> {
        let prefix = format!(".{}.", self.stem);
        for entry in fs::read_dir(&self.dir).map_err(io_error(&self.dir))? {
            let entry = entry.map_err(io_error(&self.dir))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Some((_, pid)) = name.strip_prefix(&prefix).and_then(|rest| rest.rsplit_once(TEMP_INFIX)) else {
                continue;
            };
            // A live process (a concurrent `build-engine`) may still be writing it.
            let writer_alive =
                pid.parse::<u32>().is_ok_and(|pid| pid != std::process::id()) && Path::new("/proc").join(pid).exists();
            if !writer_alive {
                let path = entry.path();
                log::info!("removing {} left by an interrupted cache write", path.display());
                fs::remove_file(&path).map_err(io_error(&path))?;
            }
        }
        Ok(())
    }

    /// The engine for `identity` if it exists and its bytes match the sidecar; otherwise why not.
    pub fn lookup(&self, identity: &EngineIdentity) -> EngineLookup {
        let path = self.engine_path(&identity.key());
        if !path.exists() {
            return EngineLookup::Miss(MissReason::Missing { stale: self.stale_differences(identity) });
        }
        match read_validated_engine(&path, Some(identity)) {
            Ok(bytes) => EngineLookup::Hit { path, bytes },
            Err(reason) => EngineLookup::Miss(reason),
        }
    }

    /// What changed against the sidecars of this model's engines for other keys (newest first is
    /// not needed: any one explains the miss, all of them are listed once).
    fn stale_differences(&self, identity: &EngineIdentity) -> Vec<String> {
        let Ok(entries) = fs::read_dir(&self.dir) else { return Vec::new() };
        let prefix = format!("{}.", self.stem);
        let mut changed: Vec<String> = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with(&prefix) && name.ends_with(".engine.json")) {
                continue;
            }
            if let Ok(sidecar) = read_sidecar::<EngineSidecar>(&entry.path()) {
                for difference in sidecar.identity.differences(identity) {
                    if !changed.contains(&difference) {
                        changed.push(difference);
                    }
                }
            }
        }
        changed
    }

    /// Writes engine then sidecar, each atomically. Returns the engine's path.
    pub fn store(&self, identity: &EngineIdentity, engine: &[u8]) -> Result<PathBuf, CacheError> {
        let path = self.engine_path(&identity.key());
        write_engine_with_sidecar(&path, identity, engine)?;
        Ok(path)
    }

    /// Writes `engine` beside its final name, durable but invisible to [`lookup`](Self::lookup)
    /// until [`StagedEngine::commit`]: an engine is checked against its model before it is cached
    /// (a refused one never is). Dropped uncommitted, the file is removed; a crash leaves a temp
    /// file that the next [`open`](Self::open) sweeps.
    pub fn stage(&self, identity: &EngineIdentity, engine: &[u8]) -> Result<StagedEngine, CacheError> {
        let final_path = self.engine_path(&identity.key());
        let name = final_path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        let path = self.dir.join(format!(".{name}.staged{TEMP_INFIX}{}", std::process::id()));
        let sidecar = EngineSidecar {
            schema: CACHE_SCHEMA,
            key: identity.key(),
            identity: identity.clone(),
            engine_bytes: engine.len() as u64,
            engine_sha256: sha256_hex(engine),
        };
        let staged = StagedEngine { path, final_path, sidecar, committed: false };
        let write = || -> io::Result<()> {
            let mut file = File::create(&staged.path)?;
            adopt_dir_owner(&file, &self.dir)?;
            file.write_all(engine)?;
            file.sync_all()
        };
        write().map_err(io_error(&staged.path))?;
        Ok(staged)
    }

    /// The timing cache if it was written for this TensorRT version and device and is intact.
    pub fn load_timing_cache(&self, tensorrt_version: &str, device: &DeviceIdentity) -> Result<Vec<u8>, MissReason> {
        let path = self.timing_cache_path();
        if !path.exists() {
            return Err(MissReason::Missing { stale: Vec::new() });
        }
        let sidecar: TimingCacheSidecar = read_sidecar(&sidecar_path(&path))?;
        let changed = sidecar.differences(&TimingCacheSidecar::new(tensorrt_version, device, &[]));
        if !changed.is_empty() {
            return Err(MissReason::IdentityMismatch(changed));
        }
        read_checked(&path, sidecar.cache_bytes, &sidecar.cache_sha256, MAX_TIMING_CACHE_BYTES)
    }

    /// Replaces the timing cache (atomically, sidecar after the data). Returns its path.
    pub fn store_timing_cache(
        &self,
        tensorrt_version: &str,
        device: &DeviceIdentity,
        cache: &[u8],
    ) -> Result<PathBuf, CacheError> {
        let path = self.timing_cache_path();
        atomic_write(&path, cache)?;
        let sidecar = TimingCacheSidecar::new(tensorrt_version, device, cache);
        atomic_write(&sidecar_path(&path), &sidecar_json(&sidecar))?;
        Ok(path)
    }
}

/// An engine in the cache directory that lookups do not see yet ([`EngineCache::stage`]).
#[derive(Debug)]
pub struct StagedEngine {
    path: PathBuf,
    final_path: PathBuf,
    /// Written at commit: it describes the staged bytes.
    sidecar: EngineSidecar,
    committed: bool,
}

impl StagedEngine {
    /// Where it is now: the runtime loads it from here to check it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves it under its cache name (rename, fsync of the directory), then writes its sidecar:
    /// from now on lookups find it. Returns its path.
    pub fn commit(mut self) -> Result<PathBuf, CacheError> {
        fs::rename(&self.path, &self.final_path).map_err(io_error(&self.final_path))?;
        self.committed = true;
        if let Some(dir) = self.final_path.parent() {
            File::open(dir).and_then(|dir| dir.sync_all()).map_err(io_error(dir))?;
        }
        atomic_write(&sidecar_path(&self.final_path), &sidecar_json(&self.sidecar))?;
        Ok(self.final_path.clone())
    }
}

impl Drop for StagedEngine {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: a file left here is swept by the next `EngineCache::open`.
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The lock file in the cache directory that serialises engine builds.
const BUILD_LOCK_FILE: &str = "build.lock";

/// How often a waiting process retries the build lock (and reports that it waits).
const BUILD_LOCK_POLL: Duration = Duration::from_millis(500);

/// Longest holder description read from the lock file.
const MAX_HOLDER_BYTES: u64 = 1024;

/// What [`EngineCache::try_lock_builds`] got.
#[derive(Debug)]
pub enum LockAttempt {
    Held(BuildLock),
    /// Another process holds it; what it wrote about itself.
    Busy(String),
}

/// Exclusive right to build engines in one cache directory, across processes (an advisory
/// `flock` on `build.lock`). The kernel drops it when the holder exits, however it exits, so a
/// crashed build never blocks the next one. Released on drop.
#[derive(Debug)]
pub struct BuildLock {
    _file: File,
}

/// Takes an exclusive `flock` on `file` without waiting; `Ok(false)` when another open file
/// description holds it.
fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock takes a file descriptor that `file` keeps open for the duration of the call;
    // it touches no memory of ours.
    let status = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if status == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        Some(libc::EINTR) => try_lock_exclusive(file),
        _ => Err(error),
    }
}

impl EngineCache {
    /// Takes the cache directory's build lock: two processes (the daemon and `build-engine`, say)
    /// must not build at once — on a Jetson two builds double the RAM, and both would write the
    /// same files. While another process holds it, `waiting` is called every
    /// [`BUILD_LOCK_POLL`] with what the holder wrote about itself and how long this one has
    /// waited (log it; keep systemd's start timeout extended). `holder` describes this process to
    /// the next waiter. The caller looks the engine up again after acquiring: the other process
    /// has probably just saved it. A holder that keeps it longer than `max_wait` (a hung build)
    /// makes this fail with [`CacheError::LockTimeout`] naming it, instead of waiting forever.
    pub fn lock_builds(
        &self,
        holder: &str,
        max_wait: Duration,
        mut waiting: impl FnMut(&str, Duration),
    ) -> Result<BuildLock, CacheError> {
        let started = Instant::now();
        loop {
            let busy = match self.try_lock_builds(holder)? {
                LockAttempt::Held(lock) => return Ok(lock),
                LockAttempt::Busy(busy) => busy,
            };
            if started.elapsed() >= max_wait {
                let path = self.dir.join(BUILD_LOCK_FILE);
                return Err(CacheError::LockTimeout { path, holder: busy, waited: started.elapsed() });
            }
            waiting(&busy, started.elapsed());
            std::thread::sleep(BUILD_LOCK_POLL);
        }
    }

    /// [`lock_builds`](Self::lock_builds) without waiting: the lock, or what its holder wrote
    /// about itself.
    pub fn try_lock_builds(&self, holder: &str) -> Result<LockAttempt, CacheError> {
        let path = self.dir.join(BUILD_LOCK_FILE);
        let mut file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_error(&path))?;
        adopt_dir_owner(&file, &self.dir).map_err(io_error(&path))?;
        if !try_lock_exclusive(&file).map_err(io_error(&path))? {
            let mut text = String::new();
            // Who holds it is for the log only: an unreadable description is not an error.
            let _ = (&file).take(MAX_HOLDER_BYTES).read_to_string(&mut text);
            let text = if text.trim().is_empty() { "another process" } else { text.trim() };
            return Ok(LockAttempt::Busy(text.to_owned()));
        }
        // Best effort: the description only helps the next waiter's log line.
        let _ = file.set_len(0).and_then(|()| file.write_all(holder.as_bytes())).and_then(|()| file.rewind());
        Ok(LockAttempt::Held(BuildLock { _file: file }))
    }

    /// [`store_timing_cache`](Self::store_timing_cache) after an engine was saved: a failure here
    /// (disk full, read-only file) is a warning, not a failed start, because the engine is what
    /// the daemon needs; the next rebuild merely starts without the cache. Returns its path when
    /// it was written.
    pub fn store_timing_cache_after_engine(
        &self,
        tensorrt_version: &str,
        device: &DeviceIdentity,
        cache: &[u8],
    ) -> Option<PathBuf> {
        match self.store_timing_cache(tensorrt_version, device, cache) {
            Ok(path) => Some(path),
            Err(error) => {
                log::warn!(
                    "the engine is saved, but the timing cache is not ({error}); the next rebuild starts without it"
                );
                None
            }
        }
    }
}

/// `<file>.json`.
pub fn sidecar_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

/// Writes `engine` to `path` and its sidecar to `<path>.json`, both atomically, engine first.
/// `build-engine` uses this for engines outside the cache too, so that a prebuilt engine can be
/// validated like a cached one.
pub fn write_engine_with_sidecar(path: &Path, identity: &EngineIdentity, engine: &[u8]) -> Result<(), CacheError> {
    let sidecar = EngineSidecar::new(identity, engine);
    atomic_write(path, engine)?;
    Ok(atomic_write(&sidecar_path(path), &sidecar_json(&sidecar))?)
}

fn sidecar_json<T: Serialize>(sidecar: &T) -> Vec<u8> {
    // Serialising plain strings and numbers cannot fail; an empty sidecar would be rejected on
    // read, so even the impossible case degrades to a rebuild.
    let mut json = serde_json::to_vec_pretty(sidecar).unwrap_or_default();
    json.push(b'\n');
    json
}

fn read_sidecar<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, MissReason> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(MissReason::SidecarMissing),
        Err(e) => return Err(MissReason::SidecarInvalid(e.to_string())),
    };
    let mut text = Vec::new();
    file.take(MAX_SIDECAR_BYTES + 1).read_to_end(&mut text).map_err(|e| MissReason::SidecarInvalid(e.to_string()))?;
    if text.len() as u64 > MAX_SIDECAR_BYTES {
        return Err(MissReason::SidecarInvalid("too large".into()));
    }
    serde_json::from_slice(&text).map_err(|e| MissReason::SidecarInvalid(e.to_string()))
}

/// Reads an engine and checks it against its sidecar. With `expected`, the sidecar must describe
/// that exact build (cache lookups); without, any sidecar whose size and sha256 match is accepted
/// (user-supplied engines, where the TensorRT version is checked by deserialisation).
fn read_validated_engine(path: &Path, expected: Option<&EngineIdentity>) -> Result<Vec<u8>, MissReason> {
    let sidecar: EngineSidecar = read_sidecar(&sidecar_path(path))?;
    if sidecar.schema != CACHE_SCHEMA {
        return Err(MissReason::SidecarInvalid(format!("schema {} (this build reads {CACHE_SCHEMA})", sidecar.schema)));
    }
    if sidecar.key != sidecar.identity.key() {
        return Err(MissReason::SidecarInvalid("its key does not match its fields".into()));
    }
    if let Some(expected) = expected {
        let changed = sidecar.identity.differences(expected);
        if !changed.is_empty() {
            return Err(MissReason::IdentityMismatch(changed));
        }
    }
    read_checked(path, sidecar.engine_bytes, &sidecar.engine_sha256, MAX_ENGINE_BYTES)
}

/// Reads `path` only if it has exactly `expected_len` bytes (checked before reading) and the
/// given sha256.
fn read_checked(path: &Path, expected_len: u64, expected_sha256: &str, max: u64) -> Result<Vec<u8>, MissReason> {
    let actual = fs::metadata(path).map_err(|e| MissReason::Unreadable(e.to_string()))?.len();
    if actual > max {
        return Err(MissReason::TooLarge { bytes: actual });
    }
    if actual != expected_len {
        return Err(MissReason::Truncated { expected: expected_len, actual });
    }
    let bytes = fs::read(path).map_err(|e| MissReason::Unreadable(e.to_string()))?;
    if bytes.len() as u64 != expected_len {
        return Err(MissReason::Truncated { expected: expected_len, actual: bytes.len() as u64 });
    }
    if sha256_hex(&bytes) != expected_sha256 {
        return Err(MissReason::ChecksumMismatch);
    }
    Ok(bytes)
}

/// Loads a user-supplied engine (`model.engine` in the config). With a sidecar (as written by
/// `build-engine`) it is validated exactly like a cached engine; without one only its size can
/// be checked here and TensorRT's own header check does the rest.
pub fn load_prebuilt_engine(path: &Path) -> Result<Vec<u8>, CacheError> {
    let invalid = |reason| CacheError::InvalidEngine { path: path.to_path_buf(), reason };
    let metadata = fs::metadata(path).map_err(io_error(path))?;
    if !metadata.is_file() {
        return Err(invalid(MissReason::Unreadable("not a regular file".into())));
    }
    if sidecar_path(path).exists() {
        return read_validated_engine(path, None).map_err(invalid);
    }
    match metadata.len() {
        0 => Err(invalid(MissReason::Empty)),
        bytes if bytes > MAX_ENGINE_BYTES => Err(invalid(MissReason::TooLarge { bytes })),
        _ => fs::read(path).map_err(io_error(path)),
    }
}

/// sha256 of a file, hex, read in chunks (models can be hundreds of MB).
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(to_hex(&hasher.finalize()))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    to_hex(&Sha256::digest(bytes))
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(DIGITS[usize::from(byte >> 4)] as char);
        hex.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::files::atomic_write_with;

    fn device() -> DeviceIdentity {
        DeviceIdentity {
            name: "Orin".into(),
            compute_capability: (8, 7),
            multiprocessors: 16,
            total_memory_bytes: 64_339_370_496,
            board: "NVIDIA Jetson AGX Orin Developer Kit".into(),
        }
    }

    fn options() -> BuildOptions {
        BuildOptions {
            builder: "shim 0123456789ab, TensorRT headers 10.3.0".into(),
            precision: Precision::Fp16,
            workspace_bytes: 1 << 30,
            dla_core: None,
            optimization_level: 3,
            input_profiles: Some(InputProfiles { shape: ShapeProfile::fixed("image", &[1, 300, 300, 3]), count: 2 }),
        }
    }

    fn digest(bytes: &[u8]) -> ModelDigest {
        ModelDigest { sha256: sha256_hex(bytes), external_data: BTreeMap::new() }
    }

    fn identity() -> EngineIdentity {
        EngineIdentity::new(&digest(b"model"), "10.3.0", &device(), &options())
    }

    /// A fake engine: TensorRT never sees it, the cache only deals in bytes.
    fn engine_bytes() -> Vec<u8> {
        (0..4096u32).map(|i| (i * 31 % 251) as u8).collect()
    }

    fn cache(dir: &Path) -> EngineCache {
        EngineCache::open(dir, Path::new("/models/ssd.onnx")).expect("open cache")
    }

    #[test]
    fn key_changes_with_every_input() {
        let base = identity();
        let mut variants = Vec::new();
        let mut push = |change: &dyn Fn(&mut EngineIdentity)| {
            let mut id = base.clone();
            change(&mut id);
            variants.push(id);
        };
        push(&|id| id.model_sha256 = sha256_hex(b"other model"));
        push(&|id| id.external_data = [("weights.bin".to_string(), sha256_hex(b"w"))].into());
        push(&|id| id.external_data = [("weights.bin".to_string(), sha256_hex(b"w2"))].into());
        push(&|id| id.external_data = [("other.bin".to_string(), sha256_hex(b"w"))].into());
        push(&|id| id.tensorrt_version = "10.3.1".into());
        push(&|id| id.builder = "shim 0123456789ac, TensorRT headers 10.3.0".into());
        push(&|id| id.device_name = "Orin Nano".into());
        push(&|id| id.compute_capability = "8.6".into());
        push(&|id| id.multiprocessors = 8);
        push(&|id| id.total_memory_bytes = 16_218_083_328);
        push(&|id| id.board = "NVIDIA Jetson Orin NX Engineering Reference Developer Kit".into());
        push(&|id| id.precision = "fp32".into());
        push(&|id| id.workspace_bytes += 1);
        push(&|id| id.dla_core = Some(0));
        push(&|id| id.optimization_level = 4);
        push(&|id| id.input_profile = None);
        push(&|id| id.input_profile = Some(ShapeProfile::fixed("image", &[1, 320, 300, 3])));
        push(&|id| id.input_profile = Some(ShapeProfile::fixed("input", &[1, 300, 300, 3])));
        push(&|id| id.profile_count = 3);
        push(&|id| {
            id.input_profile = Some(ShapeProfile {
                input: "image".into(),
                min: vec![1, 300, 300, 3],
                opt: vec![4, 300, 300, 3],
                max: vec![8, 300, 300, 3],
            });
            id.profile_count = 1;
        });
        let mut keys = vec![base.key()];
        for variant in &variants {
            let key = variant.key();
            assert_eq!(key.len(), KEY_HEX_DIGITS);
            assert!(!keys.contains(&key), "{variant:?} collides");
            assert!(!base.differences(variant).is_empty());
            keys.push(key);
        }
        assert_eq!(identity().key(), base.key(), "the key is deterministic");
    }

    #[test]
    fn model_bytes_change_the_key_through_the_file_hash() {
        let dir = tempfile::tempdir().expect("tempdir");
        let model = dir.path().join("m.onnx");
        fs::write(&model, b"onnx v1").expect("write");
        let first = ModelInput::read(&model).expect("read");
        fs::write(&model, b"onnx v2").expect("write");
        let second = ModelInput::read(&model).expect("read");
        assert_eq!(first.digest.sha256, sha256_hex(b"onnx v1"));
        let key = |model: &ModelInput| EngineIdentity::new(&model.digest, "10.3.0", &device(), &options()).key();
        assert_ne!(key(&first), key(&second));
    }

    #[test]
    fn the_key_hashes_the_bytes_the_parser_gets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.onnx");
        fs::write(&path, b"onnx v1").expect("write");
        let model = ModelInput::read(&path).expect("read");
        // The file is replaced after it was read (an upgrade during a long build): what is parsed
        // and what is hashed are still the same bytes.
        fs::write(&path, b"onnx v2, replaced").expect("write");
        assert_eq!(model.bytes, b"onnx v1");
        assert_eq!(model.digest.sha256, sha256_hex(&model.bytes));

        let mut released = model.clone();
        released.release_bytes();
        assert!(released.bytes.is_empty());
        assert_eq!(released.digest, model.digest);
    }

    #[test]
    fn external_data_files_are_part_of_the_key() {
        use crate::backend::engine::onnx_external_data::encode;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big.onnx");
        fs::write(&path, encode::model(&[("w", Some("big.onnx.data")), ("b", None)])).expect("write model");
        fs::write(dir.path().join("big.onnx.data"), [1u8; 64]).expect("write weights");
        let first = ModelInput::read(&path).expect("read");
        assert_eq!(first.digest.external_data.keys().collect::<Vec<_>>(), ["big.onnx.data"]);
        assert_eq!(first.digest.external_data["big.onnx.data"], sha256_hex(&[1u8; 64]));

        // New weights, same .onnx: a new key, and the sidecar difference names the file.
        fs::write(dir.path().join("big.onnx.data"), [2u8; 64]).expect("rewrite weights");
        let second = ModelInput::read(&path).expect("read");
        assert_eq!(first.digest.sha256, second.digest.sha256);
        let identity = |model: &ModelInput| EngineIdentity::new(&model.digest, "10.3.0", &device(), &options());
        assert_ne!(identity(&first).key(), identity(&second).key());
        let changed = identity(&first).differences(&identity(&second));
        assert!(changed.iter().any(|c| c.contains("external data") && c.contains("big.onnx.data")), "{changed:?}");

        fs::remove_file(dir.path().join("big.onnx.data")).expect("rm");
        match ModelInput::read(&path) {
            Err(CacheError::Model { reason, .. }) => assert!(reason.contains("big.onnx.data"), "{reason}"),
            other => panic!("a missing external-data file must be an error, got {other:?}"),
        }
    }

    #[test]
    fn external_data_outside_the_model_directory_is_refused() {
        use crate::backend::engine::onnx_external_data::encode;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("evil.onnx");
        for location in ["../secret", "/etc/shadow", "weights/../../secret", ""] {
            fs::write(&path, encode::model(&[("w", Some(location))])).expect("write model");
            match ModelInput::read(&path) {
                Err(CacheError::Model { reason, .. }) => assert!(reason.contains("not a path inside"), "{reason}"),
                other => panic!("{location:?} must be refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_onnx_file_beyond_protobufs_limit_is_refused_before_reading() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("huge.onnx");
        // Sparse: no disk space is used and nothing is read.
        File::create(&path).and_then(|f| f.set_len(MAX_ONNX_BYTES + 1)).expect("sparse file");
        match ModelInput::read(&path) {
            Err(CacheError::Model { reason, .. }) => assert!(reason.contains("more than"), "{reason}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn stored_engine_is_found_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        let path = cache.store(&identity(), &engine_bytes()).expect("store");
        assert_eq!(
            path.file_name().and_then(|n| n.to_str()),
            Some(format!("ssd.{}.engine", identity().key()).as_str())
        );
        match cache.lookup(&identity()) {
            EngineLookup::Hit { path: hit, bytes } => {
                assert_eq!(hit, path);
                assert_eq!(bytes, engine_bytes());
            }
            EngineLookup::Miss(reason) => panic!("expected a hit: {reason}"),
        }
    }

    #[test]
    fn miss_explains_what_changed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        cache.store(&identity(), &engine_bytes()).expect("store");
        let mut upgraded = identity();
        upgraded.tensorrt_version = "10.4.0".into();
        match cache.lookup(&upgraded) {
            EngineLookup::Miss(reason @ MissReason::Missing { .. }) => {
                assert!(reason.to_string().contains("TensorRT: 10.3.0 → 10.4.0"), "{reason}");
            }
            other => panic!("expected a miss, got {other:?}"),
        }
    }

    fn expect_miss(cache: &EngineCache, matches: impl Fn(&MissReason) -> bool) {
        match cache.lookup(&identity()) {
            EngineLookup::Miss(reason) => assert!(matches(&reason), "unexpected reason: {reason}"),
            EngineLookup::Hit { .. } => panic!("a damaged engine was accepted"),
        }
    }

    #[test]
    fn truncated_engine_is_rejected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        let path = cache.store(&identity(), &engine_bytes()).expect("store");
        fs::write(&path, &engine_bytes()[..1000]).expect("truncate");
        expect_miss(&cache, |r| matches!(r, MissReason::Truncated { expected: 4096, actual: 1000 }));
    }

    #[test]
    fn corrupt_engine_is_rejected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        let path = cache.store(&identity(), &engine_bytes()).expect("store");
        let mut bytes = engine_bytes();
        bytes[2000] ^= 0x40;
        fs::write(&path, &bytes).expect("corrupt");
        expect_miss(&cache, |r| *r == MissReason::ChecksumMismatch);
    }

    #[test]
    fn foreign_file_under_the_engine_name_is_rejected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        fs::write(cache.engine_path(&identity().key()), b"\x08\x07\x12\x07pytorch").expect("write");
        expect_miss(&cache, |r| *r == MissReason::SidecarMissing);

        // A foreign file of the right size with a copied sidecar still fails the checksum.
        let path = cache.store(&identity(), &engine_bytes()).expect("store");
        fs::write(&path, vec![0u8; engine_bytes().len()]).expect("write");
        expect_miss(&cache, |r| *r == MissReason::ChecksumMismatch);
    }

    #[test]
    fn damaged_sidecar_is_rejected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        let path = cache.store(&identity(), &engine_bytes()).expect("store");
        let sidecar = sidecar_path(&path);
        fs::write(&sidecar, b"{\"schema\":1,").expect("write");
        expect_miss(&cache, |r| matches!(r, MissReason::SidecarInvalid(_)));

        // A sidecar edited to claim another identity no longer matches its own key.
        cache.store(&identity(), &engine_bytes()).expect("store");
        let text = fs::read_to_string(&sidecar).expect("read").replace("10.3.0", "10.3.1");
        fs::write(&sidecar, text).expect("write");
        expect_miss(&cache, |r| matches!(r, MissReason::SidecarInvalid(_)));
    }

    #[test]
    fn crash_before_rename_keeps_the_old_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ssd.timing.cache");
        atomic_write(&path, b"old content").expect("first write");
        let crash = atomic_write_with(&path, b"new content that never lands", |temp| {
            assert_eq!(fs::read(temp).expect("temp is durable"), b"new content that never lands");
            Err(io::Error::other("simulated power cut"))
        });
        assert!(crash.is_err());
        assert_eq!(fs::read(&path).expect("read"), b"old content");

        // The next start sweeps the leftover temp file and the old file is still intact.
        let leftovers = |dir: &Path| {
            fs::read_dir(dir)
                .expect("list")
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().contains(TEMP_INFIX))
                .count()
        };
        assert_eq!(leftovers(dir.path()), 1);
        EngineCache::open(dir.path(), Path::new("ssd.onnx")).expect("open");
        assert_eq!(leftovers(dir.path()), 0);
        assert_eq!(fs::read(&path).expect("read"), b"old content");

        atomic_write(&path, b"new content").expect("second write");
        assert_eq!(fs::read(&path).expect("read"), b"new content");
    }

    #[test]
    fn temp_files_of_a_live_writer_are_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let live = dir.path().join(format!(".ssd.abc.engine{TEMP_INFIX}1"));
        let dead = dir.path().join(format!(".ssd.abc.engine{TEMP_INFIX}4294967295"));
        let foreign = dir.path().join(format!(".other.engine{TEMP_INFIX}4294967295"));
        for path in [&live, &dead, &foreign] {
            fs::write(path, b"partial").expect("write");
        }
        cache(dir.path());
        assert!(live.exists(), "pid 1 is alive: its write may be in progress");
        assert!(!dead.exists());
        assert!(foreign.exists(), "another model's files are not ours to sweep");
    }

    #[test]
    fn engine_written_without_its_new_sidecar_is_not_trusted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        let path = cache.store(&identity(), &engine_bytes()).expect("store");
        // Crash after the engine's rename, before the sidecar's: new engine, old sidecar.
        let mut rebuilt = engine_bytes();
        rebuilt.reverse();
        atomic_write(&path, &rebuilt).expect("engine");
        expect_miss(&cache, |r| *r == MissReason::ChecksumMismatch);
    }

    #[test]
    fn timing_cache_round_trips_and_is_device_specific() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        assert!(matches!(cache.load_timing_cache("10.3.0", &device()), Err(MissReason::Missing { .. })));
        cache.store_timing_cache("10.3.0", &device(), b"timing").expect("store");
        assert_eq!(cache.load_timing_cache("10.3.0", &device()).expect("load"), b"timing");
        assert!(matches!(cache.load_timing_cache("10.4.0", &device()), Err(MissReason::IdentityMismatch(_))));
        let other = DeviceIdentity { compute_capability: (8, 6), ..device() };
        assert!(matches!(cache.load_timing_cache("10.3.0", &other), Err(MissReason::IdentityMismatch(_))));
        // Same name and compute capability, another module (a cloned SD card): not used.
        let nano = DeviceIdentity {
            multiprocessors: 8,
            total_memory_bytes: 7_990_000_000,
            board: "NVIDIA Jetson Orin Nano Developer Kit".into(),
            ..device()
        };
        match cache.load_timing_cache("10.3.0", &nano) {
            Err(reason @ MissReason::IdentityMismatch(_)) => {
                assert!(reason.to_string().contains("Orin Nano"), "{reason}");
            }
            other => panic!("another module's timing cache was accepted: {other:?}"),
        }
        fs::write(cache.timing_cache_path(), b"timinG").expect("corrupt");
        assert_eq!(cache.load_timing_cache("10.3.0", &device()), Err(MissReason::ChecksumMismatch));
    }

    #[test]
    fn a_timing_cache_that_cannot_be_saved_does_not_fail_the_build() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        let engine = cache.store(&identity(), &engine_bytes()).expect("the engine is saved");
        // A directory where the timing cache goes: the rename over it fails.
        fs::create_dir(cache.timing_cache_path()).expect("mkdir");
        assert!(cache.store_timing_cache("10.3.0", &device(), b"timing").is_err());
        assert_eq!(cache.store_timing_cache_after_engine("10.3.0", &device(), b"timing"), None);
        assert!(matches!(cache.lookup(&identity()), EngineLookup::Hit { path, .. } if path == engine));
        fs::remove_dir(cache.timing_cache_path()).expect("rmdir");
        assert_eq!(
            cache.store_timing_cache_after_engine("10.3.0", &device(), b"timing"),
            Some(cache.timing_cache_path())
        );
    }

    /// `sudo jetson-detectd build-engine` after the service has run: the directory belongs to the
    /// service's dynamic user, which must be able to lock and replace what root leaves there.
    #[test]
    fn files_root_writes_into_the_services_cache_directory_belong_to_the_service() {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: only root can give a file away");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).expect("chown");
        let cache = cache(dir.path());
        let lock = cache
            .lock_builds("root's build-engine", Duration::MAX, |_, _| panic!("nobody holds the lock"))
            .expect("lock");
        let engine = cache.store(&identity(), &engine_bytes()).expect("store");
        drop(lock);
        for path in [dir.path().join(BUILD_LOCK_FILE), engine.clone(), sidecar_path(&engine)] {
            let meta = fs::metadata(&path).expect("stat");
            assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{}", path.display());
        }
    }

    #[test]
    fn a_hung_lock_holder_makes_the_wait_fail_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        let _hung = cache.lock_builds("pid 4 (jetson-detectd run), building ssd.abc.engine", Duration::MAX, |_, _| {
            panic!("nobody holds the lock yet")
        });
        let mut waits = 0;
        let error =
            cache.lock_builds("pid 5", BUILD_LOCK_POLL * 2, |_, _| waits += 1).expect_err("the holder never lets go");
        let message = error.to_string();
        assert!(message.contains("pid 4 (jetson-detectd run)"), "{message}");
        assert!(message.contains("engine.build_timeout_s"), "{message}");
        assert!((1..=3).contains(&waits), "{waits} waits");
    }

    #[test]
    fn prebuilt_engines_are_validated_when_they_have_a_sidecar() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("custom.engine");
        write_engine_with_sidecar(&path, &identity(), &engine_bytes()).expect("write");
        assert_eq!(load_prebuilt_engine(&path).expect("valid"), engine_bytes());
        fs::write(&path, &engine_bytes()[..10]).expect("truncate");
        assert!(matches!(
            load_prebuilt_engine(&path),
            Err(CacheError::InvalidEngine { reason: MissReason::Truncated { .. }, .. })
        ));

        let bare = dir.path().join("bare.engine");
        fs::write(&bare, b"").expect("write");
        assert!(matches!(
            load_prebuilt_engine(&bare),
            Err(CacheError::InvalidEngine { reason: MissReason::Empty, .. })
        ));
        fs::write(&bare, engine_bytes()).expect("write");
        assert_eq!(load_prebuilt_engine(&bare).expect("accepted as is"), engine_bytes());
        assert!(matches!(load_prebuilt_engine(&dir.path().join("none.engine")), Err(CacheError::Io { .. })));
    }
}
