//! What a local command costs the host, counted rather than timed: one
//! process started per command, and a bounded number of `/proc` reads that
//! does not grow with the processes on the machine. One test, alone in
//! its process, so that the process-wide counters are its own.

use std::os::unix::process::CommandExt;
use std::path::Path;

use wfhost_core::policy::exec::{ExecCommand, ExecSpec};
use wfhost_exec::{BundleMeta, ExecRequest, counters, run_local};

fn request(dir: &Path, bundle: &str, commands: usize) -> ExecRequest {
    let true_cmd = ExecCommand {
        argv: vec!["true".into()],
        cwd: None,
        env: vec![],
    };
    ExecRequest {
        spec: ExecSpec {
            commands: vec![true_cmd; commands],
            allow_shell: false,
        },
        workdir: dir.to_path_buf(),
        bundle_dir: dir.join(".output/exec").join(bundle),
        env: vec![],
        meta: BundleMeta {
            agent_id: "test-host".into(),
            run_id: "run-20260101-000000-000e01".parse().unwrap(),
            stage_id: "main.build".into(),
            step: 1,
            attempt: 1,
        },
        deadline: None,
        output_cap: 1 << 20,
        stdin: None,
        mask: Default::default(),
    }
}

/// (spawns, /proc reads) of running `commands` commands in one block.
async fn cost(dir: &Path, bundle: &str, commands: usize) -> (u64, u64) {
    let (spawns, reads) = (counters::spawns(), counters::proc_reads());
    let outcome = run_local(&request(dir, bundle, commands)).await.unwrap();
    assert!(outcome.succeeded, "{outcome:?}");
    (counters::spawns() - spawns, counters::proc_reads() - reads)
}

/// The most `/proc` files one short command may read: its first process's
/// start time, the host's threads' children lists and their children, and
/// the check that its first process is gone.
const PROC_READS_PER_COMMAND: u64 = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_costs_one_spawn_and_proc_reads_that_do_not_grow_with_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let (spawns, reads) = cost(dir.path(), "one", 1).await;
    assert_eq!(spawns, 1, "one process per command");
    assert!(
        reads <= PROC_READS_PER_COMMAND,
        "{reads} /proc reads for one command"
    );

    let (spawns, many_reads) = cost(dir.path(), "hundred", 100).await;
    assert_eq!(spawns, 100);
    assert!(
        many_reads <= 100 * PROC_READS_PER_COMMAND,
        "{many_reads} /proc reads for 100 commands"
    );

    // Two hundred more processes on the machine (in a group of this test's
    // own, killed at the end) change nothing.
    let numeric = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            })
            .count()
    };
    let before = numeric();
    let mut crowd = std::process::Command::new("sh");
    crowd
        .args(["-c", "for i in $(seq 200); do sleep 60 & done; wait"])
        .process_group(0);
    let mut crowd = crowd.spawn().unwrap();
    let group = crowd.id() as i32;
    while numeric() < before + 200 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (_, crowded_reads) = cost(dir.path(), "crowded", 1).await;
    // SAFETY: the group this test created.
    unsafe { libc::killpg(group, libc::SIGKILL) };
    let _ = crowd.wait();
    assert!(
        crowded_reads <= reads + 4,
        "{crowded_reads} /proc reads with 200 more processes, {reads} without"
    );
}
