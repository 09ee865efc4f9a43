//! The engine stores against real servers the tests start (`store_servers`): a pack pushed by one
//! device is fetched by another; a second push of the same key does not replace the first; two
//! devices claiming one key's lease get one holder and one wait, a released lease passes on and a
//! dead builder's is taken over once it has not been renewed for its lifetime; a store that is
//! down, one that never answers and a shutdown during a download each end the call with the
//! reason; an object over the size bound is refused before it is read. Whether a pack is trusted
//! is the pack layer's (its tests, and the signed pack read back here).
//!
//! Then the store in the engine chain, through the binary (`detect`, `build-engine` and `run`, with
//! the stand-in toolchain in place of TensorRT): a device with an empty cache takes the engine
//! another pushed without building, on the registry and on SeaweedFS; of two devices missing one
//! engine one builds and the other pulls; `build-engine` pushes what it builds and pulls what the
//! store has; a corrupt pack is refused, named, and the device builds; `SIGTERM` during an upload
//! or a download (through a [`SlowLink`]) ends it at once, leaving no half pack in the store and
//! nothing cached; a device stopped by `SIGTERM` while it builds under the lease has released the
//! lease when it exits, on the registry and on SeaweedFS; a store that is down means a local build,
//! with the reason in the log.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jetson_detectd::backend::engine::stand_in::STAND_IN_ENV;
use jetson_detectd::backend::fleet::pack::PrivateKey;
use jetson_detectd::backend::fleet::store::lease::{lease_object, LeaseRecord};
use jetson_detectd::backend::fleet::store::{Claimed, EngineStore, Leases, StoreError, StoreSettings, Write, Written};
use jetson_detectd::config::engine_store::StoreLocation;

use crate::arch::daemon_command;
use crate::broker::Broker;
use crate::daemon::{sample, toml_string, RunningDaemon, TestConfig};
use crate::pace::Pace;
use crate::store_servers::{Registry, Seaweed, SlowLink, BUCKET, S3_SECRET, S3_USER};

fn settings(location: StoreLocation) -> StoreSettings {
    StoreSettings { location, credentials: None, endpoint: None, timeout: Duration::from_secs(60), max_bytes: 64 << 20 }
}

fn oci(registry: &Registry) -> StoreSettings {
    settings(StoreLocation::Oci {
        registry: registry.address.clone(),
        repository: "fleet/engines".into(),
        plain_http: true,
    })
}

fn s3(seaweed: &Seaweed, prefix: &str) -> StoreSettings {
    StoreSettings {
        credentials: Some((S3_USER.into(), S3_SECRET.into())),
        endpoint: Some(seaweed.endpoint.clone()),
        ..settings(StoreLocation::Objects { url: format!("s3://{BUCKET}/{prefix}") })
    }
}

/// The stop flag of calls that are never stopped.
static GOING: AtomicBool = AtomicBool::new(false);

fn open(settings: &StoreSettings) -> EngineStore {
    EngineStore::open(settings).expect("open the store")
}

/// A pack-sized object: 20 MB of bytes that do not compress.
fn pack_bytes(seed: u8) -> Vec<u8> {
    let mut state = u32::from(seed) + 1;
    (0..20_000_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

/// What every store must do with packs: one device pushes, another fetches the same bytes, a
/// second push of the key leaves the first, a missing key is no error.
fn packs_travel_between_devices(settings: &StoreSettings) {
    let (builder, other) = (open(settings), open(settings));
    let pack = pack_bytes(1);
    assert_eq!(other.fetch("engines/0123456789abcdef.pack", &GOING).expect("lookup"), None);
    assert!(matches!(
        builder.push("engines/0123456789abcdef.pack", pack.clone(), Write::Create, &GOING),
        Ok(Written::Done(_))
    ));
    let fetched = other.fetch("engines/0123456789abcdef.pack", &GOING).expect("fetch").expect("the pack is there");
    assert!(fetched.bytes == pack, "the fetched pack differs from the pushed one");
    assert_eq!(
        other.push("engines/0123456789abcdef.pack", pack_bytes(2), Write::Create, &GOING),
        Ok(Written::Conflict)
    );
    assert!(other.fetch("engines/0123456789abcdef.pack", &GOING).expect("fetch").expect("there").bytes == pack);

    let small = StoreSettings { max_bytes: 1 << 20, ..settings.clone() };
    match open(&small).fetch("engines/0123456789abcdef.pack", &GOING) {
        Err(StoreError::TooLarge { bytes, .. }) => assert_eq!(bytes, 20_000_000),
        other => panic!("a pack over the bound must be refused, got {other:?}"),
    }
}

/// A lease's lifetime in these tests: long beside a renewal (a registry's takes its settle time,
/// two seconds) even on a loaded machine, short beside a test.
const LIFETIME: Duration = Duration::from_secs(8);

/// Calls `attempt` every quarter second until it says yes, for at most a daemon wait.
fn eventually(mut attempt: impl FnMut() -> bool) -> bool {
    let patience = Pace::measured().daemon_wait();
    let started = Instant::now();
    while started.elapsed() < patience {
        if attempt() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    false
}

/// What every store must do with leases.
fn one_device_builds_a_key_while_the_other_waits(settings: &StoreSettings) {
    let first = Leases::new(open(settings), LIFETIME);
    let second = Leases::new(open(settings), LIFETIME);
    let held = match first.claim("feedfacecafe0001", "pid 10 on nano-1", &GOING).expect("claim") {
        Claimed::Held(guard) => guard,
        Claimed::Busy(busy) => panic!("nobody held it, yet {} does", busy.holder),
    };
    match second.claim("feedfacecafe0001", "pid 20 on nano-2", &GOING).expect("claim") {
        Claimed::Busy(busy) => assert_eq!(busy.holder, "pid 10 on nano-1"),
        Claimed::Held(_) => panic!("two devices hold one lease"),
    }
    // Renewed while held: still busy after more than its lifetime.
    std::thread::sleep(LIFETIME + LIFETIME / 2);
    assert!(second.holder("feedfacecafe0001", &GOING).expect("look").is_some(), "a renewed lease expired");
    drop(held);
    let released = eventually(|| {
        matches!(second.claim("feedfacecafe0001", "pid 20 on nano-2", &GOING).expect("claim"), Claimed::Held(_))
    });
    assert!(released, "a released lease did not pass on");

    // A builder that died (its lease never renewed) is taken over once it stayed unchanged for
    // its lifetime, as this device saw it.
    let dead =
        LeaseRecord { holder: "pid 30 (dies)".into(), token: "0".into(), lease_s: 2, renewals: 0, released: false };
    let record = serde_json::to_vec(&dead).expect("json");
    open(settings)
        .push(&lease_object("feedfacecafe0002"), record, Write::Create, &GOING)
        .expect("a dead builder's lease");
    let taken = eventually(|| match second.claim("feedfacecafe0002", "pid 20 on nano-2", &GOING).expect("claim") {
        Claimed::Held(_) => true,
        Claimed::Busy(busy) => {
            assert_eq!(busy.holder, "pid 30 (dies)");
            false
        }
    });
    assert!(taken, "a dead builder's lease was never taken over");
}

#[test]
fn packs_and_leases_on_an_oci_registry() {
    let Some(registry) = Registry::start() else { return };
    packs_travel_between_devices(&oci(&registry));
    one_device_builds_a_key_while_the_other_waits(&oci(&registry));
}

#[test]
fn packs_and_leases_on_an_s3_server() {
    let Some(seaweed) = Seaweed::start() else { return };
    packs_travel_between_devices(&s3(&seaweed, "fleet"));
    one_device_builds_a_key_while_the_other_waits(&s3(&seaweed, "fleet"));
    let wrong = StoreSettings { credentials: Some((S3_USER.into(), "not the secret".into())), ..s3(&seaweed, "fleet") };
    let refused = open(&wrong).fetch("engines/0123456789abcdef.pack", &GOING).expect_err("wrong secret");
    assert!(refused.to_string().contains("fleet"), "{refused}");
}

#[test]
fn packs_and_leases_in_a_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let location = StoreLocation::Objects { url: format!("file://{}", dir.path().display()) };
    packs_travel_between_devices(&settings(location.clone()));
    one_device_builds_a_key_while_the_other_waits(&settings(location));
}

#[test]
fn a_store_that_is_down_or_never_answers_or_is_stopped_ends_the_call_with_the_reason() {
    // Down: nothing listens on the port.
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let down = settings(StoreLocation::Oci {
        registry: format!("127.0.0.1:{port}"),
        repository: "e".into(),
        plain_http: true,
    });
    let error = open(&down).fetch("engines/0123456789abcdef.pack", &GOING).expect_err("down");
    assert!(matches!(error, StoreError::Failed { .. }), "{error:?}");

    // Hangs: a listener that accepts and never answers. The timeout is the behaviour under test.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = silent.local_addr().expect("addr");
    let hung = StoreSettings {
        timeout: Duration::from_secs(2),
        ..settings(StoreLocation::Oci { registry: address.to_string(), repository: "e".into(), plain_http: true })
    };
    let error = open(&hung).fetch("engines/0123456789abcdef.pack", &GOING).expect_err("hung");
    assert!(matches!(error, StoreError::TimedOut { seconds: 2, .. } | StoreError::Failed { .. }), "{error:?}");
    assert!(error.to_string().contains(&address.to_string()), "{error}");

    // Stopped: shutdown during a download that would never end.
    let cancel = Arc::new(AtomicBool::new(false));
    let patient = StoreSettings { timeout: Duration::from_secs(3600), ..hung };
    let store = EngineStore::open(&patient).expect("open");
    let stop = cancel.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
    });
    let error = store.fetch("engines/0123456789abcdef.pack", &cancel).expect_err("stopped");
    assert!(matches!(error, StoreError::Cancelled { .. }), "{error:?}");
    stopper.join().expect("stopper");
    drop(silent);
}

/// What the chain logs when it builds (`crate::backend::engine::chain`).
const BUILDING: &str = "building the engine";

/// A device of the fleet (for `detect`): its own engine cache, the fleet's store at `url`,
/// pushing what it builds when `push`. The fleet's key pair is in `keys` (made by [`fleet_keys`]).
fn device_config(dir: &Path, name: &str, keys: &Path, url: &str, push: bool) -> PathBuf {
    device(dir, name, keys, url, push, 1883).write(&dir.join(format!("{name}.toml")))
}

/// [`device_config`]'s config, publishing to the broker on `broker_port` (for `run`).
fn device(dir: &Path, name: &str, keys: &Path, url: &str, push: bool, broker_port: u16) -> TestConfig {
    let mut config = TestConfig::new(broker_port, &format!("store-{name}"))
        .camera("demo", 2.0, "{ kind = \"synthetic\" }")
        .set("device", "backend", "\"auto\"")
        .set("engine", "cache_dir", &toml_string(&dir.join(name).display().to_string()))
        .set("engine.store", "url", &toml_string(url))
        .set("engine.store", "public_key", &toml_string(&keys.join("fleet.key.pub").display().to_string()));
    if push {
        config = config.set("engine.store", "push", "true").set(
            "engine.store",
            "signing_key",
            &toml_string(&keys.join("fleet.key").display().to_string()),
        );
    }
    config
}

fn fleet_keys(dir: &Path) -> PathBuf {
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).expect("keys dir");
    PrivateKey::generate().expect("a key").write(&keys.join("fleet.key")).expect("write the fleet's key");
    keys
}

/// `detect` on one sample with the stand-in engine, whose build takes `build_s` seconds.
fn start_detect(config: &Path, build_s: u32) -> Child {
    daemon_command()
        .args(["detect", "--config"])
        .arg(config)
        .arg(sample("chelsea.png"))
        .env(STAND_IN_ENV, format!("build_s={build_s}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start jetson-detectd detect")
}

/// Its stderr, once it succeeded.
fn succeeded(output: Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "detect failed: {:?}\n{stderr}", output.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn cached_engines(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().ends_with(".engine")).count()
    })
}

/// Two devices with empty caches on one store (`config(name, push)` writes each one's config):
/// the first builds and pushes, the second takes the pushed engine without building.
fn the_second_device_takes_the_engine_the_first_pushed(dir: &Path, config: impl Fn(&str, bool) -> PathBuf) {
    let built = succeeded(start_detect(&config("nano-1", true), 1).wait_with_output().expect("detect"));
    assert!(built.contains(BUILDING), "the first device builds:\n{built}");
    let pulled = succeeded(start_detect(&config("nano-2", false), 1).wait_with_output().expect("detect"));
    assert!(!pulled.contains(BUILDING), "the second device must not build:\n{pulled}");
    assert_eq!(cached_engines(&dir.join("nano-2")), 1, "the pulled engine is cached:\n{pulled}");
}

#[test]
fn a_device_with_an_empty_cache_takes_the_engine_another_pushed_without_building() {
    let Some(registry) = Registry::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let url = format!("oci+http://{}/fleet/engines", registry.address);
    the_second_device_takes_the_engine_the_first_pushed(dir.path(), |name, push| {
        device_config(dir.path(), name, &keys, &url, push)
    });
}

#[test]
fn of_two_devices_missing_one_engine_one_builds_and_the_other_waits_and_pulls() {
    let Some(registry) = Registry::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let url = format!("oci+http://{}/fleet/engines", registry.address);
    // Long beside a look at the store, so that the second device sees the first one's lease.
    let build_s = 10;
    let devices: Vec<Child> = ["orin-1", "orin-2"]
        .iter()
        .map(|name| start_detect(&device_config(dir.path(), name, &keys, &url, true), build_s))
        .collect();
    let logs: Vec<String> =
        devices.into_iter().map(|device| succeeded(device.wait_with_output().expect("detect"))).collect();
    let builders = logs.iter().filter(|log| log.contains(BUILDING)).count();
    assert_eq!(builders, 1, "exactly one device builds:\n{}", logs.join("\n----\n"));
    for name in ["orin-1", "orin-2"] {
        assert_eq!(cached_engines(&dir.path().join(name)), 1, "{name} has the engine");
    }
}

/// `build-engine` on `config` with the stand-in engine (a one-second build): its JSON answer.
fn build_engine(config: &Path) -> (serde_json::Value, String) {
    let output = daemon_command()
        .args(["build-engine", "--config"])
        .arg(config)
        .env(STAND_IN_ENV, "build_s=1")
        .stdin(Stdio::null())
        .output()
        .expect("run jetson-detectd build-engine");
    let stdout = output.stdout.clone();
    let stderr = succeeded(output);
    let answer = serde_json::from_slice(&stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (answer, stderr)
}

#[test]
fn build_engine_pushes_what_it_builds_and_another_device_pulls_it_instead_of_building() {
    let Some(registry) = Registry::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let url = format!("oci+http://{}/fleet/engines", registry.address);
    let (built, log) = build_engine(&device_config(dir.path(), "nano-1", &keys, &url, true));
    assert_eq!((built["up_to_date"].as_bool(), built["pulled_from"].as_str()), (Some(false), None), "{built}\n{log}");
    assert!(log.contains(BUILDING) && log.contains("pushed engines/"), "{log}");

    let (pulled, log) = build_engine(&device_config(dir.path(), "nano-2", &keys, &url, false));
    assert!(!log.contains(BUILDING), "the second device must not build:\n{log}");
    assert_eq!(pulled["pulled_from"].as_str(), Some(url.as_str()), "{pulled}");
    assert_eq!(pulled["key"], built["key"], "the same engine");
    assert_eq!(cached_engines(&dir.path().join("nano-2")), 1, "the pulled engine is cached");
}

#[test]
fn a_store_that_is_down_means_a_local_build_with_the_reason_logged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let config = device_config(dir.path(), "nano", &keys, &format!("oci+http://127.0.0.1:{port}/fleet/engines"), true);
    let log = succeeded(start_detect(&config, 1).wait_with_output().expect("detect"));
    assert!(log.contains(BUILDING), "{log}");
    let reason = log.lines().find(|line| line.contains("building locally")).unwrap_or_else(|| panic!("{log}"));
    assert!(reason.contains(&format!("127.0.0.1:{port}")), "the reason names the store: {reason}");
}

/// The slow link's speed: a pack (the bundled model, 24 MB) takes minutes through it, a lookup
/// or a lease a fraction of a second.
const SLOW_BYTES_PER_S: u64 = 256 << 10;

/// More than every lookup and lease of a start moves: a pack is on its way.
const A_PACK_UNDER_WAY: u64 = 1 << 20;

/// A device that runs (`run`, the stand-in's one-second build) on `config`.
fn start_run(config: &Path) -> RunningDaemon {
    RunningDaemon::start(config, &[(STAND_IN_ENV, OsStr::new("build_s=1"))])
}

/// The key of the one engine cached in `dir` (`<model>.<key>.engine`).
fn cached_key(dir: &Path) -> String {
    let names: Vec<String> = std::fs::read_dir(dir)
        .expect("the cache directory")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".engine"))
        .collect();
    match names.as_slice() {
        [name] => name.trim_end_matches(".engine").rsplit('.').next().expect("a key").to_owned(),
        other => panic!("one engine is cached, not {other:?}"),
    }
}

#[test]
fn sigterm_during_an_upload_ends_it_at_once_and_the_store_never_shows_half_a_pack() {
    let Some(registry) = Registry::start() else { return };
    let broker = Broker::start();
    let link = SlowLink::start(&registry.address, SLOW_BYTES_PER_S);
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let url = format!("oci+http://{}/fleet/engines", link.address);
    let config = device(dir.path(), "orin", &keys, &url, true, broker.port())
        .set("engine.store", "timeout_s", "3600")
        .write(&dir.path().join("orin.toml"));
    let mut daemon = start_run(&config);
    daemon.wait_until("the pack's upload", || link.bytes_to_store() > A_PACK_UNDER_WAY);
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "exit status 0 during an upload; log:\n{}", daemon.log());
    let log = daemon.log();
    assert!(!log.contains("did not stop within"), "the upload ended with the daemon:\n{log}");
    let abandoned = log.lines().find(|line| line.contains("not pushed")).unwrap_or_else(|| panic!("{log}"));
    assert!(abandoned.contains("shutting down"), "the log says why: {abandoned}");
    let pack = format!("engines/{}.pack", cached_key(&dir.path().join("orin")));
    assert_eq!(open(&oci(&registry)).fetch(&pack, &GOING).expect("look in the store"), None, "no half pack");
}

#[test]
fn sigterm_during_a_download_ends_it_at_once_and_caches_nothing() {
    let Some(registry) = Registry::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let direct = format!("oci+http://{}/fleet/engines", registry.address);
    succeeded(
        start_detect(&device_config(dir.path(), "orin-1", &keys, &direct, true), 1).wait_with_output().expect("detect"),
    );

    let broker = Broker::start();
    let link = SlowLink::start(&registry.address, SLOW_BYTES_PER_S);
    let slow = format!("oci+http://{}/fleet/engines", link.address);
    let config = device(dir.path(), "orin-2", &keys, &slow, false, broker.port())
        .set("engine.store", "timeout_s", "3600")
        .write(&dir.path().join("orin-2.toml"));
    let mut daemon = start_run(&config);
    daemon.wait_until("the pack's download", || link.bytes_from_store() > A_PACK_UNDER_WAY);
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "exit status 0 during a download; log:\n{}", daemon.log());
    let log = daemon.log();
    assert!(!log.contains("did not stop within"), "the download ended with the daemon:\n{log}");
    assert!(!log.contains(BUILDING) && !log.contains("building locally"), "a stop is no reason to build:\n{log}");
    assert_eq!(cached_engines(&dir.path().join("orin-2")), 0, "nothing half-downloaded is cached");
}

/// The key the chain builds, from its log line (`building the engine <dir>/<model>.<key>.engine: …`).
fn key_being_built(log: &str) -> Option<String> {
    let path = log.lines().find_map(|line| line.split_once(&format!("{BUILDING} "))?.1.split_once(".engine:"))?.0;
    Some(path.rsplit_once('.')?.1.to_owned())
}

/// A device that `run`s, holding the lease on the engine it builds (a build that would take an
/// hour, under a lease of an hour), is stopped by `SIGTERM`: it exits cleanly, and its lease is
/// released by then, so that another device takes the key at its first claim, not after `lease_s`.
fn a_device_stopped_mid_build_has_released_its_lease_when_it_exits(store: &StoreSettings, config: TestConfig) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config.set("engine.store", "lease_s", "3600").write(&dir.path().join("orin-1.toml"));
    let mut daemon = RunningDaemon::start(&config, &[(STAND_IN_ENV, OsStr::new("build_s=3600"))]);
    let log = daemon.log_handle();
    daemon.wait_until("the build under the lease", || key_being_built(&log.text()).is_some());
    let key = key_being_built(&daemon.log()).expect("the key");
    let leases = Leases::new(open(store), LIFETIME);
    let holder = leases.holder(&key, &GOING).expect("look at the lease").map(|busy| busy.holder);
    assert!(holder.is_some_and(|holder| holder.contains(&daemon.pid().to_string())), "the daemon holds the lease");
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "exit status 0 during a build; log:\n{}", daemon.log());
    assert!(!daemon.log().contains("not released"), "{}", daemon.log());
    let lease = open(store).fetch(&lease_object(&key), &GOING).expect("read the lease").expect("the lease object");
    let record: LeaseRecord = serde_json::from_slice(&lease.bytes).expect("a lease record");
    assert!(record.released, "released before the daemon exited: {record:?}");
    match leases.claim(&key, "pid 40 on orin-2", &GOING).expect("claim") {
        Claimed::Held(_) => {}
        Claimed::Busy(busy) => panic!("the stopped device's lease still holds the key: {}", busy.holder),
    }
}

#[test]
fn a_device_stopped_mid_build_releases_its_lease_on_a_registry_before_it_exits() {
    let Some(registry) = Registry::start() else { return };
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let url = format!("oci+http://{}/fleet/engines", registry.address);
    let config = device(dir.path(), "orin-1", &keys, &url, true, broker.port());
    a_device_stopped_mid_build_has_released_its_lease_when_it_exits(&oci(&registry), config);
}

#[test]
fn a_device_stopped_mid_build_releases_its_lease_on_an_s3_server_before_it_exits() {
    let Some(seaweed) = Seaweed::start() else { return };
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let secret = s3_secret_file(dir.path());
    let config = device(dir.path(), "orin-1", &keys, &format!("s3://{BUCKET}/stopped"), true, broker.port())
        .set("engine.store", "endpoint", &toml_string(&seaweed.endpoint))
        .set("engine.store", "username", &toml_string(S3_USER))
        .set("engine.store", "password_file", &toml_string(&secret.display().to_string()));
    a_device_stopped_mid_build_has_released_its_lease_when_it_exits(&s3(&seaweed, "stopped"), config);
}

#[test]
fn a_corrupt_pack_in_the_store_is_refused_naming_it_and_why_and_the_device_builds() {
    let Some(registry) = Registry::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let url = format!("oci+http://{}/fleet/engines", registry.address);
    succeeded(
        start_detect(&device_config(dir.path(), "nano-1", &keys, &url, true), 1).wait_with_output().expect("detect"),
    );
    let pack = format!("engines/{}.pack", cached_key(&dir.path().join("nano-1")));
    let store = open(&oci(&registry));
    let mut bytes = store.fetch(&pack, &GOING).expect("fetch").expect("the pushed pack").bytes;
    // A byte of the engine, in the middle of the pack, flipped (a bad disk or a bad copy).
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    assert!(matches!(store.push(&pack, bytes, Write::Overwrite, &GOING), Ok(Written::Done(_))));

    let log = succeeded(
        start_detect(&device_config(dir.path(), "nano-2", &keys, &url, false), 1).wait_with_output().expect("detect"),
    );
    let refused = log.lines().find(|line| line.contains("is refused")).unwrap_or_else(|| panic!("{log}"));
    assert!(refused.contains(&pack) && refused.contains("sha256"), "names the pack and why: {refused}");
    assert!(log.contains(BUILDING), "the device builds instead:\n{log}");
}

/// `password_file` for the S3 tests' secret, readable by its owner only.
fn s3_secret_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("s3.secret");
    std::fs::write(&path, S3_SECRET).expect("write the secret");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("owner only");
    path
}

#[test]
fn on_an_s3_server_a_device_with_an_empty_cache_takes_the_engine_another_pushed_without_building() {
    let Some(seaweed) = Seaweed::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = fleet_keys(dir.path());
    let secret = s3_secret_file(dir.path());
    let url = format!("s3://{BUCKET}/fleet");
    the_second_device_takes_the_engine_the_first_pushed(dir.path(), |name, push| {
        device(dir.path(), name, &keys, &url, push, 1883)
            .set("engine.store", "endpoint", &toml_string(&seaweed.endpoint))
            .set("engine.store", "username", &toml_string(S3_USER))
            .set("engine.store", "password_file", &toml_string(&secret.display().to_string()))
            .write(&dir.path().join(format!("{name}.toml")))
    });
}
