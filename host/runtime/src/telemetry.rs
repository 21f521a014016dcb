//! Telemetry from agents: the events an agent CLI sends to its
//! `TELEMETRY_URL` while its block runs.
//!
//! The hub knows which block execution (and lane) is running behind each
//! address it hands out: every agent invocation gets its own address,
//! `<base>/<token>` with an unguessable token, valid until its block ends.
//! An event is attributed from the address it was sent to, never from what
//! it says. What is accepted is validated and capped here, then queued for
//! the engine, which records it in the run's log
//! ([`wfhost_core::run::engine::TelemetrySource::telemetry`]). The HTTP side (a
//! listener on loopback) is the host's: this module has no network.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use wfhost_core::run::engine::Telemetry;

/// The largest body one POST may carry.
pub const MAX_BODY_BYTES: usize = 64 << 10;
/// The most events one POST may carry (a JSON array of objects).
pub const MAX_BATCH: usize = 100;
/// The most events one block execution (or lane) may record.
pub const MAX_EVENTS_PER_BLOCK: usize = 1_000;

/// Why an event was not accepted (each maps to an HTTP status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No block runs behind this address (it never did, or it ended).
    Unknown,
    /// Over [`MAX_BODY_BYTES`].
    TooLarge,
    /// Not a JSON object or an array of at most [`MAX_BATCH`] of them.
    Invalid(String),
    /// The block already sent [`MAX_EVENTS_PER_BLOCK`].
    TooMany,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Unknown => write!(f, "no block is running behind this address"),
            Refusal::TooLarge => write!(f, "the body is over {MAX_BODY_BYTES} bytes"),
            Refusal::Invalid(why) => write!(f, "{why}"),
            Refusal::TooMany => write!(
                f,
                "this block already sent {MAX_EVENTS_PER_BLOCK} telemetry events, the most one may"
            ),
        }
    }
}

/// Where a block's agents send telemetry, for as long as it runs.
pub struct TelemetryHub {
    base_url: String,
    running: Mutex<HashMap<String, Running>>,
    /// Accepted and not taken yet, oldest first.
    queued: Mutex<VecDeque<Telemetry>>,
    arrived: Notify,
}

struct Running {
    step: u64,
    node: String,
    block: String,
    lane: Option<String>,
    accepted: usize,
}

/// The address handed to one agent invocation; dropping it ends it (later
/// events sent there are refused as [`Refusal::Unknown`]).
pub struct Ticket {
    hub: Arc<TelemetryHub>,
    token: String,
}

impl Ticket {
    /// The `TELEMETRY_URL` to give the agent.
    pub fn url(&self) -> String {
        format!("{}/{}", self.hub.base_url, self.token)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.hub.running.lock().unwrap().remove(&self.token);
    }
}

impl TelemetryHub {
    /// A hub whose addresses start with `base_url` (the listener's
    /// `http://127.0.0.1:<port>/telemetry`).
    pub fn new(base_url: impl Into<String>) -> Arc<Self> {
        Arc::new(TelemetryHub {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            running: Mutex::new(HashMap::new()),
            queued: Mutex::new(VecDeque::new()),
            arrived: Notify::new(),
        })
    }

    /// An address for an agent of the block execution `step` of
    /// `node.block` (in `lane`, for a parallel block's lane).
    pub fn register(
        self: &Arc<Self>,
        step: u64,
        node: &str,
        block: &str,
        lane: Option<&str>,
    ) -> std::io::Result<Ticket> {
        let token = wfhost_core::random::token()?;
        self.running.lock().unwrap().insert(
            token.clone(),
            Running {
                step,
                node: node.to_string(),
                block: block.to_string(),
                lane: lane.map(str::to_string),
                accepted: 0,
            },
        );
        Ok(Ticket {
            hub: Arc::clone(self),
            token,
        })
    }

    /// Take a POST of `body` to the address with `token`: a JSON object, or
    /// an array of objects. Returns how many events were queued.
    pub fn accept(&self, token: &str, body: &[u8]) -> Result<usize, Refusal> {
        let mut running = self.running.lock().unwrap();
        let Some(block) = running.get_mut(token) else {
            return Err(Refusal::Unknown);
        };
        if body.len() > MAX_BODY_BYTES {
            return Err(Refusal::TooLarge);
        }
        let events = parse(body)?;
        if block.accepted + events.len() > MAX_EVENTS_PER_BLOCK {
            return Err(Refusal::TooMany);
        }
        block.accepted += events.len();
        let n = events.len();
        let mut queued = self.queued.lock().unwrap();
        queued.extend(events.into_iter().map(|body| Telemetry {
            step: block.step,
            node: block.node.clone(),
            block: block.block.clone(),
            lane: block.lane.clone(),
            body,
        }));
        drop(queued);
        // Every waiter looks: each may want other blocks' events.
        self.arrived.notify_waiters();
        Ok(n)
    }

    /// The next events accepted (at least one; waits until there are).
    /// Cancel-safe.
    pub async fn next(&self) -> Vec<Telemetry> {
        loop {
            let arrived = self.arrived.notified();
            let all = self.take();
            if !all.is_empty() {
                return all;
            }
            arrived.await;
        }
    }

    /// The next events accepted for which `wanted` holds (at least one;
    /// waits until there are). Cancel-safe.
    pub async fn next_where(&self, wanted: impl Fn(&Telemetry) -> bool) -> Vec<Telemetry> {
        loop {
            let arrived = self.arrived.notified();
            let taken = self.take_where(&wanted);
            if !taken.is_empty() {
                return taken;
            }
            arrived.await;
        }
    }

    /// The events accepted and not taken yet.
    pub fn take(&self) -> Vec<Telemetry> {
        self.queued.lock().unwrap().drain(..).collect()
    }

    /// The events accepted and not taken yet for which `wanted` holds,
    /// leaving the others (an agent process takes one job's telemetry when
    /// that job ends, while others may still run).
    pub fn take_where(&self, wanted: impl Fn(&Telemetry) -> bool) -> Vec<Telemetry> {
        let mut queued = self.queued.lock().unwrap();
        let (taken, kept): (VecDeque<_>, VecDeque<_>) = queued.drain(..).partition(|t| wanted(t));
        *queued = kept;
        taken.into()
    }
}

fn parse(body: &[u8]) -> Result<Vec<serde_json::Value>, Refusal> {
    let invalid = |why: String| Refusal::Invalid(why);
    // An event is kept in the run's log inside other JSON: its nesting
    // stays well within what the log's readers parse.
    wfhost_core::limits::json_depth(body).map_err(|e| invalid(format!("the body is {e}")))?;
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| invalid(format!("the body is not JSON: {e}")))?;
    let events = match value {
        serde_json::Value::Array(items) => items,
        other => vec![other],
    };
    if events.len() > MAX_BATCH {
        return Err(invalid(format!(
            "{} events in one body, over the {MAX_BATCH} one may carry",
            events.len()
        )));
    }
    if let Some(i) = events.iter().position(|e| !e.is_object()) {
        return Err(invalid(format!(
            "event {i} is not a JSON object (send an object, or an array of objects)"
        )));
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_are_attributed_by_address_and_capped() {
        let hub = TelemetryHub::new("http://127.0.0.1:1/telemetry/");
        let ticket = hub.register(3, "main", "impl", Some("b")).unwrap();
        let token = ticket.url().rsplit('/').next().unwrap().to_string();
        assert!(ticket.url().starts_with("http://127.0.0.1:1/telemetry/"));
        // What the sender claims about itself does not matter.
        let n = hub
            .accept(&token, br#"[{"type": "tool", "node": "forged"}, {"n": 2}]"#)
            .unwrap();
        assert_eq!(n, 2);
        let got = hub.next().await;
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].step, got[0].node.as_str(), got[0].lane.as_deref()),
            (3, "main", Some("b"))
        );
        assert_eq!(got[0].body["node"], "forged");
        for (body, refusal) in [
            (&b"not json"[..], "not JSON"),
            (b"42", "not a JSON object"),
            (b"[{}, 1]", "event 1"),
        ] {
            match hub.accept(&token, body) {
                Err(Refusal::Invalid(why)) => assert!(why.contains(refusal), "{why}"),
                other => panic!("{other:?}"),
            }
        }
        // Deeper than the host parses (the log keeps the event inside more
        // JSON): refused before it is parsed.
        let deep = format!("{{\"x\": {}{}}}", "[".repeat(100), "]".repeat(100));
        match hub.accept(&token, deep.as_bytes()) {
            Err(Refusal::Invalid(why)) => assert!(why.contains("nested more than 64"), "{why}"),
            other => panic!("{other:?}"),
        }
        let big = format!("{{\"x\": \"{}\"}}", "a".repeat(MAX_BODY_BYTES));
        assert_eq!(hub.accept(&token, big.as_bytes()), Err(Refusal::TooLarge));
        let batch = format!("[{}]", vec!["{}"; MAX_BATCH + 1].join(","));
        assert!(matches!(
            hub.accept(&token, batch.as_bytes()),
            Err(Refusal::Invalid(_))
        ));
        let full = format!("[{}]", vec!["{}"; MAX_BATCH].join(","));
        for _ in 0..(MAX_EVENTS_PER_BLOCK - 2) / MAX_BATCH {
            hub.accept(&token, full.as_bytes()).unwrap();
        }
        assert_eq!(hub.accept(&token, full.as_bytes()), Err(Refusal::TooMany));
        assert_eq!(hub.take().len(), MAX_EVENTS_PER_BLOCK - 2 - 98);
        // A block that ended takes no more.
        drop(ticket);
        assert_eq!(hub.accept(&token, b"{}"), Err(Refusal::Unknown));
        assert_eq!(hub.accept("guess", b"{}"), Err(Refusal::Unknown));
    }

    #[tokio::test]
    async fn one_blocks_telemetry_is_taken_and_the_rest_left_in_order() {
        let hub = TelemetryHub::new("http://127.0.0.1:1/telemetry");
        let a = hub.register(1, "main", "a", None).unwrap();
        let b = hub.register(2, "main", "b", None).unwrap();
        let token = |t: &Ticket| t.url().rsplit('/').next().unwrap().to_string();
        // A waiter is woken by what arrives after it started waiting.
        let waiting = tokio::spawn({
            let hub = Arc::clone(&hub);
            async move { hub.next().await }
        });
        tokio::task::yield_now().await;
        hub.accept(&token(&a), br#"{"n": 1}"#).unwrap();
        assert_eq!(waiting.await.unwrap()[0].body["n"], 1);
        hub.accept(&token(&b), br#"{"n": 2}"#).unwrap();
        hub.accept(&token(&a), br#"{"n": 3}"#).unwrap();
        hub.accept(&token(&b), br#"{"n": 4}"#).unwrap();
        let of_b = hub.take_where(|t| t.block == "b");
        let ns = |v: &[Telemetry]| v.iter().map(|t| t.body["n"].clone()).collect::<Vec<_>>();
        assert_eq!(ns(&of_b), [2, 4]);
        assert_eq!(ns(&hub.take()), [3]);
        assert!(hub.take().is_empty());
    }
}
