//! Every environment variable wfhost reads, in one table: the manual
//! page's ENVIRONMENT section is rendered from it, and tests hold it to
//! the source (every `WFHOST_*` name the code reads is here) and to
//! `docs/guide/environment.md` (every entry is there).

/// An environment variable wfhost reads.
pub struct Variable {
    pub name: &'static str,
    /// What it does.
    pub meaning: &'static str,
    /// What happens without it.
    pub default: &'static str,
}

/// The variables, wfhost's own first, then the standard ones it honours.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "WFHOST_HOME",
        meaning: "The wfhost home: the run store, its configuration, secrets, installed plugins, locks and logs (--home overrides it).",
        default: "$XDG_DATA_HOME/wfhost, else ~/.local/share/wfhost",
    },
    Variable {
        name: "WFHOST_CACHE_DIR",
        meaning: "Where compiled plugins are cached (--cache-dir overrides it).",
        default: "$XDG_CACHE_HOME/wfhost/components, else ~/.cache/wfhost/components",
    },
    Variable {
        name: "WFHOST_NO_CACHE",
        meaning: "Set to anything but 0: compile plugins without the cache unless a cache directory is named (what serve --no-cache gives its run processes).",
        default: "the cache is used",
    },
    Variable {
        name: "WFHOST_DURABILITY",
        meaning: "How durable each recorded event is: full (synced before the run goes on) or normal (survives a crash of wfhost, not a power loss); --durability overrides it.",
        default: "full",
    },
    Variable {
        name: "WFHOST_STORE",
        meaning: "Where runs are stored: sqlite (the home's embedded file) or a postgres://user:password@host:port/database URL, which several servers may share; overrides the home's config.json store.",
        default: "the home's config.json store, else sqlite",
    },
    Variable {
        name: "WFHOST_EXECUTOR",
        meaning: "Where exec blocks that name no executor run: local, container:IMAGE or slurm[:PARTITION] (run --executor overrides it; executor in wfhost.toml sets it).",
        default: "local",
    },
    Variable {
        name: "WFHOST_WORKSPACE",
        meaning: "The workspace of a run when neither --workspace nor the manifest names one (workspace in wfhost.toml sets it).",
        default: "the run is refused: no workspace",
    },
    Variable {
        name: "WFHOST_HTTP_ALLOW",
        meaning: "The operator's allowlist for plugins granted http: comma-separated host[:port] or *.domain; a request must match it and the workflow's plugins.NAME.http.allow (http_allow in the user's config sets it; empty: no host).",
        default: "each workflow's grant alone",
    },
    Variable {
        name: "WFHOST_LISTEN",
        meaning: "The address wfhost serve listens on (--listen overrides it; serve.listen in wfhost.toml sets it).",
        default: "127.0.0.1:7464",
    },
    Variable {
        name: "WFHOST_LOCAL_AGENTS",
        meaning: "How many agents run inside wfhost serve (--local-agents overrides it; serve.local_agents in wfhost.toml sets it).",
        default: "1",
    },
    Variable {
        name: "WFHOST_LOG",
        meaning: "The spans and events logged on stderr, in tracing's EnvFilter syntax (debug, wfhost_core=trace,info, ...).",
        default: "warnings only, as bare messages",
    },
    Variable {
        name: "WFHOST_AGENT_TOKEN_FILE",
        meaning: "The file holding a job runner's bearer token (wfhost agent, agents submit; --token-file overrides it).",
        default: "no token",
    },
    Variable {
        name: "WFHOST_TELEMETRY_URL",
        meaning: "A collector of your own that agent CLIs send their telemetry to (their TELEMETRY_URL); nothing they send is recorded then.",
        default: "an address of the run's own, recorded in its log",
    },
    Variable {
        name: "WFHOST_LANES_DIR",
        meaning: "The one directory the workspaces of parallel lanes are made in.",
        default: "/dev/shm (when a tmpfs) with room, else $TMPDIR",
    },
    Variable {
        name: "WFHOST_SCRATCH_DIR",
        meaning: "The one directory staging copies and agent snapshots are made in.",
        default: "/dev/shm (when a tmpfs) with room, else $TMPDIR",
    },
    Variable {
        name: "WFHOST_SLURM_POLL_MS",
        meaning: "How often a Slurm job's state is first asked for, in milliseconds (10 to 600000).",
        default: "250",
    },
    Variable {
        name: "WFHOST_SLURM_POLL_MAX_MS",
        meaning: "The longest wait between two asks for a Slurm job's state, in milliseconds (10 to 600000).",
        default: "2000",
    },
    Variable {
        name: "WFHOST_SLURM_STATUS",
        meaning: "Where a Slurm job's state is read: sacct, squeue or auto.",
        default: "auto",
    },
    Variable {
        name: "WFHOST_INSECURE_REGISTRIES",
        meaning: "OCI registries (comma-separated host:port) spoken to over plain HTTP.",
        default: "only loopback registries over HTTP",
    },
    Variable {
        name: "WFHOST_RUN_BLOCKS_AS_JOBS",
        meaning: "Set by wfhost serve for the processes that execute its runs: their blocks are queued as jobs. Not for people to set.",
        default: "blocks run in the process",
    },
    Variable {
        name: "WFHOST_SERVE_LOG_DIR",
        meaning: "Set by wfhost serve for the processes that execute its runs: the directory of their logs. Not for people to set.",
        default: "unset",
    },
    Variable {
        name: "XDG_DATA_HOME",
        meaning: "Where the wfhost home is when neither --home nor WFHOST_HOME names it ($XDG_DATA_HOME/wfhost).",
        default: "~/.local/share",
    },
    Variable {
        name: "XDG_CACHE_HOME",
        meaning: "Where the compiled-plugin cache is when neither --cache-dir nor WFHOST_CACHE_DIR names it ($XDG_CACHE_HOME/wfhost/components).",
        default: "~/.cache",
    },
    Variable {
        name: "HOME",
        meaning: "The base of the default home, cache and Docker configuration.",
        default: "none: give --home and --cache-dir",
    },
    Variable {
        name: "PATH",
        meaning: "Where the programs of exec blocks and agent CLIs are looked up (a command's own PATH override wins); commands get it.",
        default: "the system's",
    },
    Variable {
        name: "TMPDIR",
        meaning: "Where lanes and scratch copies go when memory has no room.",
        default: "/tmp",
    },
    Variable {
        name: "NO_COLOR",
        meaning: "Set and not empty: no colour, even on a terminal.",
        default: "colour on terminals",
    },
    Variable {
        name: "DOCKER_HOST",
        meaning: "The Docker engine container executors use.",
        default: "the local socket",
    },
    Variable {
        name: "DOCKER_CONFIG",
        meaning: "The directory of the Docker configuration whose credentials plugin push and install use (config.json).",
        default: "~/.docker",
    },
    Variable {
        name: "CARGO",
        meaning: "The cargo that wfhost plugin build runs.",
        default: "cargo on PATH",
    },
    Variable {
        name: "RUSTC",
        meaning: "The rustc whose wasm32-wasip2 standard library wfhost plugin build checks (and installs with rustup when missing).",
        default: "rustc on PATH",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_ENDPOINT",
        meaning: "The OTLP/HTTP collector traces are exported to, as a base URL (/v1/traces is added); --otlp-endpoint sets it for wfhost and the processes it starts.",
        default: "no traces are exported",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        meaning: "The full URL traces are posted to; wins over OTEL_EXPORTER_OTLP_ENDPOINT (--otlp-endpoint wins over both).",
        default: "OTEL_EXPORTER_OTLP_ENDPOINT",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_HEADERS",
        meaning: "Headers sent with each export (key=value,...), such as a collector's API key; OTEL_EXPORTER_OTLP_TRACES_HEADERS wins over it.",
        default: "none",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_TIMEOUT",
        meaning: "How long one export may take, in milliseconds; OTEL_EXPORTER_OTLP_TRACES_TIMEOUT wins over it.",
        default: "10000",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_PROTOCOL",
        meaning: "Only http/protobuf is spoken; another value is warned about and http/protobuf used.",
        default: "http/protobuf",
    },
    Variable {
        name: "OTEL_SERVICE_NAME",
        meaning: "The service.name of the exported spans.",
        default: "wfhost",
    },
    Variable {
        name: "OTEL_RESOURCE_ATTRIBUTES",
        meaning: "More resource attributes of the exported spans (key=value,...).",
        default: "service.version, wfhost.command and process.pid only",
    },
    Variable {
        name: "OTEL_SDK_DISABLED",
        meaning: "true: no traces are exported, whatever endpoint is set.",
        default: "exported when an endpoint is set",
    },
    Variable {
        name: "OTEL_TRACES_EXPORTER",
        meaning: "A list without otlp (none, for one): no traces are exported.",
        default: "otlp",
    },
    Variable {
        name: "OTEL_BSP_SCHEDULE_DELAY",
        meaning: "How often a long-lived process (serve, agent) sends its spans, in milliseconds; every command sends the rest as it ends.",
        default: "5000",
    },
    Variable {
        name: "TRACEPARENT",
        meaning: "A W3C trace context (00-TRACE-SPAN-FLAGS): the run a command starts or continues is traced under that span (a CI job's, a script's); ignored unless traces are exported.",
        default: "the run starts a trace of its own",
    },
];

/// `WFHOST_*` names in the source that are not read by wfhost itself, and
/// why they are not in the table.
#[cfg(test)]
const NOT_READ_BY_WFHOST: &[(&str, &str)] = &[
    (
        "WFHOST_REQUIRE_SERVICES",
        "the test suite's: fail instead of skipping without services",
    ),
    (
        "WFHOST_BLESS",
        "the test suite's: rewrite recorded expectations",
    ),
    (
        "WFHOST_TEST_POSTGRES",
        "the test suite's: the PostgreSQL server the store's tests make databases on",
    ),
    (
        "WFHOST_DIFF_SEEDS",
        "the test suite's: how many seeds the store's differential test runs",
    ),
    (
        "WFHOST_SLURM_ITEMS",
        "the test suite's: how many items the Slurm fan-out test runs",
    ),
    ("WFHOST_BENCH_LARGE", "a bench's option"),
    ("WFHOST_BENCH_RUNS", "a bench's option"),
    ("WFHOST_BENCH_EVENTS", "a bench's option"),
    ("WFHOST_BENCH_SIZES", "a bench's option"),
    ("WFHOST_BENCH_JOBS", "a bench's option"),
    (
        "WFHOST_WORKRAIL_CORPUS",
        "a test's input: WorkRail workflows to check",
    ),
    (
        "WFHOST_WORKRAIL_VERDICTS",
        "a test's input: the published schema's verdicts",
    ),
    (
        "WFHOST_CRASH_SEED",
        "a test's input: replays one case of the crash test",
    ),
    (
        "WFHOST_DECLARED_SIGNALS",
        "a symbol of the SDK, not a variable",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The `WFHOST_[A-Z0-9_]+` names in the Rust files under `dir`.
    fn names_in(dir: &Path, names: &mut std::collections::BTreeMap<String, PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") {
                names_in(&path, names);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                for (i, _) in text.match_indices("WFHOST_") {
                    let name: String = text[i..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if name.len() > "WFHOST_".len() {
                        names.entry(name).or_insert_with(|| path.clone());
                    }
                }
            }
        }
    }

    #[test]
    fn every_wfhost_variable_in_the_source_is_in_the_table() {
        let mut found = std::collections::BTreeMap::new();
        for dir in ["host", "plugins", "sdk/src", "tests"] {
            names_in(&repo().join(dir), &mut found);
        }
        assert!(found.contains_key("WFHOST_HOME"), "the scan found nothing");
        let known = |name: &str| {
            VARIABLES.iter().any(|v| v.name == name)
                || NOT_READ_BY_WFHOST.iter().any(|(n, _)| *n == name)
        };
        let missing: Vec<String> = found
            .iter()
            .filter(|(name, _)| !known(name))
            .map(|(name, at)| format!("{name} ({})", at.display()))
            .collect();
        assert!(
            missing.is_empty(),
            "add these to VARIABLES (and docs/guide/environment.md), or to NOT_READ_BY_WFHOST with a reason: {missing:?}"
        );
    }

    #[test]
    fn the_guide_has_the_row_of_every_variable_of_the_table() {
        let guide = std::fs::read_to_string(repo().join("docs/guide/environment.md")).unwrap();
        // Each variable's row says what the table says, word for word.
        let missing: Vec<String> = VARIABLES
            .iter()
            .map(|v| format!("| `{}` | {} | {} |", v.name, v.meaning, v.default))
            .filter(|row| !guide.lines().any(|line| line == row))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/guide/environment.md lacks these rows (or says otherwise): {missing:#?}"
        );
    }
}
