//! The `latency` check: inferences timed back to back and after pauses on one image, and the
//! sentence when the paused ones are much slower ([`LatencyReport`]).
//!
//! Owns: that check. Must not: judge speed (only the jitter between the two gets a sentence,
//! `latency`'s).

use std::path::Path;
use std::time::{Duration, Instant};

use super::latency::{jitter_verdict, summarise};
use super::options::SelftestOptions;
use super::report::{LatencyReport, SelftestReport, Status};
use crate::backend::{Backend, InferenceSession};
use crate::config::LimitsConfig;
use crate::frame::FrameSlot;
use crate::source::image_decode;

/// Times `runs` inferences back to back and `paused_runs` after a pause each, on `image` (decoded
/// within `limits`).
pub(super) fn time_inferences(
    options: &SelftestOptions,
    limits: &LimitsConfig,
    backend: Option<&dyn Backend>,
    session: Option<&mut Box<dyn InferenceSession>>,
    image: Option<&Path>,
    report: &mut SelftestReport,
) {
    let (Some(backend), Some(session), Some(image)) = (backend, session, image) else {
        report.check("latency", Status::Skip, "no image ran on the configured backend");
        return;
    };
    if options.runs == 0 && options.paused_runs == 0 {
        report.check("latency", Status::Skip, "--runs 0 --paused-runs 0");
        return;
    }
    let timed = (|| -> Result<(Vec<Duration>, Vec<Duration>), String> {
        let mut slot = FrameSlot::new(backend.slot_memory().map_err(|e| e.to_string())?);
        image_decode::decode_file(image, limits, &mut slot).map_err(|e| e.to_string())?;
        let mut time_one = || -> Result<Duration, String> {
            let started = Instant::now();
            session.run(&slot).map_err(|e| e.to_string())?;
            Ok(started.elapsed())
        };
        let back_to_back = (0..options.runs).map(|_| time_one()).collect::<Result<Vec<_>, _>>()?;
        let paused = (0..options.paused_runs)
            .map(|_| {
                std::thread::sleep(options.pause);
                time_one()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((back_to_back, paused))
    })();
    let (back_to_back, paused) = match timed {
        Ok(samples) => samples,
        Err(error) => {
            report.check("latency", Status::Fail, error);
            return;
        }
    };
    let back_to_back = summarise(&back_to_back);
    let paused = summarise(&paused);
    let verdict = back_to_back.as_ref().zip(paused.as_ref()).and_then(|(b, p)| jitter_verdict(b, p, options.pause));
    let pause_ms = options.pause.as_millis() as u64;
    let mut detail = Vec::new();
    if let Some(b) = &back_to_back {
        detail.push(format!("back to back: {} runs, p50 {:.2} ms, p99 {:.2} ms", b.runs, b.p50_ms, b.p99_ms));
    }
    if let Some(p) = &paused {
        detail.push(format!("{pause_ms} ms apart: {} runs, p50 {:.2} ms, p99 {:.2} ms", p.runs, p.p50_ms, p.p99_ms));
    }
    let status = if verdict.is_some() { Status::Warn } else { Status::Pass };
    report.check("latency", status, detail.join("; "));
    report.latency = Some(LatencyReport {
        backend: backend.info().kind,
        image: image.file_name().map_or_else(|| image.display().to_string(), |n| n.to_string_lossy().into_owned()),
        back_to_back,
        paused,
        pause_ms,
        verdict,
    });
}
