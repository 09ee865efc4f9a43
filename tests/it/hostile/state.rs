//! The zones file under concurrent and interrupted saves (issue 35): two daemons sharing one file,
//! and the temp files of a save killed half-way.

use std::ffi::OsStr;
use std::net::SocketAddr;

use super::{shared_dir, web_config};
use crate::daemon::{sample_source, RunningDaemon};
use crate::http::{http_address, request};

fn zone_body(zone: &str) -> Vec<u8> {
    format!(r#"{{"zones":[{{"name":"{zone}","polygon":[[0,0.5],[1,0.5],[1,1]]}}]}}"#).into_bytes()
}

fn put_zone(address: SocketAddr, camera: &str, zone: &str) -> u16 {
    let headers = [("Content-Type", "application/json")];
    request(address, "PUT", &format!("/api/cameras/{camera}/zones"), &headers, &zone_body(zone)).status
}

/// Two daemons sharing a zones file overwrote each other's saves: both PUTs answered 200 and one
/// camera's zones were gone from the file in 20-23 of 30 rounds. Saves now read, change and write
/// the file under a lock: after every round of two concurrent saves the file holds both.
#[test]
fn two_daemons_saving_into_one_zones_file_keep_each_others_cameras() {
    const ROUNDS: usize = 12;
    let dir = shared_dir();
    let config = web_config(1, "hostile-two-daemons", dir.path())
        .camera("front", 1.0, &sample_source("dog.jpg", "loop"))
        .camera("back", 1.0, &sample_source("person.jpg", "loop"));
    let mut first = RunningDaemon::start(&config.write(&dir.path().join("first.toml")), &[]);
    let mut second = RunningDaemon::start(&config.write(&dir.path().join("second.toml")), &[]);
    let (a, b) = (http_address(&mut first), http_address(&mut second));
    let zones = dir.path().join("zones.toml");
    for round in 0..ROUNDS {
        let (front, back) = (format!("front{round}"), format!("back{round}"));
        let saving = std::thread::spawn({
            let back = back.clone();
            move || put_zone(b, "back", &back)
        });
        assert_eq!(put_zone(a, "front", &front), 200);
        assert_eq!(saving.join().expect("second save"), 200);
        let text = std::fs::read_to_string(&zones).expect("the zones file");
        assert!(
            text.contains(&format!("\"{front}\"")) && text.contains(&format!("\"{back}\"")),
            "round {round}:\n{text}"
        );
    }
}

/// `kill -9` in the middle of a save left `.zones.toml.tmp-<pid>` files behind for good. The next
/// start removes them (and nothing else).
#[test]
fn the_temp_files_of_a_save_cut_short_are_removed_at_start() {
    let dir = shared_dir();
    let leftover = dir.path().join(".zones.toml.tmp-4242");
    std::fs::write(&leftover, "[[camera]]\nname = \"front\"\n").expect("write");
    std::fs::write(dir.path().join("zones.toml"), "").expect("write");
    let config = web_config(1, "hostile-leftovers", dir.path())
        .camera("front", 1.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[("RUST_LOG", OsStr::new("info"))]);
    let log = daemon.log_handle();
    daemon.wait_until("running", || log.text().contains("running:"));
    assert!(!leftover.exists(), "{}", daemon.log());
    assert!(dir.path().join("zones.toml").exists());
    assert!(log.text().contains(".zones.toml.tmp-4242"), "the log says what was removed:\n{}", daemon.log());
}
