//! The engine pack on disk and on the wire: one ustar archive that carries engines and timing
//! caches with their sidecars, for `engine export`/`import` and the engine stores.
//!
//! Owns: the entries and their order — `pack.json` (the [`PackManifest`]: every engine's and
//! timing cache's sidecar, so every size and sha256), `pack.sig` when signed
//! ([`PackSignature`] over `pack.json`'s exact bytes), then
//! `engines/<n>` and `timing/<n>` in the manifest's order — writing them, and reading a pack as
//! the untrusted input it is: nothing but those entries, each a regular file, each size checked
//! against its bound and the manifest before anything is allocated, the signature checked before
//! a byte of an engine is read, every file's sha256 checked against the manifest. Must not: decide
//! which engines this device may use (`super::import`) or touch the engine cache.

use std::io::{self, Read};

use serde::{Deserialize, Serialize};

use super::signature::{PackSignature, PrivateKey, SignatureError, Trust};
use crate::backend::engine::cache::{
    sha256_hex, EngineSidecar, TimingCacheSidecar, CACHE_SCHEMA, MAX_ENGINE_BYTES, MAX_TIMING_CACHE_BYTES,
};

/// Version of the pack layout; a reader refuses any other.
pub const PACK_SCHEMA: u32 = 1;

const MANIFEST_ENTRY: &str = "pack.json";
const SIGNATURE_ENTRY: &str = "pack.sig";
/// Largest `pack.json`: a sidecar is well under 2 KiB.
const MAX_MANIFEST_BYTES: u64 = 256 << 10;
const MAX_SIGNATURE_BYTES: u64 = 1 << 10;
/// Most engines (and, apart, timing caches) in one pack: one per model of a config.
pub const MAX_PACK_FILES: usize = 64;

/// What a pack holds, in the order its files follow `pack.json` and `pack.sig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackManifest {
    pub schema: u32,
    /// `jetson-detectd <version>` that wrote the pack (for people; nothing checks it).
    pub created_by: String,
    pub engines: Vec<PackedEngine>,
    pub timing_caches: Vec<PackedTimingCache>,
}

/// One engine: the model it was built from (its file stem, the cache's file name) and its sidecar,
/// which names everything it was built for and its size and sha256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackedEngine {
    pub model: String,
    pub sidecar: EngineSidecar,
}

/// One timing cache, for the model stem whose cache file it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackedTimingCache {
    pub model: String,
    pub sidecar: TimingCacheSidecar,
}

/// A pack's contents in memory, ready to write (`engines[i]` holds the bytes of
/// `manifest.engines[i]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pack {
    pub manifest: PackManifest,
    pub engines: Vec<Vec<u8>>,
    pub timing_caches: Vec<Vec<u8>>,
}

/// Why a pack cannot be used. Each names what is wrong, for the log line of a refusal.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("reading the pack: {0}")]
    Io(#[from] io::Error),
    #[error("not an engine pack of this version: {0}")]
    Malformed(String),
    #[error("{what} is {bytes} bytes, more than the {max} allowed")]
    TooLarge { what: String, bytes: u64, max: u64 },
    #[error("{what} does not match the sha256 its manifest records (corrupt or altered)")]
    Checksum { what: String },
    #[error("refused: {0}")]
    Signature(#[from] SignatureError),
}

/// Which of a manifest's files a reader wants: the others are skipped unread.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    pub engines: Vec<usize>,
    pub timing_caches: Vec<usize>,
}

impl Selection {
    pub fn everything(manifest: &PackManifest) -> Selection {
        Selection {
            engines: (0..manifest.engines.len()).collect(),
            timing_caches: (0..manifest.timing_caches.len()).collect(),
        }
    }
}

/// A pack read and checked: its manifest, who signed it (`None`: unsigned, read with
/// [`Trust::Unverified`]) and the selected files, each with its index in the manifest.
#[derive(Debug)]
pub struct OpenedPack {
    pub manifest: PackManifest,
    pub signer: Option<String>,
    pub engines: Vec<(usize, Vec<u8>)>,
    pub timing_caches: Vec<(usize, Vec<u8>)>,
}

impl Pack {
    /// The archive, signed with `key` when given.
    pub fn to_bytes(&self, key: Option<&PrivateKey>) -> Result<Vec<u8>, PackError> {
        let manifest = manifest_bytes(&self.manifest);
        let signature = key.map(|key| manifest_bytes(&key.sign(&manifest)));
        let mut archive = tar::Builder::new(Vec::new());
        append(&mut archive, MANIFEST_ENTRY, &manifest)?;
        if let Some(signature) = &signature {
            append(&mut archive, SIGNATURE_ENTRY, signature)?;
        }
        for (index, engine) in self.engines.iter().enumerate() {
            append(&mut archive, &engine_entry(index), engine)?;
        }
        for (index, cache) in self.timing_caches.iter().enumerate() {
            append(&mut archive, &timing_entry(index), cache)?;
        }
        Ok(archive.into_inner()?)
    }

    /// Reads a whole pack (every file), for `engine sign` and tests.
    pub fn read(reader: impl Read, trust: &Trust) -> Result<(Pack, Option<String>), PackError> {
        let opened = read_pack(reader, trust, |manifest| Ok::<_, PackError>(Selection::everything(manifest)))?;
        let pack = Pack {
            manifest: opened.manifest,
            engines: opened.engines.into_iter().map(|(_, bytes)| bytes).collect(),
            timing_caches: opened.timing_caches.into_iter().map(|(_, bytes)| bytes).collect(),
        };
        Ok((pack, opened.signer))
    }
}

fn engine_entry(index: usize) -> String {
    format!("engines/{index}")
}

fn timing_entry(index: usize) -> String {
    format!("timing/{index}")
}

fn manifest_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    // Strings and numbers only: serialising cannot fail.
    let mut json = serde_json::to_vec_pretty(value).unwrap_or_default();
    json.push(b'\n');
    json
}

fn append(archive: &mut tar::Builder<Vec<u8>>, path: &str, bytes: &[u8]) -> io::Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    archive.append_data(&mut header, path, bytes)
}

/// Reads the pack from `reader`: the manifest, the signature (checked against `trust` before
/// anything else is read), then the files `select` asks for, given the checked manifest (it can
/// refuse the pack with an error of its own: the device check happens before an engine is read).
pub fn read_pack<E: From<PackError>>(
    reader: impl Read,
    trust: &Trust,
    select: impl FnOnce(&PackManifest) -> Result<Selection, E>,
) -> Result<OpenedPack, E> {
    read_checked_pack(reader, trust, select).map_err(|stop| match stop {
        Stop::Pack(error) => E::from(error),
        Stop::Selection(error) => error,
    })
}

/// Why [`read_checked_pack`] stopped: the pack, or the caller's selection.
enum Stop<E> {
    Pack(PackError),
    Selection(E),
}

impl<E> From<PackError> for Stop<E> {
    fn from(error: PackError) -> Self {
        Stop::Pack(error)
    }
}

impl<E> From<io::Error> for Stop<E> {
    fn from(error: io::Error) -> Self {
        Stop::Pack(error.into())
    }
}

impl<E> From<SignatureError> for Stop<E> {
    fn from(error: SignatureError) -> Self {
        Stop::Pack(error.into())
    }
}

fn read_checked_pack<E>(
    reader: impl Read,
    trust: &Trust,
    select: impl FnOnce(&PackManifest) -> Result<Selection, E>,
) -> Result<OpenedPack, Stop<E>> {
    let mut archive = tar::Archive::new(reader);
    let mut entries = archive.entries()?;
    let manifest_entry = next_entry(&mut entries, MANIFEST_ENTRY)?;
    check_entry(&manifest_entry, MANIFEST_ENTRY)?;
    let manifest_text = read_entry(manifest_entry, MANIFEST_ENTRY, MAX_MANIFEST_BYTES, None)?;
    let manifest: PackManifest =
        serde_json::from_slice(&manifest_text).map_err(|e| PackError::Malformed(format!("{MANIFEST_ENTRY}: {e}")))?;

    // The signature entry is optional in the layout, so the entry after the manifest decides.
    let mut following = entries.next().transpose()?;
    let signature = match following.take() {
        Some(entry) if entry.path_bytes().as_ref() == SIGNATURE_ENTRY.as_bytes() => {
            check_entry(&entry, SIGNATURE_ENTRY)?;
            let bytes = read_entry(entry, SIGNATURE_ENTRY, MAX_SIGNATURE_BYTES, None)?;
            let signature: PackSignature = serde_json::from_slice(&bytes)
                .map_err(|e| SignatureError::Malformed(format!("{SIGNATURE_ENTRY}: {e}")))?;
            Some(signature)
        }
        other => {
            following = other;
            None
        }
    };
    let signer = match (trust, &signature) {
        (Trust::Key(key), Some(signature)) => {
            key.verify(&manifest_text, signature)?;
            Some(signature.key_id.clone())
        }
        (Trust::Key(_), None) => return Err(SignatureError::Missing.into()),
        (Trust::Unverified, signature) => signature.as_ref().map(|s| s.key_id.clone()),
    };
    check_manifest(&manifest)?;

    let selection = select(&manifest).map_err(Stop::Selection)?;
    let mut engines = Vec::new();
    let mut timing_caches = Vec::new();
    let files = manifest
        .engines
        .iter()
        .enumerate()
        .map(|(index, engine)| {
            let wanted = selection.engines.contains(&index);
            (
                engine_entry(index),
                engine.sidecar.engine_bytes,
                engine.sidecar.engine_sha256.as_str(),
                wanted,
                true,
                index,
            )
        })
        .chain(manifest.timing_caches.iter().enumerate().map(|(index, cache)| {
            let wanted = selection.timing_caches.contains(&index);
            (timing_entry(index), cache.sidecar.cache_bytes, cache.sidecar.cache_sha256.as_str(), wanted, false, index)
        }));
    for (name, bytes, sha256, wanted, is_engine, index) in files {
        let entry = match following.take() {
            Some(entry) => entry,
            None => next_entry(&mut entries, &name)?,
        };
        check_entry(&entry, &name)?;
        if entry.header().size()? != bytes {
            let held = entry.header().size()?;
            return Err(PackError::Malformed(format!("{name} holds {held} bytes, its manifest says {bytes}")).into());
        }
        if wanted {
            let content = read_entry(entry, &name, bytes, Some(sha256))?;
            if is_engine {
                engines.push((index, content));
            } else {
                timing_caches.push((index, content));
            }
        }
    }
    if following.is_some() || entries.next().is_some() {
        return Err(PackError::Malformed("it has entries its manifest does not list".into()).into());
    }
    Ok(OpenedPack { manifest, signer, engines, timing_caches })
}

fn next_entry<'a, R: Read>(entries: &mut tar::Entries<'a, R>, expected: &str) -> Result<tar::Entry<'a, R>, PackError> {
    entries.next().ok_or_else(|| PackError::Malformed(format!("it ends before {expected}")))?.map_err(PackError::from)
}

fn check_entry<R: Read>(entry: &tar::Entry<'_, R>, expected: &str) -> Result<(), PackError> {
    let path = entry.path_bytes();
    if path.as_ref() != expected.as_bytes() {
        return Err(PackError::Malformed(format!("{:?} where {expected} belongs", String::from_utf8_lossy(&path))));
    }
    if entry.header().entry_type() != tar::EntryType::Regular {
        return Err(PackError::Malformed(format!("{expected} is not a regular file")));
    }
    Ok(())
}

/// The manifest's own sanity: its schema, the cache schema of its sidecars, how many files it
/// lists, and sizes within the bounds an engine or timing cache may have.
fn check_manifest(manifest: &PackManifest) -> Result<(), PackError> {
    if manifest.schema != PACK_SCHEMA {
        return Err(PackError::Malformed(format!("pack schema {} (this build reads {PACK_SCHEMA})", manifest.schema)));
    }
    if manifest.engines.len() > MAX_PACK_FILES || manifest.timing_caches.len() > MAX_PACK_FILES {
        return Err(PackError::Malformed(format!("it lists more than {MAX_PACK_FILES} engines or timing caches")));
    }
    for engine in &manifest.engines {
        let sidecar = &engine.sidecar;
        if sidecar.schema != CACHE_SCHEMA {
            return Err(PackError::Malformed(format!(
                "engine {}: cache schema {} (this build reads {CACHE_SCHEMA})",
                sidecar.key, sidecar.schema
            )));
        }
        if sidecar.key != sidecar.identity.key() {
            return Err(PackError::Malformed(format!("engine {}: its key does not match its fields", sidecar.key)));
        }
        if sidecar.engine_bytes > MAX_ENGINE_BYTES {
            return Err(PackError::TooLarge {
                what: format!("engine {}", sidecar.key),
                bytes: sidecar.engine_bytes,
                max: MAX_ENGINE_BYTES,
            });
        }
    }
    for cache in &manifest.timing_caches {
        if cache.sidecar.schema != CACHE_SCHEMA {
            return Err(PackError::Malformed(format!(
                "timing cache of {}: cache schema {} (this build reads {CACHE_SCHEMA})",
                cache.model, cache.sidecar.schema
            )));
        }
        if cache.sidecar.cache_bytes > MAX_TIMING_CACHE_BYTES {
            return Err(PackError::TooLarge {
                what: format!("timing cache of {}", cache.model),
                bytes: cache.sidecar.cache_bytes,
                max: MAX_TIMING_CACHE_BYTES,
            });
        }
    }
    Ok(())
}

/// The bytes of `entry`, whose header must claim at most `max` (checked before allocating), and
/// whose sha256 must be `sha256` when given.
fn read_entry<R: Read>(
    entry: tar::Entry<'_, R>,
    what: &str,
    max: u64,
    sha256: Option<&str>,
) -> Result<Vec<u8>, PackError> {
    let size = entry.header().size()?;
    if size > max {
        return Err(PackError::TooLarge { what: what.to_owned(), bytes: size, max });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    entry.take(size).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != size {
        return Err(PackError::Malformed(format!("{what} is cut short")));
    }
    if sha256.is_some_and(|sha256| sha256_hex(&bytes) != sha256) {
        return Err(PackError::Checksum { what: what.to_owned() });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::backend::fleet::pack::fixtures::{identity, orin_nano, pack, TENSORRT};

    fn signed(key: &PrivateKey) -> Vec<u8> {
        let identity = identity(b"ssd", TENSORRT, &orin_nano());
        pack("ssd", &identity, Some((TENSORRT, &orin_nano()))).to_bytes(Some(key)).expect("pack")
    }

    fn read(bytes: &[u8], trust: Trust) -> Result<(Pack, Option<String>), PackError> {
        Pack::read(bytes, &trust)
    }

    /// The offset of `needle` in `haystack` (a file's data inside the archive).
    fn find(haystack: &[u8], needle: &[u8]) -> usize {
        haystack.windows(needle.len()).position(|w| w == needle).expect("present")
    }

    #[test]
    fn a_signed_pack_round_trips_and_names_its_signer() {
        let key = PrivateKey::generate().expect("key");
        let original = pack("ssd", &identity(b"ssd", TENSORRT, &orin_nano()), Some((TENSORRT, &orin_nano())));
        let bytes = original.to_bytes(Some(&key)).expect("pack");
        let (read_back, signer) = read(&bytes, Trust::Key(key.public())).expect("a valid pack");
        assert_eq!(read_back, original);
        assert_eq!(signer, Some(key.public().id()));
    }

    #[test]
    fn an_unsigned_pack_is_read_only_without_verification() {
        let unsigned = pack("ssd", &identity(b"ssd", TENSORRT, &orin_nano()), None).to_bytes(None).expect("pack");
        let key = PrivateKey::generate().expect("key");
        assert!(matches!(
            read(&unsigned, Trust::Key(key.public())),
            Err(PackError::Signature(SignatureError::Missing))
        ));
        let (_, signer) = read(&unsigned, Trust::Unverified).expect("verify = false");
        assert_eq!(signer, None);
    }

    #[test]
    fn a_pack_signed_with_another_key_is_refused_naming_both_keys() {
        let fleet = PrivateKey::generate().expect("key");
        let stranger = PrivateKey::generate().expect("key");
        let message = read(&signed(&stranger), Trust::Key(fleet.public())).expect_err("another key").to_string();
        assert!(message.contains(&stranger.public().id()) && message.contains(&fleet.public().id()), "{message}");
    }

    #[test]
    fn a_manifest_changed_after_signing_is_refused() {
        let key = PrivateKey::generate().expect("key");
        let mut bytes = signed(&key);
        // "Orin Nano" → "Orin NanX": same length, so the archive stays well-formed.
        let at = find(&bytes, b"Orin Nano Developer Kit");
        bytes[at + 8] = b'X';
        assert!(matches!(
            read(&bytes, Trust::Key(key.public())),
            Err(PackError::Signature(SignatureError::Invalid(_)))
        ));
    }

    #[test]
    fn a_corrupt_engine_is_refused_by_its_checksum() {
        let key = PrivateKey::generate().expect("key");
        let mut bytes = signed(&key);
        let at = find(&bytes, &crate::backend::fleet::pack::fixtures::engine_bytes(7)[..64]);
        bytes[at + 100] ^= 0x40;
        match read(&bytes, Trust::Key(key.public())) {
            Err(PackError::Checksum { what }) => assert_eq!(what, "engines/0"),
            other => panic!("expected a checksum refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_truncated_pack_is_refused() {
        let key = PrivateKey::generate().expect("key");
        let bytes = signed(&key);
        for cut in [0, 100, 512, 1500, bytes.len() / 2, bytes.len() - 1100] {
            assert!(read(&bytes[..cut], Trust::Key(key.public())).is_err(), "cut at {cut} was accepted");
        }
    }

    #[test]
    fn an_entry_claiming_more_than_its_bound_is_refused_before_it_is_read() {
        // A manifest entry that claims 8 GiB: refused from its header, nothing allocated.
        let mut header = tar::Header::new_ustar();
        header.set_path(MANIFEST_ENTRY).expect("path");
        header.set_size(8 << 30);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(&[b'{'; 512]);
        match read(&bytes, Trust::Unverified) {
            Err(PackError::TooLarge { what, bytes, .. }) => {
                assert_eq!((what.as_str(), bytes), (MANIFEST_ENTRY, 8 << 30))
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn entries_out_of_order_foreign_or_extra_are_refused() {
        let identity = identity(b"ssd", TENSORRT, &orin_nano());
        let good = pack("ssd", &identity, None);
        let manifest = manifest_bytes(&good.manifest);
        let archive = |entries: &[(&str, &[u8])]| {
            let mut archive = tar::Builder::new(Vec::new());
            for (path, bytes) in entries {
                append(&mut archive, path, bytes).expect("append");
            }
            archive.into_inner().expect("archive")
        };
        let engine = good.engines[0].as_slice();
        let cases: [(&str, Vec<u8>); 4] = [
            ("engine first", archive(&[("engines/0", engine), (MANIFEST_ENTRY, &manifest)])),
            ("another file name", archive(&[(MANIFEST_ENTRY, &manifest), ("engines/1", engine)])),
            (
                "an extra file",
                archive(&[(MANIFEST_ENTRY, &manifest), ("engines/0", engine), ("plugin.so", b"\x7fELF")]),
            ),
            ("a missing engine", archive(&[(MANIFEST_ENTRY, &manifest)])),
        ];
        for (case, bytes) in cases {
            assert!(matches!(read(&bytes, Trust::Unverified), Err(PackError::Malformed(_))), "{case} was accepted");
        }
        let mut symlink = tar::Builder::new(Vec::new());
        append(&mut symlink, MANIFEST_ENTRY, &manifest).expect("append");
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        symlink.append_link(&mut header, "engines/0", "/etc/shadow").expect("link");
        assert!(matches!(
            read(&symlink.into_inner().expect("archive"), Trust::Unverified),
            Err(PackError::Malformed(_))
        ));
    }

    #[test]
    fn a_pack_of_another_schema_is_refused() {
        let identity = identity(b"ssd", TENSORRT, &orin_nano());
        let mut future = pack("ssd", &identity, None);
        future.manifest.schema = PACK_SCHEMA + 1;
        let message = read(&future.to_bytes(None).expect("pack"), Trust::Unverified).expect_err("schema").to_string();
        assert!(message.contains("pack schema 2"), "{message}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Hostile bytes: flipped, cut or overwritten anywhere, a pack is refused or read, never a panic.
        #[test]
        fn damaged_packs_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
                                     cut in any::<prop::sample::Index>()) {
            let key = PrivateKey::generate().expect("key");
            let mut bytes = signed(&key);
            for (at, value) in flips {
                let at = at.index(bytes.len());
                bytes[at] = value;
            }
            let cut = cut.index(bytes.len() + 1);
            let _ = read(&bytes[..cut], Trust::Key(key.public()));
            let _ = read(&bytes[..cut], Trust::Unverified);
        }
    }
}
