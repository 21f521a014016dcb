//! Containment of a command's whole process tree.
//!
//! A command runs in a process group of its own, but a process can leave
//! its group and session (`setsid`, a daemon) and outlive the command.
//! Three things keep every descendant in reach:
//!
//! - the command's first process is made a *child subreaper*
//!   (`PR_SET_CHILD_SUBREAPER`) before it starts, so while it lives every
//!   orphan below it is re-parented to it and stays in its tree;
//! - the host is a subreaper too, so what is orphaned when the command's
//!   first process exits comes to the host rather than to init;
//! - [`Tree`] looks at the command's tree while it runs and remembers
//!   every descendant it sees (pid and start time, so a reused pid is
//!   never mistaken for one).
//!
//! Only the processes concerned are read: a tree is followed down through
//! the kernel's per-thread `children` lists, and the host's own children
//! are read the same way, so what a command costs does not grow with the
//! number of processes on the machine. Where the kernel keeps no such
//! lists (built without `CONFIG_PROC_CHILDREN`), one scan of `/proc` per
//! look stands in for them.
//!
//! When the command ends, [`Tree::sweep`] kills every remembered process
//! that still exists, every process below them, and every child the host
//! was handed (started after the command, in another process group or
//! session, and not a live command's first process: see [`roots`]), then
//! reaps them. Once the first process is gone, everything left of its tree
//! comes to the host, whose list of children only the host itself
//! shortens, so the rounds of the sweep converge on an empty tree. This
//! holds because the host starts nothing in a group of its own but
//! commands. Linux only; elsewhere the sweep is a no-op and the process
//! group kill is what remains.

use std::collections::{HashMap, HashSet};

use crate::counters;

/// The live command roots: every process [`crate::spawn::spawn`] started
/// and nobody has reaped yet. A sweep never takes one for a leftover (it
/// may be another command's, running beside), and never reaps one.
pub(crate) mod roots {
    use std::collections::HashSet;
    use std::sync::{Mutex, MutexGuard};

    static LIVE: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

    pub(crate) struct Live(MutexGuard<'static, Option<HashSet<i32>>>);

    impl Live {
        pub(crate) fn contains(&self, pid: &i32) -> bool {
            self.0.as_ref().is_some_and(|s| s.contains(pid))
        }
    }

    /// The set, locked: no command starts while it is held.
    pub(crate) fn lock() -> Live {
        Live(LIVE.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Start a command with `start` (which returns its pid) and note it,
    /// under the lock.
    pub(crate) fn register(start: impl FnOnce() -> std::io::Result<i32>) -> std::io::Result<i32> {
        let mut live = lock();
        let pid = start()?;
        live.0.get_or_insert_with(HashSet::new).insert(pid);
        Ok(pid)
    }

    /// `pid` was reaped.
    pub(crate) fn unregister(pid: i32) {
        if let Some(set) = lock().0.as_mut() {
            set.remove(&pid);
        }
    }
}

/// One process, as `/proc/<pid>/stat` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
    sid: i32,
    /// Clock ticks after boot: with the pid, the identity of a process.
    start: u64,
}

/// Parse `/proc/<pid>/stat`: `pid (comm) state ppid pgrp session … starttime`.
/// The command name may hold spaces and parentheses: fields are counted
/// from the last `)`.
fn parse_stat(text: &str) -> Option<Proc> {
    let pid = text.split_once(' ')?.0.parse().ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // rest[0] is the state (field 3); starttime is field 22.
    Some(Proc {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        sid: fields.get(3)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every process on the host (those that vanish while read are skipped).
fn processes() -> Vec<Proc> {
    counters::count(&counters::PROC_READS);
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| {
            counters::count(&counters::PROC_READS);
            std::fs::read_to_string(e.path().join("stat")).ok()
        })
        .filter_map(|text| parse_stat(&text))
        .collect()
}

/// Whether the kernel lists each task's children
/// (`/proc/<pid>/task/<tid>/children`).
fn children_lists() -> bool {
    static LISTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LISTS.get_or_init(|| {
        let me = std::process::id();
        std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists()
    })
}

/// The children of `pid`, from the lists of all its threads (a child
/// belongs to the thread that started it). Empty once the process is gone;
/// `None` if a list did not fit one read.
///
/// Each list is read with a single `read`: the kernel resumes a list from
/// the last child it handed out, and a child reaped between two reads
/// would make it skip live ones.
fn listed_children(pid: i32) -> Option<Vec<i32>> {
    use std::io::Read;
    counters::count(&counters::PROC_READS);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Some(Vec::new());
    };
    let mut children = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    for task in tasks.flatten() {
        counters::count(&counters::PROC_READS);
        let Ok(mut file) = std::fs::File::open(task.path().join("children")) else {
            continue;
        };
        let Ok(n) = file.read(&mut buf) else {
            continue;
        };
        if n == buf.len() {
            return None;
        }
        let text = String::from_utf8_lossy(&buf[..n]);
        children.extend(
            text.split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok()),
        );
    }
    Some(children)
}

/// Where the facts about processes come from for one look: the children
/// lists (only the processes concerned are read) or, without them, one
/// scan of all of `/proc`.
enum View {
    Lists,
    Scan {
        procs: HashMap<i32, Proc>,
        children: HashMap<i32, Vec<Proc>>,
    },
}

impl View {
    fn new() -> View {
        if children_lists() {
            return View::Lists;
        }
        let all = processes();
        let mut children: HashMap<i32, Vec<Proc>> = HashMap::new();
        for p in &all {
            children.entry(p.ppid).or_default().push(*p);
        }
        View::Scan {
            procs: all.into_iter().map(|p| (p.pid, p)).collect(),
            children,
        }
    }

    /// The process `pid`, if it exists.
    fn proc(&self, pid: i32) -> Option<Proc> {
        match self {
            View::Lists => read_stat(pid).map(|(p, _)| p),
            View::Scan { procs, .. } => procs.get(&pid).copied(),
        }
    }

    /// The children of `pid` that still exist.
    fn children(&self, pid: i32) -> Vec<Proc> {
        match self {
            View::Lists => match listed_children(pid) {
                Some(listed) => listed
                    .into_iter()
                    .filter_map(|c| read_stat(c).map(|(p, _)| p))
                    .filter(|p| p.ppid == pid)
                    .collect(),
                // More children than one read holds: the slow way.
                None => processes().into_iter().filter(|p| p.ppid == pid).collect(),
            },
            View::Scan { children, .. } => children.get(&pid).cloned().unwrap_or_default(),
        }
    }

    /// The processes below the roots (not the roots themselves).
    fn below(&self, roots: &[i32]) -> Vec<Proc> {
        let mut found = Vec::new();
        let mut queue: Vec<i32> = roots.to_vec();
        let mut visited: HashSet<i32> = roots.iter().copied().collect();
        while let Some(pid) = queue.pop() {
            for child in self.children(pid) {
                if visited.insert(child.pid) {
                    found.push(child);
                    queue.push(child.pid);
                }
            }
        }
        found
    }
}

/// Make this process a child subreaper (once). Returns whether it is one.
pub fn host_is_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag of
        // this process.
        *ONCE.get_or_init(|| unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 })
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// For `pre_exec`: make the command's first process a subreaper of its
/// own descendants. Async-signal-safe (one system call).
pub fn make_subreaper() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    // SAFETY: as above; called in the forked child before exec.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The descendants of one command seen so far.
#[derive(Debug)]
pub struct Tree {
    root: i32,
    /// The first process's start time, so its pid is never mistaken for
    /// a later process's.
    root_start: Option<u64>,
    seen: HashMap<i32, u64>,
    swept: bool,
}

impl Tree {
    pub fn new(root: u32) -> Tree {
        host_is_subreaper();
        let root = root as i32;
        Tree {
            root,
            root_start: read_stat(root).map(|(p, _)| p.start),
            seen: HashMap::new(),
            swept: false,
        }
    }

    /// Remember the command's current descendants.
    pub fn observe(&mut self) {
        for p in View::new().below(&[self.root]) {
            self.seen.insert(p.pid, p.start);
        }
    }

    /// How many descendants were seen (for tests and reports).
    pub fn seen(&self) -> usize {
        self.seen.len()
    }

    /// Kill and reap everything the command left behind. Idempotent.
    pub fn sweep(&mut self) {
        if self.swept {
            return;
        }
        self.swept = true;
        let me = std::process::id() as i32;
        // SAFETY: getsid and getpgid of this process have no preconditions.
        let (my_sid, my_pgid) = unsafe { (libc::getsid(0), libc::getpgid(0)) };
        // Rounds: killing a process can orphan more, which come to us.
        for _ in 0..8 {
            let view = View::new();
            let mut targets: Vec<Proc> = self
                .seen
                .iter()
                .filter_map(|(pid, start)| view.proc(*pid).filter(|p| p.start == *start))
                .collect();
            // Children handed to the host from a command's tree: every
            // command runs in a group of its own, and the host starts
            // nothing else outside its own group or session, so a child in
            // another group or session, started after this command, that
            // is no live command's first process is a leftover. Read under
            // the roots' lock, so that a command starting meanwhile is not
            // taken for one.
            let since = self.root_start.unwrap_or(0);
            {
                let live = roots::lock();
                targets.extend(view.children(me).into_iter().filter(|p| {
                    (p.pgid != my_pgid || p.sid != my_sid)
                        && p.start >= since
                        && p.pid != me
                        && !live.contains(&p.pid)
                }));
            }
            // Still below the command's first process: it may be dying
            // (killed a moment ago), its children not yet handed on.
            if let Some(start) = self.root_start
                && view.proc(self.root).is_some_and(|p| p.start == start)
            {
                targets.extend(view.below(&[self.root]));
            }
            let roots: Vec<i32> = targets.iter().map(|p| p.pid).collect();
            targets.extend(view.below(&roots));
            {
                let live = roots::lock();
                targets.retain(|p| p.pid != me && p.pid > 1 && !live.contains(&p.pid));
            }
            if targets.is_empty() {
                break;
            }
            for p in &targets {
                // SAFETY: signalling a process identified by pid and start
                // time a moment ago; ESRCH is fine.
                unsafe {
                    libc::kill(p.pid, libc::SIGKILL);
                }
                self.seen.insert(p.pid, p.start);
            }
            reap(&targets, me);
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.sweep();
    }
}

/// Reap those of `killed` that are (or become) our children, giving each
/// a moment to die; those another process reaps are left to it.
fn reap(killed: &[Proc], me: i32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    let mut pending: Vec<i32> = killed.iter().map(|p| p.pid).collect();
    while !pending.is_empty() && std::time::Instant::now() < deadline {
        pending.retain(|&pid| {
            // SAFETY: a non-blocking wait for one pid.
            let r = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
            if r == pid {
                return false; // reaped
            }
            // Still ours and not yet dead, or dying on its way to us?
            match read_stat(pid) {
                None => false,
                Some((p, state)) => p.ppid == me || state != 'Z',
            }
        });
        if !pending.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// A process and its state letter, if it exists.
fn read_stat(pid: i32) -> Option<(Proc, char)> {
    counters::count(&counters::PROC_READS);
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = text[text.rfind(')')? + 2..].chars().next()?;
    Some((parse_stat(&text)?, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let line = "4242 (a) b (c)) S 4000 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 100 0 0";
        let p = parse_stat(line).unwrap();
        assert_eq!(
            p,
            Proc {
                pid: 4242,
                ppid: 4000,
                pgid: 4242,
                sid: 4242,
                start: 98765
            }
        );
    }

    #[test]
    fn descendants_are_found_through_every_generation() {
        let p = |pid, ppid| Proc {
            pid,
            ppid,
            pgid: 0,
            sid: 0,
            start: 1,
        };
        let procs = [p(10, 1), p(11, 10), p(12, 11), p(13, 1), p(14, 12)];
        let mut children: HashMap<i32, Vec<Proc>> = HashMap::new();
        for p in procs {
            children.entry(p.ppid).or_default().push(p);
        }
        let view = View::Scan {
            procs: procs.iter().map(|p| (p.pid, *p)).collect(),
            children,
        };
        let mut found: Vec<i32> = view.below(&[10]).iter().map(|p| p.pid).collect();
        found.sort();
        assert_eq!(found, [11, 12, 14]);
    }
}
