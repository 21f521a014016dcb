//! Static checks that JSON parsing cannot make: references between nodes,
//! blocks, workers and plugins, names, grants, action grammar, lanes. Each
//! error names its place with a JSON pointer.

use std::path::Path;

use crate::command::EngineCommand;

use super::{
    Block, CORE_VERBS, DEFAULT_ACTION_HANDLER, MAX_LANES, ManifestError, ParallelGroup, Transition,
    Workflow, is_valid_id,
};
use crate::json_pointer::pointer;

/// Every static error of `wf`, in manifest order.
pub fn check(file: &Path, wf: &Workflow, builtin_plugins: &[&str]) -> Vec<ManifestError> {
    let mut checker = Checker {
        file,
        wf,
        builtin_plugins,
        errors: Vec::new(),
    };
    checker.workflow();
    checker.plugins();
    checker.action_handlers();
    for (node_id, node) in &wf.nodes {
        checker.node(node_id, node);
        for (block_id, block) in &node.blocks {
            let place = BlockPlace {
                node: node_id,
                block: block_id,
            };
            checker.block(&place, block);
        }
    }
    checker.errors
}

struct Checker<'a> {
    file: &'a Path,
    wf: &'a Workflow,
    builtin_plugins: &'a [&'a str],
    errors: Vec<ManifestError>,
}

/// Where a block is: for its JSON pointers and its relative jumps.
struct BlockPlace<'a> {
    node: &'a str,
    block: &'a str,
}

impl BlockPlace<'_> {
    fn at(&self, rest: &[&str]) -> String {
        let mut parts = vec!["nodes", self.node, "blocks", self.block];
        parts.extend_from_slice(rest);
        pointer(&parts)
    }
}

fn name_rule(kind: &str, name: &str) -> String {
    format!("{kind} name `{name}` may only use letters, digits, `_` and `-`")
}

impl Checker<'_> {
    fn err(&mut self, at: String, message: String) {
        self.errors.push(ManifestError {
            file: self.file.to_path_buf(),
            location: Some(at),
            message,
        });
    }

    fn plugin_known(&self, name: &str) -> bool {
        self.wf.plugins.contains_key(name) || self.builtin_plugins.contains(&name)
    }

    fn worker_known(&self, name: &str) -> bool {
        super::is_engine_worker(name) || self.plugin_known(name)
    }

    /// The workflow's own fields: id, nodes, start, handler, inputs,
    /// templates.
    fn workflow(&mut self) {
        let wf = self.wf;
        if wf.id.trim().is_empty() {
            self.err(pointer(&["id"]), "workflow id must not be empty".into());
        }
        if wf.nodes.is_empty() {
            self.err(
                pointer(&["nodes"]),
                "a workflow needs at least one node".into(),
            );
        }
        if !wf.nodes.contains_key(&wf.start_node) {
            self.err(
                pointer(&["start_node"]),
                format!("start node `{}` is not defined in `nodes`", wf.start_node),
            );
        }
        if !self.plugin_known(&wf.action_handler) {
            self.err(
                pointer(&["action_handler"]),
                format!(
                    "action handler `{}` is neither built in nor declared in `plugins`",
                    wf.action_handler
                ),
            );
        }
        if let Some(schema) = &wf.inputs {
            for p in crate::run::inputs::check_schema(schema) {
                self.err(p.pointer, p.message);
            }
        }
        for (at, message) in crate::run::template::check(wf) {
            let parts: Vec<&str> = at.iter().map(String::as_str).collect();
            self.err(pointer(&parts), message);
        }
    }

    /// Each plugin has a path or is built in, and is granted only
    /// capabilities this host offers.
    fn plugins(&mut self) {
        for (name, spec) in &self.wf.plugins {
            if name == super::EXTERNAL_WORKER {
                self.err(
                    pointer(&["plugins", name]),
                    format!(
                        "`{name}` is the worker of blocks an MCP client performs, not a plugin: choose another name"
                    ),
                );
            }
            self.plugin_source(name, spec);
            self.plugin_http(name, spec);
            for (i, grant) in spec.grants.iter().enumerate() {
                if crate::policy::capabilities::find(grant).is_none() {
                    self.err(
                        pointer(&["plugins", name, "grants", &i.to_string()]),
                        format!(
                            "`{grant}` is not a capability this host offers (offered: {})",
                            offered_capabilities()
                        ),
                    );
                }
            }
        }
    }

    /// `http` is granted with the hosts it may reach, and only then.
    fn plugin_http(&mut self, name: &str, spec: &super::PluginSpec) {
        let granted = spec.grants.iter().any(|g| g == "http");
        match &spec.http {
            None if granted => self.err(
                pointer(&["plugins", name, "grants"]),
                format!(
                    "plugin `{name}` is granted `http` but no host: add `plugins.{name}.http.allow`"
                ),
            ),
            Some(_) if !granted => self.err(
                pointer(&["plugins", name, "http"]),
                format!("`http` lists hosts, but plugin `{name}` is not granted `http`: add \"http\" to its grants"),
            ),
            Some(grant) => {
                for (at, message) in grant.check() {
                    self.err(format!("{}{at}", pointer(&["plugins", name, "http"])), message);
                }
            }
            None => {}
        }
    }

    /// A plugin comes from exactly one place: a file, a published package
    /// or the host's built-in plugins.
    fn plugin_source(&mut self, name: &str, spec: &super::PluginSpec) {
        match (&spec.path, &spec.reference) {
            (Some(_), Some(_)) => self.err(
                pointer(&["plugins", name]),
                format!("plugin `{name}` has both `path` and `ref`: choose one"),
            ),
            (Some(path), None) if path.as_os_str().is_empty() => self.err(
                pointer(&["plugins", name, "path"]),
                "plugin path must not be empty".into(),
            ),
            (None, Some(reference)) => {
                if let Err(message) = super::plugin_ref::check(reference) {
                    self.err(pointer(&["plugins", name, "ref"]), message);
                }
            }
            (None, None) if !self.builtin_plugins.contains(&name) => self.err(
                pointer(&["plugins", name]),
                format!(
                    "plugin `{name}` has no `path` or `ref` and is not built in (built in: {})",
                    self.builtin_plugins.join(", ")
                ),
            ),
            _ => {}
        }
    }

    /// Registered verbs: well-formed, not a core verb, served by a plugin.
    fn action_handlers(&mut self) {
        for (verb, handler) in &self.wf.action_handlers {
            let at = pointer(&["action_handlers", verb]);
            let well_formed = !verb.is_empty()
                && verb
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !well_formed {
                self.err(
                    at.clone(),
                    format!("action verb `{verb}` must be upper-case letters, digits and `_`"),
                );
            }
            if CORE_VERBS.contains(&verb.as_str()) {
                self.err(
                    at.clone(),
                    format!("`{verb}` is a verb of the core grammar and cannot be re-registered"),
                );
            }
            if !self.plugin_known(handler) {
                self.err(
                    at,
                    format!(
                        "action handler `{handler}` is neither built in nor declared in `plugins`"
                    ),
                );
            }
        }
    }

    fn node(&mut self, node_id: &str, node: &super::Node) {
        if !is_valid_id(node_id) {
            self.err(pointer(&["nodes", node_id]), name_rule("node", node_id));
        }
        if !node.blocks.contains_key(&node.entry_block) {
            self.err(
                pointer(&["nodes", node_id, "entry_block"]),
                format!(
                    "entry block `{}` is not a block of node `{node_id}`",
                    node.entry_block
                ),
            );
        }
    }

    fn block(&mut self, place: &BlockPlace<'_>, block: &Block) {
        if !is_valid_id(place.block) {
            self.err(place.at(&[]), name_rule("block", place.block));
        }
        if !self.worker_known(&block.worker) {
            self.err(
                place.at(&["worker"]),
                format!(
                    "unknown worker `{}`: neither built in ({}, {}) nor declared in `plugins`",
                    block.worker,
                    self.builtin_plugins.join(", "),
                    super::ENGINE_WORKERS.join(", "),
                ),
            );
        }
        if let Err((at, why)) = crate::control::check_config(&block.worker, &block.config)
            .and_then(|()| crate::timers::check_config(&block.worker, &block.config))
        {
            self.err(format!("{}{at}", place.at(&["config"])), why);
        }
        self.block_settings(place, block);
        self.artifact_gates(place, block);
        if let Some(group) = &block.parallel {
            if block.worker == super::EXTERNAL_WORKER {
                self.err(
                    place.at(&["parallel"]),
                    "an `external` block is performed by one MCP client: it cannot fan out into lanes".into(),
                );
            } else if crate::control::is_control(&block.worker)
                || block.worker == crate::timers::SLEEP_WORKER
            {
                self.err(
                    place.at(&["parallel"]),
                    format!(
                        "a `{}` block is decided by the engine: it cannot fan out into lanes",
                        block.worker
                    ),
                );
            }
            self.parallel(place, block, group);
        }
        for (i, t) in block.transitions.iter().enumerate() {
            self.transition(place, i, t);
        }
    }

    /// Artifact gates guard a block a worker runs, once each, in a run
    /// that keeps its session folder.
    fn artifact_gates(&mut self, place: &BlockPlace<'_>, block: &Block) {
        if block.artifact_gates.is_empty() {
            return;
        }
        let at = place.at(&["artifact_gates"]);
        if block.worker == super::EXTERNAL_WORKER
            || block.worker == crate::timers::SLEEP_WORKER
            || crate::control::is_control(&block.worker)
            || block.parallel.is_some()
        {
            self.err(
                at.clone(),
                "artifact gates guard a block one worker runs: not an `external`, control or parallel block".into(),
            );
        }
        if self.wf.session_files == Some(false) {
            self.err(
                at.clone(),
                "artifact gates read the session folder, which `\"session_files\": false` turns off".into(),
            );
        }
        for (i, gate) in block.artifact_gates.iter().enumerate() {
            if block.artifact_gates[..i].contains(gate) {
                self.err(
                    place.at(&["artifact_gates", &i.to_string()]),
                    format!("`{}` is listed twice", gate.file_name()),
                );
            }
        }
    }

    /// Schema, attempts, merge strategy and restrictions.
    fn block_settings(&mut self, place: &BlockPlace<'_>, block: &Block) {
        if let Some(schema) = &block.validation_schema
            && !schema.is_string()
            && let Err(e) = crate::run::validation::OutputSchema::compile(schema)
        {
            self.err(place.at(&["validation_schema"]), e);
        }
        if block.max_attempts == Some(0) {
            self.err(
                place.at(&["max_attempts"]),
                "max_attempts must be at least 1".into(),
            );
        }
        if let Some(policy) = &block.retry {
            for (at, why) in policy.problems() {
                self.err(format!("{}{at}", place.at(&["retry"])), why);
            }
        }
        if let Err((i, e)) = crate::run::merge::parse_all(&block.payload_merge_strategy) {
            self.err(
                place.at(&["payload_merge_strategy", &i.to_string()]),
                e.to_string(),
            );
        }
        if let Some(patterns) = &block.file_restrictions
            && let Err(e) = crate::workspace::restrictions::RestrictionPlan::new(Some(patterns))
        {
            self.err(place.at(&["file_restrictions"]), e.to_string());
        }
    }

    fn parallel(&mut self, place: &BlockPlace<'_>, block: &Block, group: &ParallelGroup) {
        let lanes_at = place.at(&["parallel", "lanes"]);
        if let Some(over) = &group.over {
            self.over(place, group, over);
        } else if group.lanes.is_empty() {
            self.err(
                lanes_at.clone(),
                "a parallel group needs at least one lane".into(),
            );
        }
        if group.lanes.len() > MAX_LANES {
            self.err(
                lanes_at,
                format!(
                    "{} lanes is over the limit of {MAX_LANES}",
                    group.lanes.len()
                ),
            );
        }
        if block.validation_schema.is_some() {
            self.err(
                place.at(&["validation_schema"]),
                "a parallel block's lanes are not validated against a schema; validate in a block after it".into(),
            );
        }
        for (lane, spec) in &group.lanes {
            let at = |rest: &str| {
                let mut parts = vec!["parallel", "lanes", lane.as_str()];
                if !rest.is_empty() {
                    parts.push(rest);
                }
                place.at(&parts)
            };
            if !is_valid_id(lane) {
                self.err(at(""), name_rule("lane", lane));
            }
            if !matches!(
                spec.config,
                serde_json::Value::Null | serde_json::Value::Object(_)
            ) {
                self.err(
                    at("config"),
                    "a lane's config must be an object (merged over the block's)".into(),
                );
            }
            if let Some(patterns) = &spec.file_restrictions
                && let Err(e) = crate::workspace::restrictions::RestrictionPlan::new(Some(patterns))
            {
                self.err(at("file_restrictions"), e.to_string());
            }
        }
    }

    /// `parallel.over` names a list the run can have: its form, an input
    /// the schema declares, and no `lanes` beside it.
    fn over(&mut self, place: &BlockPlace<'_>, group: &ParallelGroup, over: &str) {
        let at = place.at(&["parallel", "over"]);
        if !group.lanes.is_empty() {
            self.err(
                at.clone(),
                "a parallel group has either `over` (one lane per item of a list) or `lanes`, not both".into(),
            );
        }
        let parsed = match crate::parallel::items::Over::parse(over) {
            Ok(parsed) => parsed,
            Err(e) => return self.err(at, e),
        };
        if parsed.source != crate::parallel::items::Source::Inputs {
            return;
        }
        let Some(schema) = &self.wf.inputs else {
            return self.err(
                at,
                format!("`{over}` names an input, but the workflow declares no `inputs`"),
            );
        };
        let declared = crate::run::inputs::properties(schema).any(|(k, _)| k == parsed.name);
        if !declared && !crate::run::inputs::is_open(schema) {
            self.err(
                at,
                format!(
                    "`{over}`: the inputs schema declares no input `{}`",
                    parsed.name
                ),
            );
        }
    }

    /// A transition's signal is set; an action of the core grammar parses
    /// and names nodes and blocks that exist.
    fn transition(&mut self, place: &BlockPlace<'_>, i: usize, t: &Transition) {
        let idx = i.to_string();
        if t.on_signal.trim().is_empty() {
            self.err(
                place.at(&["transitions", &idx, "on_signal"]),
                "on_signal must not be empty".into(),
            );
        }
        if self.wf.handler_for(&t.action) != DEFAULT_ACTION_HANDLER {
            return;
        }
        let at = place.at(&["transitions", &idx, "action"]);
        let problem = match crate::actions::parse(&t.action) {
            Err(e) => Some(e.to_string()),
            Ok(command) => self.missing_target(place.node, &t.action, &command),
        };
        if let Some(message) = problem {
            self.err(at, message);
        }
    }

    /// What a jump or call names that does not exist.
    fn missing_target(
        &self,
        node_id: &str,
        action: &str,
        command: &EngineCommand,
    ) -> Option<String> {
        let block_exists = |node: &str, block: &str| {
            self.wf
                .nodes
                .get(node)
                .is_some_and(|n| n.blocks.contains_key(block))
        };
        match command {
            EngineCommand::Jump(target) => {
                let node = target.node.as_deref().unwrap_or(node_id);
                if !self.wf.nodes.contains_key(node) {
                    Some(format!(
                        "`{action}` jumps to node `{node}`, which does not exist"
                    ))
                } else if !block_exists(node, &target.block) {
                    Some(format!(
                        "`{action}` jumps to block `{}`, which does not exist in node `{node}`",
                        target.block
                    ))
                } else {
                    None
                }
            }
            EngineCommand::Call { node, return_to } => {
                if !self.wf.nodes.contains_key(node) {
                    return Some(format!(
                        "`{action}` calls node `{node}`, which does not exist"
                    ));
                }
                let back = return_to.as_ref()?;
                let back_node = back.node.as_deref().unwrap_or(node_id);
                (!block_exists(back_node, &back.block)).then(|| {
                    format!(
                        "`{action}` returns to `{back_node}.{}`, which does not exist",
                        back.block
                    )
                })
            }
            _ => None,
        }
    }
}

fn offered_capabilities() -> String {
    let offered: Vec<&str> = crate::policy::capabilities::CAPABILITIES
        .iter()
        .map(|c| c.name)
        .collect();
    if offered.is_empty() {
        "none yet".to_string()
    } else {
        offered.join(", ")
    }
}
