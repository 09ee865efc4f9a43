//! Which `Host` a request may name: the defence against DNS rebinding.
//!
//! A page on `attacker.example` whose name is rebound to 127.0.0.1 reaches the server with the
//! browser's full trust, but its requests still carry `Host: attacker.example`. Only requests that
//! name this server are answered: the listen address (any IP address when it listens on all of
//! them), loopback addresses, `localhost`, and the names in `http.allowed_hosts`. An IP address
//! cannot be rebound, so no IP literal is a rebinding request; names are what need the list. A
//! request without `Host` (HTTP/1.0, a hand-written client) comes from no browser and is admitted.
//!
//! Owns: [`AllowedHosts`] and the parsing of a `Host` value. Must not: resolve names (a lookup is
//! what rebinding subverts) or look at anything but the one header.

use std::net::IpAddr;

/// The hosts a request may name, from `[http] listen` and `[http] allowed_hosts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    /// The listen address's IP: `None` for every address of the machine (0.0.0.0 or ::).
    listen_ip: Option<IpAddr>,
    /// Lower case, without a trailing dot.
    names: Vec<String>,
    /// The IP addresses among `allowed_hosts` (a port forward or NAT in front of the server).
    ips: Vec<IpAddr>,
}

impl AllowedHosts {
    /// `listen_ip` is the address the server listens on; `allowed` the configured names.
    pub fn new(listen_ip: IpAddr, allowed: &[String]) -> AllowedHosts {
        let mut names = vec!["localhost".to_owned()];
        let mut ips = Vec::new();
        for entry in allowed {
            match parse_ip(entry) {
                Some(ip) => ips.push(ip),
                None => names.push(normalise(entry)),
            }
        }
        AllowedHosts { listen_ip: (!listen_ip.is_unspecified()).then_some(listen_ip), names, ips }
    }

    /// Whether a request whose `Host` header is `host` (`None`: no header) is for this server.
    pub fn admits(&self, host: Option<&str>) -> bool {
        let Some(host) = host else { return true };
        let Some(name) = host_without_port(host) else { return false };
        match parse_ip(name) {
            Some(ip) => ip.is_loopback() || self.listen_ip.is_none_or(|listen| listen == ip) || self.ips.contains(&ip),
            None => {
                let name = normalise(name);
                self.names.contains(&name)
            }
        }
    }
}

fn normalise(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// An IP literal as a `Host` or an `allowed_hosts` entry writes it (IPv6 with or without brackets).
fn parse_ip(text: &str) -> Option<IpAddr> {
    let bare = text.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')).unwrap_or(text);
    bare.parse().ok()
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]`, `[v6]:port`); `None` when it
/// is not one.
fn host_without_port(host: &str) -> Option<&str> {
    if host.starts_with('[') {
        let end = host.find(']')?;
        let rest = &host[end + 1..];
        return (rest.is_empty() || is_port(rest.strip_prefix(':')?)).then_some(&host[..=end]);
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if is_port(port) => name,
        Some(_) => return None,
        None => host,
    };
    (!name.is_empty()).then_some(name)
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(listen: &str, allowed: &[&str]) -> AllowedHosts {
        AllowedHosts::new(listen.parse().unwrap(), &allowed.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_rebound_name_is_refused_and_loopback_names_and_addresses_are_admitted() {
        let loopback = hosts("127.0.0.1", &[]);
        for host in ["attacker.example", "attacker.example:8090", "localhost.attacker.example", "127.0.0.1.nip.io"] {
            assert!(!loopback.admits(Some(host)), "{host}");
        }
        for host in ["127.0.0.1:8090", "127.0.0.1", "localhost:9000", "LOCALHOST.", "[::1]:8090", "127.1.2.3:80"] {
            assert!(loopback.admits(Some(host)), "{host}");
        }
        assert!(loopback.admits(None), "no Host: not a browser");
    }

    #[test]
    fn the_listen_address_and_the_configured_names_are_admitted() {
        let lan = hosts("192.168.1.5", &["jetson", "Jetson.Local.", "10.0.0.9"]);
        for host in ["192.168.1.5:8090", "jetson:8090", "jetson.local", "JETSON", "10.0.0.9:80"] {
            assert!(lan.admits(Some(host)), "{host}");
        }
        for host in ["192.168.1.6:8090", "jetson.example", "[fe80::1]:8090"] {
            assert!(!lan.admits(Some(host)), "{host}");
        }
        let everywhere = hosts("0.0.0.0", &[]);
        assert!(everywhere.admits(Some("192.168.1.6:8090")), "every address of the machine");
        assert!(everywhere.admits(Some("[fe80::1]:8090")));
        assert!(!everywhere.admits(Some("jetson:8090")), "a name must be listed");
    }

    #[test]
    fn malformed_host_values_are_refused() {
        let loopback = hosts("::1", &[]);
        for host in ["", ":8090", "localhost:port", "[::1", "[::1]x", "[::1]:", "a:b:c", "localhost:123456"] {
            assert!(!loopback.admits(Some(host)), "{host:?}");
        }
    }
}
