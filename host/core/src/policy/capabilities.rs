//! Host capabilities that a workflow can grant to a plugin.
//!
//! Every plugin gets the base sandbox: the WASI interfaces listed in
//! [`BASE_INTERFACES`] (never sockets; HTTP only through the `http` grant) and the `wfhost:plugin`
//! interfaces of its world. Anything else it imports must belong to a
//! capability the workflow grants it in `plugins.<name>.grants`, or the host
//! refuses to load it.

/// A grantable capability and the WIT interfaces it unlocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub name: &'static str,
    /// Interface names without version, e.g. `wfhost:plugin/exec`.
    pub interfaces: &'static [&'static str],
    pub summary: &'static str,
}

/// The capabilities this host offers (see `wit/CHANGELOG.md`).
pub const CAPABILITIES: &[Capability] = &[
    Capability {
        name: "exec",
        interfaces: &["wfhost:plugin/exec"],
        summary: "run exec blocks (argv commands, checked by the safety policy) on a host executor",
    },
    Capability {
        name: "container",
        interfaces: &["wfhost:plugin/container"],
        summary: "run, pause, unpause and remove Docker containers with the workspace at /workspace",
    },
    Capability {
        name: "slurm",
        interfaces: &["wfhost:plugin/slurm"],
        summary: "submit, watch and cancel Slurm batch jobs that leave exec result bundles",
    },
    Capability {
        name: "agent",
        interfaces: &["wfhost:plugin/agent"],
        summary: "run agent CLIs with the env contract and prompt, then check their changes and BlockOutput",
    },
    Capability {
        name: "http",
        interfaces: &["wasi:http/outgoing-handler", "wasi:http/types"],
        summary: "send HTTP requests (wasi:http) to the hosts listed in plugins.<name>.http.allow, with secrets filled in by the host",
    },
];

/// Interface prefixes every plugin may import.
pub const BASE_INTERFACES: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wfhost:plugin/types",
    "wfhost:plugin/log",
    // Types only: what it defines is harmless without a capability.
    "wfhost:plugin/executor-types",
];

/// Interface prefixes no workflow can grant: plugins open no sockets (the
/// `http` capability's requests are made by the host).
pub const NEVER_GRANTED: &[&str] = &["wasi:sockets/"];

pub fn find(name: &str) -> Option<&'static Capability> {
    CAPABILITIES.iter().find(|c| c.name == name)
}

/// `wasi:cli/environment@0.2.6` → `wasi:cli/environment`.
pub fn unversioned(import: &str) -> &str {
    import.split_once('@').map_or(import, |(name, _)| name)
}

fn matches(import: &str, prefix: &str) -> bool {
    let name = unversioned(import);
    if prefix.ends_with('/') {
        name.starts_with(prefix)
    } else {
        name == prefix
    }
}

/// Why an import is not allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Network interfaces: never granted.
    Network,
    /// Part of a capability that was not granted.
    NotGranted(&'static str),
    /// Not offered by this host at all.
    Unknown,
}

/// Decide whether `import` is allowed given the granted capability names.
pub fn check_import(import: &str, grants: &[String]) -> Result<(), Refusal> {
    if BASE_INTERFACES.iter().any(|p| matches(import, p)) {
        return Ok(());
    }
    if NEVER_GRANTED.iter().any(|p| matches(import, p)) {
        return Err(Refusal::Network);
    }
    match CAPABILITIES
        .iter()
        .find(|c| c.interfaces.iter().any(|i| matches(import, i)))
    {
        Some(c) if grants.iter().any(|g| g == c.name) => Ok(()),
        Some(c) => Err(Refusal::NotGranted(c.name)),
        None => Err(Refusal::Unknown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_interfaces_pass_at_any_version() {
        assert!(check_import("wasi:cli/environment@0.2.6", &[]).is_ok());
        assert!(check_import("wasi:filesystem/preopens@0.2.0", &[]).is_ok());
        assert!(check_import("wfhost:plugin/log@0.1.0", &[]).is_ok());
    }

    #[test]
    fn each_capability_unlocks_only_its_own_interface() {
        let container = vec!["container".to_string()];
        assert!(check_import("wfhost:plugin/container@0.1.0", &container).is_ok());
        assert!(check_import("wfhost:plugin/executor-types@0.1.0", &[]).is_ok());
        assert_eq!(
            check_import("wfhost:plugin/slurm@0.1.0", &container),
            Err(Refusal::NotGranted("slurm"))
        );
        assert_eq!(
            check_import("wfhost:plugin/exec@0.1.0", &container),
            Err(Refusal::NotGranted("exec"))
        );
    }

    #[test]
    fn network_is_never_granted() {
        let all: Vec<String> = CAPABILITIES.iter().map(|c| c.name.to_string()).collect();
        assert_eq!(
            check_import("wasi:sockets/tcp@0.2.6", &all),
            Err(Refusal::Network)
        );
        assert_eq!(
            check_import("wasi:http/outgoing-handler@0.2.6", &[]),
            Err(Refusal::NotGranted("http"))
        );
        let http = vec!["http".to_string()];
        assert!(check_import("wasi:http/outgoing-handler@0.2.6", &http).is_ok());
        assert!(check_import("wasi:http/types@0.2.0", &http).is_ok());
        assert_eq!(
            check_import("wasi:sockets/tcp@0.2.6", &http),
            Err(Refusal::Network)
        );
    }

    #[test]
    fn unknown_interfaces_are_refused() {
        assert_eq!(
            check_import("acme:evil/steal@1.0.0", &[]),
            Err(Refusal::Unknown)
        );
        // Prefix matching stops at interface boundaries.
        assert_eq!(
            check_import("wfhost:plugin/logger@0.1.0", &[]),
            Err(Refusal::Unknown)
        );
    }
}
