//! What can go wrong in a benchmark: its setup (a file, a model, a worker that failed) or one
//! iteration of it.
//!
//! Owns: [`BenchError`]. Must not: run anything.

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Setup(String),
    #[error("iteration {iteration}: {message}")]
    Frame { iteration: usize, message: String },
}
