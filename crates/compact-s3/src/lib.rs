//! S3 (and S3-compatible) storage for the compact archive: an
//! implementation of [`compact_middleware::archive::StorageAdapter`] on
//! `aws-sdk-s3`. Kept in its own crate so the middleware never compiles the
//! AWS SDK (DESIGN §2).
//!
//! - Objects: `s3://{bucket}/{prefix}/{session_id}/{file}` with the same
//!   names and bytes as the filesystem archive, except that `events.jsonl`
//!   becomes numbered objects `events-000001.jsonl`, … (S3 has no append).
//! - `manifest.jsonl` is rewritten whole on every write (one writer per
//!   session, see the trait's contract).
//! - Credentials come from the standard AWS provider chain (environment,
//!   shared profile, web identity, ECS, IMDS), never from configuration.
//! - `kms_key_id` set: every object is written with SSE-KMS under that key.
//! - Retries: the SDK's standard mode (exponential backoff with jitter) on
//!   throttling, 5xx and connection errors; what still fails goes to the
//!   manager's spool.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{Region, RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ServerSideEncryption;
use compact_middleware::BoxFuture;
use compact_middleware::archive::layout::{self, FileKind, MANIFEST_FILE};
use compact_middleware::archive::manifest::{self, Entry};
use compact_middleware::archive::{ArchiveError, SessionId, StorageAdapter, Stored};
use compact_middleware::config::S3Settings;
use serde_json::Value;

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
    /// Next event object number per session, loaded from a listing on first use.
    event_seq: Mutex<HashMap<String, u64>>,
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
            event_seq: Mutex::new(HashMap::new()),
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

    /// `{prefix}/{session_id}/`.
    fn session_prefix(&self, session: &SessionId) -> String {
        format!("{}{}/", self.base(), session.as_str())
    }

    /// The object key of one file.
    pub fn key(&self, session: &SessionId, name: &str) -> String {
        format!("{}{name}", self.session_prefix(session))
    }

    fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }

    async fn put(&self, key: &str, bytes: Vec<u8>, content_type: &str) -> Result<(), ArchiveError> {
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(ByteStream::from(bytes));
        if let Some(k) = &self.kms_key_id {
            req = req
                .server_side_encryption(ServerSideEncryption::AwsKms)
                .ssekms_key_id(k);
        }
        req.send().await.map(|_| ()).map_err(|e| {
            backend(format!(
                "put {}: {}",
                self.url(key),
                DisplayErrorContext(&e)
            ))
        })
    }

    async fn get(&self, key: &str) -> Result<Vec<u8>, ArchiveError> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| {
                if e.as_service_error().is_some_and(|s| s.is_no_such_key()) {
                    ArchiveError::NotFound(self.url(key))
                } else {
                    backend(format!(
                        "get {}: {}",
                        self.url(key),
                        DisplayErrorContext(&e)
                    ))
                }
            })?;
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| backend(format!("read {}: {e}", self.url(key))))?;
        Ok(body.into_bytes().to_vec())
    }

    /// Keys (relative to `prefix`) and common prefixes under `prefix`.
    async fn list(
        &self,
        prefix: &str,
        delimiter: bool,
    ) -> Result<(Vec<String>, Vec<String>), ArchiveError> {
        let mut keys = Vec::new();
        let mut prefixes = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut req = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix);
            if delimiter {
                req = req.delimiter("/");
            }
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
            keys.extend(
                out.contents()
                    .iter()
                    .filter_map(|o| o.key())
                    .filter_map(|k| k.strip_prefix(prefix))
                    .map(str::to_owned),
            );
            prefixes.extend(
                out.common_prefixes()
                    .iter()
                    .filter_map(|p| p.prefix())
                    .filter_map(|p| p.strip_prefix(prefix))
                    .map(|p| p.trim_end_matches('/').to_owned()),
            );
            match out.next_continuation_token() {
                Some(t) if out.is_truncated() == Some(true) => token = Some(t.to_owned()),
                _ => break,
            }
        }
        Ok((keys, prefixes))
    }

    /// Appends an entry for `bytes` in `name` to the session's manifest.
    async fn record(
        &self,
        session: &SessionId,
        name: &str,
        bytes: &[u8],
    ) -> Result<String, ArchiveError> {
        let key = self.key(session, MANIFEST_FILE);
        let mut existing = match self.get(&key).await {
            Ok(b) => b,
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(e),
        };
        let entries = manifest::parse(&existing).map_err(|e| ArchiveError::Manifest {
            session: session.to_string(),
            reason: e.to_string(),
        })?;
        let entry = Entry::next(entries.last(), name, 0, bytes);
        existing.extend_from_slice(entry.to_line().as_bytes());
        self.put(&key, existing, "application/x-ndjson").await?;
        Ok(entry.hash)
    }

    async fn save_whole(
        &self,
        session: &SessionId,
        name: String,
        bytes: Vec<u8>,
        content_type: &str,
    ) -> Result<Stored, ArchiveError> {
        let key = self.key(session, &name);
        let len = bytes.len() as u64;
        let head = {
            // The manifest records the bytes, so hash before handing them over.
            let copy = bytes.clone();
            self.put(&key, bytes, content_type).await?;
            self.record(session, &name, &copy).await?
        };
        Ok(Stored {
            location: self.url(&key),
            name,
            bytes: len,
            manifest_head: head,
        })
    }

    async fn next_event_seq(&self, session: &SessionId) -> Result<u64, ArchiveError> {
        let cached = self
            .event_seq
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(session.as_str())
            .copied();
        let next = match cached {
            Some(n) => n,
            None => {
                let (keys, _) = self.list(&self.session_prefix(session), false).await?;
                keys.iter()
                    .filter_map(|k| match FileKind::parse(k) {
                        Some(FileKind::EventObject(n)) => Some(n),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0)
                    + 1
            }
        };
        Ok(next)
    }
}

impl StorageAdapter for S3Adapter {
    fn kind(&self) -> &str {
        "s3"
    }

    fn root(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.base())
    }

    fn save_transcript<'a>(
        &'a self,
        session: &'a SessionId,
        step: u32,
        messages: &'a [Value],
    ) -> BoxFuture<'a, Result<Stored, ArchiveError>> {
        Box::pin(async move {
            let bytes = layout::encode_lines(messages)?;
            self.save_whole(
                session,
                layout::transcript_name(step),
                bytes,
                "application/x-ndjson",
            )
            .await
        })
    }

    fn save_summary<'a>(
        &'a self,
        session: &'a SessionId,
        step: u32,
        summary: &'a Value,
    ) -> BoxFuture<'a, Result<Stored, ArchiveError>> {
        Box::pin(async move {
            let bytes = layout::encode_summary(summary)?;
            self.save_whole(
                session,
                layout::summary_name(step),
                bytes,
                "application/json",
            )
            .await
        })
    }

    fn save_event<'a>(
        &'a self,
        session: &'a SessionId,
        events: &'a [Value],
    ) -> BoxFuture<'a, Result<Stored, ArchiveError>> {
        Box::pin(async move {
            let bytes = layout::encode_lines(events)?;
            let seq = self.next_event_seq(session).await?;
            let stored = self
                .save_whole(
                    session,
                    layout::event_object_name(seq),
                    bytes,
                    "application/x-ndjson",
                )
                .await?;
            // Only advance once the object and its manifest entry are in:
            // a failed attempt is retried under the same number.
            self.event_seq
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(session.as_str().to_string(), seq + 1);
            Ok(stored)
        })
    }

    fn list_sessions(&self) -> BoxFuture<'_, Result<Vec<String>, ArchiveError>> {
        Box::pin(async move {
            let (_, mut prefixes) = self.list(&self.base(), true).await?;
            prefixes.retain(|p| SessionId::parse(p).is_ok());
            prefixes.sort();
            Ok(prefixes)
        })
    }

    fn list_files<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> BoxFuture<'a, Result<Vec<String>, ArchiveError>> {
        Box::pin(async move {
            let (mut keys, _) = self.list(&self.session_prefix(session), true).await?;
            keys.sort();
            Ok(keys)
        })
    }

    fn read_file<'a>(
        &'a self,
        session: &'a SessionId,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Vec<u8>, ArchiveError>> {
        Box::pin(async move {
            let name = layout::check_name(name)?.name();
            self.get(&self.key(session, &name)).await
        })
    }
}
