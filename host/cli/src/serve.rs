//! `wfhost serve`: the HTTP API over this home's run store
//! (`wfhost_server`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::{Global, exit, report_error};

#[derive(Args)]
pub struct ServeArgs {
    /// The address to listen on; anything but loopback needs
    /// --auth-token-file.
    #[arg(long, default_value = wfhost_server::DEFAULT_LISTEN, value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// A JSON file `{"clients": ["<token>"], "agents": ["<token>"]}`,
    /// readable only by its owner; every request must then carry
    /// `Authorization: Bearer <token>`.
    #[arg(long, value_name = "FILE")]
    auth_token_file: Option<PathBuf>,
}

pub fn serve(args: ServeArgs, global: &Global) -> u8 {
    let home = match global.home() {
        Ok(h) => h,
        Err(code) => return code,
    };
    let tokens = match args
        .auth_token_file
        .as_deref()
        .map(wfhost_server::Tokens::read)
    {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            report_error(e);
            return exit::BAD_INPUT;
        }
    };
    // Runs started over the API execute in this same executable.
    let runner = std::env::current_exe()
        .ok()
        .map(|exe| wfhost_server::Runner { exe });
    let config = wfhost_server::ServerConfig {
        listen: args.listen,
        home,
        tokens,
        runner,
    };
    if let Err(e) = config.check() {
        report_error(e);
        return exit::BAD_INPUT;
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(format!("cannot start the server's runtime: {e}"));
            return exit::BAD_INPUT;
        }
    };
    let home_shown = config.home.display().to_string();
    let served = runtime.block_on(wfhost_server::serve(config, |addr| {
        // One line a script can wait for.
        println!("wfhost: serving http://{addr}/v1 (store in {home_shown})");
    }));
    match served {
        Ok(()) => exit::SUCCESS,
        Err(e) => {
            report_error(e);
            exit::BAD_INPUT
        }
    }
}
