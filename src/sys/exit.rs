//! What a failure means to systemd: the daemon's exit status says whether a restart can help.
//!
//! Owns: [`ExitClass`] and [`Classified`], which every layer's error implements for itself, so that
//! whoever ends the process reads the class from the error instead of matching every module's
//! variants (each error knows what it is, as rumqttc's layers do). Must not: decide any error's
//! class itself.

/// The two ways the daemon can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitClass {
    /// The configuration, or a file it names, must change: exit 78 (`EX_CONFIG`), which the
    /// systemd unit's `RestartPreventExitStatus=78` keeps from restart-looping.
    Configuration,
    /// Anything a restart may fix (a port another process still holds, a GPU out of memory):
    /// exit 1, and systemd restarts the service.
    Failure,
}

impl ExitClass {
    /// `EX_CONFIG` from sysexits.h.
    pub const CONFIGURATION_CODE: u8 = 78;
    pub const FAILURE_CODE: u8 = 1;

    /// The exit status.
    pub fn code(self) -> u8 {
        match self {
            ExitClass::Configuration => Self::CONFIGURATION_CODE,
            ExitClass::Failure => Self::FAILURE_CODE,
        }
    }

    /// [`ExitClass::Configuration`] when `configuration`, else [`ExitClass::Failure`].
    pub fn configuration_if(configuration: bool) -> ExitClass {
        if configuration {
            ExitClass::Configuration
        } else {
            ExitClass::Failure
        }
    }
}

/// An error that knows its [`ExitClass`].
pub trait Classified {
    fn exit_class(&self) -> ExitClass;
}

/// A layer's error without its type, as one layer hands another's up (an outlet's, to the daemon).
pub trait ClassifiedError: std::error::Error + Classified + Send + Sync + 'static {}

impl<T: std::error::Error + Classified + Send + Sync + 'static> ClassifiedError for T {}
