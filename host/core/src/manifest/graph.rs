//! Renderings of a workflow's graph for `wfhost inspect`: plain text,
//! Mermaid and Graphviz DOT. Edges come from the default action grammar;
//! actions it does not know are shown as their text.

use std::fmt::Write as _;

use crate::command::EngineCommand;
use crate::manifest::Workflow;

/// An edge out of a block.
enum Edge {
    To {
        node: String,
        block: String,
        label: String,
        call: bool,
    },
    Terminal {
        kind: &'static str,
        label: String,
    },
}

fn edges(wf: &Workflow, node: &str, block: &str) -> Vec<Edge> {
    let Some(b) = wf.nodes.get(node).and_then(|n| n.blocks.get(block)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in &b.transitions {
        let label = t.on_signal.clone();
        let parsed = if wf.handler_for(&t.action) == crate::manifest::DEFAULT_ACTION_HANDLER {
            crate::actions::parse(&t.action)
        } else {
            Err(crate::actions::ActionSyntaxError::Unknown(t.action.clone()))
        };
        match parsed {
            Ok(EngineCommand::Jump(r)) => out.push(Edge::To {
                node: r.node.unwrap_or_else(|| node.to_string()),
                block: r.block,
                label,
                call: false,
            }),
            Ok(EngineCommand::Call {
                node: callee,
                return_to,
            }) => {
                if let Some(entry) = wf.nodes.get(&callee).map(|n| n.entry_block.clone()) {
                    out.push(Edge::To {
                        node: callee,
                        block: entry,
                        label: format!("{label} (call)"),
                        call: true,
                    });
                }
                let (rn, rb) = return_to
                    .map(|r| (r.node.unwrap_or_else(|| node.to_string()), r.block))
                    .unwrap_or_else(|| (node.to_string(), block.to_string()));
                out.push(Edge::To {
                    node: rn,
                    block: rb,
                    label: "return".into(),
                    call: true,
                });
            }
            Ok(EngineCommand::Return) => out.push(Edge::Terminal {
                kind: "RETURN",
                label,
            }),
            Ok(EngineCommand::End) => out.push(Edge::Terminal { kind: "END", label }),
            Ok(EngineCommand::Fail(_)) => out.push(Edge::Terminal {
                kind: "FAIL",
                label,
            }),
            Ok(EngineCommand::Gate(_)) => out.push(Edge::Terminal {
                kind: "GATE",
                label,
            }),
            Err(_) => out.push(Edge::Terminal {
                kind: "ACTION",
                label: format!("{label}: {}", t.action),
            }),
        }
    }
    out
}

/// Every edge of the workflow, with the id of the block it leaves.
fn all_edges(wf: &Workflow) -> Vec<(String, Edge)> {
    let mut out = Vec::new();
    for (node_id, node) in &wf.nodes {
        for block_id in node.blocks.keys() {
            for e in edges(wf, node_id, block_id) {
                out.push((id(node_id, block_id), e));
            }
        }
    }
    out
}

/// Indented text: the inputs (when the workflow declares them), nodes,
/// their blocks, each transition.
pub fn text(wf: &Workflow) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "workflow {}{} — start: {}",
        wf.id,
        wf.version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        wf.start_node
    );
    if let Some(schema) = &wf.inputs {
        let inputs = crate::run::inputs::describe(schema);
        match inputs.is_empty() {
            true => out.push_str("inputs: none\n"),
            false => out.push_str("inputs:\n"),
        }
        for line in inputs {
            let _ = writeln!(out, "  {line}");
        }
    }
    for (node_id, node) in &wf.nodes {
        let _ = writeln!(
            out,
            "node {node_id} (entry {}{})",
            node.entry_block,
            if node.context_inheritance {
                ""
            } else {
                ", isolated context"
            }
        );
        for (block_id, block) in &node.blocks {
            let _ = writeln!(out, "  block {block_id} [{}]", block.worker);
            for t in &block.transitions {
                let _ = writeln!(out, "    {} -> {}", t.on_signal, t.action);
            }
        }
    }
    out
}

fn id(node: &str, block: &str) -> String {
    format!("{node}__{block}").replace('-', "_")
}

fn esc(s: &str) -> String {
    s.replace('"', "'")
}

/// A Mermaid flowchart, one subgraph per node.
pub fn mermaid(wf: &Workflow) -> String {
    let mut out = String::from("flowchart TD\n");
    let mut terminals = std::collections::BTreeSet::new();
    for (node_id, node) in &wf.nodes {
        let _ = writeln!(out, "  subgraph {node_id}");
        for (block_id, block) in &node.blocks {
            let _ = writeln!(
                out,
                "    {}[\"{block_id}<br/>{}\"]",
                id(node_id, block_id),
                esc(&block.worker)
            );
        }
        let _ = writeln!(out, "  end");
    }
    if let Some(start) = wf.nodes.get(&wf.start_node) {
        let _ = writeln!(
            out,
            "  START(( )) --> {}",
            id(&wf.start_node, &start.entry_block)
        );
    }
    for (from, e) in all_edges(wf) {
        match e {
            Edge::To {
                node,
                block,
                label,
                call,
            } => {
                let arrow = if call { "-.->" } else { "-->" };
                let _ = writeln!(
                    out,
                    "  {} {arrow}|\"{}\"| {}",
                    from,
                    esc(&label),
                    id(&node, &block)
                );
            }
            Edge::Terminal { kind, label } => {
                terminals.insert(kind);
                let _ = writeln!(out, "  {} -->|\"{}\"| {kind}", from, esc(&label));
            }
        }
    }
    for kind in terminals {
        let _ = writeln!(out, "  {kind}(({kind}))");
    }
    out
}

/// A Graphviz digraph, one cluster per node.
pub fn dot(wf: &Workflow) -> String {
    let mut out = format!(
        "digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box];\n",
        esc(&wf.id)
    );
    let mut terminals = std::collections::BTreeSet::new();
    for (node_id, node) in &wf.nodes {
        let _ = writeln!(
            out,
            "  subgraph \"cluster_{node_id}\" {{\n    label=\"{node_id}\";"
        );
        for (block_id, block) in &node.blocks {
            let _ = writeln!(
                out,
                "    \"{}\" [label=\"{block_id}\\n[{}]\"];",
                id(node_id, block_id),
                esc(&block.worker)
            );
        }
        let _ = writeln!(out, "  }}");
    }
    if let Some(start) = wf.nodes.get(&wf.start_node) {
        let _ = writeln!(
            out,
            "  START [shape=point];\n  START -> \"{}\";",
            id(&wf.start_node, &start.entry_block)
        );
    }
    for (from, e) in all_edges(wf) {
        match e {
            Edge::To {
                node,
                block,
                label,
                call,
            } => {
                let style = if call { ", style=dashed" } else { "" };
                let _ = writeln!(
                    out,
                    "  \"{}\" -> \"{}\" [label=\"{}\"{style}];",
                    from,
                    id(&node, &block),
                    esc(&label)
                );
            }
            Edge::Terminal { kind, label } => {
                terminals.insert(kind);
                let _ = writeln!(
                    out,
                    "  \"{}\" -> \"{kind}\" [label=\"{}\"];",
                    from,
                    esc(&label)
                );
            }
        }
    }
    for kind in terminals {
        let _ = writeln!(out, "  \"{kind}\" [shape=doublecircle];");
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wf() -> Workflow {
        crate::manifest::parse(
            std::path::Path::new("t.json"),
            &serde_json::json!({"id": "w", "start_node": "main", "nodes": {
                "main": {"entry_block": "a", "blocks": {
                    "a": {"worker": "echo", "transitions": [
                        {"on_signal": "SIGNAL:SUCCESS", "action": "CALL:sub@b"},
                        {"on_signal": "SIGNAL:FAIL_DEFAULT", "action": "FAIL:x"}]},
                    "b": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "END"}]}}},
                "sub": {"entry_block": "s", "context_inheritance": false, "blocks": {
                    "s": {"worker": "echo", "transitions": [{"on_signal": "SIGNAL:SUCCESS", "action": "RETURN"}]}}}
            }})
            .to_string(),
        )
        .unwrap()
    }

    #[test]
    fn text_lists_nodes_blocks_and_transitions() {
        let t = text(&wf());
        assert!(t.contains("node sub (entry s, isolated context)"), "{t}");
        assert!(
            t.contains("  block a [echo]\n    SIGNAL:SUCCESS -> CALL:sub@b\n"),
            "{t}"
        );
    }

    #[test]
    fn mermaid_has_edges_calls_and_terminals() {
        let m = mermaid(&wf());
        assert!(m.starts_with("flowchart TD\n"));
        assert!(m.contains("START(( )) --> main__a"), "{m}");
        assert!(
            m.contains("main__a -.->|\"SIGNAL:SUCCESS (call)\"| sub__s"),
            "{m}"
        );
        assert!(m.contains("main__a -.->|\"return\"| main__b"), "{m}");
        assert!(m.contains("main__b -->|\"SIGNAL:SUCCESS\"| END"), "{m}");
        assert!(
            m.contains("RETURN((RETURN))") && m.contains("FAIL((FAIL))"),
            "{m}"
        );
    }

    #[test]
    fn dot_is_a_digraph_with_clusters() {
        let d = dot(&wf());
        assert!(d.starts_with("digraph \"w\" {"));
        assert!(d.contains("subgraph \"cluster_sub\""), "{d}");
        assert!(
            d.contains(
                "\"main__a\" -> \"sub__s\" [label=\"SIGNAL:SUCCESS (call)\", style=dashed];"
            ),
            "{d}"
        );
        assert!(d.trim_end().ends_with('}'));
    }
}
