//! The user's side: pull, install (with consent and the lock), update, ls.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use wfhost_core::manifest::plugin_ref::PluginRef;
use wfhost_distribution::home::{PluginHome, UNSIGNED};
use wfhost_distribution::install::{Verified, fetch_verified};
use wfhost_distribution::lock::{self, LockEntry};
use wfhost_distribution::registry::Registry;

#[derive(clap::Args)]
pub struct PullArgs {
    /// `oci://REGISTRY/REPOSITORY:TAG` or `…@sha256:DIGEST`.
    reference: String,
    /// Accept a package without a signature by a key you trust.
    #[arg(long)]
    allow_unsigned: bool,
}

pub fn pull(args: PullArgs, home: &Path) -> Result<(), String> {
    let home = PluginHome::new(home);
    let reference = super::parse_ref(&args.reference)?;
    let verified = super::block_on(fetch_verified(&home, &reference, None, args.allow_unsigned))?;
    let installed = verified.commit(&home)?;
    describe(&verified);
    println!(
        "cached {} (not pinned in any wfhost.lock; `wfhost plugin install` does that)",
        installed.manifest
    );
    Ok(())
}

/// What the user decides at install.
#[derive(clap::Args)]
pub struct Consent {
    /// The capabilities to allow the plugin (comma-separated, `none` for
    /// none); must be among those it requests.
    #[arg(long, value_name = "CAPS", value_delimiter = ',')]
    allow: Option<Vec<String>>,
    /// Allow every capability the plugin requests without asking.
    #[arg(long, short)]
    yes: bool,
    /// Accept a package without a signature by a key you trust (recorded
    /// as signer `unsigned` in wfhost.lock).
    #[arg(long)]
    allow_unsigned: bool,
    /// The lock file (default: the nearest wfhost.lock in the current
    /// directory or above, else ./wfhost.lock).
    #[arg(long, value_name = "FILE")]
    lock: Option<PathBuf>,
}

impl Consent {
    fn lock_path(&self) -> PathBuf {
        self.lock
            .clone()
            .or_else(|| lock::find(Path::new(".")))
            .unwrap_or_else(|| PathBuf::from(lock::FILE_NAME))
    }
}

#[derive(clap::Args)]
pub struct InstallArgs {
    /// `oci://REGISTRY/REPOSITORY:TAG` or `…@sha256:DIGEST`; without one,
    /// install everything wfhost.lock pins.
    reference: Option<String>,
    #[command(flatten)]
    consent: Consent,
}

pub fn install(args: InstallArgs, home: &Path) -> Result<(), String> {
    let home = PluginHome::new(home);
    let lock_path = args.consent.lock_path();
    let Some(text) = &args.reference else {
        return install_locked(&home, &lock_path, &args.consent);
    };
    let reference = super::parse_ref(text)?;
    let pinned = lock::read(&lock_path)?.get(&reference.to_string()).cloned();
    if let (Some(entry), Some(_)) = (&pinned, &reference.tag)
        && reference.digest.is_none()
    {
        let now = super::block_on(async { Registry::new(&reference)?.resolve().await })?;
        if now != entry.manifest {
            return Err(format!(
                "{reference} now names {now}, but {} pins {}: the tag moved. Nothing was installed; `wfhost plugin update {reference}` moves the lock deliberately",
                lock_path.display(),
                entry.manifest
            ));
        }
    }
    let pin = pinned.as_ref().map(|e| e.manifest.as_str());
    let verified = super::block_on(fetch_verified(
        &home,
        &reference,
        pin,
        args.consent.allow_unsigned,
    ))?;
    if let Some(entry) = &pinned {
        check_same_signer(&verified, entry, &lock_path)?;
    }
    commit(&home, &verified, &args.consent, &lock_path, false)
}

/// Install every package the lock pins, at the pinned digests.
fn install_locked(home: &PluginHome, lock_path: &Path, consent: &Consent) -> Result<(), String> {
    let pins = lock::read(lock_path)?;
    if pins.plugins.is_empty() {
        return Err(format!(
            "{} pins no plugins: give a reference, `wfhost plugin install oci://…`",
            lock_path.display()
        ));
    }
    for entry in &pins.plugins {
        let reference = PluginRef::parse(&entry.reference)
            .map_err(|e| format!("{}: {e}", lock_path.display()))?;
        let verified = super::block_on(fetch_verified(
            home,
            &reference,
            Some(&entry.manifest),
            consent.allow_unsigned,
        ))?;
        check_same_signer(&verified, entry, lock_path)?;
        commit(home, &verified, consent, lock_path, false)?;
    }
    Ok(())
}

/// A package installed from a lock is signed by the key the lock names.
fn check_same_signer(
    verified: &Verified,
    entry: &LockEntry,
    lock_path: &Path,
) -> Result<(), String> {
    if verified.signer == entry.signer || entry.signer == UNSIGNED {
        return Ok(());
    }
    Err(format!(
        "{}: {} pins signer {}, but the package verified with {}; nothing was installed",
        verified.reference,
        lock_path.display(),
        entry.signer,
        verified.signer
    ))
}

#[derive(clap::Args)]
pub struct UpdateArgs {
    /// The package to move; without one, every package wfhost.lock pins by tag.
    reference: Option<String>,
    #[command(flatten)]
    consent: Consent,
}

pub fn update(args: UpdateArgs, home: &Path) -> Result<(), String> {
    let home = PluginHome::new(home);
    let lock_path = args.consent.lock_path();
    let references: Vec<PluginRef> = match &args.reference {
        Some(text) => vec![super::parse_ref(text)?],
        None => lock::read(&lock_path)?
            .plugins
            .iter()
            .filter_map(|e| PluginRef::parse(&e.reference).ok())
            .filter(|r| r.digest.is_none())
            .collect(),
    };
    for reference in references {
        let old = lock::read(&lock_path)?
            .get(&reference.to_string())
            .map(|e| e.manifest.clone());
        let verified = super::block_on(fetch_verified(
            &home,
            &reference,
            None,
            args.consent.allow_unsigned,
        ))?;
        let new = verified.fetched.manifest.digest.clone();
        if old.as_deref() == Some(new.as_str()) {
            println!("{reference}: up to date ({new})");
            continue;
        }
        commit(&home, &verified, &args.consent, &lock_path, true)?;
        println!(
            "{reference}: {} -> {new}",
            old.as_deref().unwrap_or("(not pinned)")
        );
    }
    Ok(())
}

/// Ask for consent, then store the package, the consent and the pin.
fn commit(
    home: &PluginHome,
    verified: &Verified,
    consent: &Consent,
    lock_path: &Path,
    moving: bool,
) -> Result<(), String> {
    describe(verified);
    let plugin = &verified.fetched.package.plugin;
    super::check_served(plugin).map_err(|e| format!("{e}; nothing was installed"))?;
    let allowed = decide(home, verified, consent)?;
    let entry = LockEntry {
        reference: verified.reference.to_string(),
        manifest: verified.fetched.manifest.digest.clone(),
        layer: verified.fetched.layer.digest.clone(),
        signer: verified.signer.clone(),
    };
    lock::update(lock_path, |lock| {
        if let Some(old) = lock.get(&entry.reference)
            && old.manifest != entry.manifest
            && !moving
        {
            return Err(format!(
                "{} pins {} to {}, not {}: `wfhost plugin update` moves it",
                lock_path.display(),
                entry.reference,
                old.manifest,
                entry.manifest
            ));
        }
        verified.commit(home)?;
        home.set_allowed(&plugin.name, &verified.signer, &allowed)?;
        lock.put(entry.clone());
        Ok(())
    })?;
    println!(
        "installed {} {}; allowed [{}]; pinned in {}",
        plugin.name,
        plugin.version,
        allowed.join(", "),
        lock_path.display()
    );
    Ok(())
}

/// The capabilities the user allows: `--allow`, `--yes`, what they allowed
/// before, or their answer at a terminal.
fn decide(
    home: &PluginHome,
    verified: &Verified,
    consent: &Consent,
) -> Result<Vec<String>, String> {
    let plugin = &verified.fetched.package.plugin;
    let requested = &plugin.capabilities;
    if let Some(list) = &consent.allow {
        let list: Vec<String> = list.iter().filter(|c| *c != "none").cloned().collect();
        if let Some(extra) = list.iter().find(|c| !requested.contains(c)) {
            return Err(format!(
                "--allow {extra}: `{}` does not request it (it requests [{}]); nothing was installed",
                plugin.name,
                requested.join(", ")
            ));
        }
        return Ok(list);
    }
    if consent.yes || requested.is_empty() {
        return Ok(requested.clone());
    }
    let before = home
        .allowed(&plugin.name, &verified.signer)?
        .unwrap_or_default();
    if requested.iter().all(|c| before.contains(c)) {
        return Ok(requested.clone());
    }
    if !std::io::stdin().is_terminal() {
        return Err(format!(
            "`{}` requests capabilities [{}]: allow them with `--allow {}` (or `--yes`), or `--allow none`; nothing was installed",
            plugin.name,
            requested.join(", "),
            requested.join(",")
        ));
    }
    eprint!(
        "Allow {} the capabilities [{}]? [y/N] ",
        plugin.name,
        requested.join(", ")
    );
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| format!("reading your answer: {e}"))?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(requested.clone())
    } else {
        Err("not allowed; nothing was installed".into())
    }
}

/// Show what is being installed, with the capabilities it requests.
fn describe(verified: &Verified) {
    let plugin = &verified.fetched.package.plugin;
    println!(
        "{} {} ({}, WIT {}) from {}",
        plugin.name, plugin.version, plugin.world, plugin.wit, verified.reference
    );
    if !plugin.description.is_empty() {
        println!("  {}", plugin.description);
    }
    println!("  manifest {}", verified.fetched.manifest.digest);
    if verified.signer == UNSIGNED {
        println!("  NOT signed by a key you trust (--allow-unsigned)");
    } else {
        println!("  signed by {} (trusted)", verified.signer);
    }
    if plugin.capabilities.is_empty() {
        println!("  requests no capabilities");
    }
    for name in &plugin.capabilities {
        let summary = wfhost_core::policy::capabilities::find(name).map_or("", |c| c.summary);
        println!("  requests `{name}`: {summary}");
    }
}

#[derive(clap::Args)]
pub struct LsArgs {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

pub fn ls(args: LsArgs, home: &Path) -> Result<(), String> {
    let home = PluginHome::new(home);
    for installed in home.list()? {
        let allowed = home
            .allowed(&installed.plugin.name, &installed.signer)?
            .unwrap_or_default();
        if args.json {
            let mut value = serde_json::to_value(&installed).expect("serializes");
            value["allowed"] = serde_json::json!(allowed);
            println!("{value}");
        } else {
            println!(
                "{} {}  {}  {}  {}  allowed [{}]",
                installed.plugin.name,
                installed.plugin.version,
                installed.reference,
                &installed.manifest[..19],
                installed.signer,
                allowed.join(", ")
            );
        }
    }
    Ok(())
}
