//! The publisher's settings: `[mqtt]` resolved, with the password and the TLS files read and
//! checked at start.
//!
//! Owns: [`MqttSettings`], [`TlsMaterial`], [`MqttError`] and reading the password and PEM files
//! (bounded, regular files only, parsed as the TLS connection will parse them), so that a bad path
//! or bad content fails at start naming the key and the file, not at every reconnect. Must not:
//! connect, or log a password.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rumqttc::QoS;

use super::config::MqttConfig;
use crate::config::Config;
use crate::sys::exit::{Classified, ExitClass};
use crate::sys::files::{self, ReadError, MAX_PASSWORD_BYTES, MAX_PEM_BYTES};

#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    #[error("mqtt.password_file {path}: {source}")]
    PasswordFile { path: PathBuf, source: ReadError },
    #[error("mqtt.password_file {path}: the first line is empty")]
    EmptyPassword { path: PathBuf },
    #[error("mqtt.password_env: environment variable {name} is not set or not valid UTF-8")]
    PasswordEnv { name: String },
    #[error("mqtt.tls.{key} {path}: {source}")]
    TlsFile { key: &'static str, path: PathBuf, source: ReadError },
    #[error("mqtt.tls.{key} {path}: no PEM `{expected}` block in the file")]
    TlsPem { key: &'static str, path: PathBuf, expected: &'static str },
    #[error("mqtt.tls.{key} {path}: {reason}")]
    TlsContent { key: &'static str, path: PathBuf, reason: String },
    #[error("the MQTT publisher must be started inside a tokio runtime")]
    NoRuntime,
}

/// A mistake in the config or in a file it names is the configuration's: a restart cannot fix it.
impl Classified for MqttError {
    fn exit_class(&self) -> ExitClass {
        ExitClass::configuration_if(!matches!(self, MqttError::NoRuntime))
    }
}

/// PEM files for a TLS connection, read at start so that a bad path fails there, not at every reconnect.
#[derive(Clone)]
pub struct TlsMaterial {
    /// CA bundle that signs the broker's certificate.
    pub ca: Vec<u8>,
    /// Client certificate and private key for mutual TLS.
    pub client_auth: Option<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_bytes", &self.ca.len())
            .field("client_auth", &self.client_auth.as_ref().map(|_| "<certificate and key>"))
            .finish()
    }
}

/// Everything the publisher needs, resolved from `[mqtt]` (passwords and PEM files already read).
#[derive(Clone)]
pub struct MqttSettings {
    pub host: String,
    pub port: u16,
    pub client_id: String,
    /// Topic prefix without a trailing `/`.
    pub prefix: String,
    /// QoS of everything but the status topic (always QoS 1).
    pub qos: QoS,
    /// Zero disables keep-alive; otherwise at least one second (rumqttc's resolution).
    pub keep_alive: Duration,
    /// Data messages held while the broker is away or slow; beyond, per-frame messages are dropped
    /// first (oldest first), then the oldest of the others.
    pub queue_capacity: usize,
    /// The same bound in bytes (payload and topic of every queued data message).
    pub queue_max_bytes: usize,
    pub username: Option<String>,
    pub password: Option<String>,
    /// Where the password came from, for messages: `` `mqtt.password_file` (/etc/…) `` or
    /// `` `mqtt.password_env` (NAME) ``; never the password.
    pub password_source: Option<String>,
    pub tls: Option<TlsMaterial>,
    /// Longest wait at shutdown for queued QoS ≥ 1 messages to be acknowledged.
    pub shutdown_flush: Duration,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
}

impl fmt::Debug for MqttSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MqttSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("client_id", &self.client_id)
            .field("prefix", &self.prefix)
            .field("qos", &self.qos)
            .field("keep_alive", &self.keep_alive)
            .field("queue_capacity", &self.queue_capacity)
            .field("queue_max_bytes", &self.queue_max_bytes)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("password_source", &self.password_source)
            .field("tls", &self.tls)
            .field("shutdown_flush", &self.shutdown_flush)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .finish()
    }
}

impl MqttSettings {
    /// `config`'s `[mqtt]` with its computed defaults, the password and TLS files it names read.
    pub fn from_config(config: &Config) -> Result<MqttSettings, MqttError> {
        let mqtt = MqttConfig::of(config);
        let password = match (&mqtt.password_file, &mqtt.password_env) {
            (Some(path), _) => Some(read_password_file(path)?),
            (None, Some(name)) => Some(std::env::var(name).map_err(|_| MqttError::PasswordEnv { name: name.clone() })?),
            (None, None) => None,
        };
        let password_source = match (&mqtt.password_file, &mqtt.password_env) {
            (Some(path), _) => Some(format!("`mqtt.password_file` ({})", path.display())),
            (None, Some(name)) => Some(format!("`mqtt.password_env` ({name})")),
            (None, None) => None,
        };
        let tls = match &mqtt.tls {
            Some(tls) => Some(TlsMaterial {
                ca: read_certificates(&tls.ca_file, "ca_file")?,
                client_auth: match (&tls.client_cert, &tls.client_key) {
                    (Some(cert), Some(key)) => Some((read_certificates(cert, "client_cert")?, read_private_key(key)?)),
                    _ => None,
                },
            }),
            None => None,
        };
        Ok(MqttSettings {
            host: mqtt.host.clone(),
            port: mqtt.port,
            client_id: mqtt.client_id(config),
            prefix: mqtt.topic_prefix(config),
            qos: match mqtt.qos {
                0 => QoS::AtMostOnce,
                1 => QoS::AtLeastOnce,
                _ => QoS::ExactlyOnce,
            },
            keep_alive: Duration::from_secs(u64::from(mqtt.keep_alive_s)),
            queue_capacity: mqtt.queue_capacity,
            queue_max_bytes: usize::try_from(u64::from(mqtt.queue_max_mib) << 20).unwrap_or(usize::MAX),
            username: mqtt.username.clone(),
            password,
            password_source,
            tls,
            shutdown_flush: Duration::from_millis(mqtt.shutdown_flush_ms),
            reconnect_min: Duration::from_millis(mqtt.reconnect_min_ms),
            reconnect_max: Duration::from_millis(mqtt.reconnect_max_ms),
        })
    }

    pub(super) fn status_topic(&self) -> String {
        format!("{}/status", self.prefix)
    }
}

/// The first line of the password file (a regular file of at most [`MAX_PASSWORD_BYTES`]).
fn read_password_file(path: &Path) -> Result<String, MqttError> {
    let text = files::read_to_string(path, MAX_PASSWORD_BYTES)
        .map_err(|source| MqttError::PasswordFile { path: path.to_path_buf(), source })?;
    let first_line = text.lines().next().unwrap_or_default();
    if first_line.is_empty() {
        return Err(MqttError::EmptyPassword { path: path.to_path_buf() });
    }
    Ok(first_line.to_string())
}

/// A PEM file (at most [`MAX_PEM_BYTES`]) whose PEM blocks all decode, with at least one block
/// labelled `expected`.
fn read_pem(path: &Path, key: &'static str, expected: &'static str) -> Result<Vec<u8>, MqttError> {
    let bytes = files::read(path, MAX_PEM_BYTES).map_err(|source| MqttError::TlsFile {
        key,
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let has_block = text.match_indices("-----BEGIN ").any(|(at, _)| {
        text[at..].lines().next().is_some_and(|line| line.trim_end().ends_with(&format!("{expected}-----")))
    });
    if !has_block {
        return Err(MqttError::TlsPem { key, path: path.to_path_buf(), expected });
    }
    Ok(bytes)
}

/// A PEM certificate file checked as the TLS connection will use it (the same PEM parser as
/// rumqttc, and every certificate parsed as X.509), so bad content is found at start, naming the
/// key and the file, not at every connection attempt.
fn read_certificates(path: &Path, key: &'static str) -> Result<Vec<u8>, MqttError> {
    let bytes = read_pem(path, key, "CERTIFICATE")?;
    let content = |reason: String| MqttError::TlsContent { key, path: path.to_path_buf(), reason };
    let certificates = rustls_pemfile::certs(&mut std::io::Cursor::new(&bytes))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| content(format!("a PEM block does not decode ({e})")))?;
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    let (valid, invalid) = roots.add_parsable_certificates(certificates);
    if valid == 0 || invalid > 0 {
        return Err(content(format!("{invalid} of {} certificate(s) do not parse as X.509", valid + invalid)));
    }
    Ok(bytes)
}

/// A PEM private key file checked as the TLS connection will use it.
fn read_private_key(path: &Path) -> Result<Vec<u8>, MqttError> {
    let key = "client_key";
    let bytes = read_pem(path, key, "PRIVATE KEY")?;
    let content = |reason: String| MqttError::TlsContent { key, path: path.to_path_buf(), reason };
    let mut reader = std::io::Cursor::new(&bytes);
    loop {
        match rustls_pemfile::read_one(&mut reader) {
            Ok(Some(
                rustls_pemfile::Item::Pkcs1Key(_)
                | rustls_pemfile::Item::Pkcs8Key(_)
                | rustls_pemfile::Item::Sec1Key(_),
            )) => return Ok(bytes),
            Ok(Some(_)) => {}
            Ok(None) => return Err(content("no PKCS#1, PKCS#8 or SEC1 private key in the file".into())),
            Err(e) => return Err(content(format!("a PEM block does not decode ({e})"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::config::ConfigOrigin;

    fn config(mqtt: &str) -> Result<Config, crate::config::ConfigError> {
        let text = format!(
            r#"
            [device]
            id = "dev1"
            [model]
            onnx = "m.onnx"
            labels = "l.txt"
            decoder = "ssd"
            input = {{ width = 300, height = 300, layout = "nhwc", dtype = "u8" }}
            [[camera]]
            name = "front"
            source = {{ kind = "synthetic" }}
            [mqtt]
            {mqtt}
            "#
        );
        super::super::kind::schema().from_toml(&text, ConfigOrigin::File("test.toml".into()), Path::new("/base"))
    }

    #[test]
    fn settings_from_config_read_password_and_redact_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let password_path = dir.path().join("password");
        let mut file = std::fs::File::create(&password_path).expect("create");
        writeln!(file, "s3cret word\nignored").expect("write");
        let toml = format!("username = \"u\"\npassword_file = {:?}\nqos = 2", password_path.display().to_string());
        let settings = MqttSettings::from_config(&config(&toml).expect("config")).expect("settings");
        assert_eq!(settings.password.as_deref(), Some("s3cret word"));
        assert!(settings.client_id.starts_with("jetson-detectd-dev1"), "{}", settings.client_id);
        assert_eq!(settings.prefix, "jetson-detectd/dev1");
        assert_eq!(settings.qos, QoS::ExactlyOnce);
        let debug = format!("{settings:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
    }

    #[test]
    fn settings_errors_name_the_key_and_file() {
        let missing = config("username = \"u\"\npassword_file = \"/nonexistent/pw\"").expect("config");
        let error = MqttSettings::from_config(&missing).expect_err("missing file").to_string();
        assert!(error.contains("mqtt.password_file /nonexistent/pw"), "{error}");

        let env = config("username = \"u\"\npassword_env = \"JETSON_DETECTD_TEST_UNSET_VARIABLE\"").expect("config");
        let error = MqttSettings::from_config(&env).expect_err("unset env").to_string();
        assert!(error.contains("JETSON_DETECTD_TEST_UNSET_VARIABLE"), "{error}");

        let dir = tempfile::tempdir().expect("tempdir");
        let not_pem = dir.path().join("ca.der");
        std::fs::write(&not_pem, [0x30, 0x82, 0x01]).expect("write");
        let tls = config(&format!("tls = {{ ca_file = {:?} }}", not_pem.display().to_string())).expect("config");
        let error = MqttSettings::from_config(&tls).expect_err("not PEM").to_string();
        assert!(error.contains("mqtt.tls.ca_file") && error.contains("CERTIFICATE"), "{error}");
    }

    /// A self-signed test CA (`openssl req -x509 -newkey ec`); its key was thrown away.
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBmjCCAT+gAwIBAgIUapslTokTT/SiK1VtztVCAMvdtyowCgYIKoZIzj0EAwIw
ITEfMB0GA1UEAwwWamV0c29uLWRldGVjdGQgdGVzdCBDQTAgFw0yNjExMjUwOTEy
MDJaGA8yMTI2MTEwMTA5MTIwMlowITEfMB0GA1UEAwwWamV0c29uLWRldGVjdGQg
dGVzdCBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABLopJzskjPYo2siuUXg7
mIh1vKdciQHtwad12pd7kDH2OK2cbqSlBaQsriAZsYryB/EJKU50UvzhDeipvqZj
3BijUzBRMB0GA1UdDgQWBBSvC1xGszNelvX4S7Ng+ghd9kbjsjAfBgNVHSMEGDAW
gBSvC1xGszNelvX4S7Ng+ghd9kbjsjAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49
BAMCA0kAMEYCIQCm4pq+Hb0Akex0V8C+bjcNGnaVB/Csn9CoXoaMyKuQTAIhAKtt
lwUH9wlJdHngkmFawTQ3Yy/YyAKjjZOX2ZnkWLNb
-----END CERTIFICATE-----
";

    #[test]
    fn pem_check_accepts_certificates_and_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cert = dir.path().join("c.pem");
        let key = dir.path().join("k.pem");
        std::fs::write(&cert, format!("junk\n{TEST_CA}")).expect("write");
        std::fs::write(&key, "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n").expect("write");
        assert!(read_certificates(&cert, "ca_file").is_ok());
        assert!(read_private_key(&key).is_ok());
        assert!(read_certificates(&key, "client_cert").is_err());
    }

    /// Issue 21: armour around content that is not base64, or not a certificate, was found only
    /// at connect ("TLS: I/O: InvalidCharacter(33)"), naming neither the key nor the file.
    #[test]
    fn a_certificate_with_bad_content_is_refused_at_start_naming_key_and_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cases = [
            ("not-base64.pem", "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"),
            ("not-x509.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
        ];
        for (name, text) in cases {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write");
            let error = read_certificates(&path, "ca_file").expect_err(name).to_string();
            assert!(error.starts_with(&format!("mqtt.tls.ca_file {}: ", path.display())), "{error}");
            assert!(matches!(read_certificates(&path, "ca_file"), Err(MqttError::TlsContent { .. })));
        }
    }

    #[test]
    fn password_and_pem_files_are_bounded_and_must_be_regular_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let huge = dir.path().join("huge");
        std::fs::File::create(&huge).and_then(|file| file.set_len(1 << 30)).expect("sparse file");
        for path in [Path::new("/dev/zero"), dir.path(), huge.as_path()] {
            let error = read_password_file(path).expect_err("refused");
            assert!(
                error.exit_class() == ExitClass::Configuration && error.to_string().contains("mqtt.password_file"),
                "{error}"
            );
            let error = read_certificates(path, "ca_file").expect_err("refused");
            assert!(
                error.exit_class() == ExitClass::Configuration && error.to_string().contains("mqtt.tls.ca_file"),
                "{error}"
            );
        }
        let not_utf8 = dir.path().join("password");
        std::fs::write(&not_utf8, [0xff, 0xfe, b'\n']).expect("write");
        assert!(read_password_file(&not_utf8).expect_err("not UTF-8").to_string().contains("UTF-8"));
    }
}
