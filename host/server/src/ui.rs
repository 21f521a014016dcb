//! The dashboard: one page and its script and style, embedded in the
//! binary (no CDN, no build step, works offline). The page holds no data:
//! it reads everything through the same `/v1` API as any other client, so
//! it is served without a token and asks for one when the API wants it.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX: &str = include_str!("../ui/index.html");
const SCRIPT: &str = include_str!("../ui/app.js");
const STYLE: &str = include_str!("../ui/app.css");

/// Only this server's own script, style and API; no framing.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The paths served without a token (the page asks for one).
const PUBLIC: [&str; 3] = ["/", "/ui/app.js", "/ui/app.css"];

pub(crate) fn is_public(path: &str) -> bool {
    PUBLIC.contains(&path)
}

pub fn routes() -> Router {
    Router::new()
        .route(
            PUBLIC[0],
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            PUBLIC[1],
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            PUBLIC[2],
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
