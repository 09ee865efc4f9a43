//! The service's directories that root's commands share with it: the cache (engines, timing cache)
//! and the state (the zones file saved from the page). Where each is by default.
//!
//! The systemd unit's `CacheDirectory=jetson-detectd` gives the service `/var/cache/jetson-detectd`
//! (as `$CACHE_DIRECTORY`), owned by its `DynamicUser=`. The README's install steps prebuild the
//! engine with `sudo jetson-detectd build-engine`, outside systemd: that must land in the same
//! directory (this module's rule), and the service must be able to replace, lock and read what
//! root wrote there (`crate::sys::files::adopt_dir_owner`, which every atomic write and the build
//! lock apply). Its `StateDirectory=jetson-detectd` (`$STATE_DIRECTORY`, `/var/lib/jetson-detectd`)
//! holds the zones file, which `sudo jetson-detectd check-config --print` must merge as the service
//! does. One rule for both: systemd's variable; else, for root, the service's directory; else the
//! user's own. It reads no config and writes no file of its own.

use std::ffi::OsString;
use std::path::PathBuf;

/// The service's cache directory (systemd's `CacheDirectory=jetson-detectd`).
pub const SERVICE_CACHE_DIR: &str = "/var/cache/jetson-detectd";

/// The service's state directory (systemd's `StateDirectory=jetson-detectd`).
pub const SERVICE_STATE_DIR: &str = "/var/lib/jetson-detectd";

/// The environment [`default_dir_from`] decides from, for one kind of directory.
#[derive(Debug, Clone, Default)]
pub struct DirEnv {
    /// systemd's variable for the directory: `$CACHE_DIRECTORY` (`CacheDirectory=`) or
    /// `$STATE_DIRECTORY` (`StateDirectory=`).
    pub systemd: Option<OsString>,
    /// `$XDG_CACHE_HOME` or `$XDG_STATE_HOME`.
    pub xdg: Option<OsString>,
    pub home: Option<OsString>,
    /// The effective user is root.
    pub root: bool,
}

/// A kind of directory the service has: its systemd variable, its XDG variable and the fallback
/// under `$HOME`, and the service's own path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceDir {
    Cache,
    State,
}

impl ServiceDir {
    /// Where the service has it.
    pub fn service_path(self) -> &'static str {
        match self {
            ServiceDir::Cache => SERVICE_CACHE_DIR,
            ServiceDir::State => SERVICE_STATE_DIR,
        }
    }

    /// This process's environment for this directory.
    pub fn env(self) -> DirEnv {
        let (systemd, xdg) = match self {
            ServiceDir::Cache => ("CACHE_DIRECTORY", "XDG_CACHE_HOME"),
            ServiceDir::State => ("STATE_DIRECTORY", "XDG_STATE_HOME"),
        };
        DirEnv {
            systemd: std::env::var_os(systemd),
            xdg: std::env::var_os(xdg),
            home: std::env::var_os("HOME"),
            root: is_root(),
        }
    }

    /// Where this process finds it when the config does not say: [`default_dir_from`] its own
    /// environment.
    pub fn default_dir(self) -> PathBuf {
        default_dir_from(self, &self.env())
    }

    /// The per-user directory under `$HOME` when the XDG variable is unset.
    fn under_home(self) -> &'static str {
        match self {
            ServiceDir::Cache => ".cache/jetson-detectd",
            ServiceDir::State => ".local/state/jetson-detectd",
        }
    }
}

/// The directory of `kind` when the config does not name one (`engine.cache_dir`, the directory of
/// `http.zones_file`): systemd's variable; else, for root, the service's directory (root's commands
/// are the install steps that prebuild for the service and check what it will run); else the
/// per-user one.
pub fn default_dir_from(kind: ServiceDir, env: &DirEnv) -> PathBuf {
    if let Some(dir) = &env.systemd {
        PathBuf::from(dir)
    } else if env.root {
        PathBuf::from(kind.service_path())
    } else if let Some(xdg) = &env.xdg {
        PathBuf::from(xdg).join("jetson-detectd")
    } else if let Some(home) = &env.home {
        PathBuf::from(home).join(kind.under_home())
    } else {
        PathBuf::from(kind.service_path())
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemds_directory_wins_then_root_gets_the_services_directory_then_the_users() {
        for (kind, service, under_home) in [
            (ServiceDir::Cache, SERVICE_CACHE_DIR, "/home/u/.cache/jetson-detectd"),
            (ServiceDir::State, SERVICE_STATE_DIR, "/home/u/.local/state/jetson-detectd"),
        ] {
            let env = DirEnv {
                systemd: Some("/var/other".into()),
                xdg: Some("/home/u/.xdg".into()),
                home: Some("/root".into()),
                root: true,
            };
            assert_eq!(default_dir_from(kind, &env), PathBuf::from("/var/other"));
            let root = DirEnv { systemd: None, ..env.clone() };
            assert_eq!(default_dir_from(kind, &root), PathBuf::from(service), "{kind:?}");
            let user = DirEnv { root: false, ..root.clone() };
            assert_eq!(default_dir_from(kind, &user), PathBuf::from("/home/u/.xdg/jetson-detectd"));
            let plain = DirEnv { xdg: None, home: Some("/home/u".into()), ..user };
            assert_eq!(default_dir_from(kind, &plain), PathBuf::from(under_home), "{kind:?}");
        }
    }
}
