//! Builds the guest components (first-party plugins and test guests) for
//! `wasm32-wasip2` with a nested cargo invocation, then generates constants
//! that embed them. The nested build uses its own target directory inside
//! the workspace target dir, so it is cached like any other build and never
//! contends for the outer build's lock.

use std::env;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

/// (package, constant name, plugin name or "" for test-only guests)
const GUESTS: &[(&str, &str, &str)] = &[
    ("wfhost-plugin-actions-core", "ACTIONS_CORE", "actions-core"),
    ("wfhost-plugin-echo", "ECHO", "echo"),
    ("wfhost-plugin-exec", "EXEC", "exec"),
    ("wfhost-plugin-agent", "AGENT", "agent"),
    ("wfhost-plugin-scripted", "SCRIPTED", "scripted"),
    ("wfhost-plugin-llm", "LLM", "llm"),
    (
        "wfhost-example-escalate-actions",
        "EXAMPLE_ESCALATE_ACTIONS",
        "",
    ),
    ("wfhost-example-word-count", "EXAMPLE_WORD_COUNT", ""),
    ("wfhost-test-probe", "TEST_PROBE", ""),
    ("wfhost-test-net-probe", "TEST_NET_PROBE", ""),
    ("wfhost-test-noop", "TEST_NOOP", ""),
    ("wfhost-test-capability-probe", "TEST_CAPABILITY_PROBE", ""),
    ("wfhost-test-http-probe", "TEST_HTTP_PROBE", ""),
];

#[path = "src/wasm_target.rs"]
mod wasm_target;

use wasm_target::TARGET;

const PROFILE: &str = "guest";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.join("../..").canonicalize().unwrap();
    // One guest build per checkout: checkouts that share a target
    // directory (git worktrees with one CARGO_TARGET_DIR) must not embed
    // each other's guests, which `include_bytes!` would pick up from a
    // shared folder whenever another checkout rebuilt them.
    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
        .join("guests")
        .join(checkout_key(&workspace));

    for dir in [
        "wit",
        "sdk",
        "plugins",
        "examples/plugins",
        "tests/guests",
        "host/actions/src",
        "host/exec-config/src",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", workspace.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    ensure_wasm_target();

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace)
        .arg("build")
        .arg("--target")
        .arg(TARGET)
        .arg("--profile")
        .arg(PROFILE)
        .arg("--target-dir")
        .arg(&target_dir);
    for (package, _, _) in GUESTS {
        cmd.arg("-p").arg(package);
    }
    // Flags and wrappers meant for the host build (clippy, coverage, sanitizers)
    // must not leak into the guest build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .expect("failed to run cargo for the wasm guests");
    if !status.success() {
        panic!("building the wasm guests for {TARGET} failed ({status}); see the errors above");
    }

    let out_dir = target_dir.join(TARGET).join(PROFILE);
    let mut code = String::new();
    let mut builtins = String::new();
    for (package, constant, plugin) in GUESTS {
        let file = out_dir.join(format!("{}.wasm", package.replace('-', "_")));
        assert!(
            file.exists(),
            "expected guest component at {}",
            file.display()
        );
        let path = file.display().to_string();
        writeln!(code, "/// The `{package}` component.").unwrap();
        writeln!(
            code,
            "pub const {constant}: &[u8] = include_bytes!({path:?});"
        )
        .unwrap();
        writeln!(code, "/// Where the `{package}` component was built.").unwrap();
        writeln!(code, "pub const {constant}_PATH: &str = {path:?};").unwrap();
        if !plugin.is_empty() {
            writeln!(builtins, "    ({plugin:?}, {constant}),").unwrap();
        }
    }
    writeln!(
        code,
        "/// First-party plugins embedded in `wfhost`, by plugin name.\n\
         pub const BUILTIN_PLUGINS: &[(&str, &[u8])] = &[\n{builtins}];"
    )
    .unwrap();
    let dest = PathBuf::from(env::var_os("OUT_DIR").unwrap()).join("guests.rs");
    std::fs::write(dest, code).unwrap();
}

/// A short stable name for a checkout's path (FNV-1a, 64 bits).
fn checkout_key(workspace: &std::path::Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in workspace.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Makes sure the standard library for `wasm32-wasip2` is installed before
/// the (long) guest build starts (see `src/wasm_target.rs`, shared with
/// `wfhost plugin build`).
fn ensure_wasm_target() {
    println!("cargo:rerun-if-env-changed=RUSTUP_TOOLCHAIN");
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let toolchain = env::var("RUSTUP_TOOLCHAIN").ok();
    let dir = env::current_dir().unwrap();
    if let Err(message) = wasm_target::ensure(&dir, &rustc, toolchain.as_deref(), |note| {
        println!("cargo:warning={note}");
        // Cargo shows a build script's warnings again on every build that
        // reuses its output: a path that never exists makes the next build
        // run this script again, and its output (the target is there now)
        // carries no warning to show.
        let never = PathBuf::from(env::var_os("OUT_DIR").unwrap()).join("run-again-once");
        println!("cargo:rerun-if-changed={}", never.display());
    }) {
        panic!("{message}");
    }
}
