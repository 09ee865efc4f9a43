//! Black-box tests against real parts: the bundled model and images, a real mosquitto broker,
//! real files and sockets. One test binary (modules below) keeps link time and CI time down.

mod broker;
mod daemon;
mod detect;
mod mqtt;
mod notify;
mod sources;
mod telemetry;

/// CI sets `JETSON_DETECTD_EXPECT_ARCH` per suite, so the aarch64 run proves its binaries really
/// executed as aarch64 (under qemu) rather than silently on the host.
#[test]
fn runs_on_the_expected_architecture() {
    println!("test binary architecture: {}", std::env::consts::ARCH);
    if let Ok(expected) = std::env::var("JETSON_DETECTD_EXPECT_ARCH") {
        assert_eq!(std::env::consts::ARCH, expected);
    }
}
