//! HTTPS on the server's listener (`wfhost serve --tls-cert --tls-key`):
//! the certificate chain and key, and, with `--tls-client-ca`, the CA
//! whose certificates every client must present. rustls with the ring
//! provider; the files are read once, before the server listens.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;
use wfhost_protocol::pem;

/// The files of `--tls-cert`, `--tls-key` and `--tls-client-ca`.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain, the server's own first (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// When given, every client must present a certificate this CA (PEM,
    /// one or more) signed.
    pub client_ca: Option<PathBuf>,
}

/// What the listener accepts TLS with.
#[derive(Clone)]
pub struct Tls {
    pub(crate) acceptor: TlsAcceptor,
    /// Client certificates are required.
    pub client_certificates: bool,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("client_certificates", &self.client_certificates)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Tls {
    /// Read the files and check them: one line naming the file and what is
    /// wrong (missing, not PEM, no certificate or key, a key that does not
    /// match the certificate, a CA rustls cannot use).
    pub fn load(files: &TlsFiles) -> Result<Tls, String> {
        let chain = pem::certificates(&files.cert).map_err(|e| format!("--tls-cert: {e}"))?;
        let key = pem::private_key(&files.key).map_err(|e| format!("--tls-key: {e}"))?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match &files.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => builder.with_client_cert_verifier(client_verifier(ca)?),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| key_refused(files, e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            client_certificates: files.client_ca.is_some(),
        })
    }
}

fn client_verifier(
    ca: &std::path::Path,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in pem::certificates(ca).map_err(|e| format!("--tls-client-ca: {e}"))? {
        roots.add(certificate).map_err(|e| {
            format!(
                "--tls-client-ca: {} holds a certificate that is not a usable CA: {e}",
                ca.display()
            )
        })?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| format!("--tls-client-ca: {}: {e}", ca.display()))
}

fn key_refused(files: &TlsFiles, e: rustls::Error) -> String {
    match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => format!(
            "--tls-key: the key in {} does not match the certificate in {}",
            files.key.display(),
            files.cert.display()
        ),
        e => format!(
            "--tls-key: {} cannot be used with the certificate in {}: {e}",
            files.key.display(),
            files.cert.display()
        ),
    }
}
