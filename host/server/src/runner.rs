//! Starting and continuing runs over the API. Each run executes in its own
//! `wfhost` process (the executable the server was started from), exactly
//! as `wfhost run`, `gate`, `resume` and `fork` do on the command line: the
//! same store, the same run lock, the same checks. The request is answered
//! once the process has done what was asked (the run recorded, the answer
//! recorded, the branch made) or has refused it, whose message becomes the
//! error. The process's messages go to `<home>/serve-logs/<run>.log`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;
use wfhost_store::Store;

use crate::error::ApiError;

/// How long a request waits for its process to get going.
pub const START_WAIT: Duration = Duration::from_secs(30);

/// Set (to `1`) in the environment of the processes that execute runs for
/// the server: their blocks are queued as jobs for agents instead of run
/// in the process.
pub const RUN_BLOCKS_AS_JOBS: &str = "WFHOST_RUN_BLOCKS_AS_JOBS";

/// Set (to `1`) for run processes of a server started with `--no-cache`:
/// they compile plugins without a cache (the runtime's `NO_CACHE_ENV`).
pub const NO_CACHE_ENV: &str = "WFHOST_NO_CACHE";

/// The `wfhost` executable runs are executed with.
#[derive(Debug, Clone)]
pub struct Runner {
    pub exe: PathBuf,
    /// Where the run processes cache compiled plugins (their
    /// `WFHOST_CACHE_DIR`); None leaves them the server's environment.
    pub cache_dir: Option<PathBuf>,
    /// The run processes compile plugins without a cache
    /// (`WFHOST_NO_CACHE=1`).
    pub no_cache: bool,
}

/// What became of a launched process.
pub(crate) enum Launched {
    /// It did what was asked and goes on (or has finished meanwhile).
    Going,
    /// Still starting after [`START_WAIT`].
    Slow,
}

impl Runner {
    /// Run `wfhost <args>` against the store in `home`; wait until `done`
    /// (given the store and the process's pid) says the store shows what
    /// was asked, or the process exits. An exit
    /// with a refusal (bad input, busy) is the error; any other exit means
    /// the run went on and ended by itself.
    pub(crate) fn launch(
        &self,
        home: &Path,
        log_name: &str,
        args: &[String],
        done: impl Fn(&Store, u32) -> bool,
    ) -> Result<Launched, ApiError> {
        let logs = home.join("serve-logs");
        std::fs::create_dir_all(&logs)
            .map_err(|e| ApiError::internal(format!("cannot make {}: {e}", logs.display())))?;
        let log_path = logs.join(format!("{log_name}.log"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| ApiError::internal(format!("cannot open {}: {e}", log_path.display())))?;
        let start = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        let err_log = log
            .try_clone()
            .map_err(|e| ApiError::internal(format!("cannot open {}: {e}", log_path.display())))?;
        let mut command = Command::new(&self.exe);
        if let Some(dir) = &self.cache_dir {
            command.env("WFHOST_CACHE_DIR", dir);
        }
        if self.no_cache {
            command.env(NO_CACHE_ENV, "1");
        }
        let mut child = command
            .args(args)
            .env("WFHOST_HOME", home)
            // Its blocks become jobs, run by agents.
            .env(RUN_BLOCKS_AS_JOBS, "1")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            .spawn()
            .map_err(|e| ApiError::internal(format!("cannot start {}: {e}", self.exe.display())))?;
        let deadline = Instant::now() + START_WAIT;
        loop {
            if let Some(status) = child.try_wait().ok().flatten() {
                return match status.code() {
                    Some(0 | 1 | 3) => Ok(Launched::Going),
                    code => Err(refused(code, &said(&log_path, start))),
                };
            }
            if Store::open_existing(home).is_ok_and(|s| done(&s, child.id())) {
                // Reaped when it ends, so it never lingers as a zombie.
                std::thread::spawn(move || child.wait());
                return Ok(Launched::Going);
            }
            if Instant::now() >= deadline {
                std::thread::spawn(move || child.wait());
                return Ok(Launched::Slow);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What the process wrote to its log since `from`, its last lines.
fn said(log: &Path, from: u64) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text[(from as usize).min(text.len())..]).into_owned();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(5)..];
    tail.join("\n")
}

fn refused(code: Option<i32>, said: &str) -> ApiError {
    // The CLI's own errors are its `error:` lines; else the log's tail.
    let errors: Vec<&str> = said
        .lines()
        .filter_map(|l| l.strip_prefix("error: "))
        .collect();
    let message = if errors.is_empty() {
        said.to_string()
    } else {
        errors.join("\n")
    };
    match code {
        Some(2) => ApiError::bad_request(message),
        Some(4) => ApiError::new(StatusCode::CONFLICT, "busy", message),
        _ => ApiError::internal(if message.is_empty() {
            format!("the run's process ended with {code:?} and said nothing")
        } else {
            message
        })
        .with_details(json!({"exit_code": code})),
    }
}
