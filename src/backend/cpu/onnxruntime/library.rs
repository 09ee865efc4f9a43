//! Finding and loading the ONNX Runtime shared library, once per process.
//!
//! Owns: where the library is looked for, in this order: `device.onnxruntime_library`, else
//! `ORT_DYLIB_PATH`, else the usual library directories (`LD_LIBRARY_PATH`, `/usr/local/lib`,
//! `/usr/lib/<multiarch>`, `/usr/lib`), else a pip-installed `onnxruntime`'s `onnxruntime/capi/`
//! folder in the site-packages directories of a virtual environment, of every `python3` on `PATH`,
//! of pyenv, of `pip install --user` and of a system-wide pip (found by looking at the file system:
//! no Python is run); checking a candidate before `ort` takes it (it must load, export
//! `OrtGetApiBase`, be at least [`MIN_VERSION`] and provide the C API version `ort` asks for), so
//! that a missing, foreign or too-old library is an error that names it, never a panic or an
//! abort; and the one library a process loads (`ort` keeps the first it is given for good).
//!
//! Must not: create sessions or environments, or run models (`super::engine` does).

use std::ffi::{c_char, CStr, OsStr};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::sys::lock::lock;

/// The oldest ONNX Runtime accepted: the C API version `ort` is built for (feature `api-17`).
pub const MIN_VERSION: Version = Version { major: 1, minor: ort::MINOR_VERSION, patch: 0 };

/// The library's file name; versioned names (`libonnxruntime.so.1.22.0`, what pip's wheel ships)
/// are accepted too.
const LIBRARY_NAME: &str = "libonnxruntime.so";

/// An ONNX Runtime release, as the library reports it (`GetVersionString`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// Parses `1.22.0` (a suffix such as `-dev` after the patch number is ignored).
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text.trim().splitn(3, '.');
        let number = |part: Option<&str>| -> Option<u32> {
            let digits: String = part?.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        };
        Some(Version {
            major: number(parts.next())?,
            minor: number(parts.next())?,
            patch: number(parts.next()).unwrap_or(0),
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Where a library path came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `device.onnxruntime_library`.
    Config,
    /// The `ORT_DYLIB_PATH` environment variable.
    Environment,
    /// A library directory.
    LibraryDirectory,
    /// A pip-installed `onnxruntime` package.
    Pip,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Config => "device.onnxruntime_library",
            Origin::Environment => "ORT_DYLIB_PATH",
            Origin::LibraryDirectory => "library directory",
            Origin::Pip => "pip package",
        })
    }
}

/// The ONNX Runtime this process loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    pub path: PathBuf,
    pub version: Version,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LibraryError {
    /// `device.onnxruntime_library` names no usable library: a configuration error.
    #[error("device.onnxruntime_library = \"{}\": {reason}", path.display())]
    Configured { path: PathBuf, reason: String },
    /// `ORT_DYLIB_PATH` names no usable library.
    #[error("ORT_DYLIB_PATH = \"{}\": {reason}", path.display())]
    Environment { path: PathBuf, reason: String },
    /// No usable library in the directories searched.
    #[error("ONNX Runtime not found: {0}")]
    NotFound(String),
    /// The process already runs another library (`ort` cannot change it).
    #[error(
        "ONNX Runtime {} from {} is already loaded in this process; {} takes effect after a restart",
        loaded.version, loaded.path.display(), requested.display()
    )]
    AlreadyLoaded { loaded: Library, requested: PathBuf },
}

/// The process's library once one loaded.
static LOADED: Mutex<Option<Library>> = Mutex::new(None);

/// The library this process loaded, if any.
pub fn loaded() -> Option<Library> {
    lock(&LOADED).clone()
}

/// Finds ONNX Runtime (`configured` is `device.onnxruntime_library`, absolute) and hands it to
/// `ort`, or returns the library loaded before. A configured or `ORT_DYLIB_PATH` library that
/// fails is an error naming it; a searched one that fails (too old, say) is skipped, and the
/// reason is part of [`LibraryError::NotFound`] when nothing else is found.
pub fn load(configured: Option<&Path>) -> Result<Library, LibraryError> {
    let mut loaded = lock(&LOADED);
    if let Some(library) = loaded.as_ref() {
        return match configured {
            Some(path) if !same_file(path, &library.path) => {
                Err(LibraryError::AlreadyLoaded { loaded: library.clone(), requested: path.to_path_buf() })
            }
            _ => Ok(library.clone()),
        };
    }
    let places = SearchPlaces::from_process();
    let library = if let Some(path) = configured {
        take(path, Origin::Config).map_err(|reason| LibraryError::Configured { path: path.to_path_buf(), reason })?
    } else if let Some(path) = places.ort_dylib_path.clone() {
        take(&path, Origin::Environment).map_err(|reason| LibraryError::Environment { path, reason })?
    } else {
        let mut skipped = Vec::new();
        let found = places.candidates().into_iter().find_map(|(path, origin)| match take(&path, origin) {
            Ok(library) => Some(library),
            Err(reason) => {
                skipped.push(format!("{}: {reason}", path.display()));
                None
            }
        });
        found.ok_or_else(|| LibraryError::NotFound(places.describe_miss(&skipped)))?
    };
    *loaded = Some(library.clone());
    Ok(library)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Checks `path` and gives it to `ort` for the rest of the process.
fn take(path: &Path, origin: Origin) -> Result<Library, String> {
    let version = check(path)?;
    ort::init_from(path).map_err(|e| e.to_string())?;
    Ok(Library { path: path.to_path_buf(), version, origin })
}

/// Opens `path` and asks it for its version and the C API `ort` needs, without keeping it open.
fn check(path: &Path) -> Result<Version, String> {
    if !path.is_file() {
        return Err(if path.exists() { "not a file".into() } else { "no such file".into() });
    }
    // SAFETY: loading a shared library runs its initialisers; the path is one the user named or a
    // file called libonnxruntime.so* in a library or pip directory, i.e. meant to be ONNX Runtime.
    let library =
        unsafe { libloading::Library::new(path) }.map_err(|e| format!("cannot load it: {}", with_reason(&e)))?;
    type GetApiBase = unsafe extern "C" fn() -> *const ort::sys::OrtApiBase;
    // SAFETY: `OrtGetApiBase` has this signature in every ONNX Runtime; the symbol is only used
    // while `library` is open.
    let get_api_base = unsafe { library.get::<GetApiBase>(b"OrtGetApiBase\0") }
        .map_err(|_| "not ONNX Runtime: it has no `OrtGetApiBase`".to_string())?;
    // SAFETY: ONNX Runtime's entry point takes no arguments and returns a pointer to a static
    // struct (or null, which is checked).
    let base = unsafe { get_api_base() };
    // SAFETY: non-null pointers from `OrtGetApiBase` point to a static `OrtApiBase`.
    let Some(base) = (unsafe { base.as_ref() }) else {
        return Err("`OrtGetApiBase` returned null".into());
    };
    // SAFETY: `GetVersionString` returns a static NUL-terminated string (or null, checked).
    let text: *const c_char = unsafe { (base.GetVersionString)() };
    if text.is_null() {
        return Err("it reports no version".into());
    }
    // SAFETY: non-null and NUL-terminated, static for the library's lifetime (we copy it now).
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned();
    let version = Version::parse(&text).ok_or_else(|| format!("unreadable version `{text}`"))?;
    if version < MIN_VERSION {
        return Err(format!(
            "ONNX Runtime {version} is too old: this build needs {}.{} or newer (C API version {})",
            MIN_VERSION.major,
            MIN_VERSION.minor,
            ort::MINOR_VERSION
        ));
    }
    // SAFETY: `GetApi` takes an API version and returns null when it does not provide it.
    if unsafe { (base.GetApi)(ort::MINOR_VERSION) }.is_null() {
        return Err(format!("ONNX Runtime {version} does not provide C API version {}", ort::MINOR_VERSION));
    }
    Ok(version)
}

/// The process's environment as far as the search reads it; tests build their own.
#[derive(Debug, Clone, Default)]
struct SearchPlaces {
    ort_dylib_path: Option<PathBuf>,
    /// Library directories, searched first, in order.
    library_dirs: Vec<PathBuf>,
    /// Python prefixes (`<prefix>/lib/python3.*/site-packages` and `dist-packages`), then these
    /// `site-packages`-style directories themselves.
    python_prefixes: Vec<PathBuf>,
    site_dirs: Vec<PathBuf>,
}

impl SearchPlaces {
    /// Reads `ORT_DYLIB_PATH`, `LD_LIBRARY_PATH`, `VIRTUAL_ENV`, `PATH`, `PYENV_ROOT` and `HOME`.
    fn from_process() -> SearchPlaces {
        let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
        let mut library_dirs: Vec<PathBuf> =
            var("LD_LIBRARY_PATH").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default();
        for dir in [
            "/usr/local/lib".to_string(),
            format!("/usr/local/lib/{multiarch}"),
            format!("/usr/lib/{multiarch}"),
            "/usr/lib".into(),
            format!("/lib/{multiarch}"),
        ] {
            library_dirs.push(dir.into());
        }

        let mut python_prefixes: Vec<PathBuf> = var("VIRTUAL_ENV").map(PathBuf::from).into_iter().collect();
        for dir in var("PATH").map(|v| std::env::split_paths(&v).collect::<Vec<_>>()).unwrap_or_default() {
            let python = dir.join("python3");
            if !python.is_file() {
                continue;
            }
            // A virtual environment's bin/python3 links to its base interpreter: the directory
            // above bin/ is the environment, the one above the link's target the base install.
            python_prefixes.extend(dir.parent().map(Path::to_path_buf));
            if let Some(prefix) = python.canonicalize().ok().as_deref().and_then(Path::parent).and_then(Path::parent) {
                python_prefixes.push(prefix.to_path_buf());
            }
        }
        let home = var("HOME").map(PathBuf::from);
        let pyenv = var("PYENV_ROOT").map(PathBuf::from).or_else(|| home.as_ref().map(|home| home.join(".pyenv")));
        if let Some(versions) = pyenv.map(|root| root.join("versions")) {
            python_prefixes.extend(sorted_entries(&versions, |_| true));
        }
        python_prefixes.extend(home.map(|home| home.join(".local")));
        python_prefixes.push("/usr/local".into());
        python_prefixes.push("/usr".into());
        dedup(&mut python_prefixes);

        SearchPlaces {
            ort_dylib_path: var("ORT_DYLIB_PATH").map(PathBuf::from),
            library_dirs,
            python_prefixes,
            site_dirs: vec!["/usr/lib/python3/dist-packages".into()],
        }
    }

    /// Every `site-packages` or `dist-packages` directory of the prefixes, then `site_dirs`.
    fn site_packages(&self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for prefix in &self.python_prefixes {
            let lib = prefix.join("lib");
            for python in sorted_entries(&lib, |name| name.starts_with("python3")).into_iter().rev() {
                dirs.push(python.join("site-packages"));
                dirs.push(python.join("dist-packages"));
            }
        }
        dirs.extend(self.site_dirs.iter().cloned());
        dirs
    }

    /// Library files found, in the order they are tried.
    fn candidates(&self) -> Vec<(PathBuf, Origin)> {
        let mut candidates: Vec<(PathBuf, Origin)> = Vec::new();
        for dir in &self.library_dirs {
            candidates.extend(libraries_in(dir).into_iter().map(|path| (path, Origin::LibraryDirectory)));
        }
        for site in self.site_packages() {
            let capi = site.join("onnxruntime").join("capi");
            candidates.extend(libraries_in(&capi).into_iter().map(|path| (path, Origin::Pip)));
        }
        let mut seen = std::collections::HashSet::new();
        candidates.retain(|(path, _)| seen.insert(path.canonicalize().unwrap_or_else(|_| path.clone())));
        candidates
    }

    /// Where nothing usable was found, and why each file found was skipped.
    fn describe_miss(&self, skipped: &[String]) -> String {
        let dirs: Vec<String> = self.library_dirs.iter().map(|dir| dir.display().to_string()).collect();
        let mut text = format!(
            "no usable {LIBRARY_NAME}* in {} or in a pip-installed onnxruntime (`pip install onnxruntime`; \
             or set device.onnxruntime_library or ORT_DYLIB_PATH)",
            dirs.join(", ")
        );
        if !skipped.is_empty() {
            text.push_str("; skipped ");
            text.push_str(&skipped.join("; "));
        }
        text
    }
}

/// `libonnxruntime.so` in `dir`, else its versioned names, newest first.
fn libraries_in(dir: &Path) -> Vec<PathBuf> {
    let plain = dir.join(LIBRARY_NAME);
    if plain.is_file() {
        return vec![plain];
    }
    let mut versioned: Vec<(Option<Version>, PathBuf)> =
        sorted_entries(dir, |name| name.strip_prefix(LIBRARY_NAME).is_some_and(|rest| rest.starts_with('.')))
            .into_iter()
            .filter(|path| path.is_file())
            .map(|path| {
                let suffix =
                    path.file_name().and_then(OsStr::to_str).and_then(|name| name.get(LIBRARY_NAME.len() + 1..));
                (suffix.and_then(Version::parse), path)
            })
            .collect();
    versioned.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    versioned.into_iter().map(|(_, path)| path).collect()
}

/// Entries of `dir` whose UTF-8 name passes `keep`, sorted by name; none when it is unreadable.
fn sorted_entries(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_str().is_some_and(&keep))
        .map(|entry| entry.path())
        .collect();
    paths.sort();
    paths
}

fn dedup(paths: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    paths.retain(|path| seen.insert(path.clone()));
}

/// `error` with the loader's own reason (libloading's "dlopen failed" keeps dlerror()'s text —
/// "invalid ELF header", "wrong ELF class: ELFCLASS32" — in its source).
fn with_reason(error: &libloading::Error) -> String {
    match std::error::Error::source(error) {
        Some(reason) => format!("{error}: {reason}"),
        None => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, b"").expect("write");
    }

    #[test]
    fn versions_parse_and_order_by_number() {
        assert_eq!(Version::parse("1.22.0"), Some(Version { major: 1, minor: 22, patch: 0 }));
        assert_eq!(Version::parse("1.9.1-dev"), Some(Version { major: 1, minor: 9, patch: 1 }));
        assert_eq!(Version::parse("1.17"), Some(Version { major: 1, minor: 17, patch: 0 }));
        assert_eq!(Version::parse("garbage"), None);
        assert!(Version::parse("1.9.0") < Version::parse("1.17.0"));
        assert_eq!(MIN_VERSION.to_string(), "1.17.0");
    }

    #[test]
    fn a_pip_wheel_in_a_virtual_environment_is_found_after_the_library_directories() {
        let root = tempfile::tempdir().expect("temp dir");
        let venv = root.path().join("venv");
        let wheel = venv.join("lib/python3.11/site-packages/onnxruntime/capi");
        touch(&wheel.join("libonnxruntime.so.1.22.0"));
        touch(&wheel.join("libonnxruntime_providers_shared.so"));
        let libdir = root.path().join("lib");
        touch(&libdir.join("libonnxruntime.so.1.16.3"));
        touch(&libdir.join("libonnxruntime.so.1.20.1"));
        let places = SearchPlaces {
            library_dirs: vec![root.path().join("missing"), libdir.clone()],
            python_prefixes: vec![venv],
            ..SearchPlaces::default()
        };
        let found: Vec<(PathBuf, Origin)> = places.candidates();
        assert_eq!(
            found,
            [
                (libdir.join("libonnxruntime.so.1.20.1"), Origin::LibraryDirectory),
                (libdir.join("libonnxruntime.so.1.16.3"), Origin::LibraryDirectory),
                (wheel.join("libonnxruntime.so.1.22.0"), Origin::Pip),
            ]
        );
    }

    #[test]
    fn the_unversioned_name_wins_in_a_directory_and_dist_packages_count() {
        let root = tempfile::tempdir().expect("temp dir");
        let libdir = root.path().join("lib");
        touch(&libdir.join("libonnxruntime.so"));
        touch(&libdir.join("libonnxruntime.so.1.20.1"));
        let usr = root.path().join("usr");
        let wheel = usr.join("lib/python3.12/dist-packages/onnxruntime/capi/libonnxruntime.so.1.23.2");
        touch(&wheel);
        let places =
            SearchPlaces { library_dirs: vec![libdir.clone()], python_prefixes: vec![usr], ..SearchPlaces::default() };
        let paths: Vec<PathBuf> = places.candidates().into_iter().map(|(path, _)| path).collect();
        assert_eq!(paths, [libdir.join("libonnxruntime.so"), wheel]);
    }

    #[test]
    fn a_file_that_is_not_a_library_is_refused_with_a_reason() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fake = dir.path().join("libonnxruntime.so");
        std::fs::write(&fake, b"not an ELF file").expect("write");
        let reason = check(&fake).expect_err("garbage");
        assert!(reason.starts_with("cannot load it"), "{reason}");
        // The loader's own words, not only "dlopen failed" (issue 35).
        assert!(reason.contains("too short") || reason.contains("invalid ELF header"), "{reason}");
        assert_eq!(check(&dir.path().join("absent.so")).expect_err("missing"), "no such file");
        assert_eq!(check(dir.path()).expect_err("a directory"), "not a file");
    }

    #[test]
    fn a_library_without_the_onnx_runtime_entry_point_is_refused() {
        // The C library this test runs on is a real shared library that is not ONNX Runtime.
        let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
        let libc = maps
            .lines()
            .filter_map(|line| line.split_whitespace().nth(5))
            .find(|path| path.contains("/libc.so"))
            .expect("libc in /proc/self/maps");
        let reason = check(Path::new(libc)).expect_err("libc is not ONNX Runtime");
        assert!(reason.contains("OrtGetApiBase"), "{reason}");
    }

    #[test]
    fn a_missing_library_is_reported_with_the_places_searched() {
        let places = SearchPlaces { library_dirs: vec!["/nowhere/lib".into()], ..SearchPlaces::default() };
        let text = places.describe_miss(&["/x/libonnxruntime.so.1.9.0: too old".into()]);
        assert!(text.contains("/nowhere/lib") && text.contains("pip install onnxruntime"), "{text}");
        assert!(text.contains("skipped /x/libonnxruntime.so.1.9.0: too old"), "{text}");
    }
}
