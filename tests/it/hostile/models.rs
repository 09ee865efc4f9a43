//! Models and libraries `check-config` passed and `run` then refused, hung on, or failed with at
//! the first frame (issues 33 and 35): both now run the same model and library checks and exit 78
//! alike, naming the key, within the suite's time and memory bounds.

use std::path::Path;

use super::{one_camera, run_bounded, run_command, shared_dir, toml_path};
use crate::arch::daemon_command as daemon;
use crate::daemon::TestConfig;

/// `check-config` and `run` on `config` both exit 78 naming every `wanted` text.
fn both_refuse(what: &str, config: &Path, wanted: &[&str]) {
    for command in ["check-config", "run"] {
        run_command(what, command, config).assert_config_error(&format!("{what} ({command})"), wanted);
    }
}

/// `what`, a model file of `bytes`, is refused by [`both_refuse`] on rten and on `auto` (ONNX
/// Runtime where it is installed), naming the file and every `wanted` text.
fn every_engine_refuses(what: &str, bytes: &[u8], wanted: &[&str]) {
    let dir = shared_dir();
    let model = dir.path().join("model.onnx");
    std::fs::write(&model, bytes).expect("write");
    let path = model.display().to_string();
    let wanted: Vec<&str> = [path.as_str()].into_iter().chain(wanted.iter().copied()).collect();
    for engine in ["rten", "auto"] {
        let config = one_camera()
            .model(&model, &TestConfig::bundled_labels())
            .set("device", "cpu_engine", &format!("{engine:?}"))
            .write(&dir.path().join(format!("config-{engine}.toml")));
        both_refuse(&format!("{what} on {engine}"), &config, &wanted);
    }
}

/// An all-0xff model hung rten's loader at 100 % CPU (in `read_varint`) while `check-config` said
/// ok. Both engines now refuse it at once.
#[test]
fn an_all_0xff_model_is_refused_by_check_config_and_run_without_hanging() {
    every_engine_refuses("an all-0xff model", &vec![0xffu8; 1 << 20], &[]);
}

/// A model whose outputs do not fit the decoder (the SSD model decoded as YOLOv8) passed
/// `check-config`, became ready and exited 1 at the first frame (under systemd: a restart every 5 s). A blank frame through the model and the
/// decoder at start finds it: exit 78 naming `model.decoder`, before any frame.
#[test]
fn outputs_that_do_not_fit_the_decoder_exit_78_naming_model_decoder() {
    let dir = shared_dir();
    // One decoder here (each case loads and runs the model twice, slow under qemu); every decoder's
    // checks of its outputs are unit-tested in `decode`.
    let config = one_camera().set("model", "decoder", "\"yolov8\"").write(&dir.path().join("config.toml"));
    both_refuse("the SSD model decoded as yolov8", &config, &["model.decoder", "yolov8"]);
}

/// Issue 33: a u8 model configured as `dtype = "f32"` passed `check-config`; `run` exited 78.
#[test]
fn an_input_that_does_not_match_model_input_is_refused_by_check_config_too() {
    let dir = shared_dir();
    let config = one_camera().set("model.input", "dtype", "\"f32\"").write(&dir.path().join("config.toml"));
    both_refuse("a u8 model configured as f32", &config, &["model input does not match", "f32"]);
}

/// `check-config` exited 0 for a missing or foreign `device.onnxruntime_library` (or
/// `ORT_DYLIB_PATH`) that `run` refuses with 78; and a library that does not load said only
/// "dlopen failed".
#[test]
fn a_missing_or_foreign_onnx_runtime_library_is_refused_by_check_config_too_with_the_loaders_reason() {
    let dir = shared_dir();
    let foreign = dir.path().join("libonnxruntime.so");
    std::fs::write(&foreign, "not a shared library\n".repeat(64)).expect("write");
    let missing = dir.path().join("missing/libonnxruntime.so");
    let cases = [(&foreign, "invalid ELF header"), (&missing, "no such file")];
    for (n, (library, reason)) in cases.into_iter().enumerate() {
        let config = one_camera()
            .set("device", "onnxruntime_library", &toml_path(library))
            .write(&dir.path().join(format!("config-{n}.toml")));
        let path = library.display().to_string();
        both_refuse(&format!("onnxruntime_library {path}"), &config, &["device.onnxruntime_library", &path, reason]);
    }
    let config =
        one_camera().set("device", "cpu_engine", "\"onnxruntime\"").write(&dir.path().join("config-environment.toml"));
    for command in ["check-config", "run"] {
        let mut binary = daemon();
        binary.args([command, "--config"]).arg(&config).env("ORT_DYLIB_PATH", &foreign).env_remove("NOTIFY_SOCKET");
        let what = format!("ORT_DYLIB_PATH {} ({command})", foreign.display());
        run_bounded(&what, binary).assert_config_error(&what, &["ORT_DYLIB_PATH", "invalid ELF header"]);
    }
}

/// An ONNX model with one `u8` input `image` of [1, 300, 300, 3], an `Identity` node, and no
/// output: protobuf written out by hand (field numbers from onnx.proto).
fn model_without_outputs() -> Vec<u8> {
    fn varint(mut value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }
    let number = |field: u64, value: u64| [varint(field << 3), varint(value)].concat();
    let bytes =
        |field: u64, value: &[u8]| [varint(field << 3 | 2), varint(value.len() as u64), value.to_vec()].concat();
    let dims: Vec<u8> = [1, 300, 300, 3].iter().flat_map(|dim| bytes(1, &number(1, *dim))).collect();
    let tensor_type = [number(1, 2), bytes(2, &dims)].concat();
    let input = [bytes(1, b"image"), bytes(2, &bytes(1, &tensor_type))].concat();
    let node = [bytes(1, b"image"), bytes(2, b"out"), bytes(4, b"Identity")].concat();
    let graph = [bytes(1, &node), bytes(2, b"g"), bytes(11, &input)].concat();
    let opset = [bytes(1, b""), number(2, 13)].concat();
    [number(1, 8), bytes(7, &graph), bytes(8, &opset)].concat()
}

/// Issue 49 (round 2's residue): a model with no outputs made `check-config` and `run` exit 1 on
/// ONNX Runtime (its first inference failed: a restart every 5 s for ever), 78 on rten. Both
/// engines now refuse it at load, with 78 naming the file.
#[test]
fn a_model_without_outputs_is_refused_with_78_on_every_engine() {
    every_engine_refuses("a model without outputs", &model_without_outputs(), &["no outputs"]);
}
