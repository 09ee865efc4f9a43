//! The preprocessing benchmark: the CPU backend's preprocessing of one frame with nothing else
//! running, the uncontended time that the one-frame and the cameras benchmarks hold their
//! pipeline's preprocessing against.
//!
//! Owns: [`preprocess_alone`]. Must not: run a model or touch a session.

use std::time::Instant;

use super::error::BenchError;
use super::summary::{summarise, StageSummary};
use crate::frame::FrameSlot;
use crate::preprocess::{FastPreprocessor, PreprocessSpec};

/// Preprocesses the frame in `slot` as the CPU backend's ONNX Runtime session does (the fast
/// path, its rows shared out among `threads` tasks: the calling thread's and those of a pool of
/// `threads` − 1 threads, none for 1), `warmup + iterations` times with nothing else running, and
/// summarises the last `iterations`. (An rten session shares out the same rows inside its own pool.)
pub(super) fn preprocess_alone(
    slot: &FrameSlot,
    spec: &PreprocessSpec,
    threads: usize,
    warmup: usize,
    iterations: usize,
) -> Result<StageSummary, BenchError> {
    let pool = match threads {
        0 | 1 => None,
        _ => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads - 1)
                .build()
                .map_err(|e| BenchError::Setup(format!("preprocessing threads: {e}")))?,
        ),
    };
    let mut preprocessor = FastPreprocessor::new();
    let mut tensor = vec![0u8; spec.bytes()];
    let mut samples = Vec::with_capacity(iterations);
    let (frame, meta) = (slot.data(), slot.meta());
    for iteration in 0..warmup + iterations {
        let started = Instant::now();
        let outcome = match &pool {
            Some(pool) => preprocessor.run_beside(pool, frame, meta, spec, &mut tensor),
            None => preprocessor.run(frame, meta, spec, &mut tensor, 1),
        };
        outcome.map_err(|e| BenchError::Frame { iteration, message: e.to_string() })?;
        if iteration >= warmup {
            samples.push(started.elapsed());
        }
    }
    Ok(summarise(samples))
}
