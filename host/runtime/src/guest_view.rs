//! What a plugin reads, in its own terms: every text the host hands a
//! guest (the payload's segments, the block context, the failure of an
//! earlier block) goes through one [`GuestView`], which writes the host
//! paths of the workspace (as given and canonical, the run's and a lane's)
//! and of staging copies (`…/wfhost-stage-XXXX/root|dirs`) as the guest
//! sees them, under `/workspace`. A message needs no rewriting of its own:
//! whatever reaches a plugin passes here.

use std::path::Path;

use wfhost_core::run::payload::{BlockContext, ContextSegment};

use crate::bindings::types as wit;
use crate::sandbox::GUEST_WORKSPACE;

/// The host paths one block's guest must not see.
pub(crate) struct GuestView {
    /// Longest first, so a path inside another is never half-replaced.
    paths: Vec<String>,
}

impl GuestView {
    /// The view of a block working in `workspace`, of a run whose main
    /// workspace is `main` (the same but for lanes). A directory is
    /// resolved once however often it is named (a block of the main
    /// workspace, every block of a run, names it twice).
    pub(crate) fn new(workspace: &Path, main: &Path) -> GuestView {
        let mut paths = Vec::new();
        let dirs: &[&Path] = if workspace == main {
            &[workspace]
        } else {
            &[workspace, main]
        };
        for dir in dirs {
            for path in [Some(dir.to_path_buf()), dir.canonicalize().ok()]
                .into_iter()
                .flatten()
            {
                let shown = path.display().to_string();
                if shown.len() > 1 && !paths.contains(&shown) {
                    paths.push(shown);
                }
            }
        }
        paths.sort_by_key(|p| std::cmp::Reverse(p.len()));
        GuestView { paths }
    }

    /// `text` as the guest sees it.
    pub(crate) fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for path in &self.paths {
            if out.contains(path.as_str()) {
                out = out.replace(path.as_str(), GUEST_WORKSPACE);
            }
        }
        hide_staging_paths(&out)
    }

    pub(crate) fn segment(&self, s: &ContextSegment) -> wit::ContextSegment {
        wit::ContextSegment {
            id: self.text(&s.id),
            kind: self.text(&s.kind),
            content: self.text(&s.content),
        }
    }

    pub(crate) fn context(&self, ctx: &BlockContext) -> wit::BlockContext {
        let t = |s: &str| self.text(s);
        wit::BlockContext {
            workflow_id: ctx.workflow_id.clone(),
            execution_id: ctx.execution_id.clone(),
            node_id: ctx.node_id.clone(),
            block_id: ctx.block_id.clone(),
            step_index: ctx.step_index,
            attempt: ctx.attempt,
            previous_block_id: ctx.previous_block_id.clone(),
            static_memory: t(&ctx.static_memory.to_string()),
            inherited_memory: t(&ctx.inherited_memory.to_string()),
            artifacts: ctx
                .artifacts
                .iter()
                .map(|(block_id, content)| wit::Artifact {
                    block_id: block_id.clone(),
                    content: t(content),
                })
                .collect(),
            config: t(&ctx.config.to_string()),
            inputs: match &ctx.inputs {
                serde_json::Value::Object(_) => t(&ctx.inputs.to_string()),
                _ => "{}".into(),
            },
            file_restrictions: ctx.file_restrictions.clone(),
            workspace_dir: GUEST_WORKSPACE.into(),
            system_prompt: t(&ctx.system_prompt),
            assembled_context: t(&ctx.assembled_context),
        }
    }
}

fn hide_staging_paths(text: &str) -> String {
    const MARK: &str = "wfhost-stage-";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        // The absolute path starts after the last separator before it.
        let start = rest[..at]
            .rfind(|c: char| c.is_whitespace() || "`'\"(=:".contains(c))
            .map_or(0, |i| i + 1);
        let after = &rest[at + MARK.len()..];
        let name_end = after.find('/').unwrap_or(after.len());
        let mut tail = &after[name_end..];
        for inner in ["/root", "/dirs"] {
            if let Some(t) = tail.strip_prefix(inner) {
                tail = t;
            }
        }
        out.push_str(&rest[..start]);
        out.push_str(GUEST_WORKSPACE);
        rest = tail;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_are_shown_as_the_guest_sees_them() {
        let ws = tempfile::tempdir().unwrap();
        let view = GuestView::new(ws.path(), ws.path());
        let host = ws.path().join("notes/a.txt").display().to_string();
        let message = format!(
            "cannot write `{host}`; staged (/tmp/wfhost-stage-Ab12/dirs/notes/b.txt) and /var/tmp/wfhost-stage-x/root"
        );
        assert_eq!(
            view.text(&message),
            "cannot write `/workspace/notes/a.txt`; staged (/workspace/notes/b.txt) and /workspace"
        );
    }

    #[test]
    fn a_lane_hides_its_own_and_the_runs_workspace() {
        let main = tempfile::tempdir().unwrap();
        let lane = tempfile::tempdir().unwrap();
        let view = GuestView::new(lane.path(), main.path());
        let text = format!(
            "{}/a and {}/b",
            main.path().display(),
            lane.path().display()
        );
        assert_eq!(view.text(&text), "/workspace/a and /workspace/b");
    }

    #[test]
    fn every_text_of_the_context_and_payload_is_rewritten() {
        let ws = tempfile::tempdir().unwrap();
        let host = ws.path().display().to_string();
        let view = GuestView::new(ws.path(), ws.path());
        let segment = ContextSegment {
            id: "WORKER_ERROR".into(),
            kind: "error".into(),
            content: format!("sandbox: cannot prepare {host}/src"),
        };
        assert_eq!(
            view.segment(&segment).content,
            "sandbox: cannot prepare /workspace/src"
        );
        let ctx = BlockContext {
            workflow_id: "w".into(),
            execution_id: "run-20260101-000000-000001".into(),
            node_id: "main".into(),
            block_id: "a".into(),
            step_index: 0,
            attempt: 1,
            previous_block_id: None,
            static_memory: serde_json::json!({}),
            inherited_memory: serde_json::json!({}),
            artifacts: [("a".to_string(), format!("{host}/out"))].into(),
            config: serde_json::json!({"dir": format!("{host}/cfg")}),
            inputs: serde_json::json!({}),
            file_restrictions: None,
            system_prompt: format!("work in {host}"),
            assembled_context: format!("[{host}/x]"),
        };
        let wit = view.context(&ctx);
        let all = format!(
            "{}{}{}{}",
            wit.system_prompt, wit.assembled_context, wit.artifacts[0].content, wit.config
        );
        assert!(!all.contains(&host), "{all}");
    }
}
