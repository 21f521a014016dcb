//! The loop head (`wr.loop`): whether the run enters another iteration of
//! a loop's body or leaves the loop, and the loop variables it sets.
//!
//! The head keeps the loop's count of entered iterations in the run's
//! inputs under [`counter_key`], so that a resumed or forked run carries
//! on where it was; leaving the loop clears it (sets it to null), so that
//! entering the loop again later starts from the first iteration.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Decision;
use super::condition::Condition;

/// The config of a `wr.loop` block.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopSpec {
    /// The loop's id: names its counter.
    pub loop_id: String,
    pub kind: LoopKind,
    /// Iterations at most; the loop leaves quietly after the last one.
    pub max_iterations: u32,
    /// `while` / `until` over context variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<Value>,
    /// `while` / `until` decided by the body's `wr.loop_control` artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactSource>,
    /// `for`: a number, or the name of a context variable holding one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<Value>,
    /// `forEach`: the context variable holding the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<String>,
    pub iteration_var: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_var: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_var: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LoopKind {
    While,
    Until,
    For,
    ForEach,
}

/// Where a `wr.loop_control` decision comes from: the artifacts of these
/// body blocks (`node.block`), the last one in body order that has one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactSource {
    pub blocks: Vec<String>,
    /// The `loopId` the decisions name (default: the loop's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_id: Option<String>,
}

/// The artifact kind of a loop decision.
pub const LOOP_CONTROL_KIND: &str = "wr.loop_control";

/// The inputs key of a loop's entered-iterations counter.
pub fn counter_key(loop_id: &str) -> String {
    format!("wr.loop.{loop_id}")
}

impl LoopSpec {
    /// The config read strictly, with the reason it is malformed.
    pub fn parse(config: &Value) -> Result<LoopSpec, (String, String)> {
        let spec: LoopSpec = serde_path_to_error::deserialize(config).map_err(|e| {
            let at = crate::json_pointer::of_path(e.path());
            (at, e.into_inner().to_string())
        })?;
        let need = |ok: bool, key: &str, what: &str| {
            if ok {
                Ok(())
            } else {
                Err((format!("/{key}"), format!("a `{what}` loop needs `{key}`")))
            }
        };
        match spec.kind {
            LoopKind::While | LoopKind::Until => need(
                spec.condition.is_some() || spec.artifact.is_some(),
                "condition",
                "while/until",
            )?,
            LoopKind::For => need(spec.count.is_some(), "count", "for")?,
            LoopKind::ForEach => need(spec.items.is_some(), "items", "forEach")?,
        }
        if let Some(c) = &spec.condition {
            Condition::parse(c).map_err(|(at, why)| (format!("/condition{at}"), why))?;
        }
        if let Some(count) = &spec.count
            && !(count.is_u64() || count.as_str().is_some_and(|s| !s.is_empty()))
        {
            return Err((
                "/count".into(),
                "`count` is a whole number or the name of a context variable".into(),
            ));
        }
        Ok(spec)
    }

    /// Enter the next iteration, or leave the loop.
    pub fn decide(
        &self,
        inputs: &Map<String, Value>,
        artifacts: &BTreeMap<String, String>,
    ) -> Result<Decision, String> {
        let key = counter_key(&self.loop_id);
        let entered = inputs.get(&key).and_then(Value::as_u64).unwrap_or(0);
        let mut delta = Map::new();
        let go_on =
            entered < u64::from(self.max_iterations) && self.holds(entered, inputs, artifacts)?;
        if !go_on {
            delta.insert(key, Value::Null);
            return Ok(Decision {
                signal: super::EXIT.into(),
                inputs: delta,
            });
        }
        delta.insert(key, (entered + 1).into());
        delta.insert(self.iteration_var.clone(), (entered + 1).into());
        if self.kind == LoopKind::ForEach {
            let items = self.list(inputs)?;
            let index = usize::try_from(entered).unwrap_or(usize::MAX);
            if let Some(var) = &self.item_var {
                delta.insert(var.clone(), items[index].clone());
            }
            if let Some(var) = &self.index_var {
                delta.insert(var.clone(), entered.into());
            }
        }
        Ok(Decision {
            signal: super::ENTER.into(),
            inputs: delta,
        })
    }

    /// Whether iteration `n` (0-based) is due, by the loop's kind.
    fn holds(
        &self,
        n: u64,
        inputs: &Map<String, Value>,
        artifacts: &BTreeMap<String, String>,
    ) -> Result<bool, String> {
        match self.kind {
            LoopKind::For => Ok(n < self.count(inputs)?),
            LoopKind::ForEach => Ok(n < self.list(inputs)?.len() as u64),
            LoopKind::While | LoopKind::Until => {
                if let Some(source) = &self.artifact {
                    // No decision yet (the first iteration, or a body that
                    // gave none) means go on.
                    return Ok(n == 0 || self.decision(source, artifacts) != Some(false));
                }
                let condition = self.condition.as_ref().map(Condition::parse);
                let holds = match condition {
                    Some(Ok(c)) => c.holds(inputs),
                    Some(Err((_, why))) => return Err(why),
                    None => true,
                };
                Ok(if self.kind == LoopKind::While {
                    holds
                } else {
                    !holds
                })
            }
        }
    }

    fn count(&self, inputs: &Map<String, Value>) -> Result<u64, String> {
        match &self.count {
            Some(Value::String(var)) => inputs
                .get(var)
                .and_then(|v| v.as_f64())
                .filter(|x| *x >= 0.0)
                .map(|x| x as u64)
                .ok_or_else(|| {
                    format!(
                        "loop `{}` counts to context variable `{var}`, which is not a number",
                        self.loop_id
                    )
                }),
            Some(n) => n
                .as_u64()
                .ok_or_else(|| format!("loop `{}`: `count` is not a number", self.loop_id)),
            None => Err(format!("loop `{}` has no `count`", self.loop_id)),
        }
    }

    fn list<'i>(&self, inputs: &'i Map<String, Value>) -> Result<&'i Vec<Value>, String> {
        let var = self.items.as_deref().unwrap_or_default();
        inputs.get(var).and_then(Value::as_array).ok_or_else(|| {
            format!(
                "loop `{}` goes over context variable `{var}`, which is not a list",
                self.loop_id
            )
        })
    }

    /// The body's latest decision: Some(true) to continue, Some(false)
    /// to stop, None when there is none.
    fn decision(
        &self,
        source: &ArtifactSource,
        artifacts: &BTreeMap<String, String>,
    ) -> Option<bool> {
        source
            .blocks
            .iter()
            .rev()
            .filter_map(|b| artifacts.get(b))
            .find_map(|text| loop_control(text, source.loop_id.as_deref().unwrap_or(&self.loop_id)))
    }
}

/// The last `wr.loop_control` decision in an artifact (an object of that
/// kind, or an object with an `artifacts` list of them) for `loop_id`.
fn loop_control(text: &str, loop_id: &str) -> Option<bool> {
    let value: Value = serde_json::from_str(text).ok()?;
    let items: Vec<&Value> = match value.get("artifacts") {
        Some(Value::Array(list)) => list.iter().collect(),
        _ => vec![&value],
    };
    items.into_iter().rev().find_map(|item| {
        let kind = item.get("kind").and_then(Value::as_str)?;
        let for_loop = item
            .get("loopId")
            .and_then(Value::as_str)
            .is_none_or(|id| id == loop_id);
        if kind != LOOP_CONTROL_KIND || !for_loop {
            return None;
        }
        match item.get("decision").and_then(Value::as_str)? {
            "continue" => Some(true),
            "stop" => Some(false),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(config: Value) -> LoopSpec {
        LoopSpec::parse(&config).unwrap()
    }

    /// Runs the head until it exits, merging its deltas; returns the
    /// iteration variables seen on each entry.
    fn walk(spec: &LoopSpec, mut inputs: Map<String, Value>) -> Vec<Map<String, Value>> {
        let mut seen = Vec::new();
        for _ in 0..100 {
            let d = spec.decide(&inputs, &BTreeMap::new()).unwrap();
            inputs.extend(d.inputs.clone());
            if d.signal == super::super::EXIT {
                assert_eq!(inputs[&counter_key(&spec.loop_id)], Value::Null);
                return seen;
            }
            seen.push(d.inputs);
        }
        panic!("the loop never ended");
    }

    #[test]
    fn for_each_sets_item_index_and_iteration_and_ends_with_the_list() {
        let s = spec(
            json!({"loop_id": "l", "kind": "forEach", "max_iterations": 10,
            "items": "xs", "iteration_var": "i", "item_var": "x", "index_var": "k"}),
        );
        let seen = walk(&s, json!({"xs": ["a", "b"]}).as_object().unwrap().clone());
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1]["x"], "b");
        assert_eq!(seen[1]["k"], 1);
        assert_eq!(seen[1]["i"], 2);
        let err = s.decide(&Map::new(), &BTreeMap::new()).unwrap_err();
        assert!(err.contains("`xs`, which is not a list"), "{err}");
    }

    #[test]
    fn for_counts_and_max_iterations_ends_any_loop_quietly() {
        let s = spec(json!({"loop_id": "l", "kind": "for", "max_iterations": 3,
            "count": "n", "iteration_var": "i"}));
        assert_eq!(
            walk(&s, json!({"n": 2}).as_object().unwrap().clone()).len(),
            2
        );
        assert_eq!(
            walk(&s, json!({"n": 50}).as_object().unwrap().clone()).len(),
            3
        );
        let w = spec(json!({"loop_id": "w", "kind": "while", "max_iterations": 4,
            "condition": {"var": "go"}, "iteration_var": "i"}));
        assert_eq!(
            walk(&w, json!({"go": true}).as_object().unwrap().clone()).len(),
            4
        );
        assert_eq!(walk(&w, Map::new()).len(), 0);
        let u = spec(json!({"loop_id": "u", "kind": "until", "max_iterations": 4,
            "condition": {"var": "done"}, "iteration_var": "i"}));
        assert_eq!(
            walk(&u, json!({"done": true}).as_object().unwrap().clone()).len(),
            0
        );
    }

    #[test]
    fn an_artifact_loop_goes_on_until_the_body_says_stop() {
        let s = spec(json!({"loop_id": "l", "kind": "while", "max_iterations": 9,
            "artifact": {"blocks": ["main.a", "main.b"]}, "iteration_var": "i"}));
        let mut artifacts = BTreeMap::new();
        let mut inputs = Map::new();
        let mut step = |artifacts: &BTreeMap<String, String>| {
            let d = s.decide(&inputs, artifacts).unwrap();
            inputs.extend(d.inputs);
            d.signal
        };
        assert_eq!(
            step(&artifacts),
            super::super::ENTER,
            "no decision yet: go on"
        );
        artifacts.insert(
            "main.a".into(),
            json!({"kind": LOOP_CONTROL_KIND, "decision": "stop"}).to_string(),
        );
        artifacts.insert(
            "main.b".into(),
            json!({"artifacts": [{"kind": LOOP_CONTROL_KIND, "decision": "continue"}]}).to_string(),
        );
        assert_eq!(
            step(&artifacts),
            super::super::ENTER,
            "b comes later in the body"
        );
        artifacts.insert(
            "main.b".into(),
            json!({"artifacts": [{"kind": LOOP_CONTROL_KIND, "loopId": "other", "decision": "continue"}]})
                .to_string(),
        );
        assert_eq!(
            step(&artifacts),
            super::super::EXIT,
            "a's stop: b's is for another loop"
        );
    }

    #[test]
    fn malformed_specs_are_refused_with_a_pointer() {
        let refused = |v: Value| LoopSpec::parse(&v).unwrap_err();
        let base =
            json!({"loop_id": "l", "kind": "for", "max_iterations": 3, "iteration_var": "i"});
        assert_eq!(refused(base.clone()).0, "/count");
        let mut bad = base.clone();
        bad["count"] = json!(-1);
        assert_eq!(refused(bad).0, "/count");
        let mut bad = base;
        bad["kind"] = json!("while");
        bad["condition"] = json!({"var": "x", "nope": 1});
        assert_eq!(refused(bad).0, "/condition/nope");
        assert_eq!(refused(json!({"loop_id": "l"})).0, "");
    }
}
