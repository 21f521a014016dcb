//! Project and user defaults: `wfhost.toml` in the current directory or
//! the nearest one above it (the project's), and
//! `$XDG_CONFIG_HOME/wfhost/config.toml` (the user's, else
//! `~/.config/wfhost/config.toml`). Each key stands for an environment
//! variable; the precedence is flag > environment > project > user >
//! built-in. A surface applies the files by setting the variables they
//! give that the environment does not ([`Config::apply`]), so every
//! command reads its defaults one way.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use wfhost_protocol::AppError;

/// A project's configuration file.
pub const PROJECT_FILE: &str = "wfhost.toml";

/// The keys a configuration file may set, each with the environment
/// variable it stands for and what it means.
pub const KEYS: &[Key] = &[
    Key::new(
        "home",
        "WFHOST_HOME",
        "the wfhost home (run store, plugins, keys)",
        "$XDG_DATA_HOME/wfhost, else ~/.local/share/wfhost",
        true,
    ),
    Key::new(
        "cache_dir",
        "WFHOST_CACHE_DIR",
        "where compiled plugins are cached",
        "$XDG_CACHE_HOME/wfhost/components, else ~/.cache/wfhost/components",
        true,
    ),
    Key::new(
        "durability",
        "WFHOST_DURABILITY",
        "`full` or `normal`",
        "full",
        false,
    ),
    Key::new(
        "executor",
        "WFHOST_EXECUTOR",
        "where exec blocks that name none run",
        "local",
        false,
    ),
    Key::new(
        "workspace",
        "WFHOST_WORKSPACE",
        "the workspace when neither --workspace nor the manifest names one",
        "none: a run needs one",
        true,
    ),
    Key::new(
        "http_allow",
        "WFHOST_HTTP_ALLOW",
        "the hosts plugins granted `http` may reach at most (comma-separated `host[:port]` / `*.domain`; user config only)",
        "none: each workflow's grant alone",
        false,
    ),
    Key::new(
        "serve.listen",
        "WFHOST_LISTEN",
        "the address `wfhost serve` listens on",
        "127.0.0.1:7464",
        false,
    ),
    Key::new(
        "serve.local_agents",
        "WFHOST_LOCAL_AGENTS",
        "agents inside `wfhost serve`",
        "1",
        false,
    ),
];

/// One key of a configuration file.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    pub name: &'static str,
    pub env: &'static str,
    pub meaning: &'static str,
    /// The built-in value, in words.
    pub default: &'static str,
    /// A path: relative values are resolved against the file's directory.
    pub path: bool,
}

impl Key {
    const fn new(
        name: &'static str,
        env: &'static str,
        meaning: &'static str,
        default: &'static str,
        path: bool,
    ) -> Key {
        Key {
            name,
            env,
            meaning,
            default,
            path,
        }
    }
}

/// Where a setting's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Environment,
    Project(PathBuf),
    User(PathBuf),
    BuiltIn,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Environment => write!(f, "environment"),
            Source::Project(p) => write!(f, "project ({})", p.display()),
            Source::User(p) => write!(f, "user ({})", p.display()),
            Source::BuiltIn => write!(f, "built-in"),
        }
    }
}

/// A key's effective value (None: the built-in default) and its source.
#[derive(Debug, Clone)]
pub struct Setting {
    pub key: Key,
    pub value: Option<String>,
    pub source: Source,
}

/// The files found, read and checked.
#[derive(Debug, Default)]
pub struct Config {
    pub project: Option<(PathBuf, File)>,
    pub user: Option<(PathBuf, File)>,
}

/// What a configuration file may hold; anything else is refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    home: Option<String>,
    cache_dir: Option<String>,
    durability: Option<String>,
    executor: Option<String>,
    workspace: Option<String>,
    http_allow: Option<Vec<String>>,
    #[serde(default)]
    serve: Serve,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Serve {
    listen: Option<String>,
    local_agents: Option<u32>,
}

/// The most bytes a configuration file may have.
const MAX_FILE: u64 = 64 << 10;

impl File {
    /// The value `key` has in this file, relative paths resolved against
    /// `dir`.
    fn value(&self, key: &Key, dir: &Path) -> Option<String> {
        let raw = match key.name {
            "home" => self.home.clone(),
            "cache_dir" => self.cache_dir.clone(),
            "durability" => self.durability.clone(),
            "executor" => self.executor.clone(),
            "workspace" => self.workspace.clone(),
            "http_allow" => self.http_allow.as_ref().map(|hosts| hosts.join(",")),
            "serve.listen" => self.serve.listen.clone(),
            "serve.local_agents" => self.serve.local_agents.map(|n| n.to_string()),
            _ => None,
        }?;
        Some(match key.path {
            true => expand(&raw, dir),
            false => raw,
        })
    }

    fn read(path: &Path) -> Result<File, AppError> {
        let bad = |e: String| {
            AppError::bad_input(format!("{}: {e}", path.display())).at(path.display().to_string())
        };
        let bytes = wfhost_core::workspace::regular_file::read_regular(path, MAX_FILE)
            .map_err(|e| bad(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        let file: File = toml::from_str(&text).map_err(|e| bad(toml_error(&text, &e)))?;
        file.check().map_err(bad)?;
        Ok(file)
    }

    /// Values that have a fixed form are checked here, naming the key.
    fn check(&self) -> Result<(), String> {
        if let Some(d) = &self.durability
            && !matches!(d.as_str(), "full" | "normal")
        {
            return Err(format!("durability: `{d}` is neither `full` nor `normal`"));
        }
        if let Some(hosts) = &self.http_allow {
            wfhost_core::policy::http::operator_allowlist(hosts)?;
        }
        if let Some(listen) = &self.serve.listen
            && listen.parse::<std::net::SocketAddr>().is_err()
        {
            return Err(format!("serve.listen: `{listen}` is not an ADDR:PORT"));
        }
        Ok(())
    }
}

/// `line:column: message` of a TOML error, on one line.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("{line}:{column}: {message}")
        }
        None => message,
    }
}

/// `~/x` from the home directory; a relative path from `dir`.
fn expand(raw: &str, dir: &Path) -> String {
    let path = match raw.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map_or_else(|| PathBuf::from(raw), |h| PathBuf::from(h).join(rest)),
        None => PathBuf::from(raw),
    };
    match path.is_absolute() {
        true => path.display().to_string(),
        false => dir.join(path).display().to_string(),
    }
}

/// The project's file: `wfhost.toml` in `cwd` or the nearest directory
/// above it.
fn project_file(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .map(|dir| dir.join(PROJECT_FILE))
        .find(|p| p.is_file())
}

/// The user's file, when it exists.
fn user_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("wfhost").join("config.toml")).filter(|p| p.is_file())
}

impl Config {
    /// Find and read the project's and the user's files (from `cwd`).
    pub fn load(cwd: &Path) -> Result<Config, AppError> {
        let read = |p: PathBuf| File::read(&p).map(|f| (p, f));
        let project = project_file(cwd).map(read).transpose()?;
        if let Some((path, file)) = &project
            && file.http_allow.is_some()
        {
            // A project (possibly someone else's) must not widen what the
            // operator lets plugins reach.
            return Err(AppError::bad_input(format!(
                "{}: http_allow is the operator's setting: set it in the user's config \
                 (~/.config/wfhost/config.toml) or WFHOST_HTTP_ALLOW, not in a project",
                path.display()
            ))
            .at(path.display().to_string()));
        }
        Ok(Config {
            project,
            user: user_file().map(read).transpose()?,
        })
    }

    /// Every key's effective value and where it comes from, the
    /// environment as `env` reads it.
    pub fn settings(&self, env: impl Fn(&str) -> Option<String>) -> Vec<Setting> {
        KEYS.iter()
            .map(|key| {
                let from_file = |file: &Option<(PathBuf, File)>| {
                    file.as_ref().and_then(|(path, f)| {
                        let dir = path.parent().unwrap_or(Path::new("."));
                        f.value(key, dir).map(|v| (v, path.clone()))
                    })
                };
                let (value, source) = if let Some(v) = env(key.env).filter(|v| !v.is_empty()) {
                    (Some(v), Source::Environment)
                } else if let Some((v, p)) = from_file(&self.project) {
                    (Some(v), Source::Project(p))
                } else if let Some((v, p)) = from_file(&self.user) {
                    (Some(v), Source::User(p))
                } else {
                    (None, Source::BuiltIn)
                };
                Setting {
                    key: *key,
                    value,
                    source,
                }
            })
            .collect()
    }

    /// The variables the files set that the environment does not: what a
    /// surface puts in its environment before it reads its options.
    pub fn to_apply(&self) -> Vec<(&'static str, String)> {
        self.settings(|name| std::env::var(name).ok())
            .into_iter()
            .filter(|s| matches!(s.source, Source::Project(_) | Source::User(_)))
            .filter_map(|s| s.value.map(|v| (s.key.env, v)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_environment_wins_over_the_project_which_wins_over_the_user() {
        let dir = tempfile::tempdir().unwrap();
        let project = file(
            dir.path(),
            "repo/wfhost.toml",
            "durability = \"normal\"\nworkspace = \"ws\"\n",
        );
        let user = file(
            dir.path(),
            "user.toml",
            "durability = \"full\"\nexecutor = \"container:img\"\n[serve]\nlocal_agents = 3\n",
        );
        let config = Config {
            project: Some((project.clone(), File::read(&project).unwrap())),
            user: Some((user.clone(), File::read(&user).unwrap())),
        };
        let env = |name: &str| (name == "WFHOST_EXECUTOR").then(|| "local".to_string());
        let got: std::collections::HashMap<&str, (Option<String>, Source)> = config
            .settings(env)
            .into_iter()
            .map(|s| (s.key.name, (s.value, s.source)))
            .collect();
        assert_eq!(
            got["durability"],
            (Some("normal".into()), Source::Project(project.clone()))
        );
        let ws = dir.path().join("repo/ws").display().to_string();
        assert_eq!(got["workspace"], (Some(ws), Source::Project(project)));
        assert_eq!(got["executor"], (Some("local".into()), Source::Environment));
        assert_eq!(
            got["serve.local_agents"],
            (Some("3".into()), Source::User(user))
        );
        assert_eq!(got["home"], (None, Source::BuiltIn));
    }

    #[test]
    fn a_project_file_is_found_above_and_bad_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let project = file(dir.path(), "wfhost.toml", "durability = \"normal\"\n");
        let deep = dir.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(project_file(&deep), Some(project));
        for (text, says) in [
            ("durabilty = \"normal\"\n", "unknown field `durabilty`"),
            ("durability = \"fast\"\n", "durability: `fast` is neither"),
            (
                "[serve]\nlisten = \"here\"\n",
                "serve.listen: `here` is not an ADDR:PORT",
            ),
            ("durability = \n", "wfhost.toml"),
        ] {
            let bad = file(dir.path(), "bad/wfhost.toml", text);
            let e = File::read(&bad).unwrap_err();
            assert!(e.message.contains(says), "{text}: {}", e.message);
            assert!(e.message.contains("bad/wfhost.toml"), "{}", e.message);
        }
    }
}
