//! The bounds on text the host parses when someone else wrote it: the
//! files agents leave in a session (`tasks.yaml`, `acceptance.json`,
//! `status.json`, `spec.md`, `architecture.md`), `.output/block-*.json`,
//! an agent's JSON on stdout, telemetry, a worker's output, and the JSON
//! Schemas and regular expressions a manifest or WorkRail file supplies.
//!
//! One set of numbers for every parser, checked *before* (or while) the
//! text is parsed, so that no such text can exhaust the host's stack or
//! memory: the parsers and the drop of what they build recurse once per
//! level of nesting, and they run on async tasks and wasmtime fibers with
//! small stacks (2 MiB, less in a debug build's terms). What passes these
//! checks is parsed, walked and dropped on a 256 KiB stack (see the
//! tests), so a caller needs no thread of its own.
//!
//! - [`MAX_TEXT_BYTES`]: the size of one file or body (a block's output
//!   file may be [`MAX_BLOCK_OUTPUT_BYTES`]; an agent's stdout is capped by
//!   its block's output cap);
//! - [`MAX_DEPTH`]: how deep collections nest (YAML block indentation
//!   levels and flow `[`/`{` alike, JSON arrays and objects, a JSON
//!   Schema's objects);
//! - [`MAX_YAML_NODES`]: the YAML nodes a document makes, counting every
//!   node an alias repeats (a "billion laughs" is refused, not expanded);
//! - [`MAX_REGEX_BYTES`], [`MAX_REGEX_DFA_BYTES`]: a regular expression's
//!   compiled program and its lazy DFA cache ([`regex`], and a JSON
//!   Schema's `pattern`s, [`schema`], which may also backtrack at most
//!   [`MAX_REGEX_BACKTRACKS`] times).
//!
//! A check that still panics is contained ([`contained`]): its caller gets
//! an error to end the block with, never an abort.

use std::collections::HashMap;

/// The largest text the host parses from an agent or plugin (1 MiB).
pub const MAX_TEXT_BYTES: usize = 1 << 20;
/// The deepest nesting of collections the host parses (64 levels).
pub const MAX_DEPTH: usize = 64;
/// The largest `.output/block-<id>.json` an agent may write (its
/// `summary` and lists can be long).
pub const MAX_BLOCK_OUTPUT_BYTES: u64 = 4 << 20;
/// The most YAML nodes one document may make, aliases expanded.
pub const MAX_YAML_NODES: usize = 100_000;
/// The largest compiled program of a regular expression from a manifest,
/// a WorkRail file or an agent.
pub const MAX_REGEX_BYTES: usize = 1 << 20;
/// The largest lazy DFA cache of such a regular expression.
pub const MAX_REGEX_DFA_BYTES: usize = 2 << 20;

/// A bound that a text (or value) goes beyond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    #[error("larger than {MAX_TEXT_BYTES} bytes (the host's limit)")]
    Size,
    #[error("nested more than {MAX_DEPTH} levels deep (the host's limit)")]
    Depth,
    #[error(
        "more than {MAX_YAML_NODES} YAML nodes, counting those its aliases repeat (the host's limit)"
    )]
    Nodes,
}

/// Whether `len` bytes are within [`MAX_TEXT_BYTES`].
pub fn size(len: usize) -> Result<(), Exceeded> {
    if len > MAX_TEXT_BYTES {
        Err(Exceeded::Size)
    } else {
        Ok(())
    }
}

/// Why a YAML text is refused before it is loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlRefused {
    #[error("{0}")]
    Exceeded(#[from] Exceeded),
    #[error("not valid YAML: {0}")]
    Syntax(String),
}

/// Check a YAML text against the bounds before it is loaded into a tree:
/// its size, how deep its collections nest (block and flow alike) and how
/// many nodes it makes with its aliases expanded, where an alias counts
/// as deep and as large as what its anchor names. The text goes through
/// saphyr's event parser, which keeps its state on the heap (only loading
/// a tree recurses), and the check stops at the first event beyond a
/// bound, so a hostile text costs at most one pass over 1 MiB.
pub fn yaml(text: &str) -> Result<(), YamlRefused> {
    size(text.len())?;
    yaml_shape(text)
}

/// [`yaml`] but for the size.
fn yaml_shape(text: &str) -> Result<(), YamlRefused> {
    use saphyr_parser::{Event, Parser};

    let mut scan = YamlScan::default();
    for event in Parser::new_from_str(text) {
        let (event, _) = event.map_err(|e| match e.info() {
            // The scanner reads flow collections ahead of the events, up
            // to its own limit of 255 levels.
            "recursion limit exceeded" => YamlRefused::Exceeded(Exceeded::Depth),
            _ => YamlRefused::Syntax(e.to_string()),
        })?;
        match event {
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if scan.open.len() >= MAX_DEPTH {
                    return Err(Exceeded::Depth.into());
                }
                scan.count(1)?;
                scan.open.push(Open {
                    anchor,
                    nodes: 0,
                    height: 0,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(done) = scan.open.pop() else {
                    continue;
                };
                let nodes = done.nodes.saturating_add(1);
                if done.anchor > 0 {
                    // The loader keeps a copy of an anchored collection.
                    scan.count(nodes)?;
                }
                scan.finished(done.anchor, nodes, done.height + 1)?;
            }
            Event::Scalar(_, _, anchor, _) => {
                scan.count(1)?;
                scan.finished(anchor, 1, 0)?;
            }
            Event::Alias(id) => {
                // An alias to an unknown (or unfinished) anchor loads as a
                // bad value: one node.
                let (nodes, height) = scan.anchors.get(&id).copied().unwrap_or((1, 0));
                scan.count(nodes)?;
                scan.finished(0, nodes, height)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// A collection [`yaml`] has seen start but not end: its anchor, the nodes
/// within it so far and the levels of collections below it.
struct Open {
    anchor: usize,
    nodes: usize,
    height: usize,
}

#[derive(Default)]
struct YamlScan {
    open: Vec<Open>,
    /// Each anchor's node count and height (levels of collections: a
    /// scalar's is 0).
    anchors: HashMap<usize, (usize, usize)>,
    /// The nodes the loader will make.
    total: usize,
}

impl YamlScan {
    fn count(&mut self, nodes: usize) -> Result<(), Exceeded> {
        self.total = self.total.saturating_add(nodes);
        if self.total > MAX_YAML_NODES {
            return Err(Exceeded::Nodes);
        }
        Ok(())
    }

    /// A node is complete: `nodes` in it, `height` levels of collections,
    /// under the innermost open collection.
    fn finished(&mut self, anchor: usize, nodes: usize, height: usize) -> Result<(), Exceeded> {
        if self.open.len() + height > MAX_DEPTH {
            return Err(Exceeded::Depth);
        }
        if anchor > 0 {
            self.anchors.insert(anchor, (nodes, height));
        }
        if let Some(parent) = self.open.last_mut() {
            parent.nodes = parent.nodes.saturating_add(nodes);
            parent.height = parent.height.max(height);
        }
        Ok(())
    }
}

/// Check a JSON text's size and how deep its arrays and objects nest,
/// before `serde_json` (whose own limit is 128 levels) parses it. Only
/// the bounds are checked: a malformed text passes, for the parser to
/// report where it is wrong.
pub fn json(bytes: &[u8]) -> Result<(), Exceeded> {
    size(bytes.len())?;
    json_depth(bytes)
}

/// [`json`]'s depth check alone, for a text whose size another bound
/// already holds (a block's output file, an agent's capped stdout).
pub fn json_depth(bytes: &[u8]) -> Result<(), Exceeded> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(Exceeded::Depth);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// How deep `value`'s arrays and objects nest (a scalar: 0), without
/// recursion.
pub fn value_depth(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    deepest
}

/// Check a JSON value that is about to be compiled or walked recursively
/// (a JSON Schema, a value validated against one) against
/// [`MAX_DEPTH`].
pub fn value(value: &serde_json::Value) -> Result<(), Exceeded> {
    if value_depth(value) > MAX_DEPTH {
        Err(Exceeded::Depth)
    } else {
        Ok(())
    }
}

/// How often a JSON Schema `pattern` (lookarounds allowed, so it may
/// backtrack) may backtrack on one value before it fails.
pub const MAX_REGEX_BACKTRACKS: usize = 1_000_000;

/// Compile a JSON Schema that a manifest, a WorkRail file or a plugin
/// supplies: refused when nested deeper than [`MAX_DEPTH`], and its
/// `pattern`s compiled within the regular-expression bounds. The error
/// says why, for the caller to prefix.
pub fn schema(schema: &serde_json::Value) -> Result<jsonschema::Validator, String> {
    value(schema).map_err(|e| format!("the schema is {e}"))?;
    jsonschema::options()
        .with_pattern_options(
            jsonschema::PatternOptions::fancy_regex()
                .backtrack_limit(MAX_REGEX_BACKTRACKS)
                .size_limit(MAX_REGEX_BYTES)
                .dfa_size_limit(MAX_REGEX_DFA_BYTES),
        )
        .build(schema)
        .map_err(|e| e.to_string())
}

/// A builder for a regular expression written for JavaScript's `RegExp`
/// (a WorkRail file's validation `pattern` or `matches` condition):
/// look-around and backreferences allowed, as there, so matching may
/// backtrack — at most [`MAX_REGEX_BACKTRACKS`] times per match, after
/// which the match fails with an error — and the parts without them
/// compiled within the bounds of [`regex`].
pub fn backtracking_regex(pattern: &str) -> fancy_regex::RegexBuilder {
    let mut builder = fancy_regex::RegexBuilder::new(pattern);
    builder
        .backtrack_limit(MAX_REGEX_BACKTRACKS)
        .delegate_size_limit(MAX_REGEX_BYTES)
        .delegate_dfa_size_limit(MAX_REGEX_DFA_BYTES);
    builder
}

/// A builder for a regular expression from a manifest, a WorkRail file or
/// an agent: its compiled program, its lazy DFA and its nesting bounded.
pub fn regex(pattern: &str) -> regex::RegexBuilder {
    let mut builder = regex::RegexBuilder::new(pattern);
    builder
        .size_limit(MAX_REGEX_BYTES)
        .dfa_size_limit(MAX_REGEX_DFA_BYTES)
        .nest_limit(MAX_DEPTH as u32);
    builder
}

/// Run a check of untrusted text, turning a panic into an error that
/// names `what` was checked: the caller fails its block with it instead
/// of taking the process down.
pub fn contained<T>(what: &str, check: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)) {
        Ok(result) => result,
        Err(panic) => Err(format!(
            "{what}: the host's check failed ({}), so it was not accepted",
            panic_message(panic.as_ref())
        )),
    }
}

/// What a caught panic said, its control characters shown.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let why = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    crate::text::escape(&why)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Run `f` on a thread with a 256 KiB stack: what the bounds let
    /// through must fit in it (a wasmtime fiber has 2 MiB).
    pub(crate) fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    fn nested_block(depth: usize) -> String {
        format!("tasks:\n  {}x\n", "- ".repeat(depth))
    }

    #[test]
    fn yaml_depth_counts_block_and_flow_nesting() {
        // `tasks:` is one level (its mapping), each `- ` one more.
        yaml(&nested_block(MAX_DEPTH - 1)).unwrap();
        assert_eq!(
            yaml(&nested_block(MAX_DEPTH)),
            Err(YamlRefused::Exceeded(Exceeded::Depth))
        );
        let indented: String = (0..MAX_DEPTH + 1)
            .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
            .collect::<String>()
            + &"  ".repeat(MAX_DEPTH + 1)
            + "x\n";
        assert_eq!(yaml(&indented), Err(YamlRefused::Exceeded(Exceeded::Depth)));
        let flow = |n: usize| format!("tasks: {}{}\n", "[".repeat(n), "]".repeat(n));
        yaml(&flow(MAX_DEPTH - 1)).unwrap();
        assert_eq!(
            yaml(&flow(MAX_DEPTH)),
            Err(YamlRefused::Exceeded(Exceeded::Depth))
        );
        let mixed = format!("a: {}{}\n", "[{k: ".repeat(40), "}]".repeat(40));
        assert_eq!(yaml(&mixed), Err(YamlRefused::Exceeded(Exceeded::Depth)));
        assert!(matches!(yaml("a: [\n"), Err(YamlRefused::Syntax(_))));
    }

    #[test]
    fn an_alias_is_as_deep_and_as_large_as_its_anchor() {
        // Each level nests the previous anchor one deeper: deep only
        // through its aliases.
        let mut deep = String::from("a0: &a0 [x]\n");
        for i in 1..MAX_DEPTH {
            deep.push_str(&format!("a{i}: &a{i} [*a{}]\n", i - 1));
        }
        assert_eq!(yaml(&deep), Err(YamlRefused::Exceeded(Exceeded::Depth)));
        let mut laughs = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            laughs.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert_eq!(yaml(&laughs), Err(YamlRefused::Exceeded(Exceeded::Nodes)));
        yaml("a: &x {k: [1, 2]}\nb: *x\nc: *x\n").unwrap();
    }

    #[test]
    fn json_depth_is_counted_outside_strings() {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        json(deep(MAX_DEPTH).as_bytes()).unwrap();
        assert_eq!(json(deep(MAX_DEPTH + 1).as_bytes()), Err(Exceeded::Depth));
        let quoted = format!(r#"{{"a": "{}\"{}"}}"#, "[".repeat(100), "{".repeat(100));
        json(quoted.as_bytes()).unwrap();
        assert_eq!(json(&vec![b' '; MAX_TEXT_BYTES + 1]), Err(Exceeded::Size));
        let value: serde_json::Value = serde_json::from_str(&deep(MAX_DEPTH)).unwrap();
        assert_eq!(value_depth(&value), MAX_DEPTH);
        assert_eq!(value_depth(&serde_json::json!({"a": [1, {"b": {}}]})), 4);
        assert_eq!(value_depth(&serde_json::json!(1)), 0);
    }

    #[test]
    fn what_the_bounds_let_through_fits_a_small_stack() {
        on_small_stack(|| {
            // At the limit: loaded, walked and dropped.
            let block = nested_block(MAX_DEPTH - 1);
            yaml(&block).unwrap();
            use saphyr::LoadableYamlNode;
            drop(saphyr::Yaml::load_from_str(&block).unwrap());
            let flow = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
            json(flow.as_bytes()).unwrap();
            let v: serde_json::Value = serde_json::from_str(&flow).unwrap();
            drop(v);
            // Far beyond it: refused before anything recursed, and fast
            // (the scan stops at the first level too many). A million
            // levels are 2 MB, over the size bound; the depth scan alone
            // refuses them too.
            for depth in [1_000, 1_000_000] {
                let text = nested_block(depth);
                let started = std::time::Instant::now();
                assert_eq!(
                    yaml_shape(&text),
                    Err(YamlRefused::Exceeded(Exceeded::Depth))
                );
                let flow = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
                assert_eq!(
                    yaml_shape(&flow),
                    Err(YamlRefused::Exceeded(Exceeded::Depth))
                );
                assert!(started.elapsed() < std::time::Duration::from_secs(2));
            }
            assert_eq!(
                yaml(&nested_block(1_000_000)),
                Err(YamlRefused::Exceeded(Exceeded::Size))
            );
        });
    }

    #[test]
    fn regexes_from_manifests_are_bounded() {
        assert!(regex("a{1000}{1000}").build().is_err());
        let nested = format!(
            "{}a{}",
            "(".repeat(MAX_DEPTH + 1),
            ")".repeat(MAX_DEPTH + 1)
        );
        assert!(regex(&nested).build().is_err());
        assert!(regex("^T-[0-9]+$").build().unwrap().is_match("T-001"));
    }

    #[test]
    fn schemas_are_bounded_before_they_are_compiled() {
        let mut deep = serde_json::json!({"type": "string"});
        for _ in 0..MAX_DEPTH {
            deep = serde_json::json!({"items": deep});
        }
        let e = schema(&deep).unwrap_err();
        assert!(e.contains("nested more than 64 levels deep"), "{e}");
        let v =
            schema(&serde_json::json!({"type": "string", "pattern": "^(?=T)T-[0-9]+$"})).unwrap();
        assert!(v.is_valid(&serde_json::json!("T-1")) && !v.is_valid(&serde_json::json!("X")));
    }

    #[test]
    fn a_panicking_check_is_an_error() {
        let e = contained::<()>("tasks.yaml", || panic!("boom")).unwrap_err();
        assert!(e.starts_with("tasks.yaml: ") && e.contains("boom"), "{e}");
        assert_eq!(contained("x", || Ok(3)), Ok(3));
    }
}
