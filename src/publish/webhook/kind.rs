//! The webhook outlet as it registers itself ([`OUTLET`]): its section (`[[webhook]]`), its checks
//! before the start (each secret file read, each CA file parsed, each label in the label file) and
//! its start (one outlet and one task per `[[webhook]]`).
//!
//! Owns: [`OUTLET`] and [`WebhookError`]. Must not: do what the outlet or its task do.

use std::sync::Arc;

use super::client::{Client, ClientError};
use super::config::Webhooks;
use super::outlet::WebhookOutlet;
use super::signature::{SecretError, Signer};
use crate::config::section::SectionKind;
use crate::config::Config;
use crate::detection::Labels;
use crate::publish::kind::{OutletError, OutletKind, OutletStart, Started};
use crate::sys::exit::{Classified, ExitClass};

/// The webhook outlet's registration.
pub const OUTLET: OutletKind = OutletKind { name: "webhook", sections: &[SectionKind::of::<Webhooks>()], check, start };

/// Why a webhook cannot start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{origin}: {source}")]
    Secret { origin: crate::config::ConfigOrigin, source: SecretError },
    #[error("{origin}: {source}")]
    Client { origin: crate::config::ConfigOrigin, source: ClientError },
    #[error("{origin}: `webhook[{index}].labels`: {label:?} is not in the label file {file}")]
    Label { origin: crate::config::ConfigOrigin, index: usize, label: String, file: String },
    #[error("webhooks must be started inside a tokio runtime")]
    NoRuntime,
}

/// Every cause but a missing runtime is the config's, or a file's it names.
impl Classified for WebhookError {
    fn exit_class(&self) -> ExitClass {
        ExitClass::configuration_if(!matches!(self, WebhookError::NoRuntime))
    }
}

/// The webhooks of `config`, each with its client (its secret read, its CA file parsed).
fn clients(config: &Config, labels: &Labels) -> Result<Vec<Client>, WebhookError> {
    let Some(Webhooks(webhooks)) = config.sections.get::<Webhooks>() else { return Ok(Vec::new()) };
    let origin = || config.origin.clone();
    let mut clients = Vec::new();
    for (index, webhook) in webhooks.iter().enumerate() {
        if let Some(label) = webhook.labels.iter().find(|label| labels.id_of(label).is_none()) {
            let file = config.model.labels.display().to_string();
            return Err(WebhookError::Label { origin: origin(), index, label: label.clone(), file });
        }
        let signer = match &webhook.secret_file {
            Some(path) => Some(
                Signer::read(path, &format!("webhook[{index}].secret_file"))
                    .map_err(|source| WebhookError::Secret { origin: origin(), source })?,
            ),
            None => None,
        };
        let client =
            Client::new(index, webhook, signer).map_err(|source| WebhookError::Client { origin: origin(), source })?;
        clients.push(client);
    }
    Ok(clients)
}

fn check(config: &Config, labels: &Labels) -> Result<(), OutletError> {
    clients(config, labels).map(drop).map_err(OutletError::new)
}

/// One outlet per `[[webhook]]`, each with its task on the current runtime.
fn start(start: &OutletStart<'_>) -> Result<Started, OutletError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(OutletError::new(WebhookError::NoRuntime));
    }
    let clients = clients(start.config, &start.labels).map_err(OutletError::new)?;
    let webhooks = start.config.sections.get::<Webhooks>().map(|webhooks| webhooks.0.as_slice()).unwrap_or_default();
    Ok(webhooks
        .iter()
        .zip(clients)
        .map(|(webhook, client)| {
            log::info!("webhook {}: posting {:?} events to {}", webhook.name, webhook.events, webhook.url);
            Arc::new(WebhookOutlet::start(webhook, client, start.labels.clone()))
                as Arc<dyn crate::publish::outlet::Outlet>
        })
        .collect())
}
