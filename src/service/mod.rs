//! The daemon's life as a service: systemd notify and the watchdog, the stop signals, telemetry,
//! logging, and what every message of the daemon carries (its run, the envelope of its JSON).
//!
//! Owns: what the operator and systemd see of the running daemon. Must not: process frames or
//! decide what is published per frame.

pub mod envelope;
pub mod logging;
pub mod notify;
pub mod run_id;
pub mod stop_signals;
pub mod telemetry;
