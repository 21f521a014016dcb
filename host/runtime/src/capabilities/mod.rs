//! The host capabilities a workflow can grant a worker plugin
//! (`plugins.<name>.grants`), one module each: its state, its view of the
//! store (as wasmtime-wasi's `WasiView` / `WasiCtxView` are WASI's: a trait
//! [`crate::host_state::HostState`] implements, handing out a struct that
//! borrows just what the capability uses), its WIT interface's `Host`
//! impl on that view, and `link`, which adds just that interface to a
//! linker. [`LINKED`] lists them.
//!
//! The executor capabilities share what they know of the calling block
//! ([`scope`]: `ExecScope`, set for worker calls only) and the run's
//! containers and Slurm executor ([`resources`]: `RunResources`, cleaned
//! up at the run's end). Which plugin may import which interface is the
//! core's table (`wfhost_core::policy::capabilities::CAPABILITIES`),
//! checked at admission; a test holds the two tables to the same names.

use wasmtime::component::Linker;

use crate::host_state::HostState;

pub(crate) mod agent;
pub(crate) mod container;
pub(crate) mod exec;
pub(crate) mod http;
pub(crate) mod resources;
pub(crate) mod scope;
pub(crate) mod slurm;

/// A capability the host serves: its grant's name and what links it.
pub(crate) struct HostCapability {
    /// As in `wfhost_core::policy::capabilities::CAPABILITIES`.
    pub name: &'static str,
    pub link: fn(&mut Linker<HostState>) -> wasmtime::Result<()>,
}

/// Every capability, linked into the runtime's one linker (admission
/// refuses a plugin that imports one it was not granted).
pub(crate) const LINKED: &[HostCapability] = &[
    HostCapability {
        name: "exec",
        link: exec::link::<HostState>,
    },
    HostCapability {
        name: "container",
        link: container::link::<HostState>,
    },
    HostCapability {
        name: "slurm",
        link: slurm::link::<HostState>,
    },
    HostCapability {
        name: "agent",
        link: agent::link::<HostState>,
    },
    HostCapability {
        name: "http",
        link: http::link::<HostState>,
    },
];

/// Link every capability of [`LINKED`].
pub(crate) fn link_all(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    for capability in LINKED {
        (capability.link)(linker)
            .map_err(|e| e.context(format!("linking the `{}` capability", capability.name)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_grantable_capability_is_linked_and_no_other() {
        let granted: Vec<&str> = wfhost_core::policy::capabilities::CAPABILITIES
            .iter()
            .map(|c| c.name)
            .collect();
        let linked: Vec<&str> = super::LINKED.iter().map(|c| c.name).collect();
        assert_eq!(linked, granted);
    }
}
