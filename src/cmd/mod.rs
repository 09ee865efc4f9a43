//! The subcommands, each wiring the stages below for one job: `run` (the daemon), `detect`
//! (one-shot), `probe`, `bench` and `selftest`.
//!
//! Owns: start-up order and orchestration. Must not: do a stage's work itself; one command never
//! calls into another (shared steps live in the stage they belong to).

pub mod bench;
pub mod detect;
pub mod probe;
pub mod run;
pub mod selftest;
