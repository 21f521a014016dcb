//! Durable runs through the binary: crash resume under SIGKILL, gates,
//! forks, export/import, pinning, concurrency and damaged stores.

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::*;

fn example(name: &str) -> PathBuf {
    repo().join("examples").join(name).join("workflow.json")
}

/// `wfhost run MANIFEST -w WS [EXTRA…]` with the home in `scratch`.
fn start(manifest: &Path, ws: &Path, scratch: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    wfhost(&args, scratch)
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(o), stderr(o)))
}

/// The only run in the store of `scratch`, if any.
fn only_run(scratch: &Path) -> Option<String> {
    let out = wfhost(&["runs", "--json"], scratch);
    let runs = json_of(&out);
    let runs = runs.as_array().unwrap();
    assert!(runs.len() <= 1, "{runs:?}");
    runs.first().map(|r| r["id"].as_str().unwrap().to_string())
}

fn store_file(scratch: &Path) -> PathBuf {
    scratch.join("home/wfhost.db")
}

/// The bytes of the store and its WAL, to check a command changed nothing.
fn store_bytes(scratch: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(store_file(scratch)).unwrap_or_default();
    bytes.extend(std::fs::read(scratch.join("home/wfhost.db-wal")).unwrap_or_default());
    bytes
}

/// What must be identical between a crashed-and-resumed run and an
/// uninterrupted one.
fn invariants(show: &serde_json::Value) -> serde_json::Value {
    let mut blocks = show["blocks"].clone();
    for b in blocks.as_object_mut().unwrap().values_mut() {
        b.as_object_mut().unwrap().remove("duration_ms");
    }
    let steps: Vec<_> = show["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            serde_json::json!([
                s["step"],
                s["block"],
                s["attempt"],
                s["signal"],
                s["action"]
            ])
        })
        .collect();
    serde_json::json!({
        "status": show["status"],
        "payload": show["payload"],
        "blocks": blocks,
        "statistics": show["statistics"],
        "steps": steps,
        "gates": show["gates"],
    })
}

/// `wfhost run` of the durable example in `scratch` with its first block
/// thinking `think_ms`, standard error to `stderr`: the process, once its
/// first line names the run (recorded), and the rest of its output.
pub(super) fn thinking_run(
    scratch: &Path,
    think_ms: u64,
    stderr: Stdio,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    let ws = workspace_in(scratch);
    let manifest = example("durable");
    let mut child = command(scratch)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .args(["--set", &format!("think_ms={think_ms}")])
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    output.read_line(&mut first).unwrap();
    assert!(first.starts_with("run run-"), "{first}");
    (child, output)
}

/// The guide's recipe: the durable example thinking longer (`--set
/// think_ms=…`) is killed mid-block, shows as interrupted, and `wfhost
/// resume` runs the cut block again to the run's end.
#[test]
fn the_durable_example_killed_mid_block_is_resumed() {
    let scratch = tempfile::tempdir().unwrap();
    // The first line names the run once it is recorded; the first block
    // then thinks for 1.5 s.
    let (mut child, _output) = thinking_run(scratch.path(), 1500, Stdio::inherit());
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let id = only_run(scratch.path()).expect("the run was recorded");
    let runs = json_of(&wfhost(&["runs", "--json"], scratch.path()));
    assert_eq!(runs[0]["status"], "interrupted", "{runs}");
    let out = wfhost(&["resume", &id], scratch.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("[0] main.intake was interrupted and runs again"),
        "{}",
        stdout(&out)
    );
    let show = shown_with_steps(&["show", &id, "--json"], scratch.path());
    assert_eq!(show["status"], "succeeded", "{show}");
    assert_eq!(show["steps"][0]["interrupted"], 1, "{show}");
}

/// A small xorshift generator: the test prints its seed so a failure can
/// be replayed with WFHOST_CRASH_SEED.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn sigkill_at_random_points_then_resume_ends_exactly_like_an_uninterrupted_run() {
    let ws = tempfile::tempdir().unwrap();
    let manifest = example("durable");

    let reference = tempfile::tempdir().unwrap();
    // Compile the plugins first, so that the timed run is what a trial
    // runs: a start from the compiled cache.
    let warm = wfhost(&["validate", manifest.to_str().unwrap()], reference.path());
    assert_eq!(warm.status.code(), Some(0), "{}", stderr(&warm));
    let t = Instant::now();
    let out = start(&manifest, ws.path(), reference.path(), &["--json"]);
    let full_run = t.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reference_id = json_of(&out)["run_id"].as_str().unwrap().to_string();
    let expected = invariants(&shown_with_steps(
        &["show", &reference_id, "--json"],
        reference.path(),
    ));

    let seed = std::env::var("WFHOST_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("crash test seed {seed} (set WFHOST_CRASH_SEED to replay)");
    let mut rng = Rng(seed);
    // Kill anywhere from before the process got going to after it would
    // have finished.
    let window = full_run.as_millis() as u64 + 100;
    let mut kills_mid_run = 0;
    let mut interrupted_blocks = 0;
    for trial in 0..24 {
        let scratch = tempfile::tempdir().unwrap();
        // The reference run's cache: the plugins are compiled already.
        std::fs::create_dir_all(scratch.path()).unwrap();
        let mut id: Option<String> = None;
        let mut finished = false;
        for round in 0..30 {
            let mut cmd = command(scratch.path());
            cmd.env("WFHOST_CACHE_DIR", reference.path().join("cache"));
            match &id {
                None => cmd.args([
                    "run",
                    manifest.to_str().unwrap(),
                    "-w",
                    ws.path().to_str().unwrap(),
                ]),
                Some(id) => cmd.args(["resume", id.as_str()]),
            };
            let mut child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Every other round runs to completion, so the test always ends.
            let kill_after = (round % 2 == 0).then(|| Duration::from_millis(rng.below(window)));
            let status = match kill_after {
                Some(delay) => {
                    std::thread::sleep(delay);
                    let _ = child.kill(); // SIGKILL
                    child.wait().unwrap()
                }
                None => child.wait().unwrap(),
            };
            if id.is_none() {
                id = only_run(scratch.path());
            }
            match status.code() {
                Some(0) => {
                    finished = true;
                    break;
                }
                None => kills_mid_run += 1,
                Some(code) => {
                    let mut err = String::new();
                    use std::io::Read;
                    child
                        .stderr
                        .take()
                        .unwrap()
                        .read_to_string(&mut err)
                        .unwrap();
                    // A resume of a run that the kill let finish says so.
                    assert!(
                        err.contains("already succeeded"),
                        "trial {trial}: exit {code}: {err}"
                    );
                    finished = true;
                    break;
                }
            }
        }
        assert!(finished, "trial {trial} did not finish");
        let id = id.expect("a run was recorded");
        let show = shown_with_steps(&["show", &id, "--json"], scratch.path());
        assert_eq!(invariants(&show), expected, "trial {trial}, seed {seed}");
        interrupted_blocks += show["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["interrupted"].as_u64().unwrap())
            .sum::<u64>();
        // Exactly one completion per step in the log.
        let events = wfhost(&["events", &id, "--json"], scratch.path());
        let mut completed = Vec::new();
        for line in stdout(&events).lines() {
            let e: serde_json::Value = serde_json::from_str(line).unwrap();
            if e["event"]["type"] == "block_completed" {
                completed.push(e["event"]["step"].as_u64().unwrap());
            }
        }
        assert_eq!(completed, [0, 1, 2, 3, 4], "trial {trial}, seed {seed}");
    }
    assert!(kills_mid_run > 0, "no kill landed (seed {seed})");
    // Some kills cut a block short, and it ran again.
    assert!(
        interrupted_blocks > 0,
        "no kill landed mid-block (seed {seed})"
    );
    eprintln!("{kills_mid_run} kills, {interrupted_blocks} blocks interrupted and re-run");
}

#[test]
fn a_gate_round_trip_with_changes_requested_then_approved() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let manifest = example("review-gate");
    let check = wfhost(&["validate", manifest.to_str().unwrap(), "--strict"], s);
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    let out = start(&manifest, &workspace_in(s), s, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let id = only_run(s).unwrap();

    let gates = json_of(&wfhost(&["gates", "--json"], s));
    assert_eq!(gates[0]["run_id"], id.as_str());
    assert_eq!(gates[0]["gate_id"], "UD-1");
    assert_eq!(gates[0]["prompt"], "Approve the plan?");

    // Anything but the two forms is refused and changes nothing.
    let before = store_bytes(s);
    for bad in [
        "yes",
        "approved please",
        "changes-requested:",
        "CHANGES-REQUESTED:x",
    ] {
        let out = wfhost(&["gate", &id, "UD-1", bad], s);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&out).contains("`approved` or `changes-requested:"),
            "{}",
            stderr(&out)
        );
    }
    let unknown = wfhost(&["gate", &id, "UD-9", "approved"], s);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("no open gate `UD-9`"),
        "{}",
        stderr(&unknown)
    );
    assert_eq!(
        store_bytes(s),
        before,
        "refused answers leave the store as it was"
    );

    let out = wfhost(
        &[
            "gate",
            &id,
            "UD-1",
            "changes-requested:add a load test",
            "--json",
        ],
        s,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let report = json_of(&out);
    assert_eq!(report["gate"]["id"], "UD-2");
    assert!(
        report["payload"]
            .as_array()
            .unwrap()
            .iter()
            .any(|seg| seg["type"] == "GATE_DECISION"
                && seg["content"] == "changes-requested:add a load test"),
        "{report}"
    );

    // Gate ids are case-insensitive, run ids match by any unique part.
    let out = wfhost(&["gate", &id[id.len() - 6..], "ud-2", "approved"], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let again = wfhost(&["gate", &id, "UD-1", "approved"], s);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already answered `changes-requested:add a load test`"),
        "{}",
        stderr(&again)
    );

    let show = shown_with_steps(&["show", &id, "--json"], s);
    assert_eq!(show["status"], "succeeded");
    assert_eq!(show["gates"][0]["decision"]["answer"], "changes-requested");
    assert_eq!(show["gates"][1]["decision"]["answer"], "approved");
    assert_eq!(show["blocks"]["main.draft"]["attempts"], 2);
    assert!(stdout(&wfhost(&["gates"], s)).contains("no open gates"));
}

#[test]
fn a_fork_continues_from_an_older_snapshot_and_keeps_the_original_branch() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let out = start(&example("hello"), &workspace_in(s), s, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = only_run(s).unwrap();
    let original = shown_with_steps(&["show", &id, "--json"], s);
    let original_events = stdout(&wfhost(&["events", &id], s));
    let after_step_1 = original["steps"][1]["snapshot"]
        .as_str()
        .unwrap()
        .to_string();

    let out = wfhost(&["fork", &id, "--at", &after_step_1], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("branch 2 forked"), "{}", stdout(&out));

    let forked = shown_with_steps(&["show", &id, "--json"], s);
    assert_eq!(forked["branch"], 2);
    assert_eq!(forked["branches"].as_array().unwrap().len(), 2);
    assert_eq!(forked["branches"][1]["forked_from"], after_step_1.as_str());
    // The fork re-ran steps 2 and 3 only; the shared history is the same.
    assert_eq!(forked["steps"][0], original["steps"][0]);
    assert_eq!(forked["steps"][1], original["steps"][1]);
    assert_eq!(forked["steps"].as_array().unwrap().len(), 4);
    assert_eq!(
        invariants(&forked)["payload"],
        invariants(&original)["payload"]
    );
    // The original branch is intact.
    let branch1 = shown_with_steps(&["show", &id, "--branch", "1", "--json"], s);
    assert_eq!(invariants(&branch1), invariants(&original));
    assert!(stdout(&wfhost(&["events", &id], s)).starts_with(&original_events));
    let runs = json_of(&wfhost(&["runs", "--json"], s));
    assert_eq!(runs[0]["branches"], 2);

    // A snapshot of another run, or none at all, is refused.
    let out = start(&example("hello"), &workspace_in(s), s, &["--json"]);
    let other = json_of(&out)["run_id"].as_str().unwrap().to_string();
    let before = store_bytes(s);
    let wrong = wfhost(&["fork", &other, "--at", &after_step_1], s);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        stderr(&wrong).contains(&format!("belongs to run {id}")),
        "{}",
        stderr(&wrong)
    );
    let missing = wfhost(&["fork", &id, "--at", "sn-000000000000"], s);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(store_bytes(s), before);
}

#[test]
fn export_then_import_elsewhere_shows_the_same_run() {
    let here = tempfile::tempdir().unwrap();
    let there = tempfile::tempdir().unwrap();
    let out = start(
        &example("review-gate"),
        &workspace_in(here.path()),
        here.path(),
        &[],
    );
    assert_eq!(out.status.code(), Some(3));
    let id = only_run(here.path()).unwrap();
    let bundle = here.path().join("run.bundle.json");
    let out = wfhost(
        &["export", &id, "-o", bundle.to_str().unwrap()],
        here.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // `-o -` is standard output, byte for byte the same bundle, and no file
    // named `-` appears.
    let piped = command(here.path())
        .current_dir(here.path())
        .args(["export", &id, "-o", "-"])
        .output()
        .unwrap();
    assert_eq!(piped.status.code(), Some(0), "{}", stderr(&piped));
    assert_eq!(piped.stdout, std::fs::read(&bundle).unwrap());
    assert!(!here.path().join("-").exists());

    let out = wfhost(&["import", bundle.to_str().unwrap()], there.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The same run, but for when each was looked at.
    let shown = |home: &Path| {
        let mut shown = shown_with_steps(&["show", &id, "--json"], home);
        shown.as_object_mut().unwrap().remove("server_now_ms");
        shown
    };
    assert_eq!(shown(here.path()), shown(there.path()));
    assert_eq!(
        stdout(&wfhost(&["events", &id, "--json"], here.path())),
        stdout(&wfhost(&["events", &id, "--json"], there.path()))
    );
    // The imported run is live: its gate can be answered there.
    let out = wfhost(&["gate", &id, "UD-1", "approved"], there.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Importing twice, or a damaged bundle, is refused and changes nothing.
    let before = store_bytes(there.path());
    let twice = wfhost(&["import", bundle.to_str().unwrap()], there.path());
    assert_eq!(twice.status.code(), Some(2));
    assert!(
        stderr(&twice).contains("already exists"),
        "{}",
        stderr(&twice)
    );
    let text = std::fs::read_to_string(&bundle).unwrap();
    let cases = [
        (
            text.replacen("\"version\": 1", "\"version\": 7", 1),
            "bundle version 7 is not supported",
        ),
        (
            text.replacen("Approve the plan?", "Approve the plan!", 1),
            "checksum mismatch",
        ),
        (text[..text.len() / 2].to_string(), "not JSON"),
        (
            "{\"format\": \"something else\"}".to_string(),
            "not a wfhost run bundle",
        ),
    ];
    for (content, expected) in cases {
        let bad = there.path().join("bad.json");
        std::fs::write(&bad, content).unwrap();
        let out = wfhost(&["import", bad.to_str().unwrap()], there.path());
        assert_eq!(out.status.code(), Some(2), "{expected}");
        assert!(
            stderr(&out).contains(expected),
            "{expected}: {}",
            stderr(&out)
        );
    }
    assert_eq!(store_bytes(there.path()), before);
}

#[test]
fn a_run_keeps_its_pinned_definition_when_the_file_changes() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let manifest = s.join("gate.json");
    std::fs::copy(example("review-gate"), &manifest).unwrap();
    let out = start(&manifest, &workspace_in(s), s, &[]);
    assert_eq!(out.status.code(), Some(3));
    let id = only_run(s).unwrap();
    let show = stdout(&wfhost(&["show", &id], s));
    assert!(!show.contains("warning"), "{show}");

    // Edit the file: approval now fails the run.
    let edited = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("\"JUMP:ship\"", "\"FAIL:edited\"");
    std::fs::write(&manifest, edited).unwrap();
    let show = stdout(&wfhost(&["show", &id], s));
    assert!(
        show.contains("warning: the manifest") && show.contains("has changed"),
        "{show}"
    );
    // The run goes on with what it was started with.
    let out = wfhost(&["gate", &id, "UD-1", "approved"], s);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("main.ship"), "{}", stdout(&out));
}

#[test]
fn a_second_process_cannot_execute_a_run_that_is_executing() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let mut first = command(s)
        .args([
            "run",
            example("durable").to_str().unwrap(),
            "-w",
            workspace_in(s).to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the run is recorded and executing.
    let deadline = Instant::now() + Duration::from_secs(30);
    let id = loop {
        if let Some(id) = only_run(s) {
            let events = stdout(&wfhost(&["events", &id], s));
            if events.contains("block_started") {
                break id;
            }
        }
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let second = wfhost(&["resume", &id], s);
    assert_eq!(second.status.code(), Some(4), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("is being executed by another wfhost process (pid"),
        "{}",
        stderr(&second)
    );
    // `events --follow` tails the live run until it stops.
    let followed = wfhost(&["events", &id, "--follow"], s);
    assert!(
        stdout(&followed).contains("action_taken    [4] END: end"),
        "{}",
        stdout(&followed)
    );
    assert_eq!(first.wait().unwrap().code(), Some(0));
}

#[test]
fn concurrent_runs_share_one_store_without_damage() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    // Compile once, so that the runs overlap in the store, not in Cranelift.
    let warm = wfhost(&["validate", example("hello").to_str().unwrap()], s);
    assert_eq!(warm.status.code(), Some(0));
    let children: Vec<_> = (0..4)
        .map(|i| {
            let ws = s.join(format!("ws-{i}"));
            std::fs::create_dir_all(&ws).unwrap();
            command(s)
                .args([
                    "run",
                    example("hello").to_str().unwrap(),
                    "-w",
                    ws.to_str().unwrap(),
                ])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert_eq!(child.wait().unwrap().code(), Some(0));
    }
    let runs = json_of(&wfhost(&["runs", "--json"], s));
    assert_eq!(runs.as_array().unwrap().len(), 4);
    for run in runs.as_array().unwrap() {
        assert_eq!(run["status"], "succeeded");
        let show = json_of(&wfhost(&["show", run["id"].as_str().unwrap(), "--json"], s));
        assert_eq!(show["events"], 13);
    }
}

#[test]
fn a_damaged_store_is_reported_not_panicked_on_and_left_alone() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let out = start(&example("hello"), &workspace_in(s), s, &[]);
    assert_eq!(out.status.code(), Some(0));
    let id = only_run(s).unwrap();
    // The last connection to close folded the WAL into the main file, so
    // damage to the file is damage to everything.
    let db = store_file(s);
    let good = std::fs::read(&db).unwrap();
    let _ = std::fs::remove_file(s.join("home/wfhost.db-wal"));
    let _ = std::fs::remove_file(s.join("home/wfhost.db-shm"));

    let mut garbage = good.clone();
    garbage[..16].copy_from_slice(b"definitely not!!");
    let mut scribbled = good.clone();
    for b in scribbled.iter_mut().skip(4096).take(8192) {
        *b ^= 0x5a;
    }
    let truncated = good[..good.len() / 3].to_vec();
    for (name, bytes) in [
        ("garbage", garbage),
        ("scribbled", scribbled),
        ("truncated", truncated),
    ] {
        std::fs::write(&db, &bytes).unwrap();
        for args in [
            vec!["show", id.as_str()],
            vec!["runs"],
            vec!["events", id.as_str()],
            vec!["resume", id.as_str()],
            vec![
                "run",
                example("hello").to_str().unwrap(),
                "-w",
                workspace_in(s).to_str().unwrap(),
            ],
        ] {
            let out = wfhost(&args, s);
            let err = stderr(&out);
            assert_ne!(
                out.status.code(),
                Some(0),
                "{name} {args:?}: {}",
                stdout(&out)
            );
            assert_ne!(out.status.code(), None, "{name} {args:?}");
            assert!(!err.contains("panicked"), "{name} {args:?}: {err}");
            assert!(err.contains("wfhost.db"), "{name} {args:?}: {err}");
        }
        assert_eq!(
            std::fs::read(&db).unwrap(),
            bytes,
            "{name}: the damaged file was modified"
        );
    }
}

#[test]
fn bad_run_ids_and_finished_runs_are_clear_errors() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    // No store yet: asking about a run creates none.
    for args in [
        vec!["show", "run-1"],
        vec!["resume", "run-1"],
        vec!["events", "run-1"],
    ] {
        let out = wfhost(&args, s);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains("no run store"), "{}", stderr(&out));
    }
    assert!(!store_file(s).exists());
    let out = start(&example("hello"), &workspace_in(s), s, &[]);
    assert_eq!(out.status.code(), Some(0));
    let id = only_run(s).unwrap();
    let before = store_bytes(s);
    for args in [
        vec!["show", "run-19990101"],
        vec!["resume", "nope"],
        vec!["gate", "nope", "UD-1", "approved"],
        vec!["export", "nope", "-o", "/dev/null"],
    ] {
        let out = wfhost(&args, s);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains("unknown run id"), "{}", stderr(&out));
    }
    let done = wfhost(&["resume", &id[..12]], s);
    assert_eq!(done.status.code(), Some(2));
    assert!(
        stderr(&done).contains("already succeeded"),
        "{}",
        stderr(&done)
    );
    assert_eq!(store_bytes(s), before);

    // Any unique part of the id names the run: the random tail people
    // remember, or a middle part.
    let tail = &id[id.len() - 6..];
    let show = wfhost(&["show", tail], s);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    assert!(stdout(&show).contains(&id));
    // Two runs share `run-`: ambiguous, listed, nothing changed.
    let again = start(&example("hello"), &workspace_in(s), s, &[]);
    assert_eq!(again.status.code(), Some(0));
    let before = store_bytes(s);
    let out = wfhost(&["show", "run-"], s);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is ambiguous: it matches") && stderr(&out).contains(&id),
        "{}",
        stderr(&out)
    );
    assert_eq!(store_bytes(s), before);
}

#[test]
fn gc_removes_old_finished_runs_and_keeps_waiting_ones() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ok = start(&example("hello"), &workspace_in(s), s, &[]);
    assert_eq!(ok.status.code(), Some(0));
    let gated = start(&example("review-gate"), &workspace_in(s), s, &[]);
    assert_eq!(gated.status.code(), Some(3));
    std::thread::sleep(Duration::from_millis(1100));

    let kept = wfhost(&["gc", "--older-than", "1h"], s);
    assert!(stdout(&kept).contains("0 runs older"), "{}", stdout(&kept));
    // Without --older-than: the home's retention, 60 days unless
    // config.json says otherwise; a bad config.json is named, not ignored.
    let dry = |s: &Path| json_of(&wfhost(&["gc", "--dry-run", "--json"], s));
    assert_eq!(dry(s)["older_than"], "60d");
    let config = s.join("home/config.json");
    std::fs::write(&config, r#"{"retention": "1s"}"#).unwrap();
    let by_config = dry(s);
    assert_eq!(by_config["older_than"], "1s");
    assert_eq!(by_config["candidates"].as_array().unwrap().len(), 1);
    std::fs::write(&config, r#"{"retention": "forever"}"#).unwrap();
    let bad = wfhost(&["gc"], s);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("config.json") && stderr(&bad).contains("retention"),
        "{}",
        stderr(&bad)
    );
    std::fs::remove_file(&config).unwrap();
    let dry = json_of(&wfhost(
        &["gc", "--older-than", "1s", "--dry-run", "--json"],
        s,
    ));
    assert_eq!(dry["candidates"].as_array().unwrap().len(), 1);
    assert_eq!(
        json_of(&wfhost(&["runs", "--json"], s))
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let out = wfhost(&["gc", "--older-than", "1s"], s);
    assert!(
        stdout(&out).contains("1 run older than 1s removed"),
        "{}",
        stdout(&out)
    );
    let runs = json_of(&wfhost(&["runs", "--json"], s));
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(runs[0]["status"], "waiting");
    let out = wfhost(&["gc", "--older-than", "1s", "--include-unfinished"], s);
    assert!(stdout(&out).contains("1 run older"), "{}", stdout(&out));
    assert!(stdout(&wfhost(&["runs"], s)).contains("no runs yet"));

    let bad = wfhost(&["gc", "--older-than", "soon"], s);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("is not an age"), "{}", stderr(&bad));
}

#[test]
fn a_workspace_in_use_by_a_live_run_is_refused_unless_shared() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let warm = wfhost(&["validate", example("durable").to_str().unwrap()], s);
    assert_eq!(warm.status.code(), Some(0));
    // The durable example thinks for 60 ms per block: long enough to meet.
    let mut first = command(s)
        .args([
            "run",
            example("durable").to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while only_run(s).is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let owner = only_run(s).expect("the first run was recorded");
    let second = wfhost(
        &[
            "run",
            example("hello").to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ],
        s,
    );
    assert_eq!(second.status.code(), Some(4), "{}", stderr(&second));
    let err = stderr(&second);
    assert!(
        err.contains("is in use by run") && err.contains(&owner),
        "{err}"
    );
    assert!(err.lines().count() == 1, "{err}");
    let shared = wfhost(
        &[
            "run",
            example("hello").to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
            "--shared-workspace",
        ],
        s,
    );
    assert_eq!(shared.status.code(), Some(0), "{}", stderr(&shared));
    assert_eq!(first.wait().unwrap().code(), Some(0));
    // Free again once the first run is at rest.
    let after = wfhost(
        &[
            "run",
            example("hello").to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ],
        s,
    );
    assert_eq!(after.status.code(), Some(0), "{}", stderr(&after));
}

#[test]
fn a_workspace_is_never_a_silent_default() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let out = command(s)
        .current_dir(s)
        .args(["run", example("hello").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no workspace: pass --workspace DIR"), "{err}");
    assert!(!s.join("home").exists(), "nothing recorded");
    assert!(
        !s.join("notes").exists(),
        "nothing written in the current directory"
    );
    // A manifest may name its workspace, relative to itself; the host's
    // folders there come with a .gitignore.
    let dir = tempfile::tempdir().unwrap();
    let mut wf: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example("hello")).unwrap()).unwrap();
    wf["workspace"] = "ws".into();
    wf.as_object_mut().unwrap().remove("$schema");
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    std::fs::write(dir.path().join("wf.json"), wf.to_string()).unwrap();
    let out = wfhost(&["run", dir.path().join("wf.json").to_str().unwrap()], s);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path().join("ws/notes/hello.txt").exists());
    let ignore = std::fs::read_to_string(dir.path().join("ws/.output/.gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "*"), "{ignore}");
}

#[test]
fn a_killed_runs_staging_copies_are_collected_by_gc() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let tmp = s.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let ws = workspace_in(s);
    let manifest = s.join("slow.json");
    std::fs::write(
        &manifest,
        serde_json::json!({
            "id": "slow", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
                "worker": "scripted",
                "file_restrictions": ["out/**"],
                "config": {"responses": ["done"], "delay_ms": 30000},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}}
        })
        .to_string(),
    )
    .unwrap();
    let staged = || -> Vec<String> {
        std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("wfhost-stage-"))
            .collect()
    };
    // Scratch directories go to memory or TMPDIR; this test's own place
    // keeps other tests' out of its count.
    let mut child = command(s)
        .env("WFHOST_SCRATCH_DIR", &tmp)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while staged().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!staged().is_empty(), "the block never staged its copy");
    child.kill().unwrap(); // SIGKILL: nothing cleans up
    child.wait().unwrap();
    assert!(!staged().is_empty());
    let gc = command(s)
        .env("WFHOST_SCRATCH_DIR", &tmp)
        .args(["gc", "--json"])
        .output()
        .unwrap();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert!(staged().is_empty(), "left: {:?}", staged());
    let report: serde_json::Value = serde_json::from_slice(&gc.stdout).unwrap();
    assert_eq!(
        report["scratch_removed"].as_array().unwrap().len(),
        1,
        "{report}"
    );
}

/// A bundle is sealed with a plain SHA-256 anyone can recompute: its run id
/// is checked for what it is, before anything is stored or made of it.
#[test]
fn a_re_sealed_bundle_whose_run_id_is_a_path_or_a_script_line_is_refused() {
    use wfhost_store::forgery::{HOSTILE_RUN_IDS, forge, forge_session};
    let here = tempfile::tempdir().unwrap();
    let there = tempfile::tempdir().unwrap();
    let out = start(
        &example("review-gate"),
        &workspace_in(here.path()),
        here.path(),
        &["--session", "chat-7"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let id = only_run(here.path()).unwrap();
    let run_bundle = here.path().join("run.json");
    let session_bundle = here.path().join("session.json");
    let out = wfhost(
        &["export", &id, "-o", run_bundle.to_str().unwrap()],
        here.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = wfhost(
        &[
            "session",
            "export",
            "chat-7",
            "-o",
            session_bundle.to_str().unwrap(),
        ],
        here.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = wfhost_store::Bundle::parse(&std::fs::read(&run_bundle).unwrap()).unwrap();
    let session =
        wfhost_store::SessionBundle::parse(&std::fs::read(&session_bundle).unwrap()).unwrap();

    // A directory whose contents an accepted id would have removed.
    let victim = there.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "mine").unwrap();
    let victim = victim.to_str().unwrap().to_string();
    let mut ids: Vec<&str> = HOSTILE_RUN_IDS.to_vec();
    ids.push(&victim);
    let before = store_bytes(there.path());
    for hostile in ids {
        let forged = there.path().join("forged.json");
        for (what, text, args) in [
            ("run", forge(&run, &id, hostile), vec!["import"]),
            (
                "session",
                forge_session(&session, &id, hostile),
                vec!["session", "import"],
            ),
        ] {
            std::fs::write(&forged, text).unwrap();
            let mut args = args.clone();
            args.push(forged.to_str().unwrap());
            let out = wfhost(&args, there.path());
            assert_eq!(
                out.status.code(),
                Some(2),
                "{what} {hostile:?}: {}",
                stderr(&out)
            );
            let err = stderr(&out);
            assert!(err.contains("run id"), "{what} {hostile:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        }
    }
    assert_eq!(store_bytes(there.path()), before, "nothing stored");
    assert_eq!(
        std::fs::read_to_string(Path::new(&victim).join("keep.txt")).unwrap(),
        "mine"
    );
    assert!(!there.path().join("home/locks").exists());
}
