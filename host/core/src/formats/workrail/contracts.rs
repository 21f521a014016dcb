//! WorkRail's output contracts (`outputContract.contractRef`): the
//! artifact each names, as a JSON Schema of a step's output, and what the
//! step's prompt tells the agent to send.
//!
//! A step bound to a contract is answered with `output.artifacts`, a list
//! whose items carry a `kind`. The schema requires an artifact of the
//! contract's kind (unless `required: false`) and checks every artifact of
//! that kind strictly, field by field, as WorkRail's artifact schemas do
//! (WorkRail checks the first one only; a second, invalid one is refused
//! here). WorkRail cannot check two of its own contracts
//! (`differentiation_handoff` and `assessment` as a contract are always
//! reported missing there); wfhost checks them like the others.

use serde_json::{Value, json};

/// Every contract wfhost knows, by `contractRef`.
pub(super) const CONTRACTS: &[&str] = &[
    "wr.contracts.loop_control",
    "wr.contracts.assessment",
    "wr.contracts.coordinator_signal",
    "wr.contracts.review_verdict",
    "wr.contracts.discovery_handoff",
    "wr.contracts.shaping_handoff",
    "wr.contracts.coding_handoff",
    "wr.contracts.gate_verdict",
    "wr.contracts.differentiation_handoff",
];

/// The artifact kind of a contract: `wr.contracts.x` → `wr.x`.
pub(super) fn artifact_kind(contract: &str) -> String {
    format!("wr.{}", contract.trim_start_matches("wr.contracts."))
}

fn text(min: u64, max: Option<u64>) -> Value {
    match max {
        Some(max) => json!({"type": "string", "minLength": min, "maxLength": max}),
        None => json!({"type": "string", "minLength": min}),
    }
}

fn texts(min: u64, max_len: u64, max_items: u64) -> Value {
    json!({"type": "array", "items": text(min, Some(max_len)), "maxItems": max_items})
}

fn strict(required: &[&str], properties: Value) -> Value {
    json!({
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": false,
    })
}

fn level() -> Value {
    json!({"enum": ["high", "medium", "low"]})
}

/// The fields of a contract's artifact (besides `kind`): (required,
/// properties).
fn fields(contract: &str) -> Option<(Vec<&'static str>, Value)> {
    let version = json!({"const": 1});
    Some(match contract.trim_start_matches("wr.contracts.") {
        "loop_control" => (
            vec!["decision"],
            json!({
                "decision": {"enum": ["continue", "stop"]},
                "loopId": {"type": "string", "pattern": "^[a-z0-9_-]+$", "minLength": 1, "maxLength": 64},
                "metadata": strict(&[], json!({
                    "reason": {"type": "string", "maxLength": 1024},
                    "issuesFound": {"type": "integer", "minimum": 0},
                    "iterationIndex": {"type": "integer", "minimum": 0},
                    "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
                })),
            }),
        ),
        "coding_handoff" => (
            vec![
                "version",
                "keyDecisions",
                "knownLimitations",
                "testsAdded",
                "filesChanged",
            ],
            json!({
                "version": version,
                "branchName": text(1, None),
                "keyDecisions": texts(1, 200, 8),
                "knownLimitations": texts(1, 200, 6),
                "testsAdded": texts(1, 200, 10),
                "filesChanged": texts(1, 300, 20),
                "correctedAssumptions": {"type": "array", "maxItems": 6, "items": strict(
                    &["assumed", "actual"],
                    json!({"assumed": text(1, Some(200)), "actual": text(1, Some(200))}),
                )},
            }),
        ),
        "gate_verdict" => (
            vec!["version", "verdict", "confidence", "rationale"],
            json!({
                "version": version,
                "verdict": {"enum": ["approved", "rejected", "uncertain"]},
                "confidence": level(),
                "rationale": text(20, None),
            }),
        ),
        "review_verdict" => (
            vec!["verdict", "confidence", "findings", "summary"],
            json!({
                "verdict": {"enum": ["clean", "minor", "blocking"]},
                "confidence": level(),
                "findings": {"type": "array", "items": {
                    "type": "object",
                    "required": ["severity", "summary"],
                    "properties": {
                        "severity": {"enum": ["critical", "major", "minor", "nit"]},
                        "summary": text(1, None),
                        "findingCategory": {"enum": ["correctness", "security", "architecture", "ux", "performance", "testing", "style"]},
                    },
                }},
                "summary": text(1, None),
            }),
        ),
        "shaping_handoff" => (
            vec![
                "version",
                "pitchPath",
                "selectedShape",
                "appetite",
                "keyConstraints",
                "rabbitHoles",
                "outOfScope",
                "validationChecklist",
            ],
            json!({
                "version": version,
                "pitchPath": text(1, None),
                "selectedShape": text(1, Some(200)),
                "appetite": text(1, Some(100)),
                "keyConstraints": texts(1, 200, 8),
                "rabbitHoles": texts(1, 200, 6),
                "outOfScope": texts(1, 200, 6),
                "validationChecklist": texts(1, 200, 10),
            }),
        ),
        "discovery_handoff" => (
            vec![
                "version",
                "selectedDirection",
                "designDocPath",
                "confidenceBand",
                "keyInvariants",
            ],
            json!({
                "version": version,
                "selectedDirection": text(1, None),
                "designDocPath": {"type": "string"},
                "confidenceBand": level(),
                "keyInvariants": texts(1, 200, 12),
                "rejectedDirections": {"type": "array", "maxItems": 5, "items": strict(
                    &["direction", "reason"],
                    json!({"direction": text(1, Some(200)), "reason": text(1, Some(300))}),
                )},
                "implementationConstraints": texts(1, 200, 8),
                "keyCodebaseLocations": {"type": "array", "maxItems": 10, "items": strict(
                    &["path", "relevance"],
                    json!({"path": text(1, Some(300)), "relevance": text(1, Some(150))}),
                )},
                "selectionTier": {"enum": ["strong_recommendation", "provisional_recommendation", "insufficient_signal"]},
            }),
        ),
        "coordinator_signal" => (
            vec!["signalKind", "payload"],
            json!({
                "signalKind": {"enum": ["progress", "finding", "data_needed", "approval_needed", "blocked"]},
                "payload": {"type": "object"},
                "sessionId": {"type": "string"},
            }),
        ),
        "differentiation_handoff" => differentiation(),
        "assessment" => (
            vec!["dimensions"],
            json!({
                "assessmentId": text(1, Some(64)),
                "dimensions": {"type": "object", "minProperties": 1, "additionalProperties": {
                    "oneOf": [
                        text(1, None),
                        strict(&["level"], json!({"level": text(1, None), "rationale": text(1, Some(512))})),
                    ],
                }},
                "summary": {"type": "string", "maxLength": 1024},
            }),
        ),
        _ => return None,
    })
}

fn differentiation() -> (Vec<&'static str>, Value) {
    let datetime = json!({"type": "string", "format": "date-time"});
    let shaping = strict(
        &[
            "rawIdea",
            "problem",
            "baseline",
            "appetiteHint",
            "noGosHints",
            "constraints",
            "evidenceTopK",
            "defensibilityClaim",
        ],
        json!({
            "rawIdea": text(1, None),
            "problem": text(1, None),
            "baseline": text(1, None),
            "appetiteHint": {"enum": ["small_batch", "big_batch"]},
            "noGosHints": {"type": "array", "items": {"type": "string"}},
            "constraints": strict(&["teamSize", "technicalCapabilities"], json!({
                "teamSize": {"type": "integer", "minimum": 1},
                "technicalCapabilities": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "exclusions": {"type": "array", "items": {"type": "string"}},
            })),
            "evidenceTopK": {"type": "array", "maxItems": 10, "items": {"type": "string", "format": "uuid"}},
            "defensibilityClaim": strict(&["power", "cannibalization"], json!({
                "power": {"enum": ["Counter-Positioning", "Switching Costs", "Network Economies", "Scale Economies", "Cornered Resource", "Process Power", "Branding", "None_Imitable"]},
                "cannibalization": {"type": "string"},
            })),
        }),
    );
    (
        vec![
            "version",
            "schemaVersion",
            "generatedAt",
            "evidenceFreshness",
            "validationChecklist",
            "shapingHandoff",
        ],
        json!({
            "version": {"const": 1},
            "schemaVersion": {"const": "1.0.0"},
            "generatedAt": datetime,
            "evidenceFreshness": strict(&["oldestCapturedAt", "newestCapturedAt"], json!({
                "oldestCapturedAt": datetime, "newestCapturedAt": datetime,
            })),
            "validationChecklist": texts(1, 200, 10),
            "shapingHandoff": shaping,
        }),
    )
}

/// The JSON Schema of the output of a step bound to `contract`; None for
/// a contract wfhost does not know.
pub(super) fn output_schema(contract: &str, required: bool) -> Option<Value> {
    let (mut fields_required, mut properties) = fields(contract)?;
    let kind = artifact_kind(contract);
    properties["kind"] = json!({"const": kind});
    fields_required.insert(0, "kind");
    let is_kind =
        json!({"type": "object", "required": ["kind"], "properties": {"kind": {"const": kind}}});
    let mut artifact = strict(&fields_required, properties);
    if contract.ends_with(".review_verdict") {
        // WorkRail lets a verdict carry more keys than it names.
        artifact["additionalProperties"] = json!(true);
    }
    let mut artifacts = json!({
        "type": "array",
        "items": {"if": is_kind, "then": artifact},
    });
    if required {
        artifacts["contains"] = is_kind;
    }
    let mut schema = json!({"type": "object", "properties": {"artifacts": artifacts}});
    if required {
        schema["required"] = json!(["artifacts"]);
    }
    Some(schema)
}

/// What the prompt tells the agent about the contract.
pub(super) fn prompt_section(contract: &str, required: bool) -> String {
    let kind = artifact_kind(contract);
    let Some((fields, _)) = fields(contract) else {
        return String::new();
    };
    let example = example(contract);
    format!(
        "## Output Contract\n- Contract: {contract}{}\n- Send an artifact with `\"kind\": \"{kind}\"` in `output.artifacts` of the call that advances this step.\n- Required fields: {}\n- For example:\n```json\n{example}\n```",
        if required { "" } else { " (optional)" },
        fields.join(", ")
    )
}

/// A small artifact that satisfies the contract, for the prompt.
fn example(contract: &str) -> Value {
    let kind = artifact_kind(contract);
    let artifact = match contract.trim_start_matches("wr.contracts.") {
        "loop_control" => json!({"kind": kind, "decision": "stop"}),
        "coding_handoff" => {
            json!({"kind": kind, "version": 1, "keyDecisions": ["…"], "knownLimitations": [], "testsAdded": ["…"], "filesChanged": ["src/…"]})
        }
        "gate_verdict" => {
            json!({"kind": kind, "version": 1, "verdict": "approved", "confidence": "high", "rationale": "Why, in at least twenty characters."})
        }
        "review_verdict" => {
            json!({"kind": kind, "verdict": "minor", "confidence": "medium", "findings": [{"severity": "minor", "summary": "…"}], "summary": "…"})
        }
        "shaping_handoff" => {
            json!({"kind": kind, "version": 1, "pitchPath": "pitch.md", "selectedShape": "…", "appetite": "…", "keyConstraints": [], "rabbitHoles": [], "outOfScope": [], "validationChecklist": []})
        }
        "discovery_handoff" => {
            json!({"kind": kind, "version": 1, "selectedDirection": "…", "designDocPath": "design.md", "confidenceBand": "medium", "keyInvariants": ["…"]})
        }
        "coordinator_signal" => json!({"kind": kind, "signalKind": "progress", "payload": {}}),
        "assessment" => json!({"kind": kind, "dimensions": {"<dimension>": "<level>"}}),
        _ => json!({"kind": kind}),
    };
    json!({"artifacts": [artifact]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(contract: &str, output: Value) -> bool {
        let schema = output_schema(contract, true).unwrap();
        jsonschema::validator_for(&schema)
            .unwrap()
            .is_valid(&output)
    }

    #[test]
    fn every_contract_has_a_schema_its_example_satisfies() {
        for contract in CONTRACTS {
            let schema = output_schema(contract, true).expect(contract);
            let validator = jsonschema::validator_for(&schema).unwrap();
            if !matches!(*contract, "wr.contracts.differentiation_handoff") {
                assert!(validator.is_valid(&example(contract)), "{contract}");
            }
            assert!(!validator.is_valid(&json!({"artifacts": []})), "{contract}");
            assert!(!prompt_section(contract, true).is_empty());
        }
    }

    #[test]
    fn artifacts_of_the_kind_are_checked_strictly() {
        let c = "wr.contracts.gate_verdict";
        let ok = json!({"kind": "wr.gate_verdict", "version": 1, "verdict": "approved",
                        "confidence": "high", "rationale": "twenty characters at least"});
        assert!(valid(c, json!({"artifacts": [ok.clone()]})));
        let mut short = ok.clone();
        short["rationale"] = json!("too short");
        assert!(!valid(c, json!({"artifacts": [short]})));
        let mut extra = ok.clone();
        extra["foo"] = json!(1);
        assert!(!valid(c, json!({"artifacts": [extra]})));
        // Other kinds are left alone; the contract's kind must be there.
        assert!(valid(
            c,
            json!({"artifacts": [{"kind": "other", "x": 1}, ok]})
        ));
        assert!(!valid(c, json!({"artifacts": [{"kind": "other"}]})));
        // Not required: absent is fine, present is still checked.
        let optional = output_schema(c, false).unwrap();
        let v = jsonschema::validator_for(&optional).unwrap();
        assert!(v.is_valid(&json!({})));
        assert!(!v.is_valid(&json!({"artifacts": [{"kind": "wr.gate_verdict"}]})));
    }
}
