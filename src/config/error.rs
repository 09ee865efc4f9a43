//! [`ConfigError`]: what refuses a config, always naming the file, the key and what is allowed.
//! Must not: word or locate the mistakes itself (`mistake`, `words`, `located` do).

use super::mistake::Mistakes;
use super::origin::ConfigOrigin;
use crate::sys::exit::{Classified, ExitClass};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin}: cannot read config: {source}")]
    Read { origin: ConfigOrigin, source: crate::sys::files::ReadError },
    #[error("{origin}: {message}")]
    Parse { origin: ConfigOrigin, message: String },
    #[error("{origin}: `{key}`: {message}")]
    Invalid { origin: ConfigOrigin, key: String, message: String },
    /// Every mistake of a config file, each with its line and column.
    #[error("{0}")]
    Mistakes(Mistakes),
}

impl Classified for ConfigError {
    /// Every one: the config, or a file it names, must change.
    fn exit_class(&self) -> ExitClass {
        ExitClass::Configuration
    }
}

impl ConfigError {
    /// The keys this error names: one, or each of [`ConfigError::Mistakes`]'.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            ConfigError::Invalid { key, .. } => vec![key.as_str()],
            ConfigError::Mistakes(mistakes) => mistakes.list.iter().map(|mistake| mistake.key.as_str()).collect(),
            ConfigError::Read { .. } | ConfigError::Parse { .. } => Vec::new(),
        }
    }

    /// A config refused for one mistake as [`ConfigError::Invalid`]: for the tests that check
    /// one mistake at a time (the list itself is tested in `mistake` and below).
    #[cfg(test)]
    pub(crate) fn one(self) -> ConfigError {
        match self {
            ConfigError::Mistakes(mistakes) if mistakes.list.len() == 1 => {
                let super::mistake::Mistake { key, message, .. } = mistakes.list.into_iter().next().expect("one");
                ConfigError::Invalid { origin: mistakes.origin, key, message }
            }
            other => other,
        }
    }
}
