//! `wfhost serve-run` (hidden): a run process of `wfhost serve`. It reads
//! one [`RunRequest`] as a JSON line on standard input, carries it out with
//! the same functions as `wfhost run`, `gate`, `resume` and `fork`, and
//! answers with one [`Reply`] line on standard output as soon as the
//! request is durable (or refused). Standard output then points at
//! standard error (the serve log), so nothing else reaches the protocol.
//! Request data is only ever data here: it never passes through a command
//! line.

use std::io::{BufRead, Read, Write};

use wfhost_app::{AppError, ErrorKind};
use wfhost_protocol::{Accepted, Reply, RequestLine, RunRequest};

use crate::resume::{ExecOptions, GateAnswer};
use crate::run::{InputSource, RunSpec};
use crate::{Global, exit_code, report_error};

/// The longest request line read.
const MAX_REQUEST_BYTES: u64 = 16 << 20;

/// The reply, sent at most once.
struct Replier(Option<std::fs::File>);

impl Replier {
    fn send(&mut self, reply: &Reply) {
        if let Some(mut out) = self.0.take() {
            let line = serde_json::to_string(reply).unwrap_or_default();
            // The server may have gone: the run goes on regardless.
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
    }
}

pub fn serve_run(global: &Global) -> u8 {
    let protocol = match crate::mcp::protocol_stdout() {
        Ok(fd) => fd,
        Err(e) => {
            report_error(format!("cannot set up the reply channel: {e}"));
            return exit_code(ErrorKind::Internal);
        }
    };
    let mut replier = Replier(Some(std::fs::File::from(protocol)));
    // A spare started before its request: its runtime is made while it
    // waits. One given its request at once loads only what the run needs.
    if !input_waiting() {
        prewarm_in_background();
    }
    let request = match read_request() {
        // The server closed the input of a spare it did not need.
        Ok(None) => return crate::exit::SUCCESS,
        Ok(Some(r)) => r,
        Err(e) => {
            replier.send(&Reply::Refused(e.clone()));
            report_error(&e.message);
            return exit_code(e.kind);
        }
    };
    log_to_run_file(&request);
    let mut accept = |accepted: &Accepted| replier.send(&Reply::Accepted(accepted.clone()));
    let result = carry_out(request, global, &mut accept);
    match result {
        Ok(code) => {
            replier.send(&Reply::Accepted(Accepted::default()));
            code
        }
        Err(e) => {
            // The run went on and came to rest, or nothing was recorded.
            let went_on = matches!(
                e.kind,
                ErrorKind::Waiting
                    | ErrorKind::Failed
                    | ErrorKind::Interrupted
                    | ErrorKind::Cancelled
            );
            replier.send(&match went_on {
                true => Reply::Accepted(Accepted::default()),
                false => Reply::Refused(e.clone()),
            });
            report_error(&e.message);
            exit_code(e.kind)
        }
    }
}

/// The request line; None when the input ends before any byte.
fn read_request() -> Result<Option<RunRequest>, AppError> {
    let mut line = String::new();
    let read = std::io::BufReader::new(std::io::stdin().take(MAX_REQUEST_BYTES))
        .read_line(&mut line)
        .map_err(|e| AppError::bad_input(format!("reading the request: {e}")))?;
    if read == 0 {
        return Ok(None);
    }
    let line: RequestLine = serde_json::from_str(line.trim_end())
        .map_err(|e| AppError::bad_input(format!("the request is not a run request: {e}")))?;
    // The run's spans go under the span of the server that sent it.
    if let Some(parent) = &line.traceparent {
        wfhost_protocol::trace::set_inbound(parent);
    }
    Ok(Some(line.request))
}

/// Make the run's runtime on a thread of the lowest priority, so that the
/// processes of runs under way (the spare is started while one is) lose
/// no time to it. Not waited for: a request that comes first makes its
/// own runtime.
fn prewarm_in_background() {
    let started = std::thread::Builder::new()
        .name("wfhost-prewarm".into())
        .spawn(|| {
            // SAFETY: the priority of this thread alone (its thread id).
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
            }
            wfhost_app::plugins::prewarm(&wfhost_app::plugins::RuntimeChoice::default());
        });
    drop(started);
}

/// Whether the request can be read at once (standard input is readable).
fn input_waiting() -> bool {
    let mut fds = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd on the stack, no wait.
    unsafe { libc::poll(&mut fds, 1, 0) > 0 }
}

/// From here on, messages go to the run's log in the directory the server
/// named (`SERVE_LOG_DIR_ENV`): `<dir>/<run>.log`, appended to. Without
/// that directory, or when the log cannot be opened (said where messages
/// went so far), they stay where they were.
fn log_to_run_file(request: &RunRequest) {
    let Some(dir) = std::env::var_os(wfhost_protocol::SERVE_LOG_DIR_ENV) else {
        return;
    };
    // Only a run id names a file: never a path from the request.
    let Ok(run_id) = wfhost_store::RunId::parse(request.run_id()) else {
        return;
    };
    let path = std::path::Path::new(&dir).join(format!("{run_id}.log"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path);
    match file {
        // SAFETY: dup2 onto the process's own standard output and error;
        // `file` stays owned here and is closed after.
        Ok(file) => unsafe {
            use std::os::fd::AsRawFd;
            libc::dup2(file.as_raw_fd(), 2);
            libc::dup2(file.as_raw_fd(), 1);
        },
        Err(e) => report_error(format!("cannot open {}: {e}", path.display())),
    }
}

fn carry_out(
    request: RunRequest,
    global: &Global,
    accepted: &mut dyn FnMut(&Accepted),
) -> Result<u8, AppError> {
    let exec = ExecOptions::quiet();
    match request {
        RunRequest::Start {
            manifest,
            workspace,
            run_id,
            inputs,
            max_steps,
            executor,
        } => {
            let run_id = wfhost_store::RunId::parse(&run_id)
                .map_err(|e| AppError::bad_input(e).at("/run_id"))?;
            let executor = match executor {
                Some(text) => text.parse().map_err(|e| {
                    AppError::bad_input(format!("executor `{text}`: {e}")).at("/executor")
                })?,
                None => wfhost_exec::Executor::Local,
            };
            let mut spec = RunSpec::served(manifest.into(), workspace.into(), run_id);
            spec.inputs = InputSource::Given(inputs);
            spec.executor = executor;
            if let Some(n) = max_steps {
                spec.max_steps = n;
            }
            crate::run::start(spec, global, accepted)
        }
        RunRequest::Answer {
            run_id,
            gate,
            answer,
        } => crate::resume::answer_gate(
            GateAnswer {
                run: run_id,
                gate,
                answer,
            },
            &exec,
            global,
            accepted,
        ),
        RunRequest::Resume { run_id, branch } => {
            crate::resume::resume_run(&run_id, branch, &exec, global, accepted)
        }
        RunRequest::Fork { run_id, at } => {
            crate::resume::fork_run(&run_id, &at, &exec, global, accepted)
        }
        RunRequest::Settle { run_id } => {
            let store = global.app_existing_store()?;
            let run = store
                .run(&run_id)
                .map_err(|e| AppError::internal(e.to_string()))?
                .ok_or_else(|| AppError::not_found(format!("no run {run_id}")).at(&run_id))?;
            wfhost_app::session_files::SessionFiles::rewrite_after_end(&store, &run);
            Ok(crate::exit::SUCCESS)
        }
    }
}
