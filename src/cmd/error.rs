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
use crate::source::SourceError;
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

impl DaemonError {
    /// Errors that a restart cannot fix (bad config, missing model or labels): systemd's
    /// `RestartPreventExitStatus=78` keeps such a daemon from restart-looping.
    pub fn is_configuration_problem(&self) -> bool {
        matches!(
            self,
            DaemonError::Config(_)
                | DaemonError::Classes(_)
                | DaemonError::Backend(
                    BackendError::Load { .. } | BackendError::InputMismatch(_) | BackendError::Unavailable(..)
                )
                // A source that cannot be opened at start (no such image directory, a GStreamer
                // pipeline that does not parse, a node that is not a capture device) is a
                // configuration mistake. Cameras that are only absent right now do not fail here:
                // V4L2 and GStreamer sources start reconnecting instead.
                | DaemonError::Pipeline(PipelineError::Source { source: SourceError::Open { .. }, .. })
                // Outputs that do not fit `model.decoder` (a blank frame at start).
                | DaemonError::Pipeline(PipelineError::ModelOutputs { .. })
                // A record directory that cannot be created, a raw camera that cannot be encoded, a
                // camera another daemon records into the same folder.
                | DaemonError::Record(RecordError::Dir { .. } | RecordError::Camera { .. } | RecordError::Shared { .. })
                // Models too large for the GPU together: the config must run fewer or smaller ones.
                | DaemonError::EnginesWontFit(_)
        ) || matches!(self, DaemonError::Outlet(e) if e.exit_class() == ExitClass::Configuration)
            // A named model's table, files or labels; not a context that could not be opened at
            // start (as the model check's and the workers' own sessions, a restart may open it).
            || matches!(self, DaemonError::Models(e) if !matches!(e, ModelsError::Session { .. }))
            // A token file that cannot be read, or a port only root may take; not a port another
            // process holds or an address not up yet: a restart may find them free (exit 1).
            || matches!(self, DaemonError::Http(e) if !e.is_transient())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_context_that_cannot_be_opened_at_start_may_be_restarted_unlike_a_bad_models_table() {
        let out_of_memory = BackendError::Inference("out of device memory".into());
        let context = DaemonError::Models(ModelsError::Session { name: "models.colour".into(), error: out_of_memory });
        assert_eq!(context.to_string(), "models.colour: inference failed: out of device memory");
        assert!(!context.is_configuration_problem(), "exit 1: systemd restarts the daemon");
        let table = DaemonError::Models(ModelsError::NotADetector { name: "colour".into(), kind: "classifier" });
        assert!(table.is_configuration_problem(), "exit 78");
    }
}
