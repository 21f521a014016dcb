//! Project and user defaults: `wfhost.toml` (found from the current
//! directory up) and the user's `config.toml`, below the flags and the
//! environment, shown by `wfhost config`.

use super::{command, repo, stderr, stdout};

fn config_json(
    cwd: &std::path::Path,
    s: &std::path::Path,
    env: &[(&str, &str)],
) -> serde_json::Value {
    let mut cmd = command(s);
    cmd.current_dir(cwd)
        .env("XDG_CONFIG_HOME", s.join("xdg"))
        .args(["config", "--json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    lines
        .into_iter()
        .map(|l| (l["key"].as_str().unwrap().to_string(), l))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[test]
fn defaults_come_from_the_project_then_the_user_below_the_environment_and_the_flags() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let project = s.join("repo");
    let deep = project.join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::create_dir_all(s.join("xdg/wfhost")).unwrap();
    std::fs::write(
        project.join("wfhost.toml"),
        "durability = \"normal\"\nworkspace = \"work\"\n[serve]\nlocal_agents = 3\n",
    )
    .unwrap();
    std::fs::write(
        s.join("xdg/wfhost/config.toml"),
        "durability = \"full\"\nexecutor = \"container:img\"\n",
    )
    .unwrap();
    let got = config_json(&deep, s, &[]);
    assert_eq!(got["durability"]["value"], "normal", "{got:#}");
    assert_eq!(got["durability"]["source"], "project", "{got:#}");
    assert_eq!(
        got["workspace"]["value"],
        project.join("work").display().to_string(),
        "relative to the file: {got:#}"
    );
    assert_eq!(got["executor"]["value"], "container:img", "{got:#}");
    assert_eq!(got["executor"]["source"], "user", "{got:#}");
    assert_eq!(got["serve.local_agents"]["value"], "3", "{got:#}");
    assert_eq!(got["serve.listen"]["source"], "built-in", "{got:#}");
    // The environment wins over both files.
    let got = config_json(&deep, s, &[("WFHOST_EXECUTOR", "local")]);
    assert_eq!(got["executor"]["source"], "environment", "{got:#}");

    // A run started in the project without -w works in the configured
    // workspace; a flag still wins over the user's executor.
    std::fs::create_dir_all(project.join("work")).unwrap();
    let hello = repo().join("examples/hello/workflow.json");
    let out = command(s)
        .current_dir(&deep)
        .env("XDG_CONFIG_HOME", s.join("xdg"))
        .args(["run", hello.to_str().unwrap(), "--executor", "local"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains(&format!("in {}", project.join("work").display())),
        "{}",
        stdout(&out)
    );
    assert!(project.join("work/notes/hello.txt").exists());
}

#[test]
fn a_bad_configuration_file_stops_commands_naming_the_file_and_place() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    std::fs::write(
        s.join("wfhost.toml"),
        "durability = \"normal\"\ndurabilty = 1\n",
    )
    .unwrap();
    for args in [&["runs"][..], &["config"][..]] {
        let out = command(s)
            .current_dir(s)
            .env("XDG_CONFIG_HOME", s.join("xdg"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "{}: 2:1: unknown field `durabilty`",
                s.join("wfhost.toml").display()
            )),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
