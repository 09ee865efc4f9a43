//! What TensorRT this machine has.
//!
//! Owns: [`probe`], which loads TensorRT once and says plainly what it found. Must not: build or
//! load engines.

use serde::Serialize;

use super::error::TrtError;
use super::runtime::{self, header_version};
use super::version::TrtVersion;

/// What `jetson-detectd probe` says about TensorRT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrtProbe {
    /// Whether libnvinfer loaded and a runtime could be created.
    pub available: bool,
    /// The library file looked for, e.g. `libnvinfer.so.10`.
    pub library: String,
    /// Headers the shim was compiled against.
    pub compiled_against: String,
    /// Version of the library found, when it loaded (also when it is too old to use).
    pub library_version: Option<String>,
    /// The same, when the library is usable (for the engine lookup that follows a probe).
    #[serde(skip)]
    pub usable_version: Option<TrtVersion>,
    /// `{"loaded": bool, "library": "libnvinfer_plugin.so.<major>", "detail": ...}`: TensorRT's
    /// plugins (EfficientNMS for `end2end` models), absent when TensorRT itself did not load.
    pub plugins: Option<PluginProbe>,
    /// One plain sentence for the operator.
    pub summary: String,
}

/// Whether TensorRT's plugin library loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginProbe {
    pub loaded: bool,
    pub library: String,
    /// Why it did not load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Tries to load TensorRT and says plainly what it found. Never fails.
pub fn probe() -> TrtProbe {
    let library = runtime::library_name().to_owned();
    let compiled_against = header_version().to_string();
    match runtime::TrtRuntime::open() {
        Ok(runtime) => TrtProbe {
            available: true,
            summary: format!("TensorRT {} loaded from {library}", runtime.version()),
            library_version: Some(runtime.version().to_string()),
            usable_version: Some(runtime.version()),
            plugins: Some(PluginProbe {
                loaded: runtime.plugins().is_ok(),
                library: runtime::plugin_library_name().to_owned(),
                detail: runtime.plugins().err().map(str::to_owned),
            }),
            library,
            compiled_against,
        },
        Err(error @ TrtError::TooOld { library: found, .. }) => TrtProbe {
            available: false,
            summary: error.to_string(),
            library_version: Some(found.to_string()),
            usable_version: None,
            plugins: None,
            library,
            compiled_against,
        },
        Err(error) => {
            let detail = match &error {
                TrtError::NotInstalled(message) => message.clone(),
                other => other.to_string(),
            };
            TrtProbe {
                available: false,
                summary: format!(
                    "TensorRT is not available ({detail}). This binary was built for TensorRT {compiled_against} \
                     and looks for {library}; install TensorRT {} (JetPack) or set device.backend = \"cpu\".",
                    header_version().major
                ),
                library_version: None,
                usable_version: None,
                plugins: None,
                library,
                compiled_against,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the dynamic loader finds `library`, asked directly: the oracle the probe's answer
    /// is checked against.
    fn loader_finds(library: &str) -> bool {
        let name = std::ffi::CString::new(library).expect("library name");
        // SAFETY: `name` is NUL-terminated; dlopen has no other preconditions. A handle it returns
        // is closed at once and nothing from the library is called.
        unsafe {
            let handle = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
            if handle.is_null() {
                return false;
            }
            libc::dlclose(handle);
        }
        true
    }

    /// The probe's answer agrees with the dynamic loader's, whichever it is, and says it plainly:
    /// no library, a library found (its version named), or a usable one.
    #[test]
    fn probe_reports_plainly() {
        let probe = probe();
        eprintln!("{}", probe.summary);
        assert!(probe.library.starts_with("libnvinfer.so."), "{}", probe.library);
        if !loader_finds(&probe.library) {
            assert!(!probe.available, "no {} on this machine, yet the probe says available", probe.library);
            assert_eq!(probe.library_version, None);
            assert!(probe.summary.contains("TensorRT is not available"), "{}", probe.summary);
            assert!(probe.summary.contains(&probe.library), "{}", probe.summary);
            return;
        }
        if probe.available {
            let version = probe.library_version.as_deref().expect("a usable library has a version");
            assert!(probe.usable_version.is_some() && probe.plugins.is_some(), "{probe:?}");
            assert_eq!(probe.summary, format!("TensorRT {version} loaded from {}", probe.library));
        } else {
            // Found but not usable (too old, no GPU): the summary says why, with the version when known.
            assert!(probe.usable_version.is_none(), "{probe:?}");
            assert!(probe.library_version.as_deref().is_none_or(|v| probe.summary.contains(v)), "{}", probe.summary);
        }
    }
}
