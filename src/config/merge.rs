//! How a user's partial config meets the built-in default: tables merge key by key, and each
//! relative path resolves against the directory of the file that set it.
//!
//! Owns: [`merge`], path resolution ([`resolver`]) and [`data_dir`]. Must not: type or validate values (that is
//! `super`'s schema and `super::validate`), or read any file.

use std::path::{Path, PathBuf};

use toml::{Table, Value};

/// Resolves a relative path against the directory of the file that set the key at `key`
/// (`["mqtt", "password_file"]`); an absolute path stays as it is.
pub type Resolve<'a> = dyn FnMut(&mut PathBuf, &[&str]) + 'a;

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
