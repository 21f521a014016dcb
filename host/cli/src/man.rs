//! `wfhost man`: the manual pages, generated from the same definitions as
//! `--help`.

use std::path::Path;

use crate::{exit, report_error};

/// Print `wfhost.1`, or write it and one page per command into `dir`.
pub fn man(command: clap::Command, dir: Option<&Path>) -> u8 {
    let Some(dir) = dir else {
        let mut out = std::io::stdout().lock();
        return match clap_mangen::Man::new(command).render(&mut out) {
            Ok(()) => exit::SUCCESS,
            Err(e) => {
                report_error(format!("cannot write the manual page: {e}"));
                exit::RUN_FAILED
            }
        };
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        report_error(format!("cannot create {}: {e}", dir.display()));
        return exit::BAD_INPUT;
    }
    match clap_mangen::generate_to(command, dir) {
        Ok(()) => {
            println!("manual pages written to {}", dir.display());
            exit::SUCCESS
        }
        Err(e) => {
            report_error(format!(
                "cannot write the manual pages into {}: {e}",
                dir.display()
            ));
            exit::BAD_INPUT
        }
    }
}
