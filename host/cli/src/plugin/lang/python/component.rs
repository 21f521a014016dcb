//! What `plugin build` does to the component componentize-py writes:
//! satisfy its `wasi:sockets` imports with a stub and record the declared
//! signals.
//!
//! componentize-py links CPython against a wasi-libc whose socket functions
//! import `wasi:sockets/*`, whether the plugin uses them or not, and the
//! host never grants those. So the component is composed with a stub
//! component exporting every `wasi:sockets` interface it imports, each
//! function trapping: the result imports only the base WASI interfaces
//! and its world's. A plugin that opens a socket traps, as it would be
//! refused by the host anyway.

use indexmap::IndexMap;
use wit_component::{ComponentEncoder, StringEncoding, dummy_module, embed_component_metadata};
use wit_parser::decoding::{DecodedWasm, decode};
use wit_parser::{ManglingAndAbi, Resolve, World, WorldItem, WorldKey};

/// The import prefix the stub satisfies.
const STUBBED: &str = "wasi:sockets/";

/// The custom section the host reads declared signals from (the Rust
/// SDK's `declare_signals!` writes the same).
const SIGNALS_SECTION: &str = wfhost_distribution::component::SIGNALS_SECTION;

/// `component` without its `wasi:sockets` imports (unchanged when it has
/// none).
pub fn stub_sockets(component: &[u8]) -> Result<Vec<u8>, String> {
    let (resolve, world) = match decode(component) {
        Ok(DecodedWasm::Component(resolve, world)) => (resolve, world),
        Ok(DecodedWasm::WitPackage(..)) => {
            return Err("componentize-py wrote a WIT package, not a component".into());
        }
        Err(e) => return Err(format!("cannot read the component's WIT: {e:#}")),
    };
    let (stubbed, kept): (IndexMap<WorldKey, WorldItem>, IndexMap<WorldKey, WorldItem>) = resolve
        .worlds[world]
        .imports
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .partition(|(key, _)| resolve.name_world_key(key).starts_with(STUBBED));
    if stubbed.is_empty() {
        return Ok(component.to_vec());
    }
    let stub = stub_component(&resolve, world, kept, stubbed)?;
    compose(component, &stub)
}

/// A component exporting `exports` with every function trapping. It
/// imports what the component imports besides (the types the exports use,
/// `wasi:io` streams and pollables, come from there).
fn stub_component(
    resolve: &Resolve,
    world: wit_parser::WorldId,
    imports: IndexMap<WorldKey, WorldItem>,
    exports: IndexMap<WorldKey, WorldItem>,
) -> Result<Vec<u8>, String> {
    let mut resolve = resolve.clone();
    let original = &resolve.worlds[world];
    let stub = World {
        name: "wfhost-sockets-stub".into(),
        imports,
        exports,
        package: original.package,
        docs: Default::default(),
        stability: Default::default(),
        includes: Vec::new(),
        span: Default::default(),
    };
    let stub = resolve.worlds.alloc(stub);
    let mut module = dummy_module(&resolve, stub, ManglingAndAbi::Standard32);
    embed_component_metadata(&mut module, &resolve, stub, StringEncoding::UTF8)
        .map_err(|e| format!("cannot describe the sockets stub: {e:#}"))?;
    ComponentEncoder::default()
        .module(&module)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| format!("cannot encode the sockets stub: {e:#}"))
}

/// `component` with its imports that `stub` exports wired to it.
fn compose(component: &[u8], stub: &[u8]) -> Result<Vec<u8>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let main = dir.path().join("plugin.wasm");
    let write = |path: &std::path::Path, bytes: &[u8]| {
        std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
    };
    write(&main, component)?;
    write(&dir.path().join("sockets-stub.wasm"), stub)?;
    let config = wasm_compose::config::Config {
        dir: dir.path().to_path_buf(),
        definitions: vec!["sockets-stub.wasm".into()],
        ..Default::default()
    };
    wasm_compose::composer::ComponentComposer::new(&main, &config)
        .compose()
        .map_err(|e| format!("cannot compose the sockets stub into the component: {e:#}"))
}

/// `component` with a `wfhost:signals` custom section listing `signals`
/// (nothing added when there are none: the host then assumes any).
pub fn with_signals(mut component: Vec<u8>, signals: &[String]) -> Vec<u8> {
    if signals.is_empty() {
        return component;
    }
    let data: String = signals.iter().map(|s| format!("{s}\n")).collect();
    let mut body = Vec::new();
    leb128(&mut body, SIGNALS_SECTION.len());
    body.extend_from_slice(SIGNALS_SECTION.as_bytes());
    body.extend_from_slice(data.as_bytes());
    component.push(0); // a custom section
    leb128(&mut component, body.len());
    component.extend_from_slice(&body);
    component
}

fn leb128(out: &mut Vec<u8>, mut value: usize) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The top-level imports of `component`.
pub fn imports(component: &[u8]) -> Result<Vec<String>, String> {
    wfhost_distribution::component::inspect(component)
        .map(|info| info.imports)
        .map_err(|e| format!("the built component {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty component: the header alone.
    const EMPTY: &[u8] = b"\0asm\x0d\0\x01\0";

    #[test]
    fn signals_are_a_custom_section_the_host_reads() {
        let bytes = EMPTY.to_vec();
        let signals = vec!["SIGNAL:SUCCESS".to_string(), "SIGNAL:EMPTY".to_string()];
        let with = with_signals(bytes.clone(), &signals);
        assert_eq!(
            wfhost_runtime::admission::declared_signals(&with),
            Some(signals)
        );
        assert_eq!(with_signals(bytes.clone(), &[]), bytes);
    }

    #[test]
    fn long_sections_have_multi_byte_sizes() {
        let mut out = Vec::new();
        leb128(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
    }

    #[test]
    fn a_component_without_sockets_is_left_alone() {
        let bytes = EMPTY.to_vec();
        assert_eq!(stub_sockets(&bytes).unwrap(), bytes);
    }
}
