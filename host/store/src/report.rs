//! A run's branch as a Markdown report for people: its steps, the
//! decisions taken at its gates, what its blocks produced, the conflicts
//! of its parallel lanes and how it ended. Rendered from the branch's
//! events alone (the dashboard's "export as Markdown").

use std::fmt::Write;

use wfhost_core::run::event::{Event, Outcome};

use crate::view::steps_of;
use crate::{RunRecord, StoredEvent};

/// What the report's heading says about the run besides its record.
pub struct ReportHead<'a> {
    pub run: &'a RunRecord,
    pub branch: u32,
    pub status: &'a str,
    pub session: Option<&'a str>,
}

/// The longest artifact or note quoted whole; longer ones are cut.
const QUOTE_LIMIT: usize = 4000;

/// The report of `head`'s branch, whose chain is `chain`.
pub fn markdown(head: &ReportHead, chain: &[StoredEvent]) -> String {
    let mut out = String::new();
    heading(&mut out, head, chain);
    steps(&mut out, chain);
    decisions(&mut out, chain);
    outputs(&mut out, chain);
    conflicts(&mut out, chain);
    outcome(&mut out, head.status, chain);
    out
}

fn heading(out: &mut String, head: &ReportHead, chain: &[StoredEvent]) {
    let run = head.run;
    let _ = writeln!(out, "# Run `{}`\n", run.id);
    let _ = writeln!(out, "| | |\n|---|---|");
    let _ = writeln!(out, "| Workflow | `{}` |", cell(&run.workflow_id));
    let _ = writeln!(out, "| Definition | `{}` |", run.workflow_hash);
    let _ = writeln!(out, "| Workspace | `{}` |", cell(&run.workspace));
    if let Some(session) = head.session {
        let _ = writeln!(out, "| Session | `{}` |", cell(session));
    }
    let _ = writeln!(out, "| Branch | {} |", head.branch);
    let _ = writeln!(out, "| Status | {} |", head.status);
    let _ = writeln!(out, "| Started | {} |", time(run.created_at));
    if let Some(last) = chain.last() {
        let _ = writeln!(out, "| Last event | {} |", time(last.at));
    }
    let mut total = wfhost_core::run::payload::Statistics::default();
    for e in chain {
        if let Event::BlockCompleted { statistics, .. } = &e.event {
            total.add(*statistics);
        }
    }
    let _ = write!(out, "| Tokens | {}", total.tokens_used);
    if !total.usage.is_zero() {
        let _ = write!(out, " ({})", total.usage.describe());
    }
    out.push_str(" |\n\n");
}

fn steps(out: &mut String, chain: &[StoredEvent]) {
    let lines = steps_of(chain);
    let _ = writeln!(out, "## Steps ({})\n", lines.len());
    if lines.is_empty() {
        out.push_str("No step ran.\n\n");
        return;
    }
    out.push_str("| Step | Block | Attempt | Signal | Action | Duration |\n");
    out.push_str("|---:|---|---:|---|---|---:|\n");
    for l in &lines {
        let action = match (&l.action, &l.command) {
            (Some(a), Some(c)) => format!("{} → {}", a, c),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {:.1} ms |",
            l.step,
            cell(&l.block),
            l.attempt,
            cell(&l.signal),
            cell(&action),
            l.duration_ms
        );
        for warning in &l.warnings {
            let _ = writeln!(out, "| | ⚠ {} | | | | |", cell(warning));
        }
        for lane in &l.lanes {
            let _ = writeln!(
                out,
                "| | ↳ lane `{}` | | {} | {} | {:.1} ms |",
                cell(&lane.lane),
                cell(&lane.signal),
                cell(lane.failure.as_deref().unwrap_or("")),
                lane.duration_ms
            );
        }
    }
    out.push('\n');
}

fn decisions(out: &mut String, chain: &[StoredEvent]) {
    let mut rows = Vec::new();
    for e in chain {
        match &e.event {
            Event::ActionTaken {
                step,
                gate_id: Some(gate),
                ..
            } => rows.push(format!("- Step {step}: gate `{gate}` opened")),
            Event::FanInWaiting { step, gate_id, .. } => rows.push(format!(
                "- Step {step}: gate `{gate_id}` opened on conflicting lanes"
            )),
            Event::GateAnswered { gate_id, decision } => rows.push(format!(
                "  - `{gate_id}` answered: {}",
                one_line(&decision.to_string())
            )),
            _ => {}
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("## Decisions\n\n");
    for r in rows {
        out.push_str(&r);
        out.push('\n');
    }
    out.push('\n');
}

fn outputs(out: &mut String, chain: &[StoredEvent]) {
    let mut any = false;
    for e in chain {
        let (title, body, lang) = match &e.event {
            Event::BlockCompleted {
                step,
                node,
                block,
                artifact: Some(artifact),
                ..
            } => (format!("Step {step} `{node}.{block}`"), artifact, "json"),
            Event::Checkpointed { notes_markdown } => {
                ("Checkpoint notes".to_string(), notes_markdown, "markdown")
            }
            _ => continue,
        };
        if !any {
            out.push_str("## Outputs\n\n");
            any = true;
        }
        let _ = writeln!(out, "### {title}\n\n{}\n", fenced(body, lang));
    }
}

fn conflicts(out: &mut String, chain: &[StoredEvent]) {
    let mut rows = Vec::new();
    for e in chain {
        match &e.event {
            Event::LaneConflictDetected {
                step,
                conflicting_file,
                lanes,
                applied_from,
                ..
            } => rows.push(format!(
                "- Step {step}: `{}` changed by {}; {}",
                conflicting_file,
                lanes
                    .iter()
                    .map(|l| format!("`{l}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                match applied_from {
                    Some(lane) => format!("applied from `{lane}`"),
                    None => "left for the user to choose".to_string(),
                }
            )),
            Event::FanInCompleted {
                step,
                applied,
                discarded,
                ..
            } => {
                let files =
                    |v: &[(String, Vec<String>)]| v.iter().map(|(_, f)| f.len()).sum::<usize>();
                rows.push(format!(
                    "- Step {step}: fan-in applied {} file(s), discarded {}",
                    files(applied),
                    files(discarded)
                ))
            }
            _ => {}
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("## Parallel lanes\n\n");
    for r in rows {
        out.push_str(&r);
        out.push('\n');
    }
    out.push('\n');
}

fn outcome(out: &mut String, status: &str, chain: &[StoredEvent]) {
    out.push_str("## Outcome\n\n");
    let finished = chain.iter().rev().find_map(|e| match &e.event {
        Event::RunFinished { outcome } => Some(outcome),
        _ => None,
    });
    match finished {
        Some(Outcome::Failed { reason }) => {
            let _ = writeln!(out, "Failed: {}", one_line(reason));
        }
        Some(Outcome::Cancelled { by, reason }) => {
            let text = Outcome::cancelled_text(by, reason.as_deref());
            let _ = writeln!(out, "Cancelled: {}", one_line(&text));
        }
        // A run also ends with its `end` command, recorded as an action.
        _ if status == "succeeded" => out.push_str("Succeeded.\n"),
        Some(Outcome::Succeeded) => out.push_str("Succeeded.\n"),
        None => {
            let _ = writeln!(out, "Not finished ({status}).");
        }
    }
}

/// Text for one table cell: one line, no column breaks.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `body` in a code fence longer than any backtick run inside it, cut at
/// [`QUOTE_LIMIT`] characters.
fn fenced(body: &str, lang: &str) -> String {
    let mut text: String = body.chars().take(QUOTE_LIMIT).collect();
    if text.len() < body.len() {
        text.push_str("\n… (cut)");
    }
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{text}\n{fence}")
}

fn time(ms: i64) -> String {
    crate::time::format_utc(ms)
}
