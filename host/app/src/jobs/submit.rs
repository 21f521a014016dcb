//! Agents as one Slurm job array (`wfhost agents submit`): the batch
//! script, checked, and its submission with `sbatch`.
//!
//! One `sbatch --array=0-(N-1)` job, its options as `#SBATCH` lines of the
//! script (what `--print` shows is exactly what is submitted, on stdin);
//! each task `exec`s the `wfhost` executable as `wfhost agent --name
//! <prefix>-<array job id>_<task id>`. The job carries the comment
//! `wfhost-agent=<server URL>` ([`wfhost_exec::slurm::AGENT_COMMENT_PREFIX`]),
//! which `wfhost gc` does not take for a block's job left behind: the
//! agents are meant to outlive the process that submitted them. `scancel`
//! stops them; each hands back the job it was running (see `runner`).
//!
//! What runs on the nodes must see, at the same paths: the executable,
//! the token file, the log directory, and the workspaces of the runs (and
//! `WFHOST_LANES_DIR`) — a shared filesystem.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The most agents one submission makes (Slurm's default `MaxArraySize`
/// allows indices up to 1000).
pub const MAX_AGENTS: u32 = 1000;
/// The longest name prefix (an agent's whole name is at most 64).
pub const MAX_PREFIX: usize = 40;
/// How long `sbatch` may take.
const SBATCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The `sbatch` options wfhost sets itself (or that would break the
/// submission), by sbatch's long name, each with the reason: refused in
/// every spelling sbatch reads (a prefix, the short form, a bundle; see
/// [`wfhost_exec::slurm::options`]).
const RESERVED: &[(&str, &str)] = &[
    ("array", "it is --slurm N"),
    ("job-name", "the job is `wfhost-agent`"),
    ("comment", "it marks the job as wfhost's agents"),
    ("output", "use --log-dir"),
    ("partition", "use --partition"),
    ("time", "use --time"),
    ("parsable", "wfhost reads the job id itself"),
    ("wrap", "the script is wfhost's"),
    ("wait", "the agents run until they are cancelled"),
];

/// Everything the batch script is made of, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub count: u32,
    /// The `wfhost` executable the nodes run (absolute).
    pub exe: String,
    pub server: String,
    pub partition: Option<String>,
    pub time: Option<String>,
    pub capabilities: Vec<String>,
    pub concurrency: usize,
    /// Absolute.
    pub token_file: Option<String>,
    /// The TLS files, each with its flag (`--ca`, `--client-cert`,
    /// `--client-key`): absolute, read by the nodes at the same paths.
    pub tls: Vec<(String, String)>,
    pub cache: Cache,
    pub name_prefix: String,
    /// Absolute.
    pub log_dir: String,
    pub sbatch_args: Vec<String>,
}

/// Where the agents cache compiled plugins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cache {
    /// Each node's user cache.
    Default,
    /// This directory (absolute).
    Dir(String),
    /// No cache.
    Off,
}

pub fn check_prefix(prefix: &str) -> Result<(), String> {
    let ok = !prefix.is_empty()
        && prefix.len() <= MAX_PREFIX
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--name-prefix {}: 1 to {MAX_PREFIX} letters, digits, `.`, `_` or `-`",
            prefix.escape_debug()
        ))
    }
}

/// A value for an `#SBATCH` line: one line, not an option.
pub fn check_value(flag: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || value.starts_with('-') || value.chars().any(char::is_control) {
        return Err(format!(
            "{flag}: `{}` is not a valid value",
            value.escape_debug()
        ));
    }
    Ok(())
}

/// The `--sbatch-arg`s, one `#SBATCH` line each: sbatch reads the words
/// of all the lines as one list of options, as it reads a command line.
pub fn check_sbatch_args(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.iter().find(|a| a.chars().any(char::is_control)) {
        return Err(format!(
            "--sbatch-arg {}: control characters cannot go into the script",
            arg.escape_debug()
        ));
    }
    wfhost_exec::slurm::options::check(args, RESERVED)
        .map(|_| ())
        .map_err(|e| format!("--sbatch-arg: {e}"))
}

pub fn utf8(what: &str, path: &Path) -> Result<String, String> {
    path.to_str().map(str::to_string).ok_or_else(|| {
        format!(
            "{what} {} is not UTF-8: it cannot go into the batch script",
            path.display()
        )
    })
}

/// `path` made absolute (not resolved: the nodes see the same names).
pub fn absolute(what: &str, path: &Path) -> Result<String, String> {
    let path = std::path::absolute(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    let text = utf8(what, &path)?;
    if text.chars().any(char::is_control) {
        return Err(format!(
            "{what} {}: a path with control characters cannot go into the batch script",
            text.escape_debug()
        ));
    }
    Ok(text)
}

/// `'…'` for `sh` ([`wfhost_core::text::shell_word`]).
fn sh_quote(s: &str) -> String {
    wfhost_core::text::shell_word(s)
}

/// A word of an `#SBATCH` line: as is when plain, else in double quotes
/// with `\` and `"` escaped (how sbatch reads its directives).
fn directive_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.,:=/@%+".contains(&b))
    {
        return s.to_string();
    }
    format!("\"{}\"", s.replace('\\', r"\\").replace('"', "\\\""))
}

/// The batch script: the job's options as `#SBATCH` lines, then the agent.
pub fn batch_script(plan: &Plan) -> String {
    let mut s = String::new();
    s.push_str("#!/bin/sh\n");
    s.push_str(&format!(
        "# wfhost agents as a Slurm job array, written by `wfhost agents submit`: each\n\
         # task runs one `wfhost agent` that leases jobs from {} and runs\n\
         # them on its node until the job is cancelled (`scancel <array job id>`)\n\
         # or reaches its time limit; it then hands back the job it was running.\n\
         # The nodes must see at the same paths as the server: the wfhost\n\
         # executable, the token file, the log directory, and the runs'\n\
         # workspaces and WFHOST_LANES_DIR (a shared filesystem).\n",
        plan.server
    ));
    let mut directive = |option: &str, value: Option<&str>| {
        s.push_str("#SBATCH ");
        match value {
            Some(v) => s.push_str(&directive_quote(&format!("{option}={v}"))),
            None => s.push_str(&directive_quote(option)),
        }
        s.push('\n');
    };
    directive("--job-name", Some("wfhost-agent"));
    directive("--array", Some(&format!("0-{}", plan.count - 1)));
    directive(
        "--comment",
        Some(&format!(
            "{}{}",
            wfhost_exec::slurm::AGENT_COMMENT_PREFIX,
            plan.server
        )),
    );
    // `%A_%a`: array job id, task id; a `%` of the directory is itself.
    let log = format!("{}/%A_%a.log", plan.log_dir.replace('%', "%%"));
    directive("--output", Some(&log));
    if let Some(p) = &plan.partition {
        directive("--partition", Some(p));
    }
    if let Some(t) = &plan.time {
        directive("--time", Some(t));
    }
    for arg in &plan.sbatch_args {
        directive(arg, None);
    }
    let mut argv = vec![
        sh_quote(&plan.exe),
        "agent".into(),
        "--server".into(),
        sh_quote(&plan.server),
        "--name".into(),
        format!(
            "{}\"-${{SLURM_ARRAY_JOB_ID:?not a Slurm job array}}_${{SLURM_ARRAY_TASK_ID:?not a Slurm job array}}\"",
            sh_quote(&plan.name_prefix)
        ),
        "--capabilities".into(),
        sh_quote(&plan.capabilities.join(",")),
        "--concurrency".into(),
        plan.concurrency.to_string(),
    ];
    if let Some(file) = &plan.token_file {
        argv.extend(["--token-file".into(), sh_quote(file)]);
    }
    for (flag, file) in &plan.tls {
        argv.extend([flag.clone(), sh_quote(file)]);
    }
    match &plan.cache {
        Cache::Default => {}
        Cache::Dir(dir) => argv.extend(["--cache-dir".into(), sh_quote(dir)]),
        Cache::Off => argv.push("--no-cache".into()),
    }
    s.push_str("\n# The agent is the job's process: scancel's SIGTERM reaches it.\n");
    s.push_str(&format!("exec {}\n", argv.join(" ")));
    s
}

/// Submit `script` with `sbatch --parsable` (on its stdin): the array
/// job's id.
pub fn sbatch(script: &str) -> Result<String, String> {
    let mut child = Command::new("sbatch")
        .arg("--parsable")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "Slurm is not available on this host: `sbatch` not found".to_string()
            }
            _ => format!("cannot run sbatch: {e}"),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        // sbatch may refuse before reading it all; what it says tells why.
        let _ = stdin.write_all(script.as_bytes());
    }
    let deadline = Instant::now() + SBATCH_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "sbatch did not answer within {} s: is Slurm reachable?",
                    SBATCH_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for sbatch: {e}")),
        }
    };
    // What it said is a line or two: it fits the pipes while it runs.
    fn read(pipe: Option<impl Read>) -> String {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text.trim().to_string()
    }
    let stdout = read(child.stdout.take());
    let stderr = read(child.stderr.take());
    if !status.success() {
        let said = if stderr.is_empty() { stdout } else { stderr };
        return Err(if said.is_empty() {
            format!("sbatch failed ({status}) without a message; nothing was submitted")
        } else {
            format!("sbatch refused the agents' job: {said}")
        });
    }
    // `--parsable` prints `id` or `id;cluster`.
    let id = stdout.split(';').next().unwrap_or_default().trim();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "sbatch did not print a job id (it printed `{}`)",
            stdout.escape_debug()
        ));
    }
    Ok(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            count: 3,
            exe: "/opt/my tools/wfhost".into(),
            server: r#"http://head:7464/it's "x" #1"#.into(),
            partition: Some("debug".into()),
            time: Some("1-00:00:00".into()),
            capabilities: vec!["wasm".into(), "exec".into()],
            concurrency: 2,
            token_file: Some("/home/a b/it's token".into()),
            tls: vec![("--ca".into(), "/etc/wfhost/our ca.pem".into())],
            cache: Cache::Dir("/scratch/cache".into()),
            name_prefix: "gpu".into(),
            log_dir: r#"/home/a b/it's "logs" 100%"#.into(),
            sbatch_args: vec!["--account=lab".into(), "--constraint=a b".into()],
        }
    }

    #[test]
    fn the_script_quotes_what_sbatch_and_sh_read() {
        let script = batch_script(&plan());
        let directives: Vec<&str> = script
            .lines()
            .filter(|l| l.starts_with("#SBATCH"))
            .collect();
        assert_eq!(
            directives,
            [
                "#SBATCH --job-name=wfhost-agent",
                "#SBATCH --array=0-2",
                r#"#SBATCH "--comment=wfhost-agent=http://head:7464/it's \"x\" #1""#,
                r#"#SBATCH "--output=/home/a b/it's \"logs\" 100%%/%A_%a.log""#,
                "#SBATCH --partition=debug",
                "#SBATCH --time=1-00:00:00",
                "#SBATCH --account=lab",
                r#"#SBATCH "--constraint=a b""#,
            ]
        );
        // Directives come before any command (sbatch stops reading them there).
        let lines: Vec<&str> = script.lines().collect();
        let first_command = lines
            .iter()
            .position(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap();
        let last_directive = lines
            .iter()
            .rposition(|l| l.starts_with("#SBATCH"))
            .unwrap();
        assert!(last_directive < first_command, "{script}");
        assert!(script.ends_with(
            "exec '/opt/my tools/wfhost' agent --server 'http://head:7464/it'\\''s \"x\" #1' \
             --name gpu\"-${SLURM_ARRAY_JOB_ID:?not a Slurm job array}_${SLURM_ARRAY_TASK_ID:?not a Slurm job array}\" \
             --capabilities wasm,exec --concurrency 2 --token-file '/home/a b/it'\\''s token' \
             --ca '/etc/wfhost/our ca.pem' --cache-dir /scratch/cache\n"
        ), "{script}");
    }

    /// The script run by `sh` with a stand-in for wfhost that prints its
    /// arguments: each arrives whole, quotes, spaces and all.
    #[test]
    fn sh_passes_each_argument_whole() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("my \"wfhost\" it's");
        std::fs::write(
            &exe,
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut plan = plan();
        plan.exe = exe.to_str().unwrap().into();
        plan.cache = Cache::Off;
        let script = dir.path().join("job.sh");
        std::fs::write(&script, batch_script(&plan)).unwrap();
        let out = Command::new("sh")
            .arg(&script)
            .env("SLURM_ARRAY_JOB_ID", "77")
            .env("SLURM_ARRAY_TASK_ID", "2")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let args: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(
            args,
            [
                "agent",
                "--server",
                r#"http://head:7464/it's "x" #1"#,
                "--name",
                "gpu-77_2",
                "--capabilities",
                "wasm,exec",
                "--concurrency",
                "2",
                "--token-file",
                "/home/a b/it's token",
                "--ca",
                "/etc/wfhost/our ca.pem",
                "--no-cache",
            ]
        );
        // Outside a job array it refuses to start an agent without a name.
        let out = Command::new("sh")
            .arg(&script)
            .env_remove("SLURM_ARRAY_JOB_ID")
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("not a Slurm job array"));
    }

    #[test]
    fn options_wfhost_sets_are_refused_in_sbatch_args_in_every_spelling() {
        let check = |args: &[&str]| {
            check_sbatch_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
        };
        for (args, says) in [
            (
                &["--array=0-3"][..],
                "`--array=0-3` is sbatch's --array, which wfhost sets itself: it is --slurm N",
            ),
            (&["--arr=0-2"], "`--arr=0-2` is sbatch's --array"),
            (&["-a", "0-2"], "`-a 0-2` is sbatch's --array"),
            (&["-a0-2"], "`-a0-2` is sbatch's --array"),
            (&["-Ha", "0-2"], "`-Ha 0-2` holds -a, sbatch's --array"),
            (&["-a"], "`-a` needs a value"),
            (&["--job-name=x"], "sbatch's --job-name"),
            (&["--job-n=x"], "`--job-n=x` is sbatch's --job-name"),
            (&["-Jx"], "sbatch's --job-name"),
            (&["--comment=x"], "sbatch's --comment"),
            (
                &["--comm=x"],
                "`--comm=x` is sbatch's --comment, which wfhost sets itself: it marks the job as wfhost's agents",
            ),
            (&["--output=/tmp/x"], "sbatch's --output"),
            (
                &["--out=/tmp/x"],
                "`--out=/tmp/x` is sbatch's --output, which wfhost sets itself: use --log-dir",
            ),
            (&["-o/tmp/x"], "sbatch's --output"),
            (&["--partition=x"], "use --partition"),
            (&["--part=x"], "use --partition"),
            (&["-p", "x"], "use --partition"),
            (&["--time=5"], "use --time"),
            (&["-t5"], "use --time"),
            // --time's prefixes are --time-min's too.
            (&["--ti=5"], "ambiguous"),
            (&["--parsable"], "sbatch's --parsable"),
            (&["--wrap=true"], "sbatch's --wrap"),
            (&["--wait"], "sbatch's --wait"),
            (&["-W"], "sbatch's --wait"),
            (&["--co=x"], "ambiguous"),
            (&["--no-such"], "not an option of sbatch"),
            (&["account=lab"], "`account=lab` is not an option"),
        ] {
            match check(args) {
                Ok(()) => panic!("{args:?} accepted"),
                Err(e) => {
                    assert!(e.starts_with("--sbatch-arg: "), "{args:?}: {e}");
                    assert!(e.contains(says), "{args:?}: {e}");
                }
            }
        }
        for args in [
            &["--account=lab"][..],
            &["--mem=4G", "--hold", "--export=ALL", "-N1", "--gres=gpu:1"],
            &["--mem=1G", "-c", "2", "--account", "lab"],
            // --chdir is the agents' to choose; --comment is the value
            // of --account there.
            &["--chd=/tmp"],
            &["--account", "--comment=x"],
        ] {
            assert!(check(args).is_ok(), "{args:?}: {:?}", check(args));
        }
        assert!(check(&["--mem=1G\n#SBATCH --x"]).is_err());
    }

    #[test]
    fn a_name_prefix_makes_names_the_server_takes() {
        assert!(check_prefix("gpu-node.a_1").is_ok());
        for bad in ["", "a b", "a/b", &"x".repeat(41), "ü"] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
        assert!(check_value("--time", "60").is_ok());
        assert!(check_value("--time", "--wrap").is_err());
        assert!(check_value("--partition", "a\nb").is_err());
    }
}
