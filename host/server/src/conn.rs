//! Connections: what one client may hold, and for how long.
//!
//! The server drives hyper's HTTP/1.1 connections itself (not
//! `axum::serve`) so that no peer can exhaust it by opening connections
//! and sending nothing, or sending slowly:
//!
//! - **A cap on connections**, in total and per peer IP address. A
//!   connection over a cap is accepted and closed at once, so the listen
//!   backlog never fills and the process never runs out of file
//!   descriptors (the total is kept below the open-file limit). Before
//!   refusing, the oldest connection that has not authenticated and has no
//!   request under way is closed to make room: connections that only hold
//!   a place cannot lock out a client with a token.
//! - **A header timeout**: a connection must deliver a request's complete
//!   headers within it, from when it is accepted and from the first byte
//!   of each next request.
//! - **An idle timeout**: a kept-alive connection with no request under
//!   way is closed after it. A request under way (a long-poll, the event
//!   stream) is never cut by either.
//! - **Authentication first**: with tokens, a request without a valid one
//!   is answered (401, or the dashboard's public files) with
//!   `Connection: close`, its body never read; only connections that
//!   showed a token stay open between requests, and only they may take
//!   longer than the header timeout to be answered.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::header::{CONNECTION, HeaderValue};
use axum::http::{Request, Response, StatusCode};
use axum::response::IntoResponse;
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tower::ServiceExt;

use crate::auth::Tokens;
use crate::error::ApiError;

/// Limits on what clients may hold (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once, from everyone.
    pub max_connections: usize,
    /// Connections open at once from one IP address.
    pub max_connections_per_peer: usize,
    /// The time a connection has to deliver a request's headers.
    pub header_timeout: Duration,
    /// The time a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
}

/// At most this many connections at once by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// At most this many from one IP address by default (room for 64 local
/// agents, each slot with up to three connections).
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 256;
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// File descriptors kept free of connections for the store, the runs'
/// processes and the local agents.
pub const RESERVED_FDS: u64 = 256;

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

impl ConnectionLimits {
    pub fn check(&self) -> Result<(), String> {
        if self.max_connections == 0 || self.max_connections_per_peer == 0 {
            return Err("connection limits must be at least 1".into());
        }
        if self.header_timeout.is_zero() || self.idle_timeout.is_zero() {
            return Err("connection timeouts must be longer than 0".into());
        }
        Ok(())
    }

    /// These limits with the total lowered, if need be, to fit the
    /// process's open-file limit less [`RESERVED_FDS`]; and a note saying
    /// so when it was lowered.
    pub fn fitted(self) -> (ConnectionLimits, Option<String>) {
        let Some(open_files) = open_file_limit() else {
            return (self, None);
        };
        let room = open_files.saturating_sub(RESERVED_FDS).max(16);
        if (self.max_connections as u64) <= room {
            return (self, None);
        }
        let fitted = ConnectionLimits {
            max_connections: room as usize,
            max_connections_per_peer: self.max_connections_per_peer.min(room as usize),
            ..self
        };
        let note = format!(
            "at most {room} connections (not {}): the open-file limit is {open_files} (`ulimit -n`), and {RESERVED_FDS} are kept for the store and the runs",
            self.max_connections
        );
        (fitted, Some(note))
    }
}

/// The soft `RLIMIT_NOFILE`, if it is finite.
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    (limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// Where connections come from: the TCP listener (over TLS when `tls`
/// is given) and, when `local` is given, streams made in this process
/// (`serve --local-agents`: no socket, no TLS; counted as loopback).
pub struct Listener {
    pub tcp: TcpListener,
    pub tls: Option<crate::tls::Tls>,
    pub local: Option<LocalConnections>,
}

/// The streams of in-process clients (the other ends of [`LocalDialer`]'s).
pub type LocalConnections = mpsc::UnboundedReceiver<DuplexStream>;
/// Where an in-process client sends the server's end of a stream it made.
pub type LocalDialer = mpsc::UnboundedSender<DuplexStream>;

/// An accepted connection, before TLS.
enum Accepted {
    Tcp(TcpStream),
    Local(DuplexStream),
}

/// Serve `app` on `listener` until `shutdown` resolves; then stop
/// accepting, let each connection finish the request under way (idle
/// ones close at once), and return when all have closed.
pub async fn serve(
    mut listener: Listener,
    app: Router,
    tokens: Option<Arc<Tokens>>,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let gate = Arc::new(Gate::new(limits));
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection's task holds a receiver: all gone, all closed.
    let (closed_tx, closed_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (accepted, peer) = tokio::select! {
            accepted = listener.tcp.accept() => match accepted {
                Ok((tcp, peer)) => (Accepted::Tcp(tcp), peer.ip()),
                Err(e) if is_connection_error(&e) => continue,
                // Out of file descriptors despite the cap (the runs' own
                // files): wait for some to close.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(local) = next_local(&mut listener.local) => {
                (Accepted::Local(local), IpAddr::from([127, 0, 0, 1]))
            }
            _ = &mut shutdown => break,
        };
        let Some(admitted) = gate.admit(peer) else {
            // Over a cap: closed at once.
            drop(accepted);
            continue;
        };
        let connection = Connection {
            app: app.clone(),
            tokens: tokens.clone(),
            limits,
        };
        let (stop, closed) = (stop_rx.clone(), closed_rx.clone());
        let tls = listener.tls.clone();
        tokio::spawn(async move {
            match (accepted, tls) {
                (Accepted::Local(stream), _) => connection.run(stream, admitted, stop).await,
                (Accepted::Tcp(tcp), None) => {
                    let _ = tcp.set_nodelay(true);
                    connection.run(tcp, admitted, stop).await;
                }
                (Accepted::Tcp(tcp), Some(tls)) => {
                    let _ = tcp.set_nodelay(true);
                    if let Some(stream) = handshake(&tls, tcp, peer, &admitted.state, limits).await
                    {
                        connection.run(stream, admitted, stop).await;
                    }
                }
            }
            drop(closed);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(closed_rx);
    closed_tx.closed().await;
}

async fn next_local(local: &mut Option<LocalConnections>) -> Option<DuplexStream> {
    match local {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// The TLS handshake of an accepted connection, within the header timeout
/// (and given up if the gate closes the connection to make room). A
/// client that fails it is logged and dropped; nobody else notices.
async fn handshake(
    tls: &crate::tls::Tls,
    tcp: TcpStream,
    peer: IpAddr,
    state: &State,
    limits: ConnectionLimits,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let evicted = async {
        while !state.evicted() {
            state.changed.notified().await;
        }
    };
    let accepted = tokio::select! {
        accepted = tokio::time::timeout(limits.header_timeout, tls.acceptor.accept(tcp)) => accepted,
        () = evicted => return None,
    };
    match accepted {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            tracing::info!(peer = %peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::info!(
                peer = %peer,
                timeout_ms = limits.header_timeout.as_millis() as u64,
                "TLS handshake timed out"
            );
            None
        }
    }
}

fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// The open connections, in the order they were accepted.
struct Gate {
    limits: ConnectionLimits,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next: u64,
    by_age: BTreeMap<u64, (IpAddr, Arc<State>)>,
    per_peer: HashMap<IpAddr, usize>,
}

/// A connection's place in the gate; given back when dropped.
struct Admitted {
    gate: Arc<Gate>,
    id: u64,
    state: Arc<State>,
}

impl Gate {
    fn new(limits: ConnectionLimits) -> Gate {
        Gate {
            limits,
            open: Mutex::new(Open::default()),
        }
    }

    /// A place for a connection from `peer`, making room by closing the
    /// oldest connection that only holds one (no token shown, no request
    /// under way) if a cap is reached; `None` when there is none to close.
    fn admit(self: &Arc<Gate>, peer: IpAddr) -> Option<Admitted> {
        let peer = canonical(peer);
        let mut open = self.open.lock().expect("not poisoned");
        if open.per_peer.get(&peer).copied().unwrap_or(0) >= self.limits.max_connections_per_peer
            && !open.evict(Some(peer))
        {
            return None;
        }
        if open.by_age.len() >= self.limits.max_connections && !open.evict(None) {
            return None;
        }
        let id = open.next;
        open.next += 1;
        let state = Arc::new(State::new());
        open.by_age.insert(id, (peer, state.clone()));
        *open.per_peer.entry(peer).or_default() += 1;
        Some(Admitted {
            gate: self.clone(),
            id,
            state,
        })
    }
}

impl Open {
    /// Close the oldest connection (of `peer`, if given) that holds a
    /// place and nothing else.
    fn evict(&mut self, peer: Option<IpAddr>) -> bool {
        let Some(id) = self
            .by_age
            .iter()
            .find(|(_, (p, state))| peer.is_none_or(|peer| *p == peer) && state.evictable())
            .map(|(id, _)| *id)
        else {
            return false;
        };
        self.remove(id);
        true
    }

    fn remove(&mut self, id: u64) {
        let Some((peer, state)) = self.by_age.remove(&id) else {
            return;
        };
        if let Some(n) = self.per_peer.get_mut(&peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&peer);
            }
        }
        state.close();
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.gate.open.lock().expect("not poisoned");
        open.remove(self.id);
    }
}

/// `::ffff:a.b.c.d` is the IPv4 peer a.b.c.d.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// Where a connection is, shared by its reader, its requests and its
/// watchdog.
struct State {
    phase: Mutex<Phase>,
    /// Something changed that may move the deadline, or the connection
    /// must close.
    changed: Notify,
}

#[derive(Debug, Clone, Copy)]
struct Phase {
    /// Requests under way (their answers not yet all sent).
    in_flight: usize,
    /// Since when it waits (for headers, or idle) or is busy.
    since: Instant,
    /// Waiting for a request's headers (else idle, when none is under way).
    reading_headers: bool,
    /// A request showed a valid token (or the server has none).
    proven: bool,
    /// Closed by the gate to make room.
    evicted: bool,
}

impl State {
    fn new() -> State {
        State {
            phase: Mutex::new(Phase {
                in_flight: 0,
                since: Instant::now(),
                reading_headers: true,
                proven: false,
                evicted: false,
            }),
            changed: Notify::new(),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Phase) -> T) -> T {
        f(&mut self.phase.lock().expect("not poisoned"))
    }

    fn evictable(&self) -> bool {
        self.with(|p| !p.proven && p.in_flight == 0 && !p.evicted)
    }

    fn close(&self) {
        self.with(|p| p.evicted = true);
        self.changed.notify_one();
    }

    /// Bytes arrived: an idle connection starts reading a request.
    fn read_some(&self) {
        let started = self.with(|p| {
            let idle = p.in_flight == 0 && !p.reading_headers;
            if idle {
                p.reading_headers = true;
                p.since = Instant::now();
            }
            idle
        });
        if started {
            self.changed.notify_one();
        }
    }

    fn request_started(&self, proven: bool) {
        self.with(|p| {
            p.in_flight += 1;
            p.reading_headers = false;
            p.proven |= proven;
            p.since = Instant::now();
        });
        self.changed.notify_one();
    }

    fn request_ended(&self) {
        self.with(|p| {
            p.in_flight -= 1;
            if p.in_flight == 0 {
                p.since = Instant::now();
            }
        });
        self.changed.notify_one();
    }

    /// When the connection is to close, if nothing happens before.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        self.with(|p| {
            if p.evicted {
                Some(p.since)
            } else if p.in_flight > 0 {
                // Only an unproven connection's answer is timed: one 401
                // or public file.
                (!p.proven).then_some(p.since + limits.header_timeout)
            } else if p.reading_headers {
                Some(p.since + limits.header_timeout)
            } else {
                Some(p.since + limits.idle_timeout)
            }
        })
    }

    fn evicted(&self) -> bool {
        self.with(|p| p.evicted)
    }
}

/// One accepted connection and what it needs to serve requests.
struct Connection {
    app: Router,
    tokens: Option<Arc<Tokens>>,
    limits: ConnectionLimits,
}

impl Connection {
    async fn run<S>(self, stream: S, admitted: Admitted, mut stop: watch::Receiver<bool>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let state = admitted.state.clone();
        let limits = self.limits;
        let io = TokioIo::new(Watched {
            inner: stream,
            state: state.clone(),
        });
        let this = Arc::new(self);
        let service = {
            let state = state.clone();
            hyper::service::service_fn(move |request: Request<Incoming>| {
                let (this, state) = (this.clone(), state.clone());
                async move { Ok::<_, Infallible>(this.answer(request, state).await) }
            })
        };
        // The header and idle timeouts are this module's watchdog's.
        let conn = hyper::server::conn::http1::Builder::new()
            .header_read_timeout(None)
            .serve_connection(io, service);
        let mut conn = std::pin::pin!(conn);
        let mut stopping = *stop.borrow();
        if stopping {
            conn.as_mut().graceful_shutdown();
        }
        loop {
            let deadline = state.deadline(&limits);
            tokio::select! {
                _ = conn.as_mut() => break,
                _ = state.changed.notified() => {}
                _ = sleep_until(deadline) => {}
                _ = stop.changed(), if !stopping => {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            if state.evicted() || state.deadline(&limits).is_some_and(|d| d <= Instant::now()) {
                // Dropping the connection closes its socket.
                break;
            }
        }
        drop(admitted);
    }

    /// The answer to one request: authentication first (without reading
    /// the body), then the routes.
    async fn answer(&self, request: Request<Incoming>, state: Arc<State>) -> Response<Tracked> {
        let authorized = match &self.tokens {
            None => true,
            Some(tokens) => crate::auth::bearer(request.headers())
                .is_some_and(|presented| tokens.accepts_any(presented)),
        };
        state.request_started(authorized);
        let ended = RequestEnded(state);
        let public = crate::ui::is_public(request.uri().path())
            || crate::hooks::is_delivery(request.method(), request.uri().path());
        let mut response = if authorized || public {
            self.app
                .clone()
                .oneshot(request.map(Body::new))
                .await
                .unwrap_or_else(|e| match e {})
        } else {
            ApiError::unauthorized().into_response()
        };
        if !authorized || response.status() == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        response.map(|body| Tracked {
            body,
            _ended: ended,
        })
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Marks the request ended when its answer's body is done (sent, or
/// dropped with the connection).
struct RequestEnded(Arc<State>);

impl Drop for RequestEnded {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// An answer's body that says when it is done.
struct Tracked {
    body: Body,
    _ended: RequestEnded,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's stream that tells its state when bytes arrive.
struct Watched<S> {
    inner: S,
    state: Arc<State>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.state.read_some();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn gate(total: usize, per_peer: usize) -> Arc<Gate> {
        Arc::new(Gate::new(ConnectionLimits {
            max_connections: total,
            max_connections_per_peer: per_peer,
            ..ConnectionLimits::default()
        }))
    }

    #[test]
    fn a_peer_at_its_cap_makes_room_only_by_closing_its_own_idle_connections() {
        let gate = gate(10, 2);
        let a1 = gate.admit(ip("10.0.0.1")).unwrap();
        let a2 = gate.admit(ip("10.0.0.1")).unwrap();
        let b = gate.admit(ip("10.0.0.2")).unwrap();
        // The third from 10.0.0.1 closes its oldest.
        let a3 = gate.admit(ip("10.0.0.1")).unwrap();
        assert!(a1.state.evicted());
        assert!(!a2.state.evicted() && !b.state.evicted());
        // Proven connections are not closed: the newcomer is refused.
        a2.state.request_started(true);
        a3.state.request_started(true);
        assert!(gate.admit(ip("10.0.0.1")).is_none());
        assert!(gate.admit(ip("::ffff:10.0.0.1")).is_none(), "the same peer");
        assert!(gate.admit(ip("10.0.0.3")).is_some());
        drop(a1);
        assert!(
            gate.admit(ip("10.0.0.1")).is_none(),
            "a1's place was given back once"
        );
    }

    #[test]
    fn at_the_total_cap_the_oldest_unproven_idle_connection_makes_room() {
        let gate = gate(3, 3);
        let proven = gate.admit(ip("10.0.0.9")).unwrap();
        proven.state.request_started(true);
        proven.state.request_ended();
        let busy = gate.admit(ip("10.0.0.8")).unwrap();
        busy.state.request_started(false);
        let idle = gate.admit(ip("10.0.0.7")).unwrap();
        let newcomer = gate.admit(ip("10.0.0.1")).unwrap();
        assert!(idle.state.evicted());
        assert!(!proven.state.evicted() && !busy.state.evicted());
        newcomer.state.request_started(true);
        assert!(
            gate.admit(ip("10.0.0.2")).is_none(),
            "nothing left to close"
        );
        drop(busy);
        assert!(gate.admit(ip("10.0.0.2")).is_some());
    }

    #[test]
    fn deadlines_follow_the_connection_through_its_phases() {
        let limits = ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            ..ConnectionLimits::default()
        };
        let state = State::new();
        let accepted = state.with(|p| p.since);
        assert_eq!(
            state.deadline(&limits),
            Some(accepted + limits.header_timeout)
        );
        // Bytes of the first request do not move its header deadline.
        state.read_some();
        assert_eq!(
            state.deadline(&limits),
            Some(accepted + limits.header_timeout)
        );
        state.request_started(true);
        assert_eq!(
            state.deadline(&limits),
            None,
            "a proven request is not timed"
        );
        state.request_ended();
        let idle = state.with(|p| p.since);
        assert_eq!(state.deadline(&limits), Some(idle + limits.idle_timeout));
        state.read_some();
        let reading = state.with(|p| p.since);
        assert_eq!(
            state.deadline(&limits),
            Some(reading + limits.header_timeout)
        );
        let unproven = State::new();
        unproven.request_started(false);
        assert!(unproven.deadline(&limits).is_some(), "a 401 is timed");
    }

    #[test]
    fn the_total_fits_the_open_file_limit() {
        let (limits, note) = ConnectionLimits {
            max_connections: usize::MAX >> 1,
            ..ConnectionLimits::default()
        }
        .fitted();
        if let Some(open_files) = open_file_limit() {
            assert!(
                limits.max_connections as u64 <= open_files.saturating_sub(RESERVED_FDS).max(16)
            );
            assert!(note.unwrap().contains("ulimit -n"));
        }
    }
}
