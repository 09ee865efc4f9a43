//! Engine stores: a fleet's packs on an OCI registry or an object store, and the lease that makes
//! one device build each engine key while the others wait.
//!
//! Modules: [`client`] (the blocking handle, its runtime and bounds), [`objects`] (`s3://`, `gs://`,
//! `az://`, `file://`), [`oci`] (`oci://`), [`lease`] (the build lease), [`types`] (the values
//! they pass) and [`error`].

pub mod client;
pub mod error;
pub mod lease;
pub mod objects;
pub mod oci;
pub mod types;

pub use client::EngineStore;
pub use error::StoreError;
pub use lease::{Busy, Claimed, LeaseGuard, Leases};
pub use types::{Fetched, StoreSettings, Version, Write, Written};
