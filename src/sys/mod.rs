//! What the daemon takes from the operating system, made safe to use everywhere: locks that
//! survive a panicked holder ([`lock`]), bounded, non-blocking reads of the files a config or a
//! command names and atomic replacement of the files the daemon writes ([`files`]), the wire
//! form of a wall-clock time ([`time`]), the resource limits the daemon sizes itself by
//! ([`limits`]), the room left on a file system ([`disk`]), the CPUs a thread may run on
//! ([`affinity`]), who may read a file ([`access`]: users, groups, permission bits), what a log
//! line may cost when the outside world decides how often it comes and what it holds
//! ([`log_limit`]), what a failure means to systemd ([`exit`]) and which SIMD instructions the
//! CPU runs ([`simd`]).
//!
//! Owns: these rules and nothing else. Must not: import any other module of the crate (every
//! stage may use this one, so it stands below them all).

pub mod access;
pub mod affinity;
pub mod disk;
pub mod exit;
pub mod files;
pub mod limits;
pub mod lock;
pub mod log_limit;
pub mod simd;
pub mod time;
