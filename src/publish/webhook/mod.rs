//! The webhook outlet: tracking events posted to HTTP(S) receivers, one `[[webhook]]` each, signed,
//! retried, bounded — an outlet that lives here whole (its section, checks, start, figures and
//! stop) and registers itself in one line (`crate::cmd::outlets`).
//!
//! One job per file: [`config`] (the section, its defaults in `config.toml`, its checks),
//! [`kind`] (the registration), [`outlet`] (which events, encoded, queued), [`delivery`] (the
//! queue and the task: retries, back-off, the flush at shutdown), [`client`] (one request, HTTP or
//! TLS) and [`signature`] (HMAC-SHA256 of the body).

pub mod client;
pub mod config;
pub mod delivery;
pub mod kind;
pub mod outlet;
pub mod signature;

pub use kind::OUTLET;
