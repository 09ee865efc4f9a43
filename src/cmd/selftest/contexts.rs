//! The `contexts` check: one execution context per camera with user-managed device memory, their
//! scratch and persistent memory and the one arena they share ([`ContextReport`]).
//!
//! Owns: that check and the sessions it opens (the first serves the images and the timing). Must
//! not: run them.

use super::report::{ContextReport, SelftestReport, Status};
use crate::backend::{Backend, InferenceSession};
use crate::config::Config;

/// One session per camera, reporting their shared scratch memory on the GPU. The daemon creates
/// one per GPU (its one inference worker serves every camera); one per camera here proves on the
/// device that contexts of one thread lease one arena. The first one serves the images and the
/// timing.
pub(super) fn open_sessions(
    config: &Config,
    backend: &dyn Backend,
    uses_gpu: bool,
    report: &mut SelftestReport,
) -> Vec<Box<dyn InferenceSession>> {
    let (wanted, capped) = sessions_wanted(config.cameras.len(), uses_gpu, backend.max_sessions());
    let mut sessions = Vec::with_capacity(wanted);
    for _ in 0..wanted {
        match backend.new_session() {
            Ok(session) => sessions.push(session),
            Err(error) => {
                report.check("contexts", Status::Fail, format!("context {} of {wanted}: {error}", sessions.len() + 1));
                return sessions;
            }
        }
    }
    if !uses_gpu {
        report.check("contexts", Status::Skip, "the CPU backend has no GPU execution contexts");
        return sessions;
    }
    let contexts = context_report(sessions.len(), backend.session_memory().persistent_bytes);
    report.check(
        "contexts",
        Status::Pass,
        format!(
            "{} context(s) with user-managed memory{}, {} bytes of scratch and {} bytes of persistent memory each, one \
             shared arena of {} bytes (saves {} bytes against one allocation per context)",
            contexts.contexts,
            if capped { " (one per camera, capped at the engine's optimisation profiles)" } else { "" },
            contexts.scratch_bytes_per_context,
            contexts.persistent_bytes_per_context,
            contexts.arena_bytes,
            contexts.saved_bytes
        ),
    );
    report.contexts = Some(contexts);
    sessions
}

/// Contexts to open: one per camera on the GPU, at most what the backend allows at once (a
/// dynamic-input engine before TensorRT 8.6: one per optimisation profile), and whether that cap
/// applied.
fn sessions_wanted(cameras: usize, uses_gpu: bool, max_sessions: Option<usize>) -> (usize, bool) {
    let per_camera = if uses_gpu { cameras.max(1) } else { 1 };
    match max_sessions {
        Some(cap) if cap.max(1) < per_camera => (cap.max(1), true),
        _ => (per_camera, false),
    }
}

#[cfg(feature = "tensorrt")]
fn context_report(contexts: usize, persistent_bytes_per_context: u64) -> ContextReport {
    let plan = crate::backend::trt::arena::arena_report();
    ContextReport {
        contexts,
        scratch_bytes_per_context: plan.separate_bytes / contexts.max(1) as u64,
        persistent_bytes_per_context,
        arena_bytes: plan.arena_bytes,
        saved_bytes: plan.saved_bytes,
    }
}

#[cfg(not(feature = "tensorrt"))]
fn context_report(contexts: usize, persistent_bytes_per_context: u64) -> ContextReport {
    ContextReport { contexts, persistent_bytes_per_context, ..ContextReport::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_are_one_per_camera_capped_at_what_the_engine_allows() {
        assert_eq!(sessions_wanted(3, true, None), (3, false));
        assert_eq!(sessions_wanted(3, true, Some(1)), (1, true), "one profile before 8.6: one context");
        assert_eq!(sessions_wanted(2, true, Some(4)), (2, false));
        assert_eq!(sessions_wanted(3, false, Some(1)), (1, false), "the CPU backend opens one");
        assert_eq!(sessions_wanted(0, true, None), (1, false));
    }
}
