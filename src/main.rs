//! The `jetson-detectd` command line. Only argument handling, error context and exit codes live
//! here; the work is in the library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use jetson_detectd::config::{Config, ConfigError};

/// EX_CONFIG from sysexits.h: the systemd unit's RestartPreventExitStatus, so a bad config does
/// not restart-loop.
const EXIT_CONFIG: u8 = 78;

#[derive(Parser)]
#[command(name = "jetson-detectd", version, about = "Object detection on camera frames, published over MQTT")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a config file (or the built-in default) without starting anything.
    CheckConfig {
        /// Config file; default: the built-in default (config/jetson-detectd.toml).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

fn load_config(path: Option<&Path>) -> Result<Config, ConfigError> {
    match path {
        Some(path) => Config::load(path),
        None => Config::embedded_default(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { config } => match load_config(config.as_deref()) {
            Ok(config) => {
                println!("{}: ok ({} camera(s))", config.origin, config.cameras.len());
                ExitCode::SUCCESS
            }
            Err(e) => report(anyhow::Error::new(e).context("invalid configuration"), EXIT_CONFIG),
        },
    }
}

fn report(error: anyhow::Error, code: u8) -> ExitCode {
    eprintln!("jetson-detectd: {error:#}");
    ExitCode::from(code)
}
