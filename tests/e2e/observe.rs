//! Seeing a run: the run's screen (fallbacks, validation errors, causes,
//! plurals, run-order statistics, escaped plugin text, colour only on a
//! terminal, the live status line) and `wfhost logs`.

use super::*;

/// The run id from `run`'s first line (`run RUN of WORKFLOW ...`).
fn run_id(out: &Output) -> String {
    let text = stdout(out);
    let first = text.lines().next().unwrap_or_default();
    first
        .split_whitespace()
        .nth(1)
        .filter(|id| id.starts_with("run-"))
        .unwrap_or_else(|| panic!("no run id in: {text}{}", stderr(out)))
        .to_string()
}

fn write_manifest(dir: &Path, name: &str, wf: serde_json::Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

/// An exec block whose command writes to stdout and stderr (and sleeps
/// `sleep` first), then an echo block.
pub(super) fn exec_manifest(dir: &Path, sleep: &str) -> PathBuf {
    let script = format!("sleep {sleep}; echo built-ok; echo warning: flaky test >&2; exit 3");
    write_manifest(
        dir,
        "exec.json",
        serde_json::json!({
            "id": "logs",
            "plugins": {"exec": {"grants": ["exec"]}},
            "start_node": "main",
            "nodes": {"main": {"entry_block": "build", "blocks": {
                "build": {
                    "worker": "exec",
                    "config": {"commands": [{"argv": ["sh", "-c", script]}], "allow_shell": true},
                    "transitions": [
                        {"on_signal": "SIGNAL:EXEC_FAILED", "action": "JUMP:report"},
                        {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:the build did not run"}
                    ]
                },
                "report": {
                    "worker": "echo",
                    "config": {"message": "reported"},
                    "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
                }
            }}}
        }),
    )
}

#[test]
fn logs_show_a_blocks_stderr_and_filter_by_block() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(s.path(), "0");
    let out = run_workflow(&manifest, ws.path(), s.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = run_id(&out);

    let all = wfhost(&["logs", &id], s.path());
    assert_eq!(all.status.code(), Some(0), "{}", stderr(&all));
    let text = stdout(&all);
    assert!(
        text.contains("[0] main.build -> SIGNAL:EXEC_FAILED"),
        "{text}"
    );
    assert!(text.contains("(exit 3)"), "{text}");
    assert!(text.contains("stdout| built-ok"), "{text}");
    assert!(text.contains("stderr| warning: flaky test"), "{text}");
    assert!(text.contains("[1] main.report -> SIGNAL:SUCCESS"), "{text}");

    for filter in ["build", "main.build"] {
        let only = stdout(&wfhost(&["logs", &id, filter], s.path()));
        assert!(only.contains("stderr| warning: flaky test"), "{only}");
        assert!(!only.contains("main.report"), "{only}");
    }
    let report = stdout(&wfhost(&["logs", &id, "report"], s.path()));
    assert!(report.contains("[1] main.report"), "{report}");
    assert!(!report.contains("flaky"), "{report}");

    let bad = wfhost(&["logs", &id, "nope"], s.path());
    assert_eq!(bad.status.code(), Some(2));
    assert!(stdout(&bad).is_empty());
    assert_eq!(
        stderr(&bad).lines().collect::<Vec<_>>(),
        [format!(
            "error: run {id} has no block `nope` (its blocks: main.build, main.report)"
        )]
    );
}

/// `wfhost run MANIFEST -w WS` in the background, and its run id once the
/// run is in the store. The caller waits for the child.
#[allow(clippy::zombie_processes)]
fn start_in_background(s: &Path, manifest: &Path, ws: &Path) -> (std::process::Child, String) {
    let run = command(s)
        .args(["run", manifest.to_str().unwrap(), "-w"])
        .arg(ws)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    loop {
        let out = wfhost(&["runs", "--json"], s);
        let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if let Some(id) = runs[0]["id"].as_str() {
            return (run, id.to_string());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn logs_follow_a_live_run_until_it_stops() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = exec_manifest(s.path(), "1");
    let (mut run, id) = start_in_background(s.path(), &manifest, ws.path());
    let followed = wfhost(&["logs", &id, "--follow"], s.path());
    assert!(run.wait().unwrap().success());
    let text = stdout(&followed);
    assert_eq!(followed.status.code(), Some(0), "{}", stderr(&followed));
    assert!(text.contains("stderr| warning: flaky test"), "{text}");
    assert!(text.contains("[1] main.report -> SIGNAL:SUCCESS"), "{text}");
}

#[test]
fn the_screen_shows_fallbacks_plurals_and_run_order() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let out = run_workflow(
        &repo().join("examples/hello/workflow.json"),
        ws.path(),
        s.path(),
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains("fallback: SIGNAL:UNEXPECTED -> SIGNAL:FAIL_DEFAULT"),
        "{text}"
    );
    assert!(text.contains("4 steps, 1 line written, 0 tokens"), "{text}");
    assert!(
        text.contains("  main.greet: 1 run, 0 tokens, 0 lines"),
        "{text}"
    );
    assert!(
        text.contains("  main.write_note: 1 run, 0 tokens, 1 line,"),
        "{text}"
    );
    // Statistics in the order the blocks first ran, not alphabetical.
    let order: Vec<usize> = [
        "main.greet:",
        "main.write_note:",
        "main.check:",
        "main.done:",
    ]
    .iter()
    .map(|b| text.find(b).unwrap_or_else(|| panic!("{b} in {text}")))
    .collect();
    assert!(order.is_sorted(), "{text}");
    let id = run_id(&out);
    let show = stdout(&wfhost(&["show", &id], s.path()));
    assert!(
        show.contains("(no transition: SIGNAL:UNEXPECTED -> SIGNAL:FAIL_DEFAULT)"),
        "{show}"
    );
    assert!(
        show.find("main.greet:") < show.find("main.check:"),
        "{show}"
    );
}

#[test]
fn the_screen_shows_validation_errors_and_the_cause_of_a_failure() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/validation-retry/workflow.json");
    let out = run_workflow(&manifest, ws.path(), s.path());
    let text = stdout(&out);
    assert!(
        text.contains(
            "validation error: output of `main.draft_plan` failed validation: at /tasks: [] has less than 1 item"
        ),
        "{text}"
    );
    assert!(
        text.contains("  main.draft_plan: 2 runs, 240 tokens"),
        "{text}"
    );

    // An exec block that cannot start: the run fails by its FAIL action,
    // and the worker's error is named as the cause.
    let manifest = write_manifest(
        s.path(),
        "nocwd.json",
        serde_json::json!({
            "id": "nocwd",
            "plugins": {"exec": {"grants": ["exec"]}},
            "start_node": "main",
            "nodes": {"main": {"entry_block": "build", "blocks": {"build": {
                "worker": "exec",
                "config": {"commands": [{"argv": ["true"], "cwd": "missing"}]},
                "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:the build did not run"}]
            }}}}
        }),
    );
    let out = run_workflow(&manifest, ws.path(), s.path());
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("        error: plugin `exec` failed: command-failed"),
        "{text}"
    );
    let err = stderr(&out);
    assert!(
        err.contains("error: block `main.build`: the build did not run"),
        "{err}"
    );
    assert!(
        err.contains("error: caused by: plugin `exec` failed: command-failed"),
        "{err}"
    );
}

const HOSTILE: &str = "OK\u{1b}[2J\u{1b}]0;pwned\u{7}\rrun forged succeeded\nerror: none";

/// A worker whose failure message carries terminal escape sequences (a
/// signal with control characters is refused outright: see
/// `a_signal_with_control_characters_fails_the_block`).
fn hostile_manifest(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("probe.wasm"), wfhost_guest_artifacts::TEST_PROBE).unwrap();
    write_manifest(
        dir,
        "hostile.json",
        serde_json::json!({
            "id": "hostile",
            "start_node": "main",
            "plugins": {"probe": {"path": "probe.wasm"}},
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
                "worker": "probe",
                "config": {"ops": [{"op": "fail", "code": "x", "message": HOSTILE}]},
                "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]
            }}}}
        }),
    )
}

#[test]
fn plugin_text_is_escaped_and_json_stays_exact() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = hostile_manifest(s.path());
    let out = run_workflow(&manifest, ws.path(), s.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out) + &stderr(&out);
    assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
    assert!(
        text.contains("OK\\e[2J\\e]0;pwned\\u{7}\\rrun forged succeeded\\nerror: none"),
        "{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("error: none") || l.starts_with("run forged")),
        "{text}"
    );
    let id = run_id(&out);
    for args in [vec!["events", &id], vec!["show", &id], vec!["logs", &id]] {
        let shown = stdout(&wfhost(&args, s.path()));
        assert!(shown.contains("OK\\e[2J"), "{args:?}: {shown}");
        assert!(!shown.contains('\u{1b}'), "{args:?}: {shown:?}");
    }
    // JSON carries the message exactly as the worker sent it.
    let events = run_events(s.path(), &id);
    let completed = events
        .iter()
        .find(|e| e["type"] == "block_completed")
        .unwrap();
    assert_eq!(
        completed["failure"],
        format!("plugin `probe` failed: x: {HOSTILE}")
    );
}

#[test]
fn a_signal_with_control_characters_fails_the_block() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = write_manifest(
        s.path(),
        "signal.json",
        serde_json::json!({
            "id": "signal", "start_node": "main",
            "nodes": {"main": {"entry_block": "a", "blocks": {"a": {
                "worker": "echo",
                "config": {"message": "hi", "signal": format!("SIGNAL:{HOSTILE}")},
                "transitions": [{"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "END"}]
            }}}}
        }),
    );
    let out = run_workflow(&manifest, ws.path(), s.path());
    let text = stdout(&out);
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("main.a -> SIGNAL:WORKER_ERROR"), "{text}");
    assert!(text.contains("control character"), "{text}");
}

/// `wfhost ARGS` on a pseudo-terminal (util-linux `script`): everything it
/// wrote to the terminal.
fn on_a_terminal(scratch: &Path, args: &[&str], no_color: bool) -> String {
    let mut line = env!("CARGO_BIN_EXE_wfhost").to_string();
    for a in args {
        line.push_str(&format!(" '{a}'"));
    }
    let cmd = command(scratch);
    let mut script = Command::new("script");
    script.args(["-qec", &line, "/dev/null"]);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    if no_color {
        script.env("NO_COLOR", "1");
    } else {
        script.env_remove("NO_COLOR");
    }
    let out = script.output().expect("util-linux `script` runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn colour_and_the_status_line_only_on_a_terminal() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/hello/workflow.json");
    let ws_arg = ws.path().to_str().unwrap();
    let args = ["run", manifest.to_str().unwrap(), "-w", ws_arg];

    // Not a terminal: not one escape sequence.
    let piped = wfhost(&args, s.path());
    assert!(!stdout(&piped).contains('\u{1b}'), "{:?}", stdout(&piped));
    assert!(!stderr(&piped).contains('\u{1b}'));

    // A terminal: green signals, and the status line drawn and cleared.
    let tty = on_a_terminal(s.path(), &args, false);
    assert!(tty.contains("\u{1b}[32mSIGNAL:SUCCESS\u{1b}[0m"), "{tty:?}");
    assert!(tty.contains("\r\u{1b}[2K"), "{tty:?}");
    assert!(tty.contains("main.check -> SIGNAL:UNEXPECTED"), "{tty:?}");

    // NO_COLOR: the status line stays, the colour goes.
    let plain = on_a_terminal(s.path(), &args, true);
    assert!(plain.contains("main.greet -> SIGNAL:SUCCESS"), "{plain:?}");
    assert!(
        !plain.contains("\u{1b}[32m") && !plain.contains("\u{1b}[31m"),
        "{plain:?}"
    );

    // --quiet and --json: no status line, no colour, even on a terminal.
    let quiet = on_a_terminal(s.path(), &[&args[..], &["--quiet"]].concat(), false);
    assert!(
        !quiet.contains("\u{1b}[2K") && !quiet.contains("main.greet ->"),
        "{quiet:?}"
    );
    assert!(quiet.contains("4 steps, 1 line written"), "{quiet:?}");
    let json = on_a_terminal(s.path(), &[&args[..], &["--json"]].concat(), false);
    assert!(!json.contains('\u{1b}'), "{json:?}");
}

#[test]
fn the_status_line_shows_a_slurm_blocks_job_and_state() {
    if !super::exec::slurm_ready() {
        return;
    }
    let ws = super::exec::project_workspace();
    let s = tempfile::tempdir().unwrap();
    let manifest = repo().join("examples/exec-slurm/workflow.json");
    let args = [
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.path().to_str().unwrap(),
    ];
    let tty = on_a_terminal(s.path(), &args, true);
    assert!(tty.contains("succeeded: 2 steps"), "{tty:?}");
    let line = tty
        .split(['\r', '\n'])
        .find(|l| l.contains("[0] main.build ") && l.contains("· Slurm job "))
        .unwrap_or_else(|| panic!("no Slurm job on the status line: {tty:?}"));
    assert!(
        ["PENDING", "RUNNING", "CONFIGURING", "COMPLETING"]
            .iter()
            .any(|s| line.contains(s)),
        "{line}"
    );
}

#[test]
fn lanes_are_numbered_under_their_blocks_step_on_the_screen_and_in_show() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = write_manifest(
        s.path(),
        "lanes.json",
        serde_json::json!({
            "id": "lanes",
            "start_node": "dev",
            "nodes": {"dev": {"entry_block": "implement", "blocks": {
                "implement": {
                    "worker": "echo",
                    "parallel": {"merge_strategy": "workspace", "lanes": {
                        "api": {"config": {"message": "api", "write": {"path": "api.txt", "content": "a\n"}}},
                        "ui": {"config": {"message": "ui", "write": {"path": "ui.txt", "content": "u\n"}}}
                    }},
                    "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:after"}]
                },
                "after": {
                    "worker": "echo",
                    "config": {"message": "done"},
                    "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
                }
            }}}
        }),
    );
    let out = run_workflow(&manifest, ws.path(), s.path());
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains(
            "  [0] dev.implement: 2 lanes (api, ui), merge: workspace; the lanes run as steps 0-1"
        ),
        "{text}"
    );
    for lane in ["api", "ui"] {
        assert!(
            text.contains(&format!("  [0.{lane}] -> SIGNAL:SUCCESS (")),
            "{text}"
        );
    }
    assert!(text.contains("1 file changed)"), "{text}");
    assert!(!text.contains("[1]"), "{text}");
    assert!(text.contains("  [2] dev.after -> SIGNAL:SUCCESS"), "{text}");
    let show = stdout(&wfhost(&["show", &run_id(&out)], s.path()));
    assert!(show.contains(" [0.api] -> SIGNAL:SUCCESS"), "{show}");
    assert!(show.contains(" [0.ui] -> SIGNAL:SUCCESS"), "{show}");
    let logs = stdout(&wfhost(&["logs", &run_id(&out), "implement"], s.path()));
    assert!(
        logs.contains("[0.api] dev.implement -> SIGNAL:SUCCESS"),
        "{logs}"
    );
    assert!(
        logs.contains("log: [info] wrote api.txt (1 line)"),
        "{logs}"
    );
}

#[test]
fn logs_show_an_agents_output() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let agent = repo().join("examples/agents/scripted_agent.py");
    let manifest = write_manifest(
        s.path(),
        "agent.json",
        serde_json::json!({
            "id": "agent-logs",
            "plugins": {"agent": {"grants": ["agent"]}},
            "start_node": "dev",
            "nodes": {"dev": {"entry_block": "implement", "blocks": {"implement": {
                "worker": "agent",
                "file_restrictions": ["src/**"],
                "prompt": {"task": "add a file"},
                "config": {"command": [agent.to_str().unwrap(), "--write", "src/a.rs=a", "--summary", "added a.rs"]},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}}
        }),
    );
    let out = run_workflow(&manifest, ws.path(), s.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let logs = stdout(&wfhost(&["logs", &run_id(&out)], s.path()));
    assert!(
        logs.contains("[0] dev.implement -> SIGNAL:SUCCESS"),
        "{logs}"
    );
    assert!(logs.contains("  bundle .output/agent/"), "{logs}");
    assert!(logs.contains("    stderr| "), "{logs}");
    assert!(logs.contains("exit 0: added a.rs"), "{logs}");
}

/// A workflow whose exec block prints `started-work`, waits for `gate`,
/// then prints `finished-work`.
fn waiting_manifest(dir: &Path, gate: &Path) -> PathBuf {
    let script = format!(
        "echo started-work; while [ ! -e '{}' ]; do sleep 0.05; done; echo finished-work",
        gate.display()
    );
    write_manifest(
        dir,
        "live.json",
        serde_json::json!({
            "id": "live",
            "plugins": {"exec": {"grants": ["exec"]}},
            "start_node": "main",
            "nodes": {"main": {"entry_block": "build", "blocks": {"build": {
                "worker": "exec",
                "config": {"commands": [{"argv": ["sh", "-c", script]}], "allow_shell": true},
                "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
            }}}}
        }),
    )
}

/// Lines of `out` up to the one that contains `until`; the gate is
/// created after a minute should it never come, so nothing hangs.
fn lines_until(
    out: std::process::ChildStdout,
    gate: &Path,
    until: &str,
) -> (
    Vec<String>,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) {
    use std::io::BufRead;
    let watchdog = gate.to_path_buf();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(60));
        let _ = std::fs::write(watchdog, "");
    });
    let mut lines = std::io::BufReader::new(out).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push(line.clone());
        if line.contains(until) {
            break;
        }
    }
    (seen, lines)
}

/// `run -v` shows a running block's output as its commands write it.
#[test]
fn run_verbose_shows_a_running_commands_output_as_it_is_written() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let gate = s.path().join("go");
    let manifest = waiting_manifest(s.path(), &gate);
    let mut run = command(s.path())
        .args(["run", manifest.to_str().unwrap(), "-v", "-w"])
        .arg(ws.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (seen, rest) = lines_until(run.stdout.take().unwrap(), &gate, "stdout| started-work");
    assert!(
        seen.iter().any(|l| l.contains("[0] main.build running")),
        "{seen:?}"
    );
    assert!(!gate.exists() && run.try_wait().unwrap().is_none());
    std::fs::write(&gate, "").unwrap();
    let rest: Vec<String> = rest.map(|l| l.unwrap()).collect();
    assert!(run.wait().unwrap().success());
    let rest = rest.join("\n");
    let done = rest.find("[0] main.build -> SIGNAL:SUCCESS").expect(&rest);
    assert!(rest[..done].contains("stdout| finished-work"), "{rest}");
}

/// `logs --follow` shows a running block's output as its commands write
/// it, not only when the block ends.
#[test]
fn logs_follow_shows_a_running_commands_output_as_it_is_written() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let gate = s.path().join("go");
    let manifest = waiting_manifest(s.path(), &gate);
    let (mut run, id) = start_in_background(s.path(), &manifest, ws.path());
    let mut follow = command(s.path())
        .args(["logs", &id, "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first line of output arrives while the command still waits.
    let (seen, rest) = lines_until(follow.stdout.take().unwrap(), &gate, "stdout| started-work");
    assert!(
        seen.iter().any(|l| l.contains("[0] main.build running")),
        "{seen:?}"
    );
    assert!(!gate.exists() && run.try_wait().unwrap().is_none());
    std::fs::write(&gate, "").unwrap();
    let rest: Vec<String> = rest.map(|l| l.unwrap()).collect();
    assert!(follow.wait().unwrap().success());
    assert!(run.wait().unwrap().success());
    let rest = rest.join("\n");
    assert!(rest.contains("stdout| finished-work"), "{rest}");
    assert!(rest.contains("[0] main.build -> SIGNAL:SUCCESS"), "{rest}");
    // Shown once: not again under the bundle when the block ends.
    assert!(!rest.contains("stdout| started-work"), "{rest}");
}

/// Every file under `dir` whose name is `name`.
fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                todo.push(path);
            } else if e.file_name() == name {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn logs_show_an_interrupted_execution_as_interrupted_with_what_it_wrote() {
    let s = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let gate = s.path().join("go");
    let manifest = waiting_manifest(s.path(), &gate);
    let (mut run, id) = start_in_background(s.path(), &manifest, ws.path());
    super::wait_until("the command's first line", || {
        files_named(ws.path(), "cmd-1.stdout")
            .iter()
            .any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("started-work")))
    });
    // The run's process dies mid-command: its bundle has no manifest.
    run.kill().unwrap();
    run.wait().unwrap();
    let logs = wfhost(&["logs", &id], s.path());
    // The orphaned command ends once the gate exists.
    std::fs::write(&gate, "").unwrap();
    let text = stdout(&logs);
    assert_eq!(logs.status.code(), Some(0), "{}", stderr(&logs));
    assert!(
        text.contains("(interrupted: its commands did not finish"),
        "{text}"
    );
    assert!(text.contains("command 1:"), "{text}");
    assert!(text.contains("started-work"), "{text}");
    assert!(!text.contains("cannot read it"), "{text}");
}
