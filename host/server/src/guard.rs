//! What keeps a web page the user visits from using the API through the
//! user's browser.
//!
//! - **Cross-site requests** (CSRF): a request that changes something
//!   (any method but GET, HEAD and OPTIONS) is refused when the browser
//!   says it comes from another site — an `Origin` that is not this
//!   server's own, or `Sec-Fetch-Site: cross-site` / `same-site`.
//!   Programs (the CLI, agents, scripts) send neither header.
//! - **DNS rebinding**: without tokens the server is reachable only on
//!   loopback, but a hostile name can be made to resolve to 127.0.0.1;
//!   the browser then sends that name as `Host`. Without tokens, only
//!   loopback names (`localhost`, `*.localhost`, `127.x.y.z`, `[::1]`)
//!   are served. With tokens, a page cannot make the browser send one.
//!
//! Reading across origins needs no check here: the API sends no CORS
//! headers, so browsers keep other sites from reading its answers.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Whether the server runs without tokens (and so on loopback only).
#[derive(Clone, Copy)]
pub struct Tokenless(pub bool);

pub async fn browser_guard(
    State(Tokenless(tokenless)): State<Tokenless>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if tokenless
        && let Some(host) = host(headers)
        && !is_loopback_host(host)
    {
        return refuse(format!(
            "host `{host}` is not a loopback name: without tokens the server answers only to localhost, 127.0.0.1 and [::1]"
        ));
    }
    if !is_safe(request.method())
        && let Some(why) = cross_site(headers)
    {
        return refuse(why);
    }
    next.run(request).await
}

fn refuse(message: String) -> Response {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).into_response()
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn host(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::HOST).and_then(|h| h.to_str().ok())
}

/// Why a state-changing request looks like it comes from another site.
fn cross_site(headers: &HeaderMap) -> Option<String> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && (site == "cross-site" || site == "same-site")
    {
        return Some(format!(
            "a {site} request from a web page cannot change runs"
        ));
    }
    let origin = headers.get(header::ORIGIN)?;
    let origin = origin.to_str().unwrap_or("");
    let own = host(headers).unwrap_or("");
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match authority {
        Some(a) if !own.is_empty() && a.eq_ignore_ascii_case(own) => None,
        _ => Some(format!(
            "a request from origin `{origin}` cannot change runs on `{own}`"
        )),
    }
}

/// `host[:port]` names this machine's loopback interface.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inner, "")) => inner,
            Some((inner, port)) if port.strip_prefix(':').is_some_and(is_port) => inner,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        }
    };
    let name = name.to_ascii_lowercase();
    let name = name.strip_suffix('.').unwrap_or(&name);
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_only_those() {
        for ok in [
            "localhost",
            "localhost:7464",
            "LOCALHOST.:80",
            "dash.localhost:1",
            "127.0.0.1:7464",
            "127.1.2.3",
            "[::1]:7464",
            "[::1]",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example:7464",
            "localhost.evil.example",
            "127.0.0.1.nip.io:7464",
            "10.0.0.1:7464",
            "[::2]:1",
            "[::1]x",
            "localhost:",
            "localhost:99999999",
            "",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn a_foreign_origin_or_fetch_site_is_cross_site() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        assert!(cross_site(&headers(&[("host", "127.0.0.1:7464")])).is_none());
        assert!(
            cross_site(&headers(&[
                ("host", "127.0.0.1:7464"),
                ("origin", "http://127.0.0.1:7464"),
                ("sec-fetch-site", "same-origin"),
            ]))
            .is_none()
        );
        for bad in [
            headers(&[
                ("host", "127.0.0.1:7464"),
                ("origin", "http://evil.example"),
            ]),
            headers(&[("host", "127.0.0.1:7464"), ("origin", "null")]),
            headers(&[
                ("host", "127.0.0.1:7464"),
                ("origin", "http://127.0.0.1:7465"),
            ]),
            headers(&[("host", "127.0.0.1:7464"), ("sec-fetch-site", "cross-site")]),
            headers(&[("host", "127.0.0.1:7464"), ("sec-fetch-site", "same-site")]),
        ] {
            assert!(cross_site(&bad).is_some(), "{bad:?}");
        }
    }
}
