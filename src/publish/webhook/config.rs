//! `[[webhook]]`: where each webhook posts, which events it takes, how it signs them, and how hard
//! it tries; with its documented defaults (`config.toml`, this section's part of the built-in
//! default) and every check of its keys.
//!
//! Owns: [`WebhookConfig`], [`Webhooks`] (the section), the URL's parts ([`Endpoint`]) and the
//! rules between the keys. Must not: read the secret file (`super::signature` does, at start) or
//! open a connection.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::{is_topic_segment, Config, ConfigError};
use crate::config::{Resolve, Section};

/// Longest `timeout_ms`: a minute for one delivery attempt.
pub const MAX_TIMEOUT_MS: u64 = 60_000;
/// Most `retries` of one event.
pub const MAX_RETRIES: u32 = 20;
/// Longest wait between two attempts, `retry_max_ms`: ten minutes.
pub const MAX_RETRY_MS: u64 = 600_000;
/// Most events one webhook's queue holds (`queue`).
pub const MAX_QUEUE: usize = 100_000;
/// Longest `shutdown_flush_ms`: a minute, within systemd's default stop timeout (90 s).
pub const MAX_FLUSH_MS: u64 = 60_000;
/// Longest URL accepted.
const MAX_URL_BYTES: usize = 2048;
/// Names a webhook may not take: other outlets' (figures are keyed by outlet name).
const OTHER_OUTLETS: [&str; 3] = ["mqtt", "live", "record"];
/// Headers the outlet sets itself.
const OWN_HEADERS: [&str; 7] = [
    "host",
    "content-type",
    "content-length",
    "transfer-encoding",
    "connection",
    "user-agent",
    super::signature::SIGNATURE_HEADER,
];

/// Which events a webhook takes, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKindChoice {
    Start,
    Update,
    End,
}

impl EventKindChoice {
    /// As the event message names it (`type`).
    pub fn name(self) -> &'static str {
        match self {
            EventKindChoice::Start => "start",
            EventKindChoice::Update => "update",
            EventKindChoice::End => "end",
        }
    }
}

/// One `[[webhook]]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// The outlet's name: its figures' key (`outlets.<name>`), and how the log names it.
    #[serde(default = "default_name")]
    pub name: String,
    /// `http://` or `https://` address the events are posted to.
    pub url: String,
    /// Which events: `start`, `update`, `end`.
    #[serde(default = "default_events")]
    pub events: Vec<EventKindChoice>,
    /// Events of these labels only; empty: every label.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Events of these cameras only; empty: every camera.
    #[serde(default)]
    pub cameras: Vec<String>,
    /// Further request headers (a name the receiver routes by, say); never a secret: see
    /// `secret_file`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// File whose first line is the key every request is signed with (HMAC-SHA256 of the body).
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// With an `https://` URL: a CA bundle (PEM) that signs the receiver's certificate, trusted
    /// besides the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Longest one attempt may take, connection and answer included (ms).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Attempts after the first before the event is dropped (and counted).
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// The wait after a failed attempt: from `retry_min_ms`, doubling, at most `retry_max_ms`.
    #[serde(default = "default_retry_min_ms")]
    pub retry_min_ms: u64,
    #[serde(default = "default_retry_max_ms")]
    pub retry_max_ms: u64,
    /// Events waiting for delivery; beyond, the oldest is dropped (and counted).
    #[serde(default = "default_queue")]
    pub queue: usize,
    /// Longest wait at shutdown for the queue to be delivered (ms).
    #[serde(default = "default_shutdown_flush_ms")]
    pub shutdown_flush_ms: u64,
}

fn default_name() -> String {
    "webhook".into()
}

fn default_events() -> Vec<EventKindChoice> {
    vec![EventKindChoice::Start, EventKindChoice::End]
}

fn default_timeout_ms() -> u64 {
    5000
}

fn default_retries() -> u32 {
    3
}

fn default_retry_min_ms() -> u64 {
    1000
}

fn default_retry_max_ms() -> u64 {
    30_000
}

fn default_queue() -> usize {
    1000
}

fn default_shutdown_flush_ms() -> u64 {
    3000
}

/// `[[webhook]]`: every webhook of the config, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Webhooks(pub Vec<WebhookConfig>);

/// Where a webhook posts: the parts of its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub tls: bool,
    /// The host as the URL writes it (an IPv6 address without its brackets).
    pub host: String,
    pub port: u16,
    /// `Host:`'s value: the URL's authority without user information.
    pub authority: String,
    /// The path and query, at least `/`.
    pub path: String,
}

impl Endpoint {
    /// The parts of `url`: `http://host[:port]/path?query` or `https://…`; no user information,
    /// no fragment, nothing a request line could not carry.
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        if url.len() > MAX_URL_BYTES {
            return Err(format!("longer than {MAX_URL_BYTES} bytes"));
        }
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("must not hold spaces or control characters".into());
        }
        let (tls, rest) = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (false, rest),
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (true, rest),
            _ => return Err("must start with http:// or https://".into()),
        };
        if rest.contains('#') {
            return Err("must not hold a fragment (`#…`): it never reaches the receiver".into());
        }
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err("must not carry credentials (`user:password@`): sign with `secret_file` instead".into());
        }
        let path = if path.starts_with('?') { format!("/{path}") } else { path.to_owned() };
        let (host, port) = match authority.strip_prefix('[') {
            Some(bracketed) => {
                let (host, after) = bracketed.split_once(']').ok_or("an IPv6 address without its closing `]`")?;
                (host, after.strip_prefix(':'))
            }
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        if host.is_empty() {
            return Err("names no host".into());
        }
        let port = match port {
            None => {
                if tls {
                    443
                } else {
                    80
                }
            }
            Some(port) => port.parse::<u16>().ok().filter(|port| *port > 0).ok_or("the port must be 1..=65535")?,
        };
        Ok(Endpoint { tls, host: host.to_owned(), port, authority: authority.to_owned(), path })
    }
}

/// A header name as HTTP allows it: a token of letters, digits and `!#$%&'*+-.^_`|~`.
fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl Section for Webhooks {
    const KEY: &'static str = "webhook";
    const DEFAULTS: &'static str = include_str!("config.toml");

    fn resolve_paths(&mut self, resolve: &mut Resolve<'_>) {
        for webhook in &mut self.0 {
            if let Some(path) = webhook.secret_file.as_mut() {
                resolve(path, &["webhook"]);
            }
            if let Some(path) = webhook.ca_file.as_mut() {
                resolve(path, &["webhook"]);
            }
        }
    }

    fn validate(&self, config: &Config) -> Result<(), ConfigError> {
        let mut names = std::collections::BTreeSet::new();
        for (index, webhook) in self.0.iter().enumerate() {
            let key = |field: &str| format!("webhook[{index}].{field}");
            if !is_topic_segment(&webhook.name) || OTHER_OUTLETS.contains(&webhook.name.as_str()) {
                return Err(config.invalid(
                    &key("name"),
                    format!(
                        "{:?}: use 1..=64 letters, digits, `_` or `-`, and none of {OTHER_OUTLETS:?} (other outlets' \
                         names)",
                        webhook.name
                    ),
                ));
            }
            if !names.insert(webhook.name.as_str()) {
                return Err(config.invalid(
                    &key("name"),
                    format!(
                        "{:?} names an earlier webhook too: give each `[[webhook]]` a name of its own",
                        webhook.name
                    ),
                ));
            }
            let endpoint = Endpoint::parse(&webhook.url).map_err(|reason| config.invalid(&key("url"), reason))?;
            if webhook.ca_file.is_some() && !endpoint.tls {
                return Err(config.invalid(&key("ca_file"), "only an https:// url is checked against a CA"));
            }
            if webhook.events.is_empty() {
                return Err(config.invalid(&key("events"), "name at least one of \"start\", \"update\", \"end\""));
            }
            for (i, camera) in webhook.cameras.iter().enumerate() {
                if !config.cameras.iter().any(|configured| &configured.name == camera) {
                    return Err(config
                        .invalid(&format!("webhook[{index}].cameras[{i}]"), format!("no camera named {camera:?}")));
                }
            }
            for (name, value) in &webhook.headers {
                if !is_header_name(name) || OWN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                    return Err(config.invalid(
                        &format!("webhook[{index}].headers.{name}"),
                        format!("not a header this outlet sends on request: none of {OWN_HEADERS:?}"),
                    ));
                }
                if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') || value.len() > 8192 {
                    return Err(config.invalid(
                        &format!("webhook[{index}].headers.{name}"),
                        "at most 8192 bytes without line breaks or control characters",
                    ));
                }
            }
            if !(1..=MAX_TIMEOUT_MS).contains(&webhook.timeout_ms) {
                return Err(config.invalid(&key("timeout_ms"), format!("allowed: 1..={MAX_TIMEOUT_MS}")));
            }
            if webhook.retries > MAX_RETRIES {
                return Err(config.invalid(&key("retries"), format!("allowed: 0..={MAX_RETRIES}")));
            }
            if webhook.retry_max_ms > MAX_RETRY_MS {
                return Err(config.invalid(&key("retry_max_ms"), format!("allowed: 1..={MAX_RETRY_MS}")));
            }
            if webhook.retry_min_ms == 0 || webhook.retry_min_ms > webhook.retry_max_ms {
                return Err(config.invalid(&key("retry_min_ms"), "must be ≥ 1 and ≤ retry_max_ms"));
            }
            if !(1..=MAX_QUEUE).contains(&webhook.queue) {
                return Err(config.invalid(&key("queue"), format!("allowed: 1..={MAX_QUEUE}")));
            }
            if webhook.shutdown_flush_ms > MAX_FLUSH_MS {
                return Err(config.invalid(&key("shutdown_flush_ms"), format!("allowed: 0..={MAX_FLUSH_MS}")));
            }
        }
        Ok(())
    }

    fn secret_files(&self) -> Vec<(String, PathBuf)> {
        let secrets = self.0.iter().enumerate();
        secrets
            .filter_map(|(i, webhook)| Some((format!("webhook[{i}].secret_file"), webhook.secret_file.clone()?)))
            .collect()
    }

    fn forget_secret(&mut self, key: &str) {
        for (i, webhook) in self.0.iter_mut().enumerate() {
            if key == format!("webhook[{i}].secret_file") {
                webhook.secret_file = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::section::{Schema, SectionKind};
    use crate::config::ConfigOrigin;

    fn read(webhooks: &str) -> Result<Config, ConfigError> {
        let text = format!("[[camera]]\nname = \"front\"\nsource = {{ kind = \"synthetic\" }}\n{webhooks}");
        Schema::new([SectionKind::of::<Webhooks>()]).from_toml(
            &text,
            ConfigOrigin::File("w.toml".into()),
            Path::new("/etc"),
        )
    }

    #[test]
    fn a_webhook_needs_only_its_url_and_the_rest_has_the_documented_defaults() {
        let config = read("[[webhook]]\nurl = \"http://h/\"\nsecret_file = \"key\"\n").expect("one webhook");
        let Webhooks(webhooks) = config.sections.get::<Webhooks>().expect("the section");
        let hook = &webhooks[0];
        assert_eq!(
            (hook.name.as_str(), &hook.events[..]),
            ("webhook", &[EventKindChoice::Start, EventKindChoice::End][..])
        );
        assert_eq!((hook.timeout_ms, hook.retries, hook.queue, hook.shutdown_flush_ms), (5000, 3, 1000, 3000));
        assert_eq!(hook.secret_file.as_deref(), Some(Path::new("/etc/key")), "relative to the config file");
        let secrets: Vec<(String, PathBuf)> = config.secret_files().into_iter().map(|s| (s.key, s.path)).collect();
        assert_eq!(secrets, [("webhook[0].secret_file".to_string(), PathBuf::from("/etc/key"))]);
        let none = read("").expect("no webhook");
        assert!(none.sections.get::<Webhooks>().is_none(), "absent unless written");
    }

    #[test]
    fn each_mistake_names_its_key() {
        let url = "url = \"http://h/\"";
        for (text, key) in [
            ("[[webhook]]\n".to_string(), "webhook[0]".to_string()),
            ("[[webhook]]\nurl = \"ftp://h/\"\n".into(), "webhook[0].url".into()),
            (format!("[[webhook]]\n{url}\n[[webhook]]\n{url}\n"), "webhook[1].name".into()),
            (format!("[[webhook]]\n{url}\nname = \"mqtt\"\n"), "webhook[0].name".into()),
            (format!("[[webhook]]\n{url}\ncameras = [\"gate\"]\n"), "webhook[0].cameras[0]".into()),
            (format!("[[webhook]]\n{url}\nevents = []\n"), "webhook[0].events".into()),
            (format!("[[webhook]]\n{url}\nevents = [\"begin\"]\n"), "webhook[0].events[0]".into()),
            (format!("[[webhook]]\n{url}\nheaders = {{ Host = \"x\" }}\n"), "webhook[0].headers.Host".into()),
            (format!("[[webhook]]\n{url}\nheaders = {{ X-A = \"a\\nb\" }}\n"), "webhook[0].headers.X-A".into()),
            (format!("[[webhook]]\n{url}\nca_file = \"ca.pem\"\n"), "webhook[0].ca_file".into()),
            (format!("[[webhook]]\n{url}\ntimeout_ms = 0\n"), "webhook[0].timeout_ms".into()),
            (format!("[[webhook]]\n{url}\nretry_min_ms = 5\nretry_max_ms = 4\n"), "webhook[0].retry_min_ms".into()),
            (format!("[[webhook]]\n{url}\nqueue = 0\n"), "webhook[0].queue".into()),
            (format!("[[webhook]]\n{url}\nshutdown_flush_ms = 60001\n"), "webhook[0].shutdown_flush_ms".into()),
            (format!("[[webhook]]\n{url}\nsecret = \"x\"\n"), "webhook[0].secret".into()),
        ] {
            match read(&text).map_err(ConfigError::one) {
                Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key, "{text}"),
                other => panic!("{text}: expected an invalid `{key}`, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_url_gives_its_host_port_authority_and_path() {
        let parsed = |url: &str| Endpoint::parse(url).expect(url);
        assert_eq!(
            parsed("https://hooks.example.com/jetson?x=1"),
            Endpoint {
                tls: true,
                host: "hooks.example.com".into(),
                port: 443,
                authority: "hooks.example.com".into(),
                path: "/jetson?x=1".into()
            }
        );
        let local = parsed("http://127.0.0.1:8123");
        assert_eq!((local.tls, local.host.as_str(), local.port, local.path.as_str()), (false, "127.0.0.1", 8123, "/"));
        let v6 = parsed("http://[::1]:9000/hook");
        assert_eq!((v6.host.as_str(), v6.port, v6.authority.as_str()), ("::1", 9000, "[::1]:9000"));
        assert_eq!(parsed("HTTP://h?q").path, "/?q");
    }

    #[test]
    fn a_url_a_request_cannot_carry_is_refused_saying_why() {
        for (url, why) in [
            ("ftp://h/", "http://"),
            ("hooks.example.com/x", "http://"),
            ("http://user:pw@h/", "credentials"),
            ("http:///path", "no host"),
            ("http://h:0/", "1..=65535"),
            ("http://h:99999/", "1..=65535"),
            ("http://h/a b", "spaces"),
            ("http://h/#frag", "fragment"),
            ("http://[::1/", "`]`"),
        ] {
            let error = Endpoint::parse(url).expect_err(url);
            assert!(error.contains(why), "{url}: {error}");
        }
    }
}
