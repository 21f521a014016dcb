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
        let admin = admin_url();
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
