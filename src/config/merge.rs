//! How a user's partial config meets the built-in default: tables merge key by key, and each
//! relative path resolves against the directory of the file that set it.
//!
//! Owns: [`merge`], path resolution ([`resolver`]) and [`data_dir`]. Must not: type or validate values (that is
//! `super`'s schema and `super::validate`), or read any file.

use std::path::{Path, PathBuf};

use toml::{Table, Value};

use super::load::Config;
use super::source::SourceConfig;

/// Resolves a relative path against the directory of the file that set the key: `user_base` when
/// `user` sets it, else `default_base` (the built-in default's).
pub(super) fn resolver<'a>(
    user: &'a Table,
    user_base: &'a Path,
    default_base: &'a Path,
) -> impl FnMut(&mut PathBuf, &[&str]) + 'a {
    move |p: &mut PathBuf, key: &[&str]| {
        if p.is_relative() {
            let base = if is_set(user, key) { user_base } else { default_base };
            *p = base.join(&*p);
        }
    }
}

impl Config {
    /// Resolves each relative path of the core's tables against the directory of the file that
    /// set it (the sections resolve their own: `super::section::Section::resolve_paths`).
    pub(super) fn resolve_paths(&mut self, user: &Table, user_base: &Path, default_base: &Path) {
        let mut resolve = resolver(user, user_base, default_base);
        if let Some(p) = self.model.onnx.as_mut() {
            resolve(p, &["model", "onnx"]);
        }
        if let Some(p) = self.model.engine.as_mut() {
            resolve(p, &["model", "engine"]);
        }
        resolve(&mut self.model.labels, &["model", "labels"]);
        for camera in &mut self.cameras {
            match &mut camera.source {
                SourceConfig::Images { path, .. } | SourceConfig::Rtsp { password_file: Some(path), .. } => {
                    resolve(path, &["camera"]);
                }
                _ => {}
            }
        }
        if let Some(p) = self.device.onnxruntime_library.as_mut() {
            resolve(p, &["device", "onnxruntime_library"]);
        }
        let store = &mut self.engine.store;
        for (path, key) in [
            (store.public_key.as_mut(), "public_key"),
            (store.signing_key.as_mut(), "signing_key"),
            (store.password_file.as_mut(), "password_file"),
        ] {
            if let Some(p) = path {
                resolve(p, &["engine", "store", key]);
            }
        }
        if let Some(p) = self.http.token_file.as_mut() {
            resolve(p, &["http", "token_file"]);
        }
        resolve(&mut self.http.zones_file, &["http", "zones_file"]);
        resolve(&mut self.controls.file, &["controls", "file"]);
        resolve(&mut self.record.dir, &["record", "dir"]);
    }
}

/// Whether `table` sets the key at `path` (nested tables, e.g. `["mqtt", "tls"]`).
pub(super) fn is_set(table: &Table, path: &[&str]) -> bool {
    let Some((first, rest)) = path.split_first() else { return true };
    match (table.get(*first), rest.is_empty()) {
        (Some(_), true) => true,
        (Some(Value::Table(inner)), false) => is_set(inner, rest),
        _ => false,
    }
}

/// Whether a user's config names its own model file.
pub(super) fn names_a_model(user: &Table) -> bool {
    is_set(user, &["model", "onnx"]) || is_set(user, &["model", "engine"])
}

/// Merges `over` into `base`: tables key by key, every other value (arrays too) replaced.
pub(super) fn merge(base: &mut Table, over: &Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(Value::Table(base_table)), Value::Table(over_table)) => merge(base_table, over_table),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Directory the embedded default's relative paths (`models/…`) resolve against:
/// `$JETSON_DETECTD_DATA_DIR`, else `<exe>/../share/jetson-detectd` when that holds `models/`
/// (the Debian package layout), else the source tree this binary was built from.
pub fn data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("JETSON_DETECTD_DATA_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(share) =
        std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.parent()?.join("share/jetson-detectd")))
    {
        if share.join("models").is_dir() {
            return share;
        }
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
