//! `wfhost plugin install` against a hostile registry: a manifest, a
//! referrers index, a signature tag, a token or an error answer of
//! 200 MiB (framed every way HTTP allows, and with a lying length), and a
//! blob that never ends. Each is refused as soon as its cap is passed,
//! with the cap named, and the install's peak memory stays far below
//! what the registry sent.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;

use super::distribution::{User, pack, plugin_source};

/// What the hostile registry answers where it attacks.
const HUGE: u64 = 200 << 20;
/// The install's peak memory must stay under this (it held 222-421 MiB
/// when answers were read whole).
const MAX_RSS_BYTES: u64 = 100 << 20;

/// How a huge answer is framed.
#[derive(Clone, Copy, Debug)]
enum Framing {
    /// `Transfer-Encoding: chunked`, no length.
    Chunked,
    /// An honest `Content-Length` of 200 MiB.
    Declared,
    /// `Content-Length: 1024` and chunked: the length is a lie.
    Lying,
    /// No length and no chunks: the answer ends when the connection does.
    Unframed,
    /// Chunks that never end.
    Endless,
}

/// A real package (manifest, config, layer) to serve.
struct Package {
    digest: String,
    manifest: Vec<u8>,
    blobs: Vec<(String, Vec<u8>)>,
}

impl Package {
    fn packed(scratch: &Path) -> Package {
        let publisher = User::new(&scratch.join("publisher"));
        let source = plugin_source(
            &publisher.project.join("wc"),
            "word-count",
            wfhost_guest_artifacts::EXAMPLE_WORD_COUNT,
            &[],
            "Counts words",
        );
        let layout = publisher.project.join("pkg");
        let digest = pack(&publisher, &source, &layout);
        let blob = |digest: &str| {
            std::fs::read(
                layout
                    .join("blobs/sha256")
                    .join(digest.strip_prefix("sha256:").unwrap()),
            )
            .unwrap()
        };
        let manifest = blob(&digest);
        let parsed: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
        let blobs = [&parsed["config"], &parsed["layers"][0]]
            .iter()
            .map(|d| {
                let d = d["digest"].as_str().unwrap().to_string();
                let bytes = blob(&d);
                (d, bytes)
            })
            .collect();
        Package {
            digest,
            manifest,
            blobs,
        }
    }

    fn hex(&self) -> &str {
        self.digest.strip_prefix("sha256:").unwrap()
    }
}

/// A registry on loopback that serves `package` in every repository and
/// attacks where the repository's name says.
struct Hostile {
    addr: String,
}

impl Hostile {
    fn start(package: Package) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let package = Arc::new(package);
        let me = addr.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (package, me) = (package.clone(), me.clone());
                std::thread::spawn(move || {
                    let _ = serve_connection(stream, &package, &me);
                });
            }
        });
        Hostile { addr }
    }
}

/// Answer requests on one connection until it closes or a huge answer
/// was sent.
fn serve_connection(stream: TcpStream, package: &Package, me: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 || header == "\r\n" {
                break;
            }
        }
        let mut parts = request_line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let path = target.split('?').next().unwrap_or("");
        match answer(path, package, me) {
            Answer::Small(status, headers, body) => {
                write!(
                    out,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{headers}\r\n",
                    body.len()
                )?;
                if method != "HEAD" {
                    out.write_all(&body)?;
                }
            }
            Answer::Huge(status, framing) => return send_huge(&mut out, status, framing),
        }
    }
}

enum Answer {
    Small(&'static str, String, Vec<u8>),
    Huge(&'static str, Framing),
}

fn answer(path: &str, package: &Package, me: &str) -> Answer {
    let not_found = || {
        Answer::Small(
            "404 Not Found",
            "Content-Type: application/json\r\n".into(),
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#.to_vec(),
        )
    };
    if path == "/token" {
        return Answer::Huge("200 OK", Framing::Chunked);
    }
    let Some(rest) = path.strip_prefix("/v2/evil/") else {
        return Answer::Small("200 OK", String::new(), b"{}".to_vec());
    };
    let (case, what) = rest.split_once('/').unwrap_or((rest, ""));
    let hex = package.hex();
    let huge_manifest = |framing| match what {
        "manifests/1.0.0" => Some(Answer::Huge("200 OK", framing)),
        _ => None,
    };
    let attack = match case {
        "manifest-chunked" => huge_manifest(Framing::Chunked),
        "manifest-declared" => huge_manifest(Framing::Declared),
        "manifest-lying" => huge_manifest(Framing::Lying),
        "manifest-unframed" => huge_manifest(Framing::Unframed),
        "error" if what.starts_with("manifests/") => {
            Some(Answer::Huge("404 Not Found", Framing::Chunked))
        }
        "token" if what.starts_with("manifests/") => Some(Answer::Small(
            "401 Unauthorized",
            format!("WWW-Authenticate: Bearer realm=\"http://{me}/token\",service=\"hostile\"\r\n"),
            b"{}".to_vec(),
        )),
        "referrers" if what.starts_with("referrers/") => {
            Some(Answer::Huge("200 OK", Framing::Chunked))
        }
        "tag-schema" if what == format!("manifests/sha256-{hex}") => {
            Some(Answer::Huge("200 OK", Framing::Lying))
        }
        "sig-tag" if what == format!("manifests/sha256-{hex}.sig") => {
            Some(Answer::Huge("200 OK", Framing::Unframed))
        }
        "endless-blob" if what == format!("blobs/{}", package.blobs[1].0) => {
            Some(Answer::Huge("200 OK", Framing::Endless))
        }
        _ => None,
    };
    if let Some(attack) = attack {
        return attack;
    }
    // Everything else is an honest registry's answer, without the
    // referrers API and without signatures.
    if what == "manifests/1.0.0" || what == format!("manifests/{}", package.digest) {
        return Answer::Small(
            "200 OK",
            format!(
                "Content-Type: application/vnd.oci.image.manifest.v1+json\r\nDocker-Content-Digest: {}\r\n",
                package.digest
            ),
            package.manifest.clone(),
        );
    }
    for (digest, bytes) in &package.blobs {
        if what == format!("blobs/{digest}") {
            return Answer::Small(
                "200 OK",
                "Content-Type: application/octet-stream\r\n".into(),
                bytes.clone(),
            );
        }
    }
    not_found()
}

/// Send a 200 MiB (or endless) answer until done or the client hangs up.
fn send_huge(out: &mut TcpStream, status: &str, framing: Framing) -> std::io::Result<()> {
    let head = match framing {
        Framing::Chunked | Framing::Endless => "Transfer-Encoding: chunked\r\n".to_string(),
        Framing::Declared => format!("Content-Length: {HUGE}\r\n"),
        Framing::Lying => "Content-Length: 1024\r\nTransfer-Encoding: chunked\r\n".to_string(),
        Framing::Unframed => "Connection: close\r\n".to_string(),
    };
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{head}\r\n"
    )?;
    let chunk = vec![b' '; 64 << 10];
    let chunked = matches!(
        framing,
        Framing::Chunked | Framing::Lying | Framing::Endless
    );
    let mut sent = 0u64;
    while sent < HUGE || matches!(framing, Framing::Endless) {
        if chunked {
            write!(out, "{:x}\r\n", chunk.len())?;
            out.write_all(&chunk)?;
            out.write_all(b"\r\n")?;
        } else {
            out.write_all(&chunk)?;
        }
        sent += chunk.len() as u64;
    }
    if chunked {
        out.write_all(b"0\r\n\r\n")?;
    }
    Ok(())
}

/// Spawns its arguments, waits for them and prints their peak resident
/// memory in KiB. The launcher is a small process on purpose: Linux
/// carries a process's high-water mark over from the address space it
/// was spawned from (`vfork` shares it until `exec`), so the peak of a
/// command spawned by this test binary would be the test binary's own
/// when its other tests, run as threads by `cargo test`, use more.
const PEAK_OF: &str = r#"
import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ,
    file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"#;

/// `wfhost plugin install REFERENCE --allow-unsigned` as `user`: its exit
/// code, its stderr and its peak resident memory in bytes (an upper
/// bound: it includes the launcher's own few MiB).
fn install(user: &User, reference: &str) -> (Option<i32>, String, u64) {
    let program = super::command(&user.scratch).get_program().to_owned();
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-c", PEAK_OF]).arg(program).args([
        "plugin",
        "install",
        reference,
        "--allow-unsigned",
    ]);
    for (key, value) in super::command(&user.scratch).get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let out = cmd
        .current_dir(&user.project)
        .env("DOCKER_CONFIG", user.scratch.join("docker-config"))
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let said = String::from_utf8_lossy(&out.stdout);
    let (code, kib) = said
        .split_once(' ')
        .unwrap_or_else(|| panic!("the launcher said `{said}`\n{stderr}"));
    let code: i32 = code.trim().parse().unwrap();
    let kib: u64 = kib.trim().parse().unwrap();
    // Linux reports ru_maxrss in KiB.
    ((code >= 0).then_some(code), stderr, kib * 1024)
}

#[test]
fn a_hostile_registry_is_refused_at_each_cap_and_memory_stays_bounded() {
    let scratch = tempfile::tempdir().unwrap();
    let package = Package::packed(scratch.path());
    let (hex, layer) = (package.hex().to_string(), package.blobs[1].clone());
    let registry = Hostile::start(package);
    let at = |case: &str| format!("http://{}/v2/evil/{case}", registry.addr);
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "manifest-chunked",
            vec![format!(
                "the manifest at {}/manifests/1.0.0 is larger than the limit of 4 MiB",
                at("manifest-chunked")
            )],
        ),
        (
            "manifest-declared",
            vec![format!(
                "the manifest at {}/manifests/1.0.0 is larger than the limit of 4 MiB (it declared {HUGE} bytes)",
                at("manifest-declared")
            )],
        ),
        (
            "manifest-lying",
            vec![format!(
                "the manifest at {}/manifests/1.0.0 is larger than the limit of 4 MiB",
                at("manifest-lying")
            )],
        ),
        (
            "manifest-unframed",
            vec![format!(
                "the manifest at {}/manifests/1.0.0 is larger than the limit of 4 MiB",
                at("manifest-unframed")
            )],
        ),
        (
            "referrers",
            vec![
                format!(
                    "the referrers index at {}/referrers/sha256:{hex}?artifactType=",
                    at("referrers")
                ),
                "is larger than the limit of 4 MiB".into(),
            ],
        ),
        (
            "tag-schema",
            vec![format!(
                "the manifest at {}/manifests/sha256-{hex} is larger than the limit of 4 MiB",
                at("tag-schema")
            )],
        ),
        (
            "sig-tag",
            vec![format!(
                "the manifest at {}/manifests/sha256-{hex}.sig is larger than the limit of 4 MiB",
                at("sig-tag")
            )],
        ),
        (
            "endless-blob",
            vec![
                format!(
                    "blob {} at {}/blobs/{} is larger than the limit of {}",
                    layer.0,
                    at("endless-blob"),
                    layer.0,
                    wfhost_core::bounded_read::human_size(layer.1.len() as u64)
                ),
                "the package was altered".into(),
            ],
        ),
        (
            "token",
            vec![format!(
                "the token answer of http://{}/token?scope=repository%3Aevil%2Ftoken%3Apull&service=hostile is larger than the limit of 256 KiB",
                registry.addr
            )],
        ),
        (
            "error",
            vec![format!(
                "the error answer of {}/manifests/1.0.0 is larger than the limit of 64 KiB",
                at("error")
            )],
        ),
    ];
    for (case, says) in cases {
        let user = User::new(&scratch.path().join(case));
        let reference = format!("oci://{}/evil/{case}:1.0.0", registry.addr);
        let started = std::time::Instant::now();
        let (code, stderr, peak) = install(&user, &reference);
        eprintln!("{case}: peak {} MiB; {}", peak >> 20, stderr.trim());
        assert_eq!(code, Some(2), "{case}: refused\n{stderr}");
        for said in &says {
            assert!(
                stderr.contains(said.as_str()),
                "{case}: expected `{said}` in:\n{stderr}"
            );
        }
        assert_eq!(
            stderr.trim().lines().count(),
            1,
            "{case}: one line\n{stderr}"
        );
        assert!(
            peak < MAX_RSS_BYTES,
            "{case}: the install's peak memory was {} MiB\n{stderr}",
            peak >> 20
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{case}: took {:?}",
            started.elapsed()
        );
        user.assert_nothing_installed();
    }
}
