//! Retry policies: a failed block runs again after a durable wait, on a
//! test clock.

use super::*;

/// `work` (the `tag` worker, failing with `SIGNAL:EXEC_FAILED` on its
/// first `fails` attempts) with `retry` as given, then `done`.
fn flaky(retry: serde_json::Value, extra: serde_json::Value) -> Workflow {
    let mut work = serde_json::json!({
        "worker": "tag", "retry": retry,
        "transitions": [
            {"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:done"},
            {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:work gave up"}]
    });
    if let (Some(w), serde_json::Value::Object(extra)) = (work.as_object_mut(), extra) {
        w.extend(extra);
    }
    workflow(serde_json::json!({
        "id": "flaky", "start_node": "main",
        "nodes": {"main": {"entry_block": "work", "blocks": {
            "work": work,
            "done": block("SIGNAL:SUCCESS", &[("SIGNAL:SUCCESS", "END")]),
        }}}
    }))
}

/// A tagger whose `main.work` fails with `signal` on its first `fails`
/// attempts.
fn failing(fails: u32, signal: &'static str) -> FakeWorkers {
    FakeWorkers::default().with("tag", move |ctx, payload| {
        let mut out = tagger(ctx, payload)?;
        if ctx.block_id == "work" && ctx.attempt <= fails {
            out.signal = signal.into();
        }
        Ok(out)
    })
}

/// Drive a run resting on its retries on, the clock a second on each
/// time, until it rests otherwise (at most 20 times).
async fn awake(
    wf: &Workflow,
    workers: &FakeWorkers,
    mut report: RunReport,
    log: &mut MemoryLog,
) -> RunReport {
    for _ in 0..20 {
        if !matches!(report.status, RunStatus::Sleeping { .. }) {
            break;
        }
        crate::time::set_test_clock(Some(crate::time::now_ms() + 1_000));
        report = resume(wf, workers, &CoreActions, report.state, log)
            .await
            .unwrap();
    }
    report
}

fn retries_of(log: &MemoryLog) -> Vec<(u32, u32, u64)> {
    log.events
        .iter()
        .filter_map(|e| match e {
            Event::RetryScheduled {
                attempt,
                retry,
                wait_ms,
                ..
            } => Some((*attempt, *retry, *wait_ms)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_failed_block_runs_again_after_growing_durable_waits_until_it_succeeds() {
    let t0 = 5_000_000;
    crate::time::set_test_clock(Some(t0));
    let wf = flaky(
        serde_json::json!({"max_attempts": 4, "initial": "1s", "multiplier": 3, "jitter": 0}),
        serde_json::json!({}),
    );
    let workers = failing(2, "SIGNAL:EXEC_FAILED");
    let mut log = MemoryLog::default();
    let rested = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    assert!(
        matches!(&rested.status, RunStatus::Sleeping { step: 0, block, due_at_ms, retry: Some(1), .. }
            if block == "work" && *due_at_ms == t0 + 1000),
        "{:?}",
        rested.status
    );
    let last = log.events.last().unwrap();
    assert!(last.is_snapshot() && last.due_at_ms() == Some(t0 + 1000));
    assert_eq!(rested.state.phase.status(), "sleeping");
    assert_eq!(RunState::replay(&log.events).unwrap(), rested.state);

    // Early: it rests again and records nothing.
    crate::time::set_test_clock(Some(t0 + 999));
    let written = log.events.len();
    let early = resume(&wf, &workers, &CoreActions, rested.state, &mut log)
        .await
        .unwrap();
    assert!(matches!(early.status, RunStatus::Sleeping { .. }));
    assert_eq!(log.events.len(), written);

    // Due: attempt 2 fails too; the next wait is three times longer.
    crate::time::set_test_clock(Some(t0 + 1000));
    let second = resume(&wf, &workers, &CoreActions, early.state, &mut log)
        .await
        .unwrap();
    assert!(
        matches!(&second.status, RunStatus::Sleeping { step: 1, due_at_ms, retry: Some(2), .. }
            if *due_at_ms == t0 + 1000 + 3000),
        "{:?}",
        second.status
    );
    crate::time::set_test_clock(Some(t0 + 4000));
    let done = resume(&wf, &workers, &CoreActions, second.state, &mut log)
        .await
        .unwrap();
    crate::time::set_test_clock(None);
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(
        workers.visited(),
        ["main.work", "main.work", "main.work", "main.done"]
    );
    let attempts: Vec<u32> = workers.seen.lock().unwrap()[..3]
        .iter()
        .map(|c| c.attempt)
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert_eq!(retries_of(&log), [(1, 1, 1000), (2, 2, 3000)]);
    // The retry saw why the attempt before failed.
    assert_eq!(done.state.blocks["main.work"].attempts, 3);
    assert_eq!(RunState::replay(&log.events).unwrap(), done.state);
}

#[tokio::test]
async fn a_policy_out_of_attempts_takes_the_blocks_transition() {
    crate::time::set_test_clock(Some(1_000));
    let wf = flaky(
        serde_json::json!({"max_attempts": 3, "initial": "10ms", "jitter": 0}),
        serde_json::json!({}),
    );
    let workers = failing(99, "SIGNAL:EXEC_FAILED");
    let mut log = MemoryLog::default();
    let report = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    let report = awake(&wf, &workers, report, &mut log).await;
    crate::time::set_test_clock(None);
    assert_eq!(
        report.status,
        RunStatus::Failed {
            reason: "block `main.work`: work gave up".into()
        }
    );
    assert_eq!(workers.visited().len(), 3, "three attempts in all");
    assert_eq!(retries_of(&log), [(1, 1, 10), (2, 2, 20)]);
}

#[tokio::test]
async fn permanent_failures_and_unlisted_signals_are_not_retried() {
    crate::time::set_test_clock(Some(1_000));
    let schema = serde_json::json!({"validation_schema": {"type": "object", "required": ["x"]}});
    let cases: Vec<(&str, serde_json::Value, serde_json::Value, FakeWorkers)> = vec![
        (
            "a signal in never",
            serde_json::json!({"never": ["SIGNAL:EXEC_FAILED"]}),
            serde_json::json!({}),
            failing(9, "SIGNAL:EXEC_FAILED"),
        ),
        (
            "a signal that is no failure",
            serde_json::json!({}),
            serde_json::json!({}),
            failing(9, "SIGNAL:BLOCKED"),
        ),
        (
            "a failure `on` does not list",
            serde_json::json!({"on": ["SIGNAL:FLAKY"]}),
            serde_json::json!({}),
            failing(9, "SIGNAL:EXEC_FAILED"),
        ),
        (
            "an output that fails the schema",
            serde_json::json!({}),
            schema.clone(),
            failing(0, "SIGNAL:SUCCESS"),
        ),
        (
            "a config the worker refuses",
            serde_json::json!({}),
            serde_json::json!({}),
            FakeWorkers::default().with("tag", |_, _| {
                Err(BlockFailure::of_plugin_error(BAD_CONFIG, "no such option"))
            }),
        ),
    ];
    for (what, retry, extra, workers) in cases {
        let wf = flaky(retry, extra);
        let mut log = MemoryLog::default();
        let report = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
            .await
            .unwrap();
        assert!(
            matches!(report.status, RunStatus::Failed { .. }),
            "{what}: {:?}",
            report.status
        );
        assert_eq!(retries_of(&log), [], "{what}");
        assert_eq!(workers.visited(), ["main.work"], "{what}");
    }
    // A schema failure is retried when the policy lists it.
    let wf = flaky(
        serde_json::json!({"on": ["SIGNAL:VALIDATION_FAIL"], "jitter": 0}),
        schema,
    );
    let mut log = MemoryLog::default();
    let report = run(
        &wf,
        &failing(0, "SIGNAL:SUCCESS"),
        &CoreActions,
        &RunOptions::new("r"),
        &mut log,
    )
    .await
    .unwrap();
    crate::time::set_test_clock(None);
    assert!(matches!(
        report.status,
        RunStatus::Sleeping { retry: Some(1), .. }
    ));
    assert_eq!(retries_of(&log), [(1, 1, 1000)]);
}

#[tokio::test]
async fn the_blocks_max_attempts_caps_its_policy_and_a_new_visit_starts_a_new_series() {
    crate::time::set_test_clock(Some(1_000));
    // The policy allows 5 in a row, the block 2 in the whole run.
    let wf = flaky(
        serde_json::json!({"max_attempts": 5, "initial": "1ms", "jitter": 0}),
        serde_json::json!({"max_attempts": 2}),
    );
    let workers = failing(9, "SIGNAL:EXEC_FAILED");
    let mut log = MemoryLog::default();
    let report = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    let report = awake(&wf, &workers, report, &mut log).await;
    assert!(matches!(report.status, RunStatus::Failed { .. }));
    assert_eq!(retries_of(&log), [(1, 1, 1)]);

    // A block its transition sends back to itself starts counting anew:
    // each visit gets the policy's attempts.
    let wf = workflow(serde_json::json!({
        "id": "loop", "start_node": "main",
        "nodes": {"main": {"entry_block": "work", "blocks": {
            "work": {"worker": "tag", "retry": {"max_attempts": 2, "initial": "1ms", "jitter": 0},
                "max_attempts": 4,
                "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "JUMP:work"}]},
        }}}
    }));
    let mut log = MemoryLog::default();
    let report = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    let report = awake(&wf, &workers, report, &mut log).await;
    crate::time::set_test_clock(None);
    let RunStatus::Failed { reason } = &report.status else {
        panic!("{:?}", report.status)
    };
    assert!(reason.contains("over its max_attempts of 4"), "{reason}");
    let series: Vec<(u32, u32)> = retries_of(&log).iter().map(|(a, r, _)| (*a, *r)).collect();
    assert_eq!(series, [(1, 1), (3, 1)]);
    assert_eq!(RunState::replay(&log.events).unwrap(), report.state);
}

#[tokio::test]
async fn a_run_stopped_before_or_during_its_retry_wait_resumes_to_the_same_end() {
    crate::time::set_test_clock(Some(1_000));
    let wf = flaky(
        serde_json::json!({"initial": "2s", "jitter": 0}),
        serde_json::json!({}),
    );
    let workers = failing(1, "SIGNAL:WORKER_ERROR");
    let mut log = MemoryLog::default();
    let rested = run(&wf, &workers, &CoreActions, &RunOptions::new("r"), &mut log)
        .await
        .unwrap();
    assert!(matches!(rested.status, RunStatus::Sleeping { .. }));
    let at = log
        .events
        .iter()
        .position(|e| matches!(e, Event::RetryScheduled { .. }))
        .unwrap();
    // Stopped after the failure was recorded, before its retry was: the
    // resumed run schedules it (from its own clock) and goes on.
    for cut in [at, at + 1] {
        crate::time::set_test_clock(Some(1_500));
        let mut prefix = MemoryLog {
            events: log.events[..cut].to_vec(),
        };
        let state = RunState::replay(&prefix.events).unwrap();
        let mut report = resume(&wf, &workers, &CoreActions, state, &mut prefix)
            .await
            .unwrap();
        let RunStatus::Sleeping { due_at_ms, .. } = report.status else {
            panic!("{:?}", report.status)
        };
        let expected = if cut == at { 3_500 } else { 3_000 };
        assert_eq!(due_at_ms, expected, "cut at {cut}");
        crate::time::set_test_clock(Some(due_at_ms));
        report = resume(&wf, &workers, &CoreActions, report.state, &mut prefix)
            .await
            .unwrap();
        assert_eq!(report.status, RunStatus::Succeeded, "cut at {cut}");
        let kinds: Vec<&str> = prefix.events.iter().map(Event::kind).collect();
        assert_eq!(
            kinds.iter().filter(|k| **k == "retry_scheduled").count(),
            1,
            "{kinds:?}"
        );
    }
    crate::time::set_test_clock(None);
}

#[tokio::test]
async fn a_retry_out_of_place_is_refused_by_the_fold() {
    crate::time::set_test_clock(Some(1_000));
    let wf = flaky(serde_json::json!({"jitter": 0}), serde_json::json!({}));
    let mut log = MemoryLog::default();
    run(
        &wf,
        &failing(1, "SIGNAL:FAILED"),
        &CoreActions,
        &RunOptions::new("r"),
        &mut log,
    )
    .await
    .unwrap();
    crate::time::set_test_clock(None);
    let at = log
        .events
        .iter()
        .position(|e| matches!(e, Event::RetryScheduled { .. }))
        .unwrap();
    let Event::RetryScheduled { .. } = log.events[at].clone() else {
        unreachable!()
    };
    let mut twice = log.events.clone();
    twice.push(log.events[at].clone());
    assert!(
        RunState::replay(&twice).is_err(),
        "a second retry while sleeping"
    );
    let mut skipped = log.events[..at].to_vec();
    let mut wrong = log.events[at].clone();
    if let Event::RetryScheduled { retry, .. } = &mut wrong {
        *retry = 2;
    }
    skipped.push(wrong);
    assert!(
        RunState::replay(&skipped).is_err(),
        "retry 2 before retry 1"
    );
}
