//! `jetson-detectd engine keygen` and `engine sign` through the real binary: the key files and
//! their modes, a pack signed in place that verifies against the public key only, and the refusals
//! a careless user meets (an existing key, a world-readable key, a damaged pack). Importing needs
//! this device's TensorRT identity; the pack layer's unit tests cover it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use jetson_detectd::backend::engine::cache::{EngineIdentity, EngineSidecar};
use jetson_detectd::backend::fleet::pack::{Pack, PackManifest, PackedEngine, PrivateKey, PublicKey, Trust};

use crate::arch::daemon_command;

fn engine(args: &[&str]) -> (i32, String, String) {
    let output = daemon_command().arg("engine").args(args).output().expect("run jetson-detectd engine");
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(output.stdout), text(output.stderr))
}

/// An unsigned pack of one stand-in engine, as another device's `engine export` writes it.
fn unsigned_pack(path: &Path) {
    let identity: EngineIdentity = serde_json::from_value(serde_json::json!({
        "model_sha256": "ab".repeat(32), "external_data": {}, "tensorrt_version": "10.3.0",
        "builder": "shim 0123456789ab, TensorRT headers 10.3.0", "device_name": "Orin",
        "compute_capability": "8.7", "multiprocessors": 8, "total_memory_bytes": 7_990_000_000u64,
        "board": "NVIDIA Jetson Orin Nano Developer Kit", "precision": "fp16", "workspace_bytes": 1 << 30,
        "dla_core": null, "optimization_level": 3, "input_profile": null, "profile_count": 0
    }))
    .expect("identity");
    let engine = vec![7u8; 10_000];
    let manifest = PackManifest {
        schema: 1,
        created_by: "another device".into(),
        engines: vec![PackedEngine { model: "ssd".into(), sidecar: EngineSidecar::new(&identity, &engine) }],
        timing_caches: Vec::new(),
    };
    let pack = Pack { manifest, engines: vec![engine], timing_caches: Vec::new() };
    fs::write(path, pack.to_bytes(None).expect("pack")).expect("write pack");
}

#[test]
fn keygen_writes_a_private_key_only_its_owner_reads_and_never_replaces_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("fleet.key");
    let (status, stdout, stderr) = engine(&["keygen", key.to_str().expect("utf-8")]);
    assert_eq!(status, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let public = PublicKey::read(&dir.path().join("fleet.key.pub")).expect("a PEM public key");
    assert_eq!(report["key_id"], public.id());
    let mode = fs::metadata(&key).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode & 0o077 & !0o040, 0, "private key mode {mode:o}");
    let before = fs::read(&key).expect("read");
    let (status, _, stderr) = engine(&["keygen", key.to_str().expect("utf-8")]);
    assert_ne!(status, 0);
    assert!(stderr.contains("fleet.key"), "{stderr}");
    assert_eq!(fs::read(&key).expect("read"), before, "an existing key is left as it was");
}

#[test]
fn sign_makes_a_pack_that_verifies_against_that_key_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("fleet.key");
    let pack = dir.path().join("ssd.pack");
    assert_eq!(engine(&["keygen", key.to_str().expect("utf-8")]).0, 0);
    unsigned_pack(&pack);
    let (status, stdout, stderr) =
        engine(&["sign", "--key", key.to_str().expect("utf-8"), pack.to_str().expect("utf-8")]);
    assert_eq!(status, 0, "{stderr}");
    let public = PublicKey::read(&dir.path().join("fleet.key.pub")).expect("public key");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    assert_eq!(
        (report["signed_by"].as_str(), report["engines"][0].as_str()),
        (Some(public.id().as_str()), Some("ssd"))
    );
    let bytes = fs::read(&pack).expect("read");
    let (read, signer) = Pack::read(bytes.as_slice(), &Trust::Key(public)).expect("verifies");
    assert_eq!((read.engines[0].len(), signer), (10_000, Some(report["signed_by"].as_str().unwrap_or("").to_owned())));
    let stranger = PrivateKey::generate().expect("key");
    assert!(Pack::read(bytes.as_slice(), &Trust::Key(stranger.public())).is_err());

    // A world-readable key is refused (exit 78: the user's setup), and so is a damaged pack.
    fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).expect("chmod");
    let (status, _, stderr) = engine(&["sign", "--key", key.to_str().expect("utf-8"), pack.to_str().expect("utf-8")]);
    assert_eq!(status, 78, "{stderr}");
    assert!(stderr.contains("chmod 0600"), "{stderr}");
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).expect("chmod");
    let mut damaged = bytes;
    let at = damaged.len() - 1024 - 600;
    damaged[at] ^= 1;
    fs::write(&pack, &damaged).expect("write");
    let (status, _, stderr) = engine(&["sign", "--key", key.to_str().expect("utf-8"), pack.to_str().expect("utf-8")]);
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("sha256"), "{stderr}");
    assert_eq!(fs::read(&pack).expect("read"), damaged, "a damaged pack is not signed");
}
