//! Agent CLI presets: `"config": {"preset": "claude-code"}` on an agent
//! block runs a known coding-agent CLI the way wfhost has tested it — its
//! argv, how the prompt reaches it, the permission flags that mirror the
//! block's `file_restrictions` inside the CLI's own loop, the environment
//! and configuration files that point it at its model and keep it
//! offline, how it continues an earlier session, and the adapter that
//! turns its output into the block's BlockOutput (status, summary, usage).
//!
//! A preset is one [`Preset`] entry in [`PRESETS`], its CLI's knowledge in
//! a module of its own (`claude`, `codex`, `gemini`, `opencode`): how to
//! build its [`Invocation`] for a [`Block`], how to fold its output lines
//! into a [`CliResult`], and what of them is progress worth showing. Pure:
//! settings in, argv, files and verdicts out; running the CLI belongs to
//! the executor.
//!
//! The CLI's own permission checks are a convenience (it is told no
//! before it writes); the guarantee stays the host's: the workspace is
//! snapshotted, and changes outside the restrictions are undone or fail
//! the block whatever the CLI did.

mod claude;
mod codex;
mod gemini;
mod opencode;
mod progress;
mod result;
mod settings;

pub use progress::{Progress, progress};
pub use result::{CliResult, MAX_SUMMARY_CHARS, ResultError, parse_result};
pub use settings::{Home, Settings};

/// Whose output format a CLI prints (each CLI's own, as JSON lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultFormat {
    /// Claude Code's `--output-format stream-json --verbose` (its
    /// `--output-format json` object reads the same: the last line).
    Claude,
    /// Codex's `exec --json` events.
    Codex,
    /// Gemini CLI's `--output-format stream-json` events (its `json`
    /// object reads too).
    Gemini,
    /// opencode's `run --format json` events.
    Opencode,
}

/// How the prompt reaches a preset's CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Stdin,
    /// As the last argument.
    Argument,
}

/// A known agent CLI.
#[derive(Debug)]
pub struct Preset {
    /// The name a block's `config.preset` uses.
    pub name: &'static str,
    /// Where the CLI comes from, and the version wfhost's tests run.
    pub package: &'static str,
    pub tested_version: &'static str,
    /// The program, looked up on `PATH` (a block's `command` replaces the
    /// whole argv).
    pub program: &'static str,
    /// Variables of wfhost's own environment the CLI gets when set (its
    /// endpoint, key and model): commands start from a cleared environment,
    /// and these are what a user sets for the CLI anyway.
    pub passthrough: &'static [&'static str],
    /// How its output is read.
    pub result: ResultFormat,
    /// The usage it reports is the session's so far, not the
    /// invocation's: what an earlier invocation of the session reported is
    /// subtracted.
    pub cumulative_usage: bool,
    /// Its invocation for a block.
    build: fn(&Block) -> Invocation,
}

/// What a block asks of a preset.
pub struct Block<'a> {
    /// `config.model`.
    pub model: Option<&'a str>,
    /// The block's file restrictions (`None`: unrestricted).
    pub restrictions: Option<&'a [String]>,
    /// The CLI's own state directory for this block (its lane's), as the
    /// CLI sees the path: its `HOME`. `None`: the user's `HOME` is kept.
    pub home: Option<&'a str>,
    /// The session to continue (checked with [`session_id`]).
    pub resume: Option<&'a str>,
    /// The workspace, as the CLI sees the path.
    pub workspace: &'a str,
    /// The CLI runs in a container (where some CLIs' own sandboxes cannot
    /// start).
    pub container: bool,
    /// A variable of the command's environment: the block's `env` over
    /// what the preset passes through.
    pub var: &'a dyn Fn(&str) -> Option<String>,
}

/// How a preset's CLI is started for a block.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// Program and arguments; the prompt is added as `delivery` says.
    pub argv: Vec<String>,
    pub delivery: Delivery,
    /// Set for the CLI, under the block's own `env` (which wins).
    pub env: Vec<(String, String)>,
    /// Files written under the block's `home` before the CLI starts
    /// (relative path, contents): its configuration. None without a home.
    pub files: Vec<(String, String)>,
}

/// Every preset, by name.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "claude-code",
        package: "@anthropic-ai/claude-code",
        tested_version: "2.1.197",
        program: "claude",
        passthrough: claude::PASSTHROUGH,
        result: ResultFormat::Claude,
        cumulative_usage: false,
        build: claude::build,
    },
    Preset {
        name: "codex",
        package: "@openai/codex",
        tested_version: "0.169.0",
        program: "codex",
        passthrough: codex::PASSTHROUGH,
        result: ResultFormat::Codex,
        cumulative_usage: true,
        build: codex::build,
    },
    Preset {
        name: "gemini",
        package: "@google/gemini-cli",
        tested_version: "0.61.0",
        program: "gemini",
        passthrough: gemini::PASSTHROUGH,
        result: ResultFormat::Gemini,
        cumulative_usage: false,
        build: gemini::build,
    },
    Preset {
        name: "opencode",
        package: "opencode-ai",
        tested_version: "1.18.33",
        program: "opencode",
        passthrough: opencode::PASSTHROUGH,
        result: ResultFormat::Opencode,
        cumulative_usage: false,
        build: opencode::build,
    },
];

/// The directory the contract's outputs go to, writable whatever the
/// restrictions say.
pub(crate) const OUTPUT_GLOB: &str = ".output/**";

/// The names of every preset, for messages.
pub fn names() -> String {
    PRESETS
        .iter()
        .map(|p| format!("`{}`", p.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The preset called `name`, or why there is none.
pub fn find(name: &str) -> Result<&'static Preset, String> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        format!(
            "`{name}` is not an agent preset; the presets are {}",
            names()
        )
    })
}

impl Preset {
    /// The CLI's invocation for `block`. With a home, `HOME` is it (the
    /// CLI keeps its transcripts, sessions and settings there).
    pub fn invocation(&self, block: &Block) -> Invocation {
        let mut invocation = (self.build)(block);
        if let Some(home) = block.home {
            invocation.env.insert(0, ("HOME".into(), home.into()));
        } else {
            invocation.files.clear();
        }
        invocation
    }
}

/// A session id as a CLI printed it, if it is one that may be passed back
/// to it as an argument: 1–128 characters of letters, digits, `-`, `_`,
/// `.` and `:`, not starting with `-` (never an option).
pub fn session_id(text: &str) -> Option<&str> {
    let text = text.trim();
    let ok = !text.is_empty()
        && text.len() <= 128
        && !text.starts_with('-')
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    ok.then_some(text)
}

/// A file-restriction glob as a regular expression over one path in JSON
/// text (`**`: any characters but a quote; `*`: any but `/` and a quote;
/// `?`: one of those), everything else literal (a quote as JSON escapes
/// it).
pub(crate) fn glob_regex(glob: &str) -> String {
    let mut out = String::new();
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                out.push_str("[^\"]*");
            }
            '*' => out.push_str("[^/\"]*"),
            '?' => out.push_str("[^/\"]"),
            '.' | '^' | '$' | '+' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

/// `value` as a TOML basic string.
pub(crate) fn toml_string(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn no_env(_: &str) -> Option<String> {
        None
    }

    /// The steps a recorded stream shows; every line must be a known
    /// CLI's event.
    pub(crate) fn shown_steps(stream: &str) -> Vec<String> {
        stream
            .lines()
            .filter_map(|l| match progress(l) {
                Progress::Show(s) => Some(s),
                Progress::Hide => None,
                Progress::Raw => panic!("not read as a known CLI's event: {l}"),
            })
            .collect()
    }

    #[test]
    fn unknown_presets_name_the_known_ones() {
        let e = find("claude").unwrap_err();
        assert_eq!(
            e,
            "`claude` is not an agent preset; the presets are `claude-code`, `codex`, `gemini`, `opencode`"
        );
    }

    #[test]
    fn session_ids_never_become_options() {
        for good in ["b57939b6-a474-4891-a6d5-e8efa10cd74f", "ses_3f2a", "a.b:c"] {
            assert_eq!(session_id(good), Some(good));
        }
        for bad in [
            "",
            "--help",
            "-c",
            "a b",
            "a/b",
            "x\ny",
            "$(id)",
            &"a".repeat(129),
        ] {
            assert_eq!(session_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn toml_strings_are_escaped() {
        assert_eq!(toml_string("http://h:1/v1"), "\"http://h:1/v1\"");
        assert_eq!(toml_string("a\"b\\c\nd"), "\"a\\\"b\\\\c\\u000Ad\"");
    }

    #[test]
    fn globs_become_anchored_regular_expressions() {
        assert_eq!(glob_regex("docs/**"), "docs/[^\"]*");
        assert_eq!(glob_regex("src/*.rs"), "src/[^/\"]*\\.rs");
        assert_eq!(glob_regex("a?b"), "a[^/\"]b");
        assert_eq!(glob_regex("x(y)+[z]"), "x\\(y\\)\\+\\[z\\]");
    }

    #[test]
    fn a_home_sets_home_and_keeps_the_files() {
        let p = find("claude-code").unwrap();
        let block = Block {
            model: None,
            restrictions: None,
            home: Some("/w/.output/agent/r/home/a"),
            resume: None,
            workspace: "/w",
            container: false,
            var: &no_env,
        };
        let inv = p.invocation(&block);
        assert_eq!(
            inv.env[0],
            ("HOME".to_string(), "/w/.output/agent/r/home/a".to_string())
        );
        let block = Block {
            home: None,
            ..block
        };
        assert!(p.invocation(&block).env.iter().all(|(k, _)| k != "HOME"));
    }
}
