//! The engine cache's build lock between two processes, as in production (the daemon and
//! `build-engine` building into one cache directory): the second waits while the first holds it,
//! learns who holds it, and gets it once the first is done. The first process is this test binary
//! again, running [`build_lock_holder_process`].

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use jetson_detectd::backend::engine::cache::EngineCache;

use crate::arch::this_test_binary;

/// Set for [`build_lock_holder_process`] run as the first builder: the cache directory.
const LOCK_HOLDER_DIR: &str = "JETSON_DETECTD_TEST_BUILD_LOCK_DIR";

fn cache(dir: &Path) -> EngineCache {
    EngineCache::open(dir, Path::new("/models/ssd.onnx")).expect("open cache")
}

/// Not a test of its own (ignored): the first builder of
/// [`a_second_builder_waits_for_the_first_and_learns_who_it_is`]. Takes the build lock, says so on
/// stdout, and holds the lock until its stdin closes.
#[test]
#[ignore = "run by a_second_builder_waits_for_the_first_and_learns_who_it_is as its other process"]
fn build_lock_holder_process() {
    let dir = std::env::var_os(LOCK_HOLDER_DIR).expect("run by the build lock test only");
    let holder = format!("pid {} (jetson-detectd run), building ssd.abc.engine", std::process::id());
    let _lock = cache(Path::new(&dir))
        .lock_builds(&holder, Duration::MAX, |_, _| panic!("nobody else holds it"))
        .expect("lock");
    // On a line of its own: libtest has written `test <name> ... ` without a newline.
    println!("\nbuild lock taken");
    std::io::stdout().flush().expect("flush");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

#[test]
fn a_second_builder_waits_for_the_first_and_learns_who_it_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = cache(dir.path());
    let mut first = this_test_binary()
        .args(["--exact", "build_lock::build_lock_holder_process", "--ignored", "--nocapture", "--test-threads=1"])
        .env(LOCK_HOLDER_DIR, dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the first builder");
    let stdout = first.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
    assert!(lines.any(|line| line == "build lock taken"), "the first builder did not take the lock");
    let mut first_input = first.stdin.take();
    let mut told = Vec::new();
    let lock = cache.lock_builds("pid 2 (jetson-detectd build-engine)", Duration::MAX, |holder, _| {
        told.push(holder.to_owned());
        // Only once this one has waited does the first builder finish.
        drop(first_input.take());
    });
    lock.expect("acquired after the first released it");
    // Read to the end, so that the first builder's last lines never meet a closed pipe.
    let rest: Vec<String> = lines.collect();
    assert!(first.wait().expect("first builder").success(), "{rest:?}");
    assert_eq!(told[0], format!("pid {} (jetson-detectd run), building ssd.abc.engine", first.id()));

    // Released on drop, whoever held it last: a third builder gets it at once.
    cache.lock_builds("pid 3", Duration::MAX, |_, _| panic!("must not wait")).expect("free again");
}
