//! Option groups several commands share, declared once and flattened into
//! each (`#[command(flatten)]`).

use std::path::PathBuf;

use clap::Args;

use crate::RuntimeChoice;

/// Where compiled plugins are cached.
#[derive(Args, Clone, Debug, Default)]
pub struct CacheOptions {
    /// Where compiled plugins are cached (default: $WFHOST_CACHE_DIR, else
    /// $XDG_CACHE_HOME/wfhost/components, else ~/.cache/wfhost/components).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Compile plugins without reading or writing the cache.
    #[arg(long, conflicts_with = "cache_dir")]
    pub no_cache: bool,
}

impl CacheOptions {
    /// The runtime these options ask for, exec blocks that name no executor
    /// running on `executor` (None: the run's own).
    pub fn choice(&self, executor: Option<wfhost_exec::Executor>) -> RuntimeChoice {
        RuntimeChoice {
            cache_dir: self.cache_dir.clone(),
            cache_disabled: self.no_cache,
            executor,
        }
    }
}

/// How much of a run is printed.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct OutputOptions {
    /// Also print plugin loads and every block's log.
    #[arg(long, short, conflicts_with = "json")]
    pub verbose: bool,
    /// Print only where the run came to rest (its last line; errors and
    /// warnings on stderr): no line naming the run, no line per block, no
    /// live status line, no statistics per block.
    #[arg(long, short, conflicts_with_all = ["json", "verbose"])]
    pub quiet: bool,
    /// Print only a JSON report of the run (status, statistics per run and
    /// per block) on stdout.
    #[arg(long)]
    pub json: bool,
}

impl From<OutputOptions> for crate::execute::Output {
    fn from(o: OutputOptions) -> Self {
        crate::execute::Output {
            verbose: o.verbose,
            json: o.json,
            quiet: o.quiet,
            served: false,
        }
    }
}

/// What a job runner (`wfhost agent`, or each of `wfhost agents submit`'s)
/// leases from and runs.
#[derive(Args, Clone, Debug)]
pub struct RunnerOptions {
    /// The server's URL as the job runners reach it, e.g.
    /// http://127.0.0.1:7464 or https://head-node:7464 (`/v1` is added
    /// when the URL has no path).
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// What a job runner runs: `wasm` (every block), `exec` (exec and agent
    /// blocks as host processes), `container` (Docker), `slurm`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "wasm,exec",
        value_name = "LIST"
    )]
    pub capabilities: Vec<String>,
    /// How many jobs a job runner runs at once.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub concurrency: usize,
    /// A file holding the job runner's bearer token (one of the server's
    /// `agents` tokens), readable only by its owner (at the same path on
    /// the nodes, for `agents submit`). Also $WFHOST_AGENT_TOKEN_FILE.
    #[arg(long, env = "WFHOST_AGENT_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// For an https:// server: the CA certificates (PEM) that may have
    /// signed its certificate, trusted instead of the system's.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// For an https:// server that asks for one (`serve --tls-client-ca`):
    /// the job runner's certificate chain (PEM).
    #[arg(long, requires = "client_key", value_name = "FILE")]
    pub client_cert: Option<PathBuf>,
    /// The private key (PEM) of --client-cert.
    #[arg(long, requires = "client_cert", value_name = "FILE")]
    pub client_key: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheOptions,
}

impl RunnerOptions {
    /// The server, and the checks every job runner's options pass: known
    /// capabilities, a concurrency of 1 to 256.
    pub fn check(&self) -> Result<crate::jobs::Server, String> {
        let server = crate::jobs::Server::parse(&self.server, &self.tls_files())?;
        if let Some(bad) = self
            .capabilities
            .iter()
            .find(|c| !crate::jobs::CAPABILITIES.contains(&c.as_str()))
        {
            return Err(format!(
                "--capabilities: unknown capability `{bad}` (known: {})",
                crate::jobs::CAPABILITIES.join(", ")
            ));
        }
        if self.concurrency == 0 || self.concurrency > 256 {
            return Err("--concurrency: 1 to 256".into());
        }
        Ok(server)
    }

    /// The TLS files given (`--ca`, `--client-cert`, `--client-key`).
    pub fn tls_files(&self) -> wfhost_app::jobs::tls::TlsFiles {
        wfhost_app::jobs::tls::TlsFiles {
            ca: self.ca.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
        }
    }
}
