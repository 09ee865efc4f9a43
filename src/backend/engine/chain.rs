//! Engine acquisition: the ordered chain of places an engine can come from, and the build at its
//! end.
//!
//! Owns: [`EngineChain`], which turns a model into a loaded, checked engine in this order:
//! 1. the local cache (`super::cache`): an engine there that the runtime loads is used as it is
//!    (it was checked before it was cached) — [`EngineChain::look_local`], cheap enough for start-up;
//! 2. each further [`EngineSource`] in turn (a fleet's engine store): [`Lookup::Found`] bytes are
//!    staged in the cache, loaded, checked ([`Vet`]) and only then committed to the cache;
//!    [`Lookup::NotHere`] passes on to the next; [`Lookup::Busy`] (another device builds this
//!    key) makes the chain wait and look again from the top instead of building;
//! 3. a build by the [`Toolchain`], under every claim: the cache directory's build lock (other
//!    processes of this device) and each source's [`EngineSource::claim`] (a lease, so that one
//!    device of a fleet builds a key while the others wait). The chain looks again once it holds
//!    them all (a build that ended meanwhile saved its engine), builds from the best timing cache
//!    it has, saves the new timing cache, stages, loads and checks the engine, commits it, and
//!    offers it to every source ([`EngineSource::keep`]: a store pushes it).
//!
//! A source that is offline or slow answers [`Lookup::NotHere`] with the reason (logged), and a
//! claim it cannot make is not a failure: the device then builds as it would without the source.
//! Every wait ends after `engine.build_timeout_s` ([`EngineError::WaitedTooLong`]) and as soon as
//! the caller's `cancel` flag is set ([`EngineError::Cancelled`]); a cancelled build leaves no file
//! behind that a lookup would trust (staging, atomic writes).
//!
//! Must not: call TensorRT or CUDA (the [`Toolchain`] does), decide how an engine is checked (the
//! caller's [`Vet`] does, from above `decode`), or serve frames.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cache::{load_prebuilt_engine, EngineCache, EngineIdentity, EngineLookup, LockAttempt, MissReason};
use super::error::EngineError;
use super::plan::EnginePlan;
use super::progress::Progress;
use super::seam::{BuildInput, BuildOutput, BuildTarget, EngineFile, EngineOrigin, Toolchain};
use crate::backend::traits::Backend;
use crate::model::ModelSpec;

/// How often a waiting chain looks again while another process or device builds its engine.
pub const LOOK_AGAIN: Duration = Duration::from_millis(500);

/// What a source says about the engine a plan asks for.
#[derive(Debug)]
pub enum Lookup {
    /// Its bytes, for one of the plan's two identities.
    Found(Box<FoundEngine>),
    /// Not there, and why (logged at debug level: a miss is normal).
    NotHere(String),
    /// Someone else is building it (`holder` says who, for the log and the status): wait and look
    /// again, no sooner than `look_again`.
    Busy { holder: String, look_again: Duration },
}

/// An engine a source has.
#[derive(Debug)]
pub struct FoundEngine {
    pub bytes: Vec<u8>,
    /// Which of the plan's identities it is ([`EnginePlan::identity`] or its static one).
    pub identity: EngineIdentity,
}

/// What [`EngineSource::claim`] got.
pub enum Claim {
    /// The right to build the key, held until the value is dropped (a lease's guard).
    Held(Box<dyn Send>),
    /// Someone else holds it.
    Busy { holder: String, look_again: Duration },
}

/// An engine the chain acquired by a build or from another source, offered back to every source
/// ([`EngineSource::keep`]).
#[derive(Debug, Clone, Copy)]
pub struct KeptEngine<'a> {
    pub identity: &'a EngineIdentity,
    /// Its file in the local cache, with its sidecar next to it.
    pub path: &'a Path,
    pub bytes: &'a [u8],
    /// The timing cache the build left, when it built.
    pub timing_cache: Option<&'a [u8]>,
    pub target: &'a BuildTarget,
}

/// A place engines come from beyond the local cache (a fleet's store). Shared with the thread
/// that acquires; every method may block on the network, bounded by the source itself, and ends
/// soon after `cancel` (the chain's caller's: shutdown) is set, without finishing its work.
pub trait EngineSource: Send + Sync {
    /// Where it is, for logs (`oci://registry/repo`); never with credentials.
    fn name(&self) -> String;

    /// Looks for `plan`'s engine (either identity). Called about every [`LOOK_AGAIN`] while
    /// another process or device builds: a remote source answers from its last look until its own
    /// interval has passed.
    fn look(&self, plan: &EnginePlan, target: &BuildTarget, cancel: &AtomicBool) -> Lookup;

    /// The right to build `plan`'s engine while others wait (`holder` describes this process).
    /// A source that cannot say (offline) lets the build go ahead: [`Claim::Held`].
    fn claim(&self, _plan: &EnginePlan, _target: &BuildTarget, _holder: &str, _cancel: &AtomicBool) -> Claim {
        Claim::Held(Box::new(()))
    }

    /// A timing cache to start a build from when the local cache has none for this target.
    fn timing_cache(&self, _target: &BuildTarget, _cancel: &AtomicBool) -> Option<Vec<u8>> {
        None
    }

    /// An engine acquired elsewhere and checked: keep it (a store pushes it). Failures are the
    /// source's to log; the engine serves either way.
    fn keep(&self, _engine: KeptEngine<'_>, _cancel: &AtomicBool) {}
}

/// Checks a loaded engine before it is cached and served: `Err` refuses it, with the reason. The
/// daemon's compares it with the CPU reference (`crate::infer::agreement`).
pub type Vet<'a> = dyn FnMut(&Arc<dyn Backend>) -> Result<(), String> + 'a;

/// The [`Vet`] of a command that does not check engines (`build-engine`, the one-shot commands):
/// every engine passes.
pub fn unchecked(_engine: &Arc<dyn Backend>) -> Result<(), String> {
    Ok(())
}

/// A loaded engine and where it came from.
pub struct Acquired {
    pub backend: Arc<dyn Backend>,
    pub origin: EngineOrigin,
}

/// Which timing cache a build starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimingCacheUse {
    /// The one saved in the cache directory for this target, else a source's.
    Saved,
    /// None: a cold build (`selftest` times one).
    Empty,
}

/// A build that was saved (`selftest`'s build times).
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    pub engine_path: PathBuf,
    pub key: String,
    /// Absent when the builder returned none or it could not be saved (a warning).
    pub timing_cache_path: Option<PathBuf>,
    pub seconds: f64,
}

/// The chain for one model on one toolchain (see the module doc).
pub struct EngineChain {
    toolchain: Arc<dyn Toolchain>,
    model: ModelSpec,
    plan: EnginePlan,
    cache: EngineCache,
    sources: Vec<Arc<dyn EngineSource>>,
}

/// Everything the chain holds while it builds: dropped, the others may build.
struct Claims {
    _local: super::cache::BuildLock,
    _sources: Vec<Box<dyn Send>>,
}

impl EngineChain {
    /// The chain of `model`'s engine: its plan (the ONNX file read and hashed once), checked by the
    /// toolchain, the cache directory `cache_dir` (created; temp files of interrupted writes
    /// swept), then `sources` in order.
    pub fn new(
        toolchain: Arc<dyn Toolchain>,
        model: &ModelSpec,
        cache_dir: &Path,
        sources: Vec<Arc<dyn EngineSource>>,
    ) -> Result<EngineChain, EngineError> {
        let plan = EnginePlan::new(model, toolchain.target())?;
        toolchain.check(model, &plan.model)?;
        let cache = EngineCache::open(cache_dir, &plan.model.path)?;
        Ok(EngineChain { toolchain, model: model.clone(), plan, cache, sources })
    }

    pub fn plan(&self) -> &EnginePlan {
        &self.plan
    }

    /// The model's files in the cache directory.
    pub fn cache(&self) -> &EngineCache {
        &self.cache
    }

    pub fn toolchain(&self) -> &Arc<dyn Toolchain> {
        &self.toolchain
    }

    /// The path the engine has (or will have) in the cache: the static-input one when that exists.
    pub fn engine_path(&self) -> PathBuf {
        let static_path = self.cache.engine_path(&self.plan.static_identity.key());
        if static_path.exists() {
            static_path
        } else {
            self.cache.engine_path(&self.plan.identity.key())
        }
    }

    /// The key of the cached engine at `path` (one of the plan's two).
    pub fn cached_key(&self, path: &Path) -> String {
        if path == self.cache.engine_path(&self.plan.static_identity.key()) {
            self.plan.static_identity.key()
        } else {
            self.plan.identity.key()
        }
    }

    /// The cached engine loaded by the runtime (the dynamic-input key first, then the static one);
    /// else why not. Cheap: no build, no network.
    pub fn look_local(&mut self) -> Result<Acquired, MissReason> {
        let found = match self.cache.lookup(&self.plan.identity) {
            EngineLookup::Hit { path, bytes } => Ok((path, bytes)),
            EngineLookup::Miss(dynamic_reason) => match self.cache.lookup(&self.plan.static_identity) {
                EngineLookup::Hit { path, bytes } => Ok((path, bytes)),
                // No static engine either: the dynamic key's reason lists what changed.
                EngineLookup::Miss(MissReason::Missing { .. }) => Err(dynamic_reason),
                EngineLookup::Miss(static_reason) => Err(static_reason),
            },
        };
        let (path, bytes) = found?;
        let origin = EngineOrigin::Cached(path.clone());
        match self.toolchain.load(&self.model, EngineFile { path: &path, bytes: &bytes }, &origin) {
            Ok(backend) => {
                // The model is not parsed on a hit: its memory goes back.
                self.plan.model.release_bytes();
                Ok(Acquired { backend, origin })
            }
            Err(error) => Err(MissReason::Deserialize(error.to_string())),
        }
    }

    /// The engine, from the first place of the chain that has one that loads and passes `vet`,
    /// else built (see the module doc). `progress` sees the waits and the build; `cancel` ends it.
    pub fn acquire(
        &mut self,
        vet: &mut Vet<'_>,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<Acquired, EngineError> {
        let started = Instant::now();
        loop {
            if cancel.load(Ordering::SeqCst) {
                return Err(EngineError::Cancelled);
            }
            let local_miss = match self.look_local() {
                Ok(acquired) => return Ok(acquired),
                Err(reason) => reason,
            };
            let busy = match self.look_in_sources(vet, cancel)? {
                Ok(acquired) => return Ok(acquired),
                Err(busy) => busy,
            };
            // A source's call that was cut short by the flag is no answer to act on.
            if cancel.load(Ordering::SeqCst) {
                return Err(EngineError::Cancelled);
            }
            let busy = match busy {
                Some(busy) => Some(busy),
                None => match self.claim_all(cancel)? {
                    Ok(claims) => return self.build_claimed(claims, local_miss, vet, progress, cancel),
                    Err(busy) => Some(busy),
                },
            };
            if let Some((holder, look_again)) = busy {
                let elapsed = started.elapsed();
                if elapsed >= self.plan.build_timeout {
                    return Err(EngineError::WaitedTooLong { holder, waited: elapsed });
                }
                progress(Progress::Waiting { holder, elapsed });
                wait(look_again, cancel);
            }
        }
    }

    /// Looks in every source in order: the first engine that loads and passes `vet`; else who is
    /// building it (`Err(Some)`), if anyone.
    fn look_in_sources(
        &mut self,
        vet: &mut Vet<'_>,
        cancel: &AtomicBool,
    ) -> Result<Result<Acquired, Option<(String, Duration)>>, EngineError> {
        let target = self.toolchain.target().clone();
        let mut busy = None;
        for source in self.sources.clone() {
            match source.look(&self.plan, &target, cancel) {
                Lookup::Found(found) => match self.adopt(*found, &source.name(), vet) {
                    Ok(acquired) => return Ok(Ok(acquired)),
                    Err(EngineError::Load(why) | EngineError::Refused(why)) => {
                        log::warn!("the engine from {} is not used: {why}", source.name());
                    }
                    Err(other) => return Err(other),
                },
                Lookup::NotHere(why) => log::debug!("no engine in {}: {why}", source.name()),
                Lookup::Busy { holder, look_again } => {
                    busy.get_or_insert((holder, look_again));
                }
            }
        }
        Ok(Err(busy))
    }

    /// Stages `found` in the cache, loads and vets it, then commits it.
    fn adopt(&mut self, found: FoundEngine, from: &str, vet: &mut Vet<'_>) -> Result<Acquired, EngineError> {
        let known = [&self.plan.identity, &self.plan.static_identity];
        if !known.contains(&&found.identity) {
            let changed = found.identity.differences(&self.plan.identity);
            return Err(EngineError::Load(format!("it was built for something else: {}", changed.join(", "))));
        }
        let staged = self.cache.stage(&found.identity, &found.bytes)?;
        let path = self.cache.engine_path(&found.identity.key());
        let origin = EngineOrigin::Fetched { from: from.to_owned(), path };
        let file = EngineFile { path: staged.path(), bytes: &found.bytes };
        let backend = self.toolchain.load(&self.model, file, &origin)?;
        vet(&backend).map_err(EngineError::Refused)?;
        staged.commit()?;
        self.plan.model.release_bytes();
        Ok(Acquired { backend, origin })
    }

    /// How this process describes itself to another that waits for its build.
    fn holder(&self) -> String {
        let command: Vec<String> = std::env::args().take(2).collect();
        format!(
            "pid {} ({}), building {}",
            std::process::id(),
            command.join(" "),
            self.cache.engine_path(&self.plan.identity.key()).display()
        )
    }

    /// The cache directory's build lock, then every source's claim; or who holds one of them.
    fn claim_all(&self, cancel: &AtomicBool) -> Result<Result<Claims, (String, Duration)>, EngineError> {
        let holder = self.holder();
        let local = match self.cache.try_lock_builds(&holder)? {
            LockAttempt::Held(lock) => lock,
            LockAttempt::Busy(other) => return Ok(Err((other, LOOK_AGAIN))),
        };
        let target = self.toolchain.target();
        let mut sources = Vec::with_capacity(self.sources.len());
        for source in &self.sources {
            match source.claim(&self.plan, target, &holder, cancel) {
                Claim::Held(guard) => sources.push(guard),
                Claim::Busy { holder, look_again } => return Ok(Err((holder, look_again))),
            }
        }
        Ok(Ok(Claims { _local: local, _sources: sources }))
    }

    /// Under `claims`: looks once more (a build that ended meanwhile saved its engine), else builds,
    /// vets, commits and offers the engine to every source.
    fn build_claimed(
        &mut self,
        claims: Claims,
        local_miss: MissReason,
        vet: &mut Vet<'_>,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<Acquired, EngineError> {
        if let Ok(acquired) = self.look_local() {
            progress(Progress::Stage("another process built the engine meanwhile; using it".into()));
            return Ok(acquired);
        }
        if let Ok(acquired) = self.look_in_sources(vet, cancel)? {
            return Ok(acquired);
        }
        if cancel.load(Ordering::SeqCst) {
            return Err(EngineError::Cancelled);
        }
        log::warn!("building the engine {}: {local_miss} (this can take minutes)", self.engine_path().display());
        let started = Instant::now();
        let output = self.build(TimingCacheUse::Saved, progress, cancel)?;
        let timing_cache_path = self.save_timing_cache(&output);
        let identity = self.plan.identity_for(output.profiles).clone();
        let staged = self.cache.stage(&identity, &output.engine)?;
        let path = self.cache.engine_path(&identity.key());
        let origin = EngineOrigin::Built {
            path: path.clone(),
            reason: local_miss.to_string(),
            seconds: started.elapsed().as_secs_f64(),
        };
        let file = EngineFile { path: staged.path(), bytes: &output.engine };
        let backend = self.toolchain.load(&self.model, file, &origin)?;
        progress(Progress::Stage("checking the engine against its model".into()));
        vet(&backend).map_err(EngineError::Refused)?;
        progress(Progress::Stage("saving the engine".into()));
        staged.commit()?;
        let kept = KeptEngine {
            identity: &identity,
            path: &path,
            bytes: &output.engine,
            timing_cache: output.timing_cache.as_deref().filter(|_| timing_cache_path.is_some()),
            target: self.toolchain.target(),
        };
        for source in &self.sources {
            source.keep(kept, cancel);
        }
        drop(claims);
        self.plan.model.release_bytes();
        Ok(Acquired { backend, origin })
    }

    /// One build, from the timing cache `timing` says; the caller holds the claims.
    fn build(
        &self,
        timing: TimingCacheUse,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<BuildOutput, EngineError> {
        let target = self.toolchain.target();
        let timing_cache = match timing {
            TimingCacheUse::Empty => Vec::new(),
            TimingCacheUse::Saved => match self.cache.load_timing_cache(&target.version, &target.device) {
                Ok(bytes) => {
                    progress(Progress::Stage(format!(
                        "using timing cache {}",
                        self.cache.timing_cache_path().display()
                    )));
                    bytes
                }
                Err(reason) => {
                    if !matches!(reason, MissReason::Missing { .. }) {
                        log::warn!("timing cache {} not used: {reason}", self.cache.timing_cache_path().display());
                    }
                    self.sources.iter().find_map(|source| source.timing_cache(target, cancel)).unwrap_or_default()
                }
            },
        };
        let input = BuildInput {
            model: &self.model,
            onnx: &self.plan.model,
            options: &self.plan.options,
            timing_cache: &timing_cache,
        };
        let output = self.toolchain.build(&input, progress, cancel)?;
        if let Some(why) = &output.timing_cache_rejected {
            log::warn!(
                "the builder refused the timing cache {} ({why}); it built with an empty one, which replaces it",
                self.cache.timing_cache_path().display()
            );
        }
        Ok(output)
    }

    /// Saves the build's timing cache (a warning when it cannot: the engine is what counts).
    fn save_timing_cache(&self, output: &BuildOutput) -> Option<PathBuf> {
        let target = self.toolchain.target();
        let timing = output.timing_cache.as_deref()?;
        self.cache.store_timing_cache_after_engine(&target.version, &target.device, timing)
    }

    /// Builds under the cache directory's build lock (waiting for another process's build, as
    /// [`Progress::Waiting`]) and saves the engine without a check: `selftest`'s timed builds. The
    /// engine is saved whether or not one was cached already.
    pub fn build_and_save(
        &mut self,
        timing: TimingCacheUse,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<Saved, EngineError> {
        let _lock = self.lock_waiting(progress)?;
        self.save_build(timing, progress, cancel)
    }

    /// The cache directory's build lock, waiting for another process that holds it.
    fn lock_waiting(&self, progress: &mut dyn FnMut(Progress)) -> Result<super::cache::BuildLock, EngineError> {
        Ok(self.cache.lock_builds(&self.holder(), self.plan.build_timeout, |holder, elapsed| {
            progress(Progress::Waiting { holder: holder.to_owned(), elapsed });
        })?)
    }

    /// One build, saved with its timing cache (the caller holds the build lock).
    fn save_build(
        &self,
        timing: TimingCacheUse,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<Saved, EngineError> {
        let started = Instant::now();
        let output = self.build(timing, progress, cancel)?;
        progress(Progress::Stage("saving engine and timing cache".into()));
        let identity = self.plan.identity_for(output.profiles);
        let engine_path = self.cache.stage(identity, &output.engine)?.commit()?;
        let timing_cache_path = self.save_timing_cache(&output);
        Ok(Saved { engine_path, key: identity.key(), timing_cache_path, seconds: started.elapsed().as_secs_f64() })
    }

    /// The cache directory's timing cache, when one is saved.
    pub fn timing_cache_path(&self) -> Option<PathBuf> {
        Some(self.cache.timing_cache_path()).filter(|path| path.exists())
    }
}

/// `model.engine`, loaded as it is by `toolchain` (validated against its sidecar when it has one).
pub fn load_prebuilt(toolchain: &dyn Toolchain, model: &ModelSpec, path: &Path) -> Result<Acquired, EngineError> {
    let bytes = load_prebuilt_engine(path)?;
    let origin = EngineOrigin::Prebuilt(path.to_path_buf());
    let backend = toolchain
        .load(model, EngineFile { path, bytes: &bytes }, &origin)
        .map_err(|e| EngineError::Load(format!("{}: {}", path.display(), MissReason::Deserialize(e.to_string()))))?;
    Ok(Acquired { backend, origin })
}

/// Sleeps `duration`, waking early when `cancel` is set.
fn wait(duration: Duration, cancel: &AtomicBool) {
    const STEP: Duration = Duration::from_millis(50);
    let until = Instant::now() + duration;
    while !cancel.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        std::thread::sleep(STEP.min(until - now));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    use super::*;
    use crate::backend::engine::device_key::DeviceIdentity;
    use crate::backend::engine::onnx_external_data::encode;
    use crate::backend::engine::plan::test_support::{config, spec};
    use crate::backend::error::BackendError;
    use crate::backend::traits::{BackendInfo, InferenceSession};
    use crate::model::ModelFiles;
    use crate::preprocess::PreprocessSpec;

    /// Engines of a fake library: bytes `engine <n>` for the n-th build; `load` refuses the bytes
    /// it was told to.
    struct FakeToolchain {
        target: BuildTarget,
        builds: AtomicUsize,
        unloadable: Mutex<Vec<Vec<u8>>>,
    }

    impl FakeToolchain {
        fn new() -> Arc<FakeToolchain> {
            let device = DeviceIdentity {
                name: "fake GPU".into(),
                compute_capability: (8, 7),
                multiprocessors: 8,
                total_memory_bytes: 8 << 30,
                board: "fake board".into(),
            };
            let target = BuildTarget {
                kind: "fake",
                version: "1.0.0".into(),
                builder: "fake builder".into(),
                device,
                phases_reported: true,
            };
            Arc::new(FakeToolchain { target, builds: AtomicUsize::new(0), unloadable: Mutex::new(Vec::new()) })
        }

        fn builds(&self) -> usize {
            self.builds.load(Ordering::SeqCst)
        }
    }

    struct FakeBackend {
        spec: PreprocessSpec,
        bytes: Vec<u8>,
    }

    impl Backend for FakeBackend {
        fn info(&self) -> BackendInfo {
            BackendInfo { kind: "fake", model: String::new(), detail: String::from_utf8_lossy(&self.bytes).into() }
        }
        fn spec(&self) -> &PreprocessSpec {
            &self.spec
        }
        fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
            Err(BackendError::Inference("a fake engine runs nothing".into()))
        }
    }

    impl Toolchain for FakeToolchain {
        fn target(&self) -> &BuildTarget {
            &self.target
        }

        fn build(
            &self,
            input: &BuildInput<'_>,
            progress: &mut dyn FnMut(Progress),
            cancel: &AtomicBool,
        ) -> Result<BuildOutput, EngineError> {
            if cancel.load(Ordering::SeqCst) {
                return Err(EngineError::Cancelled);
            }
            progress(Progress::Tick { elapsed: Duration::from_secs(1) });
            let n = self.builds.fetch_add(1, Ordering::SeqCst) + 1;
            let mut timing = input.timing_cache.to_vec();
            timing.push(b't');
            Ok(BuildOutput {
                engine: format!("engine {n}").into_bytes(),
                timing_cache: Some(timing),
                timing_cache_rejected: None,
                profiles: 0,
            })
        }

        fn load(
            &self,
            model: &ModelSpec,
            engine: EngineFile<'_>,
            _origin: &EngineOrigin,
        ) -> Result<Arc<dyn Backend>, EngineError> {
            assert_eq!(std::fs::read(engine.path).expect("the engine's file"), engine.bytes, "file and bytes agree");
            if self.unloadable.lock().expect("lock").iter().any(|bytes| bytes == engine.bytes) {
                return Err(EngineError::Load("the fake library refuses these bytes".into()));
            }
            Ok(Arc::new(FakeBackend { spec: model.input.clone(), bytes: engine.bytes.to_vec() }))
        }
    }

    /// A model whose ONNX file is a tiny valid protobuf in `dir`, cached in `dir/cache`.
    fn model(dir: &Path) -> ModelSpec {
        let onnx = dir.join("tiny.onnx");
        std::fs::write(&onnx, encode::model(&[("w", None)])).expect("write the model");
        let mut spec = spec(&config(""));
        spec.files = ModelFiles::Onnx(onnx);
        spec
    }

    fn chain(
        toolchain: &Arc<FakeToolchain>,
        model: &ModelSpec,
        dir: &Path,
        sources: Vec<Arc<dyn EngineSource>>,
    ) -> EngineChain {
        EngineChain::new(toolchain.clone(), model, &dir.join("cache"), sources).expect("a chain")
    }

    fn engine_of(acquired: &Acquired) -> String {
        acquired.backend.info().detail
    }

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_missing_engine_is_built_checked_saved_and_then_found_in_the_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (toolchain, model) = (FakeToolchain::new(), model(dir.path()));
        let mut first = chain(&toolchain, &model, dir.path(), Vec::new());
        assert!(matches!(first.look_local(), Err(MissReason::Missing { .. })));
        let mut vetted = Vec::new();
        let mut vet = |backend: &Arc<dyn Backend>| {
            vetted.push(backend.info().detail);
            Ok(())
        };
        let acquired = first.acquire(&mut vet, &mut |_| {}, &AtomicBool::new(false)).expect("built");
        assert!(matches!(acquired.origin, EngineOrigin::Built { .. }), "{}", acquired.origin);
        assert_eq!(vetted, ["engine 1"], "checked once, before it was cached");
        let mut again = chain(&toolchain, &model, dir.path(), Vec::new());
        let cached = again.look_local().map_err(|e| e.to_string()).expect("a cache hit");
        assert!(matches!(cached.origin, EngineOrigin::Cached(_)));
        assert_eq!((engine_of(&cached), toolchain.builds()), ("engine 1".to_owned(), 1));
        assert!(files_in(&dir.path().join("cache")).iter().any(|name| name == "tiny.timing.cache"));
    }

    #[test]
    fn a_refused_engine_is_never_cached_but_its_timing_cache_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (toolchain, model) = (FakeToolchain::new(), model(dir.path()));
        let mut chain = chain(&toolchain, &model, dir.path(), Vec::new());
        let mut refuse = |_: &Arc<dyn Backend>| Err("recall 0.20 < 0.90".to_owned());
        let error = chain.acquire(&mut refuse, &mut |_| {}, &AtomicBool::new(false)).err().expect("refused");
        assert!(matches!(&error, EngineError::Refused(why) if why.contains("recall 0.20")), "{error}");
        let files = files_in(&dir.path().join("cache"));
        assert!(!files.iter().any(|name| name.contains(".engine")), "no engine, staged or not: {files:?}");
        assert!(files.iter().any(|name| name == "tiny.timing.cache"), "{files:?}");
        assert!(matches!(chain.look_local(), Err(MissReason::Missing { .. })));
    }

    #[test]
    fn a_cached_engine_the_library_cannot_load_is_built_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (toolchain, model) = (FakeToolchain::new(), model(dir.path()));
        let never = AtomicBool::new(false);
        chain(&toolchain, &model, dir.path(), Vec::new()).acquire(&mut unchecked, &mut |_| {}, &never).expect("built");
        toolchain.unloadable.lock().expect("lock").push(b"engine 1".to_vec());
        let mut again = chain(&toolchain, &model, dir.path(), Vec::new());
        let miss = again.look_local().err().expect("engine 1 does not load");
        assert!(matches!(miss, MissReason::Deserialize(_)), "{miss}");
        let rebuilt = again.acquire(&mut unchecked, &mut |_| {}, &never).expect("rebuilt");
        assert!(matches!(&rebuilt.origin, EngineOrigin::Built { reason, .. } if reason.contains("deserialise")));
        assert_eq!(engine_of(&rebuilt), "engine 2");
    }

    #[test]
    fn a_build_by_another_process_is_waited_for_and_used_without_building() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (toolchain, model) = (FakeToolchain::new(), model(dir.path()));
        let mut waiting = chain(&toolchain, &model, dir.path(), Vec::new());
        let other = chain(&toolchain, &model, dir.path(), Vec::new());
        let lock = match other.cache.try_lock_builds("pid 7 (jetson-detectd build-engine)").expect("lock") {
            LockAttempt::Held(lock) => lock,
            LockAttempt::Busy(holder) => panic!("held by {holder}"),
        };
        let (waits_tx, waits_rx) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let mut progress = |event: Progress| {
                if let Progress::Waiting { holder, .. } = event {
                    let _ = waits_tx.send(holder);
                }
            };
            waiting.acquire(&mut unchecked, &mut progress, &AtomicBool::new(false)).map(|acquired| acquired.origin)
        });
        assert_eq!(waits_rx.recv().expect("it waits"), "pid 7 (jetson-detectd build-engine)");
        other.cache.stage(&other.plan.static_identity, b"engine from pid 7").expect("stage").commit().expect("commit");
        drop(lock);
        let origin = handle.join().expect("no panic").expect("acquired");
        assert!(matches!(origin, EngineOrigin::Cached(_)), "{origin}");
        assert_eq!(toolchain.builds(), 0);
    }

    /// A source with one engine (or none), that says who builds while `busy` holds a name.
    #[derive(Default)]
    struct FakeSource {
        engine: Mutex<Option<Vec<u8>>>,
        busy: Mutex<Option<String>>,
        looks: AtomicUsize,
        kept: Mutex<Vec<Vec<u8>>>,
    }

    impl EngineSource for FakeSource {
        fn name(&self) -> String {
            "fake://store".into()
        }

        fn look(&self, plan: &EnginePlan, _target: &BuildTarget, _cancel: &AtomicBool) -> Lookup {
            self.looks.fetch_add(1, Ordering::SeqCst);
            if let Some(bytes) = self.engine.lock().expect("lock").clone() {
                return Lookup::Found(Box::new(FoundEngine { bytes, identity: plan.static_identity.clone() }));
            }
            match self.busy.lock().expect("lock").clone() {
                Some(holder) => Lookup::Busy { holder, look_again: Duration::from_millis(10) },
                None => Lookup::NotHere("no such key".into()),
            }
        }

        fn keep(&self, engine: KeptEngine<'_>, _cancel: &AtomicBool) {
            self.kept.lock().expect("lock").push(engine.bytes.to_vec());
        }
    }

    #[test]
    fn an_engine_from_a_source_is_checked_then_cached_and_a_built_one_is_offered_to_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (toolchain, model) = (FakeToolchain::new(), model(dir.path()));
        let never = AtomicBool::new(false);
        let store = Arc::new(FakeSource::default());
        let built = chain(&toolchain, &model, dir.path(), vec![store.clone()])
            .acquire(&mut unchecked, &mut |_| {}, &never)
            .expect("built");
        assert!(matches!(built.origin, EngineOrigin::Built { .. }));
        assert_eq!(*store.kept.lock().expect("lock"), [b"engine 1".to_vec()], "pushed after the build");

        let other = tempfile::tempdir().expect("another device's cache");
        let model = self::model(other.path());
        *store.engine.lock().expect("lock") = Some(b"engine 1".to_vec());
        let mut refuse = |_: &Arc<dyn Backend>| Err("disagrees".to_owned());
        let mut pulling = chain(&toolchain, &model, other.path(), vec![store.clone()]);
        let refused = pulling.acquire(&mut refuse, &mut |_| {}, &never).err().expect("refused even when built");
        assert!(matches!(refused, EngineError::Refused(_)), "{refused}");
        assert!(matches!(pulling.look_local(), Err(MissReason::Missing { .. })), "a refused pull is not cached");
        let pulled = pulling.acquire(&mut unchecked, &mut |_| {}, &never).expect("pulled");
        assert!(matches!(&pulled.origin, EngineOrigin::Fetched { from, .. } if from == "fake://store"));
        assert_eq!((engine_of(&pulled), toolchain.builds()), ("engine 1".to_owned(), 2));
        assert!(pulling.look_local().is_ok(), "cached once it passed");
    }

    #[test]
    fn while_another_device_builds_the_chain_waits_and_never_builds_and_stops_when_cancelled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (toolchain, model) = (FakeToolchain::new(), model(dir.path()));
        let store = Arc::new(FakeSource::default());
        *store.busy.lock().expect("lock") = Some("device orin-2".into());
        let cancel = Arc::new(AtomicBool::new(false));
        let (mut waiting, stop) = (chain(&toolchain, &model, dir.path(), vec![store.clone()]), cancel.clone());
        let (waits_tx, waits_rx) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let mut progress = |event: Progress| {
                if let Progress::Waiting { holder, .. } = event {
                    let _ = waits_tx.send(holder);
                }
            };
            waiting.acquire(&mut unchecked, &mut progress, &stop).map(|acquired| acquired.origin)
        });
        for _ in 0..3 {
            assert_eq!(waits_rx.recv().expect("waits"), "device orin-2");
        }
        cancel.store(true, Ordering::SeqCst);
        let stopped = handle.join().expect("no panic").expect_err("cancelled");
        assert!(matches!(stopped, EngineError::Cancelled), "{stopped}");
        assert_eq!(toolchain.builds(), 0);
        assert!(store.looks.load(Ordering::SeqCst) >= 3, "it looked again while it waited");
    }

    #[test]
    fn a_wait_longer_than_the_build_timeout_names_who_was_building() {
        let dir = tempfile::tempdir().expect("tempdir");
        let toolchain = FakeToolchain::new();
        let mut model = model(dir.path());
        model.engine.build_timeout = Duration::from_millis(30);
        let store = Arc::new(FakeSource::default());
        *store.busy.lock().expect("lock") = Some("device orin-2".into());
        let mut chain = chain(&toolchain, &model, dir.path(), vec![store]);
        let error = chain.acquire(&mut unchecked, &mut |_| {}, &AtomicBool::new(false)).err().expect("gives up");
        assert!(matches!(&error, EngineError::WaitedTooLong { holder, .. } if holder == "device orin-2"), "{error}");
    }
}
