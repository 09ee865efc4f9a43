//! Sizing of the scratch arena that execution contexts which never run at the same time share.
//!
//! Owns: [`shared_arena_bytes`] and [`ArenaPlan`] (what one arena saves against one allocation per
//! context). Pure arithmetic, always compiled. Must not: allocate (`super::arena` does).

use serde::Serialize;

/// Device memory for execution contexts that never run at the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ArenaPlan {
    /// One arena big enough for the largest requirement.
    pub arena_bytes: u64,
    /// What one allocation per context would take.
    pub separate_bytes: u64,
    /// `separate_bytes − arena_bytes`.
    pub saved_bytes: u64,
}

impl std::ops::Add for ArenaPlan {
    type Output = ArenaPlan;
    fn add(self, other: ArenaPlan) -> ArenaPlan {
        ArenaPlan {
            arena_bytes: self.arena_bytes.saturating_add(other.arena_bytes),
            separate_bytes: self.separate_bytes.saturating_add(other.separate_bytes),
            saved_bytes: self.saved_bytes.saturating_add(other.saved_bytes),
        }
    }
}

/// Sizes one scratch arena shared by contexts with these device-memory requirements: the
/// maximum, so no context ever gets less than it asked for.
pub fn shared_arena_bytes(requirements: &[u64]) -> ArenaPlan {
    let arena_bytes = requirements.iter().copied().max().unwrap_or(0);
    let separate_bytes = requirements.iter().fold(0u64, |sum, r| sum.saturating_add(*r));
    ArenaPlan { arena_bytes, separate_bytes, saved_bytes: separate_bytes - arena_bytes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_takes_the_largest_requirement() {
        assert_eq!(shared_arena_bytes(&[]), ArenaPlan::default());
        let plan = shared_arena_bytes(&[96 << 20, 128 << 20, 32 << 20]);
        assert_eq!(plan, ArenaPlan { arena_bytes: 128 << 20, separate_bytes: 256 << 20, saved_bytes: 128 << 20 });
        assert_eq!(shared_arena_bytes(&[7]), ArenaPlan { arena_bytes: 7, separate_bytes: 7, saved_bytes: 0 });
    }

    #[test]
    fn arena_never_under_allocates() {
        // Deterministic pseudo-random requirement sets, including zeros and huge values.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..500 {
            let len = round % 9;
            let requirements: Vec<u64> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if state.is_multiple_of(5) {
                        0
                    } else {
                        state >> (state % 40)
                    }
                })
                .collect();
            let plan = shared_arena_bytes(&requirements);
            assert!(requirements.iter().all(|r| *r <= plan.arena_bytes), "{requirements:?} → {plan:?}");
            assert!(requirements.is_empty() || requirements.contains(&plan.arena_bytes));
            assert_eq!(plan.separate_bytes - plan.saved_bytes, plan.arena_bytes);
        }
    }
}
