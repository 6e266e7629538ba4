//! TLS for the PostgreSQL stores (session records, memory), with rustls on
//! ring (no C toolchain, as for the rest of the workspace's HTTPS).
//!
//! The settings are libpq's, read from the URL (`?sslmode=…&sslrootcert=…`)
//! so that a URL that works with `psql` works here:
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `allow`, `prefer` (default) | when the server offers it | not checked |
//! | `require` | always | not checked, unless `sslrootcert` is given: then as `verify-ca` |
//! | `verify-ca` | always | chain checked against the roots |
//! | `verify-full` | always | chain and host name checked |
//!
//! The roots are `sslrootcert`: a PEM file of CA certificates, or `system`
//! for the public web roots that ship with the binary (also the default of
//! `verify-ca` and `verify-full` without `sslrootcert`). tokio-postgres
//! itself only knows `disable`, `prefer` and `require`, so the URL it parses
//! is given those.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> Result<Self, String> {
        Ok(match value {
            "disable" => Mode::Disable,
            "allow" | "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode {other:?}: expected disable, allow, prefer, require, verify-ca or verify-full"
                ));
            }
        })
    }

    /// What tokio-postgres is told: whether TLS is tried and required.
    pub(crate) fn ssl_mode(self) -> SslMode {
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }
}

/// The TLS settings of a URL, and the URL without the keys tokio-postgres
/// does not know.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) mode: Mode,
    pub(crate) root_cert: Option<String>,
    /// The URL to hand to tokio-postgres (`sslmode` mapped, `sslrootcert` removed).
    pub(crate) url: String,
}

/// Reads `sslmode` and `sslrootcert` from a `postgres://` URL's query or a
/// `key=value` connection string.
pub(crate) fn settings(url: &str) -> Result<Settings, String> {
    let mut mode = Mode::Prefer;
    let mut root_cert = None;
    let mut take = |key: &str, value: &str| -> Result<bool, String> {
        match key {
            "sslmode" => {
                mode = Mode::parse(value)?;
                Ok(true)
            }
            "sslrootcert" => {
                root_cert = Some(percent_decode(value));
                Ok(true)
            }
            _ => Ok(false),
        }
    };
    let rest = if url.contains("://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    if !take(k, v)? {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() {
                    base.to_owned()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let mut kept = Vec::new();
        for pair in url.split_whitespace() {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if !take(k.trim(), v.trim().trim_matches('\''))? {
                kept.push(pair);
            }
        }
        kept.join(" ")
    };
    Ok(Settings {
        mode,
        root_cert,
        url: rest,
    })
}

/// `%XX` escapes of a URL query value (a path with spaces).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The TLS connector for `settings`; `None` for `sslmode=disable`.
pub(crate) fn connector(settings: &Settings) -> Result<Option<MakeRustls>, String> {
    if settings.mode == Mode::Disable {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    // libpq checks nothing under prefer/require unless given roots.
    let verify = match (settings.mode, &settings.root_cert) {
        (Mode::Prefer, _) | (Mode::Require, None) => None,
        (Mode::Require, Some(_)) | (Mode::VerifyCa, _) => Some(false),
        (Mode::VerifyFull, _) => Some(true),
        (Mode::Disable, _) => return Ok(None),
    };
    let config = match verify {
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
            .with_no_client_auth(),
        Some(check_name) => {
            let roots = Arc::new(roots(settings.root_cert.as_deref())?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| format!("TLS roots: {e}"))?;
            if check_name {
                builder.with_webpki_verifier(webpki).with_no_client_auth()
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
                    .with_no_client_auth()
            }
        }
    };
    Ok(Some(MakeRustls(Arc::new(config))))
}

/// The roots: a PEM file, or the bundled public roots (`system` or none).
fn roots(path: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match path {
        None | Some("system") => {
            store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("sslrootcert {path}: {e}"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("sslrootcert {path}: {e}"))?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("sslrootcert {path}: no CA certificate in the file"));
            }
        }
    }
    Ok(store)
}

/// `verify-ca`: the chain must lead to a root; the host name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without roots, as libpq: encrypted, the
/// certificate taken as it comes (the handshake's signatures still checked).
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// tokio-postgres's TLS connector, on rustls.
#[derive(Clone)]
pub(crate) struct MakeRustls(Arc<ClientConfig>);

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnect> {
        let name = ServerName::try_from(domain.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(RustlsConnect {
            config: self.0.clone(),
            name,
        })
    }
}

/// One connection's TLS handshake.
pub(crate) struct RustlsConnect {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let stream = tokio_rustls::TlsConnector::from(self.config)
                .connect(self.name, stream)
                .await?;
            Ok(RustlsStream(Box::new(stream)))
        })
    }
}

/// A TLS stream to the server.
pub(crate) struct RustlsStream<S>(Box<tokio_rustls::client::TlsStream<S>>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for RustlsStream<S> {
    /// No SCRAM channel binding: SCRAM without it is what libpq's default
    /// (`channel_binding=prefer`) falls back to as well.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_out_of_the_url() {
        let s = settings(
            "postgres://u:p@db:5432/app?sslmode=verify-full&sslrootcert=/etc/ca%20dir/ca.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(s.mode, Mode::VerifyFull);
        assert_eq!(s.root_cert.as_deref(), Some("/etc/ca dir/ca.pem"));
        assert_eq!(s.url, "postgres://u:p@db:5432/app?application_name=x");
        assert_eq!(s.mode.ssl_mode(), SslMode::Require);

        let s = settings("postgres://db/app").unwrap();
        assert_eq!(
            (s.mode, s.url.as_str()),
            (Mode::Prefer, "postgres://db/app")
        );
        let s = settings("host=db sslmode=disable user=u").unwrap();
        assert_eq!((s.mode, s.url.as_str()), (Mode::Disable, "host=db user=u"));
        assert!(settings("postgres://db/app?sslmode=sometimes").is_err());
    }

    #[test]
    fn roots_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let s = settings(&format!(
            "postgres://db/app?sslmode=verify-ca&sslrootcert={}",
            empty.display()
        ))
        .unwrap();
        let err = connector(&s).err().unwrap();
        assert!(err.contains("no CA certificate"), "{err}");
        let missing =
            settings("postgres://db/app?sslmode=verify-ca&sslrootcert=/nonexistent.pem").unwrap();
        assert!(
            connector(&missing)
                .err()
                .unwrap()
                .contains("/nonexistent.pem")
        );
        // The bundled roots, and no verification at all, build.
        assert!(
            connector(&settings("postgres://db/app?sslmode=verify-full").unwrap())
                .unwrap()
                .is_some()
        );
        assert!(
            connector(&settings("postgres://db/app").unwrap())
                .unwrap()
                .is_some()
        );
        assert!(
            connector(&settings("postgres://db/app?sslmode=disable").unwrap())
                .unwrap()
                .is_none()
        );
    }
}
