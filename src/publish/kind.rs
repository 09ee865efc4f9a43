//! How an outlet registers itself: its config sections, what it checks before the daemon starts,
//! and how it starts from the config. The daemon's list of kinds is one line each
//! (`crate::cmd::outlets`); nothing else names an outlet.
//!
//! Owns: [`OutletKind`] and [`OutletStart`], what every kind is given at start. Must not: know
//! any kind.

use std::sync::Arc;

use super::outlet::{DaemonStatus, Outlet};
use crate::config::section::SectionKind;
use crate::config::Config;
use crate::controls::Controls;
use crate::detection::Labels;
use crate::sys::exit::{Classified, ClassifiedError, ExitClass};

/// Why an outlet could not be checked or started: the outlet's own error, which knows whether the
/// config must change.
#[derive(Debug)]
pub struct OutletError(Box<dyn ClassifiedError>);

impl OutletError {
    pub fn new(error: impl ClassifiedError) -> OutletError {
        OutletError(Box::new(error))
    }
}

impl std::fmt::Display for OutletError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for OutletError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl Classified for OutletError {
    fn exit_class(&self) -> ExitClass {
        self.0.exit_class()
    }
}

/// One kind of outlet, as it registers itself.
#[derive(Debug, Clone, Copy)]
pub struct OutletKind {
    /// Its name in the log (`mqtt`, `webhook`).
    pub name: &'static str,
    /// The config sections it owns, read with the daemon's config.
    pub sections: &'static [SectionKind],
    /// What `check-config` and `run` check before anything starts, beyond what its sections check
    /// when the config is read: the files they name read, labels against the label file. No
    /// socket, no connection.
    pub check: fn(&Config, &Labels) -> Result<(), OutletError>,
    /// Starts its outlets (none when its sections leave it off), inside the daemon's tokio
    /// runtime; they connect in the background, and nothing they send waits for a connection.
    pub start: fn(&OutletStart<'_>) -> Result<Started, OutletError>,
}

/// The outlets one kind started.
pub type Started = Vec<Arc<dyn Outlet>>;

/// What every outlet is started with.
#[derive(Debug)]
pub struct OutletStart<'a> {
    pub config: &'a Config,
    /// This start's run id: every JSON message of the start carries it (`crate::service::run_id`).
    pub run: Arc<str>,
    /// The labels every outlet names classes with.
    pub labels: Arc<Labels>,
    /// The run-time controls (commands set them; `Outlet::controls` tells what they became).
    pub controls: Arc<Controls>,
    /// What the daemon is doing as the outlets start: `Building` until the engine is ready.
    pub status: DaemonStatus,
}
