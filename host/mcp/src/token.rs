//! The tokens of the MCP contract: opaque to clients, versioned, signed.
//!
//! A token is `<kind>1_` followed by the base64url (no padding) of a
//! 34-byte body and the first 16 bytes of its HMAC-SHA256. The body says
//! which run, branch and snapshot it names; the MAC, under one of the keys
//! of [`crate::keys::Keyring`] (its id is in the body), says this server
//! minted it. [`decode`] checks the MAC, in constant time, before anything
//! is looked up: a forged, truncated or altered token never reaches the
//! store.
//!
//! Body, big-endian: version (1) · kind · key id (u16) · run number (u32,
//! the store's `runs.num`) · run tag (8 bytes of sha256 of the run id: a
//! number reused after `wfhost gc` does not name the new run) · branch
//! (u32) · seq of the snapshot (u32) · workflow tag (8 bytes of the pinned
//! definition's hash) · attempt (u16, the ack's number; 0 otherwise).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::keys::Keyring;

/// The body format this build mints and reads.
pub const TOKEN_VERSION: u8 = 1;
const BODY_LEN: usize = 34;
const MAC_LEN: usize = 16;
/// Domain separation: these MACs sign nothing else.
const MAC_CONTEXT: &[u8] = b"wfhost/mcp-token/v1";

/// What a token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Names a snapshot of a run: where to advance from.
    State,
    /// The authority to advance a snapshot once (with its attempt number).
    Ack,
    /// State and ack in one (WorkRail's `continueToken`).
    Continue,
    /// Names a snapshot to record notes against (WorkRail's
    /// `checkpointToken`).
    Checkpoint,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::State, Kind::Ack, Kind::Continue, Kind::Checkpoint];

    fn byte(self) -> u8 {
        match self {
            Kind::State => 1,
            Kind::Ack => 2,
            Kind::Continue => 3,
            Kind::Checkpoint => 4,
        }
    }

    /// The token's prefix without the version: `st`, `ak`, `ct`, `ck`.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::State => "st",
            Kind::Ack => "ak",
            Kind::Continue => "ct",
            Kind::Checkpoint => "ck",
        }
    }

    /// How the parameter that carries it is called.
    pub fn name(self) -> &'static str {
        match self {
            Kind::State => "state token",
            Kind::Ack => "ack token",
            Kind::Continue => "continue token",
            Kind::Checkpoint => "checkpoint token",
        }
    }
}

/// What a token says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Claims {
    pub kind: Kind,
    /// The store's number of the run (`runs.num`).
    pub run: u32,
    /// The first 8 bytes of sha256 of the run id.
    pub run_tag: [u8; 8],
    pub branch: u32,
    /// The seq of the snapshot event.
    pub seq: u32,
    /// The first 8 bytes of the pinned definition's sha256.
    pub workflow_tag: [u8; 8],
    /// The ack's number among the acks of its snapshot (1 for the first);
    /// 0 in state and checkpoint tokens.
    pub attempt: u16,
    /// Read from a short (WorkRail-format) token, which carries only the
    /// first 2 bytes of `run_tag` and no `workflow_tag`.
    pub short: bool,
}

/// Why a token was refused. Each maps to one error code of the contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("{0}")]
    InvalidFormat(String),
    #[error("the token is of version {0}; this server reads version {TOKEN_VERSION}")]
    UnsupportedVersion(String),
    #[error(
        "the token's signature does not verify: it was not minted by this server, or it was altered"
    )]
    BadSignature,
    #[error("the token was signed with key {0}, which was retired by a key rotation")]
    KeyRetired(u16),
    #[error("a {given} was given where a {expected} is needed")]
    WrongKind {
        given: &'static str,
        expected: &'static str,
    },
}

impl TokenError {
    /// The error code of the contract.
    pub fn code(&self) -> &'static str {
        match self {
            TokenError::InvalidFormat(_) => "TOKEN_INVALID_FORMAT",
            TokenError::UnsupportedVersion(_) => "TOKEN_UNSUPPORTED_VERSION",
            TokenError::BadSignature => "TOKEN_BAD_SIGNATURE",
            TokenError::KeyRetired(_) => "TOKEN_KEY_RETIRED",
            TokenError::WrongKind { .. } => "TOKEN_WRONG_KIND",
        }
    }
}

/// The 8-byte tag of a string (a run id, a workflow hash).
pub fn tag(text: &str) -> [u8; 8] {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// Mint a token for `claims` with the keyring's current key.
pub fn encode(keys: &Keyring, claims: &Claims) -> String {
    let (kid, key) = keys.current();
    encode_with(kid, key, claims)
}

fn encode_with(kid: u16, key: &[u8], claims: &Claims) -> String {
    let body = body(kid, claims);
    let mut bytes = body.to_vec();
    bytes.extend_from_slice(&mac(key, &body).finalize().into_bytes()[..MAC_LEN]);
    format!(
        "{}{TOKEN_VERSION}_{}",
        claims.kind.prefix(),
        URL_SAFE_NO_PAD.encode(bytes)
    )
}

fn body(kid: u16, c: &Claims) -> [u8; BODY_LEN] {
    let mut b = [0u8; BODY_LEN];
    b[0] = TOKEN_VERSION;
    b[1] = c.kind.byte();
    b[2..4].copy_from_slice(&kid.to_be_bytes());
    b[4..8].copy_from_slice(&c.run.to_be_bytes());
    b[8..16].copy_from_slice(&c.run_tag);
    b[16..20].copy_from_slice(&c.branch.to_be_bytes());
    b[20..24].copy_from_slice(&c.seq.to_be_bytes());
    b[24..32].copy_from_slice(&c.workflow_tag);
    b[32..34].copy_from_slice(&c.attempt.to_be_bytes());
    b
}

fn mac(key: &[u8], body: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(MAC_CONTEXT);
    mac.update(body);
    mac
}

/// Check `token` and read what it says; `expected` are the kinds the
/// parameter accepts. Nothing but the keyring is consulted.
pub fn decode(keys: &Keyring, token: &str, expected: &[Kind]) -> Result<Claims, TokenError> {
    if is_short(token) {
        return decode_short(keys, token.trim(), expected);
    }
    let (kind, version, rest) = split(token)?;
    if version != TOKEN_VERSION.to_string() {
        return Err(TokenError::UnsupportedVersion(version.to_string()));
    }
    let bytes = URL_SAFE_NO_PAD.decode(rest).map_err(|_| {
        TokenError::InvalidFormat("the token is not base64url: it was cut or altered".into())
    })?;
    if bytes.len() != BODY_LEN + MAC_LEN {
        return Err(TokenError::InvalidFormat(format!(
            "the token is {} bytes long, a {} is {}: it was cut or altered",
            bytes.len(),
            kind.name(),
            BODY_LEN + MAC_LEN
        )));
    }
    let (body, tag) = bytes.split_at(BODY_LEN);
    let kid = u16::from_be_bytes([body[2], body[3]]);
    let key = keys.key(kid)?;
    mac(key, body)
        .verify_truncated_left(tag)
        .map_err(|_| TokenError::BadSignature)?;
    // Signed by us: the body is as we wrote it.
    if body[0] != TOKEN_VERSION || body[1] != kind.byte() {
        return Err(TokenError::InvalidFormat(
            "the token's prefix does not match its body".into(),
        ));
    }
    if !expected.contains(&kind) {
        return Err(TokenError::WrongKind {
            given: kind.name(),
            expected: expected.first().map_or("token", |k| k.name()),
        });
    }
    let u32_at = |i: usize| u32::from_be_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
    let tag_at = |i: usize| {
        let mut t = [0u8; 8];
        t.copy_from_slice(&body[i..i + 8]);
        t
    };
    Ok(Claims {
        kind,
        run: u32_at(4),
        run_tag: tag_at(8),
        branch: u32_at(16),
        seq: u32_at(20),
        workflow_tag: tag_at(24),
        attempt: u16::from_be_bytes([body[32], body[33]]),
        short: false,
    })
}

/// The length of a short token: a 3-character prefix and 24 characters
/// of base64url.
pub const SHORT_LEN: usize = 27;
const SHORT_PAYLOAD: usize = 12;
const SHORT_MAC: usize = 6;

/// WorkRail's kind byte of a short token.
fn short_kind_byte(kind: Kind) -> u8 {
    match kind {
        Kind::State => 1,
        Kind::Ack => 2,
        Kind::Checkpoint => 3,
        Kind::Continue => 4,
    }
}

/// WorkRail's short token: `<prefix>_` and the base64url (no padding) of
/// a 12-byte payload followed by the first 6 bytes of
/// HMAC-SHA256(key, payload ‖ kind byte) — state 1, ack 2, checkpoint 3,
/// continue 4 — 27 characters, as WorkRail clients expect them
/// (`^ct_[A-Za-z0-9_-]{24}$`). WorkRail's payload is a random nonce it
/// looks up; wfhost's is the claims themselves, big-endian: run number
/// (u32) · the first 2 bytes of the run tag · branch (u16) · snapshot
/// seq (u24) · attempt (u8). None when the claims do not fit (the long
/// format is minted then).
pub fn encode_short(keys: &Keyring, claims: &Claims) -> Option<String> {
    let branch = u16::try_from(claims.branch).ok()?;
    let attempt = u8::try_from(claims.attempt).ok()?;
    if claims.seq >= 1 << 24 {
        return None;
    }
    let mut payload = [0u8; SHORT_PAYLOAD];
    payload[0..4].copy_from_slice(&claims.run.to_be_bytes());
    payload[4..6].copy_from_slice(&claims.run_tag[..2]);
    payload[6..8].copy_from_slice(&branch.to_be_bytes());
    payload[8..11].copy_from_slice(&claims.seq.to_be_bytes()[1..]);
    payload[11] = attempt;
    let (_, key) = keys.current();
    Some(short_with(key, claims.kind, &payload))
}

/// A short token of `payload` under `key`.
pub fn short_with(key: &[u8], kind: Kind, payload: &[u8; SHORT_PAYLOAD]) -> String {
    let mut bytes = payload.to_vec();
    bytes.extend_from_slice(&short_mac(key, kind, payload)[..SHORT_MAC]);
    format!("{}_{}", kind.prefix(), URL_SAFE_NO_PAD.encode(bytes))
}

fn short_mac(key: &[u8], kind: Kind, payload: &[u8]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(payload);
    mac.update(&[short_kind_byte(kind)]);
    mac.finalize().into_bytes().into()
}

/// Read a short token, checking its MAC under every kept key (newest
/// first, in constant time each).
fn decode_short(keys: &Keyring, token: &str, expected: &[Kind]) -> Result<Claims, TokenError> {
    let kind = Kind::ALL
        .into_iter()
        .find(|k| token.starts_with(&format!("{}_", k.prefix())))
        .ok_or_else(|| TokenError::InvalidFormat("unknown token prefix".into()))?;
    let rest = &token[3..];
    let bytes = URL_SAFE_NO_PAD
        .decode(rest)
        .ok()
        .filter(|b| b.len() == SHORT_PAYLOAD + SHORT_MAC && URL_SAFE_NO_PAD.encode(b) == rest)
        .ok_or_else(|| {
            TokenError::InvalidFormat(format!(
                "a short {} is `{}_` and 24 characters of base64url: it was cut or altered",
                kind.name(),
                kind.prefix()
            ))
        })?;
    let (payload, tag) = bytes.split_at(SHORT_PAYLOAD);
    let verified = keys.all().any(|key| {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
        mac.update(payload);
        mac.update(&[short_kind_byte(kind)]);
        mac.verify_truncated_left(tag).is_ok()
    });
    if !verified {
        return Err(TokenError::BadSignature);
    }
    if !expected.contains(&kind) {
        return Err(TokenError::WrongKind {
            given: kind.name(),
            expected: expected.first().map_or("token", |k| k.name()),
        });
    }
    let mut run_tag = [0u8; 8];
    run_tag[..2].copy_from_slice(&payload[4..6]);
    Ok(Claims {
        kind,
        run: u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]),
        run_tag,
        branch: u32::from(u16::from_be_bytes([payload[6], payload[7]])),
        seq: u32::from_be_bytes([0, payload[8], payload[9], payload[10]]),
        workflow_tag: [0; 8],
        attempt: u16::from(payload[11]),
        short: true,
    })
}

/// Whether a token is in the short format (`xx_` and 24 characters).
pub fn is_short(token: &str) -> bool {
    let t = token.trim();
    t.len() == SHORT_LEN && t.as_bytes().get(2) == Some(&b'_')
}

/// `<kind><version>_<rest>`.
fn split(token: &str) -> Result<(Kind, &str, &str), TokenError> {
    let token = token.trim();
    let Some((head, rest)) = token.split_once('_') else {
        return Err(TokenError::InvalidFormat(
            "not a wfhost token: expected `st1_…`, `ak1_…`, `ct1_…` or `ck1_…`".into(),
        ));
    };
    let kind = Kind::ALL
        .into_iter()
        .find(|k| head.starts_with(k.prefix()) && head.len() > 2)
        .ok_or_else(|| {
            TokenError::InvalidFormat(format!(
                "unknown token prefix `{}_`: expected `st1_`, `ak1_`, `ct1_` or `ck1_`",
                head.chars().take(8).collect::<String>()
            ))
        })?;
    let version = &head[2..];
    if !version.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TokenError::InvalidFormat(format!(
            "unknown token prefix `{}_`",
            head.chars().take(8).collect::<String>()
        )));
    }
    Ok((kind, version, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Keyring {
        Keyring::fixed(&[(1, [7u8; 32])])
    }

    fn claims(kind: Kind) -> Claims {
        Claims {
            kind,
            run: 3,
            run_tag: tag("run-1"),
            branch: 2,
            seq: 41,
            workflow_tag: tag("sha256:abc"),
            attempt: if kind == Kind::Ack { 1 } else { 0 },
            short: false,
        }
    }

    /// Vectors of WorkRail's short-token algorithm (its repository holds
    /// golden vectors only for its older long format): key bytes 0..31,
    /// payloads of zeros and of 01..0c, computed with Python's `hmac` and
    /// checked with Node's `crypto`.
    #[test]
    fn short_tokens_follow_workrails_algorithm() {
        let key: Vec<u8> = (0u8..32).collect();
        let zeros = [0u8; 12];
        let counting: [u8; 12] = std::array::from_fn(|i| i as u8 + 1);
        for (kind, payload, expected) in [
            (Kind::State, zeros, "st_AAAAAAAAAAAAAAAART70dG2c"),
            (Kind::State, counting, "st_AQIDBAUGBwgJCgsMAbnd-Jkp"),
            (Kind::Ack, zeros, "ak_AAAAAAAAAAAAAAAAZ5kd8vru"),
            (Kind::Ack, counting, "ak_AQIDBAUGBwgJCgsMFeJCKFRV"),
            (Kind::Checkpoint, zeros, "ck_AAAAAAAAAAAAAAAAYQsOTxIN"),
            (Kind::Checkpoint, counting, "ck_AQIDBAUGBwgJCgsM__HYRG1E"),
            (Kind::Continue, zeros, "ct_AAAAAAAAAAAAAAAAdmADaxF5"),
            (Kind::Continue, counting, "ct_AQIDBAUGBwgJCgsMcFwwt4lL"),
        ] {
            assert_eq!(short_with(&key, kind, &payload), expected);
        }
    }

    #[test]
    fn short_tokens_round_trip_and_refuse_alteration() {
        let rotated = Keyring::fixed(&[(1, [7u8; 32]), (2, [9u8; 32])]);
        for kind in Kind::ALL {
            let c = claims(kind);
            let token = encode_short(&keys(), &c).unwrap();
            assert_eq!(token.len(), SHORT_LEN, "{token}");
            assert!(token.starts_with(&format!("{}_", kind.prefix())));
            let read = decode(&rotated, &token, &[kind]).unwrap();
            assert!(read.short);
            assert_eq!(
                (read.run, read.branch, read.seq, read.attempt),
                (c.run, c.branch, c.seq, c.attempt)
            );
            assert_eq!(read.run_tag[..2], c.run_tag[..2]);
            let mut chars: Vec<char> = token.chars().collect();
            for i in 3..chars.len() {
                let was = chars[i];
                chars[i] = if was == 'A' { 'B' } else { 'A' };
                let altered: String = chars.iter().collect();
                assert!(decode(&rotated, &altered, &[kind]).is_err(), "char {i}");
                chars[i] = was;
            }
        }
        let other = Keyring::fixed(&[(5, [1u8; 32])]);
        let token = encode_short(&keys(), &claims(Kind::Continue)).unwrap();
        assert_eq!(
            decode(&other, &token, &[Kind::Continue]),
            Err(TokenError::BadSignature)
        );
        assert!(matches!(
            decode(&keys(), &token, &[Kind::State]),
            Err(TokenError::WrongKind { .. })
        ));
        let big = Claims {
            seq: 1 << 24,
            ..claims(Kind::Continue)
        };
        assert!(encode_short(&keys(), &big).is_none());
    }

    #[test]
    fn golden_tokens() {
        // A fixed key and fixed claims give a fixed token: a change of the
        // format (which breaks every token clients hold) fails here.
        assert_eq!(
            encode(&keys(), &claims(Kind::State)),
            "st1_AQEAAQAAAANOZdP76K1lNQAAAAIAAAApZ-m8PP0hY8IAAIgdBoyF8VBnZw5w0maXNyk"
        );
        assert_eq!(
            encode(&keys(), &claims(Kind::Ack)),
            "ak1_AQIAAQAAAANOZdP76K1lNQAAAAIAAAApZ-m8PP0hY8IAAZASKWpFurZNizOndhJXvEU"
        );
    }

    #[test]
    fn tokens_round_trip_under_any_kept_key() {
        let rotated = Keyring::fixed(&[(1, [7u8; 32]), (2, [9u8; 32])]);
        for kind in Kind::ALL {
            let old = encode(&keys(), &claims(kind));
            assert_eq!(decode(&rotated, &old, &[kind]).unwrap(), claims(kind));
            let new = encode(&rotated, &claims(kind));
            assert!(new.starts_with(&format!("{}1_", kind.prefix())), "{new}");
            assert_eq!(decode(&rotated, &new, &[kind]).unwrap(), claims(kind));
            assert_eq!(
                decode(&keys(), &new, &[kind]),
                Err(TokenError::BadSignature),
                "a key it never had"
            );
        }
        let retired = Keyring::fixed(&[(2, [9u8; 32]), (3, [5u8; 32])]);
        let old = encode(&keys(), &claims(Kind::State));
        assert_eq!(
            decode(&retired, &old, &[Kind::State]),
            Err(TokenError::KeyRetired(1))
        );
    }

    #[test]
    fn every_altered_byte_is_refused() {
        let token = encode(&keys(), &claims(Kind::State));
        let prefix = "st1_".len();
        let chars: Vec<char> = token.chars().collect();
        for i in prefix..chars.len() {
            let mut altered = chars.clone();
            altered[i] = if altered[i] == 'A' { 'B' } else { 'A' };
            let altered: String = altered.into_iter().collect();
            let err = decode(&keys(), &altered, &[Kind::State]).unwrap_err();
            assert!(
                matches!(
                    err,
                    TokenError::BadSignature
                        | TokenError::InvalidFormat(_)
                        | TokenError::KeyRetired(_)
                ),
                "char {i}: {err:?}"
            );
        }
    }

    #[test]
    fn malformed_tokens_get_their_code() {
        let token = encode(&keys(), &claims(Kind::State));
        let code = |t: &str| decode(&keys(), t, &[Kind::State]).unwrap_err().code();
        assert_eq!(code(&token[..token.len() - 3]), "TOKEN_INVALID_FORMAT");
        assert_eq!(code("hello"), "TOKEN_INVALID_FORMAT");
        assert_eq!(code("zz1_AAAA"), "TOKEN_INVALID_FORMAT");
        assert_eq!(code("st1_!!!!"), "TOKEN_INVALID_FORMAT");
        assert_eq!(
            code(&token.replacen("st1_", "st2_", 1)),
            "TOKEN_UNSUPPORTED_VERSION"
        );
        // The prefix is not signed, the body's kind is: relabelling fails.
        assert_eq!(
            code(&token.replacen("st1_", "ak1_", 1)),
            "TOKEN_INVALID_FORMAT"
        );
        let relabelled = token.replacen("st1_", "ck1_", 1);
        assert_eq!(
            decode(&keys(), &relabelled, &[Kind::Checkpoint])
                .unwrap_err()
                .code(),
            "TOKEN_INVALID_FORMAT"
        );
        let ack = encode(&keys(), &claims(Kind::Ack));
        assert_eq!(code(&ack), "TOKEN_WRONG_KIND");
    }
}
