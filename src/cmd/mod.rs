//! The subcommands that wire the stages below for one job: `run` (the daemon), `detect`
//! (one-shot), `probe`, `bench` and `selftest`. `check-config` (the config and `run`'s start-up
//! checks, [`run::preflight`]) and `build-engine` (`crate::backend::trt::build_engine`) are a few
//! lines each and live in `main.rs`.
//!
//! Owns: start-up order and orchestration. Must not: do a stage's work itself; one command never
//! calls into another (shared steps live in the stage they belong to).

pub mod bench;
pub mod detect;
pub mod probe;
pub mod run;
pub mod selftest;
