//! The models `bench` runs: `[model]`, the detectors `--models` lists with the cameras assigned
//! to them round robin, and the config's classifiers, as the daemon's workers hold them.
//!
//! Owns: reading `--models` ([`ModelChoice`]), the round-robin assignment of the cameras
//! ([`assign_round_robin`]) and loading every model into the lanes the scheduler runs
//! ([`BenchModels`], through `crate::cmd::models`, as `run` builds them). Must not: time anything
//! or start the scheduler (`super::cameras` does).

use std::sync::Arc;

use super::error::BenchError;
use crate::backend::engine::chain::unchecked;
use crate::backend::{Backend, BuildDisplay};
use crate::cmd::models::{
    detector_lanes, named_detector, named_detectors, named_per_track, per_track_lanes, worker_models, WorkerModel,
};
use crate::config::Config;
use crate::decode::DecodeParams;
use crate::detection::Labels;
use crate::infer::per_track::PerTrackLane;
use crate::infer::scheduler::ModelLane;
use crate::model::{DeviceSpec, ModelSpec};

/// One entry of `--models`: `default` (`[model]`) or a `[models.<name>]` detector, given as
/// `<name>` or `models.<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    Default,
    Named(String),
}

impl ModelChoice {
    /// The entries of `--models`, each once; empty: `[model]` alone.
    pub fn parse_list(names: &[String]) -> Result<Vec<ModelChoice>, BenchError> {
        let mut choices: Vec<ModelChoice> = Vec::new();
        for name in names {
            let choice = match name.trim() {
                "default" => ModelChoice::Default,
                "" => return Err(BenchError::Setup("--models: an empty model name".into())),
                other => ModelChoice::Named(other.strip_prefix("models.").unwrap_or(other).to_string()),
            };
            if choices.contains(&choice) {
                return Err(BenchError::Setup(format!("--models: `{name}` is listed twice")));
            }
            choices.push(choice);
        }
        if choices.is_empty() {
            choices.push(ModelChoice::Default);
        }
        Ok(choices)
    }

    /// Its table: `model` or `models.<name>`.
    pub fn table(&self) -> String {
        match self {
            ModelChoice::Default => "model".to_string(),
            ModelChoice::Named(name) => format!("models.{name}"),
        }
    }
}

/// Camera `i` runs model `i mod models`: as many cameras per model as the count allows, the
/// first models taking one more where it does not divide.
pub fn assign_round_robin(cameras: usize, models: usize) -> Vec<usize> {
    (0..cameras).map(|camera| camera % models.max(1)).collect()
}

/// The bench's cameras (`bench0`, `bench1`, …), the table of the model each runs, and the lanes
/// and classifiers the scheduler's workers hold.
pub struct BenchModels {
    /// Camera name and its model's table, in camera order.
    pub cameras: Vec<(String, String)>,
    pub lanes: Vec<ModelLane>,
    pub classifiers: Arc<[PerTrackLane]>,
    /// `[model]`'s labels grown by every listed detector's: what the messages name classes with.
    pub labels: Arc<Labels>,
}

impl BenchModels {
    /// Loads the detectors of `choices` (besides `[model]`'s `backend`, loaded by the caller) and
    /// the config's classifiers, and assigns `cameras` cameras to `choices` round robin.
    pub fn load(
        config: &Config,
        backend: Arc<dyn Backend>,
        params: DecodeParams,
        labels: &Labels,
        choices: &[ModelChoice],
        cameras: usize,
    ) -> Result<BenchModels, BenchError> {
        let setup = |e: &dyn std::fmt::Display| BenchError::Setup(e.to_string());
        let assignment = assign_round_robin(cameras, choices.len());
        let names: Vec<String> = (0..cameras).map(|i| format!("bench{i}")).collect();
        let mut shared = labels.clone();
        let mut detectors = Vec::new();
        for (index, choice) in choices.iter().enumerate() {
            let ModelChoice::Named(name) = choice else { continue };
            let assigned = names.iter().zip(&assignment).filter(|(_, model)| **model == index);
            let assigned = assigned.map(|(camera, _)| camera.clone()).collect();
            let detector =
                named_detector(config, name, assigned, &mut shared).map_err(|e| setup(&format!("--models: {e}")))?;
            detectors.push(detector);
        }
        // The classifiers' `on` labels are checked against the daemon's list, whatever `--models` runs.
        let mut daemon_labels = labels.clone();
        named_detectors(config, config, &mut daemon_labels).map_err(|e| setup(&e))?;
        let classifiers = named_per_track(config, &daemon_labels).map_err(|e| setup(&e))?;
        let device = DeviceSpec::from_config(config);
        let load = |model: &ModelSpec| {
            let mut display = BuildDisplay::default();
            let loaded =
                crate::backend::load::load_backend(model, &device, |event| display.report(&event), &mut unchecked);
            display.finish();
            loaded.map_err(|e| setup(&e))
        };
        let detector_backends =
            detectors.iter().map(|detector| load(&detector.model)).collect::<Result<Vec<_>, _>>()?;
        let classifier_backends =
            classifiers.iter().map(|classifier| load(&classifier.model)).collect::<Result<Vec<_>, _>>()?;
        let lanes = detector_lanes(Some(ModelLane::new(backend, params)), detectors, detector_backends);
        let classifiers = per_track_lanes(classifiers, classifier_backends);
        let cameras = names.into_iter().zip(assignment.iter().map(|model| choices[*model].table())).collect();
        Ok(BenchModels { cameras, lanes, classifiers, labels: Arc::new(shared) })
    }

    /// Every model a worker holds a context of, for the memory report.
    pub fn worker_models(&self) -> Vec<WorkerModel> {
        worker_models(&self.lanes, &self.classifiers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn cameras_go_to_the_listed_models_in_turn() {
        assert_eq!(assign_round_robin(5, 2), [0, 1, 0, 1, 0]);
        assert_eq!(assign_round_robin(2, 3), [0, 1], "fewer cameras than models: the last models get none");
        assert_eq!(assign_round_robin(3, 1), [0, 0, 0]);
        assert_eq!(assign_round_robin(2, 0), [0, 0], "no list: every camera on the first model");
    }

    #[test]
    fn default_names_model_and_a_name_with_or_without_its_table_prefix_names_a_detector() {
        let choices = ModelChoice::parse_list(&names(&["default", "models.yard", "porch"])).expect("parses");
        assert_eq!(
            choices,
            [ModelChoice::Default, ModelChoice::Named("yard".into()), ModelChoice::Named("porch".into())]
        );
        assert_eq!(
            choices.iter().map(ModelChoice::table).collect::<Vec<_>>(),
            ["model", "models.yard", "models.porch"]
        );
        assert_eq!(ModelChoice::parse_list(&[]).expect("empty"), [ModelChoice::Default]);
    }

    #[test]
    fn a_model_listed_twice_or_an_empty_name_is_refused() {
        let twice = ModelChoice::parse_list(&names(&["yard", "models.yard"])).expect_err("twice");
        assert!(twice.to_string().contains("listed twice"), "{twice}");
        assert!(ModelChoice::parse_list(&names(&["default", ""])).is_err());
    }

    #[test]
    fn an_unknown_name_or_a_classifier_is_an_error_naming_the_detectors() {
        let text = "[models.yard]\nonnx = \"m.onnx\"\nlabels = \"l.txt\"\n\
             [models.colour]\nkind = \"classifier\"\non = [\"car\"]\nonnx = \"c.onnx\"\nlabels = \"c.txt\"\n\
             [tracking]\nenabled = true\n";
        let config = Config::from_toml(text, crate::config::ConfigOrigin::Embedded, std::path::Path::new("/base"))
            .expect("config");
        let mut labels = Labels::parse("person\n", std::path::Path::new("labels.txt")).expect("labels");
        let unknown = named_detector(&config, "porch", Vec::new(), &mut labels).err().expect("unknown");
        assert!(unknown.to_string().contains("no detector named `porch`"), "{unknown}");
        assert!(unknown.to_string().contains("`yard`"), "{unknown}");
        let classifier = named_detector(&config, "colour", Vec::new(), &mut labels).err().expect("a classifier");
        assert!(classifier.to_string().contains("`colour` is a classifier"), "{classifier}");
    }
}
