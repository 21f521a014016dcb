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

#[test]
fn manual_pages_have_examples_exit_status_environment_and_files() {
    let scratch = tempfile::tempdir().unwrap();
    let sections = [
        ".SH EXAMPLES",
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        ".SH FILES",
    ];
    let man = wfhost(&["man"], scratch.path());
    assert_eq!(man.status.code(), Some(0));
    let top = stdout(&man);
    for section in sections {
        assert!(top.contains(section), "wfhost.1: no {section}");
    }
    for word in [
        "\\fB130\\fR",
        "\\fBWFHOST_HOME\\fR",
        "\\fBNO_COLOR\\fR",
        "wfhost.db",
    ] {
        assert!(top.contains(word), "wfhost.1: no {word}");
    }
    assert!(!top.contains(".SH EXTRA"), "{top}");
    let dir = scratch.path().join("man1");
    let out = wfhost(&["man", "--dir", dir.to_str().unwrap()], scratch.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for page in ["wfhost.1", "wfhost-run.1", "wfhost-man.1"] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        for section in sections {
            assert!(text.contains(section), "{page}: no {section}");
        }
        assert!(!text.contains(".SH EXTRA"), "{page}");
    }
    let run = std::fs::read_to_string(dir.join("wfhost-run.1")).unwrap();
    assert!(
        run.contains("wfhost run examples/hello/workflow.json \\-\\-workspace /tmp/hello"),
        "{run}"
    );
    // The man command has its description (in its page and its help).
    let man_page = std::fs::read_to_string(dir.join("wfhost-man.1")).unwrap();
    assert!(man_page.contains("Print the manual page"), "{man_page}");
    let help = stdout(&wfhost(&["man", "--help"], scratch.path()));
    assert!(help.starts_with("Print the manual page"), "{help}");
}

/// A reader that goes away (`wfhost … | head`) ends wfhost quietly with
/// the status a shell shows for a broken pipe, not a panic.
#[test]
fn a_closed_stdout_ends_wfhost_quietly() {
    use std::os::fd::FromRawFd;
    let scratch = tempfile::tempdir().unwrap();
    let mut fds = [0; 2];
    // SAFETY: pipe fills the two descriptors it is given.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors are ours; the read end is closed at once.
    let (read, write) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    drop(read);
    let out = command(scratch.path())
        .args(["inspect"])
        .arg(repo().join("examples/hello/workflow.json"))
        .stdout(write)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}
