//! A test guest for the sandbox. The block config is `{"ops": [...]}`; each
//! op runs in order and appends a `PROBE` segment whose content is
//! `ok` / `ok: <detail>` or `err: <error>`, so tests can assert what the
//! guest itself observed, not only what landed on disk.

use serde::Deserialize;
use wfhost_sdk::prelude::*;

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op {
    Write {
        path: String,
        content: String,
    },
    Read {
        path: String,
    },
    Mkdir {
        path: String,
    },
    Remove {
        path: String,
    },
    Symlink {
        target: String,
        link: String,
    },
    Rename {
        from: String,
        to: String,
    },
    /// A hard link `to` of `from` (a link itself, never what it points to).
    HardLink {
        from: String,
        to: String,
    },
    List {
        path: String,
    },
    /// Append `chunks` chunks of `chunk_bytes` bytes to `path`, one write
    /// each (a guest filling the disk).
    Fill {
        path: String,
        chunk_bytes: usize,
        chunks: usize,
    },
    /// Create `count` small files named `<prefix><n>`.
    ManyFiles {
        prefix: String,
        count: usize,
    },
    Env,
    Print {
        stdout: String,
        stderr: String,
    },
    Log {
        message: String,
    },
    /// Loop forever.
    Spin,
    /// Allocate and touch this many MiB.
    Alloc {
        mib: usize,
    },
    Panic {
        message: String,
    },
    Fail {
        code: String,
        message: String,
    },
    /// Return a payload segment of this many bytes.
    Huge {
        bytes: usize,
    },
    /// Return a payload segment that is not valid UTF-8 (what a buggy
    /// non-Rust guest could send).
    BadUtf8,
    /// End the process with `std::process::exit(code)` instead of returning.
    Exit {
        code: i32,
    },
    /// Recurse until the stack is exhausted.
    Recurse,
    /// Report the run's inputs as the SDK reads them (`ctx.inputs()`).
    Inputs,
}

/// Recursion the optimiser cannot turn into a loop.
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 64]);
    recurse(depth + 1) + frame[depth as usize % 64]
}

#[derive(Deserialize)]
struct Config {
    ops: Vec<Op>,
}

fn report<T: std::fmt::Debug>(r: std::io::Result<T>) -> String {
    match r {
        Ok(v) => format!("ok: {v:?}"),
        Err(e) => format!("err: {e}"),
    }
}

/// `std::os::wasi::fs::symlink_path` is unstable; wasi-libc's `symlink` is
/// what it calls.
#[cfg(target_arch = "wasm32")]
fn symlink(target: &str, link: &str) -> std::io::Result<()> {
    use std::ffi::{CString, c_char, c_int};
    unsafe extern "C" {
        fn symlink(target: *const c_char, link: *const c_char) -> c_int;
    }
    let (t, l) = (CString::new(target)?, CString::new(link)?);
    // SAFETY: both pointers are valid NUL-terminated strings for the call.
    if unsafe { symlink(t.as_ptr(), l.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn symlink(target: &str, link: &str) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

fn fill(path: &str, chunk_bytes: usize, chunks: usize) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let chunk = vec![b'x'; chunk_bytes];
    for _ in 0..chunks {
        file.write_all(&chunk)?;
    }
    Ok(())
}

pub struct Probe;

impl Worker for Probe {
    fn run(ctx: BlockContext, mut payload: Payload) -> Result<WorkerOutput, PluginError> {
        let config: Config = ctx.config()?;
        for op in config.ops {
            let outcome = match op {
                Op::Write { path, content } => report(std::fs::write(&path, content)),
                Op::Read { path } => report(std::fs::read_to_string(&path)),
                Op::Mkdir { path } => report(std::fs::create_dir_all(&path)),
                Op::Remove { path } => report(std::fs::remove_file(&path)),
                Op::Symlink { target, link } => report(symlink(&target, &link)),
                Op::Rename { from, to } => report(std::fs::rename(&from, &to)),
                Op::Fill {
                    path,
                    chunk_bytes,
                    chunks,
                } => report(fill(&path, chunk_bytes, chunks)),
                Op::ManyFiles { prefix, count } => {
                    report((0..count).try_for_each(|n| std::fs::write(format!("{prefix}{n}"), "x")))
                }
                Op::HardLink { from, to } => report(std::fs::hard_link(&from, &to)),
                Op::List { path } => report(std::fs::read_dir(&path).map(|d| {
                    let mut names: Vec<String> = d
                        .filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect();
                    names.sort();
                    names
                })),
                Op::Env => format!("ok: {:?}", std::env::vars().collect::<Vec<_>>()),
                Op::Print { stdout, stderr } => {
                    println!("{stdout}");
                    eprintln!("{stderr}");
                    "ok".to_string()
                }
                Op::Log { message } => {
                    log::info(&message);
                    "ok".to_string()
                }
                Op::Spin => {
                    let mut n: u64 = 0;
                    loop {
                        n = std::hint::black_box(n.wrapping_add(1));
                    }
                }
                Op::Alloc { mib } => {
                    let mut blocks = Vec::new();
                    for _ in 0..mib {
                        blocks.push(vec![1u8; 1 << 20]);
                    }
                    format!("ok: {}", std::hint::black_box(blocks).len())
                }
                Op::Panic { message } => panic!("{message}"),
                Op::Fail { code, message } => return Err(PluginError::new(code, message)),
                Op::Huge { bytes } => "x".repeat(bytes),
                // SAFETY: deliberately not UTF-8; the string is only handed
                // to the host, which must refuse it, never used as `str`.
                Op::BadUtf8 => unsafe { String::from_utf8_unchecked(vec![b'o', b'k', 0xff, 0xfe]) },
                Op::Exit { code } => std::process::exit(code),
                Op::Recurse => format!("ok: {}", recurse(0)),
                Op::Inputs => {
                    let inputs: serde_json::Map<String, serde_json::Value> = ctx.inputs()?;
                    format!("ok: {}", serde_json::Value::Object(inputs))
                }
            };
            payload.push(segment("PROBE", outcome));
        }
        Ok(WorkerOutput::new(payload, "SIGNAL:SUCCESS"))
    }
}

export_worker!(Probe);
