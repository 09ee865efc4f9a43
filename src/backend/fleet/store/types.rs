//! The values the store client and its stores pass between them: what a store is opened with, an
//! object's version, what a read returns and how a write treats what is there.

use std::time::Duration;

use crate::config::engine_store::StoreLocation;

/// What a store needs beside its location (from `[engine.store]`; secrets already read).
#[derive(Clone)]
pub struct StoreSettings {
    pub location: StoreLocation,
    /// User name (or S3 access key id) and password (or secret key).
    pub credentials: Option<(String, String)>,
    /// An S3-compatible server's URL.
    pub endpoint: Option<String>,
    /// Longest one operation may take.
    pub timeout: Duration,
    /// Largest object downloaded.
    pub max_bytes: u64,
}

impl std::fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("StoreSettings")
            .field("location", &self.location)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("endpoint", &self.endpoint)
            .field("timeout", &self.timeout)
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

/// Which version of an object a conditional write expects: an object store's ETag and version, or
/// a registry's manifest digest (as `e_tag`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Version {
    pub e_tag: Option<String>,
    pub version: Option<String>,
}

/// An object read, and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    pub version: Version,
}

/// How a write treats what is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Replace whatever is there.
    Overwrite,
    /// Only if nothing is there.
    Create,
    /// Only if what is there is still this version.
    Replace(Version),
    /// As [`Write::Replace`], without learning whether a writer at the same moment won: where the
    /// store has no conditional write (a registry), the write is not read back after it settled.
    /// For a write whose outcome changes nothing for the writer (a lease's release at shutdown).
    ReplaceUnconfirmed(Version),
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Done(Version),
    /// The condition did not hold: another device wrote first.
    Conflict,
}
