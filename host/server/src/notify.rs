//! Delivering notifications: every quarter second the due notifications of
//! the outbox are leased (another server leaves them alone meanwhile),
//! sent to their target — signed with the target's secret, in its format
//! — and recorded as delivered, or due again after a wait that doubles
//! with each failed attempt (1 s, 2 s, … at most 5 minutes), given up
//! after `wfhost_store::notify::MAX_ATTEMPTS`. A crash between the send
//! and the record sends it again: at least once, always with the same
//! delivery id (`X-Wfhost-Delivery`) for the receiver to drop repeats.

use std::time::Duration;

use serde_json::{Value, json};
use wfhost_store::notify::{Notification, Target, text_of};
use wfhost_store::time::now_ms;

use crate::AppState;

/// How often the outbox is looked at.
const LOOK_EVERY: Duration = Duration::from_millis(250);
/// How long one attempt may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a leased notification is left to this server.
const LEASE_MS: i64 = 30_000;
/// The longest wait between attempts.
const MAX_WAIT_MS: i64 = 300_000;

/// Deliver notifications until the server stops; `base` is the server's
/// own URL, for the dashboard links.
pub(crate) async fn deliver(state: AppState, base: String) {
    let client = match reqwest::Client::builder().timeout(SEND_TIMEOUT).build() {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!("notifications: no HTTP client: {e}");
            return;
        }
    };
    let mut warnings = crate::loop_warnings::LoopWarnings::new("notifications");
    loop {
        if state.stopping.begun() {
            return;
        }
        let stores = state.stores.clone();
        let leased = tokio::task::spawn_blocking(move || {
            let Some(mut store) = stores.if_any()? else {
                return Ok::<_, wfhost_store::StoreError>(Vec::new());
            };
            let due = store.lease_notifications(now_ms(), LEASE_MS, 32)?;
            let mut out = Vec::new();
            for n in due {
                let target = store.notify_target(&n.target)?;
                let secret = match target.as_ref().and_then(|t| t.secret.clone()) {
                    Some(name) => {
                        wfhost_store::secrets::HomeSecrets::new(stores.home()).read(&name)?
                    }
                    None => None,
                };
                out.push((n, target, secret));
            }
            Ok(out)
        })
        .await;
        let due = match leased {
            Ok(Ok(due)) => {
                warnings.worked();
                due
            }
            Ok(Err(e)) => {
                warnings.failed(e);
                Vec::new()
            }
            Err(e) => {
                warnings.failed(e);
                Vec::new()
            }
        };
        for (n, target, secret) in due {
            let outcome = match &target {
                Some(t) => send(&client, t, secret.as_deref(), &n, &base).await,
                None => Err("its target was removed".to_string()),
            };
            let retry_at = now_ms() + backoff(n.attempts + 1);
            let stores = state.stores.clone();
            let recorded = tokio::task::spawn_blocking(move || {
                let mut store = stores.existing()?;
                store.notification_attempted(
                    n.id,
                    outcome.as_ref().map(|_| ()).map_err(String::as_str),
                    retry_at,
                )
            })
            .await;
            if let Ok(Err(e)) = recorded {
                tracing::warn!("notifications: {e}");
            }
        }
        let stopping = std::sync::Arc::clone(&state.stopping);
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = stopping.wait() => return,
        }
    }
}

/// The wait after attempt `n` failed: 1 s doubled each time, at most
/// [`MAX_WAIT_MS`].
fn backoff(n: u32) -> i64 {
    1000_i64
        .saturating_mul(1 << n.saturating_sub(1).min(20))
        .min(MAX_WAIT_MS)
}

/// What `target` is sent for notification `n`: the notification as JSON,
/// or Slack's `{"text"}`; with the dashboard link.
fn body_for(target: &Target, n: &Notification, base: &str) -> Value {
    let mut body = n.body.clone();
    if let Some(path) = body.get("dashboard_path").and_then(Value::as_str) {
        body["dashboard_url"] = json!(format!("{base}{path}"));
    }
    match target.format.as_str() {
        "slack" => json!({"text": text_of(&body)}),
        _ => body,
    }
}

/// One attempt: the body POSTed with its delivery id, time and signature.
async fn send(
    client: &reqwest::Client,
    target: &Target,
    secret: Option<&str>,
    n: &Notification,
    base: &str,
) -> Result<(), String> {
    let body = body_for(target, n, base).to_string();
    let stamp = (now_ms() / 1000).to_string();
    let mut request = client
        .post(&target.url)
        .header("Content-Type", "application/json")
        .header("User-Agent", concat!("wfhost/", env!("CARGO_PKG_VERSION")))
        .header("X-Wfhost-Delivery", &n.delivery)
        .header("X-Wfhost-Event", &n.event)
        .header("X-Wfhost-Timestamp", &stamp);
    if let Some(secret) = secret {
        let signature = wfhost_core::webhook::sign(
            secret.as_bytes(),
            &[stamp.as_bytes(), b".", body.as_bytes()],
        );
        request = request.header("X-Wfhost-Signature", signature);
    }
    let answer = request.body(body).send().await.map_err(|e| e.to_string())?;
    let status = answer.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("{} answered {status}", target.url))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn waits_double_from_a_second_up_to_five_minutes() {
        let waits: Vec<i64> = (1..=12).map(super::backoff).collect();
        assert_eq!(&waits[..5], &[1000, 2000, 4000, 8000, 16_000]);
        assert_eq!(waits[11], 300_000);
        assert_eq!(super::backoff(u32::MAX), 300_000);
    }
}
