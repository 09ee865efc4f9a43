//! Where a config came from: what error messages and relative paths name.
//!
//! Owns: [`ConfigOrigin`]. Must not: read the config.

use std::fmt;
use std::path::PathBuf;

/// Where a config came from, for error messages and relative paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOrigin {
    File(PathBuf),
    Embedded,
}

impl fmt::Display for ConfigOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigOrigin::File(path) => write!(f, "{}", path.display()),
            ConfigOrigin::Embedded => f.write_str("<embedded default config>"),
        }
    }
}
