//! `wfhost store`: the home's run store itself (`migrate`).

use clap::Subcommand;

use crate::{Global, exit, fail};

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Copy the home's embedded store (runs, events, jobs, sessions,
    /// schedules, hooks, notifications) into an empty PostgreSQL database,
    /// checking each table's rows and SHA-256 on both sides before it
    /// commits. The embedded file is left as it was.
    Migrate {
        /// The database: postgres://user:password@host:port/database.
        #[arg(long, value_name = "URL")]
        to: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn store(command: StoreCommand, global: &Global) -> u8 {
    let home = match wfhost_store::resolve_home(global.home.as_deref()) {
        Ok(h) => h,
        Err(e) => return crate::store_error(e),
    };
    match command {
        StoreCommand::Migrate { to, json } => match wfhost_app::store::migrate(&home, &to) {
            Ok(done) if json => {
                let out = serde_json::json!({
                    "from": done.from,
                    "to": done.to,
                    "tables": done.tables,
                });
                println!("{out:#}");
                exit::SUCCESS
            }
            Ok(done) => {
                print_migrated(&done);
                exit::SUCCESS
            }
            Err(e) => fail(e),
        },
    }
}

fn print_migrated(done: &wfhost_app::store::Migrated) {
    println!(
        "copied {} into {} (each table's rows and SHA-256 read back and compared)",
        done.from.display(),
        done.to
    );
    for t in &done.tables {
        let short = t.digest.strip_prefix("sha256:").unwrap_or(&t.digest);
        println!("  {:<16} {:>9}  sha256:{}", t.table, t.rows, &short[..12]);
    }
    println!(
        "The home still uses its embedded store. To use the database from now on, add \"store\": \"{}\" (with its password) to {}, or set WFHOST_STORE. {} is left as it was.",
        done.to,
        done.config.display(),
        done.from.display()
    );
}
