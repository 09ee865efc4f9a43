//! The kinds of per-track model, each registered in one line of [`KINDS`] (what a line holds:
//! `super::registration::RegisteredKind`, each kind's own `REGISTERED`).
//!
//! Owns: [`KINDS`] and looking a kind up by its name ([`registered`]). Must not: know what any
//! kind reads, answers or declares (its own file does), load sessions or choose tracks.

use super::classifier::Classifier;
use super::embedder::Embedder;
use super::registration::RegisteredKind;

/// Every kind of per-track model, one line each.
pub const KINDS: &[RegisteredKind] = &[Classifier::REGISTERED, Embedder::REGISTERED];

/// The registered kind named `name` (`kind = "<name>"`); `None`: no per-track kind (a detector).
pub fn registered(name: &str) -> Option<&'static RegisteredKind> {
    KINDS.iter().find(|kind| kind.role.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_registered_once_under_its_own_name() {
        let names: Vec<&str> = KINDS.iter().map(|kind| kind.role.name).collect();
        assert_eq!(names, ["classifier", "embedder"]);
        assert!(registered("detector").is_none());
        assert_eq!(
            registered("embedder").map(|kind| kind.regrown),
            Some(Some(crate::infer::per_track::embedder::GROWN))
        );
    }
}
