//! `wfhost serve --tls-cert --tls-key` with remote `wfhost agent`s over
//! https, against a CA each test makes with the `openssl` CLI (curl
//! starts the runs). Skipped without openssl or curl, unless
//! `WFHOST_REQUIRE_SERVICES=1`.

use super::leases::chain;
use super::serve::{Served, serve_with};
use super::*;
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The test's PKI: a CA, a server certificate for `localhost` and
/// 127.0.0.1 and a client certificate it signed, and an unrelated CA.
pub(super) struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// None (the test is skipped) without openssl or curl.
    pub(super) fn make(scratch: &Path) -> Option<Pki> {
        let have = |tool: &str, arg: &str| {
            Command::new(tool)
                .arg(arg)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !have("curl", "--version") || !have("openssl", "version") {
            assert!(
                std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "openssl and curl are required"
            );
            eprintln!("skipped: no openssl or curl");
            return None;
        }
        let pki = Pki {
            dir: scratch.join("pki"),
        };
        std::fs::create_dir_all(&pki.dir).unwrap();
        pki.ca("ca");
        pki.ca("other-ca");
        pki.leaf(
            "server",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        );
        pki.leaf(
            "agent",
            "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
        );
        Some(pki)
    }

    pub(super) fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
    }

    fn key_args(name: &str) -> [String; 7] {
        [
            "-newkey".into(),
            "ec".into(),
            "-pkeyopt".into(),
            "ec_paramgen_curve:P-256".into(),
            "-nodes".into(),
            "-keyout".into(),
            format!("{name}.key"),
        ]
    }

    fn ca(&self, name: &str) {
        let mut args: Vec<String> = vec!["req".into(), "-x509".into()];
        args.extend(Self::key_args(name));
        let subject = format!("/CN=wfhost test {name}");
        let out = format!("{name}.pem");
        args.extend(
            [
                "-out",
                &out,
                "-days",
                "2",
                "-subj",
                &subject,
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]
            .map(String::from),
        );
        self.openssl(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// A certificate `ca` signs, with the extensions `ext`.
    fn leaf(&self, name: &str, ext: &str) {
        let mut args: Vec<String> = vec!["req".into()];
        args.extend(Self::key_args(name));
        let (csr, subject) = (format!("{name}.csr"), format!("/CN={name}"));
        args.extend(["-out", &csr, "-subj", &subject].map(String::from));
        self.openssl(&args.iter().map(String::as_str).collect::<Vec<_>>());
        std::fs::write(self.dir.join(format!("{name}.ext")), ext).unwrap();
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &format!("{name}.pem"),
            "-extfile",
            &format!("{name}.ext"),
        ]);
    }

    /// `wfhost serve` over TLS with the server certificate, and `extra`.
    fn serve(&self, scratch: &Path, extra: &[&str]) -> Served {
        let (cert, key) = (self.path("server.pem"), self.path("server.key"));
        let mut args = vec![
            "--local-agents",
            "0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ];
        args.extend(extra);
        serve_with(scratch, &args)
    }

    /// `method` to the served API over https (with the client certificate,
    /// which a server without --tls-client-ca does not ask for).
    fn api(&self, served: &Served, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let port = served.addr.rsplit(':').next().unwrap();
        let mut curl = Command::new("curl");
        curl.args(["-sS", "-X", method, "-w", "\n%{http_code}"])
            .args(["--cacert", &self.path("ca.pem")])
            .args([
                "--cert",
                &self.path("agent.pem"),
                "--key",
                &self.path("agent.key"),
            ])
            .arg(format!("https://localhost:{port}{path}"));
        if let Some(body) = body {
            curl.args([
                "-H",
                "content-type: application/json",
                "-d",
                &body.to_string(),
            ]);
        }
        let out = curl.output().unwrap();
        assert!(out.status.success(), "curl {path}: {}", stderr(&out));
        let text = stdout(&out);
        let (body, status) = text.trim_end().rsplit_once('\n').unwrap();
        (
            status.parse().unwrap(),
            serde_json::from_str(body).unwrap_or(Value::Null),
        )
    }

    /// A run of two echo blocks, started over https.
    fn start(&self, served: &Served, scratch: &Path) -> String {
        let ws = workspace_in(scratch);
        let body = json!({"manifest": chain(2), "workspace": ws, "max_steps": 100});
        let (status, started) = self.api(served, "POST", "/v1/runs", Some(&body));
        assert_eq!(status, 202, "{started}");
        started["run_id"].as_str().unwrap().to_string()
    }

    fn status(&self, served: &Served, run: &str) -> Value {
        let (status, shown) = self.api(served, "GET", &format!("/v1/runs/{run}"), None);
        assert_eq!(status, 200, "{shown}");
        shown
    }

    fn await_succeeded(&self, served: &Served, run: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let shown = self.status(served, run);
            if shown["status"] == "succeeded" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "run {run} never succeeded: {shown}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `wfhost agent --server https://localhost:PORT` with `extra`.
fn agent(scratch: &Path, served: &Served, extra: &[&str]) -> std::process::Child {
    let port = served.addr.rsplit(':').next().unwrap();
    command(scratch)
        .args(["agent", "--server", &format!("https://localhost:{port}")])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The exit code and stderr of an agent that must stop by itself within
/// 20 s.
fn refused(mut child: std::process::Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the agent was not refused within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), stderr(&out))
}

/// Kills the agent on drop.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_agent_trusting_the_servers_ca_runs_its_jobs_and_one_trusting_another_ca_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(pki) = Pki::make(scratch.path()) else {
        return;
    };
    let served = pki.serve(scratch.path(), &[]);
    let run = pki.start(&served, scratch.path());
    let (code, said) = refused(agent(
        scratch.path(),
        &served,
        &["--name", "wrong", "--ca", &pki.path("other-ca.pem")],
    ));
    assert_eq!(code, Some(2), "{said}");
    assert_eq!(said.lines().count(), 1, "one line: {said}");
    assert!(
        said.contains("is not trusted") && said.contains("--ca"),
        "{said}"
    );
    assert_eq!(pki.status(&served, &run)["status"], "running", "no job ran");
    let _agent = Running(agent(
        scratch.path(),
        &served,
        &["--name", "right", "--ca", &pki.path("ca.pem")],
    ));
    pki.await_succeeded(&served, &run);
    let (_, jobs) = pki.api(&served, "GET", &format!("/v1/runs/{run}/jobs"), None);
    let agents: Vec<&str> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["right", "right"], "{jobs}");
}

#[test]
fn with_a_client_ca_only_an_agent_with_a_certificate_it_signed_is_served() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(pki) = Pki::make(scratch.path()) else {
        return;
    };
    let served = pki.serve(scratch.path(), &["--tls-client-ca", &pki.path("ca.pem")]);
    let run = pki.start(&served, scratch.path());
    let ca = pki.path("ca.pem");
    let (code, said) = refused(agent(scratch.path(), &served, &["--ca", &ca]));
    assert_eq!(code, Some(2), "{said}");
    assert_eq!(said.lines().count(), 1, "one line: {said}");
    assert!(said.contains("refused this client's certificate"), "{said}");
    assert!(said.contains("--client-cert"), "{said}");
    // A certificate another CA signed is refused too.
    let (code, said) = refused(agent(
        scratch.path(),
        &served,
        &[
            "--ca",
            &ca,
            "--client-cert",
            &pki.path("other-ca.pem"),
            "--client-key",
            &pki.path("other-ca.key"),
        ],
    ));
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("refused this client's certificate"), "{said}");
    assert_eq!(pki.status(&served, &run)["status"], "running", "no job ran");
    let (cert, key) = (pki.path("agent.pem"), pki.path("agent.key"));
    let _agent = Running(agent(
        scratch.path(),
        &served,
        &["--ca", &ca, "--client-cert", &cert, "--client-key", &key],
    ));
    pki.await_succeeded(&served, &run);
}

#[test]
fn serve_with_a_missing_or_mismatched_key_says_which_in_one_line_and_does_not_listen() {
    let scratch = tempfile::tempdir().unwrap();
    let Some(pki) = Pki::make(scratch.path()) else {
        return;
    };
    let cert = pki.path("server.pem");
    let cases = [
        (pki.path("missing.key"), "--tls-key: cannot read "),
        (pki.path("agent.key"), "does not match the certificate in"),
        (cert.clone(), "holds no private key"),
    ];
    for (key, says) in cases {
        let out = wfhost(
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                &cert,
                "--tls-key",
                &key,
            ],
            scratch.path(),
        );
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert_eq!(said.lines().count(), 1, "one line: {said}");
        assert!(said.contains(says) && said.contains(&key), "{said}");
        assert!(
            stdout(&out).is_empty(),
            "it never listened: {}",
            stdout(&out)
        );
    }
}

#[test]
fn a_client_that_never_finishes_its_handshake_is_cut_at_the_header_timeout() {
    use std::io::{Read, Write};
    let scratch = tempfile::tempdir().unwrap();
    let Some(pki) = Pki::make(scratch.path()) else {
        return;
    };
    let served = pki.serve(scratch.path(), &["--header-timeout-ms", "300"]);
    let mut stalled = std::net::TcpStream::connect(&served.addr).unwrap();
    // The start of a TLS record, and nothing more.
    stalled.write_all(&[0x16, 0x03, 0x01]).unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let began = Instant::now();
    let mut buf = [0u8; 64];
    let read = stalled.read(&mut buf);
    assert!(
        matches!(read, Ok(0) | Err(_)) && began.elapsed() < Duration::from_secs(5),
        "closed after {:?}: {read:?}",
        began.elapsed()
    );
    assert!(
        !matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "not closed within the read timeout"
    );
    // The server goes on serving.
    assert_eq!(pki.api(&served, "GET", "/v1/health", None).0, 200);
}
