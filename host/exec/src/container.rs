//! The container executor: exec blocks in Docker containers through
//! bollard, with the workspace bind-mounted at `/workspace`.
//!
//! **Dormancy** (seed 000): a block's container is paused when the block
//! ends and kept per image; the next block of the run that uses the same
//! image unpauses it instead of starting a new one. If the dormant
//! container is gone (removed, daemon restarted), a new one is started:
//! the cold start is always correct, the warm one only faster. A command
//! that times out takes its container with it (Docker cannot kill a single
//! exec), so the next block starts cold.
//!
//! Every container carries the labels [`LABEL_MANAGED`], [`LABEL_RUN`] and
//! [`LABEL_PID`], so that containers left behind by a crashed host can be
//! found and removed ([`ContainerPool::remove_orphans`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RemoveContainerOptions,
};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;
use wfhost_core::policy::exec::{self, ExecCommand};

use crate::bundle::{self, ContainerInfo};
use crate::{CommandResult, ExecError, ExecOutcome, ExecRequest, Owner, unix_ms};

/// Present (value `1`) on every container wfhost starts.
pub const LABEL_MANAGED: &str = "dev.wfhost.managed";
/// The run a container belongs to.
pub const LABEL_RUN: &str = "dev.wfhost.run";
/// The host process that started it.
pub const LABEL_PID: &str = "dev.wfhost.pid";
/// The host it runs for.
pub const LABEL_HOST: &str = "dev.wfhost.host";

/// Where the workspace appears inside containers.
pub const CONTAINER_WORKSPACE: &str = "/workspace";

/// Image and limits of a container block.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContainerOptions {
    /// A local image; wfhost never pulls.
    pub image: String,
    pub cpus: Option<f64>,
    pub memory_mb: Option<u64>,
    /// Endpoints relayed into the container, which has no network
    /// otherwise ([`crate::forward`]). A container with forwards is used
    /// for one execution, never kept for the next.
    pub forward: Vec<crate::forward::Forward>,
}

/// The containers of one run in one host process.
pub struct ContainerPool {
    docker: Docker,
    /// (image, mounted workspace) → paused container. The workspace is
    /// part of the key: parallel lanes mount their own workspaces, and a
    /// container must never wake up with another lane's files.
    dormant: Mutex<HashMap<(String, PathBuf), String>>,
    /// Containers started through the `container` capability: the only
    /// ones a plugin may address.
    owned: Mutex<HashSet<String>>,
    /// Containers running a block right now. A block abandoned mid-command
    /// (its future dropped) leaves its container here, for `shutdown`.
    in_use: Mutex<HashSet<String>>,
    /// Every container this pool created (noted the moment Docker names
    /// it): one whose block was abandoned while it was still being started
    /// is in no other set, and `shutdown` removes it too.
    created: std::sync::Mutex<HashSet<String>>,
}

/// Where a container started through the `container` capability is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    Running,
    Paused,
    Exited(i32),
    Gone,
}

fn docker_error(e: bollard::errors::Error) -> String {
    match e {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message,
        other => other.to_string(),
    }
}

fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// The env contract as a container sees it (`OUTPUT_DIR` and `WORKSPACE`
/// inside the container), then the command's own overrides.
fn container_env(contract: &[(String, String)], command: &[(String, String)]) -> Vec<String> {
    let mut env: Vec<String> = contract
        .iter()
        .map(|(k, v)| {
            if k == "OUTPUT_DIR" {
                format!("{k}={CONTAINER_WORKSPACE}/.output")
            } else {
                format!("{k}={v}")
            }
        })
        .collect();
    env.push(format!("WORKSPACE={CONTAINER_WORKSPACE}"));
    env.extend(command.iter().map(|(k, v)| format!("{k}={v}")));
    env
}

type ExecInput = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// Write `bytes` to an exec's attached stdin, then close it so the command
/// sees end of file. A command that exits without reading it all is not
/// an error: what it did is in its exit code. Without bytes the connection
/// is left as it is (returned, to be dropped after the output).
async fn feed_stdin(mut input: ExecInput, bytes: Option<Vec<u8>>) -> ExecInput {
    use tokio::io::AsyncWriteExt;
    if let Some(bytes) = bytes {
        let _ = input.write_all(&bytes).await;
        let _ = input.flush().await;
        let _ = input.shutdown().await;
    }
    input
}

impl ContainerPool {
    /// Connect to the local Docker engine (`DOCKER_HOST`, else the default
    /// socket) and check that it answers.
    pub async fn connect() -> Result<ContainerPool, ExecError> {
        let unavailable = |e: String| {
            ExecError::Unavailable(format!(
                "the container executor cannot reach Docker: {e}; start dockerd (see scripts/services.sh)"
            ))
        };
        let docker =
            Docker::connect_with_local_defaults().map_err(|e| unavailable(e.to_string()))?;
        docker
            .ping()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        Ok(ContainerPool {
            docker,
            dormant: Mutex::new(HashMap::new()),
            owned: Mutex::new(HashSet::new()),
            in_use: Mutex::new(HashSet::new()),
            created: std::sync::Mutex::new(HashSet::new()),
        })
    }

    /// Run an exec block in a container and write its bundle.
    pub async fn run(
        &self,
        request: &ExecRequest,
        options: &ContainerOptions,
    ) -> Result<ExecOutcome, ExecError> {
        exec::check(&request.spec)?;
        let (container, warm) = self.acquire(request, options).await?;
        self.in_use.lock().await.insert(container.clone());
        let relays = match self.relays(&container, options).await {
            Ok(relays) => relays,
            Err(e) => {
                self.in_use.lock().await.remove(&container);
                self.remove(&container).await;
                return Err(e);
            }
        };
        let bundle = match bundle::BundleDir::create(&request.bundle_dir) {
            Ok(bundle) => bundle,
            Err(e) => {
                self.in_use.lock().await.remove(&container);
                self.remove(&container).await;
                return Err(ExecError::Failed(format!(
                    "cannot create the bundle {}: {e}",
                    request.bundle_dir.display()
                )));
            }
        };
        let started_ms = unix_ms();
        let mut results = Vec::new();
        let mut container_alive = true;
        for (i, command) in request.spec.commands.iter().enumerate() {
            let result = self
                .run_command(request, &bundle, &container, i + 1, command)
                .await;
            let ok = result.succeeded();
            if result.timed_out {
                container_alive = false;
            }
            results.push(result);
            if !ok {
                break;
            }
        }
        self.in_use.lock().await.remove(&container);
        drop(relays);
        let keep = container_alive && options.forward.is_empty();
        if keep && self.docker.pause_container(&container).await.is_ok() {
            self.dormant.lock().await.insert(
                (options.image.clone(), request.workdir.clone()),
                container.clone(),
            );
        } else {
            self.remove(&container).await;
        }
        bundle::close(
            request,
            &bundle,
            bundle::Finished {
                executor: "container",
                started_ms,
                results,
                container: Some(ContainerInfo {
                    image: options.image.clone(),
                    id: container,
                    warm,
                }),
                slurm: None,
                extra_files: &[],
            },
        )
        .await
    }

    /// A running container for `options.image`: the dormant one unpaused,
    /// else a new one. Returns whether it was warm.
    async fn acquire(
        &self,
        request: &ExecRequest,
        options: &ContainerOptions,
    ) -> Result<(String, bool), ExecError> {
        let dormant = match options.forward.is_empty() {
            true => self
                .dormant
                .lock()
                .await
                .remove(&(options.image.clone(), request.workdir.clone())),
            false => None,
        };
        if let Some(id) = dormant {
            if self.docker.unpause_container(&id).await.is_ok() && self.thawed(&id).await {
                return Ok((id, true));
            }
            // Gone, broken or still frozen: fall through to a cold start.
            self.remove(&id).await;
        }
        // Keeps the container alive between execs; images must have
        // `sleep` (busybox does).
        let keep_alive = vec!["sleep".to_string(), "2147483647".to_string()];
        let id = self
            .create_and_start(
                &request.workdir,
                &request.meta.run_id,
                &request.env,
                options,
                keep_alive,
                CONTAINER_WORKSPACE.to_string(),
            )
            .await?;
        Ok((id, false))
    }

    /// The relays of `options.forward` into the container `id`.
    async fn relays(
        &self,
        id: &str,
        options: &ContainerOptions,
    ) -> Result<Option<crate::forward::Relays>, ExecError> {
        if options.forward.is_empty() {
            return Ok(None);
        }
        let pid = self
            .docker
            .inspect_container(id, None)
            .await
            .ok()
            .and_then(|c| c.state?.pid)
            .filter(|pid| *pid > 0)
            .ok_or_else(|| {
                ExecError::Unavailable(
                    "cannot forward into the container: the engine does not say its process (a remote or rootless Docker?)".into(),
                )
            })?;
        crate::forward::start(pid, &options.forward)
            .map(Some)
            .map_err(|e| ExecError::Unavailable(format!("forwarding into the container: {e}")))
    }

    /// Whether the container `id` shows as no longer paused. Under load the
    /// engine has been seen to refuse an exec as "paused" right after an
    /// unpause it answered: wait (up to 2 s) until its state says so.
    async fn thawed(&self, id: &str) -> bool {
        for _ in 0..100 {
            match self.docker.inspect_container(id, None).await {
                Ok(c) if c.state.as_ref().and_then(|s| s.paused) != Some(true) => return true,
                Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
                Err(_) => return false,
            }
        }
        false
    }

    /// Create and start a labelled container of `options.image` running
    /// `cmd`, the workspace bind-mounted, the env contract set (with
    /// `OUTPUT_DIR` as seen inside).
    async fn create_and_start(
        &self,
        workdir: &Path,
        run_id: &str,
        env: &[(String, String)],
        options: &ContainerOptions,
        cmd: Vec<String>,
        working_dir: String,
    ) -> Result<String, ExecError> {
        let workdir = std::path::absolute(workdir).unwrap_or(workdir.to_path_buf());
        let env = container_env(env, &[]);
        let labels = HashMap::from([
            (LABEL_MANAGED.to_string(), "1".to_string()),
            (LABEL_RUN.to_string(), run_id.to_string()),
            (LABEL_PID.to_string(), std::process::id().to_string()),
            (LABEL_HOST.to_string(), crate::hostname()),
        ]);
        let body = ContainerCreateBody {
            image: Some(options.image.clone()),
            cmd: Some(cmd),
            working_dir: Some(working_dir),
            env: Some(env),
            labels: Some(labels),
            network_disabled: Some(true),
            host_config: Some(HostConfig {
                binds: Some(vec![format!("{}:{CONTAINER_WORKSPACE}", workdir.display())]),
                nano_cpus: options.cpus.map(|c| (c * 1e9) as i64),
                memory: options.memory_mb.map(|m| (m as i64) << 20),
                init: Some(true),
                extra_hosts: Some(
                    options
                        .forward
                        .iter()
                        .filter_map(crate::forward::Forward::hosts_entry)
                        .collect(),
                )
                .filter(|h: &Vec<String>| !h.is_empty()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = self
            .docker
            .create_container(None::<CreateContainerOptions>, body)
            .await
            .map_err(|e| {
                if is_not_found(&e) {
                    ExecError::Invalid(format!(
                        "image `{}` is not available locally (wfhost never pulls images; build or load it first): {}",
                        options.image,
                        docker_error(e)
                    ))
                } else {
                    ExecError::Failed(format!(
                        "cannot create a container of `{}`: {}",
                        options.image,
                        docker_error(e)
                    ))
                }
            })?;
        if let Ok(mut ids) = self.created.lock() {
            ids.insert(created.id.clone());
        }
        if let Err(e) = self.docker.start_container(&created.id, None).await {
            self.remove(&created.id).await;
            return Err(ExecError::Failed(format!(
                "cannot start a container of `{}`: {}",
                options.image,
                docker_error(e)
            )));
        }
        Ok(created.id)
    }

    async fn run_command(
        &self,
        request: &ExecRequest,
        bundle: &bundle::BundleDir,
        container: &str,
        index: usize,
        command: &ExecCommand,
    ) -> CommandResult {
        let mut result = CommandResult::starting(index, command);
        let mut out = CappedFile::create(
            bundle.create_file(&result.stdout),
            request.output_cap,
            &request.mask,
        );
        let mut err = CappedFile::create(
            bundle.create_file(&result.stderr),
            request.output_cap,
            &request.mask,
        );
        if let Err(v) = exec::check_command(index, command, request.spec.allow_shell) {
            result.error = Some(v.to_string());
            result.ended_ms = unix_ms();
            return result;
        }
        // The workspace is bind-mounted: a cwd missing on the host is
        // missing in the container, where Docker would blame the program.
        if let Err(message) = crate::working_dir(&request.workdir, index, command) {
            result.error = Some(message);
            result.ended_ms = unix_ms();
            return result;
        }
        let working_dir = match &command.cwd {
            Some(cwd) => format!("{CONTAINER_WORKSPACE}/{cwd}"),
            None => CONTAINER_WORKSPACE.to_string(),
        };
        // Like the local executor: the first command gets the request's
        // stdin, then end of file; the others get none.
        let stdin = if index == 1 {
            request.stdin.clone()
        } else {
            None
        };
        let created = self
            .docker
            .create_exec(
                container,
                CreateExecOptions {
                    cmd: Some(command.argv.clone()),
                    // The whole contract for *this* block: a woken
                    // container was created by an earlier block, and its
                    // own environment is that block's.
                    env: Some(container_env(&request.env, &command.env)),
                    working_dir: Some(working_dir),
                    attach_stdin: Some(stdin.is_some()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..Default::default()
                },
            )
            .await;
        let exec_id = match created {
            Ok(c) => c.id,
            Err(e) => {
                result.error = Some(format!(
                    "command {index}: cannot create it in the container: {}",
                    docker_error(e)
                ));
                result.ended_ms = unix_ms();
                return result;
            }
        };
        let stream = async {
            match self.docker.start_exec(&exec_id, None).await {
                Ok(StartExecResults::Attached { mut output, input }) => {
                    // Fed beside the output: a command that writes before it
                    // reads must not stall on a full pipe.
                    let feed = feed_stdin(input, stdin);
                    let drain = async {
                        while let Some(chunk) = output.next().await {
                            match chunk {
                                Ok(bollard::container::LogOutput::StdOut { message }) => {
                                    out.write(&message).await
                                }
                                Ok(bollard::container::LogOutput::StdErr { message }) => {
                                    err.write(&message).await
                                }
                                Ok(_) => {}
                                Err(e) => return Err(docker_error(e)),
                            }
                        }
                        Ok(())
                    };
                    let (_input, drained) = tokio::join!(feed, drain);
                    drained
                }
                Ok(StartExecResults::Detached) => Err("the exec detached".to_string()),
                Err(e) => Err(docker_error(e)),
            }
        };
        let streamed = match request.deadline {
            Some(deadline) => {
                tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), stream)
                    .await
                    .ok()
            }
            None => Some(stream.await),
        };
        match streamed {
            None => result.timed_out = true,
            Some(Err(e)) => result.error = Some(format!("command {index}: {e}")),
            Some(Ok(())) => match self.docker.inspect_exec(&exec_id).await {
                Ok(inspect) => {
                    let code = inspect.exit_code.map(|c| c as i32);
                    result.exit_code = code;
                    // Docker reports a missing program on the exec's own output.
                    let missing = |f: &CappedFile| {
                        f.contains("executable file not found")
                            || f.contains("no such file or directory")
                    };
                    if matches!(code, Some(126 | 127)) && (missing(&out) || missing(&err)) {
                        result.error = Some(format!(
                            "command {index}: program `{}` not found in the container",
                            command.argv[0]
                        ));
                    }
                }
                Err(e) => result.error = Some(format!("command {index}: {}", docker_error(e))),
            },
        }
        (result.stdout_bytes, result.stdout_truncated) = out.finish().await;
        (result.stderr_bytes, result.stderr_truncated) = err.finish().await;
        result.ended_ms = unix_ms();
        result
    }

    async fn remove(&self, id: &str) {
        if let Ok(mut ids) = self.created.lock() {
            ids.remove(id);
        }
        let _ = self
            .docker
            .remove_container(
                id,
                Some(RemoveContainerOptions {
                    force: true,
                    ..Default::default()
                }),
            )
            .await;
    }

    /// Remove every container this pool keeps or started (the end of a
    /// run).
    pub async fn shutdown(&self) {
        let mut ids: Vec<String> = self
            .dormant
            .lock()
            .await
            .drain()
            .map(|(_, id)| id)
            .collect();
        ids.extend(self.owned.lock().await.drain());
        ids.extend(self.in_use.lock().await.drain());
        if let Ok(mut created) = self.created.lock() {
            ids.extend(created.drain());
        }
        ids.sort();
        ids.dedup();
        for id in ids {
            self.remove(&id).await;
        }
    }

    /// Start a detached container running one command, for the `container`
    /// capability. The command passes the safety policy first; its `cwd` is
    /// relative to `/workspace`.
    pub async fn start(
        &self,
        workdir: &Path,
        run_id: &str,
        env: &[(String, String)],
        options: &ContainerOptions,
        command: &ExecCommand,
        allow_shell: bool,
    ) -> Result<String, ExecError> {
        exec::check_command(1, command, allow_shell)?;
        let mut env = env.to_vec();
        env.extend(command.env.iter().cloned());
        let working_dir = match &command.cwd {
            Some(cwd) => format!("{CONTAINER_WORKSPACE}/{cwd}"),
            None => CONTAINER_WORKSPACE.to_string(),
        };
        let id = self
            .create_and_start(
                workdir,
                run_id,
                &env,
                options,
                command.argv.clone(),
                working_dir,
            )
            .await?;
        self.owned.lock().await.insert(id.clone());
        Ok(id)
    }

    async fn owned_id(&self, id: &str) -> Result<(), ExecError> {
        if self.owned.lock().await.contains(id) {
            Ok(())
        } else {
            Err(ExecError::Invalid(format!(
                "container `{id}` was not started by this run's plugin"
            )))
        }
    }

    /// The state of a container started with [`ContainerPool::start`].
    pub async fn state(&self, id: &str) -> Result<ContainerState, ExecError> {
        self.owned_id(id).await?;
        match self.docker.inspect_container(id, None).await {
            Ok(c) => {
                let state = c.state.unwrap_or_default();
                Ok(if state.paused == Some(true) {
                    ContainerState::Paused
                } else if state.running == Some(true) {
                    ContainerState::Running
                } else {
                    ContainerState::Exited(state.exit_code.unwrap_or(-1) as i32)
                })
            }
            Err(e) if is_not_found(&e) => Ok(ContainerState::Gone),
            Err(e) => Err(ExecError::Failed(docker_error(e))),
        }
    }

    /// What a started container's command wrote so far, each stream capped
    /// at `cap` bytes (the first bytes are kept).
    pub async fn logs(&self, id: &str, cap: u64) -> Result<(String, String), ExecError> {
        self.owned_id(id).await?;
        let mut stream = self.docker.logs(
            id,
            Some(bollard::query_parameters::LogsOptions {
                stdout: true,
                stderr: true,
                ..Default::default()
            }),
        );
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while let Some(chunk) = stream.next().await {
            let (buf, message) = match chunk {
                Ok(bollard::container::LogOutput::StdOut { message }) => (&mut out, message),
                Ok(bollard::container::LogOutput::StdErr { message }) => (&mut err, message),
                Ok(_) => continue,
                Err(e) if is_not_found(&e) => {
                    return Err(ExecError::Invalid(format!("container `{id}` is gone")));
                }
                Err(e) => return Err(ExecError::Failed(docker_error(e))),
            };
            let room = (cap as usize).saturating_sub(buf.len()).min(message.len());
            buf.extend_from_slice(&message[..room]);
        }
        Ok((
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        ))
    }

    /// Pause a started container.
    pub async fn pause(&self, id: &str) -> Result<(), ExecError> {
        self.owned_id(id).await?;
        self.docker
            .pause_container(id)
            .await
            .map_err(|e| ExecError::Failed(format!("cannot pause `{id}`: {}", docker_error(e))))
    }

    /// Unpause a started container.
    pub async fn unpause(&self, id: &str) -> Result<(), ExecError> {
        self.owned_id(id).await?;
        self.docker
            .unpause_container(id)
            .await
            .map_err(|e| ExecError::Failed(format!("cannot unpause `{id}`: {}", docker_error(e))))
    }

    /// Stop and remove a started container.
    pub async fn remove_started(&self, id: &str) -> Result<(), ExecError> {
        self.owned_id(id).await?;
        self.remove(id).await;
        self.owned.lock().await.remove(id);
        Ok(())
    }

    /// Containers wfhost started whose owner `is_live` says is gone: left
    /// behind by a crashed host. Removes them and returns their ids.
    pub async fn remove_orphans(
        &self,
        is_live: impl Fn(&Owner) -> bool,
    ) -> Result<Vec<String>, ExecError> {
        let filters = HashMap::from([("label".to_string(), vec![format!("{LABEL_MANAGED}=1")])]);
        let containers = self
            .docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: Some(filters),
                ..Default::default()
            }))
            .await
            .map_err(|e| ExecError::Failed(docker_error(e)))?;
        let mut removed = Vec::new();
        for c in containers {
            let label = |name: &str| {
                c.labels
                    .as_ref()
                    .and_then(|l| l.get(name))
                    .cloned()
                    .unwrap_or_default()
            };
            let owner = Owner {
                run_id: label(LABEL_RUN),
                pid: label(LABEL_PID).parse().ok(),
                host: label(LABEL_HOST),
            };
            if is_live(&owner) {
                continue;
            }
            if let Some(id) = c.id {
                self.remove(&id).await;
                removed.push(id);
            }
        }
        Ok(removed)
    }

    /// The ids of the containers labelled for `run_id`.
    pub async fn containers_of(&self, run_id: &str) -> Result<Vec<String>, ExecError> {
        let filters = HashMap::from([("label".to_string(), vec![format!("{LABEL_RUN}={run_id}")])]);
        let containers = self
            .docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: Some(filters),
                ..Default::default()
            }))
            .await
            .map_err(|e| ExecError::Failed(docker_error(e)))?;
        Ok(containers.into_iter().filter_map(|c| c.id).collect())
    }

    /// The Docker client, for tests and tools.
    pub fn docker(&self) -> &Docker {
        &self.docker
    }
}

/// A log file that keeps at most `cap` bytes and remembers how many it saw,
/// and the start of what it kept for diagnostics.
struct CappedFile {
    file: Option<tokio::fs::File>,
    cap: u64,
    seen: u64,
    kept: u64,
    cut: bool,
    head: Vec<u8>,
    /// Secret values replaced by `***` before anything is kept.
    mask: wfhost_core::policy::secrets::MaskStream,
}

impl CappedFile {
    fn create(
        file: std::io::Result<std::fs::File>,
        cap: u64,
        mask: &wfhost_core::policy::secrets::Masker,
    ) -> CappedFile {
        CappedFile {
            file: file.ok().map(tokio::fs::File::from_std),
            cap,
            seen: 0,
            kept: 0,
            cut: false,
            head: Vec::new(),
            mask: mask.stream(),
        }
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.seen += bytes.len() as u64;
        let masked = self.mask.push(bytes);
        self.keep(&masked).await;
    }

    async fn keep(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.kept).min(bytes.len() as u64) as usize;
        if room > 0
            && let Some(f) = &mut self.file
            && f.write_all(&bytes[..room]).await.is_ok()
        {
            self.kept += room as u64;
        }
        self.cut |= room < bytes.len();
        if self.head.len() < 4096 {
            let take = (4096 - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
    }

    fn contains(&self, needle: &str) -> bool {
        String::from_utf8_lossy(&self.head).contains(needle)
    }

    async fn finish(&mut self) -> (u64, bool) {
        let rest = self.mask.finish();
        self.keep(&rest).await;
        if let Some(f) = &mut self.file {
            let _ = f.flush().await;
        }
        (self.seen, self.cut)
    }
}
