//! Exec blocks (seed 003): commands as argv, a relative cwd and env
//! overrides, and the safety policy that is checked before a job is created
//! and again right before each command runs.
//!
//! The policy is not a sandbox — commands run as host processes — it
//! prevents accidental foot-guns and makes intent explicit: shells only
//! when the block says `allow_shell`, destructive tools only on relative
//! paths inside the working directory, some tools never.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The `exec` worker's block config, as the plugin, the stage-graph form
/// and the job queue read it (`wfhost-exec-config`).
pub use wfhost_exec_config as config;

/// One command of an exec block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecCommand {
    /// Program and arguments; never interpreted by a shell.
    pub argv: Vec<String>,
    /// Working directory relative to the block's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Environment overrides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, String)>,
}

impl ExecCommand {
    /// The `PATH` this command's overrides set (the last one wins), which
    /// is where its program is looked up.
    pub fn path_override(&self) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
    }
}

/// An exec block: commands run in order; the first that fails stops the
/// block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecSpec {
    pub commands: Vec<ExecCommand>,
    /// Allow shell entry points (`sh`, `bash`, …) as programs.
    #[serde(default)]
    pub allow_shell: bool,
}

impl ExecSpec {
    /// The spec the policy checks for an `exec` block's config, before
    /// anything runs: a secret's value is the host's, known only when the
    /// command starts (and checked again then), so it counts as empty here;
    /// `env_passthrough` is the host's own environment.
    pub fn of_config(config: &config::ExecConfig) -> ExecSpec {
        ExecSpec {
            commands: config
                .commands
                .iter()
                .map(|c| ExecCommand {
                    argv: c.argv.clone(),
                    cwd: c.cwd.clone(),
                    env: c
                        .env
                        .iter()
                        .map(|(k, v)| match v {
                            config::EnvValue::Plain(v) => (k.clone(), v.clone()),
                            config::EnvValue::Secret { .. } => (k.clone(), String::new()),
                        })
                        .collect(),
                })
                .collect(),
            allow_shell: config.allow_shell,
        }
    }
}

/// Why the policy refused a block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("command {index} (`{shown}`) refused by rule `{rule}`: {reason}")]
pub struct PolicyViolation {
    /// 1-based position of the command in the block.
    pub index: usize,
    pub shown: String,
    pub rule: &'static str,
    pub reason: String,
}

/// Shell entry points, by program name.
pub const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "csh",
    "tcsh",
    "cmd",
    "cmd.exe",
    "powershell",
    "powershell.exe",
    "pwsh",
    "pwsh.exe",
];

/// Programs that run another program given as their arguments; the policy
/// looks through them.
const WRAPPERS: &[&str] = &[
    "env", "nice", "nohup", "setsid", "stdbuf", "time", "command", "exec", "sudo", "doas",
    "timeout", "busybox", "chroot", "unshare", "ionice", "taskset", "flock",
];

/// Whether `program` (lower-case base name) with `args` runs commands or
/// code given as a string, as a shell does: returns how, for the refusal.
/// Programs that run a *file* (`python3 script.py`, `awk -f prog.awk`,
/// `make`) are not shells; inline code and command templates are.
/// The list is documented with the exec policy in the user guide.
pub fn command_runner(program: &str, args: &[String]) -> Option<&'static str> {
    let has = |flags: &[&str]| args.iter().any(|a| flags.contains(&a.as_str()));
    let prefixed = |prefixes: &[&str]| {
        args.iter()
            .any(|a| prefixes.iter().any(|p| a.starts_with(p)))
    };
    // A cluster of short options (`-lne`) that contains `flag`.
    let short = |flag: char| {
        args.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(flag))
    };
    // The same, among an interpreter's own options only (those before the
    // script or module: `python3 tool.py -c x` passes `-c` to the tool).
    let own_options = interpreter_options(args);
    let own_short = |flag: char| {
        own_options
            .iter()
            .any(|a| !a.starts_with("--") && a[1..].contains(flag))
    };
    let own_long = |prefixes: &[&str]| {
        own_options
            .iter()
            .any(|a| prefixes.iter().any(|p| a.starts_with(p)))
    };
    let interpreter = |names: &[&str]| {
        names.iter().any(|n| {
            program == *n
                || program
                    .strip_prefix(n)
                    .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        })
    };
    match program {
        "xargs" | "parallel" | "watch" | "ssh" | "expect" | "nsenter" | "run-parts"
        | "start-stop-daemon" | "su" | "runuser" => Some("runs commands it is given"),
        "find" if has(&["-exec", "-execdir", "-ok", "-okdir"]) => {
            Some("with -exec/-execdir/-ok runs a command")
        }
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" if !has(&["-f", "--file"]) => {
            Some("runs the program text it is given (awk can call `system`)")
        }
        "env" if short('S') || prefixed(&["--split-string"]) => {
            Some("with -S splits a string into a command line")
        }
        "sudo" | "doas" if has(&["-s", "-i", "--shell", "--login"]) => Some("starts a shell"),
        "script" if short('c') || prefixed(&["--command"]) => Some("with -c runs a command"),
        "tar"
            if prefixed(&[
                "--to-command",
                "--checkpoint-action",
                "--use-compress-program",
                "--info-script",
                "--new-volume-script",
                "-I",
            ]) || has(&["-F"]) =>
        {
            Some("with this option runs a command")
        }
        "rsync" if has(&["-e"]) || prefixed(&["--rsh", "-e"]) => {
            Some("with -e/--rsh runs a command")
        }
        "vi" | "vim" | "nvim" | "ex" | "view" if short('c') || prefixed(&["+"]) => {
            Some("with -c/+cmd runs editor commands, which can run shells")
        }
        "git" if prefixed(&["-c", "--config-env", "--exec-path"]) => {
            Some("with -c can set a command git runs (core.pager, an alias, …)")
        }
        _ if interpreter(&["perl", "ruby", "lua", "luajit"])
            && (own_short('e') || own_short('E')) =>
        {
            Some("with -e runs inline code")
        }
        _ if interpreter(&["python", "pypy"]) && own_short('c') => Some("with -c runs inline code"),
        _ if interpreter(&["node", "nodejs", "deno", "bun"])
            && (own_options.iter().any(|a| matches!(*a, "-e" | "-p"))
                || own_long(&["--eval", "--print"])) =>
        {
            Some("with -e/--eval runs inline code")
        }
        _ if interpreter(&["php"]) && own_short('r') => Some("with -r runs inline code"),
        _ if interpreter(&["rscript"]) && own_short('e') => Some("with -e runs inline code"),
        _ if interpreter(&["tclsh", "wish", "osascript"]) => Some("runs scripts it is given"),
        _ => None,
    }
}

/// An interpreter's own options: the arguments before its script, its
/// `-m module`, or `--`; the value of `-I`, `-W`, `-X` is skipped.
fn interpreter_options(args: &[String]) -> Vec<&str> {
    let mut options = Vec::new();
    let mut takes_value = false;
    for arg in args {
        let arg = arg.as_str();
        if takes_value {
            takes_value = false;
            continue;
        }
        if arg == "--" || !arg.starts_with('-') || arg == "-" {
            break;
        }
        options.push(arg);
        if arg == "-m" {
            break;
        }
        takes_value = matches!(arg, "-I" | "-W" | "-X");
    }
    options
}

/// Tools that are never run by an exec block.
const NEVER: &[&str] = &[
    "mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "parted", "wipefs", "shutdown", "reboot",
    "halt", "poweroff", "init", "telinit", "swapoff",
];

/// Destructive tools allowed only on relative paths inside the working
/// directory.
const CONFINED: &[&str] = &["rm", "rmdir", "unlink", "dd", "shred", "truncate"];

fn basename(program: &str) -> &str {
    program
        .rsplit(['/', '\\'])
        .find(|s| !s.is_empty())
        .unwrap_or(program)
}

/// The program a command really runs, looking through wrappers such as
/// `env FOO=1 sh` or `busybox sh`. Returns the name and its arguments.
fn effective(argv: &[String]) -> (&str, &[String]) {
    let mut rest = argv;
    loop {
        let Some(first) = rest.first() else {
            return ("", rest);
        };
        let name = basename(first);
        if !WRAPPERS.contains(&name) {
            return (name, &rest[1..]);
        }
        // Skip the wrapper's own options and assignments (`env -i A=1`,
        // `timeout 5`, `nice -n 5`): the wrapped program is the first
        // argument that is none of those.
        let mut i = 1;
        while let Some(arg) = rest.get(i) {
            let is_option = arg.starts_with('-');
            let is_assignment = name == "env" && arg.contains('=');
            let is_number = arg.chars().next().is_some_and(|c| c.is_ascii_digit());
            if is_option || is_assignment || is_number {
                // Options that take a separate value.
                if matches!(
                    arg.as_str(),
                    "-u" | "-n" | "-C" | "-S" | "-s" | "-k" | "-c" | "-o" | "-e" | "-i"
                ) && name != "env"
                {
                    i += 1;
                }
                if name == "env" && matches!(arg.as_str(), "-u" | "-C" | "-S") {
                    i += 1;
                }
                i += 1;
                continue;
            }
            break;
        }
        if i >= rest.len() {
            return (name, &rest[1..]);
        }
        rest = &rest[i..];
    }
}

/// Whether `path` is relative and stays inside the directory it is
/// relative to, lexically.
pub fn stays_inside(path: &str) -> bool {
    let p = Path::new(path);
    if p.is_absolute() || path.starts_with('~') || path.contains('\0') {
        return false;
    }
    let mut depth: i64 = 0;
    for c in p.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Join a checked relative `cwd` onto `root`, lexically normalized.
pub fn resolve_cwd(root: &Path, cwd: Option<&str>) -> PathBuf {
    let mut out = root.to_path_buf();
    if let Some(cwd) = cwd {
        for c in Path::new(cwd).components() {
            match c {
                Component::Normal(part) => out.push(part),
                Component::ParentDir => {
                    out.pop();
                }
                _ => {}
            }
        }
    }
    out
}

/// Check a whole block.
pub fn check(spec: &ExecSpec) -> Result<(), PolicyViolation> {
    if spec.commands.is_empty() {
        return Err(PolicyViolation {
            index: 0,
            shown: String::new(),
            rule: "non-empty",
            reason: "an exec block needs at least one command".into(),
        });
    }
    for (i, command) in spec.commands.iter().enumerate() {
        check_command(i + 1, command, spec.allow_shell)?;
    }
    Ok(())
}

/// Check one command (also used right before it runs).
pub fn check_command(
    index: usize,
    command: &ExecCommand,
    allow_shell: bool,
) -> Result<(), PolicyViolation> {
    let shown = command.argv.join(" ");
    let refuse = |rule: &'static str, reason: String| PolicyViolation {
        index,
        shown: shown.clone(),
        rule,
        reason,
    };
    if command.argv.first().is_none_or(|p| p.is_empty()) {
        return Err(refuse("argv", "the program is missing".into()));
    }
    if command.argv.iter().any(|a| a.contains('\0')) {
        return Err(refuse("no-nul", "an argument contains a NUL byte".into()));
    }
    for (key, value) in &command.env {
        if key.is_empty() || key.contains('=') || key.contains('\0') || value.contains('\0') {
            return Err(refuse(
                "env",
                format!(
                    "`{}` is not a valid environment override",
                    key.escape_debug()
                ),
            ));
        }
    }
    if let Some(cwd) = &command.cwd
        && !stays_inside(cwd)
    {
        return Err(refuse(
            "cwd-inside",
            format!(
                "cwd `{cwd}` leaves the working directory; it must be a relative path inside it"
            ),
        ));
    }
    let (program, args) = effective(&command.argv);
    check_program(program, args, allow_shell).map_err(|(rule, reason)| refuse(rule, reason))
}

/// How a block allows shells: `allow_shell` is a field of the exec
/// block's `config` (of the stage-graph form's `exec`), not of the block.
const ALLOW_SHELL_HINT: &str = "set `\"allow_shell\": true` in the block's `config`";

/// The rules about one program and its arguments; also applied to the
/// resolved executable right before execution.
pub fn check_program(
    program: &str,
    args: &[String],
    allow_shell: bool,
) -> Result<(), (&'static str, String)> {
    let lower = program.to_ascii_lowercase();
    if SHELLS.contains(&lower.as_str()) && !allow_shell {
        return Err((
            "no-shell",
            format!("`{program}` is a shell; {ALLOW_SHELL_HINT} to run shells"),
        ));
    }
    if !allow_shell && let Some(how) = command_runner(&lower, args) {
        return Err((
            "no-shell",
            format!(
                "`{program}` {how}, which runs arbitrary commands like a shell; {ALLOW_SHELL_HINT} to allow it"
            ),
        ));
    }
    if NEVER.contains(&lower.as_str()) || lower.starts_with("mkfs.") {
        return Err((
            "never",
            format!("`{program}` is never run by an exec block"),
        ));
    }
    if CONFINED.contains(&lower.as_str()) {
        let mut after_dashdash = false;
        for arg in args {
            if arg == "--" {
                after_dashdash = true;
                continue;
            }
            if !after_dashdash && arg.starts_with('-') {
                if arg == "--no-preserve-root" {
                    return Err((
                        "destructive-path",
                        format!("`{program} --no-preserve-root` is never allowed"),
                    ));
                }
                continue;
            }
            // dd takes operands as key=value.
            let path = match (lower.as_str(), arg.split_once('=')) {
                ("dd", Some(("if" | "of", value))) => value,
                ("dd", _) => continue,
                _ => arg.as_str(),
            };
            if !stays_inside(path) || path.trim_matches(['.', '/']).is_empty() {
                return Err((
                    "destructive-path",
                    format!(
                        "`{program}` may only touch relative paths inside the working directory, not `{path}`"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(argv: &[&str]) -> ExecCommand {
        ExecCommand {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: None,
            env: vec![],
        }
    }

    fn block(argv: &[&str]) -> ExecSpec {
        ExecSpec {
            commands: vec![cmd(argv)],
            allow_shell: false,
        }
    }

    fn rule(argv: &[&str]) -> Option<&'static str> {
        check(&block(argv)).err().map(|v| v.rule)
    }

    #[test]
    fn ordinary_commands_pass() {
        for argv in [
            &["cargo", "test"][..],
            &["make", "-j2"],
            &["rm", "-rf", "target"],
            &["rm", "build/out.o", "./tmp/x"],
            &["dd", "if=in.bin", "of=out/copy.bin", "bs=1M"],
            &["env", "RUST_LOG=debug", "cargo", "run"],
            &["/usr/bin/git", "status"],
        ] {
            assert_eq!(rule(argv), None, "{argv:?}");
        }
    }

    #[test]
    fn shells_are_refused_however_they_are_reached() {
        for argv in [
            &["sh", "-c", "true"][..],
            &["bash"],
            &["/bin/bash", "-c", "x"],
            &["/usr/bin/../bin/bash", "-c", "x"],
            &["env", "sh", "-c", "x"],
            &["env", "-i", "A=1", "/bin/dash"],
            &["/usr/bin/env", "--", "zsh"],
            &["nice", "-n", "5", "bash"],
            &["timeout", "5", "sh", "-c", "x"],
            &["busybox", "sh"],
            &["sudo", "-u", "root", "bash"],
            &["powershell.exe", "-Command", "x"],
            &["CMD.EXE", "/c", "dir"],
            &["xargs", "sh", "-c", "x"],
        ] {
            assert_eq!(rule(argv), Some("no-shell"), "{argv:?}");
        }
        let mut allowed = block(&["bash", "-c", "make"]);
        allowed.allow_shell = true;
        assert!(check(&allowed).is_ok());
    }

    #[test]
    fn programs_that_run_commands_are_shells() {
        for argv in [
            &["find", ".", "-exec", "sh", "-c", "x", ";"][..],
            &["find", ".", "-name", "*.o", "-execdir", "rm", "{}", "+"],
            &["find", ".", "-ok", "true", ";"],
            &["awk", "BEGIN{system(\"id\")}"],
            &["/usr/bin/gawk", "-v", "x=1", "{print}"],
            &["busybox", "awk", "BEGIN{}"],
            &["xargs", "rm"],
            &["xargs", "-0", "-I{}", "cp", "{}", "out/"],
            &["env", "-S", "sh -c x"],
            &["env", "--split-string=sh -c x"],
            &["perl", "-e", "system 'id'"],
            &["perl", "-lne", "print"],
            &["python3", "-c", "import os"],
            &["python3.11", "-Bc", "x"],
            &["ruby", "-e", "x"],
            &["node", "-e", "x"],
            &["node", "--eval=x"],
            &["php", "-r", "x"],
            &["tar", "-xf", "a.tar", "--to-command=sh"],
            &["tar", "--checkpoint-action=exec=id", "-cf", "a.tar", "."],
            &["rsync", "-e", "sh -c x", "a", "b"],
            &["git", "-c", "core.pager=sh", "log"],
            &["sudo", "-s"],
            &["ssh", "host", "id"],
            &["watch", "id"],
            &["nice", "find", ".", "-exec", "id", ";"],
        ] {
            assert_eq!(rule(argv), Some("no-shell"), "{argv:?}");
        }
        for argv in [
            &["find", ".", "-name", "*.py"][..],
            &["awk", "-f", "report.awk", "data.txt"],
            &["python3", "-m", "unittest", "-v"],
            &["python3", "-m", "pytest", "-c", "pytest.ini"],
            &["perl", "-I", "lib", "tool.pl", "-e", "x"],
            &["python3", "script.py", "-c", "config"],
            &["perl", "script.pl"],
            &["node", "index.js"],
            &["tar", "-xf", "a.tar"],
            &["git", "status"],
            &["env", "A=1", "make"],
        ] {
            assert_eq!(rule(argv), None, "{argv:?}");
        }
        let mut allowed = block(&["find", ".", "-exec", "true", ";"]);
        allowed.allow_shell = true;
        assert!(check(&allowed).is_ok());
    }

    #[test]
    fn destructive_tools_stay_inside_the_working_directory() {
        for argv in [
            &["rm", "-rf", "/"][..],
            &["rm", "-rf", "/home/user"],
            &["rm", "-rf", "../sibling"],
            &["rm", "-rf", "a/../../x"],
            &["rm", "-rf", "."],
            &["rm", "-rf", "./"],
            &["rm", "~/x"],
            &["rm", "--no-preserve-root", "-rf", "x"],
            &["/bin/rm", "-r", "--", "/etc"],
            &["env", "rm", "-rf", "/"],
            &["unlink", "/etc/passwd"],
            &["dd", "if=/dev/zero", "of=/dev/sda"],
            &["dd", "of=../disk.img"],
            &["shred", "/var/log/x"],
        ] {
            assert_eq!(rule(argv), Some("destructive-path"), "{argv:?}");
        }
        for argv in [
            &["mkfs.ext4", "/dev/sda1"][..],
            &["shutdown", "-h", "now"],
            &["reboot"],
            &["sudo", "halt"],
        ] {
            assert_eq!(rule(argv), Some("never"), "{argv:?}");
        }
    }

    #[test]
    fn cwd_and_env_are_checked() {
        for cwd in ["../..", "/tmp", "a/../../b", "~"] {
            let mut spec = block(&["ls"]);
            spec.commands[0].cwd = Some(cwd.into());
            assert_eq!(check(&spec).unwrap_err().rule, "cwd-inside", "{cwd}");
        }
        let mut spec = block(&["ls"]);
        spec.commands[0].cwd = Some("src/../docs".into());
        assert!(check(&spec).is_ok());
        assert_eq!(
            resolve_cwd(Path::new("/w"), Some("src/../docs")),
            Path::new("/w/docs")
        );
        for (k, v) in [("A\0B", "1"), ("", "1"), ("A=B", "1"), ("A", "x\0y")] {
            let mut spec = block(&["ls"]);
            spec.commands[0].env = vec![(k.into(), v.into())];
            assert_eq!(check(&spec).unwrap_err().rule, "env");
        }
        assert_eq!(rule(&["ls", "a\0b"]), Some("no-nul"));
        assert_eq!(rule(&[""]), Some("argv"));
        assert!(
            check(&ExecSpec {
                commands: vec![],
                allow_shell: false
            })
            .is_err()
        );
    }

    #[test]
    fn a_refusal_names_the_command_and_the_rule() {
        let spec = ExecSpec {
            commands: vec![cmd(&["make"]), cmd(&["env", "bash", "-c", "x"])],
            allow_shell: false,
        };
        let message = check(&spec).unwrap_err().to_string();
        assert_eq!(
            message,
            "command 2 (`env bash -c x`) refused by rule `no-shell`: `bash` is a shell; set `\"allow_shell\": true` in the block's `config` to run shells"
        );
    }
}
