//! `wfhost serve` under connection abuse, as a process with the common
//! open-file limit of 1,024: a flood of idle connections does not keep
//! a client with a token out, and the server still stops gracefully.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::command;

const OPEN_FILES: u64 = 1024;

/// `wfhost serve` with tokens, its open-file limit set to [`OPEN_FILES`];
/// the child and its address.
fn serve_limited(scratch: &std::path::Path, token: &str) -> (std::process::Child, String) {
    let tokens = scratch.join("tokens.json");
    std::fs::write(
        &tokens,
        format!(r#"{{"clients": ["{token}"], "agents": []}}"#),
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut cmd = command(scratch);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--local-agents", "0"])
        .arg("--auth-token-file")
        .arg(&tokens)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: OPEN_FILES,
                rlim_max: OPEN_FILES,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let addr = super::serve::served_address(&mut child);
    (child, addr)
}

/// A connection from the loopback address `from` (all of 127.0.0.0/8 is
/// loopback: many peers on one machine).
fn connect_from(rt: &tokio::runtime::Runtime, from: &str, addr: &str) -> TcpStream {
    let addr = addr.parse().unwrap();
    let from = format!("{from}:0").parse().unwrap();
    let stream = rt
        .block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(from)?;
            socket.connect(addr).await
        })
        .unwrap()
        .into_std()
        .unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// `GET /v1/health` with the token, waiting at most `wait`; its status.
fn health(addr: &str, token: &str, wait: Duration) -> Result<u16, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(wait)).unwrap();
    write!(
        s,
        "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).map_err(|e| e.to_string())?;
    raw.get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {raw:?}"))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Room in this test process for the flood's sockets.
fn raise_own_open_file_limit(to: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < to {
            limit.rlim_cur = to.min(limit.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
    assert!(
        limit.rlim_cur >= to,
        "this test needs {to} open files (ulimit -Hn is {})",
        limit.rlim_max
    );
}

#[test]
fn idle_connections_beyond_the_open_file_limit_do_not_keep_a_token_holder_out() {
    raise_own_open_file_limit(4096);
    let scratch = tempfile::tempdir().unwrap();
    let token = "t".repeat(40);
    let (mut child, addr) = serve_limited(scratch.path(), &token);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    // 1,100 connections that never send a byte, from eleven peers.
    let flood: Vec<TcpStream> = (0..1100)
        .map(|i| connect_from(&rt, &format!("127.0.0.{}", 2 + i % 11), &addr))
        .collect();
    for _ in 0..3 {
        let started = Instant::now();
        let answered = health(&addr, &token, Duration::from_secs(5));
        assert_eq!(answered, Ok(200), "after {:?}", started.elapsed());
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "answered after {:?}",
            started.elapsed()
        );
    }
    // The flood holds no more than the cap: descriptors are left.
    let fds = open_fds(child.id());
    assert!(
        fds < OPEN_FILES as usize - 100,
        "the server holds {fds} descriptors"
    );
    // Stopping is still graceful with the flood open: the server exits at
    // once, successfully.
    let stopping = Instant::now();
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if stopping.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("the server did not stop within 10 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    drop(flood);
}
