//! The fleet's build lease: one device builds an engine key while the others wait for its pack.
//!
//! Owns: the lease object (`leases/<key>.json`: who holds it, a random token, its lifetime, a
//! renewal count, whether it was released), taking it by a conditional write ([`Write::Create`]
//! where there is none, [`Write::Replace`] of the version seen where it was released or its holder
//! died), renewing it every third of its lifetime while the build runs (on the store's runtime),
//! and releasing it when the guard is dropped: before the drop returns, within [`RELEASE_WAIT`]
//! (so that a daemon stopping mid-build has released it before it exits, and the others build at
//! once instead of waiting out its lifetime; a store that hangs holds the drop no longer). A lease's death is judged by what this device saw,
//! never by clocks of two devices: a lease whose version has not changed for its whole lifetime,
//! watched by this process, is a dead builder's. How atomic the conditional writes are is the
//! store's (object stores: on the server; registries and directories: see `super::oci` and
//! `super::objects`). Must not: build, or decide what to do while another device builds.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::client::EngineStore;
use super::error::StoreError;
use super::types::{Version, Write, Written};
use crate::sys::lock::lock;

/// The lease object of `key`.
pub fn lease_object(key: &str) -> String {
    format!("leases/{key}.json")
}

/// Largest lease object read.
const MAX_LEASE_BYTES: usize = 4 << 10;

/// The longest a dropped [`LeaseGuard`] waits for its release. It holds up the thread that drops
/// it (at shutdown, the daemon's stop), and a lease not released only makes the others wait out
/// its lifetime: a few round trips to a store that answers, short beside a stop.
pub const RELEASE_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// Who builds (pid, host, command), for the others' logs and status.
    pub holder: String,
    /// Random per taking: two holders with the same description still differ.
    pub token: String,
    pub lease_s: u64,
    pub renewals: u64,
    pub released: bool,
}

/// Another device's lease on a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    pub holder: String,
}

/// What a claim got.
pub enum Claimed {
    /// This process builds; the guard renews the lease and releases it when dropped.
    Held(LeaseGuard),
    Busy(Busy),
}

/// The leases of one store, with what this process saw of each.
pub struct Leases {
    store: EngineStore,
    lifetime: Duration,
    seen: Mutex<HashMap<String, (Version, Instant)>>,
}

/// A lease as read, and what this process makes of it.
enum Reading {
    Free(Option<Version>),
    Live(Busy),
}

impl Leases {
    pub fn new(store: EngineStore, lifetime: Duration) -> Leases {
        Leases { store, lifetime, seen: Mutex::new(HashMap::new()) }
    }

    /// Who holds `key`'s lease, if a live holder does (abandoned when `stop` is set).
    pub fn holder(&self, key: &str, stop: &AtomicBool) -> Result<Option<Busy>, StoreError> {
        Ok(match self.read(key, stop)? {
            Reading::Live(busy) => Some(busy),
            Reading::Free(_) => None,
        })
    }

    fn read(&self, key: &str, stop: &AtomicBool) -> Result<Reading, StoreError> {
        let Some(fetched) = self.store.fetch(&lease_object(key), stop)? else { return Ok(Reading::Free(None)) };
        let record: Option<LeaseRecord> =
            (fetched.bytes.len() <= MAX_LEASE_BYTES).then(|| serde_json::from_slice(&fetched.bytes).ok()).flatten();
        let Some(record) = record else {
            // Not a lease of ours: replaced like a released one.
            return Ok(Reading::Free(Some(fetched.version)));
        };
        if record.released {
            return Ok(Reading::Free(Some(fetched.version)));
        }
        let mut seen = lock(&self.seen);
        let now = Instant::now();
        let since = match seen.get(key) {
            Some((version, since)) if *version == fetched.version => *since,
            _ => {
                seen.insert(key.to_owned(), (fetched.version.clone(), now));
                now
            }
        };
        let lifetime = Duration::from_secs(record.lease_s).max(self.lifetime);
        if now.duration_since(since) >= lifetime {
            log::warn!(
                "{}: the lease on engine {key} of {} was not renewed for {} s: taking over its build",
                self.store.name(),
                record.holder,
                lifetime.as_secs()
            );
            return Ok(Reading::Free(Some(fetched.version)));
        }
        Ok(Reading::Live(Busy { holder: record.holder }))
    }

    /// Takes `key`'s lease for `holder`, unless a live holder has it (abandoned when `stop` is
    /// set).
    pub fn claim(&self, key: &str, holder: &str, stop: &AtomicBool) -> Result<Claimed, StoreError> {
        let write = match self.read(key, stop)? {
            Reading::Live(busy) => return Ok(Claimed::Busy(busy)),
            Reading::Free(None) => Write::Create,
            Reading::Free(Some(version)) => Write::Replace(version),
        };
        let record = LeaseRecord {
            holder: holder.to_owned(),
            token: random_token(),
            lease_s: self.lifetime.as_secs(),
            renewals: 0,
            released: false,
        };
        match self.store.push(&lease_object(key), to_json(&record), write, stop)? {
            Written::Done(version) => {
                Ok(Claimed::Held(LeaseGuard::start(&self.store, key, record, version, self.lifetime)))
            }
            Written::Conflict => {
                let holder = self.holder(key, stop)?.map_or_else(|| "another device".to_owned(), |busy| busy.holder);
                Ok(Claimed::Busy(Busy { holder }))
            }
        }
    }
}

fn to_json(record: &LeaseRecord) -> Vec<u8> {
    // Strings, numbers and a bool: serialising cannot fail.
    serde_json::to_vec(record).unwrap_or_default()
}

fn random_token() -> String {
    let mut bytes = [0u8; 8];
    // Without randomness the holder's description still tells leases apart.
    let _ = getrandom::getrandom(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A held lease: renewed on the store's runtime while it lives, released when dropped.
pub struct LeaseGuard {
    store: EngineStore,
    key: String,
    state: Arc<Mutex<(LeaseRecord, Version)>>,
    renewal: Option<tokio::task::JoinHandle<()>>,
}

impl LeaseGuard {
    fn start(store: &EngineStore, key: &str, record: LeaseRecord, version: Version, lifetime: Duration) -> LeaseGuard {
        let state = Arc::new(Mutex::new((record, version)));
        let renewal = {
            let (store, key, state) = (store.clone(), key.to_owned(), state.clone());
            store.clone().spawn(async move {
                loop {
                    tokio::time::sleep(lifetime / 3).await;
                    let (bytes, version) = {
                        let mut state = lock(&state);
                        state.0.renewals += 1;
                        (to_json(&state.0), state.1.clone())
                    };
                    match store.inner.backend.put(&lease_object(&key), bytes, &Write::Replace(version)).await {
                        Ok(Written::Done(version)) => lock(&state).1 = version,
                        Ok(Written::Conflict) => {
                            log::warn!(
                                "{}: lost the lease on engine {key} (another device took it over)",
                                store.name()
                            );
                            return;
                        }
                        // A store briefly offline: the next renewal tries again, within the lifetime.
                        Err(error) => log::warn!("renewing the lease on engine {key}: {error}"),
                    }
                }
            })
        };
        LeaseGuard { store: store.clone(), key: key.to_owned(), state, renewal }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
        let mut record = lock(&self.state).0.clone();
        record.released = true;
        let (store, key) = (self.store.clone(), self.key.clone());
        let (done, released) = std::sync::mpsc::sync_channel(1);
        // On the store's runtime, waited for here: never a `block_on`, which panics on a thread
        // that runs another runtime's tasks.
        let task = store.clone().spawn(async move {
            let _ = done.send(release(&store, &key, record).await);
        });
        let name = self.store.name();
        match released.recv_timeout(RELEASE_WAIT) {
            Ok(Ok(())) => log::debug!("{name}: released the lease on engine {}", self.key),
            Ok(Err(error)) => log::warn!(
                "{name}: releasing the lease on engine {}: {error}; the others wait for it up to engine.store.lease_s",
                self.key
            ),
            Err(_) => {
                if let Some(task) = task {
                    task.abort();
                }
                log::warn!(
                    "{name}: the lease on engine {} was not released within {} s; the others wait for it up to \
                     engine.store.lease_s",
                    self.key,
                    RELEASE_WAIT.as_secs()
                );
            }
        }
    }
}

/// Writes `record` (released) over `key`'s lease if the lease there is still this holder's (the
/// same token): read afresh, since a renewal cut short by the drop may have written a version this
/// guard never saw; a lease another device took over is left alone.
async fn release(store: &EngineStore, key: &str, record: LeaseRecord) -> Result<(), StoreError> {
    let object = lease_object(key);
    let Some(fetched) = store.inner.backend.get(&object, MAX_LEASE_BYTES as u64).await? else { return Ok(()) };
    let there: Option<LeaseRecord> = serde_json::from_slice(&fetched.bytes).ok();
    if there.is_none_or(|there| there.token != record.token || there.released) {
        return Ok(());
    }
    // A conflict means that another device wrote it meanwhile: then it is no longer this one's.
    store.inner.backend.put(&object, to_json(&record), &Write::ReplaceUnconfirmed(fetched.version)).await?;
    Ok(())
}
