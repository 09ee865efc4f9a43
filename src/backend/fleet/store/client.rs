//! The engine store as the engine chain's thread sees it: blocking calls, each bounded in time and
//! stopped by shutdown, on a small runtime of the store's own.
//!
//! Owns: [`EngineStore`] (opening the configured store, [`fetch`](EngineStore::fetch) and
//! [`push`](EngineStore::push) of named objects with [`Write`] modes, the bounds: `timeout_s` per
//! operation, `max_pack_mib` per download, and the caller's stop flag, which abandons a call
//! within a tenth of a second; an upload cut off that way leaves nothing visible, since every
//! write is atomic: see `super::oci` and `super::objects`), and the runtime the async store
//! clients run on. Why a runtime of its own rather than the daemon's: engines are acquired on the
//! inference worker's thread (and in one-shot commands, `build-engine` and `engine import`, where
//! no daemon runtime exists); a blocking call from there into the daemon's runtime would tie the
//! two lifetimes together, and a store that hangs must never hold a thread the MQTT and HTTP tasks
//! run on. One worker thread (and tokio's blocking pool for name lookups) is all it needs; the
//! lease's renewal runs there while a build goes on. Must not: know what the objects hold (packs are
//! the callers', leases `super::lease`'s) or decide to build.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::error::StoreError;
use super::objects::Objects;
use super::oci::Oci;
use super::types::{Fetched, StoreSettings, Write, Written};
use crate::config::engine_store::StoreLocation;

pub(super) enum Backend {
    Objects(Objects),
    Oci(Oci),
}

impl Backend {
    pub(super) async fn get(&self, name: &str, max: u64) -> Result<Option<Fetched>, StoreError> {
        match self {
            Backend::Objects(store) => store.get(name, max).await,
            Backend::Oci(store) => store.get(name, max).await,
        }
    }

    pub(super) async fn put(&self, name: &str, bytes: Vec<u8>, write: &Write) -> Result<Written, StoreError> {
        match self {
            Backend::Objects(store) => store.put(name, bytes, write).await,
            Backend::Oci(store) => store.put(name, bytes, write).await,
        }
    }
}

/// The shared state of an [`EngineStore`] and its lease renewals.
pub(super) struct Inner {
    runtime: Option<tokio::runtime::Runtime>,
    pub(super) backend: Backend,
    pub(super) name: String,
    pub(super) timeout: Duration,
    pub(super) max_bytes: u64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Not a blocking shutdown: the last handle may be dropped on a thread of another runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A fleet's engine store (cheap to clone: one runtime and client behind it).
#[derive(Clone)]
pub struct EngineStore {
    pub(super) inner: Arc<Inner>,
}

/// How often a blocking call looks at its stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

impl EngineStore {
    /// Opens the store (no request is made yet).
    pub fn open(settings: &StoreSettings) -> Result<EngineStore, StoreError> {
        let name = settings.location.to_string();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("engine-store")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Setup { store: name.clone(), message: format!("its runtime: {e}") })?;
        install_tls_provider();
        let backend = {
            // The clients spawn nothing at construction, but reqwest wants a runtime context.
            let _context = runtime.enter();
            match &settings.location {
                StoreLocation::Objects { url } => Backend::Objects(Objects::open(url, settings)?),
                StoreLocation::Oci { registry, repository, plain_http } => {
                    Backend::Oci(Oci::open(registry, repository, *plain_http, settings)?)
                }
            }
        };
        Ok(EngineStore {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                backend,
                name,
                timeout: settings.timeout,
                max_bytes: settings.max_bytes,
            }),
        })
    }

    /// `oci://registry/repository` or the object store's URL, for logs (never credentials).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The object `name`, if the store has it; abandoned when `stop` is set.
    pub fn fetch(&self, name: &str, stop: &AtomicBool) -> Result<Option<Fetched>, StoreError> {
        let inner = self.inner.clone();
        let object = name.to_owned();
        self.block_on(name, async move { inner.backend.get(&object, inner.max_bytes).await }, stop)
    }

    /// Writes `bytes` to `name` as `write` says; abandoned when `stop` is set (nothing is written
    /// then: the object appears whole or not at all).
    pub fn push(&self, name: &str, bytes: Vec<u8>, write: Write, stop: &AtomicBool) -> Result<Written, StoreError> {
        let inner = self.inner.clone();
        let object = name.to_owned();
        self.block_on(name, async move { inner.backend.put(&object, bytes, &write).await }, stop)
    }

    /// Runs `operation` on the store's runtime, bounded by `timeout_s`; abandoned (the task
    /// aborted, its connections dropped) within [`STOP_POLL`] of `stop` being set.
    fn block_on<T: Send + 'static>(
        &self,
        what: &str,
        operation: impl Future<Output = Result<T, StoreError>> + Send + 'static,
        stop: &AtomicBool,
    ) -> Result<T, StoreError> {
        let inner = &self.inner;
        let store = inner.name.clone();
        let Some(runtime) = inner.runtime.as_ref() else { return Err(StoreError::Cancelled { store }) };
        if stop.load(Ordering::SeqCst) {
            return Err(StoreError::Cancelled { store });
        }
        let timeout = inner.timeout;
        // The timer is made inside the task: it needs the runtime's context.
        let mut task = runtime.spawn(async move { tokio::time::timeout(timeout, operation).await });
        let stopped = async {
            while !stop.load(Ordering::SeqCst) {
                tokio::time::sleep(STOP_POLL).await;
            }
        };
        let finished = runtime.block_on(async {
            tokio::select! {
                joined = &mut task => Some(joined),
                () = stopped => None,
            }
        });
        match finished {
            Some(Ok(Ok(outcome))) => outcome,
            Some(Ok(Err(_elapsed))) => {
                Err(StoreError::TimedOut { store, what: what.to_owned(), seconds: timeout.as_secs() })
            }
            Some(Err(panicked)) => Err(StoreError::Failed { store, message: format!("{what}: {panicked}") }),
            None => {
                task.abort();
                Err(StoreError::Cancelled { store })
            }
        }
    }

    /// Starts `task` on the store's runtime (a lease's renewal).
    pub(super) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> Option<tokio::task::JoinHandle<()>> {
        self.inner.runtime.as_ref().map(|runtime| runtime.spawn(task))
    }
}

/// ring as the process's rustls provider (the store clients' TLS is built without one, as
/// rumqttc's is): never aws-lc-rs. Installing it twice is harmless.
fn install_tls_provider() {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
}
