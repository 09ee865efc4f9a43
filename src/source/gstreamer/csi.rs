//! A Jetson CSI camera: `nvarguscamerasrc` (through nvargus-daemon) → `nvvidconv` → NV12 in
//! system memory → appsink.
//!
//! Owns: [`CsiSpec`] and the pipeline description built from it, and the checks that say what is
//! missing off a Jetson. Must not: start the pipeline (that is `super`'s) or guess a sensor mode
//! the user did not configure.

use std::path::Path;

use super::decoder::{ElementRegistry, JETSON_CONVERTER};

/// The element that reads CSI sensors through Argus (L4T's `nvidia-l4t-gstreamer`).
pub const CSI_SOURCE: &str = "nvarguscamerasrc";
/// The socket nvargus-daemon listens on; `nvarguscamerasrc` talks to the cameras only through it.
pub const ARGUS_SOCKET: &str = "/tmp/argus_socket";

/// A CSI sensor and the mode to run it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsiSpec {
    pub sensor_id: u32,
    pub width: u32,
    pub height: u32,
    pub fps: u32,
}

impl CsiSpec {
    pub fn describe(&self) -> String {
        format!("csi:sensor {} {}x{} at {} fps", self.sensor_id, self.width, self.height, self.fps)
    }
}

/// Why a CSI camera cannot be opened here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CsiUnavailable {
    /// Not a Jetson, or L4T's GStreamer plugins are not installed: retrying cannot help.
    NoElement(String),
    /// nvargus-daemon is not (yet) running: it may come up later.
    NoDaemon(String),
}

/// The pipeline description for `spec`, once the elements and nvargus-daemon's socket are there.
pub fn launch_description(
    spec: &CsiSpec,
    registry: &dyn ElementRegistry,
    argus_socket: &Path,
) -> Result<String, CsiUnavailable> {
    for element in [CSI_SOURCE, JETSON_CONVERTER] {
        if !registry.has(element) {
            return Err(CsiUnavailable::NoElement(format!(
                "no GStreamer element {element}: CSI cameras need a Jetson with L4T's GStreamer plugins \
                 (apt-get install nvidia-l4t-gstreamer)"
            )));
        }
    }
    if !argus_socket.exists() {
        return Err(CsiUnavailable::NoDaemon(format!(
            "nvargus-daemon is not running (no {}): systemctl start nvargus-daemon",
            argus_socket.display()
        )));
    }
    let CsiSpec { sensor_id, width, height, fps } = *spec;
    Ok(format!(
        "{CSI_SOURCE} sensor-id={sensor_id} \
         ! video/x-raw(memory:NVMM),width={width},height={height},framerate={fps}/1,format=NV12 \
         ! {JETSON_CONVERTER} ! video/x-raw,format=NV12 ! appsink name=sink"
    ))
}

#[cfg(test)]
mod tests {
    use super::super::decoder::tests::FakeRegistry;
    use super::*;

    const SPEC: CsiSpec = CsiSpec { sensor_id: 1, width: 1920, height: 1080, fps: 30 };

    fn jetson() -> FakeRegistry {
        let mut registry = FakeRegistry::desktop();
        registry.elements.extend([CSI_SOURCE, JETSON_CONVERTER]);
        registry
    }

    #[test]
    fn a_jetson_with_nvargus_daemon_gets_the_nvmm_pipeline_for_the_sensor() {
        let socket = tempfile::NamedTempFile::new().expect("socket stand-in");
        let description = launch_description(&SPEC, &jetson(), socket.path()).expect("pipeline");
        assert_eq!(
            description,
            "nvarguscamerasrc sensor-id=1 ! video/x-raw(memory:NVMM),width=1920,height=1080,framerate=30/1,format=NV12 \
             ! nvvidconv ! video/x-raw,format=NV12 ! appsink name=sink"
        );
    }

    #[test]
    fn off_a_jetson_the_error_names_the_missing_element_and_package() {
        let socket = tempfile::NamedTempFile::new().expect("socket stand-in");
        match launch_description(&SPEC, &FakeRegistry::desktop(), socket.path()) {
            Err(CsiUnavailable::NoElement(message)) => {
                assert!(message.contains("nvarguscamerasrc") && message.contains("nvidia-l4t-gstreamer"), "{message}");
            }
            other => panic!("expected a missing element, got {other:?}"),
        }
        let without_converter = jetson().without(JETSON_CONVERTER);
        assert!(matches!(
            launch_description(&SPEC, &without_converter, socket.path()),
            Err(CsiUnavailable::NoElement(message)) if message.contains("nvvidconv")
        ));
    }

    #[test]
    fn without_nvargus_daemon_the_error_says_to_start_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        match launch_description(&SPEC, &jetson(), &dir.path().join("argus_socket")) {
            Err(CsiUnavailable::NoDaemon(message)) => assert!(message.contains("nvargus-daemon"), "{message}"),
            other => panic!("expected a missing daemon, got {other:?}"),
        }
    }
}
