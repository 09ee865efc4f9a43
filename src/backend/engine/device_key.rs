//! Which GPU an engine belongs to: the device part of the engine cache key.
//!
//! Owns: [`DeviceIdentity`] and how the board is named (the device-tree model on a Jetson, the
//! GPU's UUID elsewhere). Pure Rust and always compiled. Must not: call CUDA (the TensorRT layer
//! fills the identity from the driver) or decide anything about the cache.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The GPU an engine was built for: TensorRT engines are specific to it. The name alone is not
/// enough: every Orin module (AGX, NX, Nano) reports the name "Orin" and compute capability 8.7, but
/// they differ in SMs, memory and DLA cores, so a cloned SD card or a copied cache directory must
/// not reuse an engine tuned for another module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceIdentity {
    pub name: String,
    pub compute_capability: (u32, u32),
    pub multiprocessors: u32,
    pub total_memory_bytes: u64,
    /// The board: `/proc/device-tree/model` on a Jetson (e.g. "NVIDIA Jetson AGX Orin Developer
    /// Kit"), else the GPU's UUID ([`board_identity`]).
    pub board: String,
}

impl DeviceIdentity {
    /// `Orin (8.7, 16 SMs, 62.8 GiB, NVIDIA Jetson AGX Orin Developer Kit)`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}.{}, {} SMs, {:.1} GiB, {})",
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.multiprocessors,
            self.total_memory_bytes as f64 / f64::from(1u32 << 30),
            self.board
        )
    }
}

/// Longest `/proc/device-tree/model` read (real ones are about 60 bytes).
const MAX_BOARD_MODEL_BYTES: u64 = 256;

/// `<root>/proc/device-tree/model`: the board's name on a Jetson (absent on most PCs).
pub fn read_device_tree_model(root: &Path) -> Option<Vec<u8>> {
    let file = File::open(root.join("proc/device-tree/model")).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_BOARD_MODEL_BYTES).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The board part of a [`DeviceIdentity`]: the device-tree model when there is one (it names the
/// module, so identical modules share prebuilt engines), else `GPU-<uuid>` (the card itself).
pub fn board_identity(device_tree_model: Option<&[u8]>, uuid: &[u8; 16]) -> String {
    let model = device_tree_model
        .map(|bytes| String::from_utf8_lossy(bytes).trim_matches(|c: char| c == '\0' || c.is_whitespace()).to_owned())
        .filter(|model| !model.is_empty());
    model.unwrap_or_else(|| {
        let hex: String = uuid.iter().map(|byte| format!("{byte:02x}")).collect();
        format!("GPU-{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn the_board_is_the_device_tree_model_else_the_gpu_uuid() {
        let uuid = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 1, 2, 3, 4, 5, 6, 7];
        assert_eq!(
            board_identity(Some(b"NVIDIA Jetson Orin Nano Developer Kit\0"), &uuid),
            "NVIDIA Jetson Orin Nano Developer Kit"
        );
        assert_eq!(board_identity(None, &uuid), "GPU-12345678-9abc-def0-0001-020304050607");
        assert_eq!(board_identity(Some(b"\0"), &uuid), "GPU-12345678-9abc-def0-0001-020304050607");

        let root = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_device_tree_model(root.path()), None);
        fs::create_dir_all(root.path().join("proc/device-tree")).expect("mkdir");
        fs::write(root.path().join("proc/device-tree/model"), b"NVIDIA Jetson AGX Orin Developer Kit\0")
            .expect("write");
        let model = read_device_tree_model(root.path()).expect("model");
        assert_eq!(board_identity(Some(&model), &uuid), "NVIDIA Jetson AGX Orin Developer Kit");
    }

    #[test]
    fn a_device_describes_its_name_capability_sms_memory_and_board() {
        let device = DeviceIdentity {
            name: "Orin".into(),
            compute_capability: (8, 7),
            multiprocessors: 16,
            total_memory_bytes: 8 << 30,
            board: "NVIDIA Jetson Orin Nano Developer Kit".into(),
        };
        assert_eq!(device.describe(), "Orin (8.7, 16 SMs, 8.0 GiB, NVIDIA Jetson Orin Nano Developer Kit)");
    }
}
