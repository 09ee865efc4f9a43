//! The cache directory that the service, `build-engine` and `selftest` share: where it is by
//! default.
//!
//! The systemd unit's `CacheDirectory=jetson-detectd` gives the service `/var/cache/jetson-detectd`
//! (as `$CACHE_DIRECTORY`), owned by its `DynamicUser=`. The README's install steps prebuild the
//! engine with `sudo jetson-detectd build-engine`, outside systemd: that must land in the same
//! directory (this module's rule), and the service must be able to replace, lock and read what
//! root wrote there (`crate::sys::files::adopt_dir_owner`, which every atomic write and the build
//! lock apply). It reads no config and writes no file of its own.

use std::ffi::OsString;
use std::path::PathBuf;

/// The service's cache directory (systemd's `CacheDirectory=jetson-detectd`).
pub const SERVICE_CACHE_DIR: &str = "/var/cache/jetson-detectd";

/// The environment [`default_dir_from`] decides from.
#[derive(Debug, Clone, Default)]
pub struct CacheEnv {
    /// `$CACHE_DIRECTORY`, set by systemd's `CacheDirectory=`.
    pub cache_directory: Option<OsString>,
    pub xdg_cache_home: Option<OsString>,
    pub home: Option<OsString>,
    /// The effective user is root.
    pub root: bool,
}

impl CacheEnv {
    /// This process's environment.
    pub fn current() -> Self {
        CacheEnv {
            cache_directory: std::env::var_os("CACHE_DIRECTORY"),
            xdg_cache_home: std::env::var_os("XDG_CACHE_HOME"),
            home: std::env::var_os("HOME"),
            root: is_root(),
        }
    }
}

/// `engine.cache_dir` when the config does not set it: systemd's `$CACHE_DIRECTORY`; else, for
/// root, the service's directory (root's commands are the install steps that prebuild for the
/// service); else the per-user cache.
pub fn default_dir_from(env: &CacheEnv) -> PathBuf {
    if let Some(dir) = &env.cache_directory {
        PathBuf::from(dir)
    } else if env.root {
        PathBuf::from(SERVICE_CACHE_DIR)
    } else if let Some(xdg) = &env.xdg_cache_home {
        PathBuf::from(xdg).join("jetson-detectd")
    } else if let Some(home) = &env.home {
        PathBuf::from(home).join(".cache/jetson-detectd")
    } else {
        PathBuf::from(SERVICE_CACHE_DIR)
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
    fn systemd_cache_directory_wins_then_root_gets_the_service_directory_then_the_user_cache() {
        let env = CacheEnv {
            cache_directory: Some("/var/cache/other".into()),
            xdg_cache_home: Some("/home/u/.xdg".into()),
            home: Some("/root".into()),
            root: true,
        };
        assert_eq!(default_dir_from(&env), PathBuf::from("/var/cache/other"));
        let root = CacheEnv { cache_directory: None, ..env.clone() };
        assert_eq!(default_dir_from(&root), PathBuf::from(SERVICE_CACHE_DIR));
        let user = CacheEnv { root: false, ..root.clone() };
        assert_eq!(default_dir_from(&user), PathBuf::from("/home/u/.xdg/jetson-detectd"));
        let plain = CacheEnv { xdg_cache_home: None, home: Some("/home/u".into()), ..user };
        assert_eq!(default_dir_from(&plain), PathBuf::from("/home/u/.cache/jetson-detectd"));
    }
}
