//! What wfhost adds around one agent invocation: a `claude-code` preset
//! block run by the whole `wfhost run` process (release build) minus the
//! same CLI run directly in the same workspace — the snapshot, the cleared
//! environment, the prompt, the adapter and the change detection, plus
//! wfhost's own start and its store. Reports figures; asserts nothing about
//! time. Figures are in docs/guide/benchmarks.md ("Agents").
//!
//! Two CLIs:
//! - `stand-in`: a program that prints what Claude Code printed for one
//!   turn (`host/core/src/agents/testdata/claude-stream.jsonl`) and writes
//!   one file, at once — the difference is all wfhost's;
//! - `claude`: the real Claude Code of `tests/agents` (installed by
//!   `scripts/services.sh agents`) against the scripted model server of
//!   `tests/fixtures/model_server.py`, one write and one answer; skipped
//!   when it is not installed.
//!
//! Workspaces of 1,000 and 10,000 files (`WFHOST_BENCH_LARGE=1` adds
//! 100,000), each file 1 KiB in 100 folders; the block is restricted to
//! `docs/**`, so the snapshot keeps copies of nothing it may write and
//! stats everything. `WFHOST_BENCH_RUNS` runs per case (default 10); the
//! median and the spread are printed.
//!
//! `cargo bench -p wfhost --bench agents`

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn workspace(dir: &Path, files: usize) -> PathBuf {
    let ws = dir.join(format!("ws-{files}"));
    std::fs::create_dir_all(ws.join("docs")).unwrap();
    let body = vec![b'x'; 1024];
    for i in 0..files {
        let folder = ws.join(format!("src/d{:03}", i % 100));
        if i < 100 {
            std::fs::create_dir_all(&folder).unwrap();
        }
        std::fs::write(folder.join(format!("f{i}.txt")), &body).unwrap();
    }
    ws
}

/// The stand-in CLI: the recorded stream on stdout, one file written.
fn stand_in(dir: &Path) -> PathBuf {
    let stream = repo().join("host/core/src/agents/testdata/claude-stream.jsonl");
    let path = dir.join("claude-stand-in");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncat >/dev/null\nprintf 'hi\\n' > docs/hello.md\ncat '{}'\n",
            stream.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn manifest(dir: &Path, command: Option<&Path>) -> PathBuf {
    let mut config = serde_json::json!({"preset": "claude-code", "model": "claude-test-1"});
    if let Some(c) = command {
        config["command"] = serde_json::json!([c]);
    }
    let wf = serde_json::json!({
        "id": "agent-overhead",
        "plugins": {"agent": {"grants": ["agent"]}},
        "start_node": "dev",
        "nodes": {"dev": {"entry_block": "write", "blocks": {"write": {
            "worker": "agent",
            "timeout": "2m",
            "file_restrictions": ["docs/**"],
            "prompt": {"task": "Write docs/hello.md saying hello."},
            "config": config,
            "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]
        }}}}
    });
    let path = dir.join(if command.is_some() {
        "stand-in.json"
    } else {
        "claude.json"
    });
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

/// The scripted model server, with turns enough for every run.
struct ModelServer {
    child: Child,
    url: String,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn model_server(dir: &Path, runs: usize) -> ModelServer {
    let mut turns = Vec::new();
    for _ in 0..runs * 2 + 4 {
        turns.push(serde_json::json!({
            "tool_use": {"name": "Write", "input": {"file_path": "{cwd}/docs/hello.md", "content": "hi\n"}},
            "usage": {"input_tokens": 100, "output_tokens": 10}
        }));
        turns.push(serde_json::json!({"text": "Done.", "usage": {"input_tokens": 120, "output_tokens": 5}}));
    }
    let scenario = dir.join("scenario.json");
    std::fs::write(&scenario, serde_json::json!({"turns": turns}).to_string()).unwrap();
    let mut child = Command::new("python3")
        .arg(repo().join("tests/fixtures/model_server.py"))
        .arg(&scenario)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 starts the model server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("PORT ")
        .expect("PORT n")
        .to_string();
    ModelServer {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

fn time(mut command: Command) -> Duration {
    let start = Instant::now();
    let out = command.output().expect("the command starts");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{:?} failed: {}{}",
        command,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn stats(mut times: Vec<Duration>) -> (f64, f64, f64) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1]),
    )
}

struct Case<'a> {
    name: &'a str,
    /// The CLI's argv when run directly.
    direct: Vec<String>,
    manifest: PathBuf,
    env: Vec<(String, String)>,
}

fn measure(case: &Case, ws: &Path, home: &Path, runs: usize) -> (Vec<Duration>, Vec<Duration>) {
    let (mut direct, mut wrapped) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let _ = std::fs::remove_file(ws.join("docs/hello.md"));
        let mut c = Command::new(&case.direct[0]);
        c.args(&case.direct[1..])
            .current_dir(ws)
            .env("HOME", home.join(format!("direct-{i}")))
            .envs(case.env.iter().cloned())
            .stdin(std::fs::File::open(repo().join("README.md")).unwrap());
        direct.push(time(c));
        let _ = std::fs::remove_file(ws.join("docs/hello.md"));
        let mut c = Command::new(env!("CARGO_BIN_EXE_wfhost"));
        c.arg("run")
            .arg(&case.manifest)
            .arg("-w")
            .arg(ws)
            .arg("--quiet")
            .env("WFHOST_HOME", home.join("wfhost"))
            .envs(case.env.iter().cloned())
            .stdin(Stdio::null());
        wrapped.push(time(c));
    }
    (direct, wrapped)
}

fn main() {
    let runs: usize = std::env::var("WFHOST_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut sizes = vec![1_000, 10_000];
    if std::env::var("WFHOST_BENCH_LARGE").as_deref() == Ok("1") {
        sizes.push(100_000);
    }
    let dir = tempfile::tempdir().unwrap();
    let stand_in = stand_in(dir.path());
    let claude = repo().join("tests/agents/node_modules/.bin/claude");
    let server = claude
        .exists()
        .then(|| model_server(dir.path(), runs * sizes.len()));
    let mut cases = vec![Case {
        name: "stand-in",
        direct: vec![stand_in.display().to_string()],
        manifest: manifest(dir.path(), Some(&stand_in)),
        env: Vec::new(),
    }];
    match &server {
        Some(server) => cases.push(Case {
            name: "claude",
            direct: [
                claude.display().to_string().as_str(),
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--model",
                "claude-test-1",
                "--permission-mode",
                "default",
                "--allowedTools",
                "Write(docs/**)",
                "Edit(docs/**)",
                "Write(.output/**)",
                "Edit(.output/**)",
                "Bash",
            ]
            .map(String::from)
            .to_vec(),
            manifest: manifest(dir.path(), None),
            env: vec![
                ("ANTHROPIC_BASE_URL".into(), server.url.clone()),
                ("ANTHROPIC_API_KEY".into(), "bench".into()),
                (
                    "PATH".into(),
                    format!(
                        "{}:{}",
                        claude.parent().unwrap().display(),
                        std::env::var("PATH").unwrap_or_default()
                    ),
                ),
            ],
        }),
        None => println!(
            "claude: skipped ({} is not installed: scripts/services.sh agents)",
            claude.display()
        ),
    }
    println!("| CLI | files | direct (median, min–max) | under wfhost | wfhost's part |");
    println!("|---|---:|---:|---:|---:|");
    for files in sizes {
        let ws = workspace(dir.path(), files);
        for case in &cases {
            let home = dir.path().join(format!("home-{}-{files}", case.name));
            let (direct, wrapped) = measure(case, &ws, &home, runs);
            let (d, dmin, dmax) = stats(direct);
            let (w, wmin, wmax) = stats(wrapped);
            println!(
                "| {} | {files} | {d:.1} ms ({dmin:.1}–{dmax:.1}) | {w:.1} ms ({wmin:.1}–{wmax:.1}) | {:.1} ms |",
                case.name,
                w - d
            );
        }
    }
}
