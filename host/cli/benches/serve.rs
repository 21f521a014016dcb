//! What a server costs: the whole `wfhost serve` process (release build,
//! its SQLite store at the default `full` durability) driven over loopback
//! HTTP, as agents and clients drive it. Reports figures; asserts nothing
//! about time. Figures are in docs/guide/benchmarks.md.
//!
//! - `lease`: one agent's lease + complete round trip for a no-op job, one
//!   after the other (p50, p90).
//! - `drain`: 4 agents draining 10,000 queued no-op jobs (jobs/s).
//! - `page`: `GET /v1/runs/{id}/events?after=…&limit=100` of a run with
//!   100,000 events, at random places (p50, p90).
//! - `dashboard`: the requests the dashboard makes for its first render —
//!   of the runs page with 10,000 runs (the page, its script and style,
//!   the first 50 runs) and of a 100,000-event run (its summary, branches
//!   and newest 500 events, beside the runs page) — summed per render.
//! - `sse`: from an event's commit by another process to its arrival on an
//!   open event stream (p50, p90).
//!
//! The agents here are HTTP clients doing what `wfhost agent` does around a
//! job — lease it, report its result — without running anything: the
//! figures are the server's and its store's. `cargo bench -p wfhost --bench
//! serve [lease|drain|page]`; `WFHOST_BENCH_JOBS` and `WFHOST_BENCH_EVENTS`
//! change the sizes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wfhost_core::run::event::{CommandRecord, Event, PayloadDelta};
use wfhost_core::run::payload::Statistics;
use wfhost_store::{Durability, NewJob, RunRecord, Store};

/// A `wfhost serve` process over `home`, killed when dropped.
struct Server {
    child: Child,
    authority: String,
}

impl Server {
    fn start(home: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_wfhost"))
            .args(["serve", "--listen", "127.0.0.1:0", "--local-agents", "0"])
            .env("WFHOST_HOME", home)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("wfhost serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "wfhost: serving http://127.0.0.1:PORT/v1 (store in …)"
        let authority = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("unexpected first line from wfhost serve: {line}"))
            .to_string();
        Server { child, authority }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One kept-alive HTTP/1.1 connection.
struct Client {
    stream: BufReader<TcpStream>,
    authority: String,
}

impl Client {
    fn connect(authority: &str) -> Client {
        let stream = TcpStream::connect(authority).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream: BufReader::new(stream),
            authority: authority.to_string(),
        }
    }

    fn request(&mut self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let body = body.map(Value::to_string).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.authority,
            body.len()
        );
        let stream = self.stream.get_mut();
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut status_line = String::new();
        self.stream.read_line(&mut status_line).unwrap();
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line: {status_line:?}"));
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            self.stream.read_line(&mut header).unwrap();
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut buf = vec![0; length];
        self.stream.read_exact(&mut buf).unwrap();
        (status, serde_json::from_slice(&buf).unwrap_or(Value::Null))
    }

    /// Lease a job and complete it at once; false when none was queued.
    fn lease_and_complete(&mut self, agent: &str) -> bool {
        let (status, answer) = self.request(
            "POST",
            "/v1/agent/lease",
            Some(&json!({"agent": agent, "capabilities": ["wasm"]})),
        );
        assert_eq!(status, 200, "lease: {answer}");
        let job = &answer["job"];
        if job.is_null() {
            return false;
        }
        let (status, done) = self.request(
            "POST",
            &format!("/v1/jobs/{}/complete", job["id"]),
            Some(&json!({
                "attempt": job["attempt"],
                "token": job["token"],
                "succeeded": true,
                "result": {"signal": "SIGNAL:SUCCESS"},
            })),
        );
        assert_eq!(status, 200, "complete: {done}");
        true
    }
}

fn started(run_id: &str) -> Event {
    Event::RunStarted {
        run_id: run_id.into(),
        workflow_id: "bench".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        plugins: Default::default(),
        start_node: "main".into(),
        start_block: "a".into(),
        max_steps: u64::MAX,
        max_call_depth: 64,
        default_executor: String::new(),
        inputs: Default::default(),
        rerun_of: None,
    }
}

/// A store in `home` holding one run `id` (written at `normal`: setting up
/// is not what is measured; the server writes at `full`).
fn store_with_run(home: &Path, id: &str) -> Store {
    let mut store = Store::open(home, Durability::Normal).unwrap();
    let record = RunRecord {
        id: wfhost_store::RunId::parse(id).expect("a run id"),
        workflow_id: "bench".into(),
        workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
        manifest: "/bench/workflow.json".into(),
        workspace: "/tmp".into(),
        created_at: 0,
    };
    store.create_run(&record, "{}", &started(id)).unwrap();
    store
}

fn enqueue(store: &mut Store, run: &str, jobs: u64) {
    let requires = vec!["wasm".to_string()];
    for step in 0..jobs {
        let job = NewJob {
            run_id: run,
            branch: 1,
            step,
            lane: "",
            node: "main",
            block: "a",
            requires: &requires,
            request: "{}",
        };
        store.enqueue_job(&job, 0).unwrap();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn bench_lease(rounds: u64) {
    let home = tempfile::tempdir().unwrap();
    enqueue(
        &mut store_with_run(home.path(), "run-20260101-000000-0000ee"),
        "run-20260101-000000-0000ee",
        rounds + 50,
    );
    let server = Server::start(home.path());
    let mut client = Client::connect(&server.authority);
    for _ in 0..50 {
        client.lease_and_complete("warm");
    }
    let mut times = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        assert!(client.lease_and_complete("a1"));
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "lease + complete round trip (1 agent, {rounds} no-op jobs, full): p50 {:.0} µs, p90 {:.0} µs",
        micros(percentile(&times, 0.5)),
        micros(percentile(&times, 0.9)),
    );
}

fn bench_drain(jobs: u64, agents: usize) {
    let home = tempfile::tempdir().unwrap();
    enqueue(
        &mut store_with_run(home.path(), "run-20260101-000000-0000ee"),
        "run-20260101-000000-0000ee",
        jobs,
    );
    let server = Server::start(home.path());
    let t = Instant::now();
    let done: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..agents)
            .map(|i| {
                let authority = server.authority.clone();
                s.spawn(move || {
                    let mut client = Client::connect(&authority);
                    let name = format!("agent-{i}");
                    let mut n = 0u64;
                    while client.lease_and_complete(&name) {
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let wall = t.elapsed();
    assert_eq!(done, jobs, "every job leased and completed once");
    println!(
        "{agents} agents draining {jobs} no-op jobs (full): {:.2} s, {:.0} jobs/s",
        wall.as_secs_f64(),
        jobs as f64 / wall.as_secs_f64()
    );
}

/// One step's three events.
fn step(n: u64) -> [Event; 3] {
    [
        Event::BlockStarted {
            step: n,
            node: "main".into(),
            block: "a".into(),
            attempt: 1,
        },
        Event::BlockCompleted {
            step: n,
            node: "main".into(),
            block: "a".into(),
            signal: "SIGNAL:SUCCESS".into(),
            payload: PayloadDelta::default(),
            artifact: None,
            statistics: Statistics::default(),
            duration_us: 10,
            queued_us: 0,
            failure: None,
            permanent: false,
            log: vec!["step done".into()],
            written: Vec::new(),
        },
        Event::ActionTaken {
            step: n,
            action: "JUMP:a".into(),
            command: CommandRecord::Jump {
                to: "main.a".into(),
            },
            gate_id: None,
            fallback_for: None,
        },
    ]
}

const BIG: &str = "run-20260101-000000-0000bb";

/// Fill run `big` with steps up to `events` events, in batches.
fn big_run(store: &mut Store, events: u64) {
    let mut writer = store.writer(BIG, 1).unwrap();
    let mut batch = Vec::new();
    for n in 0..(events - 1) / 3 {
        batch.extend(step(n));
        if batch.len() >= 3000 {
            wfhost_core::run::event::EventSink::append(&mut writer, &batch).unwrap();
            batch.clear();
        }
    }
    wfhost_core::run::event::EventSink::append(&mut writer, &batch).unwrap();
}

fn bench_page(events: u64, pages: usize) {
    let home = tempfile::tempdir().unwrap();
    big_run(&mut store_with_run(home.path(), BIG), events);
    let server = Server::start(home.path());
    let mut client = Client::connect(&server.authority);
    let mut times = Vec::new();
    // A fixed pseudo-random walk over the log (no rand dependency).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..pages + 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let after = x % (events - 100);
        let t = Instant::now();
        let (status, page) = client.request(
            "GET",
            &format!("/v1/runs/{BIG}/events?after={after}&limit=100"),
            None,
        );
        let took = t.elapsed();
        assert_eq!(status, 200, "page: {page}");
        assert_eq!(page["events"].as_array().map(Vec::len), Some(100));
        if i >= 20 {
            times.push(took);
        }
    }
    times.sort();
    println!(
        "GET a page of 100 events of a {events}-event run: p50 {:.0} µs, p90 {:.0} µs",
        micros(percentile(&times, 0.5)),
        micros(percentile(&times, 0.9)),
    );
}

/// A store with `runs` short runs and one run `big` of `events` events.
fn dashboard_store(home: &Path, runs: u64, events: u64) {
    let mut store = store_with_run(home, BIG);
    big_run(&mut store, events);
    for i in 0..runs {
        let id = format!("run-20260101-000000-{i:06x}");
        let record = RunRecord {
            id: wfhost_store::RunId::parse(&id).expect("a run id"),
            workflow_id: format!("flow-{}", i % 20),
            workflow_hash: wfhost_core::manifest::pinning::hash_of("{}"),
            manifest: "/bench/workflow.json".into(),
            workspace: "/tmp".into(),
            created_at: i as i64,
        };
        store.create_run(&record, "{}", &started(&id)).unwrap();
        let mut writer = store.writer(&id, 1).unwrap();
        wfhost_core::run::event::EventSink::append(&mut writer, &step(0)).unwrap();
    }
}

/// Time the requests of one render, in order, on one connection.
fn render(client: &mut Client, paths: &[String]) -> Duration {
    let t = Instant::now();
    for p in paths {
        let (status, body) = client.request("GET", p, None);
        assert_eq!(status, 200, "{p}: {body}");
    }
    t.elapsed()
}

fn bench_dashboard(runs: u64, events: u64, rounds: usize) {
    let home = tempfile::tempdir().unwrap();
    dashboard_store(home.path(), runs, events);
    let server = Server::start(home.path());
    let mut client = Client::connect(&server.authority);
    let runs_page: Vec<String> = ["/", "/ui/app.js", "/ui/app.css", "/v1/runs?limit=50"]
        .map(String::from)
        .to_vec();
    let mut run_page = runs_page.clone();
    run_page.extend([
        format!("/v1/runs/{BIG}/summary"),
        format!("/v1/runs/{BIG}/branches"),
        format!("/v1/runs/{BIG}/events?branch=1&before=18446744073709551615&limit=500"),
    ]);
    for (what, paths) in [
        (format!("the runs page ({runs} runs)"), &runs_page),
        (format!("a {events}-event run's page"), &run_page),
    ] {
        let mut times: Vec<Duration> = (0..rounds + 3)
            .map(|_| render(&mut client, paths))
            .collect();
        times.drain(..3); // warm-up
        times.sort();
        println!(
            "first render of {what}, {} requests: p50 {:.1} ms, p90 {:.1} ms",
            paths.len(),
            micros(percentile(&times, 0.5)) / 1000.0,
            micros(percentile(&times, 0.9)) / 1000.0,
        );
    }
}

fn bench_sse(rounds: usize) {
    let home = tempfile::tempdir().unwrap();
    let mut store = store_with_run(home.path(), "run-20260101-000000-0000ff");
    let server = Server::start(home.path());
    let mut stream = TcpStream::connect(&server.authority).unwrap();
    stream.set_nodelay(true).unwrap();
    write!(
        stream,
        "GET /v1/runs/run-20260101-000000-0000ff/events/stream HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        server.authority
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    // Until the first event (the run's start) has arrived.
    let next_id = |reader: &mut BufReader<TcpStream>| loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the stream ended");
        if let Some(id) = line.strip_prefix("id:") {
            return id.trim().parse::<u64>().unwrap();
        }
    };
    assert_eq!(next_id(&mut reader), 1);
    let mut times = Vec::new();
    let mut writer = store.writer("run-20260101-000000-0000ff", 1).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for n in 0..rounds as u64 {
        // Apart, as a run's blocks are (the stream is idle when one comes),
        // at no fixed phase of the server's own timers: 10 to 30 ms.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::thread::sleep(Duration::from_micros(10_000 + x % 20_000));
        let t = Instant::now();
        wfhost_core::run::event::EventSink::append(&mut writer, &step(n)[..1]).unwrap();
        let id = next_id(&mut reader);
        times.push(t.elapsed());
        assert_eq!(id, n + 2);
    }
    times.sort();
    println!(
        "an event from its commit to an open stream ({rounds} events): p50 {:.1} ms, p90 {:.1} ms",
        micros(percentile(&times, 0.5)) / 1000.0,
        micros(percentile(&times, 0.9)) / 1000.0,
    );
}

fn size(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wants = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    if wants("lease") {
        bench_lease(1000);
    }
    if wants("drain") {
        bench_drain(size("WFHOST_BENCH_JOBS", 10_000), 4);
    }
    if wants("page") {
        bench_page(size("WFHOST_BENCH_EVENTS", 100_000), 500);
    }
    if wants("dashboard") {
        bench_dashboard(
            size("WFHOST_BENCH_RUNS", 10_000),
            size("WFHOST_BENCH_EVENTS", 100_000),
            30,
        );
    }
    if wants("sse") {
        bench_sse(200);
    }
}
