//! Gates that ask several questions at once.
//!
//! An agent that returns `NEEDS_DECISION` with findings asks one question
//! per finding (see [`crate::run::transitions::DECISION_QUESTION`]). The run then
//! waits at one gate whose questions each have their own sequential
//! decision id (`UD-<N>`, `UD-<N+1>`, …; the gate is named by the first).
//!
//! One answer settles the gate: a JSON object of answers by question id or
//! by position, e.g. `{"UD-3": "keep the cookie", "2": "defer: next
//! sprint"}`. A question left out is *no response*:
//! - an ordinary question is then `cancelled` with the reason
//!   [`NO_RESPONSE`];
//! - a **security** question (one raised as a security concern) is never
//!   cancelled without the user: the gate stays open and asks it again,
//!   until it is answered or explicitly deferred (`defer: <reason>`, which
//!   cancels it with the reason `user deferred: <reason>`).
//!
//! The gate closes once every question is answered or cancelled; the run
//! goes on with `SIGNAL:GATE_APPROVED`, and the questions with their
//! outcomes are a `GATE_DECISION` segment of the payload.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::run::event::Decision;
use crate::run::payload::ContextSegment;
use crate::run::transitions;

/// The resolution reason of a question the answer left out.
pub const NO_RESPONSE: &str = "no response provided";

/// Words in a question gate's prompt that name the answer's form (also how
/// a front end recognises a question gate's prompt).
pub const ANSWER_FORMS: &str = "answer with a JSON object of answers by question id or number";

/// One question of a gate that asks several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateQuestion {
    /// Its decision id, `UD-<N>`.
    pub id: String,
    pub text: String,
    /// Raised as a security concern: never cancelled for want of an answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub security: bool,
}

/// Where one question of an open or closed gate stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum QuestionState {
    Pending,
    Answered { answer: String },
    Cancelled { reason: String },
}

/// A question and where it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AskedQuestion {
    #[serde(flatten)]
    pub question: GateQuestion,
    #[serde(flatten)]
    pub state: QuestionState,
}

impl AskedQuestion {
    pub fn new(question: GateQuestion) -> AskedQuestion {
        AskedQuestion {
            question,
            state: QuestionState::Pending,
        }
    }

    pub fn is_pending(&self) -> bool {
        self.state == QuestionState::Pending
    }
}

/// `defer`, `defer:<reason>`, `cancel`, `cancel:<reason>`: an explicit
/// deferral of `what` (`the question`, `the decision`), as its resolution
/// reason.
pub(crate) fn deferral(answer: &str, what: &str) -> Option<String> {
    for (verb, done) in [("defer", "deferred"), ("cancel", "cancelled")] {
        let Some(rest) = answer.strip_prefix(verb) else {
            continue;
        };
        if !(rest.is_empty() || rest.starts_with(':')) {
            continue;
        }
        let why = rest.trim_start_matches(':').trim();
        return Some(if why.is_empty() {
            format!("user {done} {what}")
        } else {
            format!("user {done}: {why}")
        });
    }
    None
}

/// Parse `answer` to gate `gate_id`, whose questions still pending are
/// `pending` (numbered from 1 in that order). The forms:
/// - a JSON object of answers by question id (`"UD-4"`) or number
///   (`"2"`); a value `defer[:<reason>]` defers that question;
/// - `defer[:<reason>]` alone defers every pending question;
/// - any other text answers the only pending question (and is refused
///   when there are several).
pub fn parse(gate_id: &str, pending: &[&GateQuestion], answer: &str) -> Result<Decision, String> {
    let trimmed = answer.trim();
    let mut answers = BTreeMap::new();
    let mut deferred = BTreeMap::new();
    let mut put = |id: &str, value: &str| -> Result<(), String> {
        let value = value.trim();
        if value.is_empty() {
            return Err(format!(
                "the answer to {id} is empty: answer it, or leave it out, or defer it with `defer: <reason>`"
            ));
        }
        if answers.contains_key(id) || deferred.contains_key(id) {
            return Err(format!("{id} is answered twice"));
        }
        match deferral(value, "the question") {
            Some(reason) => deferred.insert(id.to_string(), reason),
            None => answers.insert(id.to_string(), value.to_string()),
        };
        Ok(())
    };
    if trimmed.starts_with(['{', '[']) {
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(trimmed)
            .map_err(|e| {
                format!("the answer to gate {gate_id} is not a JSON object of answers: {e}")
            })?;
        for (key, value) in &object {
            let Some(text) = value.as_str() else {
                return Err(format!(
                    "the answer to `{key}` must be a string (the answer, or `defer: <reason>`)"
                ));
            };
            let question = find(gate_id, pending, key)?;
            put(&question.id, text)?;
        }
    } else if let Some(reason) = deferral(trimmed, "the question") {
        for q in pending {
            deferred.insert(q.id.clone(), reason.clone());
        }
    } else if let [only] = pending {
        put(&only.id, trimmed)?;
    } else {
        return Err(format!(
            "gate {gate_id} asks {} questions ({}): {ANSWER_FORMS}, e.g. {}; a question left out is cancelled (no response provided), except a security question, which is asked again until it is answered or deferred (`defer: <reason>`)",
            pending.len(),
            ids(pending),
            example(pending),
        ));
    }
    Ok(Decision::Answers { answers, deferred })
}

/// The pending question `key` names: its id (any case) or its number.
fn find<'a>(
    gate_id: &str,
    pending: &[&'a GateQuestion],
    key: &str,
) -> Result<&'a GateQuestion, String> {
    let key = key.trim();
    let by_number = key
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| pending.get(i));
    by_number
        .or_else(|| {
            pending
                .iter()
                .find(|q| q.id.eq_ignore_ascii_case(key))
        })
        .copied()
        .ok_or_else(|| {
            format!(
                "`{key}` is not a pending question of gate {gate_id} (pending: {}; or their numbers 1 to {})",
                ids(pending),
                pending.len()
            )
        })
}

fn ids(questions: &[&GateQuestion]) -> String {
    questions
        .iter()
        .map(|q| q.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn example(questions: &[&GateQuestion]) -> String {
    let mut object = serde_json::Map::new();
    for (i, q) in questions.iter().enumerate() {
        let value = if i + 1 == questions.len() && questions.len() > 1 {
            "defer: <reason>"
        } else {
            "<answer>"
        };
        object.insert(q.id.clone(), value.into());
    }
    serde_json::Value::Object(object).to_string()
}

/// Apply an answer to `questions`: the answered ones become `answered`,
/// deferred ones `cancelled` with the user's reason, and the pending ones
/// left out `cancelled` with [`NO_RESPONSE`] — except security questions,
/// which stay pending. Returns whether the gate is settled (nothing
/// pending). Refuses an answer to a question that is not pending.
pub fn apply(
    gate_id: &str,
    questions: &mut [AskedQuestion],
    decision: &Decision,
) -> Result<bool, String> {
    let Decision::Answers { answers, deferred } = decision else {
        return Err(format!(
            "gate {gate_id} asks questions: {ANSWER_FORMS}, not `{decision}`"
        ));
    };
    for id in answers.keys().chain(deferred.keys()) {
        if !questions
            .iter()
            .any(|q| q.question.id == *id && q.is_pending())
        {
            return Err(format!("{id} is not a pending question of gate {gate_id}"));
        }
    }
    for q in questions.iter_mut().filter(|q| q.is_pending()) {
        let id = &q.question.id;
        q.state = if let Some(answer) = answers.get(id) {
            QuestionState::Answered {
                answer: answer.clone(),
            }
        } else if let Some(reason) = deferred.get(id) {
            QuestionState::Cancelled {
                reason: reason.clone(),
            }
        } else if q.question.security {
            QuestionState::Pending
        } else {
            QuestionState::Cancelled {
                reason: NO_RESPONSE.to_string(),
            }
        };
    }
    Ok(!questions.iter().any(AskedQuestion::is_pending))
}

/// The prompt of a question gate: the agent's summary, then the pending
/// questions, numbered, and how to answer.
pub fn prompt(summary: &str, questions: &[AskedQuestion]) -> String {
    let pending: Vec<&GateQuestion> = questions
        .iter()
        .filter(|q| q.is_pending())
        .map(|q| &q.question)
        .collect();
    let asked_again = pending.len() < questions.len();
    let mut out = summary.trim().to_string();
    if asked_again {
        out.push_str("\nAsked again: security questions are answered or deferred explicitly.");
    }
    for (i, q) in pending.iter().enumerate() {
        let tag = if q.security { " [security]" } else { "" };
        out.push_str(&format!("\n  {}. {}{tag}: {}", i + 1, q.id, q.text));
    }
    out.push_str(&format!(
        "\n{ANSWER_FORMS} (e.g. {}); a question left out is cancelled (no response provided), a security question asked again",
        example(&pending)
    ));
    out
}

/// The question of a `NEEDS_DECISION` in `payload`: the last
/// `DECISION_REQUEST` segment, and the questions pushed after it
/// (`DECISION_QUESTION`, `SECURITY_QUESTION`: text and whether it is a
/// security question). `None` without a request.
pub fn decision_request(payload: &[ContextSegment]) -> Option<(String, Vec<(String, bool)>)> {
    let at = payload
        .iter()
        .rposition(|s| s.kind == transitions::DECISION_REQUEST)?;
    let asked = payload[at + 1..]
        .iter()
        .filter_map(|s| match s.kind.as_str() {
            transitions::DECISION_QUESTION => Some((s.content.clone(), false)),
            transitions::SECURITY_QUESTION => Some((s.content.clone(), true)),
            _ => None,
        })
        .filter(|(text, _)| !text.trim().is_empty())
        .collect();
    Some((payload[at].content.clone(), asked))
}

/// The questions and their outcomes, for the payload once the gate closes.
pub fn outcome(questions: &[AskedQuestion]) -> String {
    questions
        .iter()
        .map(|q| {
            let result = match &q.state {
                QuestionState::Pending => "pending".to_string(),
                QuestionState::Answered { answer } => format!("answered: {answer}"),
                QuestionState::Cancelled { reason } => format!("cancelled ({reason})"),
            };
            format!("{} ({}): {result}", q.question.id, q.question.text)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: &str, security: bool) -> GateQuestion {
        GateQuestion {
            id: id.into(),
            text: format!("question {id}"),
            security,
        }
    }

    fn asked(qs: &[GateQuestion]) -> Vec<AskedQuestion> {
        qs.iter().cloned().map(AskedQuestion::new).collect()
    }

    fn answers(pairs: &[(&str, &str)], deferred: &[(&str, &str)]) -> Decision {
        let map = |p: &[(&str, &str)]| {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        Decision::Answers {
            answers: map(pairs),
            deferred: map(deferred),
        }
    }

    #[test]
    fn answers_by_id_or_number_and_deferrals() {
        let (a, b, c) = (q("UD-3", false), q("UD-4", true), q("UD-5", false));
        let pending = [&a, &b, &c];
        assert_eq!(
            parse(
                "UD-3",
                &pending,
                r#"{"ud-3": " yes ", "2": "defer: next sprint"}"#
            ),
            Ok(answers(
                &[("UD-3", "yes")],
                &[("UD-4", "user deferred: next sprint")]
            ))
        );
        assert_eq!(
            parse("UD-3", &pending, "defer"),
            Ok(answers(
                &[],
                &[
                    ("UD-3", "user deferred the question"),
                    ("UD-4", "user deferred the question"),
                    ("UD-5", "user deferred the question")
                ]
            ))
        );
        // One pending question takes plain text.
        assert_eq!(
            parse("UD-3", &[&b], "rotate the key"),
            Ok(answers(&[("UD-4", "rotate the key")], &[]))
        );
        assert_eq!(parse("UD-3", &pending, "{}"), Ok(answers(&[], &[])));
    }

    #[test]
    fn malformed_answers_are_refused_with_the_reason() {
        let (a, b) = (q("UD-3", false), q("UD-4", true));
        let pending = [&a, &b];
        for (answer, why) in [
            ("yes", "asks 2 questions (UD-3, UD-4)"),
            (r#"{"UD-9": "x"}"#, "`UD-9` is not a pending question"),
            (r#"{"3": "x"}"#, "`3` is not a pending question"),
            (r#"{"0": "x"}"#, "`0` is not a pending question"),
            (r#"{"1": "x", "UD-3": "y"}"#, "UD-3 is answered twice"),
            (r#"{"1": " "}"#, "the answer to UD-3 is empty"),
            (r#"{"1": 5}"#, "must be a string"),
            (r#"{"1": "x""#, "not a JSON object"),
            ("[1]", "not a JSON object"),
        ] {
            let err = parse("UD-3", &pending, answer).unwrap_err();
            assert!(err.contains(why), "{answer}: {err}");
        }
    }

    #[test]
    fn a_partial_answer_cancels_ordinary_questions_and_keeps_security_ones() {
        let mut qs = asked(&[q("UD-3", false), q("UD-4", true), q("UD-5", false)]);
        let settled = apply("UD-3", &mut qs, &answers(&[("UD-5", "yes")], &[])).unwrap();
        assert!(!settled);
        assert_eq!(
            qs[0].state,
            QuestionState::Cancelled {
                reason: NO_RESPONSE.into()
            }
        );
        assert_eq!(qs[1].state, QuestionState::Pending);
        assert_eq!(
            qs[2].state,
            QuestionState::Answered {
                answer: "yes".into()
            }
        );
        // The re-ask lists only the security question.
        let prompt = prompt("Findings need a decision.", &qs);
        assert!(prompt.contains("1. UD-4 [security]"), "{prompt}");
        assert!(!prompt.contains("UD-3:"), "{prompt}");
        assert!(prompt.contains("Asked again"), "{prompt}");
        // Answering a settled question is refused; an empty answer settles
        // nothing while the security question is pending.
        assert!(apply("UD-3", &mut qs, &answers(&[("UD-3", "x")], &[])).is_err());
        assert!(!apply("UD-3", &mut qs, &answers(&[], &[])).unwrap());
        assert_eq!(qs[1].state, QuestionState::Pending);
        // Only an explicit deferral (or an answer) ends it.
        let settled = apply(
            "UD-3",
            &mut qs,
            &answers(&[], &[("UD-4", "user deferred: next sprint")]),
        )
        .unwrap();
        assert!(settled);
        assert_eq!(
            qs[1].state,
            QuestionState::Cancelled {
                reason: "user deferred: next sprint".into()
            }
        );
        let text = outcome(&qs);
        assert!(
            text.contains("UD-5 (question UD-5): answered: yes"),
            "{text}"
        );
        assert!(text.contains("cancelled (no response provided)"), "{text}");
    }

    #[test]
    fn other_decisions_do_not_answer_questions() {
        let mut qs = asked(&[q("UD-3", false)]);
        let err = apply("UD-3", &mut qs, &Decision::Approved).unwrap_err();
        assert!(err.contains("asks questions"), "{err}");
    }
}
