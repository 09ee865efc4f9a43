//! Signing a webhook's requests: the header that lets a receiver check that a request came from
//! this daemon and was not changed on the way (HMAC-SHA256 of the body with a shared key, as
//! GitHub's `X-Hub-Signature-256`).
//!
//! Owns: [`Signer`] (the key, read once at start from `secret_file`, never logged) and
//! [`SIGNATURE_HEADER`]. Must not: keep the key anywhere but in the signer.

use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::sys::files::{self, ReadError, MAX_PASSWORD_BYTES};

/// The header every signed request carries: `sha256=<64 lower-case hex digits>`.
pub const SIGNATURE_HEADER: &str = "x-jetson-detectd-signature";

/// Why the key could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("`{key}` {path}: {source}")]
    Read { key: String, path: PathBuf, source: ReadError },
    #[error("`{key}` {path}: the first line is empty")]
    Empty { key: String, path: PathBuf },
}

/// Signs request bodies with one key.
#[derive(Clone)]
pub struct Signer {
    key: Vec<u8>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(<key hidden>)")
    }
}

impl Signer {
    /// The first line of `path` (a regular file of at most [`MAX_PASSWORD_BYTES`], read without
    /// blocking), trimmed; `key` names it in an error.
    pub fn read(path: &Path, key: &str) -> Result<Signer, SecretError> {
        let text = files::read_to_string(path, MAX_PASSWORD_BYTES).map_err(|source| SecretError::Read {
            key: key.to_owned(),
            path: path.to_path_buf(),
            source,
        })?;
        let first = text.lines().next().unwrap_or_default().trim();
        if first.is_empty() {
            return Err(SecretError::Empty { key: key.to_owned(), path: path.to_path_buf() });
        }
        Ok(Signer { key: first.as_bytes().to_vec() })
    }

    #[cfg(test)]
    pub fn new(key: &[u8]) -> Signer {
        Signer { key: key.to_vec() }
    }

    /// The signature header's value for `body`.
    pub fn sign(&self, body: &[u8]) -> String {
        // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else { return String::new() };
        mac.update(body);
        let digest = mac.finalize().into_bytes();
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        format!("sha256={hex}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231, test case 2: the key "Jefe".
    #[test]
    fn the_signature_is_rfc_4231s_hmac_sha256_in_lower_case_hex() {
        let signer = Signer::new(b"Jefe");
        assert_eq!(
            signer.sign(b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_key_is_the_files_first_line_never_shown_and_an_empty_one_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secret");
        std::fs::write(&path, "  Jefe \nsecond line\n").expect("write");
        let signer = Signer::read(&path, "webhook[0].secret_file").expect("a key");
        assert_eq!(signer.sign(b"x"), Signer::new(b"Jefe").sign(b"x"));
        assert!(!format!("{signer:?}").contains("Jefe"));
        std::fs::write(&path, "\n").expect("write");
        let error = Signer::read(&path, "webhook[0].secret_file").expect_err("empty").to_string();
        assert!(error.contains("`webhook[0].secret_file`") && error.contains("empty"), "{error}");
        let error = Signer::read(Path::new("/dev/zero"), "webhook[0].secret_file").expect_err("not a file");
        assert!(error.to_string().contains("/dev/zero"), "{error}");
    }
}
