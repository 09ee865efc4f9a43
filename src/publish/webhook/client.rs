//! One delivery attempt: a POST of one event to the webhook's receiver, over HTTP/1.1, plain or
//! TLS (rustls with ring, the system's CAs and `ca_file`'s), a connection per attempt.
//!
//! Owns: [`Client`] (the endpoint, the TLS configuration and the headers, made once at start, so
//! that a bad CA file fails there) and [`Attempt`], what an attempt came to: delivered, worth
//! another attempt (no connection, a timeout, 408, 429, 5xx; with the receiver's `Retry-After`),
//! or refused. Must not: retry, wait between attempts or count (`super::delivery` does), or take
//! longer than `timeout_ms`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE, HOST, RETRY_AFTER, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use super::config::{Endpoint, WebhookConfig};
use super::signature::{Signer, SIGNATURE_HEADER};
use crate::sys::files::{self, MAX_PEM_BYTES};

/// Why a client cannot be made: a key of `[[webhook]]` and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("`{key}`: {reason}")]
pub struct ClientError {
    pub key: String,
    pub reason: String,
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// A 2xx answer.
    Delivered,
    /// Worth another attempt: why, and how long the receiver asked to wait (`Retry-After` in
    /// seconds).
    Retry { why: String, after: Option<Duration> },
    /// Any other answer: the receiver does not want the event.
    Refused(String),
}

/// Posts events to one receiver.
pub struct Client {
    endpoint: Endpoint,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    headers: Vec<(HeaderName, HeaderValue)>,
    signer: Option<Signer>,
    timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("endpoint", &self.endpoint).field("signed", &self.signer.is_some()).finish()
    }
}

impl Client {
    /// The client of the `index`-th `[[webhook]]`, `config`; `signer` signs its requests.
    pub fn new(index: usize, config: &WebhookConfig, signer: Option<Signer>) -> Result<Client, ClientError> {
        let error = |field: &str, reason: String| ClientError { key: format!("webhook[{index}].{field}"), reason };
        let endpoint = Endpoint::parse(&config.url).map_err(|reason| error("url", reason))?;
        let mut headers = Vec::new();
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| error(&format!("headers.{name}"), e.to_string()))?;
            let value = HeaderValue::from_str(value).map_err(|e| error(&format!("headers.{name}"), e.to_string()))?;
            headers.push((name, value));
        }
        let tls = match endpoint.tls {
            false => None,
            true => {
                let roots = roots(config.ca_file.as_deref()).map_err(|reason| error("ca_file", reason))?;
                let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
                let tls = ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| error("url", format!("TLS: {e}")))?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                let name = ServerName::try_from(endpoint.host.clone())
                    .map_err(|e| error("url", format!("{:?} is no name TLS can check: {e}", endpoint.host)))?;
                Some((TlsConnector::from(Arc::new(tls)), name))
            }
        };
        Ok(Client { endpoint, tls, headers, signer, timeout: Duration::from_millis(config.timeout_ms) })
    }

    /// One POST of `body`, within the webhook's `timeout_ms` (connection, TLS and the answer's
    /// status line; its body is not read).
    pub async fn post(&self, body: Bytes) -> Attempt {
        match tokio::time::timeout(self.timeout, self.exchange(body)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(why)) => Attempt::Retry { why, after: None },
            Err(_) => Attempt::Retry { why: format!("no answer within {} ms", self.timeout.as_millis()), after: None },
        }
    }

    async fn exchange(&self, body: Bytes) -> Result<Attempt, String> {
        let address = (self.endpoint.host.as_str(), self.endpoint.port);
        let tcp = TcpStream::connect(address)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.endpoint.authority))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => self.send(tcp, body).await,
            Some((connector, name)) => {
                let stream = connector.connect(name.clone(), tcp).await.map_err(|e| format!("TLS: {e}"))?;
                self.send(stream, body).await
            }
        }
    }

    async fn send<S>(&self, stream: S, body: Bytes) -> Result<Attempt, String>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("HTTP: {e}"))?;
        // The connection is driven beside the request, and ends with it.
        let connection = tokio::spawn(connection);
        let mut request = Request::post(self.endpoint.path.as_str())
            .header(HOST, self.endpoint.authority.as_str())
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, concat!("jetson-detectd/", env!("CARGO_PKG_VERSION")));
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(signer) = &self.signer {
            request = request.header(SIGNATURE_HEADER, signer.sign(&body));
        }
        let request = request.body(Full::new(body)).map_err(|e| format!("HTTP: {e}"))?;
        let answer = sender.send_request(request).await;
        connection.abort();
        let response = answer.map_err(|e| format!("HTTP: {e}"))?;
        Ok(judge(response.status(), response.headers().get(RETRY_AFTER)))
    }
}

/// What an answer's status (and `Retry-After`) means for the event.
fn judge(status: StatusCode, retry_after: Option<&HeaderValue>) -> Attempt {
    if status.is_success() {
        return Attempt::Delivered;
    }
    let why = format!("the receiver answered {status}");
    if status == StatusCode::REQUEST_TIMEOUT || status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        let after = retry_after
            .and_then(|value| value.to_str().ok())
            .and_then(|text| text.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        return Attempt::Retry { why, after };
    }
    Attempt::Refused(why)
}

/// The system's CA certificates and those of `ca_file`; none at all is an error.
fn roots(ca_file: Option<&std::path::Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = ca_file {
        let bytes = files::read(path, MAX_PEM_BYTES).map_err(|e| format!("{}: {e}", path.display()))?;
        let certificates = rustls_pemfile::certs(&mut std::io::Cursor::new(&bytes))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: a PEM block does not decode ({e})", path.display()))?;
        let (valid, invalid) = roots.add_parsable_certificates(certificates);
        if valid == 0 || invalid > 0 {
            return Err(format!(
                "{}: {invalid} of {} certificate(s) do not parse as X.509 (a PEM `CERTIFICATE` file is wanted)",
                path.display(),
                valid + invalid
            ));
        }
    }
    if roots.is_empty() {
        return Err("no CA certificate to check the receiver with: the system has none, so name one in ca_file".into());
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_delivers_timeouts_throttling_and_server_errors_retry_and_the_rest_refuses() {
        assert_eq!(judge(StatusCode::NO_CONTENT, None), Attempt::Delivered);
        let after = HeaderValue::from_static("7");
        assert_eq!(
            judge(StatusCode::TOO_MANY_REQUESTS, Some(&after)),
            Attempt::Retry {
                why: "the receiver answered 429 Too Many Requests".into(),
                after: Some(Duration::from_secs(7))
            }
        );
        assert!(matches!(judge(StatusCode::BAD_GATEWAY, None), Attempt::Retry { after: None, .. }));
        assert!(matches!(judge(StatusCode::REQUEST_TIMEOUT, None), Attempt::Retry { .. }));
        let date = HeaderValue::from_static("Wed, 21 Oct 2026 07:28:00 GMT");
        assert!(matches!(judge(StatusCode::SERVICE_UNAVAILABLE, Some(&date)), Attempt::Retry { after: None, .. }));
        assert_eq!(judge(StatusCode::NOT_FOUND, None), Attempt::Refused("the receiver answered 404 Not Found".into()));
    }

    #[test]
    fn a_ca_file_that_holds_no_certificate_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").expect("write");
        let error = roots(Some(&path)).expect_err("not a certificate");
        assert!(error.contains("ca.pem") && error.contains("X.509"), "{error}");
    }
}
