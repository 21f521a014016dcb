//! For tests (here and in the crates above): a fresh PostgreSQL database
//! on the test server, dropped afterwards. The server is
//! `WFHOST_TEST_POSTGRES` (an admin URL of a role that may create
//! databases), else the one `scripts/services.sh postgres` starts.

use std::path::Path;

use crate::db::PgConn;

/// The test server's admin URL when `WFHOST_TEST_POSTGRES` does not say.
pub const DEFAULT_ADMIN_URL: &str = "postgres://wfhost_test:wfhost_test@127.0.0.1:5432/postgres";

/// A database of one test, dropped (with its connections) when dropped.
pub struct TestDatabase {
    /// The database's URL (with the test role's password).
    pub url: String,
    name: String,
    admin: String,
}

fn admin_url() -> String {
    std::env::var("WFHOST_TEST_POSTGRES")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_ADMIN_URL.to_string())
}

impl TestDatabase {
    /// A new, empty database. None when the test server cannot be reached
    /// (the caller skips), unless `WFHOST_REQUIRE_SERVICES=1`, which makes
    /// that a panic naming the fix.
    pub fn create() -> Option<TestDatabase> {
        Self::create_on(&admin_url())
    }

    /// [`TestDatabase::create`] on the server of `admin` (an admin URL).
    pub fn create_on(admin: &str) -> Option<TestDatabase> {
        let admin = admin.to_string();
        let conn = match PgConn::connect(&admin) {
            Ok(c) => c,
            Err(e) => {
                let why = format!(
                    "no PostgreSQL for the tests at {} ({}): run `scripts/services.sh postgres`",
                    crate::redact(&admin),
                    e.0
                );
                if std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() == Ok("1") {
                    panic!("{why}");
                }
                eprintln!("skipped: {why}");
                return None;
            }
        };
        let name = format!(
            "wfhost_t_{}",
            wfhost_core::random::token().expect("random").to_lowercase()
        );
        conn.batch(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("creating the test database {name}: {e}"));
        let url = match admin.rsplit_once('/') {
            Some((server, rest)) => match rest.split_once('?') {
                Some((_, query)) => format!("{server}/{name}?{query}"),
                None => format!("{server}/{name}"),
            },
            None => panic!("WFHOST_TEST_POSTGRES must be a postgres:// URL"),
        };
        Some(TestDatabase { url, name, admin })
    }

    /// Make `home`'s store this database (its `config.json`).
    pub fn configure(&self, home: &Path) {
        std::fs::create_dir_all(home).unwrap();
        let config = serde_json::json!({ "store": self.url });
        std::fs::write(home.join(crate::CONFIG_FILE), config.to_string()).unwrap();
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Ok(conn) = PgConn::connect(&self.admin) {
            let _ = conn.batch(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// Run `sql` (statements without parameters) on `store`'s database, as a
/// test that reaches past the store's interface does; the database's
/// message on failure.
pub fn execute_batch(store: &crate::Store, sql: &str) -> Result<(), String> {
    store.db.execute_batch(sql).map_err(|e| e.to_string())
}

/// The first column of the first row of `sql` on `store`'s database, as
/// text (a setting, a count).
pub fn query_text(store: &crate::Store, sql: &str) -> Result<String, String> {
    store
        .db
        .query_row(sql, (), |r| r.get::<_, String>(0))
        .map_err(|e| e.to_string())
}

/// A PostgreSQL server of one test (Debian's `pg_createcluster`, as
/// root), which the test may stop, start and restart without disturbing
/// the other tests' server; dropped with its data.
pub struct PrivateServer {
    version: String,
    name: String,
    /// Where its TLS files were copied, removed with it.
    files: Option<std::path::PathBuf>,
    /// The admin URL of its `wfhost_test` role.
    pub admin_url: String,
}

fn cluster_ctl(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl PrivateServer {
    /// A new server on a free loopback port with the `wfhost_test` role;
    /// None (skip) without root or Debian's PostgreSQL tools, unless
    /// `WFHOST_REQUIRE_SERVICES=1`.
    pub fn start() -> Option<PrivateServer> {
        Self::start_with(&[])
    }

    /// [`PrivateServer::start`] serving TLS with `cert` and `key` (PEM
    /// files; copied where the server may read them).
    pub fn start_with_tls(cert: &Path, key: &Path) -> Option<PrivateServer> {
        let dir = std::env::temp_dir().join(format!(
            "wfhost-pg-tls-{}",
            &wfhost_core::random::token().expect("random")[..10]
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, k) = (dir.join("server.pem"), dir.join("server.key"));
        std::fs::copy(cert, &c).unwrap();
        std::fs::copy(key, &k).unwrap();
        for path in [&dir, &c, &k] {
            cluster_ctl(&["chown", "postgres:postgres", path.to_str().unwrap()]).ok()?;
        }
        cluster_ctl(&["chmod", "0600", k.to_str().unwrap()]).ok()?;
        let mut server = Self::start_with(&[
            "-o".into(),
            "ssl=on".into(),
            "-o".into(),
            format!("ssl_cert_file={}", c.display()),
            "-o".into(),
            format!("ssl_key_file={}", k.display()),
        ])?;
        server.files = Some(dir);
        Some(server)
    }

    fn start_with(options: &[String]) -> Option<PrivateServer> {
        let version = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .max_by_key(|v| v.parse::<u32>().unwrap_or(0))
        });
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let (Some(version), true) = (version, root) else {
            let why = "a private PostgreSQL server needs root and Debian's postgresql (scripts/services.sh postgres)";
            if std::env::var("WFHOST_REQUIRE_SERVICES").as_deref() == Ok("1") {
                panic!("{why}");
            }
            eprintln!("skipped: {why}");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
            .to_string();
        let name = format!(
            "wfhost_{}",
            &wfhost_core::random::token().expect("random")[..10]
        );
        let server = PrivateServer {
            admin_url: format!("postgres://wfhost_test:wfhost_test@127.0.0.1:{port}/postgres"),
            version,
            name,
            files: None,
        };
        let mut create: Vec<&str> = vec![
            "pg_createcluster",
            &server.version,
            &server.name,
            "-p",
            &port,
            "--start",
        ];
        create.extend(options.iter().map(String::as_str));
        cluster_ctl(&create).unwrap_or_else(|e| panic!("{e}"));
        cluster_ctl(&[
            "su",
            "postgres",
            "-c",
            &format!(
                "psql -p {port} -qAt -c \"CREATE ROLE wfhost_test LOGIN CREATEDB CREATEROLE PASSWORD 'wfhost_test'\""
            ),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        Some(server)
    }

    /// `pg_ctlcluster VERSION NAME ACTION` (start, stop, restart).
    pub fn ctl(&self, action: &str) {
        cluster_ctl(&["pg_ctlcluster", &self.version, &self.name, action])
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// A new empty database on this server.
    pub fn database(&self) -> TestDatabase {
        TestDatabase::create_on(&self.admin_url).expect("the private server answers")
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = cluster_ctl(&["pg_dropcluster", &self.version, &self.name, "--stop"]);
        if let Some(dir) = &self.files {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
