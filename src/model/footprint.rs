//! Whether the engines of the models a daemon loads fit the GPU's free memory, decided before
//! TensorRT builds any of them.
//!
//! Owns: the estimate of an engine's device memory before the engine exists ([`EngineEstimate`],
//! [`ENGINE_BYTES_PER_WEIGHT_BYTE`]) and the decision ([`check_fit`]). Must not: read files or ask
//! the driver: the callers give the weights' bytes and the free memory.
//!
//! What is estimated: TensorRT tells an engine's memory only once it is built, which takes
//! minutes on a Jetson; two models that cannot both fit would fail the second build after the
//! first, or run the board out of its shared memory. The weights are known from the file, so an
//! engine is counted as its weights times a factor.

use std::fmt::Write as _;

use crate::sys::exit::{Classified, ExitClass};

/// An engine is estimated at this many bytes per byte of its weights (the ONNX file's
/// initializers, or a prebuilt engine's file): the weights themselves, at most as large on the
/// device as fp32 weights in the file, and as much again for activations, the execution context
/// and TensorRT's own state. fp16 and int8 engines take less: the estimate errs towards refusing,
/// which costs a config edit, where a failed build costs minutes.
pub const ENGINE_BYTES_PER_WEIGHT_BYTE: u64 = 2;

/// One model's estimated engine memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineEstimate {
    /// The config table of the model: `model` or `models.<name>`.
    pub model: String,
    pub bytes: u64,
}

impl EngineEstimate {
    /// The engine of the model at config table `model`, whose weights take `weight_bytes`.
    pub fn from_weights(model: impl Into<String>, weight_bytes: u64) -> EngineEstimate {
        EngineEstimate { model: model.into(), bytes: weight_bytes.saturating_mul(ENGINE_BYTES_PER_WEIGHT_BYTE) }
    }
}

/// The models' engines together need more than the GPU's free memory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the engines of {models} would not fit the GPU's free memory: about {needed_mib} MiB together \
     (estimated as {ENGINE_BYTES_PER_WEIGHT_BYTE} × their weights) against {free_mib} MiB free; \
     run fewer or smaller models, or free GPU memory"
)]
pub struct FitError {
    /// Each model with its estimate, e.g. "`model` (about 48 MiB) and `models.yard` (about 12 MiB)".
    pub models: String,
    pub needed_mib: u64,
    pub free_mib: u64,
}

impl Classified for FitError {
    /// Models too large for the GPU together: the config must run fewer or smaller ones.
    fn exit_class(&self) -> ExitClass {
        ExitClass::Configuration
    }
}

/// Refuses `engines` whose estimates add up to more than `free_bytes`, naming every one of them.
pub fn check_fit(engines: &[EngineEstimate], free_bytes: u64) -> Result<(), FitError> {
    let needed = engines.iter().fold(0u64, |sum, engine| sum.saturating_add(engine.bytes));
    if needed <= free_bytes {
        return Ok(());
    }
    let mut models = String::new();
    for (index, engine) in engines.iter().enumerate() {
        let separator = match index {
            0 => "",
            last if last + 1 == engines.len() => " and ",
            _ => ", ",
        };
        let _ = write!(models, "{separator}`{}` (about {} MiB)", engine.model, mib(engine.bytes));
    }
    Err(FitError { models, needed_mib: mib(needed), free_mib: mib(free_bytes) })
}

/// Whole MiB, rounded up: an estimate of 1 byte is "about 1 MiB", never 0.
fn mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn two_models_that_fit_together_are_accepted() {
        let engines =
            [EngineEstimate::from_weights("model", 100 * MIB), EngineEstimate::from_weights("models.yard", 50 * MIB)];
        assert_eq!(engines[0].bytes, 200 * MIB);
        assert_eq!(check_fit(&engines, 300 * MIB), Ok(()));
        assert_eq!(check_fit(&[], 0), Ok(()));
    }

    #[test]
    fn two_models_that_would_not_fit_together_are_refused_naming_both() {
        let engines =
            [EngineEstimate::from_weights("model", 100 * MIB), EngineEstimate::from_weights("models.yard", 50 * MIB)];
        let error = check_fit(&engines, 299 * MIB).expect_err("300 MiB do not fit in 299");
        assert_eq!((error.needed_mib, error.free_mib), (300, 299));
        assert_eq!(
            error.to_string(),
            "the engines of `model` (about 200 MiB) and `models.yard` (about 100 MiB) would not fit the GPU's free \
             memory: about 300 MiB together (estimated as 2 × their weights) against 299 MiB free; run fewer or \
             smaller models, or free GPU memory"
        );
        let three = [engines[0].clone(), engines[1].clone(), EngineEstimate::from_weights("models.gate", 1)];
        assert!(check_fit(&three, 0)
            .expect_err("none fit")
            .models
            .ends_with(", `models.yard` (about 100 MiB) and `models.gate` (about 1 MiB)"));
    }

    #[test]
    fn weights_too_large_to_count_are_refused_rather_than_wrapped() {
        let engines =
            [EngineEstimate::from_weights("model", u64::MAX), EngineEstimate::from_weights("models.yard", u64::MAX)];
        assert_eq!(check_fit(&engines, u64::MAX - 1).expect_err("too large").free_mib, mib(u64::MAX - 1));
    }
}
