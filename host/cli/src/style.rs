//! Colour for people at a terminal, and nothing for anyone else.
//!
//! Colour is used only when the stream is a terminal and `NO_COLOR` is
//! unset or empty (<https://no-color.org>): signals green or red, errors
//! red. Everything painted is escaped first
//! ([`wfhost_core::text::escape`]), so the only escape sequences on the
//! screen are ours.

use std::io::IsTerminal;

use wfhost_core::text::escape;

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[0m";

/// Whether to paint, decided once per stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub colour: bool,
}

/// Whether the user allows colour at all.
fn colour_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

impl Style {
    /// For what goes to standard output.
    pub fn stdout() -> Style {
        Style {
            colour: colour_allowed() && std::io::stdout().is_terminal(),
        }
    }

    /// For what goes to standard error.
    pub fn stderr() -> Style {
        Style {
            colour: colour_allowed() && std::io::stderr().is_terminal(),
        }
    }

    /// No colour.
    #[cfg(test)]
    pub const PLAIN: Style = Style { colour: false };

    fn paint(self, colour: &str, text: &str) -> String {
        let text = escape(text);
        if self.colour {
            format!("{colour}{text}{RESET}")
        } else {
            text
        }
    }

    /// Something that went well.
    pub fn good(self, text: &str) -> String {
        self.paint(GREEN, text)
    }

    /// Something that went wrong.
    pub fn bad(self, text: &str) -> String {
        self.paint(RED, text)
    }

    /// A signal: green when it says the block succeeded or was approved,
    /// red when it says something failed, plain otherwise.
    pub fn signal(self, signal: &str) -> String {
        match tone(signal) {
            Some(true) => self.good(signal),
            Some(false) => self.bad(signal),
            None => escape(signal),
        }
    }
}

/// `Some(true)` for a signal of success, `Some(false)` for one of failure.
fn tone(signal: &str) -> Option<bool> {
    let name = signal.strip_prefix("SIGNAL:").unwrap_or(signal);
    if ["FAIL", "ERROR", "REJECT", "TIMEOUT"]
        .iter()
        .any(|w| name.contains(w))
    {
        Some(false)
    } else if ["SUCCESS", "APPROVED", "PASS", "DONE"]
        .iter()
        .any(|w| name.contains(w))
    {
        Some(true)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_green_or_red_only_in_colour() {
        let on = Style { colour: true };
        assert_eq!(on.signal("SIGNAL:SUCCESS"), "\x1b[32mSIGNAL:SUCCESS\x1b[0m");
        assert_eq!(
            on.signal("SIGNAL:WORKER_ERROR"),
            "\x1b[31mSIGNAL:WORKER_ERROR\x1b[0m"
        );
        assert_eq!(on.signal("SIGNAL:RETRY"), "SIGNAL:RETRY");
        assert_eq!(Style::PLAIN.signal("SIGNAL:SUCCESS"), "SIGNAL:SUCCESS");
    }

    #[test]
    fn painted_text_is_escaped_first() {
        let on = Style { colour: true };
        assert_eq!(
            on.signal("SIGNAL:SUCCESS\x1b[2J"),
            "\x1b[32mSIGNAL:SUCCESS\\e[2J\x1b[0m"
        );
        assert_eq!(Style::PLAIN.bad("a\nb"), "a\\nb");
    }
}
