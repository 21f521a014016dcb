//! A small JSON-over-HTTP/1.1 client for `wfhost agent`: one kept-alive
//! connection, made again when it breaks; over TLS to an `https://`
//! server (see [`super::tls`]), or over an in-process stream to the server
//! of the same process (`serve --local-agents`).

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::tls::{ClientTls, TlsFiles};

/// The largest answer read (a run's definition is the largest the
/// server sends); larger ones are refused as soon as they pass it.
const MAX_RESPONSE_BYTES: u64 = 64 << 20;

/// Where the server is and how to authenticate.
#[derive(Debug, Clone)]
pub struct Server {
    /// `host:port`.
    pub authority: String,
    /// The path prefix, e.g. `/v1`.
    pub base: String,
    pub token: Option<String>,
    /// For an `https://` server: how it is checked.
    pub tls: Option<ClientTls>,
    /// The server of this process, reached without a socket: the server's
    /// end of each new stream is sent here.
    pub local: Option<LocalDialer>,
}

/// Where an in-process client sends the server's end of a stream
/// (`wfhost_server::LocalDialer`).
pub type LocalDialer = tokio::sync::mpsc::UnboundedSender<tokio::io::DuplexStream>;

impl Server {
    /// `http[s]://host:port[/prefix]`; `/v1` is added when the URL has no
    /// path. `tls` is for `https://` (the CA, the client certificate).
    pub fn parse(url: &str, tls: &TlsFiles) -> Result<Server, String> {
        let (https, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => return Err(format!("--server {url}: give an http:// or https:// URL")),
        };
        let (authority, path) = match rest.split_once('/') {
            Some((a, p)) => (a, format!("/{}", p.trim_end_matches('/'))),
            None => (rest, String::new()),
        };
        if authority.is_empty() {
            return Err(format!("--server {url}: no host"));
        }
        let base = if path.is_empty() || path == "/" {
            "/v1".to_string()
        } else {
            path
        };
        let tls = match https {
            true => Some(ClientTls::load(host_of(authority), tls)?),
            false if tls.any() => {
                return Err(format!(
                    "--server {url}: --ca, --client-cert and --client-key are for an https:// server"
                ));
            }
            false => None,
        };
        Ok(Server {
            authority: authority.to_string(),
            base,
            token: None,
            tls,
            local: None,
        })
    }

    /// The server's URL: `http[s]://host:port/prefix`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority, self.base)
    }
}

/// The host of `host:port` (`[::1]:port` gives `::1`).
fn host_of(authority: &str) -> &str {
    if let Some(bracketed) = authority.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or(bracketed);
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
}

/// A connection's stream: TCP, TLS over TCP, or in-process.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}
impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Stream for S {}

/// An HTTP answer: status and JSON body (null when empty or not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

pub struct Client {
    server: Server,
    conn: Option<SendRequest<Full<Bytes>>>,
    /// The task driving `conn`: its TLS refusal, when the server ended the
    /// connection with one (TLS 1.3 says a client certificate was refused
    /// only after the handshake, so the request meets a closed channel).
    driver: Option<tokio::task::JoinHandle<Option<String>>>,
    /// The last TLS refusal (see [`Client::refused`]).
    refusal: std::sync::Mutex<Option<String>>,
}

impl Client {
    pub fn new(server: Server) -> Client {
        Client {
            server,
            conn: None,
            driver: None,
            refusal: Default::default(),
        }
    }

    /// Why the server cannot be talked to at all, when the last failure
    /// says so (its certificate is not trusted, or it refused ours): one
    /// line naming the option that would fix it; trying again is no use.
    pub fn refused(&self) -> Option<String> {
        self.refusal.lock().expect("not poisoned").clone()
    }

    async fn connect(&mut self) -> Result<SendRequest<Full<Bytes>>, String> {
        let stream = self.open().await?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("{}: {e}", self.server.authority))?;
        let authority = self.server.authority.clone();
        self.driver = Some(tokio::spawn(async move {
            let e = conn.await.err()?;
            super::tls::rustls_cause(&e).and_then(|tls| super::tls::refusal(&authority, tls))
        }));
        Ok(send)
    }

    async fn open(&mut self) -> Result<Box<dyn Stream>, String> {
        let authority = &self.server.authority;
        if let Some(dialer) = &self.server.local {
            let (ours, theirs) = tokio::io::duplex(64 << 10);
            dialer
                .send(theirs)
                .map_err(|_| format!("the server of this process ({authority}) has stopped"))?;
            return Ok(Box::new(ours));
        }
        let connecting = async {
            let tcp = tokio::net::TcpStream::connect(authority)
                .await
                .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
            let _ = tcp.set_nodelay(true);
            let Some(tls) = &self.server.tls else {
                return Ok(Box::new(tcp) as Box<dyn Stream>);
            };
            match tls.connector.connect(tls.name.clone(), tcp).await {
                Ok(stream) => Ok(Box::new(stream) as Box<dyn Stream>),
                Err(e) => self.failed(&e, e.to_string()),
            }
        };
        tokio::time::timeout(Duration::from_secs(10), connecting)
            .await
            .map_err(|_| format!("connecting to {authority} timed out"))?
    }

    /// Whether the connection's driver ended (waiting a moment for it)
    /// with a TLS refusal, which is then kept (see [`Client::refused`]).
    async fn driver_refused(&mut self) -> bool {
        let Some(driver) = self.driver.take() else {
            return false;
        };
        let ended = tokio::time::timeout(Duration::from_secs(1), driver).await;
        let Ok(Ok(Some(refusal))) = ended else {
            return false;
        };
        tracing::debug!(server = %self.server.authority, "{refusal}");
        *self.refusal.lock().expect("not poisoned") = Some(refusal);
        true
    }

    /// The driver's TLS refusal, else `line`.
    async fn refusal_or(&mut self, line: String) -> String {
        match self.driver_refused().await {
            true => self.refused().unwrap_or(line),
            false => line,
        }
    }

    /// The error `e` of the connection as one line (`line` unless TLS
    /// says why); a TLS refusal is kept (see [`Client::refused`]).
    fn failed<T>(&self, e: &(dyn std::error::Error + 'static), line: String) -> Result<T, String> {
        let authority = &self.server.authority;
        match super::tls::rustls_cause(e).and_then(|tls| super::tls::refusal(authority, tls)) {
            Some(refusal) => {
                tracing::debug!(server = %authority, "{refusal}");
                *self.refusal.lock().expect("not poisoned") = Some(refusal.clone());
                Err(refusal)
            }
            None => Err(format!("{authority}: {line}")),
        }
    }

    /// POST `body` to `path` (under the base); waits at most `timeout`.
    pub async fn post(
        &mut self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Answer, String> {
        let bytes = Bytes::from(body.to_string());
        let (status, answer) = self
            .exchange(hyper::Method::POST, path, bytes, timeout)
            .await?;
        Ok(Answer {
            status,
            body: serde_json::from_slice(&answer).unwrap_or(Value::Null),
        })
    }

    /// GET `path` (under the base): the status and the body as sent.
    pub async fn get(&mut self, path: &str, timeout: Duration) -> Result<(u16, Bytes), String> {
        self.exchange(hyper::Method::GET, path, Bytes::new(), timeout)
            .await
    }

    async fn exchange(
        &mut self,
        method: hyper::Method,
        path: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<(u16, Bytes), String> {
        // A kept-alive connection the server closed fails at once: retry
        // once on a new one.
        for tries_left in [1, 0] {
            let sent = self.send(method.clone(), path, body.clone());
            match tokio::time::timeout(timeout, sent).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(e)) if tries_left == 0 => return Err(e),
                Ok(Err(_)) => self.conn = None,
                Err(_) => {
                    self.conn = None;
                    return Err(format!("{path}: no answer within {} s", timeout.as_secs()));
                }
            }
        }
        unreachable!("the loop returns")
    }

    async fn send(
        &mut self,
        method: hyper::Method,
        path: &str,
        body: Bytes,
    ) -> Result<(u16, Bytes), String> {
        let mut conn = match self.conn.take() {
            Some(conn) if !conn.is_closed() => conn,
            _ => self.connect().await?,
        };
        if let Err(e) = conn.ready().await {
            return Err(self.refusal_or(e.to_string()).await);
        }
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.server.base))
            .header(hyper::header::HOST, &self.server.authority)
            .header(hyper::header::CONTENT_TYPE, "application/json");
        if let Some(token) = &self.server.token {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        // The server's span of this call goes under the caller's (a job's).
        if let Some(parent) = wfhost_protocol::trace::current() {
            request = request.header(wfhost_protocol::trace::TRACEPARENT, parent);
        }
        let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
        let response = match conn.send_request(request).await {
            Ok(response) => response,
            Err(e) => {
                if self.driver_refused().await {
                    return Err(self.refused().unwrap_or_default());
                }
                return self.failed(&e, e.to_string());
            }
        };
        let status = response.status().as_u16();
        let declared = response
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.trim().parse().ok());
        let bytes = wfhost_core::bounded_read::read_capped(
            response.into_body().into_data_stream(),
            declared,
            MAX_RESPONSE_BYTES,
            format!(
                "the answer of {}{}{path}",
                self.server.authority, self.server.base
            ),
        )
        .await
        .map_err(|e| format!("reading the answer: {e}"))?;
        self.conn = Some(conn);
        Ok((status, Bytes::from(bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        let none = TlsFiles::default();
        let s = Server::parse("http://127.0.0.1:7464", &none).unwrap();
        assert_eq!(
            (s.authority.as_str(), s.base.as_str()),
            ("127.0.0.1:7464", "/v1")
        );
        assert_eq!(s.url(), "http://127.0.0.1:7464/v1");
        let s = Server::parse("http://h:1/api/v1/", &none).unwrap();
        assert_eq!(s.base, "/api/v1");
        assert!(
            Server::parse("ftp://h:1", &none)
                .unwrap_err()
                .contains("http:// or https://")
        );
        assert!(Server::parse("http:///v1", &none).is_err());
        let ca = TlsFiles {
            ca: Some("/nowhere/ca.pem".into()),
            ..TlsFiles::default()
        };
        let err = Server::parse("http://h:1", &ca).unwrap_err();
        assert!(err.contains("are for an https:// server"), "{err}");
        let err = Server::parse("https://h:1", &ca).unwrap_err();
        assert!(err.contains("--ca: cannot read /nowhere/ca.pem"), "{err}");
    }

    #[test]
    fn the_host_tls_checks_is_the_authority_without_its_port() {
        assert_eq!(host_of("example.org:7464"), "example.org");
        assert_eq!(host_of("[::1]:7464"), "::1");
        assert_eq!(host_of("10.0.0.1:1"), "10.0.0.1");
        assert_eq!(host_of("example.org"), "example.org");
    }
}
