//! Engine-build progress: the events a build emits and how they are shown.
//!
//! Owns: [`Progress`] (IProgressMonitor phases on TensorRT 10+, plus a tick about once a second on
//! every version, so that a build is never silent, and the wait for another process's build) and
//! [`ProgressReporter`], which draws a bar on a
//! TTY and writes a log line at most every [`LOG_INTERVAL`] otherwise (systemd/journald), and
//! [`extends_start`], which events show real progress.
//! Must not: talk to TensorRT or systemd (the caller forwards progress as `EXTEND_TIMEOUT_USEC=`).

use std::io::Write;
use std::time::Duration;

/// Log lines while not on a TTY: often enough to show life, rarely enough for the journal.
pub const LOG_INTERVAL: Duration = Duration::from_secs(15);

/// One progress event of an engine build.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// What the build is doing before/after TensorRT's own phases (cache lookup, saving).
    Stage(String),
    PhaseStart {
        phase: String,
        parent: Option<String>,
        steps: i32,
    },
    Step {
        phase: String,
        step: i32,
    },
    PhaseFinish {
        phase: String,
    },
    /// Elapsed build time, about once a second.
    Tick {
        elapsed: Duration,
    },
    /// Another process holds the cache directory's build lock (`holder` is what it wrote about
    /// itself); sent about twice a second while this one waits for it.
    Waiting {
        holder: String,
        elapsed: Duration,
    },
}

/// Whether `event` shows the build (or the wait for another process's) moving, so that systemd's
/// start timeout may be extended once more. TensorRT's phases and steps and our own stages do.
/// A clock tick does only where TensorRT reports no phases (`phases_reported` false: 8.x has no
/// progress monitor, a tick is all there is), and neither a tick nor a lock wait does past `limit`
/// (`engine.build_timeout_s`): a hung build or a hung lock holder then ends in systemd's timeout
/// instead of keeping the unit "activating" forever.
pub fn extends_start(event: &Progress, phases_reported: bool, limit: Duration) -> bool {
    match event {
        Progress::Stage(_) | Progress::PhaseStart { .. } | Progress::Step { .. } | Progress::PhaseFinish { .. } => true,
        Progress::Tick { elapsed } => !phases_reported && *elapsed < limit,
        Progress::Waiting { elapsed, .. } => *elapsed < limit,
    }
}

#[derive(Debug, Clone)]
struct Phase {
    name: String,
    steps: i32,
    done: i32,
}

/// Turns [`Progress`] events into a bar (TTY) or periodic log lines.
#[derive(Debug)]
pub struct ProgressReporter {
    tty: bool,
    /// Open phases, outermost first.
    phases: Vec<Phase>,
    elapsed: Duration,
    last_logged: Option<Duration>,
    ticks: usize,
    drawn: bool,
    /// Who holds the build lock while this process waits for it.
    waiting: Option<String>,
}

impl Default for ProgressReporter {
    fn default() -> Self {
        use std::io::IsTerminal;
        Self::new(std::io::stderr().is_terminal())
    }
}

impl ProgressReporter {
    /// `tty`: draw a bar on stderr; otherwise log lines.
    pub fn new(tty: bool) -> Self {
        ProgressReporter {
            tty,
            phases: Vec::new(),
            elapsed: Duration::ZERO,
            last_logged: None,
            ticks: 0,
            drawn: false,
            waiting: None,
        }
    }

    /// Updates the state and shows it; returns the line shown (or logged), if any.
    pub fn report(&mut self, event: &Progress) -> Option<String> {
        let mut force_log = false;
        match event {
            Progress::Stage(text) => {
                self.clear_bar();
                log::info!("engine build: {text}");
                return Some(text.clone());
            }
            Progress::PhaseStart { phase, parent, steps } => {
                if let Some(parent) = parent {
                    if let Some(at) = self.phases.iter().rposition(|p| &p.name == parent) {
                        self.phases.truncate(at + 1);
                    }
                } else {
                    self.phases.clear();
                    force_log = true;
                }
                self.phases.push(Phase { name: phase.clone(), steps: *steps, done: 0 });
            }
            Progress::Step { phase, step } => {
                if let Some(p) = self.phases.iter_mut().rev().find(|p| &p.name == phase) {
                    p.done = (step + 1).min(p.steps.max(0));
                }
            }
            Progress::PhaseFinish { phase } => {
                if let Some(at) = self.phases.iter().rposition(|p| &p.name == phase) {
                    // The parent's own steps arrive as `Step` events; finishing a child is not one.
                    self.phases.truncate(at);
                }
            }
            Progress::Tick { elapsed } => {
                self.elapsed = *elapsed;
                self.ticks += 1;
            }
            Progress::Waiting { holder, elapsed } => {
                force_log = self.waiting.is_none();
                self.waiting = Some(holder.clone());
                self.elapsed = *elapsed;
                self.ticks += 1;
            }
        }
        if !matches!(event, Progress::Waiting { .. }) {
            self.waiting = None;
        }
        let line = self.line();
        if self.tty {
            let mut stderr = std::io::stderr().lock();
            // A failed progress write must not fail the build.
            let _ = write!(stderr, "\r\x1b[2K{line}");
            let _ = stderr.flush();
            self.drawn = true;
            return Some(line);
        }
        let due = self.last_logged.is_none_or(|last| self.elapsed.saturating_sub(last) >= LOG_INTERVAL);
        if force_log || due {
            self.last_logged = Some(self.elapsed);
            log::info!("engine build: {line}");
            return Some(line);
        }
        None
    }

    /// Ends the bar's line on a TTY.
    pub fn finish(&mut self) {
        self.clear_bar();
    }

    fn clear_bar(&mut self) {
        if self.drawn {
            let _ = writeln!(std::io::stderr());
            self.drawn = false;
        }
    }

    /// The outermost phase and how far it is, in percent (0..=100), when the builder reports
    /// phases (TensorRT 10 and newer, the stand-in).
    pub fn phase(&self) -> Option<(&str, f64)> {
        let top = self.phases.first()?;
        let percent = if top.steps > 0 { f64::from(top.done) / f64::from(top.steps) * 100.0 } else { 0.0 };
        Some((&top.name, percent))
    }

    /// Who builds the engine while this process waits for it.
    pub fn waiting_for(&self) -> Option<&str> {
        self.waiting.as_deref()
    }

    /// Build (or wait) time so far.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// `[#####-----]  50% Building engine › Tactic selection 3/40 · 1m 05s`, or a spinner with
    /// the elapsed time when TensorRT reports no phases (8.x).
    pub fn line(&self) -> String {
        let elapsed = format_elapsed(self.elapsed);
        if let Some(holder) = &self.waiting {
            return format!("waiting for another engine build to finish ({holder}) · {elapsed}");
        }
        let Some(top) = self.phases.first() else {
            const SPINNER: [char; 4] = ['|', '/', '-', '\\'];
            return format!("{} building · {elapsed}", SPINNER[self.ticks % SPINNER.len()]);
        };
        let fraction = if top.steps > 0 { f64::from(top.done) / f64::from(top.steps) } else { 0.0 };
        const WIDTH: usize = 20;
        let filled = ((fraction * WIDTH as f64).round() as usize).min(WIDTH);
        let path: Vec<String> = self
            .phases
            .iter()
            .map(|p| if p.steps > 0 { format!("{} {}/{}", p.name, p.done, p.steps) } else { p.name.clone() })
            .collect();
        format!(
            "[{}{}] {:>3.0}% {} · {elapsed}",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            fraction * 100.0,
            path.join(" › ")
        )
    }
}

fn format_elapsed(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    if seconds >= 60 {
        format!("{}m {:02}s", seconds / 60, seconds % 60)
    } else {
        format!("{seconds}s")
    }
}

#[cfg(test)]
mod tests {
    use super::extends_start;

    #[test]
    fn only_real_progress_extends_the_start_and_never_past_the_limit() {
        let limit = Duration::from_secs(3600);
        let tick = |s| Progress::Tick { elapsed: Duration::from_secs(s) };
        let step = Progress::Step { phase: "Building".into(), step: 3 };
        assert!(extends_start(&step, true, limit));
        assert!(!extends_start(&tick(10), true, limit), "with phases, a clock tick is no progress");
        assert!(extends_start(&tick(10), false, limit), "8.x reports no phases: ticks, up to the limit");
        assert!(!extends_start(&tick(3600), false, limit), "a hung 8.x build stops extending");
        let waiting = |s| Progress::Waiting { holder: "pid 7".into(), elapsed: Duration::from_secs(s) };
        assert!(extends_start(&waiting(5), true, limit));
        assert!(!extends_start(&waiting(3601), true, limit), "a hung lock holder stops extending");
    }

    use super::*;

    fn start(phase: &str, parent: Option<&str>, steps: i32) -> Progress {
        Progress::PhaseStart { phase: phase.into(), parent: parent.map(Into::into), steps }
    }

    #[test]
    fn bar_follows_the_outermost_phase() {
        let mut reporter = ProgressReporter::new(false);
        reporter.report(&start("Building engine", None, 4));
        reporter.report(&start("Tactic selection", Some("Building engine"), 40));
        reporter.report(&Progress::Step { phase: "Tactic selection".into(), step: 9 });
        reporter.report(&Progress::PhaseFinish { phase: "Tactic selection".into() });
        reporter.report(&Progress::Step { phase: "Building engine".into(), step: 0 });
        reporter.report(&start("Fusion", Some("Building engine"), 0));
        reporter.report(&Progress::PhaseFinish { phase: "Fusion".into() });
        reporter.report(&Progress::Step { phase: "Building engine".into(), step: 1 });
        reporter.report(&Progress::Tick { elapsed: Duration::from_secs(65) });
        assert_eq!(reporter.line(), "[##########----------]  50% Building engine 2/4 · 1m 05s");
        assert_eq!(reporter.phase(), Some(("Building engine", 50.0)));
        assert_eq!(reporter.elapsed(), Duration::from_secs(65));
    }

    #[test]
    fn nested_phases_show_as_a_path() {
        let mut reporter = ProgressReporter::new(false);
        reporter.report(&start("Building engine", None, 4));
        reporter.report(&start("Tactic selection", Some("Building engine"), 40));
        reporter.report(&Progress::Step { phase: "Tactic selection".into(), step: 2 });
        assert!(reporter.line().contains("Building engine 0/4 › Tactic selection 3/40"), "{}", reporter.line());
    }

    #[test]
    fn without_phases_a_spinner_shows_elapsed_time() {
        let mut reporter = ProgressReporter::new(false);
        reporter.report(&Progress::Tick { elapsed: Duration::from_secs(7) });
        assert!(reporter.line().ends_with("building · 7s"), "{}", reporter.line());
    }

    #[test]
    fn waiting_for_another_build_names_it_and_logs_at_once() {
        let mut reporter = ProgressReporter::new(false);
        let waiting = |s| Progress::Waiting {
            holder: "pid 7 (jetson-detectd build-engine)".into(),
            elapsed: Duration::from_secs(s),
        };
        let line = reporter.report(&waiting(0)).expect("the first wait is logged");
        assert_eq!(line, "waiting for another engine build to finish (pid 7 (jetson-detectd build-engine)) · 0s");
        assert_eq!(reporter.waiting_for(), Some("pid 7 (jetson-detectd build-engine)"));
        assert!(reporter.report(&waiting(1)).is_none(), "then throttled like ticks");
        // The build this process then runs itself shows as a build again.
        reporter.report(&Progress::Tick { elapsed: Duration::from_secs(2) });
        assert!(reporter.line().contains("building"), "{}", reporter.line());
    }

    #[test]
    fn log_lines_are_throttled_by_build_time() {
        let mut reporter = ProgressReporter::new(false);
        let tick = |s| Progress::Tick { elapsed: Duration::from_secs(s) };
        assert!(reporter.report(&tick(1)).is_some(), "the first event is logged");
        assert!(reporter.report(&tick(2)).is_none());
        assert!(reporter.report(&tick(15)).is_none());
        assert!(reporter.report(&tick(16)).is_some());
        assert!(reporter.report(&start("Building engine", None, 3)).is_some(), "a new top phase is logged");
        assert!(reporter.report(&Progress::Step { phase: "Building engine".into(), step: 0 }).is_none());
    }
}
