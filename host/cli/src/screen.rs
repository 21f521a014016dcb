//! The lines a run prints as it goes, one event at a time.
//!
//! Steps are numbered as the engine numbers them (the numbers `wfhost show`
//! and `wfhost logs` use). A parallel block keeps its own step; its lanes
//! are printed under it as `[step.lane]`. Lane `i` (in the order the
//! fan-out line lists them) runs as step `step + i` — the step index its
//! worker sees and its exec bundle is named after — so the block after a
//! parallel block of `n` lanes has step `step + n`; the fan-out line says
//! so.
//!
//! Everything a plugin or agent wrote (signals, reasons, log lines) is
//! escaped: a worker cannot clear the screen or forge a line.

use wfhost_core::run::event::Event;
use wfhost_core::run::transitions::FAIL_DEFAULT;
use wfhost_core::text::{count, escape};

use crate::style::Style;

/// The payload segment the engine adds when a block's output fails its
/// validation schema.
const VALIDATION_ERROR: &str = "VALIDATION_ERROR";

/// Indentation of the lines under a block's line.
const UNDER: &str = "        ";

/// What the screen remembers between events.
pub struct Screen {
    style: Style,
    verbose: bool,
    /// `node.block` of the block started last.
    current: String,
    /// Why the last completed block went wrong: its worker's error or its
    /// validation error.
    cause: Option<String>,
}

fn ms(duration_us: u64) -> String {
    format!("{:.1} ms", duration_us as f64 / 1000.0)
}

impl Screen {
    pub fn new(style: Style, verbose: bool) -> Screen {
        Screen {
            style,
            verbose,
            current: String::new(),
            cause: None,
        }
    }

    /// The error of the last block that completed with one, to name as the
    /// cause when the run fails.
    pub fn cause(&self) -> Option<&str> {
        self.cause.as_deref()
    }

    /// The lines to print for `event` (none for most events).
    pub fn lines(&mut self, event: &Event) -> Vec<String> {
        match event {
            Event::BlockStarted { node, block, .. } => {
                self.current = format!("{node}.{block}");
                if self.verbose {
                    vec![format!("  {}", event.describe())]
                } else {
                    vec![]
                }
            }
            Event::BlockCompleted { .. } => self.completed(event),
            Event::ActionTaken { .. } => self.action(event),
            Event::LanesStarted {
                step,
                lanes,
                merge_strategy,
                over,
            } => {
                let last = step + lanes.len().saturating_sub(1) as u64;
                vec![format!(
                    "  [{step}] {}: {} ({}), merge: {}; the lanes run as steps {step}-{last}",
                    escape(&self.current),
                    count(lanes.len() as u64, "lane"),
                    escape(&wfhost_core::run::event::lane_list(lanes, over.as_deref())),
                    merge_strategy.as_str()
                )]
            }
            Event::LaneCompleted { .. } => self.lane(event),
            Event::Resumed { .. }
            | Event::GateAnswered { .. }
            | Event::GateReasked { .. }
            | Event::LaneRetried { .. }
            | Event::LaneConflictDetected { .. }
            | Event::FanInWaiting { .. }
            | Event::FanInCompleted { .. }
            | Event::ExternalAwaited { .. }
            | Event::TimerStarted { .. }
            | Event::RetryScheduled { .. }
            | Event::InputsMerged { .. }
            | Event::Checkpointed { .. } => vec![format!("  {}", event.describe())],
            // Agents may send many: shown with `--verbose` only.
            Event::Telemetry { .. } if self.verbose => vec![format!("  {}", event.describe())],
            Event::Telemetry { .. } => vec![],
            Event::RunStarted { .. } | Event::RunFinished { .. } | Event::Forked { .. } => {
                vec![]
            }
        }
    }

    fn completed(&mut self, event: &Event) -> Vec<String> {
        let Event::BlockCompleted {
            step,
            node,
            block,
            signal,
            payload,
            duration_us,
            failure,
            log,
            ..
        } = event
        else {
            return vec![];
        };
        let mut lines = vec![format!(
            "  [{step}] {} -> {} ({})",
            escape(&format!("{node}.{block}")),
            self.style.signal(signal),
            ms(*duration_us)
        )];
        let validation = payload
            .push
            .iter()
            .rev()
            .find(|s| s.kind == VALIDATION_ERROR)
            .map(|s| s.content.clone());
        self.cause = failure.clone().or(validation.clone());
        if let Some(why) = failure {
            lines.push(format!(
                "{UNDER}{}",
                self.style.bad(&format!("error: {why}"))
            ));
        }
        if let Some(why) = validation {
            lines.push(format!(
                "{UNDER}{}",
                self.style.bad(&format!("validation error: {why}"))
            ));
        }
        if self.verbose {
            lines.extend(log.iter().map(|l| format!("{UNDER}{}", escape(l))));
        } else {
            // Warnings and errors show without -v: a rolled-back change
            // outside the restrictions is never quiet.
            lines.extend(wfhost_store::view::warnings_of(log).iter().map(|w| {
                format!(
                    "{UNDER}{}",
                    self.style.bad(&format!("warning: {}", escape(w)))
                )
            }));
        }
        lines
    }

    fn lane(&mut self, event: &Event) -> Vec<String> {
        let Event::LaneCompleted {
            step,
            lane,
            signal,
            changed,
            failure,
            duration_us,
            log,
            ..
        } = event
        else {
            return vec![];
        };
        let mut lines = vec![format!(
            "  [{step}.{}] -> {} ({}, {} changed)",
            escape(lane),
            self.style.signal(signal),
            ms(*duration_us),
            count(changed.len() as u64, "file")
        )];
        if let Some(why) = failure {
            lines.push(format!(
                "{UNDER}{}",
                self.style.bad(&format!("error: {why}"))
            ));
        }
        if self.verbose {
            lines.extend(log.iter().map(|l| format!("{UNDER}{}", escape(l))));
        }
        lines
    }

    fn action(&self, event: &Event) -> Vec<String> {
        let Event::ActionTaken {
            action,
            command,
            gate_id,
            fallback_for,
            ..
        } = event
        else {
            return vec![];
        };
        let mut lines = Vec::new();
        if let Some(signal) = fallback_for {
            lines.push(format!(
                "{UNDER}fallback: {} -> {FAIL_DEFAULT} (the block has no transition for it)",
                escape(signal)
            ));
        }
        let shown = match gate_id {
            Some(id) => format!("{action}: gate {id} opened"),
            None => command.after(action),
        };
        lines.push(format!("{UNDER}{}", escape(&shown)));
        lines
    }
}

#[cfg(test)]
mod tests {
    use wfhost_core::parallel::fan_in::MergeStrategy;
    use wfhost_core::run::event::{CommandRecord, PayloadDelta};
    use wfhost_core::run::payload::{ContextSegment, Statistics};

    use super::*;

    fn completed(step: u64, block: &str, signal: &str, push: Vec<ContextSegment>) -> Event {
        Event::BlockCompleted {
            step,
            node: "main".into(),
            block: block.into(),
            signal: signal.into(),
            payload: PayloadDelta { keep: 0, push },
            artifact: None,
            statistics: Statistics::default(),
            duration_us: 1500,
            queued_us: 0,
            failure: None,
            permanent: false,
            log: vec!["one\x1b[2J".into()],
            written: Vec::new(),
        }
    }

    fn started(step: u64, block: &str) -> Event {
        Event::BlockStarted {
            step,
            node: "main".into(),
            block: block.into(),
            attempt: 1,
        }
    }

    fn lane(step: u64, lane: &str, changed: usize) -> Event {
        Event::LaneCompleted {
            step,
            lane: lane.into(),
            signal: "SIGNAL:SUCCESS".into(),
            changed: (0..changed).map(|i| format!("f{i}")).collect(),
            failure: None,
            summary: None,
            payload: vec![],
            statistics: Statistics::default(),
            duration_us: 2000,
            log: vec![],
        }
    }

    #[test]
    fn lanes_are_sub_items_of_their_block_step() {
        let mut screen = Screen::new(Style::PLAIN, false);
        assert!(screen.lines(&started(4, "dev")).is_empty());
        let fan_out = Event::LanesStarted {
            step: 4,
            lanes: vec!["api".into(), "ui".into()],
            merge_strategy: MergeStrategy::Workspace,
            over: None,
        };
        assert_eq!(
            screen.lines(&fan_out),
            ["  [4] main.dev: 2 lanes (api, ui), merge: workspace; the lanes run as steps 4-5"]
        );
        assert_eq!(
            screen.lines(&lane(4, "ui", 1)),
            ["  [4.ui] -> SIGNAL:SUCCESS (2.0 ms, 1 file changed)"]
        );
        assert_eq!(
            screen.lines(&lane(4, "api", 2)),
            ["  [4.api] -> SIGNAL:SUCCESS (2.0 ms, 2 files changed)"]
        );
        assert_eq!(
            screen.lines(&completed(4, "dev", "SIGNAL:SUCCESS", vec![])),
            ["  [4] main.dev -> SIGNAL:SUCCESS (1.5 ms)"]
        );
    }

    #[test]
    fn validation_errors_and_fallbacks_are_shown() {
        let mut screen = Screen::new(Style::PLAIN, false);
        let bad = ContextSegment::new("v", VALIDATION_ERROR, "output failed: missing `x`");
        let lines = screen.lines(&completed(0, "a", "SIGNAL:VALIDATION_FAIL", vec![bad]));
        assert_eq!(
            lines[1],
            "        validation error: output failed: missing `x`"
        );
        assert_eq!(screen.cause(), Some("output failed: missing `x`"));
        let taken = Event::ActionTaken {
            step: 0,
            action: "FAIL:no".into(),
            command: CommandRecord::Fail {
                reason: "no".into(),
            },
            gate_id: None,
            fallback_for: Some("SIGNAL:VALIDATION_FAIL".into()),
        };
        let lines = screen.lines(&taken);
        assert!(
            lines[0].contains("SIGNAL:VALIDATION_FAIL -> SIGNAL:FAIL_DEFAULT"),
            "{lines:?}"
        );
        // The reason is shown once.
        assert_eq!(lines[1], "        FAIL:no");
        screen.lines(&completed(1, "b", "SIGNAL:SUCCESS", vec![]));
        assert_eq!(screen.cause(), None);
    }

    #[test]
    fn plugin_text_is_escaped_even_in_verbose_logs() {
        let mut screen = Screen::new(Style { colour: true }, true);
        let lines = screen.lines(&completed(0, "a", "SIGNAL:OK\r\x1b]0;x\x07", vec![]));
        assert!(lines[0].contains("SIGNAL:OK\\r\\e]0;x\\u{7}"), "{lines:?}");
        assert_eq!(lines[1], "        one\\e[2J");
    }
}
