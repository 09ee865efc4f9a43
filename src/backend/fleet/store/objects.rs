//! Object stores (`s3://`, `gs://`, `az://`, `file://`) through the `object_store` crate.
//!
//! Owns: building the crate's store from a [`StoreSettings`] (credentials, an S3-compatible
//! endpoint, HTTP timeouts, conditional writes), object names under the URL's prefix, and turning
//! its reads and writes into the store client's ([`Written`], [`Version`]): a write is one PUT, so
//! an object appears whole or not at all; `Create` and `Replace` are the store's own conditional
//! writes (S3 `If-None-Match: *` / `If-Match`), atomic on the server. Downloads are bounded:
//! the object's size is checked first, then the stream is cut at the bound. Must not: know what
//! the objects hold (packs, leases) or retry beyond the crate's bounded retries.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{
    ClientOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig, UpdateVersion,
};

use super::error::StoreError;
use super::types::{Fetched, StoreSettings, Version, Write, Written};

pub struct Objects {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    name: String,
}

impl Objects {
    pub fn open(url: &str, settings: &StoreSettings) -> Result<Objects, StoreError> {
        let setup = |message: String| StoreError::Setup { store: url.to_owned(), message };
        let parsed = reqwest::Url::parse(url).map_err(|e| setup(e.to_string()))?;
        let client = ClientOptions::new()
            .with_timeout(settings.timeout)
            .with_connect_timeout(Duration::from_secs(10).min(settings.timeout))
            .with_allow_http(true);
        // Two quick retries of a dropped connection or a 5xx; never longer than one operation may take.
        let retry = RetryConfig { max_retries: 2, retry_timeout: settings.timeout, ..RetryConfig::default() };
        let (store, prefix): (Arc<dyn ObjectStore>, &str) = match parsed.scheme() {
            "s3" => {
                let mut builder = AmazonS3Builder::from_env()
                    .with_url(url)
                    .with_client_options(client)
                    .with_retry(retry)
                    .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch);
                if let Some(endpoint) = &settings.endpoint {
                    builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
                    // S3-compatible servers answer path-style requests; a region is required by the signer.
                    if std::env::var_os("AWS_REGION").is_none() && std::env::var_os("AWS_DEFAULT_REGION").is_none() {
                        builder = builder.with_region("us-east-1");
                    }
                }
                if let Some((user, secret)) = &settings.credentials {
                    builder = builder.with_access_key_id(user).with_secret_access_key(secret);
                }
                (Arc::new(builder.build().map_err(|e| setup(e.to_string()))?), parsed.path())
            }
            "gs" => {
                let builder =
                    GoogleCloudStorageBuilder::from_env().with_url(url).with_client_options(client).with_retry(retry);
                (Arc::new(builder.build().map_err(|e| setup(e.to_string()))?), parsed.path())
            }
            "az" => {
                let builder =
                    MicrosoftAzureBuilder::from_env().with_url(url).with_client_options(client).with_retry(retry);
                (Arc::new(builder.build().map_err(|e| setup(e.to_string()))?), parsed.path())
            }
            "file" => {
                std::fs::create_dir_all(parsed.path()).map_err(|e| setup(e.to_string()))?;
                let local = LocalFileSystem::new_with_prefix(parsed.path()).map_err(|e| setup(e.to_string()))?;
                (Arc::new(local), "")
            }
            other => return Err(setup(format!("no object store for {other}://"))),
        };
        let prefix = ObjectPath::from(prefix.trim_matches('/'));
        Ok(Objects { store, prefix, name: url.to_owned() })
    }

    fn path(&self, name: &str) -> ObjectPath {
        name.split('/').fold(self.prefix.clone(), |path, part| path.clone().join(part))
    }

    fn error(&self, what: &str, error: object_store::Error) -> StoreError {
        let message = error.to_string();
        match error {
            object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
                StoreError::Denied { store: self.name.clone(), what: what.to_owned(), message }
            }
            _ => StoreError::Failed { store: self.name.clone(), message: format!("{what}: {message}") },
        }
    }

    /// The object `name`, if there is one, at most `max` bytes.
    pub async fn get(&self, name: &str, max: u64) -> Result<Option<Fetched>, StoreError> {
        let path = self.path(name);
        let result = match self.store.get(&path).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(self.error(name, error)),
        };
        let size = result.meta.size;
        if size > max {
            return Err(StoreError::TooLarge { store: self.name.clone(), what: name.to_owned(), bytes: size, max });
        }
        let version = Version { e_tag: result.meta.e_tag.clone(), version: result.meta.version.clone() };
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        let mut stream = result.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.error(name, e))?;
            if bytes.len() as u64 + chunk.len() as u64 > max {
                let bytes = bytes.len() as u64 + chunk.len() as u64;
                return Err(StoreError::TooLarge { store: self.name.clone(), what: name.to_owned(), bytes, max });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(Fetched { bytes, version }))
    }

    /// Writes `bytes` to `name` as `write` says.
    pub async fn put(&self, name: &str, bytes: Vec<u8>, write: &Write) -> Result<Written, StoreError> {
        let mode = match write {
            Write::Overwrite => PutMode::Overwrite,
            Write::Create => PutMode::Create,
            Write::Replace(version) | Write::ReplaceUnconfirmed(version) => {
                PutMode::Update(UpdateVersion { e_tag: version.e_tag.clone(), version: version.version.clone() })
            }
        };
        let options = PutOptions { mode, ..PutOptions::default() };
        // One buffer: a payload's clone shares it.
        let payload = PutPayload::from(bytes);
        match self.store.put_opts(&self.path(name), payload.clone(), options).await {
            Ok(result) => Ok(Written::Done(Version { e_tag: result.e_tag, version: result.version })),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(Written::Conflict)
            }
            // A directory (`file://`) cannot replace conditionally: it removes and creates, so two
            // devices taking over one released lease at the same moment may both think they hold it
            // (the docs say so; the worst case is one engine built twice).
            Err(object_store::Error::NotImplemented { .. })
                if matches!(write, Write::Replace(_) | Write::ReplaceUnconfirmed(_)) =>
            {
                let path = self.path(name);
                self.store.delete(&path).await.map_err(|e| self.error(name, e))?;
                let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
                match self.store.put_opts(&path, payload, options).await {
                    Ok(result) => Ok(Written::Done(Version { e_tag: result.e_tag, version: result.version })),
                    Err(object_store::Error::AlreadyExists { .. }) => Ok(Written::Conflict),
                    Err(error) => Err(self.error(name, error)),
                }
            }
            Err(error) => Err(self.error(name, error)),
        }
    }
}
