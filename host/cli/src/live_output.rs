//! `wfhost run -v` (and `resume -v`): a running block's command output as
//! its commands write it, read from the capture files of its result bundle
//! ([`LiveTail`]) by a thread that polls while the block runs. The lines
//! are shown, never recorded: the bundle keeps the output, the run's log
//! keeps what the block did.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wfhost_core::run::event::Event;
use wfhost_core::text::escape;
use wfhost_core::workspace::bundles::{LiveLine, LiveTail};
use wfhost_store::RunId;

/// Where live lines go: above the status line, or plain standard output.
pub type Print = Arc<dyn Fn(&[String]) + Send + Sync>;

/// How often a running block's capture files are read.
const POLL: Duration = Duration::from_millis(200);

pub struct LiveOutput {
    workspace: PathBuf,
    run_id: RunId,
    print: Print,
    running: Option<Follow>,
}

struct Follow {
    step: u64,
    name: String,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<LiveTail>,
}

impl LiveOutput {
    pub fn new(workspace: PathBuf, run_id: RunId, print: Print) -> LiveOutput {
        LiveOutput {
            workspace,
            run_id,
            print,
            running: None,
        }
    }

    /// Follow the block `event` starts; at its end (or when it fans out
    /// into lanes, which work elsewhere) stop, and return the rest of its
    /// output, to be printed before the event's own lines.
    pub fn observe(&mut self, event: &Event) -> Vec<String> {
        match event {
            Event::BlockStarted {
                step, node, block, ..
            } => {
                let rest = self.stop();
                self.start(*step, format!("{node}.{block}"));
                rest
            }
            Event::BlockCompleted { .. } | Event::LanesStarted { .. } => self.stop(),
            _ => Vec::new(),
        }
    }

    fn start(&mut self, step: u64, name: String) {
        let stop = Arc::new(AtomicBool::new(false));
        let (workspace, run_id, print) = (
            self.workspace.clone(),
            self.run_id.clone(),
            Arc::clone(&self.print),
        );
        let (flag, label) = (Arc::clone(&stop), name.clone());
        let thread = std::thread::spawn(move || {
            let mut tail = LiveTail::default();
            while !flag.load(Ordering::Relaxed) {
                let first = !tail.seen();
                let lines = tail.poll(&workspace, &run_id, step, &label, false);
                if !lines.is_empty() {
                    let mut shown = Vec::new();
                    if first {
                        shown.push(format!("  [{step}] {label} running …"));
                    }
                    shown.extend(lines.iter().map(line));
                    print(&shown);
                }
                std::thread::park_timeout(POLL);
            }
            tail
        });
        self.running = Some(Follow {
            step,
            name,
            stop,
            thread,
        });
    }

    /// Stop following; what the block wrote since the last poll.
    fn stop(&mut self) -> Vec<String> {
        let Some(follow) = self.running.take() else {
            return Vec::new();
        };
        follow.stop.store(true, Ordering::Relaxed);
        follow.thread.thread().unpark();
        let Ok(mut tail) = follow.thread.join() else {
            return Vec::new();
        };
        let first = !tail.seen();
        let lines = tail.poll(
            &self.workspace,
            &self.run_id,
            follow.step,
            &follow.name,
            true,
        );
        let mut shown = Vec::new();
        if first && !lines.is_empty() {
            shown.push(format!("  [{}] {} running …", follow.step, follow.name));
        }
        shown.extend(lines.iter().map(line));
        shown
    }
}

impl Drop for LiveOutput {
    fn drop(&mut self) {
        let rest = self.stop();
        (self.print)(&rest);
    }
}

fn line(l: &LiveLine) -> String {
    if l.progress {
        return format!("    » {}", escape(&l.text));
    }
    let sep = if l.text.is_empty() { "" } else { " " };
    let text: Vec<String> = l.text.split('\t').map(escape).collect();
    format!("    {}|{sep}{}", l.stream, text.join("\t"))
}
