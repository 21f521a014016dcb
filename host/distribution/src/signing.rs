//! Package signatures: Ed25519 over `{manifestDigest, name, version}`.
//!
//! A signature travels as an OCI artifact whose `subject` is the package
//! manifest (an OCI 1.1 referrer): an empty config, one layer per signer
//! holding the signed payload, the signature and the signer's key in the
//! layer's annotations. Keys are PKCS#8 (private) and SPKI (public) PEM
//! files, as OpenSSL writes them; a signer is named by its key,
//! `ed25519:<base64 of the 32 public key bytes>`.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde_json::json;

use crate::digest::Blob;
use crate::package::{Descriptor, ImageManifest, MANIFEST_MEDIA_TYPE};

/// The artifact type (and payload media type) of a signature.
pub const SIGNATURE_ARTIFACT_TYPE: &str = "application/vnd.wfhost.plugin.signature.v1+json";
pub const SIGNATURE_ANNOTATION: &str = "dev.wfhost.signature";
pub const SIGNER_ANNOTATION: &str = "dev.wfhost.signer";
/// The OCI empty descriptor's media type and content (`{}`).
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
pub const EMPTY_CONTENT: &[u8] = b"{}";

/// A signer's name: `ed25519:` and the base64 public key.
pub fn signer_id(key: &VerifyingKey) -> String {
    format!("ed25519:{}", STANDARD.encode(key.as_bytes()))
}

/// Parse a signer id, a public key PEM text, or the path of a PEM file.
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, String> {
    if let Some(b64) = text.trim().strip_prefix("ed25519:") {
        let bytes = STANDARD
            .decode(b64)
            .map_err(|e| format!("`{text}` is not a key: its base64 is invalid: {e}"))?;
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|_| format!("`{text}` is not a key: an Ed25519 key is 32 bytes"))?;
        return VerifyingKey::from_bytes(&bytes)
            .map_err(|e| format!("`{text}` is not a valid Ed25519 key: {e}"));
    }
    VerifyingKey::from_public_key_pem(text.trim())
        .map_err(|e| format!("not an Ed25519 public key (SPKI PEM or `ed25519:<base64>`): {e}"))
}

/// Read a public key from a file or take it as text (`ed25519:…`).
pub fn read_public_key(arg: &str) -> Result<VerifyingKey, String> {
    if arg.starts_with("ed25519:") {
        return parse_public_key(arg);
    }
    let text = std::fs::read_to_string(arg).map_err(|e| format!("{arg}: {e}"))?;
    parse_public_key(&text).map_err(|e| format!("{arg}: {e}"))
}

/// Read a PKCS#8 PEM private key.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    SigningKey::from_pkcs8_pem(&text).map_err(|e| {
        format!(
            "{}: not an Ed25519 private key (PKCS#8 PEM): {e}",
            path.display()
        )
    })
}

/// A new key pair as (private PKCS#8 PEM, public SPKI PEM).
pub fn generate() -> Result<(SigningKey, String, String), String> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| format!("no randomness for a key: {e}"))?;
    let key = SigningKey::from_bytes(&seed);
    let private = key
        .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map_err(|e| format!("cannot encode the key: {e}"))?;
    let public = key
        .verifying_key()
        .to_public_key_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map_err(|e| format!("cannot encode the key: {e}"))?;
    Ok((key, private.to_string(), public))
}

/// The signed bytes: `{"manifestDigest":…,"name":…,"version":…}`.
pub fn payload(manifest_digest: &str, name: &str, version: &str) -> Vec<u8> {
    let value = json!({"manifestDigest": manifest_digest, "name": name, "version": version});
    serde_json::to_vec(&value).expect("a value serializes")
}

/// One signer's signature over a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureEntry {
    pub signer: String,
    /// base64 of the 64 signature bytes.
    pub signature: String,
}

pub fn sign(key: &SigningKey, payload: &[u8]) -> SignatureEntry {
    SignatureEntry {
        signer: signer_id(&key.verifying_key()),
        signature: STANDARD.encode(key.sign(payload).to_bytes()),
    }
}

/// Check `entry` over `payload` (strict Ed25519 verification).
pub fn verify(entry: &SignatureEntry, payload: &[u8]) -> Result<(), String> {
    let key = parse_public_key(&entry.signer)?;
    let bytes = STANDARD
        .decode(&entry.signature)
        .map_err(|_| "the signature is not base64".to_string())?;
    let bytes: [u8; 64] = bytes
        .try_into()
        .map_err(|_| "the signature is not 64 bytes".to_string())?;
    key.verify_strict(payload, &Signature::from_bytes(&bytes))
        .map_err(|_| format!("the signature by {} does not verify", entry.signer))
}

/// The signature artifact for a package manifest: its manifest and the
/// payload blob (the config is the empty blob).
pub fn signature_manifest(
    subject: &Descriptor,
    payload: &Blob,
    entries: &[SignatureEntry],
) -> ImageManifest {
    let layers = entries
        .iter()
        .map(|entry| {
            let mut layer = Descriptor::of(payload, SIGNATURE_ARTIFACT_TYPE);
            layer.annotations = BTreeMap::from([
                (SIGNATURE_ANNOTATION.to_string(), entry.signature.clone()),
                (SIGNER_ANNOTATION.to_string(), entry.signer.clone()),
            ]);
            layer
        })
        .collect();
    ImageManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.into()),
        artifact_type: Some(SIGNATURE_ARTIFACT_TYPE.into()),
        config: Descriptor::of(&Blob::new(EMPTY_CONTENT.to_vec()), EMPTY_MEDIA_TYPE),
        layers,
        subject: Some(subject.clone()),
        annotations: BTreeMap::new(),
    }
}

/// The signatures a signature artifact carries for `subject_digest`, with
/// the payload digest each claims. Artifacts of another subject yield none.
pub fn entries_of(manifest: &ImageManifest, subject_digest: &str) -> Vec<(String, SignatureEntry)> {
    if manifest.artifact_type.as_deref() != Some(SIGNATURE_ARTIFACT_TYPE)
        || manifest.subject.as_ref().map(|s| s.digest.as_str()) != Some(subject_digest)
    {
        return Vec::new();
    }
    manifest
        .layers
        .iter()
        .filter_map(|layer| {
            Some((
                layer.digest.clone(),
                SignatureEntry {
                    signer: layer.annotations.get(SIGNER_ANNOTATION)?.clone(),
                    signature: layer.annotations.get(SIGNATURE_ANNOTATION)?.clone(),
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_over_its_payload_and_key() {
        let (key, private, public) = generate().unwrap();
        let p = payload("sha256:00", "word-count", "1.0.0");
        assert_eq!(
            p,
            br#"{"manifestDigest":"sha256:00","name":"word-count","version":"1.0.0"}"#
        );
        let entry = sign(&key, &p);
        verify(&entry, &p).unwrap();
        assert!(verify(&entry, &payload("sha256:00", "word-count", "1.0.1")).is_err());
        let (other, _, _) = generate().unwrap();
        let forged = SignatureEntry {
            signer: signer_id(&other.verifying_key()),
            ..entry.clone()
        };
        assert!(verify(&forged, &p).is_err());
        // The PEM files read back to the same key.
        assert_eq!(
            SigningKey::from_pkcs8_pem(&private).unwrap().to_bytes(),
            key.to_bytes()
        );
        assert_eq!(parse_public_key(&public).unwrap(), key.verifying_key());
        assert_eq!(
            parse_public_key(&entry.signer).unwrap(),
            key.verifying_key()
        );
    }
}
