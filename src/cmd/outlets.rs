//! The outlets the daemon builds, each registered in one line, and the config they own.
//!
//! Owns: [`OUTLETS`], the list of outlet kinds (each one's sections, checks and start live in its
//! own folder: `crate::publish::kind`), and [`schema`], the config the daemon reads: the core and
//! every outlet's sections. Must not: know what any outlet does or holds.

use crate::config::section::Schema;
use crate::publish::kind::OutletKind;

/// Every kind of outlet the daemon builds from its config, in the order they start and receive.
pub const OUTLETS: &[OutletKind] = &[crate::publish::mqtt::OUTLET, crate::publish::webhook::OUTLET];

/// The config the daemon reads: the core, then every outlet's sections in [`OUTLETS`]' order.
pub fn schema() -> Schema {
    Schema::new(OUTLETS.iter().flat_map(|kind| kind.sections.iter().copied()))
}
