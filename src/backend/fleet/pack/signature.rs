//! Who vouches for a pack: ed25519 keys and the signature over a pack's manifest.
//!
//! Owns: the key files (`engine keygen` writes them; the private key follows the project's secret
//! file model, `config::secrets`: owner root, group `jetson-detectd`, mode 0640, or 0600 for the
//! user's own; the public key is PKCS#8/SPKI PEM, readable by all), the key id (the first 16 hex
//! digits of the public key's sha256), the signed message (a fixed domain string, then the
//! manifest's exact bytes) and the signature's JSON (`pack.sig`). Must not: read a pack or decide
//! what a verified pack may be used for (`super::import` does).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::backend::engine::cache::sha256_hex;
use crate::sys::access;
use crate::sys::files::{self, ReadError};

/// What is signed before the manifest's bytes: a signature made for anything else (another
/// program's use of the same key) never passes for a pack's.
const SIGNED_DOMAIN: &[u8] = b"jetson-detectd engine pack v1\0";

/// The one algorithm `pack.sig` names.
const ALGORITHM: &str = "ed25519";

/// Largest key file read: a PEM ed25519 key is about 120 bytes.
const MAX_KEY_FILE_BYTES: u64 = 4 << 10;

/// The group that reads the service's secrets (the package makes it; `config::secrets` checks the
/// secret files a config names against it).
const SERVICE_GROUP: &str = "jetson-detectd";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key file {path}: {source}")]
    Read { path: PathBuf, source: ReadError },
    #[error("key file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "private key {path} can be read by every user of this machine (mode {mode:04o}); a signing key is a \
         secret: chmod 0600 {path} (or, for the service, chgrp {SERVICE_GROUP} and chmod 0640)"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("key file {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error(
        "engine.store.public_key is not set, so no pack can be checked: set it to the fleet's public key \
         (`jetson-detectd engine keygen KEY` writes KEY.pub), or set engine.store.verify = false to take packs unchecked"
    )]
    NoPublicKey,
    #[error("cannot make a key: the kernel gave no random bytes ({0})")]
    Random(String),
}

/// Why a signature does not vouch for a manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the pack is not signed")]
    Missing,
    #[error("its signature file is not valid: {0}")]
    Malformed(String),
    #[error("it is signed by key {signer}, not by the configured public key {trusted}")]
    OtherKey { signer: String, trusted: String },
    #[error("its signature does not verify against key {0}: the manifest was changed after signing")]
    Invalid(String),
}

/// How a reader treats a pack's signature: check it against the fleet's key, or (`verify = false`,
/// an explicit and warned choice) accept a pack whatever signed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    Key(PublicKey),
    Unverified,
}

impl Trust {
    /// What `[engine.store]` asks for: the fleet's `public_key`, read; or, with `verify = false`,
    /// no check (logged as a warning here, at every use).
    pub fn new(public_key: Option<&Path>, verify: bool) -> Result<Trust, KeyError> {
        if !verify {
            log::warn!(
                "engine.store.verify = false: engine packs are taken whatever signed them; an engine runs on the GPU \
                 and can carry plugin code, so only do this where nobody else can write the packs"
            );
            return Ok(Trust::Unverified);
        }
        let path = public_key.ok_or(KeyError::NoPublicKey)?;
        Ok(Trust::Key(PublicKey::read(path)?))
    }
}

/// A public key packs are checked against (`engine.store.public_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
}

/// A private key packs are signed with (`engine sign --key`, `engine.store.signing_key`).
pub struct PrivateKey {
    key: SigningKey,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key's bytes, in a log or a panic message.
        write!(f, "PrivateKey({})", self.public().id())
    }
}

/// `pack.sig`: which key signed the manifest, and the signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackSignature {
    pub algorithm: String,
    /// [`PublicKey::id`] of the signer.
    pub key_id: String,
    /// 64 bytes, hex.
    pub signature: String,
}

impl PublicKey {
    /// Reads a PEM public key (SPKI: `-----BEGIN PUBLIC KEY-----`).
    pub fn read(path: &Path) -> Result<PublicKey, KeyError> {
        let text = files::read_to_string(path, MAX_KEY_FILE_BYTES)
            .map_err(|source| KeyError::Read { path: path.to_path_buf(), source })?;
        let key = VerifyingKey::from_public_key_pem(&text).map_err(|e| KeyError::Invalid {
            path: path.to_path_buf(),
            message: format!("not an ed25519 public key in PEM ({e}); `jetson-detectd engine keygen` writes one"),
        })?;
        Ok(PublicKey { key })
    }

    /// The first 16 hex digits of the sha256 of the key's 32 bytes: what logs and `pack.sig` name.
    pub fn id(&self) -> String {
        sha256_hex(self.key.as_bytes())[..16].to_owned()
    }

    /// Checks `signature` over `manifest` (its exact bytes).
    pub fn verify(&self, manifest: &[u8], signature: &PackSignature) -> Result<(), SignatureError> {
        if signature.algorithm != ALGORITHM {
            return Err(SignatureError::Malformed(format!("algorithm {:?}, not {ALGORITHM}", signature.algorithm)));
        }
        if signature.key_id != self.id() {
            return Err(SignatureError::OtherKey { signer: signature.key_id.clone(), trusted: self.id() });
        }
        let bytes = decode_hex::<64>(&signature.signature)
            .ok_or_else(|| SignatureError::Malformed("the signature is not 128 hex digits".into()))?;
        self.key
            .verify_strict(&signed_message(manifest), &Signature::from_bytes(&bytes))
            .map_err(|_| SignatureError::Invalid(self.id()))
    }

    fn to_pem(&self) -> String {
        // Encoding a valid key into a fixed-size structure cannot fail.
        self.key.to_public_key_pem(LineEnding::LF).unwrap_or_default()
    }
}

impl PrivateKey {
    /// A new key from the kernel's random bytes.
    pub fn generate() -> Result<PrivateKey, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        let key = SigningKey::from_bytes(&seed);
        seed.fill(0);
        Ok(PrivateKey { key })
    }

    /// Reads a PEM private key (PKCS#8: `-----BEGIN PRIVATE KEY-----`) that only its owner (and
    /// the owner's group) may read: a world-readable signing key is refused, as ssh refuses one.
    pub fn read(path: &Path) -> Result<PrivateKey, KeyError> {
        let (file, _) = files::open_regular(path, MAX_KEY_FILE_BYTES)
            .map_err(|source| KeyError::Read { path: path.to_path_buf(), source })?;
        let mode =
            file.metadata().map_err(|e| KeyError::Read { path: path.to_path_buf(), source: ReadError::Io(e) })?.mode();
        if mode & 0o007 != 0 {
            return Err(KeyError::Exposed { path: path.to_path_buf(), mode: mode & 0o7777 });
        }
        drop(file);
        let text = zeroize::Zeroizing::new(
            files::read_to_string(path, MAX_KEY_FILE_BYTES)
                .map_err(|source| KeyError::Read { path: path.to_path_buf(), source })?,
        );
        let key = SigningKey::from_pkcs8_pem(&text).map_err(|e| KeyError::Invalid {
            path: path.to_path_buf(),
            message: format!("not an ed25519 private key in PEM ({e}); `jetson-detectd engine keygen` writes one"),
        })?;
        Ok(PrivateKey { key })
    }

    pub fn public(&self) -> PublicKey {
        PublicKey { key: self.key.verifying_key() }
    }

    /// The signature of `manifest` (its exact bytes).
    pub fn sign(&self, manifest: &[u8]) -> PackSignature {
        let signature = self.key.sign(&signed_message(manifest));
        PackSignature {
            algorithm: ALGORITHM.into(),
            key_id: self.public().id(),
            signature: signature.to_bytes().iter().map(|b| format!("{b:02x}")).collect(),
        }
    }

    /// Writes this key to `private` and its public half to `<private>.pub`; neither may exist.
    /// The private key is created 0640 and given to group `jetson-detectd` when root writes it on a
    /// machine that has the group (the service reads it through the group, as every secret), else
    /// 0600. Returns the public key's path.
    pub fn write(&self, private: &Path) -> Result<PathBuf, KeyError> {
        let public = public_key_path(private);
        if public.exists() {
            return Err(write_error(&public)(std::io::Error::from(std::io::ErrorKind::AlreadyExists)));
        }
        let service_group = if access::is_root() { access::group_id(SERVICE_GROUP) } else { None };
        let mode = if service_group.is_some() { 0o640 } else { 0o600 };
        let pem = self.key.to_pkcs8_pem(LineEnding::LF).map_err(|e| KeyError::Invalid {
            path: private.to_path_buf(),
            message: format!("cannot encode the key: {e}"),
        })?;
        let mut file =
            OpenOptions::new().write(true).create_new(true).mode(mode).open(private).map_err(write_error(private))?;
        if let Some(gid) = service_group {
            std::os::unix::fs::fchown(&file, Some(0), Some(gid)).map_err(write_error(private))?;
        }
        file.write_all(pem.as_bytes()).and_then(|()| file.sync_all()).map_err(write_error(private))?;
        let mut file =
            OpenOptions::new().write(true).create_new(true).mode(0o644).open(&public).map_err(write_error(&public))?;
        file.write_all(self.public().to_pem().as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(write_error(&public))?;
        Ok(public)
    }
}

fn write_error(path: &Path) -> impl FnOnce(std::io::Error) -> KeyError + '_ {
    move |source| KeyError::Write { path: path.to_path_buf(), source }
}

/// `<private>.pub`.
pub fn public_key_path(private: &Path) -> PathBuf {
    let mut name = private.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

fn signed_message(manifest: &[u8]) -> Vec<u8> {
    [SIGNED_DOMAIN, manifest].concat()
}

fn decode_hex<const N: usize>(hex: &str) -> Option<[u8; N]> {
    let digits = hex.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let mut bytes = [0u8; N];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_signature_verifies_only_for_its_manifest_and_its_key() {
        let key = PrivateKey::generate().expect("key");
        let signature = key.sign(b"{\"schema\":1}");
        assert_eq!(signature.key_id, key.public().id());
        assert_eq!(key.public().verify(b"{\"schema\":1}", &signature), Ok(()));
        assert_eq!(key.public().verify(b"{\"schema\":2}", &signature), Err(SignatureError::Invalid(key.public().id())));
        let other = PrivateKey::generate().expect("key");
        assert!(matches!(other.public().verify(b"{\"schema\":1}", &signature), Err(SignatureError::OtherKey { .. })));
        // The same key id with another key's signature bytes: still refused.
        let forged = PackSignature { key_id: key.public().id(), ..other.sign(b"{\"schema\":1}") };
        assert!(matches!(key.public().verify(b"{\"schema\":1}", &forged), Err(SignatureError::Invalid(_))));
        let garbled = PackSignature { signature: "zz".repeat(64), ..signature.clone() };
        assert!(matches!(key.public().verify(b"{\"schema\":1}", &garbled), Err(SignatureError::Malformed(_))));
        let rsa = PackSignature { algorithm: "rsa".into(), ..signature };
        assert!(matches!(key.public().verify(b"{\"schema\":1}", &rsa), Err(SignatureError::Malformed(_))));
    }

    #[test]
    fn keys_round_trip_through_their_files_and_the_private_one_stays_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let private = dir.path().join("fleet.key");
        let key = PrivateKey::generate().expect("key");
        let public = key.write(&private).expect("write");
        assert_eq!(public, dir.path().join("fleet.key.pub"));
        let mode = fs::metadata(&private).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode & 0o007, 0, "mode {mode:o}");
        assert_eq!(PrivateKey::read(&private).expect("read").public(), key.public());
        assert_eq!(PublicKey::read(&public).expect("read"), key.public());
        assert!(fs::read_to_string(&public).expect("read").starts_with("-----BEGIN PUBLIC KEY-----"));
        assert!(matches!(key.write(&private), Err(KeyError::Write { .. })), "an existing key is never replaced");

        fs::set_permissions(&private, fs::Permissions::from_mode(0o644)).expect("chmod");
        let message = PrivateKey::read(&private).expect_err("world-readable").to_string();
        assert!(message.contains("chmod 0600"), "{message}");
        assert!(matches!(PublicKey::read(&private), Err(KeyError::Invalid { .. })), "a private key is no public key");
    }

    #[test]
    fn keys_made_by_openssl_are_read() {
        // `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout` (RFC 8410's test key).
        let dir = tempfile::tempdir().expect("tempdir");
        let private = dir.path().join("openssl.key");
        fs::write(
            &private,
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----\n",
        )
        .expect("write");
        fs::set_permissions(&private, fs::Permissions::from_mode(0o600)).expect("chmod");
        let public = dir.path().join("openssl.pub");
        fs::write(
            &public,
            "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n",
        )
        .expect("write");
        let key = PrivateKey::read(&private).expect("openssl's private key");
        assert_eq!(key.public(), PublicKey::read(&public).expect("openssl's public key"));
        assert!(!format!("{key:?}").contains("MC4C"), "Debug never shows the key");
    }
}
