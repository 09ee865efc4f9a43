//! [`RecordError`]: what stops recording from starting, and its exit class. Must not: decide what
//! the daemon does about it (`crate::cmd` asks [`Classified`]).

use std::path::PathBuf;

use super::dir::FolderError;
use crate::sys::exit::{Classified, ExitClass};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("`record.dir` {path}: {source}")]
    Dir { path: PathBuf, source: std::io::Error },
    #[error("camera {camera}: `{key}`: {message}")]
    Camera { camera: String, key: String, message: String },
    /// Another process records the camera into the same folder of `record.dir`.
    #[error("camera {camera}: `record.dir`: {source}; give each daemon its own record.dir or its own camera names")]
    Shared { camera: String, source: FolderError },
    #[error("cannot start a recorder thread: {0}")]
    Thread(std::io::Error),
}

impl Classified for RecordError {
    /// A record directory that cannot be created, a raw camera that cannot be encoded, a camera
    /// another daemon records into the same folder: the config's. A thread: a restart's.
    fn exit_class(&self) -> ExitClass {
        ExitClass::configuration_if(!matches!(self, RecordError::Thread(_)))
    }
}
