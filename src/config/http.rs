//! `[http]`: the listen address, its token and allowed hosts, and the zones file the page saves.
//! Must not: listen, or read the token or zones file.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::service_dirs::ServiceDir;

/// `[http]`: the built-in page, the HTTP API and `/metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// `ip:port` to listen on; empty: no HTTP server. Beyond loopback only with a token.
    pub listen: String,
    /// File whose first line is the bearer token that every write must carry.
    pub token_file: Option<PathBuf>,
    /// Host names (or IP addresses) requests may name in `Host` besides the listen address,
    /// loopback and `localhost`: anything else is refused (DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// The zones and lines saved from the page, merged over the cameras' own. The default depends
    /// on the environment (systemd's `StateDirectory=`), so it is computed here.
    #[serde(default = "default_zones_file")]
    pub zones_file: PathBuf,
    /// The page's address as others reach it (`http://host:port`, no path; validated): what
    /// event clips' absolute URLs in Home Assistant begin with.
    pub public_url: Option<String>,
}

impl HttpConfig {
    /// The address to listen on, or `None` when the server is off (validated: it parses).
    pub fn listen_addr(&self) -> Option<std::net::SocketAddr> {
        self.listen.parse().ok()
    }

    /// `public_url` without a trailing `/`, ready for an API path (`/api/...`) to follow.
    pub fn public_base(&self) -> Option<&str> {
        self.public_url.as_deref().map(|url| url.trim_end_matches('/'))
    }
}

/// `zones.toml` in the state directory: the service's (`$STATE_DIRECTORY`), root's commands the
/// same one, a user's own otherwise ([`ServiceDir::default_dir`], as `engine.cache_dir`).
fn default_zones_file() -> PathBuf {
    ServiceDir::State.default_dir().join("zones.toml")
}
