//! The command line itself: help with examples, options only where they
//! mean something, completions, manual pages.

use super::*;

const COMMANDS: &[&str] = &[
    "run",
    "resume",
    "fork",
    "gates",
    "gate",
    "runs",
    "show",
    "events",
    "export",
    "import",
    "session",
    "gc",
    "agents",
    "validate",
    "inspect",
    "list",
    "schema",
    "completions",
    "man",
];

#[test]
fn every_command_has_examples_in_its_help() {
    let scratch = tempfile::tempdir().unwrap();
    for command in COMMANDS {
        let out = wfhost(&[command, "--help"], scratch.path());
        assert_eq!(out.status.code(), Some(0), "{command}");
        let help = stdout(&out);
        assert!(help.contains("Examples:\n  wfhost"), "{command}: {help}");
    }
}

#[test]
fn store_options_appear_only_where_they_matter() {
    let scratch = tempfile::tempdir().unwrap();
    let help = |c: &str| stdout(&wfhost(&[c, "--help"], scratch.path()));
    for c in ["validate", "inspect", "list", "schema"] {
        let h = help(c);
        assert!(
            !h.contains("--home") && !h.contains("--durability"),
            "{c}: {h}"
        );
    }
    for c in ["runs", "show", "events", "gates", "export", "gc"] {
        let h = help(c);
        assert!(
            h.contains("--home") && !h.contains("--durability"),
            "{c}: {h}"
        );
    }
    for c in ["run", "resume", "fork", "gate", "import"] {
        let h = help(c);
        assert!(
            h.contains("--home") && h.contains("--durability"),
            "{c}: {h}"
        );
    }
}

#[test]
fn completions_and_manual_pages() {
    let scratch = tempfile::tempdir().unwrap();
    let bash = wfhost(&["completions", "bash"], scratch.path());
    assert_eq!(bash.status.code(), Some(0));
    assert!(stdout(&bash).contains("_wfhost()"), "{}", stdout(&bash));
    assert!(stdout(&bash).contains("validate"));
    let bad = wfhost(&["completions", "tcsh"], scratch.path());
    assert_eq!(bad.status.code(), Some(2));

    let man = wfhost(&["man"], scratch.path());
    assert_eq!(man.status.code(), Some(0));
    assert!(
        stdout(&man).starts_with(".ie") || stdout(&man).contains(".TH wfhost"),
        "{}",
        stdout(&man)
    );
    let dir = scratch.path().join("man1");
    let out = wfhost(&["man", "--dir", dir.to_str().unwrap()], scratch.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for page in ["wfhost.1", "wfhost-run.1", "wfhost-gate.1"] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
}
