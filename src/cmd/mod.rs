//! The subcommands that wire the stages below for one job: `run` (the daemon), `detect`
//! (one-shot), `probe`, `bench`, `selftest` and `engine` (engine packs and their keys).
//! `check-config` (the config and `run`'s start-up checks, [`preflight::preflight`]) and
//! `build-engine` (`crate::backend::load::build_engine`) are a few lines each and live in `main.rs`.
//!
//! Owns: start-up order and orchestration, and the parts of the daemon's wiring that are no
//! command: `models` (the named models as the daemon runs them: lanes, classifiers, their memory,
//! wired alike by `run`, `bench` and `selftest`), `backends` (`run`'s choice per model between
//! serving now and serving on the CPU while its engine is built), `outlets` (the outlets the daemon builds, one line
//! each, and the config every command reads with them), `preflight` (what `run` and `check-config`
//! check before anything starts), `reload` (SIGHUP), `zone_changes` and `control_changes` (the
//! page's zones and the run-time controls as the running daemon applies them) and `error` (why
//! the daemon stopped). Must not: do a stage's work itself; one command never calls into another
//! (shared steps live in the stage they belong to, or in one of these parts when they wire several
//! stages).

pub mod backends;
pub mod bench;
pub mod control_changes;
pub mod detect;
pub mod engine;
pub mod error;
pub mod models;
pub mod outlets;
pub mod preflight;
pub mod probe;
pub mod reload;
pub mod run;
pub mod selftest;
pub mod zone_changes;
