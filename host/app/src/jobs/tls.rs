//! The client's TLS, for `https://` servers: which CAs are trusted (the
//! system's, or only those of `--ca`), the server's name checked, and the
//! client certificate (`--client-cert`, `--client-key`) shown to a server
//! that asks for one. rustls with the ring provider.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use wfhost_protocol::pem;

/// The files of `--ca`, `--client-cert` and `--client-key`.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    /// The CAs trusted instead of the system's (PEM, one or more).
    pub ca: Option<PathBuf>,
    /// The certificate chain shown to the server (PEM).
    pub client_cert: Option<PathBuf>,
    /// Its private key (PEM).
    pub client_key: Option<PathBuf>,
}

impl TlsFiles {
    /// Whether any file is given.
    pub fn any(&self) -> bool {
        self.ca.is_some() || self.client_cert.is_some() || self.client_key.is_some()
    }
}

/// How an `https://` server is reached.
#[derive(Clone)]
pub struct ClientTls {
    pub(crate) connector: tokio_rustls::TlsConnector,
    /// The name the server's certificate must be valid for.
    pub(crate) name: ServerName<'static>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// TLS to `host` (a DNS name or an IP address) with `files`.
    pub fn load(host: &str, files: &TlsFiles) -> Result<ClientTls, String> {
        match (&files.client_cert, &files.client_key) {
            (Some(_), None) => return Err("--client-cert needs --client-key".into()),
            (None, Some(_)) => return Err("--client-key needs --client-cert".into()),
            _ => {}
        }
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| format!("--server: `{host}` is not a host name TLS can check"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots(files)?);
        let mut config = match (&files.client_cert, &files.client_key) {
            (Some(cert), Some(key)) => {
                let chain = pem::certificates(cert).map_err(|e| format!("--client-cert: {e}"))?;
                let key_der = pem::private_key(key).map_err(|e| format!("--client-key: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| key_refused(cert, key, e))?
            }
            _ => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ClientTls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            name,
        })
    }
}

/// The CAs of `--ca`, else the system's.
fn roots(files: &TlsFiles) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &files.ca {
        for certificate in pem::certificates(ca).map_err(|e| format!("--ca: {e}"))? {
            roots.add(certificate).map_err(|e| {
                format!(
                    "--ca: {} holds a certificate that is not a usable CA: {e}",
                    ca.display()
                )
            })?;
        }
        return Ok(roots);
    }
    let system = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(system.certs);
    if added == 0 {
        return Err(
            "no CA certificates found on this system to check the server's: give --ca FILE".into(),
        );
    }
    Ok(roots)
}

fn key_refused(cert: &std::path::Path, key: &std::path::Path, e: rustls::Error) -> String {
    match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => format!(
            "--client-key: the key in {} does not match the certificate in {}",
            key.display(),
            cert.display()
        ),
        e => format!(
            "--client-key: {} cannot be used with the certificate in {}: {e}",
            key.display(),
            cert.display()
        ),
    }
}

/// The rustls error somewhere in `e`'s chain (an I/O error's inner one
/// included), if any.
pub(crate) fn rustls_cause<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e rustls::Error> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(inner);
        }
        next = e.source();
    }
    None
}

/// What a TLS failure means for the one who runs the client: one line,
/// naming the option that would fix it. None when it is not one of those
/// (a broken connection, to be tried again).
pub(crate) fn refusal(authority: &str, e: &rustls::Error) -> Option<String> {
    use rustls::{AlertDescription as Alert, CertificateError as Cert, Error};
    match e {
        Error::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
            Some(format!(
                "the certificate of the server at {authority} is not valid for that name ({e}): reach it by a name its certificate holds"
            ))
        }
        Error::InvalidCertificate(_) => Some(format!(
            "the certificate of the server at {authority} is not trusted ({e}): give the CA that signed it with --ca FILE"
        )),
        Error::AlertReceived(
            Alert::CertificateRequired
            | Alert::BadCertificate
            | Alert::UnknownCA
            | Alert::UnsupportedCertificate
            | Alert::CertificateExpired
            | Alert::CertificateUnknown
            | Alert::AccessDenied,
        ) => Some(format!(
            "the server at {authority} refused this client's certificate ({e}): give --client-cert and --client-key with one its --tls-client-ca signed"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_refused_with_their_option() {
        let half = |cert: bool| TlsFiles {
            ca: None,
            client_cert: cert.then(|| "c.pem".into()),
            client_key: (!cert).then(|| "k.pem".into()),
        };
        let err = ClientTls::load("localhost", &half(true)).unwrap_err();
        assert_eq!(err, "--client-cert needs --client-key");
        let err = ClientTls::load("localhost", &half(false)).unwrap_err();
        assert_eq!(err, "--client-key needs --client-cert");
        let missing = TlsFiles {
            ca: Some("/nowhere/ca.pem".into()),
            ..TlsFiles::default()
        };
        let err = ClientTls::load("localhost", &missing).unwrap_err();
        assert!(
            err.starts_with("--ca: cannot read /nowhere/ca.pem"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let garbled = TlsFiles {
            ca: Some(ca),
            ..TlsFiles::default()
        };
        // "AAAA" is no certificate webpki can use as an anchor.
        let err = ClientTls::load("localhost", &garbled).unwrap_err();
        assert!(err.contains("not a usable CA"), "{err}");
    }

    #[test]
    fn refusals_name_the_option_that_fixes_them() {
        use rustls::{AlertDescription, CertificateError, Error};
        let untrusted = Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let line = refusal("h:1", &untrusted).unwrap();
        assert!(
            line.contains("not trusted") && line.contains("--ca"),
            "{line}"
        );
        let named = Error::InvalidCertificate(CertificateError::NotValidForName);
        assert!(
            refusal("h:1", &named)
                .unwrap()
                .contains("not valid for that name")
        );
        let required = Error::AlertReceived(AlertDescription::CertificateRequired);
        assert!(refusal("h:1", &required).unwrap().contains("--client-cert"));
        assert!(refusal("h:1", &Error::AlertReceived(AlertDescription::CloseNotify)).is_none());
        let io = std::io::Error::other(untrusted.clone());
        assert_eq!(rustls_cause(&io), Some(&untrusted));
    }
}
