//! `wfhost`: run workflows of sandboxed WebAssembly block workers.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod bundle;
mod cancel;
mod config;
mod environment;
mod examples;
mod execute;
mod gc;
mod hook;
mod inputs;
mod inspect;
mod jobs;
mod list;
mod live_output;
mod logs;
mod man;
mod mcp;
mod notify;
mod options;
mod otel;
mod plugin;
mod progress;
mod rerun;
mod result;
mod resume;
mod run;
mod runs;
mod schedule;
mod schemas;
mod screen;
mod secret;
mod serve;
mod served;
mod session;
mod store;
mod style;
mod validate;

use std::path::PathBuf;
use std::sync::Arc;

use wfhost_runtime::WasmRuntime;

/// Exit codes, documented in the README.
pub mod exit {
    /// The run succeeded.
    pub const SUCCESS: u8 = 0;
    /// The run executed and failed.
    pub const RUN_FAILED: u8 = 1;
    /// Bad input: manifest, plugin, workspace or usage. Nothing ran.
    pub const BAD_INPUT: u8 = 2;
    /// The run paused: at a human gate, or at an external block until an
    /// MCP client performs it.
    pub const WAITING_AT_GATE: u8 = 3;
    /// Another wfhost process is executing the run, another run is using
    /// the workspace, or another process kept the store locked too long.
    pub const BUSY: u8 = 4;
    /// Someone cancelled the run (`wfhost cancel`, the HTTP API); it is
    /// not continued.
    pub const CANCELLED: u8 = 5;
    /// The run was interrupted (Ctrl-C, SIGTERM); it can be resumed.
    pub const INTERRUPTED: u8 = 130;
    /// The reader of the output went away (128 + SIGPIPE, as a shell
    /// shows a process a closed pipe ended).
    pub const CLOSED_OUTPUT: u8 = 128 + libc::SIGPIPE as u8;

    /// Every exit code with its meaning, for the manual page.
    pub const DESCRIBED: &[(u8, &str)] = &[
        (
            SUCCESS,
            "Success: the run succeeded, or the command did what it was asked.",
        ),
        (
            RUN_FAILED,
            "The run executed and failed (or validate --strict found warnings).",
        ),
        (
            BAD_INPUT,
            "Bad input: manifest, plugin, workspace, inputs or usage. Nothing ran and nothing was recorded.",
        ),
        (
            WAITING_AT_GATE,
            "The run paused: at a gate waiting for a person (wfhost gate), or at an external block until an MCP client performs it.",
        ),
        (
            BUSY,
            "Busy: another wfhost process is executing the run, another run is using the workspace, or the store stayed locked too long.",
        ),
        (
            CANCELLED,
            "Someone cancelled the run for good (wfhost cancel, the HTTP API, the dashboard); it is not continued.",
        ),
        (
            INTERRUPTED,
            "The run was interrupted (Ctrl-C, SIGTERM); wfhost resume continues it.",
        ),
        (
            CLOSED_OUTPUT,
            "The reader of wfhost's output went away (a closed pipe, as in: wfhost run ... | head).",
        ),
    ];
}

#[derive(Parser)]
#[command(
    name = "wfhost",
    version,
    about = "Run workflows of sandboxed WebAssembly block workers",
    after_help = "Start with `wfhost run WORKFLOW --workspace DIR`; `wfhost help COMMAND` shows a command's options and examples."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Export traces (runs, steps, blocks, host calls, jobs, HTTP
    /// requests) over OTLP/HTTP to this collector, e.g.
    /// http://127.0.0.1:4318 (default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    /// else $OTEL_EXPORTER_OTLP_ENDPOINT; off when neither is set).
    #[arg(long, value_name = "URL", global = true)]
    otlp_endpoint: Option<String>,
}

/// Where the run store lives, for commands that read or write runs.
#[derive(clap::Args, Clone)]
pub struct Home {
    /// The wfhost home, where the run store lives (default: $WFHOST_HOME,
    /// else $XDG_DATA_HOME/wfhost, else ~/.local/share/wfhost).
    #[arg(long, value_name = "DIR", global = true)]
    home: Option<PathBuf>,
}

/// The store's options for commands that record events.
#[derive(clap::Args, Clone)]
pub struct Durable {
    #[command(flatten)]
    home: Home,
    /// How durable each recorded event is: `full` (on disk before the run
    /// goes on; survives power loss) or `normal` (survives a crash of
    /// wfhost, may lose the last events on power loss; faster).
    #[arg(
        long,
        default_value = "full",
        env = "WFHOST_DURABILITY",
        value_name = "full|normal"
    )]
    durability: wfhost_store::Durability,
}

/// A command's own arguments with the store options it takes.
#[derive(clap::Args)]
struct With<T: clap::Args, S: clap::Args> {
    #[command(flatten)]
    args: T,
    #[command(flatten)]
    store: S,
}

impl From<&Home> for Global {
    fn from(home: &Home) -> Global {
        Global {
            home: home.home.clone(),
            durability: wfhost_store::Durability::default(),
        }
    }
}

impl From<&Durable> for Global {
    fn from(d: &Durable) -> Global {
        Global {
            home: d.home.home.clone(),
            durability: d.durability,
        }
    }
}

/// The store options a command was given.
pub struct Global {
    home: Option<PathBuf>,
    durability: wfhost_store::Durability,
}

impl Global {
    /// The home these options name, or why there is none.
    pub fn app(&self) -> Result<wfhost_app::home::Home, AppError> {
        wfhost_app::home::Home::resolve(self.home.as_deref(), self.durability)
    }

    /// The home's directory.
    pub fn app_home(&self) -> Result<PathBuf, AppError> {
        self.app().map(|home| home.dir)
    }

    /// The store, which must exist.
    pub fn app_existing_store(&self) -> Result<wfhost_store::Store, AppError> {
        self.app()?.existing_store()
    }

    /// The store, created if need be.
    pub fn app_store(&self) -> Result<wfhost_store::Store, AppError> {
        self.app()?.store()
    }

    pub fn home(&self) -> Result<PathBuf, u8> {
        wfhost_store::resolve_home(self.home.as_deref()).map_err(store_error)
    }

    /// The store, created if needed (commands that start or continue runs).
    pub fn open_store(&self) -> Result<wfhost_store::Store, u8> {
        wfhost_store::Store::open(&self.home()?, self.durability).map_err(store_error)
    }

    /// The existing store (commands that only read, or add to an existing
    /// run): asking about a run never creates a store.
    pub fn existing_store(&self) -> Result<wfhost_store::Store, u8> {
        wfhost_store::Store::open_existing_with(&self.home()?, self.durability).map_err(store_error)
    }
}

/// Print a store error; returns its exit code.
pub fn store_error(e: wfhost_store::StoreError) -> u8 {
    report_error(&e);
    match e {
        wfhost_store::StoreError::Busy { .. } | wfhost_store::StoreError::Locked { .. } => {
            exit::BUSY
        }
        _ => exit::BAD_INPUT,
    }
}

#[derive(Subcommand)]
enum Command {
    /// Start a durable run of a workflow and execute it.
    #[command(after_help = examples::RUN)]
    Run(With<run::RunArgs, Durable>),
    /// Continue a run whose host stopped (crash, kill, power loss).
    #[command(after_help = examples::RESUME)]
    Resume(With<resume::ResumeArgs, Durable>),
    /// Continue a run from an older snapshot, as a new branch.
    #[command(after_help = examples::FORK)]
    Fork(With<resume::ForkArgs, Durable>),
    /// Run a run again after a fix: a new run with its inputs, workspace
    /// and executor, under the manifest as it is now, from the beginning
    /// or from one of its steps (`--from`).
    #[command(after_help = examples::RERUN)]
    Rerun(With<rerun::RerunArgs, Durable>),
    /// List the gates waiting for a human answer.
    #[command(after_help = examples::GATES)]
    Gates(With<runs::GatesArgs, Home>),
    /// Answer a gate (`approved` or `changes-requested:<text>`; a fan-in gate: `use-lane:<lane>`, `use-lane:<file>=<lane>,...` or `resolved`) and continue the run.
    #[command(after_help = examples::GATE)]
    Gate(With<resume::GateArgs, Durable>),
    /// List the runs in the store, newest first (filter by status,
    /// workflow, text and start time).
    #[command(after_help = examples::RUNS, visible_aliases = ["ps", "status"])]
    Runs(With<runs::RunsArgs, Home>),
    /// Show a run: branches, steps, signals, gates, statistics.
    #[command(after_help = examples::SHOW)]
    Show(With<runs::ShowArgs, Home>),
    /// Print a run's event log (`--follow` to watch a live run).
    #[command(after_help = examples::EVENTS)]
    Events(With<runs::EventsArgs, Home>),
    /// Print what a run's blocks wrote: their log lines, the stdout and
    /// stderr of their commands and agents (`--follow` to watch a live run).
    #[command(after_help = examples::LOGS)]
    Logs(With<logs::LogsArgs, Home>),
    /// Stop a run for good: a live run's processes, containers and jobs are
    /// stopped; a waiting or interrupted run is closed. Recorded in its log.
    #[command(after_help = examples::CANCEL)]
    Cancel(With<cancel::CancelArgs, Home>),
    /// Delete runs from the store (not a run that is executing).
    #[command(after_help = examples::RM)]
    Rm(With<cancel::RmArgs, Home>),
    /// Write a run, its pinned definition and its whole log to a bundle file.
    #[command(after_help = examples::EXPORT)]
    Export(With<bundle::ExportArgs, Home>),
    /// Add a run from a bundle file to the store.
    #[command(after_help = examples::IMPORT)]
    Import(With<bundle::ImportArgs, Durable>),
    /// List, export and import sessions: the runs of one workstream (an
    /// MCP client's session id, or the git branch they started on).
    #[command(after_help = examples::SESSION)]
    Session(With<session::SessionArgs, Durable>),
    /// Start a workflow on a cron expression's ticks: `wfhost serve` starts
    /// the runs when due (add, ls, show, pause, resume, rm, trigger).
    #[command(after_help = examples::SCHEDULE)]
    Schedule(With<schedule::ScheduleArgs, Durable>),
    /// Start a workflow from a signed HTTP delivery (GitHub's, or any
    /// sender's): named endpoints of `wfhost serve` (add, ls, show, rm).
    #[command(after_help = examples::HOOK)]
    Hook(With<hook::HookArgs, Durable>),
    /// Send outgoing webhooks when a run ends, a gate opens or a timer
    /// fires: `wfhost serve` delivers them (add, ls, rm).
    #[command(after_help = examples::NOTIFY)]
    Notify(With<notify::NotifyArgs, Durable>),
    /// Remove runs older than the retention age (config.json `retention`,
    /// default 60d).
    #[command(after_help = examples::GC)]
    Gc(With<gc::GcArgs, Home>),
    /// The run store itself: `store migrate --to postgres://…` moves the
    /// home's embedded store into PostgreSQL.
    #[command(after_help = examples::STORE)]
    Store {
        #[command(subcommand)]
        command: store::StoreCommand,
        #[command(flatten)]
        home: Home,
    },
    /// Serve the HTTP API (`/v1`, OpenAPI at `/v1/openapi.json`) over the
    /// run store.
    #[command(after_help = examples::SERVE)]
    Serve(With<serve::ServeArgs, Home>),
    /// Serve the token-based agent contract over MCP on stdio: MCP clients
    /// start workflows and perform their `external` blocks.
    #[command(after_help = examples::MCP)]
    Mcp(With<mcp::McpArgs, Durable>),
    /// Lease jobs from a `wfhost serve` and run them (the blocks of runs
    /// started over its API).
    #[command(after_help = examples::AGENT)]
    Agent(jobs::AgentArgs),
    /// Start `wfhost agent`s elsewhere: `agents submit --slurm N` runs N of
    /// them as one Slurm job array.
    #[command(after_help = examples::AGENTS)]
    Agents {
        #[command(subcommand)]
        command: jobs::submit::AgentsCommand,
        #[command(flatten)]
        home: Home,
    },
    /// Write, build, package, sign, publish and install plugins.
    #[command(after_help = examples::PLUGIN)]
    Plugin {
        #[command(subcommand)]
        command: plugin::PluginCommand,
        #[command(flatten)]
        home: Home,
    },
    /// Store, list and remove the home's secrets, which `{"secret": NAME}`
    /// env values of exec and agent blocks refer to.
    #[command(after_help = examples::SECRET)]
    Secret(With<secret::SecretArgs, Home>),
    /// Check a workflow and its plugins without running it.
    #[command(after_help = examples::VALIDATE)]
    Validate(validate::ValidateArgs),
    /// Show a workflow's graph as text (its inputs first), Mermaid or DOT.
    #[command(after_help = examples::INSPECT)]
    Inspect(inspect::InspectArgs),
    /// List the workflows found under a directory.
    #[command(after_help = examples::LIST)]
    List(list::ListArgs),
    /// Print the JSON Schema of the workflow manifest, or of an object
    /// the --json commands print (`Run`, `RunSummary`, `RunReport`, …).
    #[command(after_help = examples::SCHEMA)]
    Schema {
        /// The object (see --list); none: the workflow manifest.
        name: Option<String>,
        /// List the objects and which command prints each.
        #[arg(long, conflicts_with = "name")]
        list: bool,
    },
    /// Show the defaults in effect here: each key of `wfhost.toml` (the
    /// project's) and of the user's configuration file, its value and
    /// where it comes from (flag > environment > project > user >
    /// built-in).
    #[command(after_help = examples::CONFIG)]
    Config(config::ConfigArgs),
    /// Print a shell completion script.
    #[command(after_help = examples::COMPLETIONS)]
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// A run process of `wfhost serve`: one request on standard input,
    /// its answer on standard output (the server's protocol, not for
    /// people).
    #[command(name = "serve-run", hide = true)]
    ServeRun(Durable),
    /// Print the manual page (roff), or write one per command into a directory.
    #[command(after_help = examples::MAN)]
    Man {
        /// Write `wfhost.1` and `wfhost-<command>.1` into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// Like other Unix tools, end quietly when the reader of our output goes
/// away (`wfhost run ... | head`) instead of panicking on a broken pipe —
/// with the status a shell shows for it (128 + SIGPIPE). SIGPIPE itself
/// stays ignored (Rust's default): restoring its default action would kill
/// the whole process, a server with its runs included, whenever a command
/// exits without reading the stdin wfhost writes it (an agent's prompt).
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(exit::CLOSED_OUTPUT.into());
        }
        default(info);
    }));
}

/// The environment variable that turns on the library crates' spans and
/// events, in `EnvFilter` syntax (`debug`, `wfhost_core=trace,info`, ...).
const LOG_ENV: &str = "WFHOST_LOG";

/// Install the subscriber of the `tracing` spans and events: always on
/// stderr, never stdout (which carries reports, JSON and MCP). Without
/// `WFHOST_LOG`, only warnings, each printed as its bare message, as the
/// `eprintln!` it replaced printed it: a command's stderr is the same as
/// before tracing. With it, the filter it gives, every span's opening and
/// closing (with its fields and timings) and every event under it.
fn init_tracing(
    otlp_endpoint: Option<&str>,
    command: &str,
) -> Result<Option<otel::Export>, String> {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::fmt::format::FmtSpan;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let spec = std::env::var(LOG_ENV).unwrap_or_default();
    let filter = match spec.trim() {
        "" => None,
        spec => match EnvFilter::builder().parse(spec) {
            Ok(filter) => Some(filter),
            Err(e) => {
                eprintln!("warning: {LOG_ENV}: {e}; logging warnings only");
                None
            }
        },
    };
    let stderr = match filter {
        Some(filter) => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
            .with_filter(filter)
            .boxed(),
        None => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .event_format(BareMessage)
            .with_filter(LevelFilter::WARN)
            .boxed(),
    };
    // Exported: wfhost's own spans and events at INFO and above, never
    // those of the libraries under it (the exporter's HTTP client among
    // them, which would trace its own exports).
    let (export, otlp) = match otel::endpoint(otlp_endpoint)? {
        Some(_) => {
            let (export, layer) = otel::start(command)?;
            let only_ours = Targets::new().with_target("wfhost", LevelFilter::INFO);
            (Some(export), Some(layer.with_filter(only_ours)))
        }
        None => (None, None),
    };
    // Only fails when a subscriber is already set: keep that one.
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(otlp)
        .try_init();
    // The caller's span (a CI job's, a script's) is the run's parent; a
    // run process takes its parent from its request instead.
    if command != served_run_command()
        && let Ok(parent) = std::env::var(wfhost_protocol::trace::TRACEPARENT_ENV)
    {
        wfhost_protocol::trace::set_inbound(parent.trim());
    }
    Ok(export)
}

fn served_run_command() -> &'static str {
    wfhost_server::SERVE_RUN
}

/// An event printed as its fields alone (the message first): no time,
/// level, target or spans.
struct BareMessage;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for BareMessage
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_subscriber::fmt::FormatFields as _;
        ctx.format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// `wfhost schema [NAME | --list]`.
fn schema(name: Option<&str>, list: bool) -> u8 {
    if list {
        for name in schemas::names() {
            let printed_by: Vec<String> = schemas::OUTPUTS
                .iter()
                .filter(|(_, schema, _)| *schema == name)
                .map(|(command, _, layout)| format!("wfhost {command} ({})", layout.words()))
                .collect();
            match printed_by.is_empty() {
                true => println!("{name}"),
                false => println!("{name:<16} {}", printed_by.join("; ")),
            }
        }
        return exit::SUCCESS;
    }
    let schema = match name {
        None => wfhost_core::manifest::json_schema(),
        Some(name) => match schemas::standalone(name) {
            Some(schema) => schema,
            None => {
                report_error(format!(
                    "no object {name:?}; `wfhost schema --list` lists them: {}",
                    schemas::names().join(", ")
                ));
                return exit::BAD_INPUT;
            }
        },
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&schema).unwrap_or_default()
    );
    exit::SUCCESS
}

fn main() -> ExitCode {
    // The project's and user's defaults go into the environment first,
    // where the environment has none; then the flags are read.
    let command = std::env::args().nth(1);
    if let Err(e) = config::apply(command.as_deref()) {
        report_error(e);
        return ExitCode::from(exit::BAD_INPUT);
    }
    quiet_on_closed_stdout();
    wfhost_app::warnings::set_sink(|level, message| match level {
        wfhost_app::warnings::Level::Warning => eprintln!("warning: {message}"),
        wfhost_app::warnings::Level::Note => eprintln!("{message}"),
    });
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Sends the last spans when main returns.
    let subcommand = matches.subcommand_name().unwrap_or_default();
    let _export = match init_tracing(cli.otlp_endpoint.as_deref(), subcommand) {
        Ok(export) => export,
        Err(e) => {
            report_error(e);
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    let code = match cli.command {
        Command::Run(w) => run::run(w.args, &(&w.store).into()),
        Command::Resume(w) => resume::resume(w.args, &(&w.store).into()),
        Command::Fork(w) => resume::fork(w.args, &(&w.store).into()),
        Command::Rerun(w) => rerun::rerun(w.args, &(&w.store).into()),
        Command::Gate(w) => resume::gate(w.args, &(&w.store).into()),
        Command::Gates(w) => runs::gates(w.args, &(&w.store).into()),
        Command::Runs(w) => runs::runs(w.args, &(&w.store).into()),
        Command::Show(w) => runs::show(w.args, &(&w.store).into()),
        Command::Events(w) => runs::events(w.args, &(&w.store).into()),
        Command::Logs(w) => logs::logs(w.args, &(&w.store).into()),
        Command::Cancel(w) => cancel::cancel(w.args, &(&w.store).into()),
        Command::Rm(w) => cancel::rm(w.args, &(&w.store).into()),
        Command::Export(w) => bundle::export(w.args, &(&w.store).into()),
        Command::Import(w) => bundle::import(w.args, &(&w.store).into()),
        Command::Session(w) => session::session(w.args, &(&w.store).into()),
        Command::Schedule(w) => schedule::schedule(w.args, &(&w.store).into()),
        Command::Hook(w) => hook::hook(w.args, &(&w.store).into()),
        Command::Notify(w) => notify::notify(w.args, &(&w.store).into()),
        Command::Gc(w) => gc::gc(w.args, &(&w.store).into()),
        Command::Store { command, home } => store::store(command, &(&home).into()),
        Command::Serve(w) => serve::serve(w.args, &(&w.store).into()),
        Command::ServeRun(durable) => served::serve_run(&(&durable).into()),
        Command::Mcp(w) => mcp::mcp(w.args, &(&w.store).into()),
        Command::Agent(args) => jobs::agent(args),
        Command::Agents { command, home } => jobs::submit::agents(command, &home),
        Command::Plugin { command, home } => plugin::plugin(command, home.home),
        Command::Secret(w) => secret::secret(w.args, &(&w.store).into()),
        Command::Validate(args) => validate::validate(args),
        Command::Config(args) => config::config(args),
        Command::Inspect(args) => inspect::inspect(args),
        Command::List(args) => list::list(args),
        Command::Schema { name, list } => schema(name.as_deref(), list),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "wfhost", &mut std::io::stdout());
            exit::SUCCESS
        }
        Command::Man { dir } => man::man(Cli::command(), dir.as_deref()),
    };
    ExitCode::from(code)
}

pub use wfhost_app::plugins::{RuntimeChoice, builtin_names, load_plugins};
use wfhost_app::{AppError, ErrorKind};

/// A runtime for this process: the application layer's, with the Slurm job
/// watcher that feeds the status line.
pub fn start_runtime(
    choice: &RuntimeChoice,
    default_executor: wfhost_exec::Executor,
    home: Option<&std::path::Path>,
) -> Result<Arc<WasmRuntime>, AppError> {
    wfhost_app::plugins::start_runtime(
        choice,
        default_executor,
        home,
        Some(progress::slurm_watcher()),
    )
}

/// The exit code of an error of `kind`.
pub fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::BadInput
        | ErrorKind::NotFound
        | ErrorKind::Unavailable
        | ErrorKind::Internal => exit::BAD_INPUT,
        ErrorKind::Busy => exit::BUSY,
        ErrorKind::Waiting => exit::WAITING_AT_GATE,
        ErrorKind::Interrupted => exit::INTERRUPTED,
        ErrorKind::Cancelled => exit::CANCELLED,
        ErrorKind::Failed => exit::RUN_FAILED,
    }
}

/// Report `e` and return its exit code.
pub fn fail(e: AppError) -> u8 {
    report_error(&e.message);
    exit_code(e.kind)
}

/// Print an error the way every wfhost error looks (`error:` in red on a
/// terminal that allows colour).
pub fn report_error(message: impl std::fmt::Display) {
    let prefix = style::Style::stderr().bad("error:");
    for line in message.to_string().lines() {
        eprintln!("{prefix} {line}");
    }
}
