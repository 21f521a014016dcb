//! `wfhost man`: the manual pages, generated from the same definitions as
//! `--help`, with the sections a manual page has beyond them: EXAMPLES
//! (each command's examples), EXIT STATUS ([`crate::exit`]), ENVIRONMENT
//! ([`crate::environment::VARIABLES`]) and FILES.

use std::io::Write;
use std::path::Path;

use crate::{exit, report_error};

/// Print `wfhost.1`, or write it and one page per command into `dir`.
pub fn man(command: clap::Command, dir: Option<&Path>) -> u8 {
    let mut command = command.disable_help_subcommand(true);
    command.build();
    let Some(dir) = dir else {
        let mut out = std::io::stdout().lock();
        return match page(command, &mut out) {
            Ok(()) => exit::SUCCESS,
            Err(e) => {
                report_error(format!("cannot write the manual page: {e}"));
                exit::RUN_FAILED
            }
        };
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        report_error(format!("cannot create {}: {e}", dir.display()));
        return exit::BAD_INPUT;
    }
    match write_pages(command, dir) {
        Ok(()) => {
            println!("manual pages written to {}", dir.display());
            exit::SUCCESS
        }
        Err(e) => {
            report_error(format!(
                "cannot write the manual pages into {}: {e}",
                dir.display()
            ));
            exit::BAD_INPUT
        }
    }
}

/// The page of `command` and of each of its visible subcommands, as
/// `clap_mangen::generate_to` names them (`wfhost-run.1`).
fn write_pages(command: clap::Command, dir: &Path) -> std::io::Result<()> {
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), dir)?;
    }
    let name = clap_mangen::Man::new(command.clone()).get_filename();
    let mut file = std::fs::File::create(dir.join(name))?;
    page(command, &mut file)?;
    file.flush()
}

/// One manual page: clap's sections (the `after_help` examples as
/// EXAMPLES, not clap's EXTRA), then EXIT STATUS, ENVIRONMENT and FILES.
fn page(command: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    let examples = match command.get_name() == "wfhost" {
        true => Some(crate::examples::WFHOST.to_string()),
        false => command.get_after_help().map(|h| h.to_string()),
    };
    let has_args = command.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = command.get_subcommands().any(|s| !s.is_hide_set());
    let has_version = command.get_version().is_some() || command.get_long_version().is_some();
    let man = clap_mangen::Man::new(command);
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    if has_args {
        man.render_options_section(out)?;
    }
    if has_subcommands {
        man.render_subcommands_section(out)?;
    }
    if let Some(examples) = examples {
        out.write_all(examples_section(&examples).as_bytes())?;
    }
    out.write_all(exit_status_section().as_bytes())?;
    out.write_all(environment_section().as_bytes())?;
    out.write_all(files_section().as_bytes())?;
    match has_version {
        true => man.render_version_section(out),
        false => Ok(()),
    }
}

/// Text as roff shows it: backslashes and dashes escaped, and a line
/// that starts with a control character kept as text.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    match escaped.starts_with(['.', '\'']) {
        true => format!("\\&{escaped}"),
        false => escaped,
    }
}

/// A tagged paragraph: `tag` in bold, then its text.
fn entry(tag: &str, text: &str) -> String {
    format!(".TP\n\\fB{}\\fR\n{}\n", roff(tag), roff(text))
}

/// The examples of a command's `--help`, as they are written there.
fn examples_section(after_help: &str) -> String {
    let body = after_help.strip_prefix("Examples:\n").unwrap_or(after_help);
    let mut out = String::from(".SH EXAMPLES\n.nf\n");
    for line in body.lines() {
        out.push_str(&roff(line.strip_prefix("  ").unwrap_or(line)));
        out.push('\n');
    }
    out.push_str(".fi\n");
    out
}

fn exit_status_section() -> String {
    let mut out = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in exit::DESCRIBED {
        out.push_str(&entry(&code.to_string(), meaning));
    }
    out
}

fn environment_section() -> String {
    let mut out = String::from(".SH ENVIRONMENT\n");
    for v in crate::environment::VARIABLES {
        out.push_str(&entry(
            v.name,
            &format!("{} Without it: {}.", v.meaning, v.default),
        ));
    }
    out
}

/// Where wfhost keeps what it keeps.
const FILES: &[(&str, &str)] = &[
    (
        "wfhost.toml",
        "The project's defaults (home, cache_dir, durability, executor, workspace, serve.listen, serve.local_agents), in the current directory or the nearest above it; below the flags and the environment (wfhost config shows them).",
    ),
    (
        "$XDG_CONFIG_HOME/wfhost/config.toml",
        "The user's defaults, the same keys, below the project's (else ~/.config/wfhost/config.toml).",
    ),
    (
        "HOME",
        "The wfhost home: --home, else $WFHOST_HOME, else $XDG_DATA_HOME/wfhost, else ~/.local/share/wfhost.",
    ),
    (
        "HOME/wfhost.db",
        "The run store (SQLite): every run's pinned definition and event log, the jobs of wfhost serve.",
    ),
    (
        "HOME/config.json",
        "The home's configuration (retention: how long gc keeps runs, default 60d).",
    ),
    (
        "HOME/secrets/",
        "The home's secrets, one file each (mode 0600), set with wfhost secret set.",
    ),
    (
        "HOME/plugins/",
        "Installed plugin packages, their consent records and trusted keys.",
    ),
    (
        "HOME/mcp-keys.json",
        "The keys wfhost mcp signs its tokens with.",
    ),
    (
        "HOME/serve-logs/",
        "The logs of the processes that execute the runs of wfhost serve, one per run.",
    ),
    ("HOME/locks/", "Run and workspace locks and their holders."),
    (
        "CACHE",
        "Compiled plugins: --cache-dir, else $WFHOST_CACHE_DIR, else $XDG_CACHE_HOME/wfhost/components, else ~/.cache/wfhost/components.",
    ),
    (
        "WORKSPACE/.output/",
        "What blocks leave in the workspace: result bundles of exec and agent blocks (exec/, agent/), block outputs.",
    ),
    (
        "wfhost.lock",
        "The plugin packages a project's workflows use, pinned by digest: the nearest in the current directory or above.",
    ),
];

fn files_section() -> String {
    let mut out = String::from(".SH FILES\n");
    for (path, what) in FILES {
        out.push_str(&entry(path, what));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_text_cannot_start_a_request() {
        assert_eq!(roff(".TH x"), "\\&.TH x");
        assert_eq!(roff("a-b \\ c"), "a\\-b \\e c");
    }
}
