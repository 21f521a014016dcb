//! Option groups several commands share, declared once and flattened into
//! each (`#[command(flatten)]`).

use std::path::PathBuf;

use clap::Args;

use crate::RuntimeChoice;

/// Where compiled plugins are cached.
#[derive(Args, Clone, Debug, Default)]
pub struct CacheOptions {
    /// Where compiled plugins are cached (default: $WFHOST_CACHE_DIR, else
    /// ~/.cache/wfhost/components).
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
    /// Print only where the run came to rest: no line per block, no live
    /// status line.
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
        }
    }
}
