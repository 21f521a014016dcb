//! Identifiers: run ids people can read and type, snapshot ids that are
//! unique across a store.

use sha2::{Digest, Sha256};
pub use wfhost_core::ids::{RunId, is_run_id};

/// A new run id: `run-YYYYMMDD-HHMMSS-xxxxxx`, sortable by start time, with
/// random hex so two runs started in the same second differ. Any unique
/// prefix works on the command line.
pub fn new_run_id(now_ms: i64) -> RunId {
    let mut random = [0u8; 3];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| {
        use std::io::Read;
        f.read_exact(&mut random)
    });
    if read.is_err() {
        // No /dev/urandom: mix the clock and the pid; the insert's
        // uniqueness check catches the unlikely clash.
        let mix = (now_ms as u64) ^ (u64::from(std::process::id()) << 20);
        random.copy_from_slice(&mix.to_le_bytes()[..3]);
    }
    let (date, time) = crate::time::compact_utc(now_ms);
    RunId::from_parts(&date, &time, random).expect("a clock reading makes a run id")
}

/// The snapshot id of event `seq` of run `run_id`: `sn-` and 12 hex digits
/// of a hash of both, so that a snapshot names its run as well as its
/// place, and a snapshot of one run is never mistaken for one of another.
pub fn snapshot_id(run_id: &str, seq: u64) -> String {
    let digest = Sha256::digest(format!("{run_id}/{seq}").as_bytes());
    format!("sn-{}", &hex::encode(digest)[..12])
}

#[cfg(test)]
mod tests {
    #[test]
    fn new_run_ids_have_the_shape_is_run_id_checks() {
        for _ in 0..20 {
            assert!(super::is_run_id(&super::new_run_id(1_795_410_070_021)));
        }
        assert!(super::is_run_id(&super::new_run_id(0)));
        assert!(super::is_run_id(&super::new_run_id(253_402_300_799_000)));
        for bad in [
            "run-1-2-3",
            "run-20261123-040112-9C2E41",
            "x-20261123-040112-9c2e41",
            "run-20261123-040112-9c2e41-x",
            "run-2026112a-040112-9c2e41",
        ] {
            assert!(!super::is_run_id(bad), "{bad}");
        }
    }
}
