//! `wfhost serve`: the HTTP API over this home's run store
//! (`wfhost_server`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::{Global, exit, report_error};

#[derive(Args)]
pub struct ServeArgs {
    /// The address to listen on; anything but loopback needs
    /// --auth-token-file.
    #[arg(long, default_value = wfhost_server::DEFAULT_LISTEN, env = "WFHOST_LISTEN", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// A JSON file `{"clients": ["<token>"], "agents": ["<token>"]}`,
    /// readable only by its owner; every request must then carry
    /// `Authorization: Bearer <token>`.
    #[arg(long, value_name = "FILE")]
    auth_token_file: Option<PathBuf>,
    /// Agents run inside this process (all capabilities: wasm, exec,
    /// container, slurm), so one command serves a laptop; 0 leaves every
    /// job to `wfhost agent`s.
    #[arg(
        long,
        default_value_t = 1,
        env = "WFHOST_LOCAL_AGENTS",
        value_name = "N"
    )]
    local_agents: usize,
    /// How long a job's lease lasts without a heartbeat, in milliseconds
    /// (agents send one every sixth of it).
    #[arg(long, default_value_t = wfhost_server::jobs::DEFAULT_LEASE.as_millis() as u64, value_name = "MS")]
    lease_ms: u64,
    #[command(flatten)]
    cache: crate::options::CacheOptions,
    /// Connections open at once, from all clients (lowered to fit the
    /// open-file limit); one over it is closed at once, after closing an
    /// idle connection that showed no token, if there is one.
    #[arg(long, default_value_t = wfhost_server::conn::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: usize,
    /// Connections open at once from one IP address (behind a proxy,
    /// every client has the proxy's: raise it to --max-connections).
    #[arg(long, default_value_t = wfhost_server::conn::DEFAULT_MAX_CONNECTIONS_PER_PEER, value_name = "N")]
    max_connections_per_peer: usize,
    /// Take over a run this or another server executed once it has been
    /// interrupted this long, in milliseconds: its process died (killed,
    /// or with its machine) before the run came to rest. At most 3
    /// takeovers a run; 0 never takes over.
    #[arg(long, default_value_t = wfhost_server::takeover::DEFAULT_TAKE_OVER_AFTER.as_millis() as u64, value_name = "MS")]
    take_over_ms: u64,
    /// How long a connection has to send a request's headers, in
    /// milliseconds, from when it opens or its next request begins.
    #[arg(long, default_value_t = wfhost_server::conn::DEFAULT_HEADER_TIMEOUT.as_millis() as u64, value_name = "MS")]
    header_timeout_ms: u64,
    /// How long a kept-alive connection may wait for its next request, in
    /// milliseconds (a request under way, such as the event stream, is
    /// never cut).
    #[arg(long, default_value_t = wfhost_server::conn::DEFAULT_IDLE_TIMEOUT.as_millis() as u64, value_name = "MS")]
    idle_timeout_ms: u64,
    /// Where a stage graph's relative `project_path` (such as `.`) is
    /// resolved, and where `GET /v1/workflows` (the dashboard's Workflows
    /// tab) finds workflow files; by default the directory the server is
    /// started in. A relative path may not go above it (`..`).
    #[arg(long, value_name = "DIR")]
    projects_root: Option<PathBuf>,
    /// Serve HTTPS only, with this certificate chain (PEM, the server's
    /// certificate first); needs --tls-key.
    #[arg(long, requires = "tls_key", value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert", value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Require every client (agents, the CLI, browsers) to present a
    /// certificate signed by a CA in this file (PEM); needs --tls-cert.
    #[arg(long, requires = "tls_cert", value_name = "FILE")]
    tls_client_ca: Option<PathBuf>,
}

pub fn serve(args: ServeArgs, global: &Global) -> u8 {
    let home = match global.home() {
        Ok(h) => h,
        Err(code) => return code,
    };
    let tokens = match args
        .auth_token_file
        .as_deref()
        .map(wfhost_server::Tokens::read)
    {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    // Notifications to https targets go over rustls.
    wfhost_distribution::registry::install_tls_provider();
    // Runs started over the API execute in this same executable.
    let runner = std::env::current_exe().ok().map(|exe| {
        let runner = wfhost_server::ProcessRunner::new(
            exe,
            args.cache.cache_dir.clone(),
            args.cache.no_cache,
        );
        // Not before the server has made its home (with its own modes).
        if home.is_dir() {
            runner.prepare(&home);
        }
        std::sync::Arc::new(runner) as std::sync::Arc<dyn wfhost_server::RunService>
    });
    if args.local_agents > 64 {
        report_error("--local-agents: at most 64");
        return exit::BAD_INPUT;
    }
    let agent_token = tokens.as_ref().map(|t| t.agents.first().cloned());
    if args.local_agents > 0 && matches!(agent_token, Some(None)) {
        report_error(
            "--local-agents needs an agent token: add one to `agents` in the token file (or give --local-agents 0)",
        );
        return exit::BAD_INPUT;
    }
    let projects_root = match projects_root(args.projects_root.as_deref()) {
        Ok(root) => root,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let tls = match tls(&args) {
        Ok(tls) => tls,
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    if tls.is_none() && !args.listen.ip().is_loopback() {
        eprintln!(
            "note: serving plain HTTP on {}: tokens and jobs cross the network unencrypted (give --tls-cert and --tls-key)",
            args.listen
        );
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    let config = wfhost_server::ServerConfig {
        tls,
        projects_root: Some(projects_root),
        listen: args.listen,
        home,
        tokens,
        runner,
        lease: std::time::Duration::from_millis(args.lease_ms),
        take_over: (args.take_over_ms > 0)
            .then(|| std::time::Duration::from_millis(args.take_over_ms)),
        limits: wfhost_server::ConnectionLimits {
            max_connections: args.max_connections,
            max_connections_per_peer: args.max_connections_per_peer,
            header_timeout: std::time::Duration::from_millis(args.header_timeout_ms),
            idle_timeout: std::time::Duration::from_millis(args.idle_timeout_ms),
        },
    };
    if let Err(e) = config.check() {
        report_error(e);
        return exit::BAD_INPUT;
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(format!("cannot start the server's runtime: {e}"));
            return exit::BAD_INPUT;
        }
    };
    // Where the runs are: a store that cannot be named (a bad URL in
    // WFHOST_STORE or config.json) is refused before listening.
    let home_shown = match wfhost_store::Location::resolve(&config.home) {
        Ok(wfhost_store::Location::Embedded) => format!("store in {}", config.home.display()),
        Ok(database) => format!("store {database}, home {}", config.home.display()),
        Err(e) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    let local_agents = args.local_agents;
    let cache = (args.cache.cache_dir, args.cache.no_cache);
    let (dialer, local) = tokio::sync::mpsc::unbounded_channel();
    let local = (local_agents > 0).then_some(local);
    let served = runtime.block_on(wfhost_server::serve_with_local(config, local, move |addr| {
        // A line a script can wait for, with the API's base (the first
        // `http://` or `https://` a script finds); the dashboard on the
        // next. One write of both, so that a reader that stops after the
        // first line (and closes the pipe) never makes the second fail.
        let lines = format!(
            "wfhost: serving {scheme}://{addr}/v1 ({home_shown})\nwfhost: dashboard at {scheme}://{addr}/\n"
        );
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(lines.as_bytes()).and_then(|()| out.flush());
        if local_agents > 0 {
            let local = LocalAgents {
                addr,
                dialer,
                token: agent_token.flatten(),
            };
            start_local_agents(local, local_agents, cache);
        }
    }));
    match served {
        Ok(()) => exit::SUCCESS,
        Err(e) => {
            report_error(e);
            exit::BAD_INPUT
        }
    }
}

/// The projects root: the directory given (which must exist), else the
/// working directory; canonical either way.
fn projects_root(given: Option<&std::path::Path>) -> Result<PathBuf, String> {
    let dir = match given {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().map_err(|e| {
            format!("cannot read the working directory (give --projects-root): {e}")
        })?,
    };
    std::fs::canonicalize(&dir)
        .ok()
        .filter(|d| d.is_dir())
        .ok_or_else(|| format!("--projects-root: `{}` is not a directory", dir.display()))
}

/// The TLS of --tls-cert, --tls-key and --tls-client-ca, its files read
/// and checked; None without them.
fn tls(args: &ServeArgs) -> Result<Option<wfhost_server::Tls>, String> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let files = wfhost_server::TlsFiles {
        cert: cert.clone(),
        key: key.clone(),
        client_ca: args.tls_client_ca.clone(),
    };
    wfhost_server::Tls::load(&files).map(Some)
}

/// How the local agents reach the server of their process.
struct LocalAgents {
    /// The server's address (the requests' `Host`).
    addr: SocketAddr,
    /// The server's in-process connections: no socket, so no TLS and no
    /// client certificate are needed whatever the listener asks for.
    dialer: wfhost_server::LocalDialer,
    token: Option<String>,
}

/// Agents in this process, leasing from the server like any other agent,
/// over in-process connections.
fn start_local_agents(
    local: LocalAgents,
    concurrency: usize,
    (cache_dir, cache_disabled): (Option<PathBuf>, bool),
) {
    let server = crate::jobs::Server {
        authority: local.addr.to_string(),
        base: "/v1".into(),
        token: local.token,
        tls: None,
        local: Some(local.dialer),
    };
    let config = wfhost_app::jobs::runner::AgentConfig {
        server,
        name: format!("local-{}", std::process::id()),
        capabilities: crate::jobs::CAPABILITIES
            .iter()
            .map(|c| c.to_string())
            .collect(),
        concurrency,
        cache_dir,
        cache_disabled,
        report_jobs: false,
    };
    tokio::spawn(async move {
        // Nobody asks them to stop: they end with the server's process.
        let (_, never) = tokio::sync::watch::channel(None);
        if let wfhost_app::jobs::runner::Ended::Failed(why) =
            wfhost_app::jobs::runner::run(config, never).await
        {
            report_error(format!("the local agents stopped: {why}"));
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_no_cache_variable_the_server_sets_is_the_one_the_runtime_reads() {
        assert_eq!(
            wfhost_server::NO_CACHE_ENV,
            wfhost_runtime::config::NO_CACHE_ENV
        );
    }
}
