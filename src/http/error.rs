//! Why the HTTP stage cannot start: its token or its port.
//!
//! Owns: [`HttpError`] and whether a restart may find things otherwise. Must not: read or bind
//! anything itself.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::sys::exit::{Classified, ExitClass};

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("`http.token_file` {path}: {reason}")]
    Token { path: PathBuf, reason: String },
    #[error("`http.listen` {address}: cannot listen: {source}")]
    Listen { address: SocketAddr, source: std::io::Error },
}

impl HttpError {
    /// Whether a restart may find things otherwise: the port is taken by another process (the one
    /// before, still shutting down) or the address is not on the machine yet (DHCP at boot). Any
    /// other failure (a token file, a port only root may take) is the config's.
    pub fn is_transient(&self) -> bool {
        use std::io::ErrorKind::{AddrInUse, AddrNotAvailable};
        matches!(self, HttpError::Listen { source, .. } if matches!(source.kind(), AddrInUse | AddrNotAvailable))
    }
}

impl Classified for HttpError {
    /// A token file that cannot be read, or a port only root may take: the config's (exit 78); a
    /// port another process holds or an address not up yet: a restart may find them free (exit 1).
    fn exit_class(&self) -> ExitClass {
        ExitClass::configuration_if(!self.is_transient())
    }
}
