//! wfhost's own state is out of every block's reach: a compiled-cache entry
//! overwritten from outside is recompiled, never run, and a workspace that
//! contains the home (the run store) or the cache is refused.

use super::*;

fn two_workers(dir: &Path) -> PathBuf {
    let path = dir.join("wf.json");
    let wf = serde_json::json!({
        "id": "two", "start_node": "main",
        "nodes": {"main": {"entry_block": "a", "blocks": {
            "a": {"worker": "echo", "config": {"message": "genuine echo"},
                  "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "JUMP:b"}]},
            "b": {"worker": "scripted", "config": {"responses": ["scripted"]},
                  "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}
        }}}
    });
    std::fs::write(&path, wf.to_string()).unwrap();
    path
}

/// `plugin NAME (...): HOW, sha256 PREFIX` lines of `--verbose`.
fn loads(out: &Output) -> Vec<(String, String, String)> {
    stdout(out)
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("plugin ")?;
            let (name, rest) = rest.split_once(' ')?;
            let (_, rest) = rest.split_once("): ")?;
            let (how, digest) = rest.rsplit_once(", sha256 ")?;
            Some((name.to_string(), how.to_string(), digest.to_string()))
        })
        .collect()
}

fn entry(cache: &Path, digest_prefix: &str) -> PathBuf {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(digest_prefix)
        })
        .expect("a cache entry")
}

#[test]
fn a_cache_entry_overwritten_with_another_plugin_is_recompiled_and_the_right_plugin_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let manifest = two_workers(scratch.path());
    let run = |verbose: bool| {
        let mut args = vec!["run", manifest.to_str().unwrap(), "-w"];
        args.push(ws.path().to_str().unwrap());
        if verbose {
            args.push("--verbose");
        }
        wfhost(&args, scratch.path())
    };
    let first = run(true);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let digest = |name: &str| {
        loads(&first)
            .into_iter()
            .find(|(n, _, _)| n == name)
            .unwrap()
            .2
    };
    let cache = scratch.path().join("cache");
    // What a plugin that can write the cache directory would do: put
    // another plugin's compiled code in place of echo's.
    std::fs::copy(
        entry(&cache, &digest("scripted")),
        entry(&cache, &digest("echo")),
    )
    .unwrap();

    let second = run(true);
    // Had scripted's code run as `echo`, echo's config would have failed it.
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let echo = loads(&second)
        .into_iter()
        .find(|(n, _, _)| n == "echo")
        .unwrap();
    assert!(echo.1.contains("failed the integrity check"), "{echo:?}");
    assert!(stdout(&second).contains("genuine echo") || stdout(&second).contains("main.a"));
    let (code, report) = run_report(&manifest, ws.path(), scratch.path());
    assert_eq!(code, Some(0), "{report}");
    assert!(
        report["payload"].to_string().contains("genuine echo"),
        "{report}"
    );
    let third = run(true);
    assert!(
        loads(&third)
            .iter()
            .all(|(_, how, _)| how == "compiled cache hit"),
        "{}",
        stdout(&third)
    );
}

/// Run with a clean environment whose `HOME` is `home`: the defaults
/// (`~/.local/share/wfhost`, `~/.cache/wfhost/components`) apply.
fn run_with_home(home: &Path, manifest: &Path, ws: &Path, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wfhost"));
    for var in [
        "WFHOST_HOME",
        "WFHOST_CACHE_DIR",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "WFHOST_DURABILITY",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home)
        .args([
            "run",
            manifest.to_str().unwrap(),
            "-w",
            ws.to_str().unwrap(),
        ])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_workspace_that_contains_the_home_or_the_cache_is_refused_and_nothing_is_written() {
    let outer = tempfile::tempdir().unwrap();
    let home = outer.path().join("me");
    std::fs::create_dir(&home).unwrap();
    let manifest = two_workers(outer.path());

    // `wfhost run --workspace $HOME` with the default home and cache.
    let out = run_with_home(&home, &manifest, &home, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(".local/share/wfhost") && err.contains("the wfhost home"),
        "{err}"
    );
    assert!(tree(&home).is_empty(), "written: {:?}", tree(&home));

    // The home elsewhere, the cache inside the workspace.
    let out = run_with_home(
        &home,
        &manifest,
        &home,
        &["--home", outer.path().join("h").to_str().unwrap()],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(".cache/wfhost/components") && err.contains("compiled-plugin cache"),
        "{err}"
    );
    assert!(tree(&home).is_empty() && !outer.path().join("h").exists());

    // Both elsewhere: the run goes ahead.
    let out = run_with_home(
        &home,
        &manifest,
        &home,
        &[
            "--home",
            outer.path().join("h").to_str().unwrap(),
            "--no-cache",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn continuing_a_run_with_the_cache_inside_its_workspace_is_refused_and_records_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path();
    let ws = workspace_in(s);
    let manifest = repo().join("examples/review-gate/workflow.json");
    let out = run_workflow(&manifest, &ws, s);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let runs: serde_json::Value =
        serde_json::from_str(&stdout(&wfhost(&["runs", "--json"], s))).unwrap();
    let id = runs[0]["id"].as_str().unwrap().to_string();
    let show = |s: &Path| -> serde_json::Value { shown_with_steps(&["show", &id, "--json"], s) };
    let before = show(s);
    let events = run_events(s, &id).len();
    let at = before["steps"][0]["snapshot"].as_str().unwrap().to_string();
    let inside = ws.join("cache");
    let inside = inside.to_str().unwrap();
    for args in [
        vec![
            "gate",
            id.as_str(),
            "UD-1",
            "approved",
            "--cache-dir",
            inside,
        ],
        vec![
            "fork",
            id.as_str(),
            "--at",
            at.as_str(),
            "--cache-dir",
            inside,
        ],
    ] {
        let out = wfhost(&args, s);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("compiled-plugin cache"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!ws.join("cache").exists());
    }
    assert_eq!(run_events(s, &id).len(), events, "nothing recorded");
    assert_eq!(show(s)["branches"], before["branches"]);
}
