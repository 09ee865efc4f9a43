//! How RTP reaches us from an RTSP camera ([`RtspTransport`], the `rtsp` kind's `transport`):
//! what the kind's table (`super::kinds::rtsp`) and the pipeline that receives the stream
//! (`super::gstreamer`, built only with GStreamer) share.

use serde::{Deserialize, Serialize};

/// How RTP reaches us from an RTSP camera.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RtspTransport {
    /// RTP interleaved in the RTSP TCP connection: passes NAT and firewalls, no packet loss.
    #[default]
    Tcp,
    /// RTP over UDP: lower latency on a clean network; lost packets show as broken frames.
    Udp,
}
