//! WorkRail's closed registries, in wfhost's words: the texts `ref`
//! prompt parts name (`wr.refs.*`) and the compiler features a workflow
//! turns on (`wr.features.*`). The ids and what each asks of the agent
//! are WorkRail's; the wording is ours.

/// A `wr.refs.*` text, by id.
pub(super) fn reference(id: &str) -> Option<&'static str> {
    REFS.iter()
        .find(|(name, _)| *name == id)
        .map(|(_, text)| *text)
}

/// The known ref ids, for an error message.
pub(super) fn reference_ids() -> Vec<&'static str> {
    REFS.iter().map(|(name, _)| *name).collect()
}

const REFS: &[(&str, &str)] = &[
    (
        "wr.refs.memory_usage",
        "When Memory tools are available (memory_briefing, memory_store, memory_query):\n\
         - look up what earlier sessions learned about this workspace before you start\n\
         - after significant work, store the discoveries and decisions worth keeping\n\
         - give stored entries descriptive topics and titles so later sessions find them\n\
         - never block on a Memory failure: it is advice, not a dependency",
    ),
    (
        "wr.refs.memory_store",
        "When Memory tools are available (memory_store):\n\
         - store the discoveries and decisions of significant work\n\
         - give stored entries descriptive topics and titles\n\
         - never block on a Memory failure",
    ),
    (
        "wr.refs.memory_query",
        "When Memory tools are available (memory_briefing, memory_query):\n\
         - look up what earlier sessions learned about this workspace first\n\
         - treat what you find as a lead to verify, not as fact\n\
         - never block on a Memory failure",
    ),
    (
        "wr.refs.notes_first_durability",
        "Notes are the durable record:\n\
         - write every step's record in output.notesMarkdown\n\
         - keep what the work depends on in notes and context variables, not in side files\n\
         - documents written for people (plans, reviews) are for reading; the workflow does not rely on them\n\
         - notes and context survive a rewound chat; side files may not\n\
         - record decisions, findings and their reasons in the notes before you advance",
    ),
    (
        "wr.refs.synthesis_under_disagreement",
        "When parallel outputs disagree:\n\
         - treat the disagreement as work to do, never wave it away\n\
         - an issue two or more outputs raise at the same severity is confirmed\n\
         - an issue raised at different severities takes the higher one unless the lower comes with evidence\n\
         - an issue only one output raises is investigated, and blocks only when clearly critical\n\
         - when one output calls an issue a false positive and another a real one, settle it explicitly in the notes\n\
         - while a material disagreement stands, the findings outrank any early recommendation\n\
         - record how each contradiction was resolved and why",
    ),
    (
        "wr.refs.parallelize_cognition_serialize_synthesis",
        "Parallel work:\n\
         - independent thinking runs in parallel: gathering context, forming hypotheses, audits, reviewer families\n\
         - synthesis runs in sequence, by the main agent: merging outputs, resolving contradictions, deciding, writing the final artifacts\n\
         - no parallel helper finalizes or commits to the canonical answer\n\
         - prefer one well-aimed batch of delegation to many small rounds\n\
         - give every parallel helper its own, non-overlapping focus",
    ),
    (
        "wr.refs.adversarial_challenge_rules",
        "Challenge the leading position:\n\
         - try to break it; do not only collect evidence that agrees\n\
         - build the strongest case for a different answer\n\
         - for each conclusion, name the evidence that would disprove it and check whether it exists\n\
         - a challenge that cannot weaken the position strengthens it\n\
         - a challenge that finds a real weakness becomes a finding, and the position changes\n\
         - rate severity by risk, not by comfort\n\
         - challenge inflated severities as well as deflated ones\n\
         - a serious concern two or more independent challengers raise blocks by default",
    ),
];

/// What a compiler feature adds to every step written with `promptBlocks`:
/// items appended to its constraints, procedure and verify sections.
#[derive(Debug)]
pub(super) struct Feature {
    pub constraints: &'static [&'static str],
    pub procedure: &'static [&'static str],
    pub verify: &'static [&'static str],
}

/// A `wr.features.*` feature, by id.
pub(super) fn feature(id: &str) -> Option<&'static Feature> {
    FEATURES
        .iter()
        .find(|(name, _)| *name == id)
        .map(|(_, f)| f)
}

/// The known feature ids, for an error message.
pub(super) fn feature_ids() -> Vec<&'static str> {
    FEATURES.iter().map(|(name, _)| *name).collect()
}

/// A constraint that is a ref, spelled as the `ref` part it stands for.
pub(super) const REF_ITEM: &str = "\u{0}ref:";

const FEATURES: &[(&str, Feature)] = &[
    (
        "wr.features.memory_context",
        Feature {
            constraints: &["\u{0}ref:wr.refs.memory_usage"],
            procedure: &[],
            verify: &[],
        },
    ),
    (
        "wr.features.capabilities",
        Feature {
            constraints: &[
                "Do not take an optional capability for granted because the workflow can use it.",
                "When delegation, web access or another optional capability matters here, confirm it works with a real probe or attempt before relying on it.",
                "When a capability is missing, fall back openly instead of acting as if it were there.",
            ],
            procedure: &[
                "When an optional capability would change the quality of this step, decide whether it is worth using here.",
                "When you take a path that depends on a capability, record the observation or attempt that justified it.",
                "When you skip delegation or another optional capability, carry on yourself and record why the fallback suffices.",
            ],
            verify: &[
                "No path that depends on a capability was taken without an observation, a probe or an attempt.",
                "Any capability that was missing or skipped, and the limits of the fallback, are stated.",
                "The main agent still owns the synthesis and the final judgment.",
            ],
        },
    ),
    (
        "wr.features.subagent_guidance",
        Feature {
            constraints: &[
                "Delegate only to WorkRail Executors; do not rely on other named subagent identities.",
                "The main agent owns strategy, decisions, synthesis and final outputs; subagents contribute independent perspectives only.",
                "\u{0}ref:wr.refs.parallelize_cognition_serialize_synthesis",
            ],
            procedure: &[
                "Give each delegated Executor a clear focus of its own and the shared facts or context as its primary truth.",
                "Synthesize parallel outputs yourself: no single subagent's output becomes the answer without your review.",
            ],
            verify: &[
                "Every delegated output was synthesized by the main agent, not adopted as is.",
                "No subagent had the final say over findings, recommendations or artifacts.",
            ],
        },
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_refs_name_known_refs() {
        for (_, f) in FEATURES {
            for item in f.constraints.iter().chain(f.procedure).chain(f.verify) {
                if let Some(id) = item.strip_prefix(REF_ITEM) {
                    assert!(reference(id).is_some(), "{id}");
                }
            }
        }
        assert_eq!(reference_ids().len(), 7);
        assert_eq!(feature_ids().len(), 3);
    }
}
