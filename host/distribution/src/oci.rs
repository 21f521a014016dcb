//! The part of a registry's HTTP API (the OCI distribution spec) that
//! wfhost uses: manifests, blobs, referrers, uploads, and the token or
//! basic authentication a registry asks for.
//!
//! Every answer's body is read with a cap
//! ([`wfhost_core::bounded_read`]): a manifest, a referrers index or a
//! tag-schema index at most [`MAX_MANIFEST_BYTES`], a blob at most the
//! size its manifest declares (itself at most [`MAX_COMPONENT_BYTES`] for
//! the component), a token answer at most [`MAX_TOKEN_BYTES`], the text of
//! an error answer at most [`MAX_ERROR_BYTES`]. A registry that answers
//! more is refused as soon as the cap is passed, so a hostile one costs a
//! bounded amount of memory, however large or endless its answer.
//!
//! Credentials go only to the registry itself and to the token endpoint
//! it names; a request to another host (an upload `Location` elsewhere, a
//! blob redirected to storage) carries none.
//!
//! [`MAX_MANIFEST_BYTES`]: crate::package::MAX_MANIFEST_BYTES
//! [`MAX_COMPONENT_BYTES`]: crate::package::MAX_COMPONENT_BYTES

use std::fmt::Display;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderValue, LOCATION,
    WWW_AUTHENTICATE,
};
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};
use wfhost_core::bounded_read::{CappedError, read_capped};

use crate::package::{INDEX_MEDIA_TYPE, MAX_MANIFEST_BYTES};

/// The largest answer of a token endpoint: tokens are a few KiB.
pub const MAX_TOKEN_BYTES: u64 = 256 << 10;
/// The most of an error answer's body read for its message.
pub const MAX_ERROR_BYTES: u64 = 64 << 10;

/// What wfhost presents to a registry that asks who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    Anonymous,
    Basic { user: String, password: String },
}

/// What a request does: a token is asked for with that scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Pull,
    Push,
}

/// Why a request failed.
#[derive(Debug)]
pub enum Error {
    /// The registry was not reached, or the transfer broke.
    Transport(String),
    /// The registry refused the credentials, or their absence (401, 403).
    Denied(String),
    /// Another answer than the one expected.
    Status { code: u16, message: String },
    /// An answer over its limit: one line naming it and the limit.
    TooLarge(String),
}

impl Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Transport(m) | Error::Denied(m) | Error::TooLarge(m) => f.write_str(m),
            Error::Status { message, .. } => f.write_str(message),
        }
    }
}

impl Error {
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Status { code: 404, .. })
    }
}

/// A connection to one repository of one registry.
pub struct Client {
    http: reqwest::Client,
    /// `http[s]://registry/`.
    base: Url,
    repository: String,
    credentials: Credentials,
    /// The `Authorization` that last worked, for pulls and for pushes.
    authorization: Mutex<[Option<HeaderValue>; 2]>,
}

impl Client {
    /// `plain_http` speaks HTTP instead of HTTPS (loopback and insecure
    /// registries).
    pub fn new(
        registry: &str,
        repository: &str,
        plain_http: bool,
        credentials: Credentials,
    ) -> Result<Client, String> {
        let scheme = if plain_http { "http" } else { "https" };
        let base = Url::parse(&format!("{scheme}://{registry}/"))
            .map_err(|e| format!("{registry}: not a registry address: {e}"))?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("wfhost/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| format!("cannot start an HTTP client: {}", chain(&e)))?;
        Ok(Client {
            http,
            base,
            repository: repository.to_string(),
            credentials,
            authorization: Mutex::new([None, None]),
        })
    }

    /// `v2/<repository>/<rest>` on the registry.
    fn url(&self, rest: &str) -> Result<Url, Error> {
        self.base
            .join(&format!("v2/{}/{rest}", self.repository))
            .map_err(|e| Error::Transport(format!("{}{rest}: {e}", self.base)))
    }

    /// Check that the registry lets us in for `access` (`GET /v2/`).
    pub async fn login(&self, access: Access) -> Result<(), Error> {
        let url = self
            .base
            .join("v2/")
            .map_err(|e| Error::Transport(e.to_string()))?;
        let response = self.send(access, Method::GET, &url, |r| r).await?;
        match response.status() {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(failure(response).await),
            _ => Ok(()),
        }
    }

    /// The manifest at `reference` (a tag or a digest), read up to
    /// [`MAX_MANIFEST_BYTES`], and the digest the registry says it has.
    pub async fn pull_manifest(
        &self,
        reference: &str,
        accept: &[&str],
    ) -> Result<(Vec<u8>, Option<String>), Error> {
        let url = self.url(&format!("manifests/{reference}"))?;
        let accept = accept.join(", ");
        let response = self
            .send(Access::Pull, Method::GET, &url, |r| {
                r.header(ACCEPT, accept.as_str())
            })
            .await?;
        if response.status() != StatusCode::OK {
            return Err(failure(response).await);
        }
        let digest = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = body(
            response,
            MAX_MANIFEST_BYTES,
            format!("the manifest at {url}"),
        )
        .await?;
        Ok((bytes, digest))
    }

    /// The referrers index of `digest` (the referrers API) filtered to
    /// `artifact_type`, read up to [`MAX_MANIFEST_BYTES`]; `None` when the
    /// registry has no referrers API (404).
    pub async fn pull_referrers(
        &self,
        digest: &str,
        artifact_type: &str,
    ) -> Result<Option<Vec<u8>>, Error> {
        let mut url = self.url(&format!("referrers/{digest}"))?;
        url.query_pairs_mut()
            .append_pair("artifactType", artifact_type);
        let response = self
            .send(Access::Pull, Method::GET, &url, |r| {
                r.header(ACCEPT, INDEX_MEDIA_TYPE)
            })
            .await?;
        match response.status() {
            StatusCode::OK => body(
                response,
                MAX_MANIFEST_BYTES,
                format!("the referrers index at {url}"),
            )
            .await
            .map(Some),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(failure(response).await),
        }
    }

    /// Blob `digest`, refused as soon as it passes `size` bytes (the size
    /// its manifest declares).
    pub async fn pull_blob(&self, digest: &str, size: u64) -> Result<Vec<u8>, Error> {
        let url = self.url(&format!("blobs/{digest}"))?;
        let response = self.send(Access::Pull, Method::GET, &url, |r| r).await?;
        if response.status() != StatusCode::OK {
            return Err(failure(response).await);
        }
        body(response, size, format!("blob {digest} at {url}")).await
    }

    pub async fn blob_exists(&self, digest: &str) -> Result<bool, Error> {
        let url = self.url(&format!("blobs/{digest}"))?;
        let response = self.send(Access::Push, Method::HEAD, &url, |r| r).await?;
        match response.status() {
            StatusCode::OK => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(failure(response).await),
        }
    }

    /// Upload a blob in one piece (`POST` an upload, `PUT` its bytes).
    pub async fn push_blob(&self, digest: &str, bytes: Bytes) -> Result<(), Error> {
        let url = self.url("blobs/uploads/")?;
        let started = self
            .send(Access::Push, Method::POST, &url, |r| {
                r.header(CONTENT_LENGTH, 0)
            })
            .await?;
        if started.status() != StatusCode::ACCEPTED {
            return Err(failure(started).await);
        }
        let location = started
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| Error::Status {
                code: started.status().as_u16(),
                message: format!("{url} started an upload without a Location"),
            })?;
        let mut upload = started.url().join(location).map_err(|e| Error::Status {
            code: started.status().as_u16(),
            message: format!("{url} answered an upload Location that is not a URL: {e}"),
        })?;
        drop(started);
        upload.query_pairs_mut().append_pair("digest", digest);
        let response = self
            .send(Access::Push, Method::PUT, &upload, |r| {
                r.header(CONTENT_TYPE, "application/octet-stream")
                    .body(bytes.clone())
            })
            .await?;
        if !response.status().is_success() {
            return Err(failure(response).await);
        }
        Ok(())
    }

    /// Upload a manifest under `reference` (a tag or its digest).
    pub async fn push_manifest(
        &self,
        reference: &str,
        bytes: Bytes,
        media_type: &str,
    ) -> Result<(), Error> {
        let url = self.url(&format!("manifests/{reference}"))?;
        let response = self
            .send(Access::Push, Method::PUT, &url, |r| {
                r.header(CONTENT_TYPE, media_type).body(bytes.clone())
            })
            .await?;
        if !response.status().is_success() {
            return Err(failure(response).await);
        }
        Ok(())
    }

    /// Send a request (built by `build`, which may be called twice); when
    /// the registry asks for credentials, get them (a token from its token
    /// endpoint, or basic credentials) and send it once more.
    async fn send(
        &self,
        access: Access,
        method: Method,
        url: &Url,
        build: impl Fn(RequestBuilder) -> RequestBuilder,
    ) -> Result<Response, Error> {
        let known = self.authorization.lock().expect("not poisoned")[access as usize].clone();
        let response = self
            .execute(
                build(self.http.request(method.clone(), url.clone())),
                url,
                &known,
            )
            .await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let Some(challenge) = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(Challenge::parse)
        else {
            return Ok(response);
        };
        let Some(authorization) = self.authorize(&challenge, access).await? else {
            return Ok(response);
        };
        if known.as_ref() == Some(&authorization) {
            return Ok(response);
        }
        drop(response);
        self.authorization.lock().expect("not poisoned")[access as usize] =
            Some(authorization.clone());
        self.execute(
            build(self.http.request(method, url.clone())),
            url,
            &Some(authorization),
        )
        .await
    }

    async fn execute(
        &self,
        request: RequestBuilder,
        url: &Url,
        authorization: &Option<HeaderValue>,
    ) -> Result<Response, Error> {
        let request = match authorization {
            // Never to another host than the registry.
            Some(value) if url.origin() == self.base.origin() => {
                request.header(AUTHORIZATION, value.clone())
            }
            _ => request,
        };
        request
            .send()
            .await
            .map_err(|e| Error::Transport(chain(&e)))
    }

    /// The `Authorization` for `challenge`, if wfhost has one to give.
    async fn authorize(
        &self,
        challenge: &Challenge,
        access: Access,
    ) -> Result<Option<HeaderValue>, Error> {
        let basic = match &self.credentials {
            Credentials::Basic { user, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )),
            Credentials::Anonymous => None,
        };
        let header = |value: String| {
            HeaderValue::from_str(&value)
                .map(|mut v| {
                    v.set_sensitive(true);
                    v
                })
                .map_err(|_| Error::Denied("the credentials are not a valid header".into()))
        };
        match challenge {
            Challenge::Basic => basic.map(header).transpose(),
            Challenge::Bearer { realm, service } => {
                let token = self.token(realm, service.as_deref(), access, basic).await?;
                header(format!("Bearer {token}")).map(Some)
            }
        }
    }

    /// A token from the registry's token endpoint (the docker token
    /// protocol), with basic credentials when wfhost has them.
    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        access: Access,
        basic: Option<String>,
    ) -> Result<String, Error> {
        let mut url = Url::parse(realm).map_err(|e| {
            Error::Denied(format!(
                "the registry named a token endpoint `{realm}`: {e}"
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::Denied(format!(
                "the registry named a token endpoint `{realm}` that is not HTTP"
            )));
        }
        let actions = match access {
            Access::Pull => "pull",
            Access::Push => "pull,push",
        };
        {
            let mut query = url.query_pairs_mut();
            query.append_pair(
                "scope",
                &format!("repository:{}:{actions}", self.repository),
            );
            if let Some(service) = service {
                query.append_pair("service", service);
            }
        }
        let mut request = self.http.get(url.clone());
        if let Some(basic) = basic {
            request = request.header(AUTHORIZATION, basic);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Error::Transport(chain(&e)))?;
        if response.status() != StatusCode::OK {
            let failed = failure(response).await;
            return Err(match failed {
                Error::Status { message, .. } => Error::Denied(message),
                other => other,
            });
        }
        let bytes = body(
            response,
            MAX_TOKEN_BYTES,
            format!("the token answer of {url}"),
        )
        .await?;
        #[derive(serde::Deserialize)]
        struct Answer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| {
            Error::Denied(format!("the token endpoint {url} answered no token: {e}"))
        })?;
        answer
            .token
            .or(answer.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Error::Denied(format!("the token endpoint {url} answered no token")))
    }
}

/// A `WWW-Authenticate` challenge wfhost can answer.
#[derive(Debug, PartialEq, Eq)]
enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
    },
}

impl Challenge {
    fn parse(header: &str) -> Option<Challenge> {
        let header = header.trim();
        let (scheme, params) = header.split_once(' ').unwrap_or((header, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Some(Challenge::Basic);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let params = auth_params(params);
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        Some(Challenge::Bearer {
            realm: get("realm")?,
            service: get("service"),
        })
    }
}

/// `k=v, k="quoted, \"v\""` pairs.
fn auth_params(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let mut key = String::new();
        while let Some(c) = chars.peek().copied().filter(|c| *c != '=' && *c != ',') {
            key.push(c);
            chars.next();
        }
        if chars.next() != Some('=') {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => value.extend(chars.next()),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied().filter(|c| *c != ',') {
                value.push(c);
                chars.next();
            }
        }
        out.push((key.trim().to_string(), value.trim().to_string()));
    }
}

/// The declared length of an answer: its `Content-Length`, else what
/// the transfer says (only a hint: the cap is what stops a read).
fn declared_length(response: &Response) -> Option<u64> {
    content_length(response.headers()).or(response.content_length())
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The body of `response`, at most `limit` bytes.
async fn body(response: Response, limit: u64, what: impl Display) -> Result<Vec<u8>, Error> {
    let what = what.to_string();
    let declared = declared_length(&response);
    let chunks = futures_util::stream::unfold(response, |mut response| async move {
        response
            .chunk()
            .await
            .transpose()
            .map(|chunk| (chunk, response))
    });
    read_capped(chunks, declared, limit, &what)
        .await
        .map_err(|e| match e {
            CappedError::TooLarge(message) => Error::TooLarge(message),
            CappedError::Read(e) => Error::Transport(format!("{what} broke off: {}", chain(&e))),
        })
}

/// The error an unexpected answer stands for, with the registry's own
/// words (the OCI error body's messages, else its text), read up to
/// [`MAX_ERROR_BYTES`].
async fn failure(response: Response) -> Error {
    let status = response.status();
    let url = response.url().clone();
    let said = match body(
        response,
        MAX_ERROR_BYTES,
        format!("the error answer of {url}"),
    )
    .await
    {
        Ok(bytes) => registry_words(&bytes),
        Err(Error::TooLarge(message)) => return Error::TooLarge(message),
        Err(_) => String::new(),
    };
    let message = if said.is_empty() {
        format!("{url} answered {status}")
    } else {
        format!("{url} answered {status}: {said}")
    };
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Error::Denied(message),
        _ => Error::Status {
            code: status.as_u16(),
            message,
        },
    }
}

/// `{"errors": [{"code", "message"}]}`'s messages, else the text itself
/// (shortened).
fn registry_words(bytes: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    if let Ok(envelope) = serde_json::from_slice::<Envelope>(bytes) {
        return envelope
            .errors
            .iter()
            .map(|e| match (e.code.is_empty(), e.message.is_empty()) {
                (false, false) => format!("{} ({})", e.message, e.code),
                (true, _) => e.message.clone(),
                (false, true) => e.code.clone(),
            })
            .collect::<Vec<_>>()
            .join("; ");
    }
    let text = String::from_utf8_lossy(bytes);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// An error and its sources, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !message.contains(&text) {
            message.push_str(&format!(": {text}"));
        }
        source = s.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_read_as_registries_send_them() {
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
            })
        );
        assert_eq!(
            Challenge::parse(r#"Basic realm="wfhost-test""#),
            Some(Challenge::Basic)
        );
        assert_eq!(
            Challenge::parse(r#"bearer realm=https://t.example/x"#),
            Some(Challenge::Bearer {
                realm: "https://t.example/x".into(),
                service: None
            })
        );
        assert_eq!(Challenge::parse("Bearer service=x"), None);
        assert_eq!(Challenge::parse("Negotiate abc"), None);
    }

    #[test]
    fn registry_errors_are_shown_in_their_own_words() {
        assert_eq!(
            registry_words(
                br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#
            ),
            "manifest unknown (MANIFEST_UNKNOWN)"
        );
        assert_eq!(registry_words(b"  not\nfound "), "not found");
        assert_eq!(registry_words(&[b'x'; 400]).chars().count(), 301);
    }
}
