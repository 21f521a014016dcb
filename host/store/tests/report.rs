//! A branch as a Markdown report, rendered from its events alone.

use wfhost_core::parallel::fan_in::Resolution;
use wfhost_core::run::event::{CommandRecord, Decision, Event, Outcome, PayloadDelta};
use wfhost_core::run::payload::Statistics;
use wfhost_store::StoredEvent;
use wfhost_store::report::{ReportHead, markdown};

mod common;
#[allow(unused_imports)]
use common::{M, Q, R, R1, R2, R3, R4};
use common::{record, started};

fn stored(events: Vec<Event>) -> Vec<StoredEvent> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| StoredEvent {
            seq: i as u64 + 1,
            branch: 1,
            parent: None,
            at: 1_700_000_000_000 + i as i64,
            snapshot: None,
            event,
        })
        .collect()
}

fn completed(step: u64, block: &str, artifact: Option<&str>) -> Event {
    Event::BlockCompleted {
        step,
        node: "main".into(),
        block: block.into(),
        signal: "SIGNAL:SUCCESS".into(),
        payload: PayloadDelta::default(),
        artifact: artifact.map(String::from),
        statistics: Statistics::default(),
        duration_us: 1500,
        queued_us: 0,
        failure: None,
        permanent: false,
        log: vec![],
        written: Vec::new(),
    }
}

#[test]
fn a_report_has_the_steps_decisions_outputs_conflicts_and_outcome() {
    let run = record(R1);
    let events = stored(vec![
        started(R1),
        Event::BlockStarted {
            step: 0,
            node: "main".into(),
            block: "plan".into(),
            attempt: 1,
        },
        // An output that holds a fence of its own, and a table's bar.
        completed(0, "plan", Some("{\"text\": \"```rust | x```\"}")),
        Event::ActionTaken {
            step: 0,
            action: "GATE:Ship it?".into(),
            command: CommandRecord::Gate {
                prompt: "Ship it?".into(),
                questions: Vec::new(),
            },
            gate_id: Some("UD-1".into()),
            fallback_for: None,
        },
        Event::GateAnswered {
            gate_id: "UD-1".into(),
            decision: Decision::ChangesRequested {
                text: "add\ntests".into(),
            },
        },
        Event::LaneConflictDetected {
            step: 1,
            conflicting_file: "docs/a.py".into(),
            lanes: vec!["api".into(), "ui".into()],
            resolution: Resolution::FirstCompleteWins,
            applied_from: Some("api".into()),
            lane_node_ids: vec!["main.dev.api".into(), "main.dev.ui".into()],
            applied_from_node_id: Some("main.dev.api".into()),
        },
        Event::Checkpointed {
            notes_markdown: "half way".into(),
        },
        Event::RunFinished {
            outcome: Outcome::Failed {
                reason: "tests | failed".into(),
            },
        },
    ]);
    let head = ReportHead {
        run: &run,
        branch: 1,
        status: "failed",
        session: Some("chat-1"),
    };
    let text = markdown(&head, &events);
    assert!(text.starts_with(&format!("# Run `{R1}`\n")), "{text}");
    assert!(text.contains("| Session | `chat-1` |"), "{text}");
    assert!(text.contains("## Steps (1)"), "{text}");
    assert!(
        text.contains("| 0 | `main.plan` | 1 | SIGNAL:SUCCESS | GATE:Ship it? → "),
        "{text}"
    );
    assert!(text.contains("- Step 0: gate `UD-1` opened"), "{text}");
    assert!(
        text.contains("`UD-1` answered: changes-requested"),
        "{text}"
    );
    assert!(
        text.contains("add tests"),
        "a decision stays on one line: {text}"
    );
    // The fence is longer than any backtick run in the output.
    assert!(
        text.contains("````json\n{\"text\": \"```rust | x```\"}\n````"),
        "{text}"
    );
    assert!(text.contains("### Checkpoint notes"), "{text}");
    assert!(
        text.contains("`docs/a.py` changed by `api`, `ui`; applied from `api`"),
        "{text}"
    );
    assert!(
        text.ends_with("## Outcome\n\nFailed: tests | failed\n"),
        "{text}"
    );
}

#[test]
fn a_long_output_is_cut_and_an_unfinished_run_says_so() {
    let run = record(R2);
    let long = "x".repeat(10_000);
    let events = stored(vec![
        started(R2),
        Event::BlockStarted {
            step: 0,
            node: "main".into(),
            block: "a".into(),
            attempt: 1,
        },
        completed(0, "a", Some(&long)),
    ]);
    let head = ReportHead {
        run: &run,
        branch: 1,
        status: "interrupted",
        session: None,
    };
    let text = markdown(&head, &events);
    assert!(text.contains("… (cut)"), "{text}");
    assert!(text.len() < 6_000, "{}", text.len());
    assert!(text.ends_with("Not finished (interrupted).\n"), "{text}");
    assert!(!text.contains("| Session |"), "{text}");
}

#[test]
fn the_tokens_are_summed_with_what_agent_clis_reported() {
    let run = record(R3);
    let with_usage = |step: u64, tokens: u64, usage: wfhost_core::run::payload::ModelUsage| {
        let mut e = completed(step, "a", None);
        if let Event::BlockCompleted { statistics, .. } = &mut e {
            *statistics = Statistics {
                tokens_used: tokens,
                lines_written: 0,
                usage,
            };
        }
        e
    };
    let usage = wfhost_core::run::payload::ModelUsage {
        input_tokens: 100,
        output_tokens: 20,
        cache_read_tokens: 5,
        cache_creation_tokens: 0,
        cost_micro_usd: 1_250,
    };
    let events = stored(vec![
        started(R3),
        with_usage(0, 125, usage),
        with_usage(1, 125, usage),
        with_usage(2, 7, Default::default()),
    ]);
    let head = ReportHead {
        run: &run,
        branch: 1,
        status: "succeeded",
        session: None,
    };
    let text = markdown(&head, &events);
    assert!(
        text.contains("| Tokens | 257 (in 200 · out 40 · cache 10 read · $0.0025) |"),
        "{text}"
    );
    let plain = markdown(&head, &stored(vec![started(R3)]));
    assert!(plain.contains("| Tokens | 0 |"), "{plain}");
}
