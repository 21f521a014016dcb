//! Starting and continuing runs over the API, through one port:
//! [`RunService`]. The server hands it a typed [`RunRequest`] and gets back
//! what was made durable or a typed [`AppError`] — never a command line,
//! never a child's stderr. The real service ([`ProcessRunner`]) executes
//! each run in its own `wfhost` process (crash isolation: a run that brings
//! its process down leaves the server up), speaking the line protocol of
//! `wfhost_protocol`: the request as one JSON line on the child's standard
//! input, the reply as one JSON line on its standard output. The process's
//! messages go to `<home>/serve-logs/<run>.log`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wfhost_protocol::{Accepted, AppError, Reply, RequestLine, RunRequest};
use wfhost_store::RunId;

/// How long a request waits for its process to get going.
pub const START_WAIT: Duration = Duration::from_secs(30);

pub use wfhost_protocol::RUN_BLOCKS_AS_JOBS;

/// Set (to `1`) for run processes of a server started with `--no-cache`:
/// they compile plugins without a cache (the runtime's `NO_CACHE_ENV`).
pub const NO_CACHE_ENV: &str = "WFHOST_NO_CACHE";

/// The longest reply line read from a run process.
const MAX_REPLY_BYTES: u64 = 1 << 20;

/// What became of a submitted request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// Recorded; the run goes on (or has finished meanwhile).
    Accepted(Accepted),
    /// Still starting after [`START_WAIT`]: not refused so far.
    Starting,
}

/// The application layer as the server sees it: start, answer, resume and
/// fork runs. Blocking; called off the async threads.
pub trait RunService: Send + Sync + std::fmt::Debug {
    /// Carry out `request` against the store in `home`; answered once the
    /// request is durable, or refused with nothing recorded.
    fn submit(&self, home: &Path, request: &RunRequest) -> Result<Submitted, AppError>;
}

/// Runs executed each in its own process of the `wfhost` executable
/// (`wfhost serve-run`). One process is kept started ahead, a spare
/// waiting for its request: it has loaded the executable and made its
/// wasm runtime with the built-in plugins while nothing asked, so a
/// request pays for neither. A spare that is not wanted ends when its
/// input closes (the server gone, or its executable replaced).
#[derive(Debug, Clone)]
pub struct ProcessRunner {
    pub exe: PathBuf,
    /// Where the run processes cache compiled plugins (their
    /// `WFHOST_CACHE_DIR`); None leaves them the server's environment.
    pub cache_dir: Option<PathBuf>,
    /// The run processes compile plugins without a cache
    /// (`WFHOST_NO_CACHE=1`).
    pub no_cache: bool,
    spare: Arc<Mutex<Option<Spare>>>,
    /// Requests whose process has not answered yet.
    starting: Arc<AtomicUsize>,
}

/// A run process started before its request.
#[derive(Debug)]
struct Spare {
    child: Child,
    home: PathBuf,
    /// The executable it runs, as it was when the spare started.
    exe: Option<ExeIdentity>,
}

/// Which file an executable path names, and its version of it: a spare
/// whose executable was replaced since (an upgrade) is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ExeIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    modified: Option<std::time::SystemTime>,
}

impl ExeIdentity {
    fn of(exe: &Path) -> Option<ExeIdentity> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(exe).ok()?;
        Some(ExeIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            modified: meta.modified().ok(),
        })
    }
}

/// The hidden subcommand a run process is started with.
pub const SERVE_RUN: &str = "serve-run";

/// Where a run process writes its messages once it knows its run:
/// `<dir>/<run>.log`. Before, they go to `<dir>/.spare.log` (a name no
/// run id takes).
pub use wfhost_protocol::SERVE_LOG_DIR_ENV;

impl ProcessRunner {
    pub fn new(exe: PathBuf, cache_dir: Option<PathBuf>, no_cache: bool) -> Self {
        ProcessRunner {
            exe,
            cache_dir,
            no_cache,
            spare: Arc::default(),
            starting: Arc::default(),
        }
    }

    /// Start the spare for runs in `home` now, before any request.
    pub fn prepare(&self, home: &Path) {
        self.refill(home);
    }

    /// A run process for `home`: the spare if it is for `home`, alive and
    /// runs the executable there is now, else a new one.
    fn process(&self, home: &Path) -> Result<Child, AppError> {
        let spare = self.spare_lock().take();
        if let Some(mut spare) = spare {
            let usable = spare.home == home
                && spare.exe.is_some()
                && spare.exe == ExeIdentity::of(&self.exe)
                && matches!(spare.child.try_wait(), Ok(None));
            if usable {
                return Ok(spare.child);
            }
            retire(spare.child);
        }
        self.spawn(home)
    }

    /// Start a spare for `home` unless one is kept already.
    fn refill(&self, home: &Path) {
        if self.spare_lock().is_some() {
            return;
        }
        let exe = ExeIdentity::of(&self.exe);
        match self.spawn(home) {
            Ok(child) => {
                let spare = Spare {
                    child,
                    home: home.to_path_buf(),
                    exe,
                };
                let mut slot = self.spare_lock();
                match slot.as_ref() {
                    // Another request kept one meanwhile.
                    Some(_) => retire(spare.child),
                    None => *slot = Some(spare),
                }
            }
            Err(e) => tracing::debug!(error = %e, "no spare run process"),
        }
    }

    /// Hand `line` to a run process for `home`: its one reply line comes
    /// on the channel (None when it ends without one). The process is
    /// reaped when it ends.
    fn start(&self, home: &Path, line: &str) -> Result<Receiver<Option<Reply>>, AppError> {
        let mut child = self.process(home)?;
        let mut stdin = child.stdin.take().expect("piped");
        if writeln!(stdin, "{line}").is_err() {
            // The spare ended before it read anything: a new process.
            retire(child);
            child = self.spawn(home)?;
            stdin = child.stdin.take().expect("piped");
            // A process that died at once shows in its reply (none).
            let _ = writeln!(stdin, "{line}");
        }
        drop(stdin);
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_reply(stdout));
            // Reaped when it ends, so it never lingers as a zombie.
            let status = child.wait();
            drop(status);
        });
        Ok(rx)
    }

    fn spare_lock(&self) -> std::sync::MutexGuard<'_, Option<Spare>> {
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spawn(&self, home: &Path) -> Result<Child, AppError> {
        let logs = logs_dir(home)?;
        let early = logs.join(".spare.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&early)
            .map_err(|e| AppError::internal(format!("cannot open {}: {e}", early.display())))?;
        let mut command = Command::new(&self.exe);
        if let Some(dir) = &self.cache_dir {
            command.env("WFHOST_CACHE_DIR", dir);
        }
        if self.no_cache {
            command.env(NO_CACHE_ENV, "1");
        }
        command
            .arg(SERVE_RUN)
            .env("WFHOST_HOME", home)
            .env(SERVE_LOG_DIR_ENV, &logs)
            // Its blocks become jobs, run by agents.
            .env(RUN_BLOCKS_AS_JOBS, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| AppError::internal(format!("cannot start {}: {e}", self.exe.display())))
    }
}

/// Let a run process that got no request go: its input closed, it ends by
/// itself; reaped on a thread of its own.
fn retire(mut child: Child) {
    drop(child.stdin.take());
    std::thread::spawn(move || drop(child.wait()));
}

impl RunService for ProcessRunner {
    fn submit(&self, home: &Path, request: &RunRequest) -> Result<Submitted, AppError> {
        // The id was chosen or checked by the server; a log is named by a
        // run id and nothing else all the same.
        let run_id =
            RunId::parse(request.run_id()).map_err(|e| AppError::bad_input(e).at("/run_id"))?;
        let log_path = logs_dir(home)?.join(format!("{run_id}.log"));
        // The run's spans go under the span that asked (the request's).
        let line = RequestLine {
            request: request.clone(),
            traceparent: wfhost_protocol::trace::current(),
        };
        let line = serde_json::to_string(&line)
            .map_err(|e| AppError::internal(format!("cannot encode the request: {e}")))?;
        self.starting.fetch_add(1, Ordering::SeqCst);
        let reply = self
            .start(home, &line)
            .map(|answer| answer.recv_timeout(START_WAIT));
        // The next request's process starts now, while this run goes on;
        // not while other requests are being started (a burst): each of
        // those gets a process of its own anyway, and a spare's warm-up
        // would only take time from them.
        if self.starting.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.refill(home);
        }
        match reply? {
            Ok(Some(Reply::Accepted(accepted))) => Ok(Submitted::Accepted(accepted)),
            Ok(Some(Reply::Refused(e))) => Err(e),
            Ok(None) => Err(AppError::internal(format!(
                "the run's process ended without an answer; its log is {}",
                log_path.display()
            ))),
            Err(_) => Ok(Submitted::Starting),
        }
    }
}

/// `<home>/serve-logs`, made if need be.
fn logs_dir(home: &Path) -> Result<PathBuf, AppError> {
    let logs = home.join("serve-logs");
    std::fs::create_dir_all(&logs)
        .map_err(|e| AppError::internal(format!("cannot make {}: {e}", logs.display())))?;
    Ok(logs)
}

/// The one reply line of a run process, or None when it closed its
/// output (or wrote something else) without one.
fn read_reply(out: impl std::io::Read) -> Option<Reply> {
    let mut line = String::new();
    std::io::BufReader::new(out.take(MAX_REPLY_BYTES))
        .read_line(&mut line)
        .ok()?;
    serde_json::from_str(line.trim_end()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_one_line_and_anything_else_is_none() {
        let accepted = b"{\"accepted\":{\"branch\":1}}\nrest\n";
        assert_eq!(
            read_reply(&accepted[..]),
            Some(Reply::Accepted(Accepted { branch: Some(1) }))
        );
        let refused = b"{\"refused\":{\"kind\":\"busy\",\"message\":\"m\"}}\n";
        assert_eq!(
            read_reply(&refused[..]),
            Some(Reply::Refused(AppError::busy("m")))
        );
        assert_eq!(read_reply(&b""[..]), None);
        assert_eq!(read_reply(&b"error: --help\n"[..]), None);
        assert_eq!(read_reply(&vec![b'{'; 2 << 20][..]), None);
    }

    #[test]
    fn a_request_for_a_run_id_that_is_none_starts_no_process() {
        let home = tempfile::tempdir().unwrap();
        let runner = ProcessRunner::new(PathBuf::from("/nonexistent/wfhost"), None, false);
        for bad in ["", "../x", "a/b", ".hidden"] {
            let request = RunRequest::Resume {
                run_id: bad.into(),
                branch: None,
            };
            let e = runner.submit(home.path(), &request).unwrap_err();
            assert_eq!(e.kind, wfhost_protocol::ErrorKind::BadInput, "{bad}: {e}");
        }
        assert!(!home.path().join("serve-logs").exists());
    }

    /// A stand-in run process: it notes its pid in `started` when it
    /// starts, and answers a request with its pid as the branch (or ends
    /// quietly when its input closes first).
    fn stand_in(dir: &Path, started: &Path) -> PathBuf {
        let exe = dir.join("run-process");
        let script = format!(
            "#!/bin/sh\necho $$ >> '{}'\nread line || exit 0\nprintf '{{\"accepted\":{{\"branch\":%s}}}}\\n' $$\n",
            started.display()
        );
        let staged = dir.join("run-process.new");
        std::fs::write(&staged, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Replaced the way an upgrade replaces a file: a rename over it.
        std::fs::rename(&staged, &exe).unwrap();
        exe
    }

    fn started(file: &Path) -> Vec<u32> {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    }

    /// Wait up to 10 s for `done`.
    fn wait_for(mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "waited 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn answered_by(runner: &ProcessRunner, home: &Path) -> u32 {
        let request = RunRequest::Resume {
            run_id: "run-20261126-190000-abcdef".into(),
            branch: None,
        };
        match runner.submit(home, &request).unwrap() {
            Submitted::Accepted(Accepted { branch: Some(pid) }) => pid,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_spare_takes_the_next_request_unless_its_executable_was_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let log = dir.path().join("started");
        let exe = stand_in(dir.path(), &log);
        let runner = ProcessRunner::new(exe, None, false);

        runner.prepare(&home);
        wait_for(|| started(&log).len() == 1);
        let spare = started(&log)[0];
        assert_eq!(answered_by(&runner, &home), spare, "the spare answers");

        // Another spare waits for the next request; the executable is
        // replaced meanwhile: that spare is let go, a new process answers.
        wait_for(|| started(&log).len() == 2);
        let stale = started(&log)[1];
        stand_in(dir.path(), &log);
        let answered = answered_by(&runner, &home);
        assert_ne!(answered, stale, "a spare of the old executable answered");
        assert!(started(&log).contains(&answered));
        // Let go, it ends by itself (its input closed).
        wait_for(|| {
            std::fs::read_to_string(format!("/proc/{stale}/stat")).map_or(true, |s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        });
    }
}
