//! Who may call the API. On loopback (the default) nobody needs a token;
//! on any other address `wfhost serve` starts only with a token file, and
//! every request must carry one of its tokens as `Authorization: Bearer`.
//! Agents and clients have separate tokens; a request without a valid one
//! gets 401 and learns nothing else. That a request carries one of the
//! tokens at all is checked first, before it is routed and before its body
//! is read, and a 401 closes the connection (see [`crate::conn`]).

use std::path::Path;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// The tokens a server accepts (file format: `{"clients": [...],
/// "agents": [...]}`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tokens {
    #[serde(default)]
    pub clients: Vec<String>,
    #[serde(default)]
    pub agents: Vec<String>,
}

/// The shortest token accepted: guessing 32 characters is hopeless.
pub const MIN_TOKEN_LEN: usize = 32;

impl Tokens {
    /// Read a token file: a regular file of bounded size that only its
    /// owner can read, with at least one token, each long enough.
    pub fn read(path: &Path) -> Result<Tokens, String> {
        use std::os::unix::fs::PermissionsExt;
        let bytes = wfhost_core::workspace::regular_file::read_regular(path, 64 << 10)
            .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(format!(
                "the token file {} can be read by other users; `chmod 600` it",
                path.display()
            ));
        }
        let tokens: Tokens = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "the token file {} is not {{\"clients\": [...], \"agents\": [...]}}: {e}",
                path.display()
            )
        })?;
        if tokens.clients.is_empty() && tokens.agents.is_empty() {
            return Err(format!("the token file {} holds no token", path.display()));
        }
        if let Some(short) = tokens
            .clients
            .iter()
            .chain(&tokens.agents)
            .find(|t| t.len() < MIN_TOKEN_LEN)
        {
            return Err(format!(
                "the token file {}: a token of {} characters is too short (at least {MIN_TOKEN_LEN})",
                path.display(),
                short.len()
            ));
        }
        Ok(tokens)
    }

    fn accepts_client(&self, presented: &[u8]) -> bool {
        accepts(&self.clients, presented)
    }

    fn accepts_agent(&self, presented: &[u8]) -> bool {
        accepts(&self.agents, presented)
    }

    /// Whether `presented` is any of the tokens, a client's or an
    /// agent's: what the connection layer checks before a request is
    /// routed (the routes then check which kind).
    pub(crate) fn accepts_any(&self, presented: &[u8]) -> bool {
        // Both compared, so the timing does not tell which kind matched.
        let client = self.accepts_client(presented);
        let agent = self.accepts_agent(presented);
        client | agent
    }
}

/// Whether `presented` is one of `tokens`. Every token is compared, in
/// constant time, so neither the match nor its position shows in the
/// timing.
fn accepts(tokens: &[String], presented: &[u8]) -> bool {
    let mut found = subtle::Choice::from(0);
    for token in tokens {
        found |= token.as_bytes().ct_eq(presented);
    }
    found.into()
}

pub(crate) fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(AUTHORIZATION)?.as_bytes();
    value.strip_prefix(b"Bearer ")
}

/// Client endpoints: pass when no tokens are configured (loopback), else
/// only with a client token.
pub async fn require_client(
    State(tokens): State<Option<std::sync::Arc<Tokens>>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(tokens) = &tokens
        && !bearer(request.headers()).is_some_and(|t| tokens.accepts_client(t))
    {
        return ApiError::unauthorized().into_response();
    }
    next.run(request).await
}

/// Agent endpoints: pass when no tokens are configured (loopback), else
/// only with an agent token.
pub async fn require_agent(
    State(tokens): State<Option<std::sync::Arc<Tokens>>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(tokens) = &tokens
        && !bearer(request.headers()).is_some_and(|t| tokens.accepts_agent(t))
    {
        return ApiError::unauthorized().into_response();
    }
    next.run(request).await
}
