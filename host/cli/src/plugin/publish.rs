//! The publisher's side: keys, packing, signing, pushing.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use wfhost_distribution::home::PluginHome;
use wfhost_distribution::layout::Layout;
use wfhost_distribution::manifest::{ManifestSource, SOURCE_FILE};
use wfhost_distribution::package::Package;
use wfhost_distribution::registry::Registry;
use wfhost_distribution::{component, signing};

#[derive(clap::Args)]
pub struct KeygenArgs {
    /// The private key file to write (its public key goes beside it, with
    /// `.pub` for `.key`).
    #[arg(
        long,
        short,
        value_name = "FILE",
        default_value = "wfhost-publisher.key"
    )]
    out: PathBuf,
}

pub fn keygen(args: KeygenArgs) -> Result<(), String> {
    let public_path = public_path_of(&args.out);
    for path in [&args.out, &public_path] {
        if path.exists() {
            return Err(format!(
                "{} exists; choose another --out (keys are never overwritten)",
                path.display()
            ));
        }
    }
    let (key, private, public) = signing::generate()?;
    write_new(&args.out, private.as_bytes(), 0o600)?;
    if let Err(e) = write_new(&public_path, public.as_bytes(), 0o644) {
        let _ = std::fs::remove_file(&args.out);
        return Err(e);
    }
    println!("private key: {} (keep it secret)", args.out.display());
    println!("public key:  {}", public_path.display());
    println!("signer:      {}", signing::signer_id(&key.verifying_key()));
    println!(
        "Users trust your packages with `wfhost plugin trust {}`.",
        public_path.display()
    );
    Ok(())
}

fn public_path_of(private: &Path) -> PathBuf {
    match private.extension() {
        Some(ext) if ext == "key" => private.with_extension("pub"),
        _ => PathBuf::from(format!("{}.pub", private.display())),
    }
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[derive(clap::Args)]
pub struct TrustArgs {
    /// A public key: a `.pub` PEM file (from `plugin keygen`) or
    /// `ed25519:<base64>`.
    #[arg(required_unless_present = "list", conflicts_with = "list")]
    key: Option<String>,
    /// Stop trusting the key instead.
    #[arg(long)]
    remove: bool,
    /// List the trusted keys.
    #[arg(long)]
    list: bool,
}

pub fn trust(args: TrustArgs, home: &Path) -> Result<(), String> {
    let home = PluginHome::new(home);
    if args.list {
        for key in home.trusted_keys()? {
            println!("{key}");
        }
        return Ok(());
    }
    let key = signing::read_public_key(args.key.as_deref().unwrap_or_default())?;
    let id = signing::signer_id(&key);
    let message = if args.remove {
        if home.untrust(&id)? {
            "no longer trusted"
        } else {
            "was not trusted"
        }
    } else if home.trust(&id)? {
        "trusted"
    } else {
        "already trusted"
    };
    println!("{message}: {id}");
    Ok(())
}

#[derive(clap::Args)]
pub struct PackArgs {
    /// The plugin's wfhost-plugin.toml, or the directory holding it.
    #[arg(default_value = ".")]
    manifest: PathBuf,
    /// Where to write the package (an OCI image layout directory; default:
    /// `target/wfhost-package/NAME-VERSION` beside the toml).
    #[arg(long, short, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn pack(args: PackArgs) -> Result<(), String> {
    let toml = if args.manifest.is_dir() {
        args.manifest.join(SOURCE_FILE)
    } else {
        args.manifest.clone()
    };
    let source = ManifestSource::read(&toml)?;
    let base = toml
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let component_path = base.join(&source.component);
    let bytes = wfhost_core::workspace::regular_file::read_regular(
        &component_path,
        wfhost_core::workspace::regular_file::MAX_PLUGIN_BYTES,
    )
    .map_err(|e| {
        format!(
            "{}: {e} (build the plugin first: `wfhost plugin build`)",
            component_path.display()
        )
    })?;
    let info =
        component::inspect(&bytes).map_err(|e| format!("{}: {e}", component_path.display()))?;
    if carries_debug_info(&bytes) {
        eprintln!(
            "warning: {} carries debug information: it was built with the dev profile \
             (`wfhost plugin build`); `wfhost plugin build --release` makes the smaller, \
             faster component to publish",
            component_path.display()
        );
    }
    let plugin = source.manifest(&info.wit_version);
    super::check_served(&plugin).map_err(|e| format!("{}: {e}", component_path.display()))?;
    let package = Package::build(bytes, &plugin).map_err(|e| format!("{}: {e}", toml.display()))?;
    let out = args.out.unwrap_or_else(|| {
        base.join("target/wfhost-package")
            .join(format!("{}-{}", plugin.name, plugin.version))
    });
    if let Ok(existing) = Layout::open(&out).and_then(|l| l.contents())
        && existing.manifest.digest == package.manifest.digest
    {
        println!(
            "{} is up to date: {} {} ({})",
            out.display(),
            plugin.name,
            plugin.version,
            package.manifest.digest
        );
        return Ok(());
    }
    if out.join("index.json").is_file() {
        std::fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    Layout::create(&out, &package)?;
    println!(
        "packed {} {} into {}",
        plugin.name,
        plugin.version,
        out.display()
    );
    println!("  manifest  {}", package.manifest.digest);
    println!(
        "  component {} ({} bytes)",
        package.layer.digest,
        package.layer.bytes.len()
    );
    println!(
        "  world {}, WIT {}, requests [{}]",
        plugin.world,
        plugin.wit,
        plugin.capabilities.join(", ")
    );
    Ok(())
}

#[derive(clap::Args)]
pub struct SignArgs {
    /// The packed plugin (from `plugin pack`).
    package: PathBuf,
    /// The private key (from `plugin keygen`).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
}

pub fn sign(args: SignArgs) -> Result<(), String> {
    let key = signing::read_signing_key(&args.key)?;
    let mut layout = Layout::open(&args.package)?;
    let entry = layout.sign(&key)?;
    let contents = layout.contents()?;
    println!(
        "signed {} {} ({}) as {}",
        contents.package.plugin.name,
        contents.package.plugin.version,
        contents.manifest.digest,
        entry.signer
    );
    Ok(())
}

#[derive(clap::Args)]
pub struct PushArgs {
    /// The packed plugin (from `plugin pack`, signed with `plugin sign`).
    package: PathBuf,
    /// Where to: `oci://REGISTRY/REPOSITORY[:TAG]` (the tag defaults to the
    /// plugin's version).
    reference: String,
}

pub fn push(args: PushArgs) -> Result<(), String> {
    let layout = Layout::open(&args.package)?;
    let contents = layout.contents()?;
    let plugin = &contents.package.plugin;
    let mut reference = match super::parse_ref(&args.reference) {
        Ok(r) => r,
        Err(_) => super::parse_ref(&format!(
            "{}:{}",
            args.reference.trim_start_matches("oci://"),
            plugin.version
        ))?,
    };
    if reference.tag.is_none() && reference.digest.is_none() {
        reference.tag = Some(plugin.version.clone());
    }
    let mut blobs = vec![
        layout.blob(
            &contents.package.config.digest,
            wfhost_distribution::package::MAX_MANIFEST_BYTES,
        )?,
        layout.blob(
            &contents.package.layer.digest,
            wfhost_distribution::package::MAX_COMPONENT_BYTES,
        )?,
    ];
    blobs.sort_by(|a, b| a.digest.cmp(&b.digest));
    let registry = Registry::new(&reference)?;
    let digest = super::block_on(registry.push(&contents, &blobs))?;
    let signed = if contents.signatures.is_some() {
        "signed"
    } else {
        "unsigned"
    };
    println!(
        "pushed {} {} ({signed}) to {reference}",
        plugin.name, plugin.version
    );
    println!("  {}", reference.with_digest(&digest));
    Ok(())
}

/// Whether a component has DWARF sections (a dev-profile build): their
/// names are in the custom sections' headers.
fn carries_debug_info(bytes: &[u8]) -> bool {
    [&b".debug_info"[..], b".debug_line"]
        .iter()
        .any(|name| bytes.windows(name.len()).any(|w| w == *name))
}
