//! The fleet's engine store as a place the engine chain looks in before it builds.
//!
//! Owns: [`StoreSource`], the [`EngineSource`] of a configured `[engine.store]`: opening it from
//! the section (the store, its trust, the signing key and the store's password read here), what
//! the store's objects are named (`engines/<key>.pack`: one signed engine; `timing/<id>.pack`: the
//! timing cache of one TensorRT version on one GPU and board, shared by every model built there),
//! and what it tells the chain: an engine whose pack verifies against the fleet's key and whose
//! sidecar is the plan's identity ([`Lookup::Found`]), someone building it (the key's lease in
//! the store: [`Lookup::Busy`]), or why not, logged when the store failed or the pack was refused
//! ([`Lookup::NotHere`]). With `push = true` it takes the key's lease before a build (so that the
//! others wait for it; a device that does not push takes none) and pushes what was built, signed.
//! A store that is down or slow is never an error: the chain then builds as without a store.
//! Every store call ends soon after the chain's cancel flag is set (an upload or download is
//! abandoned; what the store shows stays whole), and a call cut short that way is not logged as
//! the store's failure. Must not: build, load or cache engines (the chain does), or decide what a pack's bytes are
//! (`super::pack`) and how they travel (`super::store`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::pack::format::PACK_SCHEMA;
use super::pack::{
    read_pack, KeyError, PackError, PackManifest, PackedEngine, PackedTimingCache, PrivateKey, Selection, Trust,
};
use super::store::{Claimed, EngineStore, Leases, StoreError, StoreSettings, Write};
use crate::backend::engine::cache::{sha256_hex, EngineIdentity, EngineSidecar, TimingCacheSidecar};
use crate::backend::engine::chain::{Claim, EngineSource, FoundEngine, KeptEngine, Lookup};
use crate::backend::engine::plan::EnginePlan;
use crate::backend::engine::seam::BuildTarget;
use crate::config::engine_store::EngineStoreConfig;
use crate::sys::lock::lock;

/// How long a look's miss stands before the store is asked again, and how often a device waiting
/// for another's build looks: the chain asks about twice a second while a process of this device
/// builds, which is too often for a remote store.
pub const REMOTE_LOOK_AGAIN: Duration = Duration::from_secs(2);

/// Largest password file read.
const MAX_PASSWORD_BYTES: u64 = 4 << 10;

/// Why a configured store cannot be opened: the config or a file it names is at fault.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("engine.store.password_file {path}: {message}")]
    Password { path: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a pack from the store is not used.
#[derive(Debug, thiserror::Error)]
enum Unusable {
    #[error(transparent)]
    Pack(#[from] PackError),
    #[error("{0}")]
    Contents(String),
}

/// A configured engine store, as the engine chain sees it (see the module doc).
pub struct StoreSource {
    store: EngineStore,
    leases: Leases,
    trust: Trust,
    /// Set with `push = true`.
    signing_key: Option<PrivateKey>,
    /// The last miss and when it was seen (a store error is logged once, not at every look).
    last_miss: Mutex<Option<(Instant, String)>>,
}

impl StoreSource {
    /// The source `config` describes; `None` without `url`.
    pub fn open(config: &EngineStoreConfig) -> Result<Option<StoreSource>, SourceError> {
        let Some(location) = config.url.clone() else { return Ok(None) };
        let trust = Trust::new(config.public_key.as_deref(), config.verify)?;
        let signing_key = match (&config.signing_key, config.push) {
            (Some(path), true) => Some(PrivateKey::read(path)?),
            _ => None,
        };
        let credentials = match (&config.username, &config.password_file) {
            (Some(user), Some(path)) => Some((user.clone(), read_password(path)?)),
            (Some(user), None) => Some((user.clone(), String::new())),
            _ => None,
        };
        let settings = StoreSettings {
            location,
            credentials,
            endpoint: config.endpoint.clone(),
            timeout: Duration::from_secs(config.timeout_s.into()),
            max_bytes: u64::from(config.max_pack_mib) << 20,
        };
        // Every call is bounded by `timeout_s`, and ends when the chain's cancel flag is set.
        let store = EngineStore::open(&settings)?;
        let leases = Leases::new(store.clone(), Duration::from_secs(config.lease_s.into()));
        Ok(Some(StoreSource { store, leases, trust, signing_key, last_miss: Mutex::new(None) }))
    }

    /// The engine `identity` names, if the store has a pack of it that can be used here.
    fn fetch_engine(&self, identity: &EngineIdentity, cancel: &AtomicBool) -> Result<Option<Vec<u8>>, String> {
        let key = identity.key();
        let object = engine_object(&key);
        let started = Instant::now();
        let Some(fetched) = self.store.fetch(&object, cancel).map_err(|error| error.to_string())? else {
            return Ok(None);
        };
        let size = fetched.bytes.len();
        let opened = read_pack(fetched.bytes.as_slice(), &self.trust, |manifest| match manifest.engines.as_slice() {
            [packed] if packed.sidecar.identity == *identity && packed.sidecar.key == key => {
                Ok(Selection { engines: vec![0], timing_caches: Vec::new() })
            }
            [packed] => Err(Unusable::Contents(format!(
                "it was built for something else: {}",
                packed.sidecar.identity.differences(identity).join(", ")
            ))),
            engines => Err(Unusable::Contents(format!("it holds {} engines, not one", engines.len()))),
        })
        .map_err(|error| format!("{}: {object} is refused: {error}", self.store.name()))?;
        let signer = opened.signer.unwrap_or_else(|| "nobody (verify = false)".into());
        log::info!(
            "{}: found engine {key} ({:.1} MB pack, signed by {signer}) in {:.1} s: no build needed",
            self.store.name(),
            size as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
        Ok(opened.engines.into_iter().next().map(|(_, bytes)| bytes))
    }

    /// The miss `why`, remembered for [`REMOTE_LOOK_AGAIN`]; logged as a warning when `failed`
    /// (the store or its pack, not a plain absence or a call cut short by `cancel`) and new.
    fn miss(&self, why: String, failed: bool, cancel: &AtomicBool) -> Lookup {
        if cancel.load(Ordering::SeqCst) {
            return Lookup::NotHere(why);
        }
        let mut last = lock(&self.last_miss);
        if failed && last.as_ref().is_none_or(|(_, before)| *before != why) {
            log::warn!("{why}; building locally unless another source has the engine");
        }
        *last = Some((Instant::now(), why.clone()));
        Lookup::NotHere(why)
    }

    /// Pushes `pack`'s bytes, signed, as `object`; failures are logged (the engine serves anyway).
    fn push_pack(
        &self,
        key: &PrivateKey,
        object: &str,
        manifest: PackManifest,
        files: Packed<'_>,
        cancel: &AtomicBool,
    ) {
        let pack = super::pack::Pack {
            manifest,
            engines: files.engines.iter().map(|bytes| bytes.to_vec()).collect(),
            timing_caches: files.timing_caches.iter().map(|bytes| bytes.to_vec()).collect(),
        };
        let bytes = match pack.to_bytes(Some(key)) {
            Ok(bytes) => bytes,
            Err(error) => {
                log::warn!("{}: {object} not pushed: packing it: {error}", self.store.name());
                return;
            }
        };
        let (size, started) = (bytes.len(), Instant::now());
        // Overwrite: a pack there is either the same engine (another device built it too) or one
        // this device could not use; both are fine to replace with a checked one.
        match self.store.push(object, bytes, Write::Overwrite, cancel) {
            Ok(_) => log::info!(
                "{}: pushed {object} ({:.1} MB) in {:.1} s",
                self.store.name(),
                size as f64 / 1e6,
                started.elapsed().as_secs_f64()
            ),
            Err(error) => log::warn!("{object} not pushed: {error}"),
        }
    }
}

/// The files of a pack to push, in the manifest's order.
struct Packed<'a> {
    engines: &'a [&'a [u8]],
    timing_caches: &'a [&'a [u8]],
}

impl EngineSource for StoreSource {
    fn name(&self) -> String {
        self.store.name().to_owned()
    }

    fn look(&self, plan: &EnginePlan, _target: &BuildTarget, cancel: &AtomicBool) -> Lookup {
        if let Some((when, why)) = lock(&self.last_miss).as_ref() {
            if when.elapsed() < REMOTE_LOOK_AGAIN {
                return Lookup::NotHere(why.clone());
            }
        }
        for identity in [&plan.static_identity, &plan.identity] {
            match self.fetch_engine(identity, cancel) {
                Ok(Some(bytes)) => {
                    return Lookup::Found(Box::new(FoundEngine { bytes, identity: identity.clone() }));
                }
                Ok(None) => {}
                Err(why) => return self.miss(why, true, cancel),
            }
        }
        match self.leases.holder(&plan.identity.key(), cancel) {
            Ok(Some(busy)) => Lookup::Busy { holder: busy.holder, look_again: REMOTE_LOOK_AGAIN },
            Ok(None) => {
                self.miss(format!("{} has no engine {}", self.store.name(), plan.identity.key()), false, cancel)
            }
            Err(error) => self.miss(error.to_string(), true, cancel),
        }
    }

    fn claim(&self, plan: &EnginePlan, _target: &BuildTarget, holder: &str, cancel: &AtomicBool) -> Claim {
        if self.signing_key.is_none() {
            // It will not push what it builds: the others must not wait for it.
            return Claim::Held(Box::new(()));
        }
        match self.leases.claim(&plan.identity.key(), holder, cancel) {
            Ok(Claimed::Held(guard)) => Claim::Held(Box::new(guard)),
            Ok(Claimed::Busy(busy)) => Claim::Busy { holder: busy.holder, look_again: REMOTE_LOOK_AGAIN },
            // Stopping: the chain does not build.
            Err(StoreError::Cancelled { .. }) => Claim::Held(Box::new(())),
            Err(error) => {
                log::warn!("{error}; building without the store's lease");
                Claim::Held(Box::new(()))
            }
        }
    }

    fn timing_cache(&self, target: &BuildTarget, cancel: &AtomicBool) -> Option<Vec<u8>> {
        let object = timing_object(target);
        let fetched = match self.store.fetch(&object, cancel) {
            Ok(fetched) => fetched?,
            Err(StoreError::Cancelled { .. }) => return None,
            Err(error) => {
                log::warn!("{error}; building from an empty timing cache");
                return None;
            }
        };
        let expected = TimingCacheSidecar::new(&target.version, &target.device, &[]);
        let opened = read_pack(fetched.bytes.as_slice(), &self.trust, |manifest| {
            let index =
                manifest.timing_caches.iter().position(|packed| packed.sidecar.differences(&expected).is_empty());
            Ok::<_, PackError>(Selection { engines: Vec::new(), timing_caches: index.into_iter().collect() })
        });
        match opened {
            Ok(opened) => {
                let bytes = opened.timing_caches.into_iter().next().map(|(_, bytes)| bytes);
                if bytes.is_some() {
                    log::info!("{}: starting the build from the fleet's timing cache {object}", self.store.name());
                }
                bytes
            }
            Err(error) => {
                log::warn!("{}: {object} is refused: {error}", self.store.name());
                None
            }
        }
    }

    fn keep(&self, engine: KeptEngine<'_>, cancel: &AtomicBool) {
        let Some(key) = &self.signing_key else { return };
        let engine_key = engine.identity.key();
        let model = model_stem(engine.path, &engine_key);
        let created_by = format!("jetson-detectd {}", env!("CARGO_PKG_VERSION"));
        let manifest = PackManifest {
            schema: PACK_SCHEMA,
            created_by: created_by.clone(),
            engines: vec![PackedEngine {
                model: model.clone(),
                sidecar: EngineSidecar::new(engine.identity, engine.bytes),
            }],
            timing_caches: Vec::new(),
        };
        let files = Packed { engines: &[engine.bytes], timing_caches: &[] };
        self.push_pack(key, &engine_object(&engine_key), manifest, files, cancel);
        if let Some(timing) = engine.timing_cache {
            let target = engine.target;
            let sidecar = TimingCacheSidecar::new(&target.version, &target.device, timing);
            let manifest = PackManifest {
                schema: PACK_SCHEMA,
                created_by,
                engines: Vec::new(),
                timing_caches: vec![PackedTimingCache { model, sidecar }],
            };
            let files = Packed { engines: &[], timing_caches: &[timing] };
            self.push_pack(key, &timing_object(target), manifest, files, cancel);
        }
    }
}

/// The store object of the engine with key `key`.
pub fn engine_object(key: &str) -> String {
    format!("engines/{key}.pack")
}

/// The store object of the timing cache `target`'s builds share: one per TensorRT version, GPU
/// and board (every model built there adds to it).
pub fn timing_object(target: &BuildTarget) -> String {
    let device = &target.device;
    let measured_with = format!(
        "{}\0{}\0{}.{}\0{}\0{}\0{}",
        target.version,
        device.name,
        device.compute_capability.0,
        device.compute_capability.1,
        device.multiprocessors,
        device.total_memory_bytes,
        device.board
    );
    format!("timing/{}.pack", &sha256_hex(measured_with.as_bytes())[..16])
}

/// The model's file stem, from its cached engine's path (`<stem>.<key>.engine`).
fn model_stem(path: &Path, key: &str) -> String {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    name.strip_suffix(&format!(".{key}.engine")).unwrap_or(&name).to_owned()
}

fn read_password(path: &Path) -> Result<String, SourceError> {
    let text = crate::sys::files::read_to_string(path, MAX_PASSWORD_BYTES)
        .map_err(|error| SourceError::Password { path: path.display().to_string(), message: error.to_string() })?;
    Ok(text.trim_end_matches(['\r', '\n']).to_owned())
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::backend::engine::device_key::DeviceIdentity;
    use crate::backend::engine::plan::test_support::{config, spec};
    use crate::config::engine_store::StoreLocation;

    /// The cancel flag of a chain that is never stopped.
    static NEVER: AtomicBool = AtomicBool::new(false);

    fn target(board: &str) -> BuildTarget {
        let device = DeviceIdentity {
            name: "Orin".into(),
            compute_capability: (8, 7),
            multiprocessors: 8,
            total_memory_bytes: 8 << 30,
            board: board.into(),
        };
        BuildTarget {
            kind: "fake",
            version: "10.3.0".into(),
            builder: "fake builder".into(),
            device,
            phases_reported: true,
        }
    }

    fn plan(target: &BuildTarget) -> EnginePlan {
        EnginePlan::new(&spec(&config("")), target).expect("the bundled model's plan")
    }

    /// `[engine.store]` on `url`, trusting `public` (written to `dir`), pushing with `private`.
    fn store_config(dir: &Path, url: String, public: &PrivateKey, private: Option<&PrivateKey>) -> EngineStoreConfig {
        std::fs::create_dir_all(dir).expect("the device's directory");
        let private_path = dir.join("signing.key");
        let public_path = public.write(&dir.join("trusted.key")).expect("write the trusted key");
        if let Some(private) = private {
            private.write(&private_path).expect("write the signing key");
        }
        EngineStoreConfig {
            url: Some(StoreLocation::try_from(url).expect("a store URL")),
            public_key: Some(public_path),
            verify: true,
            push: private.is_some(),
            signing_key: private.map(|_| private_path),
            username: None,
            password_file: None,
            endpoint: None,
            timeout_s: 10,
            max_pack_mib: 64,
            lease_s: 60,
        }
    }

    fn open(config: &EngineStoreConfig) -> StoreSource {
        StoreSource::open(config).expect("opens").expect("a url is set")
    }

    fn keep(source: &StoreSource, identity: &EngineIdentity, target: &BuildTarget, bytes: &[u8]) {
        let path = Path::new("/cache").join(format!("ssd.{}.engine", identity.key()));
        source.keep(KeptEngine { identity, path: &path, bytes, timing_cache: Some(b"timing"), target }, &NEVER);
    }

    #[test]
    fn an_engine_one_device_built_and_pushed_is_found_by_another_with_the_timing_cache() {
        let (dir, shared) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("the store"));
        let key = PrivateKey::generate().expect("key");
        let url = format!("file://{}", shared.path().display());
        let (orin, plan) = (target("Jetson Orin Nano"), plan(&target("Jetson Orin Nano")));
        let builder = open(&store_config(&dir.path().join("a"), url.clone(), &key, Some(&key)));
        keep(&builder, &plan.static_identity, &orin, b"an engine");

        let puller = open(&store_config(&dir.path().join("b"), url, &key, None));
        match puller.look(&plan, &orin, &NEVER) {
            Lookup::Found(found) => {
                assert_eq!((found.bytes.as_slice(), &found.identity), (&b"an engine"[..], &plan.static_identity));
            }
            other => panic!("the pushed engine must be found, got {other:?}"),
        }
        assert_eq!(puller.timing_cache(&orin, &NEVER).as_deref(), Some(&b"timing"[..]));
        assert_eq!(puller.timing_cache(&target("AGX Orin"), &NEVER), None, "timing caches are per board");
    }

    #[test]
    fn a_pack_signed_by_another_key_or_built_for_another_board_is_not_used_and_the_log_says_why() {
        let (dir, shared) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("the store"));
        let (fleet, stranger) = (PrivateKey::generate().expect("key"), PrivateKey::generate().expect("key"));
        let url = format!("file://{}", shared.path().display());
        let (orin, plan) = (target("Jetson Orin Nano"), plan(&target("Jetson Orin Nano")));
        let foreign = open(&store_config(&dir.path().join("a"), url.clone(), &stranger, Some(&stranger)));
        keep(&foreign, &plan.static_identity, &orin, b"a stranger's engine");
        let puller = open(&store_config(&dir.path().join("b"), url.clone(), &fleet, None));
        match puller.look(&plan, &orin, &NEVER) {
            Lookup::NotHere(why) => assert!(why.contains("refused") && why.contains(&stranger.public().id()), "{why}"),
            other => panic!("a stranger's pack must not be used, got {other:?}"),
        }

        let agx = target("AGX Orin");
        let other_board = self::plan(&agx).static_identity;
        let fleet_builder = open(&store_config(&dir.path().join("c"), url.clone(), &fleet, Some(&fleet)));
        let path = Path::new("/cache/ssd.engine");
        let kept = KeptEngine { identity: &other_board, path, bytes: b"for the AGX", timing_cache: None, target: &agx };
        fleet_builder.keep(kept, &NEVER);
        let object = engine_object(&other_board.key());
        let misfiled = shared.path().join(engine_object(&plan.static_identity.key()));
        std::fs::copy(shared.path().join(object), misfiled).expect("file the AGX's pack under the Nano's key");
        let puller = open(&store_config(&dir.path().join("d"), url, &fleet, None));
        match puller.look(&plan, &orin, &NEVER) {
            Lookup::NotHere(why) => assert!(why.contains("board: AGX Orin → Jetson Orin Nano"), "{why}"),
            other => panic!("another board's engine must not be used, got {other:?}"),
        }
    }

    #[test]
    fn while_a_pushing_device_holds_the_lease_the_others_wait_and_one_that_does_not_push_takes_none() {
        let (dir, shared) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("the store"));
        let key = PrivateKey::generate().expect("key");
        let url = format!("file://{}", shared.path().display());
        let (orin, plan) = (target("Jetson Orin Nano"), plan(&target("Jetson Orin Nano")));
        let puller = open(&store_config(&dir.path().join("a"), url.clone(), &key, None));
        let _no_lease = match puller.claim(&plan, &orin, "pid 1 (pull only)", &NEVER) {
            Claim::Held(nothing) => nothing,
            Claim::Busy { holder, .. } => panic!("busy with {holder}"),
        };
        let builder = open(&store_config(&dir.path().join("b"), url, &key, Some(&key)));
        let _lease = match builder.claim(&plan, &orin, "pid 2 (orin-1)", &NEVER) {
            Claim::Held(lease) => lease,
            Claim::Busy { holder, .. } => panic!("a pull-only device took the lease: {holder}"),
        };
        match puller.look(&plan, &orin, &NEVER) {
            Lookup::Busy { holder, look_again } => {
                assert_eq!((holder.as_str(), look_again), ("pid 2 (orin-1)", REMOTE_LOOK_AGAIN))
            }
            other => panic!("the puller must wait for the builder, got {other:?}"),
        }
    }

    #[test]
    fn a_store_that_is_down_means_not_here_with_the_reason_and_a_build_without_its_lease() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = PrivateKey::generate().expect("key");
        let port = TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("address").port();
        let url = format!("oci+http://127.0.0.1:{port}/fleet/engines");
        let (orin, plan) = (target("Jetson Orin Nano"), plan(&target("Jetson Orin Nano")));
        let down = open(&store_config(dir.path(), url, &key, Some(&key)));
        match down.look(&plan, &orin, &NEVER) {
            Lookup::NotHere(why) => assert!(why.contains(&format!("127.0.0.1:{port}")), "{why}"),
            other => panic!("a store that is down has nothing, got {other:?}"),
        }
        assert!(matches!(down.claim(&plan, &orin, "pid 3", &NEVER), Claim::Held(_)), "the build goes ahead");
        assert_eq!(down.timing_cache(&orin, &NEVER), None);
    }
}
