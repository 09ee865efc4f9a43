//! OCI registries (`oci://registry/repository`) through the `oci-client` crate: each stored object
//! is an OCI artifact under a tag of its own.
//!
//! Owns: the tag of an object (`engines/<key>.pack` → `engines-<key>.pack`), the artifact (an
//! image manifest whose `config` is the empty descriptor and whose one layer is the object, media
//! type [`OBJECT_MEDIA_TYPE`]), the registry's auth (anonymous, or the configured user and
//! password/token, which the crate exchanges for the registry's bearer token), and the bounds:
//! the manifest's layer size is checked before the blob is read, and the blob is cut at the bound.
//!
//! Atomicity: a push uploads the blob first (content-addressed, invisible by itself) and then the
//! manifest under the tag, so a tag never names a half-uploaded object. Conditional writes: the
//! distribution API has none (a manifest PUT to a tag always wins), so [`Write::Create`] and
//! [`Write::Replace`] read the tag, refuse a change they did not expect, push, wait
//! [`SETTLE`] and read the tag back ([`Write::ReplaceUnconfirmed`] does not wait): a write is this device's only if the tag still resolves to
//! the digest of the manifest it sent (the sha256 of those bytes; a lease's manifests differ by
//! the holder and random token inside), so of two writers in one window only the last goes on. Two devices whose check and write are more than [`SETTLE`] apart can
//! still both win: the worst case is one engine built twice, never a wrong engine (each pack is
//! checked on its own). Must not: know what the objects hold.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciImageManifest, OCI_IMAGE_MEDIA_TYPE};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use reqwest::header::HeaderValue;
use sha2::{Digest, Sha256};

use super::error::StoreError;
use super::types::{Fetched, StoreSettings, Version, Write, Written};

/// Media type of a stored object's layer.
pub const OBJECT_MEDIA_TYPE: &str = "application/vnd.jetson-detectd.object.v1";
/// The artifact type of every manifest this store writes.
pub const ARTIFACT_TYPE: &str = "application/vnd.jetson-detectd.engine-store.v1";
const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// How long a conditional write waits before it reads its tag back.
pub const SETTLE: Duration = Duration::from_secs(2);

pub struct Oci {
    client: Client,
    registry: String,
    repository: String,
    auth: RegistryAuth,
    name: String,
}

impl Oci {
    pub fn open(
        registry: &str,
        repository: &str,
        plain_http: bool,
        settings: &StoreSettings,
    ) -> Result<Oci, StoreError> {
        let config = ClientConfig {
            protocol: if plain_http { ClientProtocol::Http } else { ClientProtocol::Https },
            connect_timeout: Some(Duration::from_secs(10).min(settings.timeout)),
            read_timeout: Some(settings.timeout),
            ..ClientConfig::default()
        };
        let auth = match &settings.credentials {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        };
        Ok(Oci {
            client: Client::new(config),
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            auth,
            name: settings.location.to_string(),
        })
    }

    fn reference(&self, name: &str) -> Reference {
        Reference::with_tag(self.registry.clone(), self.repository.clone(), name.replace('/', "-"))
    }

    fn error(&self, what: &str, error: OciDistributionError) -> StoreError {
        let message = error.to_string();
        match error {
            OciDistributionError::AuthenticationFailure(_) | OciDistributionError::UnauthorizedError { .. } => {
                StoreError::Denied { store: self.name.clone(), what: what.to_owned(), message }
            }
            _ => StoreError::Failed { store: self.name.clone(), message: format!("{what}: {message}") },
        }
    }

    /// The manifest under `name`'s tag and its digest, if the tag exists.
    async fn manifest(&self, name: &str) -> Result<Option<(OciImageManifest, String)>, StoreError> {
        match self.client.pull_image_manifest(&self.reference(name), &self.auth).await {
            Ok(found) => Ok(Some(found)),
            Err(error) if is_not_found(&error) => Ok(None),
            Err(error) => Err(self.error(name, error)),
        }
    }

    pub async fn get(&self, name: &str, max: u64) -> Result<Option<Fetched>, StoreError> {
        let Some((manifest, digest)) = self.manifest(name).await? else { return Ok(None) };
        let layer = match manifest.layers.as_slice() {
            [layer] if layer.media_type == OBJECT_MEDIA_TYPE => layer,
            _ => {
                return Err(StoreError::Failed {
                    store: self.name.clone(),
                    message: format!("{name}: the tag holds no {OBJECT_MEDIA_TYPE} artifact (another tool's image?)"),
                })
            }
        };
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > max {
            return Err(StoreError::TooLarge { store: self.name.clone(), what: name.to_owned(), bytes: size, max });
        }
        let mut sink = BoundedSink { bytes: Vec::with_capacity(usize::try_from(size).unwrap_or(0)), max };
        self.client.pull_blob(&self.reference(name), layer, &mut sink).await.map_err(|e| self.error(name, e))?;
        Ok(Some(Fetched { bytes: sink.bytes, version: Version { e_tag: Some(digest), version: None } }))
    }

    /// The digest `name`'s tag resolves to, if the tag exists.
    async fn digest(&self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self.manifest(name).await?.map(|(_, digest)| digest))
    }

    pub async fn put(&self, name: &str, bytes: Vec<u8>, write: &Write) -> Result<Written, StoreError> {
        let expected = match write {
            Write::Overwrite => None,
            Write::Create => Some(None),
            Write::Replace(version) | Write::ReplaceUnconfirmed(version) => Some(version.e_tag.as_ref()),
        };
        if let Some(expected) = expected {
            if self.digest(name).await?.as_ref() != expected {
                return Ok(Written::Conflict);
            }
        }
        let ours = self.push_artifact(name, bytes).await?;
        if expected.is_some() && !matches!(write, Write::ReplaceUnconfirmed(_)) {
            // Only the tag's last writer holds it: a device that wrote after this one's look
            // replaced this manifest, and this one must see that it lost.
            tokio::time::sleep(SETTLE).await;
            if self.digest(name).await?.as_deref() != Some(ours.as_str()) {
                return Ok(Written::Conflict);
            }
        }
        Ok(Written::Done(Version { e_tag: Some(ours), version: None }))
    }

    /// Pushes `bytes` as `name`'s artifact (blobs first, the manifest under the tag last) and
    /// returns the digest of the manifest this call sent: the sha256 of the exact bytes PUT, which
    /// is what the tag resolves to until another writer replaces it. Never the tag read back,
    /// which may already be another writer's.
    async fn push_artifact(&self, name: &str, bytes: Vec<u8>) -> Result<String, StoreError> {
        let reference = self.reference(name);
        let layers = [ImageLayer::new(bytes, OBJECT_MEDIA_TYPE.to_owned(), None)];
        let config = Config::new(b"{}".to_vec(), EMPTY_CONFIG_MEDIA_TYPE.to_owned(), None);
        let mut manifest = OciImageManifest::build(&layers, &config, None);
        manifest.artifact_type = Some(ARTIFACT_TYPE.to_owned());
        manifest.annotations = Some(BTreeMap::from([("org.opencontainers.image.title".to_owned(), name.to_owned())]));
        let body = serde_json::to_vec(&manifest).map_err(|e| StoreError::Failed {
            store: self.name.clone(),
            message: format!("{name}: its manifest: {e}"),
        })?;
        let digest = format!("sha256:{:x}", Sha256::digest(&body));

        self.client.store_auth_if_needed(reference.resolve_registry(), &self.auth).await;
        for (layer, descriptor) in layers.iter().zip(&manifest.layers) {
            self.client
                .push_blob(&reference, layer.data.clone(), &descriptor.digest)
                .await
                .map_err(|e| self.error(name, e))?;
        }
        self.client
            .push_blob(&reference, config.data, &manifest.config.digest)
            .await
            .map_err(|e| self.error(name, e))?;
        self.client
            .push_manifest_raw(&reference, body, HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE))
            .await
            .map_err(|e| self.error(name, e))?;
        Ok(digest)
    }
}

/// Whether a registry's answer means "no such tag".
fn is_not_found(error: &OciDistributionError) -> bool {
    match error {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code: 404, .. } => true,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                oci_client::errors::OciErrorCode::ManifestUnknown
                    | oci_client::errors::OciErrorCode::NameUnknown
                    | oci_client::errors::OciErrorCode::NotFound
            )
        }),
        _ => false,
    }
}

/// A blob's bytes, refused past `max` (a registry that sends more than its manifest said).
struct BoundedSink {
    bytes: Vec<u8>,
    max: u64,
}

impl tokio::io::AsyncWrite for BoundedSink {
    fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, chunk: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.bytes.len() as u64 + chunk.len() as u64 > self.max {
            return Poll::Ready(Err(std::io::Error::other("more bytes than engine.store.max_pack_mib allows")));
        }
        self.bytes.extend_from_slice(chunk);
        Poll::Ready(Ok(chunk.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
