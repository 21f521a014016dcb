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
//! | `GATE` / `GATE:<prompt>` | wait for a human decision |

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
