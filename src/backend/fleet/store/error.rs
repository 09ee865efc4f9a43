//! Why a store operation failed: the store's own errors, in words an operator can act on.

/// A failed lookup, download, upload or lease step. Every one means "build locally" to the caller;
/// the message says why, for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{store}: cannot be opened: {message}")]
    Setup { store: String, message: String },
    #[error("{store}: {message}")]
    Failed { store: String, message: String },
    #[error("{store}: refused our credentials for {what}: {message}")]
    Denied { store: String, what: String, message: String },
    #[error("{store}: no answer within {seconds} s (engine.store.timeout_s) for {what}")]
    TimedOut { store: String, what: String, seconds: u64 },
    #[error("{store}: {what} is {bytes} bytes, more than engine.store.max_pack_mib allows ({max})")]
    TooLarge { store: String, what: String, bytes: u64, max: u64 },
    #[error("{store}: stopped: the daemon is shutting down")]
    Cancelled { store: String },
}
