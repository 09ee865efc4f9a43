//! The builder seam: what the engine lifecycle needs from the library that builds and runs engines.
//!
//! Owns: the [`Toolchain`] trait (builder: a model, its options and a timing cache → engine bytes
//! and a new timing cache, with progress; runtime: engine bytes → a [`Backend`]) and the values
//! that cross it. TensorRT's implementation is `crate::backend::trt::TrtToolchain`; the stand-in
//! that tests use is [`super::stand_in`]. Must not: look in caches or stores, lock, or decide
//! whether to build (`super::chain` does), nor call TensorRT itself.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::cache::{BuildOptions, ModelInput};
use super::device_key::DeviceIdentity;
use super::error::EngineError;
use super::progress::Progress;
use crate::backend::error::BackendError;
use crate::backend::traits::Backend;
use crate::frame::{HeapMemory, SlotMemory};
use crate::model::ModelSpec;
use crate::motion::LumaSampler;

/// Who builds and runs engines on this machine: what an engine's key says about them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildTarget {
    /// What the backends it loads report as their kind: `tensorrt`, or `stand-in` for tests.
    pub kind: &'static str,
    /// The runtime library's version, as the key records it (`EngineIdentity::tensorrt_version`).
    pub version: String,
    /// What builds: [`BuildOptions::builder`], a fingerprint that changes whenever the engine a
    /// build makes could.
    pub builder: String,
    pub device: DeviceIdentity,
    /// Whether builds report phases and steps (TensorRT 10 and newer): a clock tick then shows no
    /// progress of its own (`super::progress::extends_start`).
    pub phases_reported: bool,
}

/// What one build takes.
#[derive(Debug)]
pub struct BuildInput<'a> {
    pub model: &'a ModelSpec,
    /// The ONNX file as read once: the bytes the key hashes are the bytes built.
    pub onnx: &'a ModelInput,
    pub options: &'a BuildOptions,
    /// The timing cache to start from (empty: none).
    pub timing_cache: &'a [u8],
}

/// What one build made.
#[derive(Debug)]
pub struct BuildOutput {
    pub engine: Vec<u8>,
    /// The updated timing cache, when the builder returned one.
    pub timing_cache: Option<Vec<u8>>,
    /// Why the builder refused the timing cache it was given, when it did (it then started from an
    /// empty one, which `timing_cache` replaces).
    pub timing_cache_rejected: Option<String>,
    /// Optimisation profiles the build added: the requested count for a dynamic input, else 0
    /// (the engine is then filed under its static-input key).
    pub profiles: u32,
}

/// An engine's bytes and the file that holds them, for the runtime to load.
#[derive(Debug, Clone, Copy)]
pub struct EngineFile<'a> {
    pub path: &'a Path,
    pub bytes: &'a [u8],
}

/// Where an engine came from (logs, telemetry).
#[derive(Debug, Clone, PartialEq)]
pub enum EngineOrigin {
    /// `model.engine`, loaded as it is.
    Prebuilt(PathBuf),
    Cached(PathBuf),
    /// From a source of the chain (`from` names it), now in the local cache at `path`.
    Fetched {
        from: String,
        path: PathBuf,
    },
    Built {
        path: PathBuf,
        reason: String,
        seconds: f64,
    },
}

impl EngineOrigin {
    /// The engine's file.
    pub fn path(&self) -> &Path {
        match self {
            EngineOrigin::Prebuilt(path)
            | EngineOrigin::Cached(path)
            | EngineOrigin::Fetched { path, .. }
            | EngineOrigin::Built { path, .. } => path,
        }
    }
}

impl std::fmt::Display for EngineOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineOrigin::Prebuilt(path) => write!(f, "prebuilt engine {}", path.display()),
            EngineOrigin::Cached(path) => write!(f, "cached engine {} (cache hit)", path.display()),
            EngineOrigin::Fetched { from, path } => write!(f, "engine from {from}, cached as {}", path.display()),
            EngineOrigin::Built { path, reason, .. } => write!(f, "engine built into {} ({reason})", path.display()),
        }
    }
}

/// Builds engines and loads them as backends. Shared between the thread that builds and the
/// threads that load; one build at a time (the chain holds the build lock around it).
pub trait Toolchain: Send + Sync {
    /// Who builds and runs: the key's library, builder and device fields.
    fn target(&self) -> &BuildTarget;

    /// Refuses, before any lookup or build, what this builder cannot build for `model`, and warns
    /// about what it will ignore.
    fn check(&self, _model: &ModelSpec, _onnx: &ModelInput) -> Result<(), EngineError> {
        Ok(())
    }

    /// Builds `input`'s engine; blocks until it is built. `progress` is called on this thread (at
    /// least about once a second, with [`Progress::Tick`]); once `cancel` is set the build ends
    /// as soon as the builder allows, with [`EngineError::Cancelled`].
    fn build(
        &self,
        input: &BuildInput<'_>,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<BuildOutput, EngineError>;

    /// Loads `engine` as `model`'s backend; `origin` says where it came from and the file it is
    /// cached as (logs, telemetry). An error means these bytes cannot serve here: the chain then
    /// builds a new engine.
    fn load(
        &self,
        model: &ModelSpec,
        engine: EngineFile<'_>,
        origin: &EngineOrigin,
    ) -> Result<Arc<dyn Backend>, EngineError>;

    /// Memory for one frame slot of a camera whose frames this toolchain's engines will run,
    /// before any engine is loaded (page-locked on a GPU); heap memory by default.
    fn slot_memory(&self) -> Result<Box<dyn SlotMemory>, BackendError> {
        Ok(Box::new(HeapMemory::default()))
    }

    /// The luma sampler for frames in [`Toolchain::slot_memory`]'s slots
    /// ([`Backend::luma_sampler`]); `None` (the CPU downscales) by default.
    fn luma_sampler(&self) -> Result<Option<Box<dyn LumaSampler>>, BackendError> {
        Ok(None)
    }
}
