//! The `inference`, `agreement` and `engine_agreement` checks: the images (`--images`, the first
//! `images` camera's, or the bundled samples) through the configured backend, and through the CPU
//! backend to compare with when the configured one is on the GPU, image by image and per label.
//!
//! Owns: those checks, the images' results ([`ImageResult`]) and where the images come from
//! ([`image_source`]). Must not: time inferences (`timing` does).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::agreement::{compare, Agreement, Tolerance};
use super::compare;
use super::options::SelftestOptions;
use super::report::{ImageResult, SelftestReport, Status};
use crate::backend::engine::chain::unchecked;
use crate::backend::load;
use crate::backend::{Backend, InferenceSession};
use crate::config::{BackendChoice, Config, SourceConfig};
use crate::decode::{DecodeParams, Decoder};
use crate::detection::{Detection, Labels};
use crate::frame::FrameSlot;
use crate::infer::step;
use crate::model::{DeviceSpec, ModelSpec};
use crate::source::kinds::images::ImagesConfig;
use crate::source::{image_decode, images};

/// The images to run: `--images`, else the first `images` camera's path, else the bundled samples.
pub fn image_source(config: &Config, options: &SelftestOptions) -> PathBuf {
    options
        .images
        .clone()
        .or_else(|| {
            config.cameras.iter().find_map(|camera| match &camera.source {
                SourceConfig::Images(images) => Some(images.path.clone()),
                _ => None,
            })
        })
        .unwrap_or_else(|| crate::config::data_dir().join("models/samples"))
}

/// `config` with its first camera reading `images`: the GPU backend sizes its frame staging
/// buffer for the configured cameras, which may deliver smaller frames than the sample images. The
/// number of cameras, and so the engine, stays the same.
pub(super) fn sized_for_images(config: &Config, images: &Path) -> Config {
    let mut sized = config.clone();
    if let Some(camera) = sized.cameras.first_mut() {
        camera.source = SourceConfig::Images(ImagesConfig::once(images.to_path_buf()));
    }
    sized
}

/// Decoding state shared by both backends' runs.
struct Detector {
    decoder: Decoder,
    labels: Labels,
    threshold: f32,
}

impl Detector {
    fn detect(
        &mut self,
        backend: &dyn Backend,
        session: &mut dyn InferenceSession,
        slot: &FrameSlot,
    ) -> Result<Vec<Detection>, String> {
        let mut detections = Vec::new();
        step::process(session, &mut self.decoder, backend.spec(), slot, &mut detections).map_err(|e| e.to_string())?;
        Ok(detections)
    }

    fn found(&self, detections: &[Detection]) -> String {
        let found: Vec<String> =
            detections.iter().map(|d| format!("{} {:.2}", self.labels.name(d.class_id), d.score)).collect();
        if found.is_empty() {
            "nothing".into()
        } else {
            found.join(", ")
        }
    }
}

/// The CPU backend, to compare the configured GPU backend with.
fn load_cpu_reference(config: &Config) -> Result<Arc<dyn Backend>, String> {
    let model = ModelSpec::from_config(config).map_err(|e| e.to_string())?;
    let cpu = DeviceSpec { backend: BackendChoice::Cpu, ..DeviceSpec::from_config(config) };
    load::load_backend(&model, &cpu, |_| {}, &mut unchecked).map_err(|e| e.to_string())
}

/// The engine against the CPU backend on the images, per label, judged by `engine.min_agreement`
/// as `run` judges a new engine.
pub(super) fn check_engine_agreement(
    config: &Config,
    engine: &dyn Backend,
    images: &Path,
    report: &mut SelftestReport,
) {
    let compared = load_cpu_reference(config)
        .and_then(|reference| compare::compare_on(config, reference.as_ref(), engine, images));
    match compared {
        Ok(compared) => {
            let status = if compared.passed { Status::Pass } else { Status::Fail };
            report.check("engine_agreement", status, format!("{}: {}", compared.agreement.summary(), compared.verdict));
            report.compare = Some(compared);
        }
        Err(error) => report.check("engine_agreement", Status::Fail, error),
    }
}

/// Runs every image through the configured backend (and the CPU backend, to compare). Returns
/// the first image that ran, for the timing.
pub(super) fn run_images(
    config: &Config,
    source: &Path,
    backend: Option<&dyn Backend>,
    session: Option<&mut Box<dyn InferenceSession>>,
    uses_gpu: bool,
    report: &mut SelftestReport,
) -> Option<PathBuf> {
    let (Some(backend), Some(session)) = (backend, session) else {
        report.check("inference", Status::Fail, "no backend to run the images on");
        report.check("agreement", Status::Skip, "no backend to compare");
        return None;
    };
    let detector = ModelSpec::from_config(config).map_err(|e| e.to_string()).and_then(|model| {
        let labels = Labels::load(&model.labels).map_err(|e| e.to_string())?;
        let params = DecodeParams::new(&model, &config.model, &labels).map_err(|e| format!("model.classes: {e}"))?;
        Ok(Detector { threshold: params.score_threshold, decoder: Decoder::new(params), labels })
    });
    let files = images::list_images(source).map_err(|e| e.to_string());
    let (mut detector, files) = match (detector, files) {
        (Ok(detector), Ok(files)) => (detector, files),
        (Err(why), _) | (_, Err(why)) => {
            report.check("inference", Status::Fail, why);
            report.check("agreement", Status::Skip, "no images ran");
            return None;
        }
    };
    let reference = if uses_gpu { Some(load_cpu_reference(config)) } else { None };
    let mut cpu = match &reference {
        Some(Ok(cpu)) => match cpu.new_session() {
            Ok(session) => Some((cpu.as_ref(), session)),
            Err(error) => {
                report.check("agreement", Status::Fail, format!("CPU backend: {error}"));
                None
            }
        },
        Some(Err(error)) => {
            report.check("agreement", Status::Fail, format!("CPU backend: {error}"));
            None
        }
        None => None,
    };
    let mut slot = match backend.slot_memory() {
        Ok(memory) => FrameSlot::new(memory),
        Err(error) => {
            report.check("inference", Status::Fail, format!("frame memory: {error}"));
            return None;
        }
    };
    let tolerance = Tolerance::default();
    let mut first_ran = None;
    for file in &files {
        let name = file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
        let mut result = ImageResult {
            file: name,
            detections: 0,
            cpu_detections: None,
            agreement: None,
            agree: None,
            found: String::new(),
            problem: None,
        };
        let detected = image_decode::decode_file(file, &config.limits, &mut slot)
            .map_err(|e| format!("cannot read the image: {e}"))
            .and_then(|_| detector.detect(backend, session.as_mut(), &slot));
        match detected {
            Ok(detections) => {
                first_ran.get_or_insert_with(|| file.clone());
                result.detections = detections.len();
                result.found = detector.found(&detections);
                if let Some((cpu_backend, cpu_session)) = cpu.as_mut() {
                    match detector.detect(*cpu_backend, cpu_session.as_mut(), &slot) {
                        Ok(reference) => {
                            let agreement = compare(&reference, &detections, detector.threshold, tolerance);
                            result.cpu_detections = Some(reference.len());
                            result.agree = Some(agreement.agrees());
                            if !agreement.agrees() {
                                result.problem = Some(disagreement(&detector, &reference, &detections, &agreement));
                            }
                            result.agreement = Some(agreement);
                        }
                        Err(error) => result.problem = Some(format!("CPU backend: {error}")),
                    }
                }
            }
            Err(error) => result.problem = Some(error),
        }
        report.images.push(result);
    }
    summarise_images(backend, uses_gpu, cpu.is_some(), report);
    first_ran
}

fn disagreement(detector: &Detector, reference: &[Detection], found: &[Detection], agreement: &Agreement) -> String {
    let pick = |list: &[Detection], indices: &[usize]| -> Vec<Detection> {
        indices.iter().filter_map(|i| list.get(*i).cloned()).collect()
    };
    let mut parts = Vec::new();
    if !agreement.missing.is_empty() {
        parts.push(format!("only the CPU found {}", detector.found(&pick(reference, &agreement.missing))));
    }
    if !agreement.extra.is_empty() {
        parts.push(format!("only the GPU found {}", detector.found(&pick(found, &agreement.extra))));
    }
    parts.join("; ")
}

fn summarise_images(backend: &dyn Backend, uses_gpu: bool, compared: bool, report: &mut SelftestReport) {
    let kind = backend.info().kind;
    let failed: Vec<String> = report
        .images
        .iter()
        .filter(|image| image.agree.is_none() && image.problem.is_some())
        .map(|image| format!("{}: {}", image.file, image.problem.as_deref().unwrap_or("")))
        .collect();
    let total: usize = report.images.iter().map(|image| image.detections).sum();
    if failed.is_empty() {
        report.check(
            "inference",
            Status::Pass,
            format!("{} image(s) on the {kind} backend, {total} detection(s)", report.images.len()),
        );
    } else {
        report.check("inference", Status::Fail, failed.join("; "));
    }
    if !uses_gpu {
        report.check("agreement", Status::Skip, "the configured backend is the CPU backend: nothing to compare with");
        return;
    }
    if !compared {
        return;
    }
    let compared: Vec<&ImageResult> = report.images.iter().filter(|image| image.agree.is_some()).collect();
    let disagreeing: Vec<String> = compared
        .iter()
        .filter(|image| image.agree == Some(false))
        .map(|image| format!("{}: {}", image.file, image.problem.as_deref().unwrap_or("")))
        .collect();
    let tolerance = Tolerance::default();
    if disagreeing.is_empty() && !compared.is_empty() {
        report.check(
            "agreement",
            Status::Pass,
            format!(
                "{kind} and CPU detections agree on {} image(s) (same labels, IoU >= {}, |score difference| <= {})",
                compared.len(),
                tolerance.min_iou,
                tolerance.max_score_delta
            ),
        );
    } else if compared.is_empty() {
        report.check("agreement", Status::Fail, "no image could be compared");
    } else {
        report.check("agreement", Status::Fail, disagreeing.join("; "));
    }
}
