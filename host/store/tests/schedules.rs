//! Schedules and their ticks against a real SQLite file: each tick
//! handled once, whoever looks.

use wfhost_store::Store;
use wfhost_store::schedules::{Schedule, Spec, Tick, tick_state};

#[path = "common/mod.rs"]
mod common;
use common::Backend;

fn hello() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello/workflow.json")
}

fn every_second(name: &str, next: i64) -> Schedule {
    let mut s = Spec {
        name: name.into(),
        cron: "* * * * * *".into(),
        workflow: hello(),
        workspace: "/tmp/ws-{run}".into(),
        ..Spec::default()
    }
    .define(next - 1000)
    .unwrap();
    s.next_tick_ms = Some(next);
    s
}

fn tick(schedule: &str, at: i64, state: &str, run: Option<&str>) -> Tick {
    Tick {
        schedule: schedule.into(),
        tick_ms: at,
        state: state.into(),
        run_id: run.map(str::to_string),
        reason: None,
        manual: false,
        at_ms: at,
    }
}

fn a_tick_is_handled_once_whoever_looks(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut a = Store::open(home.path(), wfhost_store::Durability::Normal).unwrap();
    let mut b = Store::open(home.path(), wfhost_store::Durability::Normal).unwrap();
    a.add_schedule(&every_second("s", 10_000)).unwrap();
    assert!(
        a.add_schedule(&every_second("s", 10_000)).is_err(),
        "names are unique"
    );
    assert_eq!(a.due_schedules(9_999).unwrap().len(), 0);
    assert_eq!(b.due_schedules(10_000).unwrap().len(), 1);
    let first = [tick("s", 10_000, tick_state::STARTING, Some("run-1"))];
    assert!(
        a.handle_ticks("s", 10_000, &first, (Some(11_000), 0))
            .unwrap()
    );
    // A second look that read the same next tick writes nothing.
    let again = [tick("s", 10_000, tick_state::STARTING, Some("run-2"))];
    assert!(
        !b.handle_ticks("s", 10_000, &again, (Some(11_000), 0))
            .unwrap()
    );
    let ticks = b.ticks("s", 10).unwrap();
    assert_eq!(ticks.len(), 1);
    assert_eq!(ticks[0].run_id.as_deref(), Some("run-1"));
    assert_eq!(b.schedule("s").unwrap().unwrap().next_tick_ms, Some(11_000));
    // Open until its run started; then the run's tick is found by run.
    assert_eq!(b.open_ticks().unwrap().len(), 1);
    let key = ("s", 10_000, false);
    assert!(
        b.set_tick_state(key, tick_state::STARTING, tick_state::STARTED, None)
            .unwrap()
    );
    assert!(
        !a.set_tick_state(key, tick_state::STARTING, tick_state::FAILED, Some("x"))
            .unwrap()
    );
    assert!(b.open_ticks().unwrap().is_empty());
    assert_eq!(a.tick_of_run("run-1").unwrap().unwrap().tick_ms, 10_000);
    assert!(a.tick_of_run("run-2").unwrap().is_none());
}

fn paused_schedules_are_not_due_and_resume_from_a_new_tick(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), wfhost_store::Durability::Normal).unwrap();
    store.add_schedule(&every_second("p", 5_000)).unwrap();
    assert!(store.set_schedule_paused("p", true, None).unwrap());
    assert!(store.due_schedules(99_000).unwrap().is_empty());
    // Nor can a look that read it before the pause handle its ticks.
    assert!(
        !store
            .handle_ticks("p", 5_000, &[], (Some(6_000), 0))
            .unwrap()
    );
    assert!(
        store
            .set_schedule_paused("p", false, Some(100_000))
            .unwrap()
    );
    let s = store.schedule("p").unwrap().unwrap();
    assert_eq!((s.paused, s.next_tick_ms), (false, Some(100_000)));
    assert!(!store.set_schedule_paused("nope", true, None).unwrap());
}

fn manual_ticks_need_their_schedule_and_removal_takes_the_ticks(b: Backend) {
    let Some(home) = common::home(b) else { return };
    let mut store = Store::open(home.path(), wfhost_store::Durability::Normal).unwrap();
    let mut manual = tick("m", 7_000, tick_state::STARTING, Some("run-9"));
    manual.manual = true;
    assert!(store.add_manual_tick(&manual).is_err(), "no schedule `m`");
    store.add_schedule(&every_second("m", 7_000)).unwrap();
    store.add_manual_tick(&manual).unwrap();
    // The clock's tick at the same time is another tick.
    let clock = [tick("m", 7_000, tick_state::SKIPPED, None)];
    assert!(
        store
            .handle_ticks("m", 7_000, &clock, (Some(8_000), 2))
            .unwrap()
    );
    assert_eq!(store.ticks("m", 10).unwrap().len(), 2);
    assert_eq!(store.schedule("m").unwrap().unwrap().missed, 2);
    assert!(store.remove_schedule("m").unwrap());
    assert!(store.ticks("m", 10).unwrap().is_empty());
    assert!(!store.remove_schedule("m").unwrap());
}

fn a_spec_is_checked_before_it_is_stored(_: Backend) {
    let base = Spec {
        name: "ok".into(),
        cron: "0 9 * * 1-5".into(),
        tz: Some("Europe/Berlin".into()),
        workflow: hello(),
        workspace: "/tmp/ws".into(),
        ..Spec::default()
    };
    let s = base.define(0).unwrap();
    assert_eq!((s.overlap.as_str(), s.catch_up), ("skip", 1));
    assert!(s.next_tick_ms.unwrap() > 0);
    let bad = |f: &dyn Fn(&mut Spec)| {
        let mut spec = base.clone();
        f(&mut spec);
        spec.define(0).unwrap_err().field
    };
    assert_eq!(bad(&|s| s.name = "a b".into()), "name");
    assert_eq!(bad(&|s| s.cron = "* *".into()), "cron");
    assert_eq!(bad(&|s| s.tz = Some("Nowhere".into())), "tz");
    assert_eq!(bad(&|s| s.overlap = Some("often".into())), "overlap");
    assert_eq!(bad(&|s| s.catch_up = Some(101)), "catch_up");
    assert_eq!(bad(&|s| s.workspace = "relative".into()), "workspace");
    assert_eq!(
        bad(&|s| s.workflow = "/nonexistent/wf.json".into()),
        "workflow"
    );
    let inputs = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/inputs/workflow.json");
    let missing = Spec {
        workflow: inputs,
        ..base.clone()
    }
    .define(0)
    .unwrap_err();
    assert_eq!(missing.field, "inputs");
    assert!(
        missing
            .pointer
            .as_deref()
            .is_some_and(|p| p.starts_with("/inputs/")),
        "{missing:?}"
    );
}

on_both!(
    a_tick_is_handled_once_whoever_looks,
    paused_schedules_are_not_due_and_resume_from_a_new_tick,
    manual_ticks_need_their_schedule_and_removal_takes_the_ticks,
    a_spec_is_checked_before_it_is_stored,
);
