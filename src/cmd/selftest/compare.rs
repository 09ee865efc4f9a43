//! `selftest --compare` (and `selftest`'s `engine_agreement` check): the model's engine against its
//! CPU reference on pictures, per label, as the daemon checks a new engine before it serves.
//!
//! Owns: which two backends are compared (the configured engine, TensorRT or the stand-in, against
//! the configured CPU engine; without an engine, rten against ONNX Runtime on the same model),
//! loading the pictures, and [`CompareReport`] with its text. The comparison itself and its
//! verdict are `crate::infer::agreement`'s. Must not: cache or refuse anything (it reports).

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::backend::engine::chain::unchecked;
use crate::backend::load::{self, BuildProgress};
use crate::backend::Backend;
use crate::config::{BackendChoice, Config, CpuEngine, Fallback};
use crate::decode::DecodeParams;
use crate::detection::Labels;
use crate::infer::agreement::{compare_detectors, Agreement, Verdict};
use crate::infer::engine_build::sample_frames;
use crate::model::{DeviceSpec, ModelSpec};

/// Pictures compared at most.
const MAX_PICTURES: usize = 64;

/// One comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareReport {
    /// What runs the model as the reference, and as the candidate (`BackendInfo::detail`'s engine).
    pub reference: String,
    pub candidate: String,
    pub pictures: String,
    pub min_agreement: f64,
    pub agreement: Agreement,
    /// `agrees`, `inconclusive` or why it disagrees.
    pub verdict: String,
    pub passed: bool,
}

impl CompareReport {
    fn new(reference: &dyn Backend, candidate: &dyn Backend, pictures: &Path, min: f64, agreement: Agreement) -> Self {
        let name = |backend: &dyn Backend| {
            let info = backend.info();
            backend.engine().map_or_else(|| info.kind.to_owned(), |engine| format!("{} ({engine})", info.kind))
        };
        let (verdict, passed) = match agreement.verdict(min) {
            Verdict::Agrees => ("agrees".to_owned(), true),
            Verdict::Inconclusive => ("inconclusive: no object on any picture".to_owned(), true),
            Verdict::Disagrees(why) => (why, false),
        };
        CompareReport {
            reference: name(reference),
            candidate: name(candidate),
            pictures: pictures.display().to_string(),
            min_agreement: min,
            agreement,
            verdict,
            passed,
        }
    }

    /// The report for a terminal: what was compared, the per-label table, the verdict.
    pub fn render_text(&self) -> String {
        format!(
            "{} against {} on {} ({} picture(s)), boxes matched per label at IoU >= 0.5:\n{}\n{}: {}\n",
            self.candidate,
            self.reference,
            self.pictures,
            self.agreement.frames,
            self.agreement.table(),
            if self.passed { "PASS" } else { "FAIL" },
            self.verdict
        )
    }
}

/// `[model]`'s decode settings and labels, as `run` decodes with them.
fn decoding(config: &Config, model: &ModelSpec) -> Result<(DecodeParams, Labels), String> {
    let labels = Labels::load(&model.labels).map_err(|e| e.to_string())?;
    let params = DecodeParams::new(model, &config.model, &labels).map_err(|e| format!("model.classes: {e}"))?;
    Ok((params, labels))
}

/// `candidate` against `reference` on the pictures at `pictures` (a file or a directory).
pub fn compare_on(
    config: &Config,
    reference: &dyn Backend,
    candidate: &dyn Backend,
    pictures: &Path,
) -> Result<CompareReport, String> {
    let model = ModelSpec::from_config(config).map_err(|e| e.to_string())?;
    let (params, labels) = decoding(config, &model)?;
    let frames = sample_frames(pictures, &config.limits, MAX_PICTURES);
    if frames.is_empty() {
        return Err(format!("no picture to compare on in {}", pictures.display()));
    }
    let agreement = compare_detectors(reference, candidate, &frames, &params, &labels).map_err(|e| e.to_string())?;
    Ok(CompareReport::new(reference, candidate, pictures, config.engine.min_agreement, agreement))
}

/// `selftest --compare`: the configured engine against the configured CPU engine, or, where no
/// engine runs here, rten against ONNX Runtime.
pub fn compare(
    config: &Config,
    pictures: &Path,
    progress: &mut dyn FnMut(BuildProgress),
) -> Result<CompareReport, String> {
    let model = ModelSpec::from_config(config).map_err(|e| e.to_string())?;
    let device = DeviceSpec::from_config(config);
    let (reference, candidate) = match engine(&model, &device, progress)? {
        Some(engine) => (load::load_cpu(&model, &device).map_err(|e| format!("the CPU reference: {e}"))?, engine),
        None => {
            let on = |cpu_engine| DeviceSpec { backend: BackendChoice::Cpu, cpu_engine, ..device.clone() };
            let reference = load::load_cpu(&model, &on(CpuEngine::Onnxruntime)).map_err(|e| {
                format!("no TensorRT here, so the comparison is rten against ONNX Runtime, which did not load: {e}")
            })?;
            (reference, load::load_cpu(&model, &on(CpuEngine::Rten)).map_err(|e| e.to_string())?)
        }
    };
    compare_on(config, reference.as_ref(), candidate.as_ref(), pictures)
}

/// The model's engine when one builds and runs here (loaded or built, unchecked: checking it is
/// the point), else `None`.
fn engine(
    model: &ModelSpec,
    device: &DeviceSpec,
    progress: &mut dyn FnMut(BuildProgress),
) -> Result<Option<Arc<dyn Backend>>, String> {
    if device.backend == BackendChoice::Cpu || load::toolchain(device).is_err() {
        return Ok(None);
    }
    let strict = DeviceSpec { backend: BackendChoice::Tensorrt, fallback: Fallback::None, ..device.clone() };
    load::load_backend(model, &strict, progress, &mut unchecked).map(Some).map_err(|e| e.to_string())
}
