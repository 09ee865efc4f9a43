//! How the daemon presents itself to the broker, and what the broker's answer means.
//!
//! Owns: the client options every connection to the broker uses ([`client_options`]: client id,
//! keep-alive, packet bounds, credentials, TLS), a failed connection attempt told in the config's
//! words ([`explain`]: a refused login names `mqtt.username` and where the password comes from),
//! and one login that ends at once ([`try_login`], what `probe` reports). Must not: keep a
//! connection, publish, set a Last Will (the connection task adds its own), or show a password.

use std::time::Duration;

use rumqttc::{AsyncClient, ConnectReturnCode, ConnectionError, Event, MqttOptions, Packet, Transport};

use super::message::{MAX_PAYLOAD_BYTES, MAX_TOPIC_BYTES};
use super::outbox::MAX_IN_FLIGHT;
use super::settings::MqttSettings;

/// The largest packet rumqttc reads: MQTT 3.1.1's own bound (its remaining-length field holds no
/// more), which is what a broker without a `message_size_limit` lets anyone publish. rumqttc
/// cannot skip a packet over its bound: it closes the connection, and a retained one closed every
/// later connection too (64 KiB did that). So every packet is read, and `super::inbound` refuses
/// by size what the daemon has no use for. The memory this takes is one message at a time, at most
/// what the broker accepts (mosquitto's `message_size_limit` bounds it below this).
pub const MAX_INCOMING_PACKET_BYTES: usize = 268_435_455;

/// The options of a connection as `client_id`: a clean session (the outbox re-sends), the
/// in-flight window, the packet size bounds ([`MAX_INCOMING_PACKET_BYTES`]; out: what the
/// publisher admits), credentials and TLS; no Last Will.
pub(super) fn client_options(settings: &MqttSettings, client_id: &str) -> MqttOptions {
    let mut options = MqttOptions::new(client_id, settings.host.clone(), settings.port);
    let keep_alive =
        if settings.keep_alive.is_zero() { Duration::ZERO } else { settings.keep_alive.max(Duration::from_secs(1)) };
    options
        .set_keep_alive(keep_alive)
        .set_clean_session(true)
        .set_inflight(MAX_IN_FLIGHT)
        .set_max_packet_size(MAX_INCOMING_PACKET_BYTES, MAX_PAYLOAD_BYTES + MAX_TOPIC_BYTES + 16);
    if let Some(username) = &settings.username {
        options.set_credentials(username.clone(), settings.password.clone().unwrap_or_default());
    }
    if let Some(tls) = &settings.tls {
        options.set_transport(Transport::tls(tls.ca.clone(), tls.client_auth.clone(), None));
    }
    options
}

/// A failed connection attempt as the log and `probe` say it. A broker that refuses the login
/// gets a sentence naming the keys to check (mosquitto answers `NotAuthorized` for a wrong
/// password, an unknown user and a missing login alike); anything else is rumqttc's own words.
pub fn explain(error: &ConnectionError, settings: &MqttSettings) -> String {
    let ConnectionError::ConnectionRefused(code) = error else { return error.to_string() };
    match code {
        ConnectReturnCode::BadUserNamePassword | ConnectReturnCode::NotAuthorized => {
            match (&settings.username, &settings.password_source) {
                (Some(user), Some(source)) => format!(
                    "the broker refused the login of user {user:?} ({code:?}): check `mqtt.username` and the \
                     password in {source}, and that the broker has this user"
                ),
                (Some(user), None) => format!(
                    "the broker refused the login of user {user:?} ({code:?}), which has no password: set \
                     `mqtt.password_file`"
                ),
                (None, _) => format!(
                    "the broker refused the connection ({code:?}): it wants a login; set `mqtt.username` and \
                     `mqtt.password_file`"
                ),
            }
        }
        ConnectReturnCode::BadClientId => format!(
            "the broker refused the client id {:?} (BadClientId): set `mqtt.client_id` to one it accepts",
            settings.client_id
        ),
        ConnectReturnCode::ServiceUnavailable => {
            "the broker refused the connection (ServiceUnavailable): it takes no clients now".to_string()
        }
        ConnectReturnCode::RefusedProtocolVersion => {
            "the broker refused MQTT 3.1.1 (RefusedProtocolVersion), the version this daemon speaks".to_string()
        }
        ConnectReturnCode::Success => error.to_string(),
    }
}

/// Connects as `<client id>-probe` (so a running daemon's session is left alone), waits at most
/// `timeout` for the broker's answer, and disconnects: `Ok` with what was accepted, `Err` with
/// [`explain`]'s sentence.
pub async fn try_login(settings: &MqttSettings, timeout: Duration) -> Result<String, String> {
    let options = client_options(settings, &format!("{}-probe", settings.client_id));
    let (client, mut eventloop) = AsyncClient::new(options, 2);
    tokio::time::timeout(timeout, async {
        loop {
            match eventloop.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(_))) => return Ok(()),
                Ok(_) => {}
                Err(error) => return Err(explain(&error, settings)),
            }
        }
    })
    .await
    .unwrap_or_else(|_| Err(format!("the broker did not answer the login within {timeout:?}")))?;
    // A clean goodbye: the DISCONNECT is written by the next poll.
    if client.try_disconnect().is_ok() {
        let _ = tokio::time::timeout(timeout, eventloop.poll()).await;
    }
    Ok(match &settings.username {
        Some(user) => format!("the broker accepted the login of user {user:?}"),
        None => "the broker accepted a connection without a login".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(username: Option<&str>, password_source: Option<&str>) -> MqttSettings {
        MqttSettings {
            host: "127.0.0.1".into(),
            port: 1883,
            client_id: "jetson-detectd-test".into(),
            prefix: "jetson-detectd/test".into(),
            qos: rumqttc::QoS::AtLeastOnce,
            keep_alive: Duration::from_secs(30),
            queue_capacity: 10,
            queue_max_bytes: 1 << 20,
            username: username.map(str::to_string),
            password: password_source.map(|_| "hunter2-secret".to_string()),
            password_source: password_source.map(str::to_string),
            tls: None,
            shutdown_flush: Duration::from_secs(1),
            reconnect_min: Duration::from_millis(500),
            reconnect_max: Duration::from_secs(30),
        }
    }

    fn refused(code: ConnectReturnCode) -> ConnectionError {
        ConnectionError::ConnectionRefused(code)
    }

    #[test]
    fn a_refused_login_names_the_user_the_keys_and_where_the_password_comes_from() {
        let source = "`mqtt.password_file` (/etc/jetson-detectd/mqtt-password)";
        let with_password = settings(Some("jetson"), Some(source));
        for code in [ConnectReturnCode::NotAuthorized, ConnectReturnCode::BadUserNamePassword] {
            let said = explain(&refused(code), &with_password);
            assert!(said.contains("\"jetson\"") && said.contains("`mqtt.username`") && said.contains(source), "{said}");
            assert!(!said.contains("hunter2"), "{said}");
        }
        let without_login = explain(&refused(ConnectReturnCode::NotAuthorized), &settings(None, None));
        assert!(
            without_login.contains("wants a login") && without_login.contains("`mqtt.username`"),
            "{without_login}"
        );
        let without_password = explain(&refused(ConnectReturnCode::NotAuthorized), &settings(Some("jetson"), None));
        assert!(without_password.contains("no password"), "{without_password}");
    }

    #[test]
    fn other_refusals_say_what_to_change_and_other_errors_keep_their_words() {
        let plain = settings(None, None);
        assert!(explain(&refused(ConnectReturnCode::BadClientId), &plain).contains("`mqtt.client_id`"));
        assert!(explain(&refused(ConnectReturnCode::ServiceUnavailable), &plain).contains("ServiceUnavailable"));
        let timeout = ConnectionError::NetworkTimeout;
        assert_eq!(explain(&timeout, &plain), timeout.to_string());
    }
}
