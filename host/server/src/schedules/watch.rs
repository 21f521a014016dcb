//! Starting scheduled runs: every quarter second, the schedules whose next
//! tick has come are handled — each due tick recorded once with the run it
//! starts (its id chosen first), skipped or queued by the schedule's
//! overlap policy, the ticks missed while no server looked caught up as
//! the schedule says — and the runs of recorded ticks are started. A tick
//! whose run is not in the store yet (a crash between the record and the
//! start) is started again under the same id; one whose run is there is
//! done. A queued tick starts once the schedule's run going has ended.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wfhost_core::schedule::{Cron, Overlap, TickAction};
use wfhost_protocol::RunRequest;
use wfhost_store::schedules::{Schedule, Tick, tick_state};
use wfhost_store::time::now_ms;
use wfhost_store::{Store, StoreError};

use crate::AppState;

/// How often the schedules are looked at.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// The statuses of a run still going: a schedule's next tick overlaps it.
const GOING: &[&str] = &["running", "waiting", "sleeping"];

/// Start scheduled runs until the server stops.
pub(crate) async fn watch(state: AppState) {
    let Some(runner) = state.runner.clone() else {
        return;
    };
    // Ticks whose start is under way in this server.
    let starting: Arc<Mutex<HashSet<(String, i64, bool)>>> = Arc::default();
    let mut warnings = crate::loop_warnings::LoopWarnings::new("schedules");
    loop {
        if state.stopping.begun() {
            return;
        }
        let stores = state.stores.clone();
        let looked = tokio::task::spawn_blocking(move || -> Result<Vec<Start>, StoreError> {
            let Some(mut store) = stores.if_any()? else {
                return Ok(Vec::new());
            };
            handle_due(&mut store, now_ms())?;
            to_start(&mut store)
        })
        .await;
        let starts = match looked {
            Ok(Ok(starts)) => {
                warnings.worked();
                starts
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
        for start in starts {
            let key = (
                start.tick.schedule.clone(),
                start.tick.tick_ms,
                start.tick.manual,
            );
            if !lock(&starting).insert(key.clone()) {
                continue;
            }
            let (runner, stores, starting) = (
                Arc::clone(&runner),
                state.stores.clone(),
                Arc::clone(&starting),
            );
            let home = state.stores.home().to_path_buf();
            tokio::task::spawn_blocking(move || {
                let result = start
                    .workspace
                    .as_ref()
                    .map_or(Ok(()), |dir| make_workspace(dir))
                    .and_then(|()| runner.submit(&home, &start.request).map(|_| ()));
                if let Ok(mut store) = stores.existing() {
                    settle(&mut store, &start.tick, result);
                }
                lock(&starting).remove(&key);
            });
        }
        let stopping = Arc::clone(&state.stopping);
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = stopping.wait() => return,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A tick's run to start.
struct Start {
    tick: Tick,
    request: RunRequest,
    /// A workspace of its own to make first (the schedule's has `{run}`).
    workspace: Option<String>,
}

/// Make a run's own workspace (its parent must exist: a mistyped path is
/// refused, not made).
fn make_workspace(dir: &str) -> Result<(), wfhost_protocol::AppError> {
    let path = std::path::Path::new(dir);
    if path.is_dir() {
        return Ok(());
    }
    std::fs::create_dir(path).map_err(|e| {
        wfhost_protocol::AppError::bad_input(format!("cannot make the run's workspace {dir}: {e}"))
    })
}

/// Record what the due ticks of every due schedule do, once each.
pub(crate) fn handle_due(store: &mut Store, now: i64) -> Result<(), StoreError> {
    for schedule in store.due_schedules(now)? {
        let Some(expected) = schedule.next_tick_ms else {
            continue;
        };
        let cron = match Cron::parse(&schedule.cron, &schedule.tz) {
            Ok(cron) => cron,
            Err((_, why)) => {
                tracing::warn!(schedule = %schedule.name, "schedules: {why}");
                continue;
            }
        };
        let due = cron.due(expected, now, schedule.catch_up);
        let ticks = decide(store, &schedule, &due.start, now)?;
        store.handle_ticks(
            &schedule.name,
            expected,
            &ticks,
            (due.next_tick_ms, due.missed),
        )?;
    }
    Ok(())
}

/// What each of `ticks` does, by the schedule's overlap policy.
fn decide(
    store: &Store,
    schedule: &Schedule,
    ticks: &[i64],
    now: i64,
) -> Result<Vec<Tick>, StoreError> {
    let overlap = Overlap::parse(&schedule.overlap).unwrap_or_default();
    let recent = store.ticks(&schedule.name, 16)?;
    let mut going = recent.iter().any(|t| run_going(store, t));
    let mut queued = recent.iter().any(|t| t.state == tick_state::QUEUED);
    let mut out = Vec::new();
    for &tick in ticks {
        let (state, run_id, reason) = match overlap.decide(going, queued) {
            TickAction::Start => {
                going = true;
                (tick_state::STARTING, Some(new_run_id(tick)), None)
            }
            TickAction::Queue => {
                queued = true;
                (tick_state::QUEUED, Some(new_run_id(tick)), None)
            }
            TickAction::Skip(why) => (tick_state::SKIPPED, None, Some(why.to_string())),
        };
        out.push(Tick {
            schedule: schedule.name.clone(),
            tick_ms: tick,
            state: state.into(),
            run_id,
            reason,
            manual: false,
            at_ms: now,
        });
    }
    Ok(out)
}

fn new_run_id(tick: i64) -> String {
    wfhost_store::new_run_id(tick.max(now_ms())).to_string()
}

/// Whether the run of tick `t` is still going.
fn run_going(store: &Store, t: &Tick) -> bool {
    if t.state == tick_state::STARTING {
        return true;
    }
    let Some(run) = t
        .run_id
        .as_deref()
        .filter(|_| t.state == tick_state::STARTED)
    else {
        return false;
    };
    store
        .branches(run)
        .ok()
        .and_then(|b| b.last().map(|b| GOING.contains(&b.status.as_str())))
        .unwrap_or(false)
}

/// The runs to start: ticks `starting` whose run is not in the store
/// (those whose run is there are marked started), and a queued tick whose
/// schedule has no run going any more.
fn to_start(store: &mut Store) -> Result<Vec<Start>, StoreError> {
    let mut starts = Vec::new();
    for tick in store.open_ticks()? {
        let key = (tick.schedule.as_str(), tick.tick_ms, tick.manual);
        let Some(run_id) = tick.run_id.clone() else {
            continue;
        };
        if tick.state == tick_state::QUEUED {
            let recent = store.ticks(&tick.schedule, 16)?;
            if !recent.iter().any(|t| run_going(store, t)) {
                store.set_tick_state(key, tick_state::QUEUED, tick_state::STARTING, None)?;
            }
            continue;
        }
        if store.run(&run_id)?.is_some() {
            store.set_tick_state(key, tick_state::STARTING, tick_state::STARTED, None)?;
            continue;
        }
        let Some(schedule) = store.schedule(&tick.schedule)? else {
            store.set_tick_state(
                key,
                tick_state::STARTING,
                tick_state::FAILED,
                Some("its schedule was removed"),
            )?;
            continue;
        };
        let workspace = schedule.workspace.replace("{run}", &run_id);
        let own = (workspace != schedule.workspace).then(|| workspace.clone());
        starts.push(Start {
            workspace: own,
            request: RunRequest::Start {
                manifest: schedule.workflow.clone(),
                workspace,
                run_id,
                inputs: Some(schedule.inputs.clone()),
                max_steps: None,
                executor: None,
            },
            tick,
        });
    }
    Ok(starts)
}

/// Record how the start of `tick`'s run went: started (or found there:
/// a start made twice), else failed with the reason.
fn settle(store: &mut Store, tick: &Tick, result: Result<(), wfhost_protocol::AppError>) {
    let key = (tick.schedule.as_str(), tick.tick_ms, tick.manual);
    let there = || {
        tick.run_id
            .as_deref()
            .is_some_and(|id| store.run(id).ok().flatten().is_some())
    };
    let outcome = match result {
        Ok(()) => None,
        Err(_) if there() => None,
        Err(e) => Some(e.message),
    };
    let written = match &outcome {
        None => store.set_tick_state(key, tick_state::STARTING, tick_state::STARTED, None),
        Some(why) => {
            tracing::warn!(schedule = %tick.schedule, tick = tick.tick_ms, "schedules: cannot start the run: {why}");
            store.set_tick_state(key, tick_state::STARTING, tick_state::FAILED, Some(why))
        }
    };
    if let Err(e) = written {
        tracing::warn!("schedules: {e}");
    }
}
