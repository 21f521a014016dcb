//! `wfhost secret`: the home's secrets (`wfhost_store::secrets`). A value
//! is read from stdin, never from the command line.

use std::io::Read;

use clap::{Args, Subcommand};
use wfhost_store::HomeSecrets;
use wfhost_store::secrets::MAX_SECRET_BYTES;

use crate::{Global, exit, report_error, store_error};

#[derive(Args)]
pub struct SecretArgs {
    #[command(subcommand)]
    command: SecretCommand,
}

#[derive(Subcommand)]
enum SecretCommand {
    /// Store a secret: its value is read from stdin (one final newline is
    /// dropped), kept in `<home>/secrets/NAME`, mode 0600.
    Set {
        /// `[A-Za-z_][A-Za-z0-9_]*`.
        name: String,
    },
    /// List the names of the home's secrets (never their values).
    Ls,
    /// Remove a secret.
    Rm { name: String },
}

pub fn secret(args: SecretArgs, global: &Global) -> u8 {
    let home = match global.home() {
        Ok(home) => home,
        Err(code) => return code,
    };
    let secrets = HomeSecrets::new(&home);
    match args.command {
        SecretCommand::Set { name } => {
            if let Err(e) = wfhost_core::policy::secrets::check_name(&name) {
                report_error(e);
                return exit::BAD_INPUT;
            }
            let mut value = Vec::new();
            let read = std::io::stdin()
                .take(MAX_SECRET_BYTES as u64 + 3)
                .read_to_end(&mut value);
            if let Err(e) = read {
                report_error(format!("cannot read the value from stdin: {e}"));
                return exit::BAD_INPUT;
            }
            if value.ends_with(b"\n") {
                value.pop();
                if value.ends_with(b"\r") {
                    value.pop();
                }
            }
            match secrets.set(&name, &value) {
                Ok(()) => {
                    eprintln!("secret {name} set");
                    exit::SUCCESS
                }
                Err(e) => store_error(e),
            }
        }
        SecretCommand::Ls => match secrets.names() {
            Ok(names) => {
                for name in names {
                    println!("{name}");
                }
                exit::SUCCESS
            }
            Err(e) => store_error(e),
        },
        SecretCommand::Rm { name } => match secrets.remove(&name) {
            Ok(true) => exit::SUCCESS,
            Ok(false) => {
                report_error(format!("no secret `{name}` in {}", home.display()));
                exit::BAD_INPUT
            }
            Err(e) => store_error(e),
        },
    }
}
