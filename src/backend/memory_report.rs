//! The device memory of the scheduler's contexts against one context per camera (its
//! telemetry), in a file of its own below the backends that fill it in (`super::trt::backend`):
//! they need not import the workers' arithmetic in `super::memory`, which reads their arena plan.
//!
//! Owns: [`MemoryReport`]. Must not: allocate or open sessions.

use super::traits::SessionMemory;

/// Device memory of the execution contexts, against one context per camera (the design before
/// the shared workers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MemoryReport {
    /// Live contexts: one per worker.
    pub contexts: usize,
    /// Scratch (activation) memory of one context; the contexts of one worker lease one arena.
    pub scratch_bytes_per_context: u64,
    /// Memory one context keeps for itself beyond its scratch, as far as the driver shows it.
    pub persistent_bytes_per_context: u64,
    /// What the contexts hold together: scratch, and persistent memory.
    pub scratch_bytes: u64,
    pub persistent_bytes: u64,
    /// Saved against one context per camera: `(cameras − contexts) × (scratch + persistent)` of
    /// one context, when positive.
    pub saved_bytes: u64,
}

impl MemoryReport {
    pub fn new(contexts: usize, cameras: usize, per_context: SessionMemory) -> MemoryReport {
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let SessionMemory { scratch_bytes, persistent_bytes } = per_context;
        MemoryReport {
            contexts,
            scratch_bytes_per_context: scratch_bytes,
            persistent_bytes_per_context: persistent_bytes,
            scratch_bytes: count(contexts).saturating_mul(scratch_bytes),
            persistent_bytes: count(contexts).saturating_mul(persistent_bytes),
            saved_bytes: count(cameras.saturating_sub(contexts))
                .saturating_mul(scratch_bytes.saturating_add(persistent_bytes)),
        }
    }
}
