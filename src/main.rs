//! The `jetson-detectd` command line. Only argument handling, error context and exit codes live
//! here; the work is in the library.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use jetson_detectd::backend::engine::chain::unchecked;
use jetson_detectd::backend::{load, Backend, BuildDisplay};
use jetson_detectd::cmd::error::DaemonError;
use jetson_detectd::cmd::preflight::{self, check_model};
use jetson_detectd::cmd::run;
use jetson_detectd::cmd::selftest::{self, SelftestOptions, Status};
use jetson_detectd::cmd::{bench, detect, outlets, probe};
use jetson_detectd::config::{secrets, Config, ConfigError};
use jetson_detectd::decode::DecodeParams;
use jetson_detectd::detection::Labels;
use jetson_detectd::model::{DeviceSpec, ModelSpec};
use jetson_detectd::service::logging;
use jetson_detectd::sys::exit::Classified;

/// EX_CONFIG from sysexits.h: the systemd unit's RestartPreventExitStatus, so a bad config does
/// not restart-loop.
const EXIT_CONFIG: u8 = 78;
/// Any other failure (systemd restarts the service).
const EXIT_FAILURE: u8 = 1;

#[derive(Parser)]
#[command(name = "jetson-detectd", version, about = "Object detection on camera frames, published over MQTT")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct ConfigArg {
    /// Config file; default: the built-in default (config/jetson-detectd.toml: CPU or TensorRT,
    /// bundled model, bundled sample images, broker on localhost:1883).
    #[arg(long, short)]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon until SIGTERM/SIGINT (SIGHUP reloads thresholds, class filter, publish and
    /// tracking settings, zones and lines).
    Run(ConfigArg),
    /// Validate a config file (or the built-in default), the files it names (model, labels,
    /// password, TLS, image folders, V4L2 device nodes) and the model: on the CPU backend it is
    /// loaded as `run` loads it and a blank frame goes through it and the decoder (TensorRT checks
    /// it when the engine loads). Starts no camera, broker or web server.
    CheckConfig {
        #[command(flatten)]
        config: ConfigArg,
        /// Print the effective config as TOML: every key, defaults and computed values filled in
        /// (passwords are never part of a config, only the file or variable that holds them).
        #[arg(long)]
        print: bool,
        /// Print the built-in default config with its comments instead: every key, its default
        /// and what it means (config/jetson-detectd.toml is this text). Checks nothing.
        #[arg(long, conflicts_with = "print")]
        print_default: bool,
    },
    /// Detect objects in image files and print one JSON line per file (no MQTT).
    Detect {
        #[command(flatten)]
        config: ConfigArg,
        /// Overrides `model.score_threshold`.
        #[arg(long)]
        threshold: Option<f32>,
        /// Image files (PNG, JPEG, BMP, PPM).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Print what this machine offers as JSON: GPU, TensorRT, cameras, the broker and its login.
    Probe(ConfigArg),
    /// Time every pipeline stage on one image with the configured backend; prints JSON.
    Bench {
        #[command(flatten)]
        config: ConfigArg,
        /// Image to run; default: the first image of the first `images` camera.
        #[arg(long)]
        image: Option<PathBuf>,
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        #[arg(long, default_value_t = 50)]
        iterations: usize,
        /// Also benchmark the CUDA preprocessing kernel (1080p YUYV to 640x640 f16, each resize filter) on the GPU.
        #[arg(long)]
        gpu: bool,
        /// Also run N cameras showing the image through the inference scheduler (as the daemon
        /// would: engine.max_batch, device.cpu_workers); reports fps of all cameras and of each
        /// (with --fps or --motion: their capacity instead).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
        cameras: Option<u16>,
        /// With --cameras: the detectors the cameras run, assigned round robin, each served by its
        /// own lane of the one scheduler as in the daemon: `default` (`[model]`) and names of
        /// `[models.<name>]` detectors, e.g. `default,yard`; reports fps per model too.
        #[arg(long, value_name = "MODEL,...", value_delimiter = ',', requires = "cameras")]
        models: Vec<String>,
        /// With --cameras: each camera delivers FPS frames per second as a live camera would (a frame
        /// inference has not taken when the next comes is dropped); reports the capacity instead of
        /// the throughput: the most cameras, up to N, that each keep 95 % of FPS (N first, then a
        /// bisection below it), and per run the frames detected and gated.
        #[arg(long, value_name = "FPS", requires = "cameras")]
        fps: Option<f64>,
        /// With --cameras: the capacity with `[motion]` gating (enabled for the run), the cameras
        /// showing the image `idle` (still, with sensor noise) or `busy` (a block moving across);
        /// at --fps, default 5. Without it, --fps runs the idle scene ungated.
        #[arg(long, value_name = "idle|busy", requires = "cameras")]
        motion: Option<bench::MotionScene>,
    },
    /// Build the TensorRT engine for the config into the engine cache (or confirm it is current).
    BuildEngine(ConfigArg),
    /// Engine packs: share this device's built engines with devices of the same kind, signed.
    Engine {
        #[command(subcommand)]
        command: EngineCommand,
    },
    /// Prove this device: GPU, TensorRT, clocks, engine build times, detections against the CPU
    /// backend, latency. Exit status 0 only when every check passed (skipped ones do not fail).
    Selftest {
        #[command(flatten)]
        config: ConfigArg,
        /// Print the report as JSON (for an issue report) instead of a summary.
        #[arg(long)]
        json: bool,
        /// Inferences timed back to back.
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// Inferences timed with a pause before each (shows the GPU's power-state latency).
        #[arg(long, default_value_t = 50)]
        paused_runs: usize,
        /// The pause before each of the paused inferences, in milliseconds.
        #[arg(long, default_value_t = 200)]
        pause_ms: u64,
        /// Image file or directory to run; default: the first `images` camera's, else the bundled samples.
        #[arg(long)]
        images: Option<PathBuf>,
        /// Time a cold and a warm engine build even when the engine is cached (minutes on a Jetson).
        #[arg(long)]
        rebuild: bool,
        /// Only compare the engine with the CPU engine on the images, per label (without TensorRT:
        /// rten against ONNX Runtime), judged by engine.min_agreement as a new engine is.
        #[arg(long)]
        compare: bool,
    },
}

#[derive(Subcommand)]
enum EngineCommand {
    /// Write the cached engines and timing caches of the config's models into one pack file
    /// (build them first with `build-engine`).
    Export {
        #[command(flatten)]
        config: ConfigArg,
        /// Sign the pack with this private key (else sign it later with `engine sign`).
        #[arg(long)]
        key: Option<PathBuf>,
        /// The pack file to write.
        file: PathBuf,
    },
    /// Check a pack against `[engine.store]`'s public key and this device (TensorRT, builder,
    /// GPU and board, model, options) and cache its engines, or refuse it naming what differs.
    Import {
        #[command(flatten)]
        config: ConfigArg,
        /// The pack file to read.
        file: PathBuf,
    },
    /// Make a signing key: KEY (private, readable by its owner and group only) and KEY.pub (for
    /// `engine.store.public_key` on every device).
    Keygen {
        /// Where to write the private key; neither it nor KEY.pub may exist.
        key: PathBuf,
    },
    /// Sign a pack file in place with a private key.
    Sign {
        /// The private key (`engine keygen`, or `openssl genpkey -algorithm ed25519`).
        #[arg(long)]
        key: PathBuf,
        /// The pack file.
        file: PathBuf,
    },
}

/// The config, its model description completed from the ONNX file where it leaves keys unset.
fn load_config(arg: &ConfigArg) -> Result<Config, ConfigError> {
    let schema = outlets::schema();
    let mut config = match &arg.config {
        Some(path) => schema.load(path),
        None => schema.embedded_default(),
    }?;
    jetson_detectd::onnx::describe::describe(&mut config)?;
    Ok(config)
}

/// A failed command: what to print and which exit code to use.
struct Failure {
    error: anyhow::Error,
    code: u8,
}

/// Why a command stopped early: a failure, one already reported (logged) with its exit code, or
/// stdout's reader went away (`… | head`), which ends the command quietly and successfully, as it
/// does for other Unix tools.
enum Stop {
    Failed(Failure),
    Reported(u8),
    ReaderGone,
}

impl<T: Into<Failure>> From<T> for Stop {
    fn from(failure: T) -> Self {
        Stop::Failed(failure.into())
    }
}

/// Writes `bytes` to stdout and flushes.
fn write_stdout(stdout: &mut impl Write, bytes: &[u8]) -> Result<(), Stop> {
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Stop::ReaderGone),
        Err(e) => Err(Stop::Failed(Failure::other(anyhow::Error::new(e).context("writing to stdout")))),
    }
}

/// Prints `text` and a newline on stdout.
fn print_line(text: &str) -> Result<(), Stop> {
    write_stdout(&mut std::io::stdout().lock(), format!("{text}\n").as_bytes())
}

impl Failure {
    fn config(error: ConfigError) -> Self {
        Failure { error: anyhow::Error::new(error).context("invalid configuration"), code: EXIT_CONFIG }
    }
    fn other(error: anyhow::Error) -> Self {
        Failure { error, code: EXIT_FAILURE }
    }
}

impl From<DaemonError> for Failure {
    fn from(error: DaemonError) -> Self {
        let code = if error.is_configuration_problem() { EXIT_CONFIG } else { EXIT_FAILURE };
        Failure { error: anyhow::Error::new(error), code }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(arg) => run(&arg),
        Command::CheckConfig { print_default: true, .. } => {
            write_stdout(&mut std::io::stdout().lock(), outlets::schema().default_text().as_bytes())
        }
        Command::CheckConfig { config, print, .. } => check_config(&config, print),
        Command::Detect { config, threshold, files } => detect(&config, threshold, &files),
        Command::Probe(arg) => probe_command(&arg),
        Command::Bench { config, image, warmup, iterations, gpu, cameras, models, fps, motion } => {
            let request = bench::BenchRequest {
                image: image.as_deref(),
                warmup,
                iterations,
                gpu,
                cameras: cameras.map(usize::from),
                models: &models,
                fps,
                motion,
            };
            bench_command(&config, &request)
        }
        Command::BuildEngine(arg) => build_engine(&arg),
        Command::Engine { command } => engine_command(command),
        Command::Selftest { config, json, compare: true, images, .. } => compare_command(&config, json, images),
        Command::Selftest { config, json, runs, paused_runs, pause_ms, images, rebuild, compare: false } => {
            let options = SelftestOptions {
                runs,
                paused_runs,
                pause: std::time::Duration::from_millis(pause_ms),
                images,
                rebuild,
            };
            selftest_command(&config, json, &options)
        }
    };
    match outcome {
        Ok(()) | Err(Stop::ReaderGone) => ExitCode::SUCCESS,
        Err(Stop::Reported(code)) => ExitCode::from(code),
        Err(Stop::Failed(Failure { error, code })) => {
            eprintln!("jetson-detectd: {}", describe(&error));
            ExitCode::from(code)
        }
    }
}

/// The error and its causes on one line, like `{:#}`, but without repeating a cause whose text the
/// line already holds: many library errors write their source into their own message as well.
fn describe(error: &anyhow::Error) -> String {
    let mut line = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !line.contains(&cause) {
            line.push_str(": ");
            line.push_str(&cause);
        }
    }
    line
}

fn run(arg: &ConfigArg) -> Result<(), Stop> {
    let config = load_config(arg).map_err(Failure::config)?;
    logging::init(config.device.log_level.filter());
    // Logged once, where the daemon's log goes (the journal under systemd), not printed again.
    run::run(config, arg.config.clone()).map_err(|e| {
        log::error!("{e}");
        Stop::Reported(Failure::from(e).code)
    })
}

/// The config, every check `run` makes before it opens a device or a socket
/// ([`preflight::preflight`]), and the model and library checks of the backend `run` would load
/// ([`check_model`]) wherever that needs no engine build: what this accepts, `run` does not
/// refuse at start. Secrets are checked the way the service will see them
/// ([`secrets::check_for_service`]); what that says goes to stderr as notes, so that `--print`
/// stays TOML.
fn check_config(arg: &ConfigArg, print: bool) -> Result<(), Stop> {
    let config = load_config(arg).map_err(Failure::config)?;
    let secrets = secrets::check_for_service(&config).map_err(Failure::config)?;
    let checked = preflight::preflight(&secrets.rest).map_err(Failure::from)?;
    let model = check_model(&secrets.rest, &checked).map_err(Failure::from)?;
    for note in &secrets.notes {
        eprintln!("note: {note}");
    }
    for warning in &checked.warnings {
        eprintln!("warning: {warning}");
    }
    for camera in &config.zones_from_file {
        eprintln!("note: {}", camera.describe(&config.http.zones_file));
    }
    for problem in &config.zones_file_problems {
        eprintln!("warning: {}", problem.describe(&config.http.zones_file));
    }
    if print {
        // What was recognised leads the effective config as TOML comments.
        let recognised = config.recognised().map(|line| format!("# recognised: {line}\n"));
        let text = recognised.collect::<String>() + &config.to_toml().map_err(Failure::config)?;
        return write_stdout(&mut std::io::stdout().lock(), text.as_bytes());
    }
    print_line(&format!("{}: ok ({} camera(s); {model})", config.origin, config.cameras.len()))?;
    for line in config.recognised() {
        print_line(&format!("recognised: {line}"))?;
    }
    Ok(())
}

/// The labels and decode parameters of `config`, with an optional threshold override.
fn decode_setup(config: &Config, threshold: Option<f32>) -> Result<(Arc<Labels>, DecodeParams), Failure> {
    let model = ModelSpec::from_config(config).map_err(Failure::config)?;
    let labels = Arc::new(
        Labels::load(&model.labels).map_err(|error| Failure::config(config.file_error("model.labels", error)))?,
    );
    let mut params =
        DecodeParams::new(&model, &config.model, &labels).map_err(|e| Failure::from(DaemonError::Classes(e)))?;
    if let Some(threshold) = threshold {
        if !(0.0..=1.0).contains(&threshold) {
            return Err(Failure::other(anyhow::anyhow!("--threshold {threshold}: must be between 0 and 1")));
        }
        params.score_threshold = threshold;
    }
    Ok((labels, params))
}

/// The configured model on the configured backend for a one-shot command; an engine build shows
/// its progress on stderr.
fn load_backend(config: &Config) -> Result<Arc<dyn Backend>, Failure> {
    let model = ModelSpec::from_config(config).map_err(Failure::config)?;
    let mut display = BuildDisplay::default();
    let device = DeviceSpec::from_config(config);
    let backend = load::load_backend(&model, &device, |event| display.report(&event), &mut unchecked);
    display.finish();
    backend.map_err(|e| Failure::from(DaemonError::from(e)))
}

/// Quiet logging for one-shot commands: warnings and errors on stderr, stdout stays JSON.
fn init_cli_logging(config: &Config) {
    logging::init(config.device.log_level.filter().min(log::LevelFilter::Warn));
}

fn detect(arg: &ConfigArg, threshold: Option<f32>, files: &[PathBuf]) -> Result<(), Stop> {
    let config = load_config(arg).map_err(Failure::config)?;
    init_cli_logging(&config);
    let (labels, params) = decode_setup(&config, threshold)?;
    let backend = load_backend(&config)?;
    let mut detector = detect::OneShotDetector::new(backend.as_ref(), params, labels, config.limits)
        .map_err(|e| Failure::from(DaemonError::from(e)))?;
    let mut failed = 0usize;
    let mut stdout = std::io::stdout().lock();
    for file in files {
        match detector.detect(file) {
            Ok(mut line) => {
                line.push(b'\n');
                write_stdout(&mut stdout, &line)?;
            }
            Err(e) => {
                eprintln!("jetson-detectd: {e}");
                failed += 1;
            }
        }
    }
    match failed {
        0 => Ok(()),
        n => Err(Failure::other(anyhow::anyhow!("{n} of {} file(s) could not be processed", files.len())).into()),
    }
}

fn probe_command(arg: &ConfigArg) -> Result<(), Stop> {
    let config = load_config(arg).map_err(Failure::config)?;
    init_cli_logging(&config);
    let report = probe::probe(&config);
    let json = serde_json::to_string_pretty(&report).context("encoding the report").map_err(Failure::other)?;
    print_line(&json)
}

fn bench_command(arg: &ConfigArg, request: &bench::BenchRequest<'_>) -> Result<(), Stop> {
    let config = load_config(arg).map_err(Failure::config)?;
    init_cli_logging(&config);
    let (labels, params) = decode_setup(&config, None)?;
    let backend = load_backend(&config)?;
    let report = bench::run(&config, backend, params, labels, request).context("benchmark").map_err(Failure::other)?;
    let json = serde_json::to_string_pretty(&report).context("encoding the report").map_err(Failure::other)?;
    print_line(&json)
}

fn selftest_command(arg: &ConfigArg, json: bool, options: &SelftestOptions) -> Result<(), Stop> {
    let config = load_config(arg).map_err(Failure::config)?;
    init_cli_logging(&config);
    let mut display = BuildDisplay::default();
    let report = selftest::run(&config, options, &mut |event| display.report(&event));
    display.finish();
    let text = if json {
        serde_json::to_string_pretty(&report).context("encoding the report").map_err(Failure::other)? + "\n"
    } else {
        selftest::render_text(&report)
    };
    write_stdout(&mut std::io::stdout().lock(), text.as_bytes())?;
    if report.passed {
        Ok(())
    } else {
        let failed: Vec<&str> = report.checks.iter().filter(|c| c.status == Status::Fail).map(|c| c.name).collect();
        Err(Failure::other(anyhow::anyhow!("selftest failed: {}", failed.join(", "))).into())
    }
}

fn engine_command(command: EngineCommand) -> Result<(), Stop> {
    use jetson_detectd::cmd::engine::{self, EngineCommandError};
    let failed = |error: EngineCommandError| {
        let code = error.exit_class().code();
        Failure { error: anyhow::Error::new(error), code }
    };
    let with_config = |arg: &ConfigArg| -> Result<Config, Failure> {
        let config = load_config(arg).map_err(Failure::config)?;
        init_cli_logging(&config);
        Ok(config)
    };
    let report = match command {
        EngineCommand::Export { config, key, file } => {
            serde_json::to_value(engine::export(&with_config(&config)?, key.as_deref(), &file).map_err(failed)?)
        }
        EngineCommand::Import { config, file } => {
            serde_json::to_value(engine::import(&with_config(&config)?, &file).map_err(failed)?)
        }
        EngineCommand::Keygen { key } => serde_json::to_value(engine::keygen(&key).map_err(failed)?),
        EngineCommand::Sign { key, file } => serde_json::to_value(engine::sign(&key, &file).map_err(failed)?),
    };
    let report = report.context("encoding the report").map_err(Failure::other)?;
    print_line(&serde_json::to_string_pretty(&report).context("encoding the report").map_err(Failure::other)?)
}

/// `selftest --compare`: the per-label table (or JSON); exit status 1 when the engine disagrees.
fn compare_command(arg: &ConfigArg, json: bool, images: Option<PathBuf>) -> Result<(), Stop> {
    let config = load_config(arg).map_err(Failure::config)?;
    init_cli_logging(&config);
    let images = images.unwrap_or_else(|| selftest::image_source(&config, &SelftestOptions::default()));
    let mut display = BuildDisplay::default();
    let compared = selftest::compare::compare(&config, &images, &mut |event| display.report(&event));
    display.finish();
    let compared = compared.map_err(|e| Failure::other(anyhow::anyhow!("selftest --compare: {e}")))?;
    let text = if json {
        serde_json::to_string_pretty(&compared).context("encoding the report").map_err(Failure::other)? + "\n"
    } else {
        compared.render_text()
    };
    write_stdout(&mut std::io::stdout().lock(), text.as_bytes())?;
    if compared.passed {
        Ok(())
    } else {
        Err(Failure::other(anyhow::anyhow!("selftest --compare: the engine disagrees with the CPU")).into())
    }
}

fn build_engine(arg: &ConfigArg) -> Result<(), Stop> {
    use jetson_detectd::backend::engine::EngineError;
    use jetson_detectd::service::notify::Notifier;
    let config = load_config(arg).map_err(Failure::config)?;
    logging::init(config.device.log_level.filter());
    let model = ModelSpec::from_config(&config).map_err(Failure::config)?;
    // Under systemd (an ExecStartPre=, say) keep extending the start timeout while building.
    let notifier = Notifier::from_env().unwrap_or_else(|_| Notifier::disabled());
    let mut display = BuildDisplay::default();
    let built = load::build_engine(&model, &DeviceSpec::from_config(&config), |event| {
        display.report(&event);
        let _ = notifier.build_progress(std::time::Duration::from_secs(30), &display.line());
    });
    display.finish();
    let built = built.map_err(|e| {
        let code = if matches!(e, EngineError::Config(_)) { EXIT_CONFIG } else { EXIT_FAILURE };
        Failure { error: anyhow::Error::new(e).context("engine build failed"), code }
    })?;
    let json = serde_json::to_string_pretty(&built).context("encoding the result").map_err(Failure::other)?;
    print_line(&json)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stdout whose reader has gone away.
    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stdout_ends_quietly_and_other_write_errors_fail() {
        assert!(matches!(write_stdout(&mut ClosedPipe, b"{}\n"), Err(Stop::ReaderGone)));
        let mut full = [0u8; 1];
        let outcome = write_stdout(&mut &mut full[..], b"too long");
        assert!(matches!(outcome, Err(Stop::Failed(Failure { code: EXIT_FAILURE, .. }))));
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read label file {path}: {source}")]
    struct EmbedsItsSource {
        path: &'static str,
        source: std::io::Error,
    }

    #[test]
    fn describe_names_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let error = anyhow::Error::new(EmbedsItsSource { path: "/x/labels.txt", source: io }).context("invalid setup");
        assert_eq!(describe(&error), "invalid setup: cannot read label file /x/labels.txt: No such file or directory");
    }

    #[test]
    fn describe_keeps_causes_the_message_does_not_hold() {
        let error = anyhow::anyhow!("disk full").context("writing the engine").context("engine build failed");
        assert_eq!(describe(&error), "engine build failed: writing the engine: disk full");
    }
}
