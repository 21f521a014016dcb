use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use super::*;

/// Our example WorkRail workflows and the published schema's verdicts on
/// edits of them (`scripts/workrail-schema-verdicts.py`).
const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/formats/workrail/testdata");

/// A verdict of the published schema: valid or not, and its errors.
#[derive(Debug, Deserialize)]
struct Verdict {
    valid: bool,
    errors: Vec<Published>,
}

/// An error of the published schema: where, the keyword that failed, and
/// for a failed `oneOf` / `anyOf` the places its branches found errors
/// at, for unknown keys their places (`[pointer, keyword]` or
/// `[pointer, keyword, [pointer, …]]`).
#[derive(Debug, Deserialize)]
#[serde(try_from = "Vec<Value>")]
struct Published {
    at: String,
    keyword: String,
    inner: Vec<String>,
}

impl TryFrom<Vec<Value>> for Published {
    type Error = String;

    fn try_from(parts: Vec<Value>) -> Result<Self, String> {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let (Some(at), Some(keyword)) = (text(parts.first()), text(parts.get(1))) else {
            return Err(format!("not [pointer, keyword, …]: {parts:?}"));
        };
        let inner = parts
            .get(2)
            .and_then(Value::as_array)
            .map(|places| places.iter().filter_map(|p| text(Some(p))).collect())
            .unwrap_or_default();
        Ok(Published { at, keyword, inner })
    }
}

impl Published {
    /// A failed choice between alternatives.
    fn is_alternative(&self) -> bool {
        self.keyword == "oneOf" || self.keyword == "anyOf"
    }

    /// Unknown keys in an object (`inner`: their places).
    fn is_unknown_key(&self) -> bool {
        self.keyword == "additionalProperties"
    }
}

#[derive(Debug, Deserialize)]
struct Edit {
    file: String,
    op: String,
    at: String,
    #[serde(default)]
    value: Value,
    #[serde(default)]
    repeat: Option<(String, usize)>,
    #[serde(flatten)]
    verdict: Verdict,
}

#[derive(Debug, Deserialize)]
struct Verdicts {
    files: BTreeMap<String, Verdict>,
    edits: Vec<Edit>,
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// `doc` with one edit applied: remove, set (or add) the value at a
/// pointer, or append a value to the array there.
fn apply(doc: &Value, edit: &Edit) -> Value {
    let mut doc = doc.clone();
    let cut = edit.at.rfind('/').expect("an edit names a field");
    let last = edit.at[cut + 1..].replace("~1", "/").replace("~0", "~");
    let parent = doc
        .pointer_mut(&edit.at[..cut])
        .unwrap_or_else(|| panic!("no parent for {}", edit.at));
    let value = match &edit.repeat {
        Some((text, times)) => Value::String(text.repeat(*times)),
        None => edit.value.clone(),
    };
    match (edit.op.as_str(), parent) {
        ("remove", Value::Object(map)) => {
            map.remove(&last);
        }
        ("remove", Value::Array(items)) => {
            items.remove(last.parse::<usize>().unwrap());
        }
        ("set", Value::Object(map)) => {
            map.insert(last, value);
        }
        ("set", Value::Array(items)) => items[last.parse::<usize>().unwrap()] = value,
        ("append", parent) => parent
            .pointer_mut(&format!("/{}", &edit.at[cut + 1..]))
            .and_then(Value::as_array_mut)
            .expect("append to an array")
            .push(value),
        (op, _) => panic!("unknown edit {op} at {}", edit.at),
    }
    doc
}

/// Whether `p` is `q` or lies under it.
fn under(p: &str, q: &str) -> bool {
    p == q || p.strip_prefix(q).is_some_and(|rest| rest.starts_with('/'))
}

/// Why our result disagrees with the published verdict, if it does.
///
/// The same verdict, and the same error places: each place the
/// published schema names has an error of ours, and each error of ours
/// is at a place it names — except for two deliberate differences: an
/// unknown key is reported at its own pointer, not at the object holding
/// it; and where WorkRail's schema reports a failed `oneOf` / `anyOf` at
/// the alternative (a whole step, a whole confirmation rule), ours picks
/// the branch by its discriminating key and reports the field under it
/// that is wrong — a place one of the alternative's branches found an
/// error at.
fn disagreement(published: &Verdict, ours: &Result<(), Vec<WorkRailError>>) -> Option<String> {
    let mine: Vec<&str> = match ours {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|(at, _)| at.as_str()).collect(),
    };
    if published.valid != ours.is_ok() {
        return Some(format!(
            "published valid={}, ours {ours:?}",
            published.valid
        ));
    }
    for p in &published.errors {
        let found = if p.is_alternative() {
            mine.iter().any(|m| under(m, &p.at))
        } else if p.is_unknown_key() {
            p.inner.iter().all(|i| mine.contains(&i.as_str()))
        } else {
            mine.contains(&p.at.as_str())
        };
        if !found {
            return Some(format!(
                "no error of ours at {} ({}): {ours:?}",
                p.at, p.keyword
            ));
        }
    }
    for m in &mine {
        let placed = published.errors.iter().any(|p| {
            let inner = p.inner.iter().any(|i| i == m);
            if p.is_alternative() {
                under(m, &p.at) && inner
            } else if p.is_unknown_key() {
                inner
            } else {
                *m == p.at
            }
        });
        if !placed {
            return Some(format!(
                "ours at {m}, published {:?}: {ours:?}",
                published.errors
            ));
        }
    }
    None
}

#[test]
fn the_schema_compiles_and_our_examples_are_valid() {
    assert!(COMPILED.is_ok(), "{:?}", COMPILED.as_ref().err());
    let verdicts: Verdicts =
        serde_json::from_value(read_json(&Path::new(TESTDATA).join("schema-verdicts.json")))
            .unwrap();
    assert!(verdicts.files.len() >= 3);
    for (name, published) in &verdicts.files {
        let doc = read_json(&Path::new(TESTDATA).join(name));
        assert!(published.valid, "{name}");
        assert_eq!(check(&doc), Ok(()), "{name}");
    }
}

#[test]
fn every_edit_of_our_examples_gets_the_published_schemas_verdict() {
    let verdicts: Verdicts =
        serde_json::from_value(read_json(&Path::new(TESTDATA).join("schema-verdicts.json")))
            .unwrap();
    let docs: BTreeMap<&str, Value> = verdicts
        .files
        .keys()
        .map(|name| (name.as_str(), read_json(&Path::new(TESTDATA).join(name))))
        .collect();
    assert!(verdicts.edits.len() >= 300, "{}", verdicts.edits.len());
    let invalid = verdicts.edits.iter().filter(|e| !e.verdict.valid).count();
    assert!(
        invalid >= 100 && invalid < verdicts.edits.len(),
        "{invalid}"
    );
    let mut failures = Vec::new();
    for edit in &verdicts.edits {
        let ours = check(&apply(&docs[edit.file.as_str()], edit));
        let mut why = disagreement(&edit.verdict, &ours);
        // A single-field edit can only make its object wrong: its fields
        // (removing a step's `type` makes its `loop` unknown), what is
        // under them, or the objects holding it.
        let object = &edit.at[..edit.at.rfind('/').unwrap_or(0)];
        if let (None, Err(errors)) = (&why, &ours)
            && let Some((at, _)) = errors
                .iter()
                .find(|(at, _)| !under(at, object) && !under(object, at))
        {
            why = Some(format!("an error at {at}, away from the edit"));
        }
        if let Some(why) = why {
            failures.push(format!("{} {} {}: {why}", edit.file, edit.op, edit.at));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} edits disagree:\n{}",
        failures.len(),
        verdicts.edits.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// A WorkRail-style workflow with three distinct problems.
fn three_problems() -> Value {
    json!({
        "id": "Nightly_Build",
        "name": "Nightly build",
        "description": "Build, test and publish the nightly packages.",
        "version": "0.2.0",
        "steps": [
            {"id": "build", "title": "Build", "prompt": ""},
            {"id": "retry-tests", "type": "loop", "title": "Retry tests",
             "loop": {"type": "until", "condition": {"var": "green", "equals": true}},
             "body": [{"id": "run-tests", "title": "Run tests", "prompt": "Run the tests."}]},
            {"id": "publish", "title": "Publish", "prompt": "Publish the packages."}
        ]
    })
}

#[test]
fn every_error_of_a_file_is_reported_with_its_pointer() {
    let file = Path::new("nightly.json");
    let text = serde_json::to_string_pretty(&three_problems()).unwrap();
    let errors = super::super::from_text(file, &text).unwrap_err().0;
    let places: Vec<&str> = errors
        .iter()
        .map(|e| e.location.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(
        places,
        ["/id", "/steps/0/prompt", "/steps/1/loop"],
        "{errors:#?}"
    );
    assert!(
        errors
            .iter()
            .all(|e| e.file == file && e.message.starts_with("WorkRail workflow: ")),
        "{errors:#?}"
    );
    // As docs/guide/workrail.md shows them.
    let messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "WorkRail workflow: `id` is \"Nightly_Build\"; expected the workflow's id: 3 to 64 characters, lower-case letters, digits, `_` and `-` (like `bug-triage`), or two such names each starting with a letter joined by one dot (like `team.bug-triage`)",
            "WorkRail workflow: `prompt` is empty; expected the step's instructions, 1 to 8192 characters",
            "WorkRail workflow: `loop` lacks `maxIterations`, which is required: the most iterations, a number from 1 to 1000",
        ]
    );
}

#[test]
fn messages_say_what_is_wrong_and_what_is_expected_without_dumping_values() {
    let mut doc = three_problems();
    doc["id"] = json!("nightly");
    doc["steps"][0]["prompt"] = json!("Build.");
    doc["steps"][1]["loop"]["maxIterations"] = json!(3);
    assert_eq!(check(&doc), Ok(()));
    let said = |edit: &dyn Fn(&mut Value)| {
        let mut doc = doc.clone();
        edit(&mut doc);
        check(&doc).unwrap_err()
    };
    let errors = said(&|d| d["steps"][2]["type"] = json!("subflow"));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "/steps/2/type");
    assert!(errors[0].1.contains("`loop` or `parallel`"), "{errors:?}");
    let errors = said(&|d| d["steps"][0]["colour"] = json!("x".repeat(500)));
    assert_eq!(errors[0].0, "/steps/0/colour");
    assert!(errors[0].1.contains("unknown field `colour`"), "{errors:?}");
    assert!(errors[0].1.contains("`prompt`"), "{errors:?}");
    let errors = said(&|d| d["version"] = json!("v".repeat(500)));
    assert!(errors[0].1.chars().count() < 250, "{errors:?}");
    assert!(errors[0].1.contains('…'), "{errors:?}");
    let errors = said(&|d| d["steps"][1]["loop"] = json!({"type": "while", "maxIterations": 2}));
    assert_eq!(errors[0].0, "/steps/1/loop");
    assert!(
        errors[0].1.contains("`condition` or a `conditionSource`"),
        "{errors:?}"
    );
    let errors = said(&|d| d["steps"] = json!([]));
    assert_eq!(
        errors[0],
        (
            "/steps".into(),
            "`steps` is empty; expected the workflow's steps, at least one".into()
        )
    );
}

#[test]
fn a_file_nested_beyond_the_hosts_limit_is_refused_before_validation() {
    let mut deep = json!({"var": "x"});
    for _ in 0..crate::limits::MAX_DEPTH {
        deep = json!({"not": deep});
    }
    let mut doc = three_problems();
    doc["steps"][0]["runCondition"] = deep;
    let errors = check(&doc).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].1.contains("nested more than"), "{errors:?}");
}

/// The WorkRail workflows in `WFHOST_WORKRAIL_CORPUS` (a directory), with
/// the published schema's verdicts on them in `WFHOST_WORKRAIL_VERDICTS`
/// (`scripts/workrail-schema-verdicts.py --corpus DIR --corpus-out FILE`).
fn corpus() -> Option<(Vec<PathBuf>, BTreeMap<String, Verdict>)> {
    let dir = PathBuf::from(std::env::var_os("WFHOST_WORKRAIL_CORPUS")?);
    let verdicts = std::env::var_os("WFHOST_WORKRAIL_VERDICTS").map(PathBuf::from);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    #[derive(Deserialize)]
    struct Corpus {
        files: BTreeMap<String, Verdict>,
    }
    let published = match verdicts {
        Some(path) => {
            serde_json::from_value::<Corpus>(read_json(&path))
                .unwrap()
                .files
        }
        None => BTreeMap::new(),
    };
    Some((files, published))
}

#[test]
#[ignore = "needs WorkRail's workflows and the published verdicts on them (see corpus())"]
fn workrails_own_workflows_get_the_published_schemas_verdict() {
    let Some((files, published)) = corpus() else {
        panic!("set WFHOST_WORKRAIL_CORPUS and WFHOST_WORKRAIL_VERDICTS");
    };
    assert!(!files.is_empty());
    let mut failures = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let ours = check(&read_json(file));
        let verdict = published.get(&name).expect("a published verdict per file");
        if let Some(why) = disagreement(verdict, &ours) {
            failures.push(format!("{name}: {why}"));
        }
        eprintln!("{name}: valid={}", ours.is_ok());
        for (at, message) in ours.as_ref().err().into_iter().flatten() {
            eprintln!("  {at}: {message}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "a timing: run in release mode with WFHOST_WORKRAIL_CORPUS set"]
fn loading_workrails_own_workflows_is_fast() {
    let Some((files, _)) = corpus() else {
        panic!("set WFHOST_WORKRAIL_CORPUS");
    };
    let texts: Vec<(PathBuf, String)> = files
        .iter()
        .map(|f| (f.clone(), std::fs::read_to_string(f).unwrap()))
        .collect();
    let time = |each: &dyn Fn(&PathBuf, &str)| {
        let start = std::time::Instant::now();
        for (file, text) in &texts {
            each(file, text);
        }
        start.elapsed()
    };
    // Parse and check against the schema (compiling it, the first time).
    let validate = |_: &PathBuf, text: &str| {
        let value: Value = serde_json::from_str(text).unwrap();
        let _ = check(&value);
    };
    // All of loading: parse, check, compile to a manifest. Refusals are
    // fine here: the point is the time.
    let load = |file: &PathBuf, text: &str| {
        let _ = super::super::from_text(file, text);
    };
    let first = time(&validate);
    let checks = (0..5).map(|_| time(&validate)).min().unwrap();
    let loads = (0..5).map(|_| time(&load)).min().unwrap();
    eprintln!(
        "{} files: parse and check {first:?} the first time (schema compiled), {checks:?} after; whole load {loads:?}",
        texts.len()
    );
    if !cfg!(debug_assertions) {
        assert!(first.as_millis() <= 100, "{first:?}");
        assert!(loads.as_millis() <= 100, "{loads:?}");
    }
}

#[test]
fn the_example_workrail_workflow_passes_the_schema_and_compiles() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mcp/workflows/triage.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let workflow = super::super::from_text(&file, &text).unwrap().unwrap();
    assert_eq!(workflow.id, "triage");
}

#[test]
fn each_unknown_key_is_an_error_at_its_own_pointer() {
    let mut doc = three_problems();
    doc["steps"][0]["color/tone"] = json!("x");
    doc["steps"][0]["size"] = json!(1);
    doc["zone"] = json!(1);
    let errors = check(&doc).unwrap_err();
    let places: Vec<&str> = errors.iter().map(|(at, _)| at.as_str()).collect();
    assert_eq!(
        places,
        [
            "/id",
            "/steps/0/color~1tone",
            "/steps/0/prompt",
            "/steps/0/size",
            "/steps/1/loop",
            "/zone"
        ]
    );
    let (_, message) = &errors[1];
    assert!(
        message.starts_with("unknown field `color/tone`; the fields allowed here are `agentRole`"),
        "{message}"
    );
}
