//! What a block's `config` asks of a preset: `preset`, `model`, `resume`
//! and `home`, read once, checked with a message that names the field.

use serde_json::Value;

use super::{Preset, find, names};

/// Where a preset's CLI keeps its state (transcripts, sessions, settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Home {
    /// A directory of its own per run and block (a lane's per lane),
    /// under the workspace's `.output/agent/<run>/home/<NODE_ID>`: agents
    /// in parallel lanes never share a transcript, and the CLI's login
    /// comes from the environment (an API key).
    #[default]
    Isolated,
    /// The user's own `HOME` (a CLI logged in interactively).
    User,
}

/// A block's preset settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    pub preset: Option<String>,
    pub model: Option<String>,
    /// Continue the CLI's session of the block's previous execution in
    /// the run (a fix loop, a retry).
    pub resume: bool,
    pub home: Home,
}

impl Settings {
    /// The settings of a block's `config`; an error names the field
    /// (`(field, message)`).
    pub fn from_config(config: &Value) -> Result<Settings, (&'static str, String)> {
        let text = |key: &'static str| -> Result<Option<String>, (&'static str, String)> {
            match config.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err((key, format!("`{key}` is {other}, not text"))),
            }
        };
        let preset = match config.get("preset") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => {
                find(name).map_err(|e| ("preset", e))?;
                Some(name.clone())
            }
            Some(other) => {
                return Err((
                    "preset",
                    format!(
                        "`preset` is {other}, not a preset's name; the presets are {}",
                        names()
                    ),
                ));
            }
        };
        let resume = match config.get("resume") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(("resume", format!("`resume` is {other}, not true or false")));
            }
        };
        let home = match text("home")?.as_deref() {
            None | Some("isolated") => Home::Isolated,
            Some("user") => Home::User,
            Some(other) => {
                return Err((
                    "home",
                    format!("`home` is `{other}`; it is `isolated` (the default) or `user`"),
                ));
            }
        };
        let model = text("model")?;
        if let Some(model) = &model
            && !model_name(model)
        {
            return Err((
                "model",
                format!(
                    "`model` is `{}`: a model name is 1 to 200 letters, digits and `._:/@+-`, not starting with `-`",
                    model.escape_debug()
                ),
            ));
        }
        let settings = Settings {
            preset,
            model,
            resume,
            home,
        };
        if settings.preset.is_none() {
            for (key, set) in [
                ("resume", config.get("resume").is_some()),
                ("home", config.get("home").is_some()),
            ] {
                if set {
                    return Err((key, format!("`{key}` is for a `preset`")));
                }
            }
        }
        Ok(settings)
    }

    /// The preset named, if any (checked by [`Settings::from_config`]).
    pub fn preset(&self) -> Option<&'static Preset> {
        self.preset.as_deref().and_then(|name| find(name).ok())
    }
}

/// Whether `text` may be given to a CLI as a model name: it is one
/// argument, never an option.
fn model_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 200
        && !text.starts_with('-')
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:/@+-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_are_read_and_checked() {
        let s = Settings::from_config(&json!({"preset": "codex", "model": "m", "resume": true}))
            .unwrap();
        for model in [
            "gpt-5.5",
            "anthropic/claude-sonnet-4-5",
            "gemini-2.5-pro",
            "m@v1:x+y",
        ] {
            assert!(
                Settings::from_config(&json!({"preset": "opencode", "model": model})).is_ok(),
                "{model}"
            );
        }
        assert_eq!(s.preset.as_deref(), Some("codex"));
        assert_eq!(s.model.as_deref(), Some("m"));
        assert!(s.resume);
        assert_eq!(s.home, Home::Isolated);
        assert_eq!(
            Settings::from_config(&json!({"preset": "gemini", "home": "user"}))
                .unwrap()
                .home,
            Home::User
        );
        assert_eq!(
            Settings::from_config(&json!({})).unwrap(),
            Settings::default()
        );
        for (config, field, said) in [
            (json!({"preset": 3}), "preset", "not a preset's name"),
            (
                json!({"preset": "x"}),
                "preset",
                "`x` is not an agent preset",
            ),
            (
                json!({"preset": "codex", "resume": "yes"}),
                "resume",
                "not true or false",
            ),
            (
                json!({"preset": "codex", "home": "/root"}),
                "home",
                "`isolated` (the default) or `user`",
            ),
            (json!({"preset": "codex", "model": 4}), "model", "not text"),
            (
                json!({"preset": "codex", "model": "--help"}),
                "model",
                "not starting with `-`",
            ),
            (
                json!({"preset": "codex", "model": "a b"}),
                "model",
                "a model name is",
            ),
            (
                json!({"preset": "codex", "model": ""}),
                "model",
                "a model name is",
            ),
            (json!({"resume": true}), "resume", "is for a `preset`"),
            (json!({"home": "user"}), "home", "is for a `preset`"),
        ] {
            let (f, e) = Settings::from_config(&config).unwrap_err();
            assert_eq!(f, field, "{config}");
            assert!(e.contains(said), "{config}: {e}");
        }
    }
}
