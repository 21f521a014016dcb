//! TLS to PostgreSQL: `sslmode=require` in the store's URL (libpq's
//! `verify-ca` and `verify-full` mean the same here) makes the connection
//! encrypted, and the server's certificate is always verified, name
//! included: against the system's roots, or only against the CAs of
//! `sslrootcert=FILE` (PEM) when the URL names one. Without it the
//! connection is plain (`prefer`, the driver's default, is taken as
//! `disable`: no unverified encryption is attempted).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::postgres::ConnectError;

/// The URL as the driver reads it, and what wfhost reads of it itself.
pub(crate) struct Split {
    pub url: String,
    /// TLS was asked for.
    pub require: bool,
    pub root_cert: Option<PathBuf>,
}

/// Take `sslrootcert` out of a `postgres://` URL (the driver does not know
/// it) and map libpq's verifying `sslmode`s onto `require`.
pub(crate) fn split(url: &str) -> Split {
    let Some((base, query)) = url.split_once('?') else {
        return Split {
            url: url.to_string(),
            require: false,
            root_cert: None,
        };
    };
    let (mut kept, mut require, mut root_cert) = (Vec::new(), false, None);
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslrootcert", file)) => root_cert = Some(PathBuf::from(file)),
            Some(("sslmode", "require" | "verify-ca" | "verify-full")) => {
                require = true;
                kept.push("sslmode=require".to_string());
            }
            Some(("sslmode", "prefer")) => kept.push("sslmode=disable".to_string()),
            _ => kept.push(pair.to_string()),
        }
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Split {
        url,
        require,
        root_cert,
    }
}

/// The connector that verifies the server against `root_cert`'s CAs, or
/// the system's.
pub(crate) fn connector(root_cert: Option<&PathBuf>) -> Result<MakeRustlsConnect, ConnectError> {
    let mut roots = rustls::RootCertStore::empty();
    match root_cert {
        Some(file) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
                .and_then(|certs| certs.collect())
                .map_err(|e| {
                    ConnectError(format!(
                        "sslrootcert {}: not a PEM certificate file ({e})",
                        file.display()
                    ))
                })?;
            if certs.is_empty() {
                return Err(ConnectError(format!(
                    "sslrootcert {}: no certificate in it",
                    file.display()
                )));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| ConnectError(format!("sslrootcert {}: {e}", file.display())))?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConnectError(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_certificate_is_taken_out_and_verifying_modes_mean_require() {
        let s = split(
            "postgres://u:p@db/runs?sslmode=verify-full&sslrootcert=/etc/ca.pem&application_name=x",
        );
        assert_eq!(
            s.url,
            "postgres://u:p@db/runs?sslmode=require&application_name=x"
        );
        assert!(s.require);
        assert_eq!(s.root_cert, Some(PathBuf::from("/etc/ca.pem")));
        let plain = split("postgres://u@db/runs");
        assert!(!plain.require && plain.root_cert.is_none());
        assert_eq!(
            split("postgres://u@db/r?sslmode=prefer").url,
            "postgres://u@db/r?sslmode=disable"
        );
    }
}
