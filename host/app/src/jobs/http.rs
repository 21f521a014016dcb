//! A small JSON-over-HTTP/1.1 client for `wfhost agent`: one kept-alive
//! connection, made again when it breaks. Plain HTTP only: a server on
//! another machine is reached through a TLS-terminating proxy or a tunnel.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::Value;

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
}

impl Server {
    /// `http://host:port[/prefix]`; `/v1` is added when the URL has no path.
    pub fn parse(url: &str) -> Result<Server, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!("--server {url}: give an http:// URL (for TLS, a local proxy or tunnel)")
        })?;
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
        Ok(Server {
            authority: authority.to_string(),
            base,
            token: None,
        })
    }
}

/// An HTTP answer: status and JSON body (null when empty or not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

pub struct Client {
    server: Server,
    conn: Option<SendRequest<Full<Bytes>>>,
}

impl Client {
    pub fn new(server: Server) -> Client {
        Client { server, conn: None }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        let stream = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::net::TcpStream::connect(&self.server.authority),
        )
        .await
        .map_err(|_| format!("connecting to {} timed out", self.server.authority))?
        .map_err(|e| format!("cannot connect to {}: {e}", self.server.authority))?;
        let _ = stream.set_nodelay(true);
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("{}: {e}", self.server.authority))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(send)
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
        conn.ready().await.map_err(|e| e.to_string())?;
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
        let response = conn
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
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
        let s = Server::parse("http://127.0.0.1:7464").unwrap();
        assert_eq!(
            (s.authority.as_str(), s.base.as_str()),
            ("127.0.0.1:7464", "/v1")
        );
        let s = Server::parse("http://h:1/api/v1/").unwrap();
        assert_eq!(s.base, "/api/v1");
        assert!(
            Server::parse("https://h:1")
                .unwrap_err()
                .contains("http://")
        );
        assert!(Server::parse("http:///v1").is_err());
    }
}
