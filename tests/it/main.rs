//! Black-box tests against real parts: the bundled model and images, a real mosquitto broker,
//! real files and sockets. One test binary (modules below) keeps link time and CI time down.

mod broker;
mod daemon;
mod detect;
#[cfg(feature = "cuda")]
mod gpu;
mod mqtt;
mod notify;
mod sources;
mod telemetry;

use std::process::Command;

/// A `Command` for the daemon binary. Under cross-testing the binary is foreign (aarch64 on an
/// x86_64 host without binfmt), so CI names the same runner it gives cargo in
/// `JETSON_DETECTD_TEST_RUNNER` (e.g. `qemu-aarch64 -L /usr/aarch64-linux-gnu`).
pub fn daemon_command() -> Command {
    let binary = env!("CARGO_BIN_EXE_jetson-detectd");
    let runner = std::env::var("JETSON_DETECTD_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(words).arg(binary);
            command
        }
        None => Command::new(binary),
    }
}

/// CI sets `JETSON_DETECTD_EXPECT_ARCH` per suite, so the aarch64 run proves its binaries really
/// executed as aarch64 (under qemu) rather than silently on the host.
#[test]
fn runs_on_the_expected_architecture() {
    println!("test binary architecture: {}", std::env::consts::ARCH);
    if let Ok(expected) = std::env::var("JETSON_DETECTD_EXPECT_ARCH") {
        assert_eq!(std::env::consts::ARCH, expected);
    }
}
