//! `[engine.store]`: where a fleet's engine packs come from and who must have signed them.
//!
//! Owns: the section's typed keys and their bounds, and [`StoreLocation`], a store's URL parsed (the engine store
//! clients take it). The trust keys (`public_key`, `verify`) apply to every pack this device takes
//! in. Must not: read the key files (the pack layer reads and checks them,
//! `crate::backend::fleet::pack::signature`).

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineStoreConfig {
    /// Where the fleet's packs are: an OCI registry or an object store.
    pub url: Option<StoreLocation>,
    /// The fleet's ed25519 public key (PEM): packs must be signed with its private half.
    pub public_key: Option<PathBuf>,
    /// `false` takes packs whatever signed them (warned at every use).
    pub verify: bool,
    /// Upload what this device builds (signed with `signing_key`).
    pub push: bool,
    /// The fleet's private key (a secret file), for `push`.
    pub signing_key: Option<PathBuf>,
    /// The registry's user name, or an S3 access key id.
    pub username: Option<String>,
    /// The registry's password or token, or an S3 secret access key (a secret file).
    pub password_file: Option<PathBuf>,
    /// An S3-compatible server's URL (`http(s)://host:port`), for `s3://` on other than AWS.
    pub endpoint: Option<String>,
    /// Longest one lookup, download or upload may take, in seconds.
    pub timeout_s: u32,
    /// Largest pack downloaded, in MiB.
    pub max_pack_mib: u32,
    /// How long a building device's lease lives without renewal, in seconds.
    pub lease_s: u32,
}

/// Bounds of `engine.store.timeout_s`, `max_pack_mib` and `lease_s`.
pub const TIMEOUT_S: std::ops::RangeInclusive<u32> = 1..=3600;
pub const MAX_PACK_MIB: std::ops::RangeInclusive<u32> = 1..=4096;
pub const LEASE_S: std::ops::RangeInclusive<u32> = 10..=3600;

/// `engine.store.url`, parsed: where the packs are, and through what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum StoreLocation {
    /// `oci://registry/repository` (HTTPS), or `oci+http://` for a registry that speaks plain HTTP.
    Oci { registry: String, repository: String, plain_http: bool },
    /// `s3://`, `gs://`, `az://` (bucket or container, then a prefix) and `file:///dir`: the URL as
    /// the object store crate reads it.
    Objects { url: String },
}

impl TryFrom<String> for StoreLocation {
    type Error = String;

    fn try_from(url: String) -> Result<Self, String> {
        let allowed = "allowed: oci://registry/repository, oci+http://registry/repository, s3://bucket/prefix, \
                       gs://bucket/prefix, az://container/prefix, file:///directory";
        let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("{url:?} is not a URL; {allowed}"))?;
        match scheme {
            "oci" | "oci+http" => {
                let (registry, repository) = rest
                    .split_once('/')
                    .filter(|(registry, repository)| !registry.is_empty() && !repository.is_empty())
                    .ok_or_else(|| format!("{url:?} names no repository; {allowed}"))?;
                let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c);
                if !repository.chars().all(valid) || repository.ends_with('/') {
                    return Err(format!(
                        "{url:?}: an OCI repository is lowercase letters, digits and ._-/ (e.g. fleet/engines)"
                    ));
                }
                Ok(StoreLocation::Oci {
                    registry: registry.to_owned(),
                    repository: repository.to_owned(),
                    plain_http: scheme == "oci+http",
                })
            }
            "s3" | "gs" | "az" if !rest.is_empty() && !rest.starts_with('/') => Ok(StoreLocation::Objects { url }),
            "file" if rest.starts_with('/') && rest.len() > 1 => Ok(StoreLocation::Objects { url }),
            _ => Err(format!("{url:?}: {allowed}")),
        }
    }
}

impl From<StoreLocation> for String {
    fn from(location: StoreLocation) -> String {
        location.to_string()
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Oci { registry, repository, plain_http } => {
                let scheme = if *plain_http { "oci+http" } else { "oci" };
                write!(f, "{scheme}://{registry}/{repository}")
            }
            StoreLocation::Objects { url } => f.write_str(url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_name_a_registry_and_repository_or_a_bucket() {
        let parse = |url: &str| StoreLocation::try_from(url.to_owned());
        assert_eq!(
            parse("oci://ghcr.io/acme/engines"),
            Ok(StoreLocation::Oci { registry: "ghcr.io".into(), repository: "acme/engines".into(), plain_http: false })
        );
        assert_eq!(
            parse("oci+http://127.0.0.1:5000/engines"),
            Ok(StoreLocation::Oci {
                registry: "127.0.0.1:5000".into(),
                repository: "engines".into(),
                plain_http: true
            })
        );
        for url in ["s3://fleet/engines", "gs://fleet", "az://container/p", "file:///srv/engines"] {
            assert_eq!(parse(url), Ok(StoreLocation::Objects { url: url.into() }), "{url}");
            assert_eq!(parse(url).map(String::from), Ok(url.to_owned()));
        }
        for url in
            ["ghcr.io/acme", "oci://ghcr.io", "oci://ghcr.io/Acme", "http://x/y", "s3://", "file://rel", "ftp://x/y"]
        {
            let message = parse(url).expect_err(url);
            assert!(message.contains(url) || message.contains("OCI repository"), "{message}");
        }
    }
}
