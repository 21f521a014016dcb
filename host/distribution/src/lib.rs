//! # wfhost-distribution
//!
//! Third-party plugins as packages: one OCI artifact per plugin in the
//! CNCF wasm layout ([`package`]), with a plugin manifest checked against
//! the component ([`manifest`], [`component`]), Ed25519 signatures as OCI
//! referrers ([`signing`]), on disk as an OCI image layout ([`layout`]),
//! in registries ([`registry`], over [`oci`]: every answer read with a
//! cap), installed into the user's home ([`home`],
//! [`install`]), pinned per project by `wfhost.lock` ([`lock`]) and
//! resolved when a workflow runs ([`resolve`]).
//!
//! The engine core knows none of this: a workflow's `ref` plugin is
//! resolved to a local component before the runtime loads it.

pub mod component;
pub mod digest;
pub mod home;
pub mod install;
pub mod layout;
pub mod lock;
pub mod manifest;
pub mod oci;
pub mod package;
pub mod registry;
pub mod resolve;
pub mod signing;
