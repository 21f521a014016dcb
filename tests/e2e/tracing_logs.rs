//! `WFHOST_LOG`: the spans of a run on stderr, nothing of them on stdout.

use super::*;

/// `wfhost run examples/hello/workflow.json -w WS`, with `log` as
/// `WFHOST_LOG` when given.
fn hello(scratch: &Path, log: Option<&str>) -> Output {
    let ws = scratch.join("ws");
    let _ = std::fs::remove_dir_all(&ws);
    std::fs::create_dir_all(&ws).unwrap();
    let manifest = repo().join("examples/hello/workflow.json");
    let mut cmd = command(scratch);
    cmd.args([
        "run",
        manifest.to_str().unwrap(),
        "-w",
        ws.to_str().unwrap(),
    ]);
    if let Some(log) = log {
        cmd.env("WFHOST_LOG", log);
    }
    let out = cmd.output().expect("wfhost runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    out
}

/// The run id `wfhost run` announces on its first line (`run ID of ...`).
fn run_id(stdout: &str) -> String {
    let first = stdout.lines().next().unwrap_or_default();
    let id = first.strip_prefix("run ").and_then(|r| r.split(' ').next());
    id.unwrap_or_else(|| panic!("no run id in {stdout}"))
        .to_string()
}

/// `text` with `id` as `RUN` and each duration (`1.2 ms`) as `T ms`: what
/// two runs of the same workflow print differently.
fn normalised(text: &str, id: &str) -> String {
    let text = text.replace(id, "RUN");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(" ms") {
        let head = &rest[..at];
        let before = head.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        out.push_str(before);
        if before.len() < head.len() {
            out.push('T');
        }
        out.push_str(" ms");
        rest = &rest[at + " ms".len()..];
    }
    out.push_str(rest);
    out
}

#[test]
fn wfhost_log_writes_the_runs_spans_to_stderr_and_leaves_stdout_alone() {
    let scratch = tempfile::tempdir().unwrap();
    let plain = hello(scratch.path(), None);
    let traced = hello(scratch.path(), Some("debug"));
    let (plain_out, traced_out) = (stdout(&plain), stdout(&traced));
    let (plain_id, traced_id) = (run_id(&plain_out), run_id(&traced_out));
    assert_ne!(plain_id, traced_id);

    // Without WFHOST_LOG, no span reaches stderr.
    assert!(!stderr(&plain).contains("run_id="), "{}", stderr(&plain));

    // With it, the run's span, with the run's id, and each block's span
    // (its step and attempt) under it, on stderr.
    let log = stderr(&traced);
    let run_span = format!("run{{run_id={traced_id} workflow=hello}}");
    assert!(log.lines().any(|l| l.contains(&run_span)), "{log}");
    // The process that drives it, with the branch, around the engine's.
    let drive_span = format!("drive{{run_id={traced_id} branch=1 pid=");
    assert!(
        log.lines()
            .any(|l| l.contains(&drive_span) && l.contains(&run_span)),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l.contains(&run_span)
            && l.contains(&format!(
                "block{{run_id={traced_id} node=main block=greet step=0 attempt=1}}"
            ))),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l.contains(&format!(
            "block{{run_id={traced_id} node=main block=done step=3 attempt=1}}"
        ))),
        "{log}"
    );
    assert!(!traced_out.contains("run_id="), "{traced_out}");

    // Stdout is the same, but for the run id and the timings.
    assert_eq!(
        normalised(&plain_out, &plain_id),
        normalised(&traced_out, &traced_id)
    );
}

#[test]
fn durations_and_the_run_id_are_all_that_normalising_changes() {
    assert_eq!(
        normalised("run r-1 ok (1.2 ms)\n  a: 1 run, 13.0 ms\n", "r-1"),
        "run RUN ok (T ms)\n  a: 1 run, T ms\n"
    );
}
