//! Starting a command without copying the host.
//!
//! `std::process::Command` with a `pre_exec` hook forks: the kernel copies
//! the page tables of the whole host (wasmtime's reservations, the run's
//! caches) for a child that replaces them at once, and the host then pays
//! copy-on-write faults for what it touches while the child lives. Every
//! local command needs one system call between fork and exec
//! (`PR_SET_CHILD_SUBREAPER`, see [`crate::containment`]), so it cannot
//! take std's `posix_spawn` path.
//!
//! This module does what `posix_spawn` does inside glibc, with that one
//! call added: `clone(CLONE_VM | CLONE_VFORK)` runs [`child_main`] on a
//! stack of its own (mapped, with a guard page) in the host's memory, the
//! host thread waits until the child has called `execve` (or failed to),
//! and nothing is copied. The child makes only system calls — no
//! allocation, no lock — and reports a failure by writing the `errno`
//! into the shared [`ChildArgs`]. Every signal (glibc's own included) is
//! blocked around the clone, and the child resets every handler to its
//! default before it unblocks them, so no host handler ever runs on the
//! child's stack. Like glibc's `execvp`, a file without a `#!` line that
//! the kernel will not run (`ENOEXEC`) is run by `/bin/sh`.
//!
//! The child is a *live command root* from the clone until it is reaped
//! (see [`crate::containment::roots`]): no sweep of another command takes
//! it for a leftover. Its exit is waited for through a pidfd, readable
//! when the process ends; where the kernel refuses pidfds, one thread per
//! command waits for the exit without reaping it.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use crate::containment::roots;

/// What to start.
pub struct SpawnSpec<'a> {
    /// The executable, already resolved.
    pub program: &'a Path,
    /// The arguments, the first being the name the program sees.
    pub argv: &'a [String],
    /// The whole environment of the command.
    pub env: Vec<(&'a OsStr, &'a OsStr)>,
    pub cwd: &'a Path,
    /// A pipe for stdin (else `/dev/null`).
    pub piped_stdin: bool,
}

/// How the end of a command is learnt.
enum Exit {
    /// Readable once the process has ended.
    Pidfd(AsyncFd<OwnedFd>),
    /// Where the kernel refuses pidfds: a thread waits for the exit
    /// (without reaping) and says so here.
    Thread(tokio::sync::oneshot::Receiver<()>),
}

/// A command started by [`spawn`]: the leader of a process group of its
/// own (its pid is the group id) and a child subreaper.
pub struct Spawned {
    pid: i32,
    exit: Exit,
    reaped: bool,
    pub stdin: Option<pipe::Sender>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
}

/// Everything the child needs, prepared before the clone: the child may
/// not allocate.
#[repr(C)]
struct ChildArgs {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    /// `sh PROGRAM ARGS…`, for a program the kernel does not run itself.
    sh_argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    /// Become stdin, stdout and stderr.
    fds: [RawFd; 3],
    /// Written by the child when it fails before `execve` returns.
    errno: libc::c_int,
}

fn cstring(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} holds a NUL byte"),
        )
    })
}

fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just opened and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `fd`, moved to a number above 2 if it is one of the standard ones: a
/// host started with a standard descriptor closed hands that number out
/// again, and in the child one `dup2` would overwrite another's source.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: duplicating a descriptor we own; the copy is ours alone.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

fn null_terminated(strings: &[&CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The C strings of a command, owned while the child may read them.
struct CStrings {
    program: CString,
    cwd: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    sh: CString,
}

impl CStrings {
    fn new(spec: &SpawnSpec<'_>) -> io::Result<CStrings> {
        // Absolute: the child changes directory before it execs.
        let program = std::path::absolute(spec.program)?;
        let env = spec.env.iter().map(|(k, v)| {
            let mut pair = k.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            cstring(&pair, "an environment variable")
        });
        Ok(CStrings {
            program: cstring(program.as_os_str().as_bytes(), "the program path")?,
            cwd: cstring(spec.cwd.as_os_str().as_bytes(), "the working directory")?,
            argv: spec
                .argv
                .iter()
                .map(|a| cstring(a.as_bytes(), "an argument"))
                .collect::<io::Result<_>>()?,
            env: env.collect::<io::Result<_>>()?,
            sh: cstring(b"sh", "")?,
        })
    }
}

/// Start `spec` as a new process group and child subreaper.
pub fn spawn(spec: &SpawnSpec<'_>) -> io::Result<Spawned> {
    let strings = CStrings::new(spec)?;
    let argv_ptrs = null_terminated(&strings.argv.iter().collect::<Vec<_>>());
    let env_ptrs = null_terminated(&strings.env.iter().collect::<Vec<_>>());
    let sh_args: Vec<&CString> = [&strings.sh, &strings.program]
        .into_iter()
        .chain(strings.argv.iter().skip(1))
        .collect();
    let sh_ptrs = null_terminated(&sh_args);

    let (stdin_child, stdin_host) = if spec.piped_stdin {
        let (read, write) = pipe_pair()?;
        (read, Some(write))
    } else {
        (std::fs::File::open("/dev/null")?.into(), None)
    };
    let (stdout_host, stdout_child) = pipe_pair()?;
    let (stderr_host, stderr_child) = pipe_pair()?;
    let stdin_child = above_stdio(stdin_child)?;
    let stdout_child = above_stdio(stdout_child)?;
    let stderr_child = above_stdio(stderr_child)?;

    let mut args = ChildArgs {
        program: strings.program.as_ptr(),
        argv: argv_ptrs.as_ptr(),
        sh_argv: sh_ptrs.as_ptr(),
        envp: env_ptrs.as_ptr(),
        cwd: strings.cwd.as_ptr(),
        fds: [
            stdin_child.as_raw_fd(),
            stdout_child.as_raw_fd(),
            stderr_child.as_raw_fd(),
        ],
        errno: 0,
    };
    let pid = roots::register(|| clone_and_exec(&mut args))?;
    crate::counters::count(&crate::counters::SPAWNS);
    // The child's ends are its own now (or it is gone).
    drop((stdin_child, stdout_child, stderr_child));
    if args.errno != 0 {
        // It exited without running the program: reap it.
        blocking_wait(pid)?;
        roots::unregister(pid);
        return Err(io::Error::from_raw_os_error(args.errno));
    }
    let mut spawned = Spawned {
        pid,
        exit: exit_watch(pid),
        reaped: false,
        stdin: None,
        stdout: None,
        stderr: None,
    };
    spawned.stdin = stdin_host.map(pipe::Sender::from_owned_fd).transpose()?;
    spawned.stdout = Some(pipe::Receiver::from_owned_fd(stdout_host)?);
    spawned.stderr = Some(pipe::Receiver::from_owned_fd(stderr_host)?);
    Ok(spawned)
}

/// How to learn that `pid` (our unreaped child) ended: its pidfd, else a
/// thread that waits for the exit without reaping.
fn exit_watch(pid: i32) -> Exit {
    #[cfg(test)]
    let refused = tests::NO_PIDFD.get();
    #[cfg(not(test))]
    let refused = false;
    if !refused && let Some(fd) = pidfd_open(pid) {
        // SAFETY: an OwnedFd keeps its one descriptor open until dropped.
        match unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) } {
            Ok(fd) => return Exit::Pidfd(fd),
            Err(e) => tracing::debug!(pid, "a pidfd cannot be watched: {e}"),
        }
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let waiter = std::thread::Builder::new()
        .name("wfhost-exit-wait".into())
        .spawn(move || {
            // SAFETY: waiting, without reaping, for our own child.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            loop {
                let r = unsafe {
                    libc::waitid(
                        libc::P_PID,
                        pid as libc::id_t,
                        &mut info,
                        libc::WEXITED | libc::WNOWAIT,
                    )
                };
                if r == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    break;
                }
            }
            let _ = tx.send(());
        });
    if let Err(e) = waiter {
        tracing::warn!(pid, "cannot start a thread to wait for a command: {e}");
    }
    Exit::Thread(rx)
}

/// The size of the child's stack: it runs a handful of system calls.
const CHILD_STACK: usize = 64 * 1024;
/// Below it, a page that faults: an overflow never reaches the heap.
const GUARD: usize = 4096;

/// A mapped stack with a guard page, unmapped when dropped.
struct Stack(*mut libc::c_void);

impl Stack {
    fn new() -> io::Result<Stack> {
        // SAFETY: a fresh private anonymous mapping, then its lowest page
        // made inaccessible.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                GUARD + CHILD_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = Stack(base);
            if libc::mprotect(base, GUARD, libc::PROT_NONE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }
    }

    /// The top (the stack grows down), page aligned.
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: the end of the mapping.
        unsafe { self.0.cast::<u8>().add(GUARD + CHILD_STACK).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used.
        unsafe { libc::munmap(self.0, GUARD + CHILD_STACK) };
    }
}

/// The calling thread's signal mask set to `mask` (all 64 bits: glibc's
/// `sigfillset` leaves out the two signals it keeps for itself, which
/// must not reach the child either). The previous mask.
fn set_signal_mask(mask: u64) -> u64 {
    let mut old: u64 = 0;
    // SAFETY: rt_sigprocmask with 8-byte sets, the kernel's size.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &mask,
            &mut old,
            8usize,
        );
    }
    old
}

/// Clone a child sharing our memory that runs [`child_main`] and execs;
/// returns once it has (or has failed to). Its pid.
fn clone_and_exec(args: &mut ChildArgs) -> io::Result<i32> {
    let stack = Stack::new()?;
    let old = set_signal_mask(!0);
    // SAFETY: the child runs child_main on its own stack with every signal
    // blocked; CLONE_VFORK suspends this thread until it has exec'd or
    // exited, so `args` and the stack outlive its use of them.
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (args as *mut ChildArgs).cast(),
        )
    };
    let error = io::Error::last_os_error();
    set_signal_mask(old);
    drop(stack);
    if pid < 0 {
        return Err(error);
    }
    Ok(pid)
}

/// The child, between clone and exec. Runs on its own stack in the host's
/// memory while the host thread that cloned it waits: only system calls.
extern "C" fn child_main(raw: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `raw` is the ChildArgs the parent keeps alive until we exec
    // or exit (CLONE_VFORK); every pointer in it is valid until then.
    unsafe {
        let args = &mut *raw.cast::<ChildArgs>();
        let fail = |args: &mut ChildArgs| -> ! {
            std::ptr::write_volatile(&mut args.errno, *libc::__errno_location());
            libc::_exit(127)
        };
        reset_signals();
        if libc::setpgid(0, 0) != 0 {
            fail(args);
        }
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            fail(args);
        }
        for (target, fd) in args.fds.into_iter().enumerate() {
            // Every source is above 2 (`above_stdio`), so no dup2 here
            // overwrites a later one's source.
            if libc::dup2(fd, target as RawFd) != target as RawFd {
                fail(args);
            }
        }
        if libc::chdir(args.cwd) != 0 {
            fail(args);
        }
        libc::execve(args.program, args.argv, args.envp);
        if *libc::__errno_location() == libc::ENOEXEC {
            // No `#!` line: a shell script, as `execvp` runs it.
            libc::execve(c"/bin/sh".as_ptr(), args.sh_argv, args.envp);
        }
        fail(args)
    }
}

/// Every signal to its default disposition unless ignored (an ignored
/// signal stays ignored across exec, as with any spawn), SIGPIPE to the
/// default (the Rust runtime ignores it; programs expect it), then the
/// mask emptied.
///
/// # Safety
/// Only in the child, before exec.
unsafe fn reset_signals() {
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for sig in 1..=libc::SIGRTMAX() {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut current) != 0 {
                continue;
            }
            let ignored = current.sa_sigaction == libc::SIG_IGN;
            if current.sa_sigaction != libc::SIG_DFL && (!ignored || sig == libc::SIGPIPE) {
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
    }
    set_signal_mask(0);
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the pid is our unreaped
    // child, so it names that process.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a new descriptor owned by nobody else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

impl Spawned {
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Wait for the process to end and reap it. Cancel-safe: a wait given
    /// up on (a `select!` that took another branch) loses nothing.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_reap()? {
                return Ok(status);
            }
            match &mut self.exit {
                Exit::Pidfd(fd) => fd.readable().await?.clear_ready(),
                Exit::Thread(rx) => {
                    // Sent, or the thread is gone: look again, then at
                    // worst every few milliseconds.
                    if rx.await.is_err() {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                }
            }
        }
    }

    fn try_reap(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.reaped {
            return Err(io::Error::other("the process was already reaped"));
        }
        let mut status = 0;
        // SAFETY: a non-blocking wait for our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if r == self.pid {
            self.mark_reaped();
            return Ok(Some(ExitStatus::from_raw(status)));
        }
        if r == 0 {
            return Ok(None);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => Ok(None),
            _ => {
                // ECHILD: someone else reaped it; its pid is not ours to
                // signal any more.
                self.mark_reaped();
                Err(e)
            }
        }
    }

    fn mark_reaped(&mut self) {
        self.reaped = true;
        roots::unregister(self.pid);
    }
}

fn blocking_wait(pid: i32) -> io::Result<ExitStatus> {
    let mut status = 0;
    loop {
        // SAFETY: a blocking wait for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(ExitStatus::from_raw(status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

impl Drop for Spawned {
    /// A command given up on is killed and reaped, like tokio's
    /// `kill_on_drop`: on a thread if it does not die at once.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        match &self.exit {
            // SAFETY: signalling through the pidfd reaches this process
            // and no other, whatever became of its pid.
            Exit::Pidfd(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    0usize,
                    0u32,
                );
            },
            // SAFETY: our own unreaped child, so the pid is still its.
            Exit::Thread(_) => unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            },
        }
        if matches!(self.try_reap(), Ok(Some(_)) | Err(_)) {
            return;
        }
        let pid = self.pid;
        let reaper = std::thread::Builder::new()
            .name("wfhost-reap".into())
            .spawn(move || {
                let _ = blocking_wait(pid);
                roots::unregister(pid);
            });
        if reaper.is_err() {
            tracing::warn!(pid, "cannot start a thread to reap a killed command");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    thread_local! {
        /// Act as a kernel that refuses pidfds, for this thread's spawns.
        pub(super) static NO_PIDFD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    #[tokio::test]
    async fn without_pidfds_a_wait_given_up_on_again_and_again_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let argv: Vec<String> = ["sh", "-c", "sleep 0.2; exit 7"].map(String::from).to_vec();
        NO_PIDFD.set(true);
        let spawned = spawn(&spec(Path::new("/bin/sh"), &argv, dir.path()));
        NO_PIDFD.set(false);
        let mut child = spawned.unwrap();
        assert!(matches!(child.exit, Exit::Thread(_)));
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.unwrap(),
                _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
            }
        };
        assert_eq!(status.code(), Some(7));
        assert!(child.wait().await.is_err(), "reaped once");
    }

    fn spec<'a>(program: &'a Path, argv: &'a [String], cwd: &'a Path) -> SpawnSpec<'a> {
        SpawnSpec {
            program,
            argv,
            env: vec![(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin"))],
            cwd,
            piped_stdin: true,
        }
    }

    #[tokio::test]
    async fn a_command_runs_with_its_arguments_stdio_directory_and_group() {
        let dir = tempfile::tempdir().unwrap();
        let argv: Vec<String> = [
            "sh",
            "-c",
            "read x; echo \"$x $0 $(pwd) $$\"; ps -o pgid= -p $$ >&2; exit 3",
        ]
        .map(String::from)
        .to_vec();
        let mut child = spawn(&spec(Path::new("/bin/sh"), &argv, dir.path())).unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"hello\n").await.unwrap();
        drop(stdin);
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .await
            .unwrap();
        let status = child.wait().await.unwrap();
        assert_eq!(status.code(), Some(3));
        let pid = child.id();
        let cwd = dir.path().canonicalize().unwrap();
        assert_eq!(out.trim(), format!("hello sh {} {pid}", cwd.display()));
        assert_eq!(err.trim(), pid.to_string(), "its own process group");
    }

    #[tokio::test]
    async fn a_program_that_cannot_start_is_an_error_and_leaves_no_child() {
        let dir = tempfile::tempdir().unwrap();
        let argv = vec!["missing".to_string()];
        let err = spawn(&spec(Path::new("/nonexistent/program"), &argv, dir.path()))
            .err()
            .expect("no such program");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let gone = spawn(&spec(
            Path::new("/bin/true"),
            &argv,
            &dir.path().join("gone"),
        ))
        .err()
        .expect("no such directory");
        assert_eq!(gone.kind(), io::ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn the_child_is_a_subreaper_with_default_signals() {
        let dir = tempfile::tempdir().unwrap();
        // Field 1 of the status line is the mask of ignored signals; SIGPIPE
        // (bit 13) must not be in it. A subreaper's orphan names it parent.
        let script =
            "grep SigIgn /proc/$$/status; (sleep 0.2 & ) ; sleep 0.05; ps -o ppid= -C sleep";
        let argv: Vec<String> = ["sh", "-c", script].map(String::from).to_vec();
        let mut child = spawn(&spec(Path::new("/bin/sh"), &argv, dir.path())).unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        assert!(child.wait().await.unwrap().success());
        let ignored = out
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap();
        let mask = u64::from_str_radix(ignored, 16).unwrap();
        assert_eq!(mask & (1 << (libc::SIGPIPE - 1)), 0, "{out}");
        let pid = child.id().to_string();
        assert!(
            out.lines().skip(1).any(|l| l.trim() == pid),
            "the orphaned sleep is re-parented to the command: {out}"
        );
    }

    #[tokio::test]
    async fn dropping_a_running_command_kills_and_reaps_it() {
        let dir = tempfile::tempdir().unwrap();
        let argv: Vec<String> = ["sleep", "30"].map(String::from).to_vec();
        let child = spawn(&spec(Path::new("/bin/sleep"), &argv, dir.path())).unwrap();
        let pid = child.id() as i32;
        drop(child);
        for _ in 0..200 {
            // SAFETY: probing a pid with signal 0.
            if unsafe { libc::kill(pid, 0) } != 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("the dropped command {pid} is still there");
    }
}
