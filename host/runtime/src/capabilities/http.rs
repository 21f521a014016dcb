//! The `http` capability: `wasi:http`'s outgoing requests, made by the
//! host for a worker granted `http`, and only to the hosts its workflow
//! lists in `plugins.<name>.http.allow` (within the operator's
//! `http_allow`). The policy is the core's
//! (`wfhost_core::policy::http`); this module enforces it on each request:
//!
//! - the method, scheme, host and port are checked before anything is
//!   sent (the guest follows redirects itself, so each hop is checked);
//! - `${secret.NAME}` placeholders in the URL, header values and body are
//!   filled in only when the host's entry lists `NAME`; any other
//!   placeholder refuses the request;
//! - the request body is read whole, up to `max_request_bytes`; the
//!   response body is cut at `max_response_bytes`; the whole exchange is
//!   bounded by `timeout`;
//! - every secret value sent is masked (`***`) in the response headers and
//!   body the guest reads.
//!
//! A refusal reaches the guest as `wasi:http`'s `HTTP-request-denied` and
//! the block's log as a line saying why.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use wasmtime::component::Linker;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks, WasiHttpView};
use wfhost_core::policy::http::{self as policy, Policy, Target};
use wfhost_core::policy::secrets::{MaskStream, Masker, Secrets};

/// The capability's state in a store: the calling plugin's policy (none:
/// every request refused), where secrets are read, and the lines for the
/// block's log.
pub struct HttpState {
    pub policy: Option<Arc<Policy>>,
    pub secrets: Secrets,
    pub notes: Arc<Mutex<Vec<String>>>,
}

impl HttpState {
    pub fn new(policy: Option<Arc<Policy>>, secrets: Secrets) -> HttpState {
        HttpState {
            policy,
            secrets,
            notes: Arc::default(),
        }
    }

    /// The lines for the block's log, taken.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().expect("not poisoned"))
    }
}

/// Add `wasi:http`'s interfaces (admission keeps them from plugins not
/// granted `http`).
pub(crate) fn link<T: WasiHttpView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
}

type Sent = wasmtime_wasi_http::Result<(
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
)>;

impl WasiHttpHooks for HttpState {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let notes = self.notes.clone();
        let checked = match &self.policy {
            None => Err("this plugin is not granted `http`".to_string()),
            Some(policy) => Exchange::check(policy.clone(), &request, &self.secrets),
        };
        Box::new(async move {
            let exchange = checked.map_err(|reason| deny(&notes, reason))?;
            exchange.send(request, options, notes).await
        })
    }
}

fn deny(notes: &Mutex<Vec<String>>, reason: String) -> Error {
    tracing::info!(%reason, "http request refused");
    notes
        .lock()
        .expect("not poisoned")
        .push(format!("http: refused {reason}"));
    Error::HttpRequestDenied
}

/// A request that passed the checks that need no body.
struct Exchange {
    policy: Arc<Policy>,
    shown: String,
    /// The secrets its host may receive, with their values.
    granted: Vec<(String, String)>,
}

impl Exchange {
    fn check(
        policy: Arc<Policy>,
        request: &http::Request<WasiBody>,
        secrets: &Secrets,
    ) -> Result<Exchange, String> {
        let uri = request.uri();
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            other => return Err(format!("{uri}: scheme {other:?} is not http or https")),
        };
        let host = uri.host().ok_or_else(|| format!("{uri}: no host"))?;
        let method = request.method().as_str();
        let target = Target {
            method,
            https,
            host,
            port: uri.port_u16(),
        };
        let shown = format!("{method} {}", without_query(uri));
        let rule = policy.allow(target)?;
        let mut granted = Vec::new();
        for name in &rule.secrets {
            if let Some(value) = secrets.get(name) {
                granted.push((name.clone(), value));
            }
        }
        let exchange = Exchange {
            shown,
            granted,
            policy: policy.clone(),
        };
        let head = request.uri().to_string().into_bytes();
        exchange.allowed_placeholders(&head, "its URL", rule)?;
        for (name, value) in request.headers() {
            exchange.allowed_placeholders(value.as_bytes(), &format!("header `{name}`"), rule)?;
        }
        Ok(exchange)
    }

    /// Every placeholder in `bytes` names a secret this host may receive
    /// and that is set.
    fn allowed_placeholders(
        &self,
        bytes: &[u8],
        place: &str,
        rule: &policy::Rule,
    ) -> Result<(), String> {
        let shown = &self.shown;
        let plugin = &self.policy.plugin;
        for name in policy::placeholders(bytes).map_err(|e| format!("{shown}: {place}: {e}"))? {
            if !rule.secrets.contains(&name) {
                return Err(format!(
                    "{shown}: {place} carries the placeholder of secret `{name}`, which \
                     plugins.{plugin}.http.allow does not let `{}` receive",
                    rule.shown
                ));
            }
            if !self.granted.iter().any(|(n, _)| *n == name) {
                return Err(format!(
                    "{shown}: secret `{name}` is not set on this host: `wfhost secret set {name}`"
                ));
            }
        }
        Ok(())
    }

    async fn send(
        self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        notes: Arc<Mutex<Vec<String>>>,
    ) -> Sent {
        let deadline = tokio::time::Instant::now() + self.policy.timeout;
        let (mut parts, body) = request.into_parts();
        let body = self
            .read_body(body, deadline)
            .await
            .map_err(|reason| deny(&notes, reason))?;
        let rule = self
            .rule_of(&parts)
            .map_err(|reason| deny(&notes, reason))?;
        self.allowed_placeholders(&body, "its body", &rule)
            .map_err(|reason| deny(&notes, reason))?;
        self.fill_head(&mut parts)
            .map_err(|reason| deny(&notes, reason))?;
        let body = policy::fill(&body, &self.granted);
        parts.headers.remove(http::header::CONTENT_LENGTH);
        if !body.is_empty() {
            parts
                .headers
                .insert(http::header::CONTENT_LENGTH, body.len().into());
        }
        let request = http::Request::from_parts(
            parts,
            http_body_util::Full::new(Bytes::from(body))
                .map_err(|never| match never {})
                .boxed_unsync(),
        );
        let options = self.capped(options);
        let sent = tokio::time::timeout_at(
            deadline,
            wasmtime_wasi_http::default_send_request(request, Some(options)),
        )
        .await;
        let (response, io) = match sent {
            Err(_) => {
                note(&notes, format!("http: {} timed out", self.shown));
                return Err(Error::ConnectionTimeout);
            }
            Ok(result) => result?,
        };
        let masker = Masker::new(self.granted.iter().map(|(_, v)| v.as_bytes()));
        let (mut head, body) = response.into_parts();
        mask_headers(&mut head.headers, &masker);
        let body = Capped {
            inner: body.boxed_unsync(),
            left: self.policy.max_response_bytes,
            mask: masker.stream(),
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            notes,
            shown: self.shown.clone(),
            done: false,
        };
        Ok((
            http::Response::from_parts(head, body.boxed_unsync()),
            Box::new(io) as Box<dyn Future<Output = _> + Send>,
        ))
    }

    fn rule_of(&self, parts: &http::request::Parts) -> Result<policy::Rule, String> {
        let uri = &parts.uri;
        let target = Target {
            method: parts.method.as_str(),
            https: uri.scheme_str() == Some("https"),
            host: uri.host().unwrap_or_default(),
            port: uri.port_u16(),
        };
        self.policy.allow(target).cloned()
    }

    /// The body, whole, within the size limit and the deadline.
    async fn read_body(
        &self,
        body: WasiBody,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<u8>, String> {
        let limit = self.policy.max_request_bytes;
        let limited = http_body_util::Limited::new(body, limit as usize);
        match tokio::time::timeout_at(deadline, limited.collect()).await {
            Err(_) => Err(format!("{}: its body was not written in time", self.shown)),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(format!(
                "{}: its body is over {limit} bytes (plugins.{}.http.max_request_bytes)",
                self.shown, self.policy.plugin
            )),
            Ok(Err(e)) => Err(format!("{}: its body could not be read: {e}", self.shown)),
            Ok(Ok(collected)) => Ok(collected.to_bytes().to_vec()),
        }
    }

    /// The URL and header values with the placeholders filled in.
    fn fill_head(&self, parts: &mut http::request::Parts) -> Result<(), String> {
        if self.granted.is_empty() {
            return Ok(());
        }
        let uri = policy::fill(parts.uri.to_string().as_bytes(), &self.granted);
        parts.uri = http::Uri::try_from(uri)
            .map_err(|e| format!("{}: its URL with secrets filled in: {e}", self.shown))?;
        for value in parts.headers.values_mut() {
            let filled = policy::fill(value.as_bytes(), &self.granted);
            if filled != value.as_bytes() {
                let mut new = http::HeaderValue::from_bytes(&filled).map_err(|_| {
                    format!("{}: a secret is not valid in a header value", self.shown)
                })?;
                new.set_sensitive(true);
                *value = new;
            }
        }
        Ok(())
    }

    /// The guest's timeouts, none longer than the grant's.
    fn capped(&self, options: Option<RequestOptions>) -> RequestOptions {
        let most = self.policy.timeout;
        let cap = |d: Option<Duration>| Some(d.map_or(most, |d| d.min(most)));
        let options = options.unwrap_or_default();
        RequestOptions {
            connect_timeout: cap(options.connect_timeout),
            first_byte_timeout: cap(options.first_byte_timeout),
            between_bytes_timeout: cap(options.between_bytes_timeout),
        }
    }
}

fn note(notes: &Mutex<Vec<String>>, line: String) {
    notes.lock().expect("not poisoned").push(line);
}

fn without_query(uri: &http::Uri) -> String {
    let mut shown = format!(
        "{}://{}{}",
        uri.scheme_str().unwrap_or("?"),
        uri.authority().map(|a| a.as_str()).unwrap_or(""),
        uri.path()
    );
    if uri.query().is_some() {
        shown.push_str("?…");
    }
    shown
}

fn mask_headers(headers: &mut http::HeaderMap, masker: &Masker) {
    if masker.is_empty() {
        return;
    }
    for value in headers.values_mut() {
        let masked = masker.mask(value.as_bytes());
        if masked != value.as_bytes() {
            // Never the unmasked value, even if the masked one would not be
            // a valid header value.
            *value = http::HeaderValue::from_bytes(&masked)
                .unwrap_or_else(|_| http::HeaderValue::from_static("***"));
        }
    }
}

/// A response body cut at the size limit and the deadline, with the
/// secrets sent masked.
struct Capped {
    inner: WasiBody,
    left: u64,
    mask: MaskStream,
    deadline: Pin<Box<tokio::time::Sleep>>,
    notes: Arc<Mutex<Vec<String>>>,
    shown: String,
    done: bool,
}

impl Body for Capped {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.done = true;
            let line = format!("http: {}: the response did not end in time", self.shown);
            note(&self.notes, line);
            return Poll::Ready(Some(Err(Error::HttpResponseTimeout)));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.done = true;
                let rest = self.mask.finish();
                if rest.is_empty() {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))))
                }
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => self.data(data),
                Err(trailers) => Poll::Ready(Some(Ok(trailers))),
            },
        }
    }
}

impl Capped {
    fn data(&mut self, data: Bytes) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let len = data.len() as u64;
        if len > self.left {
            self.done = true;
            let line = format!(
                "http: {}: the response body is over its size limit",
                self.shown
            );
            note(&self.notes, line);
            return Poll::Ready(Some(Err(Error::HttpResponseBodySize(None))));
        }
        self.left -= len;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(self.mask.push(&data))))))
    }
}
