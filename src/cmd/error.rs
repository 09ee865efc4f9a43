//! Why the daemon stopped or could not start: [`DaemonError`], each layer's error wrapped whole.
//!
//! Owns: the wrapping and each variant's words. Must not: decide a layer's exit class for it: each
//! layer's error knows whether it is the configuration's (exit 78) or a failure a restart may fix
//! (`crate::sys::exit::Classified`).

use crate::backend::BackendError;
use crate::config::ConfigError;
use crate::decode::DecodeError;
use crate::http::HttpError;
use crate::infer::step::PipelineError;
use crate::model::footprint::FitError;
use crate::publish::kind::OutletError;
use crate::record::RecordError;
use crate::sys::exit::{Classified, ExitClass};

use super::models::ModelsError;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("model.classes: {0}")]
    Classes(DecodeError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Outlet(#[from] OutletError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error("{0}")]
    CameraFailed(String),
    #[error("cannot start the async runtime or signal handlers: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("record: {0}")]
    Record(#[from] RecordError),
    #[error(transparent)]
    EnginesWontFit(#[from] FitError),
    #[error(transparent)]
    Models(#[from] ModelsError),
}

impl Classified for DaemonError {
    /// Each layer's error says its own class; the daemon's own wraps say theirs.
    fn exit_class(&self) -> ExitClass {
        match self {
            DaemonError::Config(e) => e.exit_class(),
            // `model.classes` that do not fit the label file or the model.
            DaemonError::Classes(_) => ExitClass::Configuration,
            DaemonError::Backend(e) => e.exit_class(),
            DaemonError::Outlet(e) => e.exit_class(),
            DaemonError::Pipeline(e) => e.exit_class(),
            DaemonError::CameraFailed(_) | DaemonError::Runtime(_) => ExitClass::Failure,
            DaemonError::Http(e) => e.exit_class(),
            DaemonError::Record(e) => e.exit_class(),
            DaemonError::EnginesWontFit(e) => e.exit_class(),
            DaemonError::Models(e) => e.exit_class(),
        }
    }
}

impl DaemonError {
    /// Errors that a restart cannot fix (bad config, missing model or labels): systemd's
    /// `RestartPreventExitStatus=78` keeps such a daemon from restart-looping.
    pub fn is_configuration_problem(&self) -> bool {
        self.exit_class() == ExitClass::Configuration
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_layer_says_its_class_through_the_daemons_error() {
        let source = |error| PipelineError::Source { camera: "front".into(), source: error };
        let missing = source(crate::source::SourceError::Open { source_name: "images".into(), message: "none".into() });
        let lost = source(crate::source::SourceError::Read { source_name: "rtsp".into(), message: "eof".into() });
        assert!(DaemonError::Pipeline(missing).is_configuration_problem(), "exit 78");
        assert!(!DaemonError::Pipeline(lost).is_configuration_problem(), "exit 1");
        let address = "127.0.0.1:8080".parse().expect("address");
        let in_use = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(!DaemonError::Http(HttpError::Listen { address, source: in_use }).is_configuration_problem());
        assert!(DaemonError::Http(HttpError::Listen { address, source: denied }).is_configuration_problem());
        assert!(
            DaemonError::Record(RecordError::Thread(std::io::Error::other("no"))).exit_class() == ExitClass::Failure
        );
    }

    #[test]
    fn a_models_context_that_cannot_be_opened_at_start_may_be_restarted_unlike_a_bad_models_table() {
        let out_of_memory = BackendError::Inference("out of device memory".into());
        let context = DaemonError::Models(ModelsError::Session { name: "models.colour".into(), error: out_of_memory });
        assert_eq!(context.to_string(), "models.colour: inference failed: out of device memory");
        assert!(!context.is_configuration_problem(), "exit 1: systemd restarts the daemon");
        let table = DaemonError::Models(ModelsError::NotADetector { name: "colour".into(), kind: "classifier".into() });
        assert!(table.is_configuration_problem(), "exit 78");
    }
}
