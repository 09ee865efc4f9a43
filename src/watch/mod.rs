//! Live video of each camera from its own compressed stream, no pixel re-encoded: fragmented MP4
//! for the page and players ([`feed`], [`viewer`]), HLS ([`hls`]) and each processed frame's boxes
//! on the same timeline; [`hub`] holds them all and bounds the viewers; [`figures`] is what it
//! reports of them (telemetry, `/metrics`).

pub mod feed;
pub mod figures;
pub mod hls;
pub mod hub;
pub mod viewer;
