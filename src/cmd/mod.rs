//! The subcommands that wire the stages below for one job: `run` (the daemon), `detect`
//! (one-shot), `probe`, `bench`, `selftest` and `engine` (engine packs and their keys). `check-config` (the config and `run`'s start-up
//! checks, [`run::preflight`]) and `build-engine` (`crate::backend::load::build_engine`) are a few
//! lines each and live in `main.rs`.
//!
//! Owns: start-up order and orchestration; `models`, which is no command: the named models as the
//! daemon runs them (lanes, classifiers, their memory), wired alike by `run`, `bench` and
//! `selftest`; `backends`, `run`'s choice per model between serving now and serving on the CPU
//! while its engine is built; and `outlets`, no command either: the outlets the daemon builds, one
//! line each, and the config every command reads with them. Must not: do a stage's work itself; one command never calls into another (shared
//! steps live in the stage they belong to, or in `models` when they wire several stages).

pub mod backends;
pub mod bench;
pub mod detect;
pub mod engine;
pub mod models;
pub mod outlets;
pub mod probe;
pub mod run;
pub mod selftest;
