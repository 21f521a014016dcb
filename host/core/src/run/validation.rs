//! Validation of worker output against a block's JSON Schema (seed 004,
//! step C): clean the raw output (markdown fences, preambles, trailing
//! chatter), parse it, validate it.

use serde_json::Value;

/// A compiled output schema.
pub struct OutputSchema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputSchema")
    }
}

/// Why output failed validation: each entry names the place and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationFailure(pub Vec<String>);

impl std::fmt::Display for ValidationFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

impl OutputSchema {
    /// Compile a schema; an invalid schema is an error that says why.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        crate::limits::schema(schema)
            .map(|validator| OutputSchema { validator })
            .map_err(|e| format!("invalid JSON Schema: {e}"))
    }

    /// Clean, parse and validate raw output; returns the cleaned JSON value.
    pub fn check(&self, raw: &str) -> Result<Value, ValidationFailure> {
        let cleaned = clean(raw);
        // Its size is the worker's output cap's to hold.
        crate::limits::json_depth(cleaned.as_bytes())
            .map_err(|e| ValidationFailure(vec![format!("output is {e}")]))?;
        let value: Value = serde_json::from_str(cleaned).map_err(|e| {
            ValidationFailure(vec![format!("output is not JSON after cleaning: {e}")])
        })?;
        let errors: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(20)
            .map(|e| {
                let path = e.instance_path().to_string();
                let at = if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                };
                format!("at {at}: {e}")
            })
            .collect();
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(ValidationFailure(errors))
        }
    }
}

/// Heuristic cleaner for model output: takes the body of the first fenced
/// code block if there is one, else the span from the first `{` or `[` to
/// the last matching closer, dropping preambles and trailing remarks.
pub fn clean(raw: &str) -> &str {
    let text = raw.trim();
    if let Some(start) = text.find("```") {
        let after = &text[start + 3..];
        // Skip the info string (`json`, `JSON`, …) up to the end of line.
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let body = &after[body_start..];
        let body = body.find("```").map_or(body, |end| &body[..end]);
        return body.trim();
    }
    let open = text.find(['{', '[']);
    match open {
        Some(i) => {
            let closer = if text.as_bytes()[i] == b'{' { '}' } else { ']' };
            match text.rfind(closer) {
                Some(j) if j > i => &text[i..=j],
                _ => &text[i..],
            }
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cleaner_strips_fences_and_chatter() {
        assert_eq!(clean("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
        assert_eq!(
            clean("Here you go:\n```\n[1, 2]\n```\nAnything else?"),
            "[1, 2]"
        );
        assert_eq!(
            clean("Sure! {\"a\": {\"b\": 2}} Hope this helps."),
            "{\"a\": {\"b\": 2}}"
        );
        assert_eq!(clean("  [1]  "), "[1]");
        assert_eq!(clean("no json here"), "no json here");
    }

    fn schema() -> OutputSchema {
        OutputSchema::compile(&json!({
            "type": "object",
            "required": ["title", "tasks"],
            "properties": {"title": {"type": "string"}, "tasks": {"type": "array", "minItems": 1}}
        }))
        .unwrap()
    }

    #[test]
    fn valid_output_is_returned_clean() {
        let v = schema()
            .check("Plan:\n```json\n{\"title\": \"x\", \"tasks\": [\"t1\"]}\n```")
            .unwrap();
        assert_eq!(v, json!({"title": "x", "tasks": ["t1"]}));
    }

    #[test]
    fn deep_output_and_deep_schemas_are_refused() {
        crate::limits::tests::on_small_stack(|| {
            let recursive = OutputSchema::compile(&json!({"items": {"$ref": "#"}})).unwrap();
            let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
            let e = recursive.check(&deep).unwrap_err();
            assert!(
                e.to_string().contains("nested more than 64 levels deep"),
                "{e}"
            );
            let mut schema = json!({});
            for _ in 0..100 {
                schema = json!({"items": schema});
            }
            let e = OutputSchema::compile(&schema).unwrap_err();
            assert!(e.contains("nested more than 64 levels deep"), "{e}");
        });
    }

    #[test]
    fn failures_say_what_and_where() {
        let err = schema().check("{\"title\": 3, \"tasks\": []}").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("at /title") && text.contains("at /tasks"),
            "{text}"
        );
        let err = schema().check("I could not do it.").unwrap_err();
        assert!(err.to_string().contains("not JSON"), "{err}");
    }

    #[test]
    fn invalid_schemas_are_refused() {
        let err = OutputSchema::compile(&json!({"type": "banana"})).unwrap_err();
        assert!(err.starts_with("invalid JSON Schema"), "{err}");
    }
}
