//! The `http` capability's policy: which hosts a plugin may send requests
//! to (`plugins.<name>.http` in a workflow, intersected with the operator's
//! `http_allow`), and the secret placeholders the host fills in.
//!
//! A plugin never reads a secret. It writes the placeholder
//! `${secret.NAME}` in a request's URL, a header value or its body; the
//! host replaces it with the value only when the request goes to a host
//! whose allow entry lists `NAME` in `secrets`, and refuses the request
//! otherwise. Responses reach the plugin with every such value masked.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How long one exchange may take unless the workflow says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest response body a plugin receives unless the workflow says.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;
/// The largest request body the host sends (it reads it whole to fill in
/// placeholders) unless the workflow says.
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 16 * 1024 * 1024;
/// The most a workflow may raise either size limit to.
pub const MAX_BODY_BYTES: u64 = 256 * 1024 * 1024;

/// `plugins.<name>.http`: where a plugin granted `http` may send requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpGrant {
    /// The hosts it may reach; every other request is refused.
    pub allow: Vec<AllowEntry>,
    /// The longest one request may take, from connecting to the last byte
    /// of the response (`30s`, `5m`; default 120 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// The largest response body it receives (bytes; default 16 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_bytes: Option<u64>,
    /// The largest request body it may send (bytes; default 16 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<u64>,
}

/// One host a plugin may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllowEntry {
    /// A host name (`api.openai.com`), every host under a domain
    /// (`*.example.com`), an IPv4 address or a bracketed IPv6 address,
    /// with an optional `:port` (default: the scheme's).
    pub host: String,
    /// `https` (the default) or `http`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// The methods allowed (`GET`, `POST`, …); empty: every method.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// The secrets whose placeholders the host fills in for this host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

/// A host pattern: a name (possibly `*.` for a domain's hosts), an
/// address, and a port or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lowercase, without brackets for IPv6.
    host: String,
    wildcard: bool,
    port: Option<u16>,
}

impl HostPattern {
    /// Parse `host[:port]`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let shown = crate::text::escape(text);
        if text.contains("://") {
            return Err(format!(
                "`{shown}` is not a host: write the host alone (`api.example.com`), the scheme in `scheme`"
            ));
        }
        if text.contains(['/', '?', '#', '@']) {
            return Err(format!(
                "`{shown}` is not a host: no path, query or user, only `host[:port]`"
            ));
        }
        let (host, port) = split_port(text).map_err(|e| format!("`{shown}`: {e}"))?;
        let (host, wildcard) = match host.strip_prefix("*.") {
            Some(rest) => (rest, true),
            None => (host, false),
        };
        let host = host.to_ascii_lowercase();
        let ok = if host.starts_with('[') {
            host.ends_with(']')
                && host[1..host.len() - 1]
                    .parse::<std::net::Ipv6Addr>()
                    .is_ok()
        } else {
            host.parse::<std::net::Ipv4Addr>().is_ok() || is_dns_name(&host)
        };
        if !ok || (wildcard && !is_dns_name(&host)) {
            return Err(format!(
                "`{shown}` is not a host: a name (`api.example.com`), `*.domain`, an IPv4 address or `[IPv6]`, with an optional `:port`"
            ));
        }
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        Ok(HostPattern {
            host,
            wildcard,
            port,
        })
    }

    /// Whether a request to `host`:`port` matches (`default_port`: the
    /// port the pattern means when it names none).
    pub fn matches(&self, host: &str, port: u16, default_port: u16) -> bool {
        self.matches_name(host) && self.port.unwrap_or(default_port) == port
    }

    /// Whether `host` is this pattern's host (or under its domain).
    pub fn matches_name(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if self.wildcard {
            host.len() > self.host.len() + 1
                && host.ends_with(&self.host)
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host
        }
    }
}

fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let colon = if text.starts_with('[') {
        text.find(']')
            .and_then(|end| text[end..].find(':').map(|i| end + i))
    } else {
        text.rfind(':')
    };
    match colon {
        None => Ok((text, None)),
        Some(i) => {
            let port: u16 = text[i + 1..]
                .parse()
                .map_err(|_| format!("`{}` is not a port", crate::text::escape(&text[i + 1..])))?;
            if port == 0 {
                return Err("port 0 is not a port".into());
            }
            Ok((&text[..i], Some(port)))
        }
    }
}

fn is_dns_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
        // All digits and dots is an IPv4 address or nothing.
        && !host.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

fn is_method(method: &str) -> bool {
    !method.is_empty() && method.len() <= 32 && method.bytes().all(|b| b.is_ascii_uppercase())
}

/// One checked allow entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub pattern: HostPattern,
    pub https: bool,
    pub methods: Vec<String>,
    pub secrets: Vec<String>,
    /// How the workflow wrote it, for messages.
    pub shown: String,
}

/// A plugin's checked grant: what the host enforces on every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub plugin: String,
    pub rules: Vec<Rule>,
    /// The operator's allowlist (`http_allow`); `None`: no further limit.
    pub operator: Option<Vec<HostPattern>>,
    pub timeout: Duration,
    pub max_response_bytes: u64,
    pub max_request_bytes: u64,
}

/// Why a grant does not check: the JSON pointer below
/// `/plugins/<name>/http` and the message.
pub type GrantError = (String, String);

impl HttpGrant {
    /// Every error of the grant, each with its pointer relative to the
    /// grant (`/allow/0/host`).
    pub fn check(&self) -> Vec<GrantError> {
        let mut errors = Vec::new();
        if self.allow.is_empty() {
            errors.push((
                "/allow".into(),
                "lists no host: a plugin granted `http` needs at least one".into(),
            ));
        }
        for (i, entry) in self.allow.iter().enumerate() {
            entry.check(&format!("/allow/{i}"), &mut errors);
        }
        if let Some(timeout) = &self.timeout {
            match crate::manifest::duration::parse_duration(timeout) {
                Ok(d) if d.is_zero() => errors.push(("/timeout".into(), "must be above 0".into())),
                Ok(_) => {}
                Err(e) => errors.push(("/timeout".into(), e)),
            }
        }
        for (field, value) in [
            ("max_response_bytes", self.max_response_bytes),
            ("max_request_bytes", self.max_request_bytes),
        ] {
            if let Some(n) = value
                && (n == 0 || n > MAX_BODY_BYTES)
            {
                errors.push((
                    format!("/{field}"),
                    format!("must be between 1 and {MAX_BODY_BYTES} bytes, not {n}"),
                ));
            }
        }
        errors
    }

    /// The policy the host enforces for `plugin`, with the operator's
    /// allowlist; the grant must have passed [`HttpGrant::check`].
    pub fn policy(
        &self,
        plugin: &str,
        operator: Option<Vec<HostPattern>>,
    ) -> Result<Policy, String> {
        if let Some((pointer, message)) = self.check().into_iter().next() {
            return Err(format!("plugins.{plugin}.http{pointer}: {message}"));
        }
        let rules = self
            .allow
            .iter()
            .map(|entry| Rule {
                pattern: HostPattern::parse(&entry.host).expect("checked"),
                https: entry.scheme.as_deref() != Some("http"),
                methods: entry.methods.clone(),
                secrets: entry.secrets.clone(),
                shown: entry.host.clone(),
            })
            .collect();
        let timeout = self
            .timeout
            .as_deref()
            .map(|t| crate::manifest::duration::parse_duration(t).expect("checked"))
            .unwrap_or(DEFAULT_TIMEOUT);
        Ok(Policy {
            plugin: plugin.to_string(),
            rules,
            operator,
            timeout,
            max_response_bytes: self
                .max_response_bytes
                .unwrap_or(DEFAULT_MAX_RESPONSE_BYTES),
            max_request_bytes: self.max_request_bytes.unwrap_or(DEFAULT_MAX_REQUEST_BYTES),
        })
    }
}

impl AllowEntry {
    fn check(&self, at: &str, errors: &mut Vec<GrantError>) {
        if let Err(e) = HostPattern::parse(&self.host) {
            errors.push((format!("{at}/host"), e));
        }
        if let Some(scheme) = &self.scheme
            && scheme != "https"
            && scheme != "http"
        {
            errors.push((
                format!("{at}/scheme"),
                format!(
                    "`{}` is not a scheme: `https` or `http`",
                    crate::text::escape(scheme)
                ),
            ));
        }
        for (i, method) in self.methods.iter().enumerate() {
            if !is_method(method) {
                errors.push((
                    format!("{at}/methods/{i}"),
                    format!(
                        "`{}` is not a method: uppercase letters (`GET`, `POST`)",
                        crate::text::escape(method)
                    ),
                ));
            }
        }
        for (i, secret) in self.secrets.iter().enumerate() {
            if let Err(e) = super::secrets::check_name(secret) {
                errors.push((format!("{at}/secrets/{i}"), e));
            }
        }
    }
}

/// A request as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub method: &'a str,
    pub https: bool,
    pub host: &'a str,
    /// `None`: the scheme's default port.
    pub port: Option<u16>,
}

impl Target<'_> {
    fn port(&self) -> u16 {
        self.port.unwrap_or(if self.https { 443 } else { 80 })
    }

    fn shown(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        match self.port {
            Some(p) => format!("{} {scheme}://{}:{p}", self.method, self.host),
            None => format!("{} {scheme}://{}", self.method, self.host),
        }
    }
}

impl Policy {
    /// The rule that allows `target`, or why none does.
    pub fn allow(&self, target: Target<'_>) -> Result<&Rule, String> {
        let port = target.port();
        let shown = target.shown();
        let plugin = &self.plugin;
        if let Some(operator) = &self.operator {
            let default = if target.https { 443 } else { 80 };
            if !operator
                .iter()
                .any(|p| p.matches(target.host, port, default))
            {
                return Err(format!(
                    "{shown}: host `{}` is not in the operator's http_allow (`wfhost config get http_allow`)",
                    target.host
                ));
            }
        }
        let mut named = self
            .rules
            .iter()
            .filter(|r| r.pattern.matches_name(target.host));
        let Some(first) = named.clone().next() else {
            return Err(format!(
                "{shown}: host `{}` is not in plugins.{plugin}.http.allow",
                target.host
            ));
        };
        let mut schemed = named.clone().filter(|r| r.https == target.https);
        if schemed.next().is_none() {
            let wanted = if first.https { "https" } else { "http" };
            return Err(format!(
                "{shown}: plugins.{plugin}.http.allow lets `{}` be reached over {wanted} only",
                first.shown
            ));
        }
        let default = if target.https { 443 } else { 80 };
        let Some(rule) = named
            .find(|r| r.https == target.https && r.pattern.matches(target.host, port, default))
        else {
            return Err(format!(
                "{shown}: port {port} of `{}` is not in plugins.{plugin}.http.allow",
                target.host
            ));
        };
        if !rule.methods.is_empty() && !rule.methods.iter().any(|m| m == target.method) {
            return Err(format!(
                "{shown}: plugins.{plugin}.http.allow lets `{}` be sent {} only",
                rule.shown,
                rule.methods.join(", ")
            ));
        }
        Ok(rule)
    }
}

/// The placeholder a plugin writes for the secret `name`.
pub fn placeholder(name: &str) -> String {
    format!("{PLACEHOLDER_START}{name}}}")
}

const PLACEHOLDER_START: &str = "${secret.";

/// The secret names of every placeholder in `bytes`, in order of first
/// appearance; a `${secret.` not followed by a valid name and `}` is an
/// error (a plugin that meant a placeholder must not send it as is).
pub fn placeholders(bytes: &[u8]) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    let start = PLACEHOLDER_START.as_bytes();
    let mut at = 0;
    while let Some(i) = find(&bytes[at..], start) {
        let name_at = at + i + start.len();
        let end = bytes[name_at..]
            .iter()
            .position(|&b| b == b'}')
            .map(|e| name_at + e);
        let name = end.and_then(|e| std::str::from_utf8(&bytes[name_at..e]).ok());
        match name {
            Some(name) if super::secrets::valid_name(name) => {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
                at = end.expect("found") + 1;
            }
            _ => {
                let shown: String =
                    String::from_utf8_lossy(&bytes[at + i..(at + i + 40).min(bytes.len())])
                        .into_owned();
                return Err(format!(
                    "`{}…` is not a secret placeholder: write ${{secret.NAME}}",
                    crate::text::escape(&shown)
                ));
            }
        }
    }
    Ok(names)
}

/// `bytes` with every placeholder of a secret in `values` replaced by its
/// value (names not in `values` are left: [`placeholders`] is checked
/// first).
pub fn fill(bytes: &[u8], values: &[(String, String)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for (name, value) in values {
        let needle = placeholder(name);
        out = replace_all(&out, needle.as_bytes(), value.as_bytes());
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn replace_all(bytes: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(i) = find(&bytes[at..], needle) {
        out.extend_from_slice(&bytes[at..at + i]);
        out.extend_from_slice(with);
        at += i + needle.len();
    }
    out.extend_from_slice(&bytes[at..]);
    out
}

/// The operator's allowlist (`http_allow` in the user's config), checked.
pub fn operator_allowlist(entries: &[String]) -> Result<Vec<HostPattern>, String> {
    entries
        .iter()
        .map(|e| HostPattern::parse(e).map_err(|m| format!("http_allow: {m}")))
        .collect()
}

#[cfg(test)]
mod tests;
