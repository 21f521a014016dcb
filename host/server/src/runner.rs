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
use std::process::{Command, Stdio};
use std::time::Duration;

use wfhost_protocol::{Accepted, AppError, Reply, RunRequest};
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
/// (`wfhost serve-run`).
#[derive(Debug, Clone)]
pub struct ProcessRunner {
    pub exe: PathBuf,
    /// Where the run processes cache compiled plugins (their
    /// `WFHOST_CACHE_DIR`); None leaves them the server's environment.
    pub cache_dir: Option<PathBuf>,
    /// The run processes compile plugins without a cache
    /// (`WFHOST_NO_CACHE=1`).
    pub no_cache: bool,
}

/// The hidden subcommand a run process is started with.
pub const SERVE_RUN: &str = "serve-run";

impl RunService for ProcessRunner {
    fn submit(&self, home: &Path, request: &RunRequest) -> Result<Submitted, AppError> {
        // The id was chosen or checked by the server; a log is named by a
        // run id and nothing else all the same.
        let run_id =
            RunId::parse(request.run_id()).map_err(|e| AppError::bad_input(e).at("/run_id"))?;
        let log_path = log_path(home, &run_id)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| AppError::internal(format!("cannot open {}: {e}", log_path.display())))?;
        let mut command = Command::new(&self.exe);
        if let Some(dir) = &self.cache_dir {
            command.env("WFHOST_CACHE_DIR", dir);
        }
        if self.no_cache {
            command.env(NO_CACHE_ENV, "1");
        }
        let mut child = command
            .arg(SERVE_RUN)
            .env("WFHOST_HOME", home)
            // Its blocks become jobs, run by agents.
            .env(RUN_BLOCKS_AS_JOBS, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| AppError::internal(format!("cannot start {}: {e}", self.exe.display())))?;
        let line = serde_json::to_string(request)
            .map_err(|e| AppError::internal(format!("cannot encode the request: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A process that died at once shows in its reply (none).
            let _ = writeln!(stdin, "{line}");
        }
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_reply(stdout));
            // Reaped when it ends, so it never lingers as a zombie.
            let status = child.wait();
            drop(status);
        });
        match rx.recv_timeout(START_WAIT) {
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

/// `<home>/serve-logs/<run>.log`, its folder made.
fn log_path(home: &Path, run_id: &RunId) -> Result<PathBuf, AppError> {
    let logs = home.join("serve-logs");
    std::fs::create_dir_all(&logs)
        .map_err(|e| AppError::internal(format!("cannot make {}: {e}", logs.display())))?;
    Ok(logs.join(format!("{run_id}.log")))
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
        let runner = ProcessRunner {
            exe: PathBuf::from("/nonexistent/wfhost"),
            cache_dir: None,
            no_cache: false,
        };
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
}
