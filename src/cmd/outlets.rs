//! The outlets the daemon builds, each registered in one line, and the config they own.
//!
//! Owns: [`OUTLETS`], the list of outlet kinds (each one's sections, checks and start live in its
//! own folder: `crate::publish::kind`), [`PIPELINE_SECTIONS`] (the pipeline's own: `[motion]`),
//! and [`schema`], the config the daemon reads: the core, the pipeline's sections, every
//! outlet's, and the kinds of per-track model (`crate::infer::per_track::KINDS`' roles). Must not:
//! know what any outlet or kind does or holds.

use crate::config::section::{Schema, SectionKind};
use crate::infer::gating::MotionConfig;
use crate::infer::per_track::KINDS;
use crate::publish::kind::OutletKind;

/// Sections the pipeline's stages own (`crate::infer::gating`'s `[motion]`), before the outlets'.
pub const PIPELINE_SECTIONS: &[SectionKind] = &[SectionKind::of::<MotionConfig>()];

/// Every kind of outlet the daemon builds from its config, in the order they start and receive.
pub const OUTLETS: &[OutletKind] = &[crate::publish::mqtt::OUTLET, crate::publish::webhook::OUTLET];

/// The config the daemon reads: the core, the pipeline's sections, then every outlet's sections in
/// [`OUTLETS`]' order, with the registered kinds of per-track model.
pub fn schema() -> Schema {
    Schema::new(PIPELINE_SECTIONS.iter().copied().chain(OUTLETS.iter().flat_map(|kind| kind.sections.iter().copied())))
        .with_per_track(KINDS.iter().map(|kind| kind.role))
}
