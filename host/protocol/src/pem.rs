//! The PEM files of the API's TLS, read alike by `wfhost serve` and its
//! clients: a certificate chain (or a CA bundle) and a private key. Each
//! error names the file and what is wrong with it.

use std::fmt;
use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The largest PEM file read: a CA bundle of a few hundred certificates.
const MAX_PEM_BYTES: u64 = 4 << 20;

/// Why a PEM file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemError {
    /// Missing, or not readable.
    Unreadable { file: PathBuf, why: String },
    /// No PEM section at all, or a broken one.
    NotPem { file: PathBuf, why: String },
    /// PEM, but no `CERTIFICATE` section in it.
    NoCertificate { file: PathBuf },
    /// PEM, but no private key section in it.
    NoKey { file: PathBuf },
}

impl fmt::Display for PemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PemError::Unreadable { file, why } => {
                write!(f, "cannot read {}: {why}", file.display())
            }
            PemError::NotPem { file, why } => write!(f, "{} is not PEM: {why}", file.display()),
            PemError::NoCertificate { file } => write!(
                f,
                "{} holds no certificate (a PEM `BEGIN CERTIFICATE` section)",
                file.display()
            ),
            PemError::NoKey { file } => write!(
                f,
                "{} holds no private key (a PEM `BEGIN PRIVATE KEY`, `BEGIN RSA PRIVATE KEY` or `BEGIN EC PRIVATE KEY` section)",
                file.display()
            ),
        }
    }
}

impl std::error::Error for PemError {}

/// Every certificate in `file`, in order (a chain: the leaf first; or a
/// CA bundle); at least one.
pub fn certificates(file: &Path) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let bytes = read(file)?;
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| not_pem(file, e))?;
    if certificates.is_empty() {
        return Err(PemError::NoCertificate { file: file.into() });
    }
    Ok(certificates)
}

/// The first private key in `file` (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(file: &Path) -> Result<PrivateKeyDer<'static>, PemError> {
    let bytes = read(file)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => PemError::NoKey { file: file.into() },
        e => not_pem(file, e),
    })
}

/// The file's bytes, refused when it holds no PEM section at all.
fn read(file: &Path) -> Result<Vec<u8>, PemError> {
    use std::io::Read as _;
    let unreadable = |e: std::io::Error| PemError::Unreadable {
        file: file.into(),
        why: e.to_string(),
    };
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .map_err(unreadable)?
        .take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(PemError::NotPem {
            file: file.into(),
            why: format!("larger than {} MiB", MAX_PEM_BYTES >> 20),
        });
    }
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(PemError::NotPem {
            file: file.into(),
            why: "no `-----BEGIN` line".into(),
        });
    }
    Ok(bytes)
}

fn not_pem(file: &Path, e: rustls_pki_types::pem::Error) -> PemError {
    PemError::NotPem {
        file: file.into(),
        why: format!("{e:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A self-signed P-256 certificate and its key (made once with openssl;
    // test material, trusted nowhere).
    const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBfTCCASOgAwIBAgIUXGkRC3lCx8HB7cLrFZs8R2mIhR8wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MB4XDTI0MDEwMTAwMDAwMFoXDTM0MDEwMTAw
MDAwMFowFDESMBAGA1UEAwwJbG9jYWxob3N0MFkwEwYHKoZIzj0CAQYIKoZIzj0D
AQcDQgAE
-----END CERTIFICATE-----
";

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn each_bad_file_is_named_with_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = certificates(&missing).unwrap_err();
        assert!(matches!(err, PemError::Unreadable { .. }), "{err}");
        assert!(err.to_string().contains("missing.pem"), "{err}");

        let text = write(dir.path(), "notes.txt", "not a certificate\n");
        let err = certificates(&text).unwrap_err();
        assert!(matches!(err, PemError::NotPem { .. }), "{err}");
        assert!(err.to_string().contains("notes.txt is not PEM"), "{err}");

        let key_only = write(
            dir.path(),
            "key.pem",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        );
        let err = certificates(&key_only).unwrap_err();
        assert_eq!(
            err,
            PemError::NoCertificate {
                file: key_only.clone()
            }
        );

        let cert_only = write(dir.path(), "cert.pem", CERT);
        let err = private_key(&cert_only).unwrap_err();
        assert_eq!(err, PemError::NoKey { file: cert_only });
        assert!(err.to_string().contains("holds no private key"), "{err}");

        let broken = write(
            dir.path(),
            "broken.pem",
            "-----BEGIN CERTIFICATE-----\nAAAA\n",
        );
        let err = certificates(&broken).unwrap_err();
        assert!(matches!(err, PemError::NotPem { .. }), "{err}");
    }

    #[test]
    fn a_chain_and_a_key_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let chain = write(dir.path(), "chain.pem", &format!("{CERT}{CERT}"));
        assert_eq!(certificates(&chain).unwrap().len(), 2);
        let key = write(
            dir.path(),
            "key.pem",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        );
        assert!(matches!(
            private_key(&key).unwrap(),
            PrivateKeyDer::Pkcs8(_)
        ));
    }
}
