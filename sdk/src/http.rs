//! Outbound HTTP for workers granted the `http` capability (cargo feature
//! `http`): one blocking call, [`send`], over `wasi:http`.
//!
//! The host sends the request only to the hosts the workflow lists in
//! `plugins.<name>.http.allow` and refuses anything else
//! ([`HttpError::Denied`]; the block's log says why). Secrets are never
//! read by the plugin: write [`secret`]`("NAME")` where the value belongs
//! (a header, the URL, the body) and the host fills it in for the hosts
//! allowed to receive `NAME`; the response comes back with the value
//! masked. Redirects are not followed: a 3xx response is returned as is,
//! and a request to its `Location` is checked like any other.
//!
//! ```no_run
//! use wfhost_sdk::http::{self, Request};
//!
//! # fn demo() -> Result<(), http::HttpError> {
//! let response = http::send(
//!     &Request::post("https://api.example.com/v1/items", br#"{"a":1}"#.to_vec())
//!         .header("content-type", "application/json")
//!         .header("authorization", format!("Bearer {}", http::secret("EXAMPLE_KEY"))),
//! )?;
//! assert_eq!(response.status, 200);
//! # Ok(()) }
//! ```

use std::fmt;
use std::time::Duration;

/// The text the host replaces with the value of secret `name` in requests
/// to hosts allowed to receive it.
pub fn secret(name: &str) -> String {
    ["${secret.", name, "}"].concat()
}

/// A request to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// `https://host[:port]/path?query` (or `http://`).
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// At most this long for each of connecting, the first byte and the
    /// gap between bytes (the workflow's `timeout` bounds the whole).
    pub timeout: Option<Duration>,
}

impl Request {
    pub fn new(method: &str, url: impl Into<String>) -> Request {
        Request {
            method: method.to_string(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout: None,
        }
    }

    pub fn get(url: impl Into<String>) -> Request {
        Request::new("GET", url)
    }

    pub fn post(url: impl Into<String>, body: Vec<u8>) -> Request {
        Request {
            body,
            ..Request::new("POST", url)
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Request {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// A response, its body read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The URL, method or a header is not one to send.
    BadRequest(String),
    /// The host refused it: not on the allowlist, a secret not allowed for
    /// the host, or the plugin is not granted `http`.
    Denied,
    /// A timeout: connecting, waiting, or the whole exchange.
    Timeout,
    /// The response body is over the workflow's `max_response_bytes`.
    TooLarge,
    /// Anything else (connection refused, DNS, TLS, protocol).
    Failed(String),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::BadRequest(m) => write!(f, "bad request: {m}"),
            HttpError::Denied => f.write_str(
                "the host refused the request (not allowed for this plugin; see the block's log)",
            ),
            HttpError::Timeout => f.write_str("timed out"),
            HttpError::TooLarge => f.write_str("the response is over its size limit"),
            HttpError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for HttpError {}

/// The parts of a URL the request is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url<'a> {
    pub https: bool,
    pub authority: &'a str,
    /// `/path?query`, `/` when empty.
    pub path_with_query: &'a str,
}

/// Split `url` into scheme, authority and path.
pub fn parse_url(url: &str) -> Result<Url<'_>, HttpError> {
    let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(HttpError::BadRequest(format!(
            "`{url}` does not start with https:// or http://"
        )));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.is_empty() || authority.contains('@') {
        return Err(HttpError::BadRequest(format!(
            "`{url}` has no host (or has a user)"
        )));
    }
    let path = rest[end..].split('#').next().unwrap_or("");
    Ok(Url {
        https,
        authority,
        path_with_query: if path.is_empty() { "/" } else { path },
    })
}

/// Send `request` and read the whole response.
#[cfg(target_arch = "wasm32")]
pub fn send(request: &Request) -> Result<Response, HttpError> {
    wire::send(request)
}

/// Off wasm (native tests) there is no host to send through.
#[cfg(not(target_arch = "wasm32"))]
pub fn send(_request: &Request) -> Result<Response, HttpError> {
    Err(HttpError::Failed(
        "http::send runs only in the wfhost sandbox; test the logic around it natively".into(),
    ))
}

#[cfg(target_arch = "wasm32")]
mod wire {
    use super::{HttpError, Request, Response, parse_url};
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions,
        Scheme,
    };
    use wasip2::io::streams::StreamError;

    pub fn send(request: &Request) -> Result<Response, HttpError> {
        let outgoing = outgoing(request)?;
        let body = outgoing
            .body()
            .map_err(|()| HttpError::Failed("no request body".into()))?;
        // Sent first: the host reads the body while it is written.
        let future = outgoing_handler::handle(outgoing, options(request)).map_err(|e| error(&e))?;
        write_body(&body, &request.body)?;
        OutgoingBody::finish(body, None).map_err(|e| error(&e))?;
        let response = loop {
            match future.get() {
                Some(Ok(Ok(response))) => break response,
                Some(Ok(Err(e))) => return Err(error(&e)),
                Some(Err(())) => return Err(HttpError::Failed("response taken twice".into())),
                None => future.subscribe().block(),
            }
        };
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(n, v)| (n, String::from_utf8_lossy(&v).into_owned()))
            .collect();
        let status = response.status();
        let body = response
            .consume()
            .map_err(|()| HttpError::Failed("no response body".into()))?;
        let bytes = read_body(&body)?;
        drop(body);
        Ok(Response {
            status,
            headers,
            body: bytes,
        })
    }

    fn outgoing(request: &Request) -> Result<OutgoingRequest, HttpError> {
        let url = parse_url(&request.url)?;
        let entries: Vec<(String, Vec<u8>)> = request
            .headers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.as_bytes().to_vec()))
            .collect();
        let fields = Fields::from_list(&entries)
            .map_err(|e| HttpError::BadRequest(format!("headers: {e:?}")))?;
        let outgoing = OutgoingRequest::new(fields);
        let method = match request.method.as_str() {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "HEAD" => Method::Head,
            "OPTIONS" => Method::Options,
            other => Method::Other(other.to_string()),
        };
        let bad = |what: &str| HttpError::BadRequest(format!("{what} of `{}`", request.url));
        outgoing
            .set_method(&method)
            .map_err(|()| bad("the method"))?;
        let scheme = if url.https {
            Scheme::Https
        } else {
            Scheme::Http
        };
        outgoing
            .set_scheme(Some(&scheme))
            .map_err(|()| bad("the scheme"))?;
        outgoing
            .set_authority(Some(url.authority))
            .map_err(|()| bad("the host"))?;
        outgoing
            .set_path_with_query(Some(url.path_with_query))
            .map_err(|()| bad("the path"))?;
        Ok(outgoing)
    }

    fn options(request: &Request) -> Option<RequestOptions> {
        let timeout = request.timeout?;
        let options = RequestOptions::new();
        let nanos = timeout.as_nanos().min(u64::MAX as u128) as u64;
        let _ = options.set_connect_timeout(Some(nanos));
        let _ = options.set_first_byte_timeout(Some(nanos));
        let _ = options.set_between_bytes_timeout(Some(nanos));
        Some(options)
    }

    fn write_body(body: &OutgoingBody, bytes: &[u8]) -> Result<(), HttpError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let stream = body
            .write()
            .map_err(|()| HttpError::Failed("no request body stream".into()))?;
        for chunk in bytes.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| HttpError::Failed(format!("writing the body: {e:?}")))?;
        }
        Ok(())
    }

    fn read_body(body: &IncomingBody) -> Result<Vec<u8>, HttpError> {
        let stream = body
            .stream()
            .map_err(|()| HttpError::Failed("no response body stream".into()))?;
        let mut out = Vec::new();
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => out.extend_from_slice(&chunk),
                Err(StreamError::Closed) => return Ok(out),
                Err(StreamError::LastOperationFailed(e)) => {
                    let code = wasip2::http::types::http_error_code(&e);
                    return Err(match code {
                        Some(code) => error(&code),
                        None => stream_error(e.to_debug_string()),
                    });
                }
            }
        }
    }

    /// A body stream's failure that carries no `error-code`: the host's
    /// text names the limit it hit.
    fn stream_error(text: String) -> HttpError {
        let lower = text.to_ascii_lowercase();
        if lower.contains("body size") {
            HttpError::TooLarge
        } else if lower.contains("timeout") || lower.contains("timed out") {
            HttpError::Timeout
        } else {
            HttpError::Failed(text)
        }
    }

    fn error(code: &ErrorCode) -> HttpError {
        match code {
            ErrorCode::HttpRequestDenied => HttpError::Denied,
            ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionWriteTimeout
            | ErrorCode::HttpResponseTimeout => HttpError::Timeout,
            ErrorCode::HttpResponseBodySize(_) => HttpError::TooLarge,
            other => HttpError::Failed(format!("{other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_their_parts() {
        let u = parse_url("https://api.example.com:8443/v1/x?a=1#frag").unwrap();
        assert_eq!(
            u,
            Url {
                https: true,
                authority: "api.example.com:8443",
                path_with_query: "/v1/x?a=1"
            }
        );
        assert_eq!(parse_url("http://h").unwrap().path_with_query, "/");
        for bad in ["ftp://h/", "h/x", "https:///x", "https://u@h/"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_placeholder_is_the_hosts() {
        assert_eq!(secret("KEY"), "${secret.KEY}");
    }
}
