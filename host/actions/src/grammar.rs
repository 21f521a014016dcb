//! The grammar of the default action handler, `actions-core`.
//!
//! The engine itself never interprets action strings: an ActionHandler
//! plugin does. This grammar lives here so that the `actions-core` plugin and
//! the host's static manifest checks share one parser and can never disagree.
//!
//! | action | command |
//! |---|---|
//! | `JUMP:<block>` / `JUMP:<node>.<block>` | continue at that block |
//! | `CALL:<node>` | call the node; RETURN runs the calling block again |
//! | `CALL:<node>@<block>` / `CALL:<node>@<node>.<block>` | call; RETURN continues there |
//! | `RETURN` | pop the return stack |
//! | `END` | finish successfully |
//! | `FAIL` / `FAIL:<reason>` | finish as failed |
//! | `GATE` / `GATE:<prompt>` | wait for a human decision (gate `UD-<N>`) |
//! | `GATE:APPROVE_DESIGN[:<prompt>]` | the mandatory gate `UD-APPROVE-DESIGN` |
//! | `GATE:REVIEW_STRATEGY[:<prompt>]` | the mandatory gate `UD-REVIEW-STRATEGY` |
//!
//! A well-known gate travels as the gate command's prompt (`gate(string)`
//! in the WIT contract is unchanged): [`well_known_gate`] splits it.

use crate::command::{BlockRef, EngineCommand};

/// Why an action string is not in the core grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionSyntaxError {
    #[error("unknown action `{0}` (expected JUMP:, CALL:, RETURN, END, FAIL or GATE)")]
    Unknown(String),
    #[error("`{action}` needs a target after `{verb}:`")]
    MissingTarget { action: String, verb: &'static str },
    #[error("`{0}` takes no argument")]
    UnexpectedArgument(String),
    #[error("`{action}`: `{target}` is not a valid block or node name")]
    BadTarget { action: String, target: String },
}

/// A mandatory workflow gate of seed 001, with a fixed decision id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WellKnownGate {
    /// `UD-APPROVE-DESIGN`: `approved` or `changes-requested:<text>`.
    ApproveDesign,
    /// `UD-REVIEW-STRATEGY`: `per-batch` or `single-final`.
    ReviewStrategy,
}

impl WellKnownGate {
    pub const ALL: [WellKnownGate; 2] =
        [WellKnownGate::ApproveDesign, WellKnownGate::ReviewStrategy];

    /// The name written after `GATE:` (and the gate's `state_context`).
    pub fn name(self) -> &'static str {
        match self {
            WellKnownGate::ApproveDesign => "APPROVE_DESIGN",
            WellKnownGate::ReviewStrategy => "REVIEW_STRATEGY",
        }
    }

    /// The fixed decision (and gate) id.
    pub fn decision_id(self) -> &'static str {
        match self {
            WellKnownGate::ApproveDesign => "UD-APPROVE-DESIGN",
            WellKnownGate::ReviewStrategy => "UD-REVIEW-STRATEGY",
        }
    }

    /// The question asked when the action gives none.
    pub fn default_prompt(self) -> &'static str {
        match self {
            WellKnownGate::ApproveDesign => {
                "Approve the design? Answer `approved` or `changes-requested:<what to change>`"
            }
            WellKnownGate::ReviewStrategy => {
                "Review strategy? Answer `per-batch` or `single-final`"
            }
        }
    }

    /// The gate whose decision id is `id`.
    pub fn from_decision_id(id: &str) -> Option<WellKnownGate> {
        Self::ALL.into_iter().find(|g| g.decision_id() == id)
    }
}

/// Split a gate command's prompt: `APPROVE_DESIGN` / `APPROVE_DESIGN:<prompt>`
/// (likewise `REVIEW_STRATEGY`) names a well-known gate, with its default
/// question when none follows; anything else is an ad-hoc gate's prompt.
pub fn well_known_gate(prompt: &str) -> (Option<WellKnownGate>, &str) {
    for gate in WellKnownGate::ALL {
        if let Some(rest) = prompt.trim().strip_prefix(gate.name()) {
            let question = match rest.strip_prefix(':') {
                Some(q) if !q.trim().is_empty() => q.trim(),
                Some(_) => gate.default_prompt(),
                None if rest.is_empty() => gate.default_prompt(),
                None => continue,
            };
            return (Some(gate), question);
        }
    }
    (None, prompt)
}

/// Parse an action of the core grammar into an engine command.
pub fn parse(action: &str) -> Result<EngineCommand, ActionSyntaxError> {
    let (verb, arg) = match action.split_once(':') {
        Some((verb, arg)) => (verb, Some(arg)),
        None => (action, None),
    };
    let target = |verb: &'static str| -> Result<&str, ActionSyntaxError> {
        match arg.map(str::trim) {
            Some(t) if !t.is_empty() => Ok(t),
            _ => Err(ActionSyntaxError::MissingTarget {
                action: action.to_string(),
                verb,
            }),
        }
    };
    let checked_ref = |t: &str| -> Result<BlockRef, ActionSyntaxError> {
        let r = BlockRef::parse(t);
        let names_ok =
            crate::is_valid_id(&r.block) && r.node.as_deref().is_none_or(crate::is_valid_id);
        if names_ok {
            Ok(r)
        } else {
            Err(ActionSyntaxError::BadTarget {
                action: action.to_string(),
                target: t.to_string(),
            })
        }
    };
    match verb {
        "JUMP" => Ok(EngineCommand::Jump(checked_ref(target("JUMP")?)?)),
        "CALL" => {
            let t = target("CALL")?;
            let (node, back) = match t.split_once('@') {
                Some((node, back)) => (node, Some(checked_ref(back)?)),
                None => (t, None),
            };
            if !crate::is_valid_id(node) {
                return Err(ActionSyntaxError::BadTarget {
                    action: action.to_string(),
                    target: node.to_string(),
                });
            }
            Ok(EngineCommand::Call {
                node: node.to_string(),
                return_to: back,
            })
        }
        "RETURN" | "END" if arg.is_some() => {
            Err(ActionSyntaxError::UnexpectedArgument(action.to_string()))
        }
        "RETURN" => Ok(EngineCommand::Return),
        "END" => Ok(EngineCommand::End),
        "FAIL" => Ok(EngineCommand::Fail(
            arg.map(str::trim)
                .filter(|r| !r.is_empty())
                .unwrap_or("the workflow chose to fail")
                .to_string(),
        )),
        "GATE" => Ok(EngineCommand::Gate(
            arg.map(str::trim)
                .filter(|p| !p.is_empty())
                .unwrap_or("approval required")
                .to_string(),
        )),
        _ => Err(ActionSyntaxError::Unknown(action.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(
            parse("JUMP:review").unwrap(),
            EngineCommand::Jump(BlockRef::parse("review"))
        );
        assert_eq!(
            parse("JUMP:qa.start").unwrap(),
            EngineCommand::Jump(BlockRef {
                node: Some("qa".into()),
                block: "start".into()
            })
        );
        assert_eq!(
            parse("CALL:lint").unwrap(),
            EngineCommand::Call {
                node: "lint".into(),
                return_to: None
            }
        );
        assert_eq!(
            parse("CALL:lint@main.after").unwrap(),
            EngineCommand::Call {
                node: "lint".into(),
                return_to: Some(BlockRef::parse("main.after"))
            }
        );
        assert_eq!(parse("RETURN").unwrap(), EngineCommand::Return);
        assert_eq!(parse("END").unwrap(), EngineCommand::End);
        assert_eq!(
            parse("FAIL:tests are red").unwrap(),
            EngineCommand::Fail("tests are red".into())
        );
        assert!(matches!(parse("FAIL").unwrap(), EngineCommand::Fail(_)));
        assert_eq!(
            parse("GATE:ship it?").unwrap(),
            EngineCommand::Gate("ship it?".into())
        );
    }

    #[test]
    fn well_known_gates_travel_in_the_prompt() {
        assert_eq!(
            parse("GATE:APPROVE_DESIGN:Is the design right?").unwrap(),
            EngineCommand::Gate("APPROVE_DESIGN:Is the design right?".into())
        );
        assert_eq!(
            well_known_gate("APPROVE_DESIGN:Is the design right?"),
            (Some(WellKnownGate::ApproveDesign), "Is the design right?")
        );
        let (gate, question) = well_known_gate("REVIEW_STRATEGY");
        assert_eq!(gate, Some(WellKnownGate::ReviewStrategy));
        assert!(question.contains("per-batch"), "{question}");
        assert_eq!(
            well_known_gate("REVIEW_STRATEGY:  ").0,
            Some(WellKnownGate::ReviewStrategy)
        );
        // Only the exact names, followed by nothing or a colon.
        for adhoc in [
            "APPROVE_DESIGNS",
            "approve_design",
            "ship it?",
            "Approve: design",
        ] {
            assert_eq!(well_known_gate(adhoc), (None, adhoc), "{adhoc}");
        }
        for g in WellKnownGate::ALL {
            assert_eq!(WellKnownGate::from_decision_id(g.decision_id()), Some(g));
        }
        assert_eq!(WellKnownGate::from_decision_id("UD-1"), None);
    }

    #[test]
    fn rejects_malformed_actions() {
        assert!(matches!(
            parse("JUMP:"),
            Err(ActionSyntaxError::MissingTarget { .. })
        ));
        assert!(matches!(
            parse("JUMP"),
            Err(ActionSyntaxError::MissingTarget { .. })
        ));
        assert!(matches!(
            parse("END:now"),
            Err(ActionSyntaxError::UnexpectedArgument(_))
        ));
        assert!(matches!(
            parse("GOTO:x"),
            Err(ActionSyntaxError::Unknown(_))
        ));
        assert!(matches!(
            parse("JUMP:a b"),
            Err(ActionSyntaxError::BadTarget { .. })
        ));
        assert!(matches!(
            parse("CALL:a.b"),
            Err(ActionSyntaxError::BadTarget { .. })
        ));
    }
}
