//! S3 (and S3-compatible) storage for the compact archive: a
//! [`compact_middleware::archive::StorageAdapter`] on `aws-sdk-s3`. Kept in
//! its own crate so the middleware never compiles the AWS SDK
//! (docs/design.md §2).
//!
//! It stores bytes: key `{session_id}/{file}` is the object
//! `s3://{bucket}/{prefix}/{session_id}/{file}`. Names, encodings and the
//! manifest are the middleware's `Archive`, the same as on a filesystem.
//! S3 has no append: the trait's default (read, put back longer) rewrites
//! `manifest.jsonl`, and the archive writes each events batch as its own
//! object (`events-000001.jsonl`, …) rather than grow `events.jsonl`.
//!
//! - Credentials come from the standard AWS provider chain (environment,
//!   shared profile, web identity, ECS, IMDS), never from configuration.
//! - `kms_key_id` set: every object is written with SSE-KMS under that key.
//! - Retries: the SDK's standard mode (exponential backoff with jitter) on
//!   throttling, 5xx and connection errors; what still fails goes to the
//!   manager's spool.

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{Region, RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ServerSideEncryption;
use compact_middleware::BoxFuture;
use compact_middleware::archive::{ArchiveError, StorageAdapter, check_key, check_prefix};
use compact_middleware::config::S3Settings;

/// Retry behaviour (the SDK's standard mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryOptions {
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// Backoff before the first retry; doubles (with jitter) up to `max_backoff`.
    pub initial_backoff: Duration,
    /// Longest backoff.
    pub max_backoff: Duration,
}

impl Default for RetryOptions {
    fn default() -> Self {
        RetryOptions {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// Archives to S3.
#[derive(Debug)]
pub struct S3Adapter {
    client: Client,
    bucket: String,
    prefix: String,
    kms_key_id: Option<String>,
}

fn backend(message: impl Into<String>) -> ArchiveError {
    ArchiveError::Backend {
        backend: "s3".into(),
        message: message.into(),
    }
}

impl S3Adapter {
    /// Builds a client from the standard AWS chain (credentials, and the
    /// region unless `settings.region` is set) and `settings`.
    pub async fn connect(settings: &S3Settings, retry: RetryOptions) -> Result<Self, ArchiveError> {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(r) = &settings.region {
            loader = loader.region(Region::new(r.clone()));
        }
        let sdk = loader.load().await;
        Self::from_sdk_config(&sdk, settings, retry)
    }

    /// Builds a client from an already loaded SDK configuration (for
    /// callers that share one, and for tests with static credentials).
    pub fn from_sdk_config(
        sdk: &aws_config::SdkConfig,
        settings: &S3Settings,
        retry: RetryOptions,
    ) -> Result<Self, ArchiveError> {
        let bucket = settings
            .bucket
            .clone()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| backend("storage.s3.bucket is not set"))?;
        let mut b = aws_sdk_s3::config::Builder::from(sdk).retry_config(
            RetryConfig::standard()
                .with_max_attempts(retry.max_attempts.max(1))
                .with_initial_backoff(retry.initial_backoff)
                .with_max_backoff(retry.max_backoff),
        );
        if let Some(r) = &settings.region {
            b = b.region(Region::new(r.clone()));
        }
        if let Some(url) = &settings.endpoint_url {
            // S3-compatible servers (MinIO, moto, R2…) generally want
            // path-style addressing and only the checksums S3 has always
            // required.
            b = b
                .endpoint_url(url)
                .force_path_style(true)
                .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
                .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
        }
        Ok(S3Adapter {
            client: Client::from_conf(b.build()),
            bucket,
            prefix: settings.prefix.trim_matches('/').to_string(),
            kms_key_id: settings.kms_key_id.clone(),
        })
    }

    /// The SDK client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// `{prefix}/` or empty.
    fn base(&self) -> String {
        if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        }
    }

    /// The object key of archive key (or listing prefix) `key`: `{prefix}/{key}`.
    pub fn object_key(&self, key: &str) -> String {
        format!("{}{key}", self.base())
    }

    fn url(&self, object_key: &str) -> String {
        format!("s3://{}/{object_key}", self.bucket)
    }

    async fn put_object(&self, object_key: &str, bytes: Vec<u8>) -> Result<(), ArchiveError> {
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(object_key)
            .content_type(content_type(object_key))
            .body(ByteStream::from(bytes));
        if let Some(k) = &self.kms_key_id {
            req = req
                .server_side_encryption(ServerSideEncryption::AwsKms)
                .ssekms_key_id(k);
        }
        req.send().await.map(|_| ()).map_err(|e| {
            backend(format!(
                "put {}: {}",
                self.url(object_key),
                DisplayErrorContext(&e)
            ))
        })
    }

    async fn get_object(&self, object_key: &str) -> Result<Vec<u8>, ArchiveError> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(object_key)
            .send()
            .await
            .map_err(|e| {
                if e.as_service_error().is_some_and(|s| s.is_no_such_key()) {
                    ArchiveError::NotFound(self.url(object_key))
                } else {
                    backend(format!(
                        "get {}: {}",
                        self.url(object_key),
                        DisplayErrorContext(&e)
                    ))
                }
            })?;
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| backend(format!("read {}: {e}", self.url(object_key))))?;
        Ok(body.into_bytes().to_vec())
    }

    /// One level below the object key prefix `prefix`: the names, relative
    /// to `prefix`, of its objects and of its common prefixes (those with
    /// their trailing `/`).
    async fn list_level(&self, prefix: &str) -> Result<Vec<String>, ArchiveError> {
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut req = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .delimiter("/");
            if let Some(t) = &token {
                req = req.continuation_token(t);
            }
            let out = req.send().await.map_err(|e| {
                backend(format!(
                    "list s3://{}/{prefix}: {}",
                    self.bucket,
                    DisplayErrorContext(&e)
                ))
            })?;
            names.extend(
                out.contents()
                    .iter()
                    .filter_map(|o| o.key())
                    .chain(out.common_prefixes().iter().filter_map(|p| p.prefix()))
                    .filter_map(|k| k.strip_prefix(prefix))
                    // A "folder" marker object is the prefix itself.
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned),
            );
            match out.next_continuation_token() {
                Some(t) if out.is_truncated() == Some(true) => token = Some(t.to_owned()),
                _ => break,
            }
        }
        Ok(names)
    }
}

/// The content type S3 serves an archive object with.
fn content_type(object_key: &str) -> &'static str {
    if object_key.ends_with(".jsonl") {
        "application/x-ndjson"
    } else if object_key.ends_with(".json") {
        "application/json"
    } else {
        "application/octet-stream"
    }
}

/// Keys are checked here too, not only by the archive that builds them:
/// nothing unchecked becomes an object key.
impl StorageAdapter for S3Adapter {
    fn kind(&self) -> &str {
        "s3"
    }

    fn root(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.base())
    }

    fn location(&self, key: &str) -> String {
        self.url(&self.object_key(key))
    }

    fn put<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, Result<(), ArchiveError>> {
        Box::pin(async move {
            check_key(key)?;
            self.put_object(&self.object_key(key), bytes).await
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Vec<u8>, ArchiveError>> {
        Box::pin(async move {
            check_key(key)?;
            self.get_object(&self.object_key(key)).await
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>, ArchiveError>> {
        Box::pin(async move {
            check_prefix(prefix)?;
            let mut out: Vec<String> = self
                .list_level(&self.object_key(prefix))
                .await?
                .into_iter()
                .map(|name| format!("{prefix}{name}"))
                .collect();
            out.sort();
            Ok(out)
        })
    }
}
