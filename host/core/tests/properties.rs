//! Property tests of transition resolution, merge instructions, prompt and
//! context assembly.

use std::collections::BTreeMap;

use proptest::prelude::*;
use wfhost_core::manifest::Transition;
use wfhost_core::run::context::{AssembledContext, Metadata};
use wfhost_core::run::merge::{self, MergeInstruction};
use wfhost_core::run::payload::ContextSegment;
use wfhost_core::run::prompt::{self, PromptParts};
use wfhost_core::run::transitions::{self, FAIL_DEFAULT, Resolution};

fn signal() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("SIGNAL:SUCCESS".to_string()),
        Just("SIGNAL:RETRY".to_string()),
        Just(FAIL_DEFAULT.to_string()),
        "SIGNAL:[A-Z]{1,3}",
    ]
}

fn transitions() -> impl Strategy<Value = Vec<Transition>> {
    prop::collection::vec(
        (signal(), "[A-Z]{1,4}").prop_map(|(on_signal, action)| Transition { on_signal, action }),
        0..6,
    )
}

fn payload() -> impl Strategy<Value = Vec<ContextSegment>> {
    prop::collection::vec(
        (
            "[a-z0-9]{1,4}",
            prop_oneof![Just("A"), Just("B"), Just("C")],
            "[ -~]{0,12}",
        )
            .prop_map(|(id, kind, content)| ContextSegment::new(id, kind, content)),
        0..12,
    )
}

fn instruction() -> impl Strategy<Value = MergeInstruction> {
    let kinds = prop::collection::vec(
        prop_oneof![Just("A".to_string()), Just("B".to_string())],
        1..3,
    );
    prop_oneof![
        Just(MergeInstruction::Inherit),
        Just(MergeInstruction::Clear),
        (0usize..15).prop_map(MergeInstruction::KeepLast),
        kinds.clone().prop_map(MergeInstruction::DropTypes),
        kinds.prop_map(MergeInstruction::KeepTypes),
        prop_oneof![Just("style".to_string()), Just("absent".to_string())]
            .prop_map(MergeInstruction::AppendStatic),
    ]
}

fn memory() -> serde_json::Map<String, serde_json::Value> {
    serde_json::json!({"style": "terse"})
        .as_object()
        .unwrap()
        .clone()
}

proptest! {
    #[test]
    fn resolution_prefers_the_first_exact_match_then_the_first_fallback(ts in transitions(), s in signal()) {
        match transitions::resolve(&ts, &s) {
            Some(Resolution::Exact(t)) => {
                prop_assert!(std::ptr::eq(t, ts.iter().find(|t| t.on_signal == s).unwrap()));
            }
            Some(Resolution::Fallback(t)) => {
                prop_assert!(ts.iter().all(|t| t.on_signal != s));
                prop_assert!(std::ptr::eq(t, ts.iter().find(|t| t.on_signal == FAIL_DEFAULT).unwrap()));
            }
            None => {
                prop_assert!(ts.iter().all(|t| t.on_signal != s && t.on_signal != FAIL_DEFAULT));
            }
        }
    }

    #[test]
    fn keep_last_keeps_a_suffix(p in payload(), n in 0usize..20) {
        let out = merge::apply(&[MergeInstruction::KeepLast(n)], &p, &memory(), &serde_json::Value::Null, 0);
        prop_assert_eq!(out.len(), n.min(p.len()));
        prop_assert_eq!(&out[..], &p[p.len() - out.len()..]);
    }

    #[test]
    fn type_filters_keep_order_and_partition(p in payload()) {
        let types = vec!["A".to_string()];
        let dropped = merge::apply(&[MergeInstruction::DropTypes(types.clone())], &p, &memory(), &serde_json::Value::Null, 0);
        let kept = merge::apply(&[MergeInstruction::KeepTypes(types)], &p, &memory(), &serde_json::Value::Null, 0);
        prop_assert!(dropped.iter().all(|s| s.kind != "A"));
        prop_assert!(kept.iter().all(|s| s.kind == "A"));
        prop_assert_eq!(dropped.len() + kept.len(), p.len());
        let original_order: Vec<_> = p.iter().filter(|s| s.kind != "A").collect();
        prop_assert_eq!(dropped.iter().collect::<Vec<_>>(), original_order);
    }

    #[test]
    fn strategies_never_invent_segments(p in payload(), strategy in prop::collection::vec(instruction(), 0..6)) {
        let out = merge::apply(&strategy, &p, &memory(), &serde_json::Value::Null, 3);
        let appended = strategy.iter().filter(|i| matches!(i, MergeInstruction::AppendStatic(k) if k == "style")).count();
        prop_assert!(out.len() <= p.len() + appended);
        for s in &out {
            prop_assert!(s.kind == "STATIC_MEMORY" || p.contains(s));
        }
        // Deterministic.
        prop_assert_eq!(out, merge::apply(&strategy, &p, &memory(), &serde_json::Value::Null, 3));
    }

    #[test]
    fn parsed_instructions_round_trip_their_text(n in 0usize..100, t in "[A-Z_]{1,8}") {
        prop_assert_eq!(merge::parse(&format!("keep_last:{n}")).unwrap(), MergeInstruction::KeepLast(n));
        prop_assert_eq!(merge::parse(&format!("drop_type:{t}")).unwrap(), MergeInstruction::DropTypes(vec![t.clone()]));
    }

    #[test]
    fn prompts_have_no_blank_line_runs(
        // Section texts are the author's; what must never appear are blank
        // lines injected between or around sections.
        rules in proptest::option::of("[ a-z]{0,10}"),
        task in proptest::option::of("[ a-z]{0,10}"),
        checklist in prop::collection::vec("[ a-z]{0,5}", 0..4),
        restricted in any::<bool>(),
    ) {
        let patterns = ["src/**".to_string()];
        let text = prompt::assemble(PromptParts {
            rules: rules.as_deref(),
            prefix: None,
            task: task.as_deref(),
            file_restrictions: restricted.then_some(&patterns[..]),
            output_checklist: &checklist,
        });
        prop_assert!(!text.contains("\n\n\n"), "{:?}", text);
        prop_assert!(!text.starts_with('\n') && !text.ends_with('\n'), "{:?}", text);
    }

    #[test]
    fn context_layers_always_render_in_priority_order(
        p in payload(),
        system_prompt in "[a-z ]{0,8}",
        with_memory in any::<bool>(),
        with_artifacts in any::<bool>(),
    ) {
        let ctx = AssembledContext {
            payload: p,
            system_prompt,
            config: serde_json::Value::Null,
            inputs: Default::default(),
            inherited: if with_memory { memory() } else { Default::default() },
            artifacts: if with_artifacts { BTreeMap::from([("main.a".to_string(), "{}".to_string())]) } else { BTreeMap::new() },
            metadata: Metadata {
                workflow_id: "w".into(), execution_id: "e".into(), node_id: "n".into(), block_id: "b".into(),
                step_index: 1, attempt: 1, previous_block_id: None,
            },
        };
        let text = ctx.render();
        let positions: Vec<usize> = ["## Payload", "## Block contract", "## Inherited context", "## Artifacts", "## Metadata"]
            .iter()
            .filter_map(|h| text.find(h))
            .collect();
        prop_assert!(positions.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(text.contains("## Metadata"));
        prop_assert_eq!(text.contains("## Inherited context"), with_memory);
        prop_assert_eq!(text.contains("## Artifacts"), with_artifacts);
    }
}
