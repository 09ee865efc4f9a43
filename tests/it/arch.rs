//! Which architecture the integration tests run as, and how to start our own binary on it.
//!
//! In CI the aarch64 test binaries run under qemu-user through cargo's `CARGO_TARGET_<TRIPLE>_RUNNER`.
//! qemu-user cannot `execve` another aarch64 binary by itself (no binfmt_misc in a CI container), so
//! tests that start `jetson-detectd` go through the same runner via [`daemon_command`].

use std::process::{Command, Stdio};

/// A command that starts the `jetson-detectd` binary built for this test run, wrapped in the runner
/// cargo used for this test binary (e.g. qemu-aarch64) when one is set.
pub fn daemon_command() -> Command {
    through_runner(env!("CARGO_BIN_EXE_jetson-detectd").as_ref())
}

/// A command that starts this test binary again (through the runner, as [`daemon_command`] does):
/// a second process for tests of what happens between processes.
pub fn this_test_binary() -> Command {
    through_runner(&std::env::current_exe().expect("the test binary's path"))
}

/// A command that starts the aarch64 or x86_64 `binary` through the runner cargo used for this
/// test binary (`CARGO_TARGET_<TRIPLE>_RUNNER`, e.g. qemu-aarch64 and its arguments), else directly.
fn through_runner(binary: &std::path::Path) -> Command {
    let runner_var = format!("CARGO_TARGET_{}_UNKNOWN_LINUX_GNU_RUNNER", std::env::consts::ARCH.to_uppercase());
    let runner = std::env::var(runner_var).unwrap_or_default();
    let mut runner_words = runner.split_whitespace();
    match runner_words.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(runner_words).arg(binary);
            command
        }
        None => Command::new(binary),
    }
}

/// `command` as an unprivileged user would run it: as root (CI), under `setpriv` as `nobody`
/// (uid and gid 65534, no supplementary groups), for whom permission bits apply; otherwise as is.
/// Files it must read need to be readable by others, and their directories searchable.
pub fn as_unprivileged_user(command: Command) -> Command {
    as_nobody_in(command, None)
}

/// `command` as the packaged service runs it: as root (CI), under `setpriv` as `nobody` with
/// `group` as its one supplementary group (the unit's `DynamicUser=` in `SupplementaryGroups=
/// jetson-detectd`, whose members read the secrets); otherwise as is.
pub fn as_service_user(command: Command, group: u32) -> Command {
    as_nobody_in(command, Some(group))
}

fn as_nobody_in(command: Command, group: Option<u32>) -> Command {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return command;
    }
    let groups = match group {
        Some(group) => format!("--groups={group}"),
        None => "--clear-groups".into(),
    };
    let mut setpriv = Command::new("setpriv");
    setpriv.args(["--reuid=65534", "--regid=65534", &groups, "--"]).arg(command.get_program());
    setpriv.args(command.get_args());
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => setpriv.env(name, value),
            None => setpriv.env_remove(name),
        };
    }
    setpriv
}

#[test]
fn reports_the_architecture_it_runs_as() {
    println!("integration tests running as {}", std::env::consts::ARCH);
    assert!(
        matches!(std::env::consts::ARCH, "x86_64" | "aarch64"),
        "unsupported architecture {}",
        std::env::consts::ARCH
    );
}

#[test]
fn daemon_binary_starts_on_this_architecture() {
    let output = daemon_command()
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", env!("CARGO_BIN_EXE_jetson-detectd")));
    assert!(output.status.success(), "jetson-detectd --help failed: {}", String::from_utf8_lossy(&output.stderr));
}
