//! The `jetson-detectd` binary, driven as a user would.

use crate::arch::daemon_command as daemon;

#[test]
fn check_config_accepts_the_embedded_default() {
    let output = daemon().arg("check-config").output().expect("run jetson-detectd");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn malformed_config_exits_78_naming_file_and_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.toml");
    let text = jetson_detectd::config::EMBEDDED_DEFAULT.replace("nms_iou = 0.5", "nms_iou = 0.5\nnms_threshold = 2");
    std::fs::write(&path, text).expect("write config");
    let output = daemon().args(["check-config", "--config"]).arg(&path).output().expect("run jetson-detectd");
    assert_eq!(output.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.toml") && stderr.contains("nms_threshold"), "{stderr}");
}

#[test]
fn unparsable_and_missing_config_exit_78() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broken.toml");
    std::fs::write(&path, "[model\nonnx = ").expect("write config");
    for config in [path, dir.path().join("missing.toml")] {
        let output = daemon().args(["check-config", "--config"]).arg(&config).output().expect("run");
        assert_eq!(output.status.code(), Some(78), "{}", String::from_utf8_lossy(&output.stderr));
    }
}
