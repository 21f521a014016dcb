//! A test guest for the `container` and `slurm` capabilities. The block
//! config is `{"ops": [...]}`; each op runs in order and appends a `PROBE`
//! segment, `ok: <detail>` or `err: <error>`, so tests assert what the
//! plugin itself saw through the WIT interfaces.

use std::time::{Duration, Instant};

use serde::Deserialize;
use wfhost_sdk::container;
use wfhost_sdk::exec::{Command, ContainerOptions, ExecError, SlurmOptions};
use wfhost_sdk::prelude::*;
use wfhost_sdk::slurm;

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op {
    /// Start a container; later container ops address it.
    ContainerRun {
        image: String,
        argv: Vec<String>,
        #[serde(default)]
        cwd: Option<String>,
        #[serde(default)]
        allow_shell: bool,
    },
    ContainerStatus,
    ContainerLogs,
    ContainerPause,
    ContainerUnpause,
    ContainerRemove,
    /// Poll the status until the command exited.
    ContainerWait {
        timeout_ms: u64,
    },
    /// Address a container this plugin did not start.
    ContainerStatusOf {
        id: String,
    },
    /// Submit commands as one job; later slurm ops address it.
    SlurmSubmit {
        commands: Vec<Vec<String>>,
        #[serde(default)]
        partition: Option<String>,
    },
    SlurmStatus,
    /// Poll until the job finished.
    SlurmWait {
        timeout_ms: u64,
    },
    SlurmCancel,
    SlurmStatusOf {
        id: String,
    },
}

#[derive(Deserialize)]
struct Config {
    ops: Vec<Op>,
}

fn error(e: ExecError) -> String {
    match e {
        ExecError::Refused(m) => format!("err: refused: {m}"),
        ExecError::Invalid(m) => format!("err: invalid: {m}"),
        ExecError::Unavailable(m) => format!("err: unavailable: {m}"),
        ExecError::Failed(m) => format!("err: failed: {m}"),
    }
}

fn state(s: container::ContainerState) -> String {
    match s {
        container::ContainerState::Running => "running".into(),
        container::ContainerState::Paused => "paused".into(),
        container::ContainerState::Exited(code) => format!("exited({code})"),
        container::ContainerState::Gone => "gone".into(),
    }
}

fn job(s: slurm::JobStatus) -> String {
    match s.result {
        Some(r) => format!(
            "{} finished={} succeeded={} bundle={} exits={:?}",
            s.state,
            s.finished,
            r.succeeded,
            r.bundle_dir,
            r.commands.iter().map(|c| c.exit_code).collect::<Vec<_>>()
        ),
        None => format!("{} finished={}", s.state, s.finished),
    }
}

fn report(r: Result<String, ExecError>) -> String {
    match r {
        Ok(detail) => format!("ok: {detail}"),
        Err(e) => error(e),
    }
}

pub struct CapabilityProbe;

impl Worker for CapabilityProbe {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config()?;
        let mut container_id = String::new();
        let mut job_id = String::new();
        for op in config.ops {
            let outcome = match op {
                Op::ContainerRun {
                    image,
                    argv,
                    cwd,
                    allow_shell,
                } => {
                    let options = ContainerOptions {
                        image,
                        cpus: None,
                        memory_mb: Some(128),
                    };
                    let command = Command {
                        argv,
                        cwd,
                        env: vec![("PROBE".into(), "1".into())],
                    };
                    let started = container::run(&options, &command, allow_shell);
                    report(started.inspect(|id| container_id = id.clone()))
                }
                Op::ContainerStatus => report(container::status(&container_id).map(state)),
                Op::ContainerLogs => {
                    report(container::logs(&container_id).map(|(o, e)| format!("{o}|{e}")))
                }
                Op::ContainerPause => report(container::pause(&container_id).map(|()| "".into())),
                Op::ContainerUnpause => {
                    report(container::unpause(&container_id).map(|()| "".into()))
                }
                Op::ContainerRemove => report(container::remove(&container_id).map(|()| "".into())),
                Op::ContainerWait { timeout_ms } => {
                    let until = Instant::now() + Duration::from_millis(timeout_ms);
                    loop {
                        match container::status(&container_id) {
                            Ok(container::ContainerState::Exited(code)) => {
                                break format!("ok: exited({code})");
                            }
                            Ok(_) if Instant::now() < until => {
                                std::thread::sleep(Duration::from_millis(50))
                            }
                            Ok(s) => break format!("err: still {}", state(s)),
                            Err(e) => break error(e),
                        }
                    }
                }
                Op::ContainerStatusOf { id } => report(container::status(&id).map(state)),
                Op::SlurmSubmit {
                    commands,
                    partition,
                } => {
                    let commands: Vec<Command> = commands
                        .into_iter()
                        .map(|argv| Command {
                            argv,
                            cwd: None,
                            env: vec![],
                        })
                        .collect();
                    let options = SlurmOptions {
                        partition,
                        time_limit: None,
                        cpus_per_task: None,
                        mem_mb: None,
                        extra_args: vec![],
                    };
                    report(
                        slurm::submit(&commands, false, &options).inspect(|id| job_id = id.clone()),
                    )
                }
                Op::SlurmStatus => report(slurm::status(&job_id).map(job)),
                Op::SlurmWait { timeout_ms } => {
                    let until = Instant::now() + Duration::from_millis(timeout_ms);
                    loop {
                        match slurm::status(&job_id) {
                            Ok(s) if s.finished => break format!("ok: {}", job(s)),
                            Ok(_) if Instant::now() < until => {
                                std::thread::sleep(Duration::from_millis(100))
                            }
                            Ok(s) => break format!("err: still {}", job(s)),
                            Err(e) => break error(e),
                        }
                    }
                }
                Op::SlurmCancel => report(slurm::cancel(&job_id).map(|()| "".into())),
                Op::SlurmStatusOf { id } => report(slurm::status(&id).map(job)),
            };
            payload.push(segment("PROBE", outcome));
        }
        Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS"))
    }
}

export_worker!(CapabilityProbe);
