//! Text for people: counted nouns and safe display of untrusted strings.
//!
//! Signals, failure reasons, log lines and prompts come from plugins and
//! agents. Printed as they are, a control character in them could clear
//! the screen, move the cursor, set the terminal's title (ESC and OSC
//! sequences), overwrite the line before it (CR) or forge a line of the
//! report (a newline). [`escape`] shows such characters instead of letting
//! the terminal act on them.

use std::fmt::Write;

/// `n` and the noun, singular for one: `count(1, "line")` is `1 line`,
/// `count(2, "line")` is `2 lines`.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    format!("{n} {}", plural(n, noun))
}

/// The noun as `n` of it reads: `run` for one, else `runs` (nouns ending
/// in `s`, `x`, `ch` or `sh` take `es`).
pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        return noun.to_string();
    }
    let es = ["s", "x", "ch", "sh"].iter().any(|end| noun.ends_with(end));
    format!("{noun}{}", if es { "es" } else { "s" })
}

/// Whether a terminal could act on `c` instead of showing it: C0 and C1
/// control characters, DEL, and the bidirectional overrides that reorder
/// what follows them.
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every character a terminal would act on shown as an escape:
/// `\n`, `\r`, `\t`, `\e` (ESC), and `\u{…}` for the others. A backslash
/// stays as it is; the result is one line.
pub fn escape(s: &str) -> String {
    if !s.chars().any(is_unsafe) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// `word` as `sh` reads it back as one word: as it is when it is plain
/// (letters, digits and `_./=:,+-@%`), else in single quotes, each `'`
/// written `'\''`. For commands a message suggests.
pub fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./=:,+-@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `1.5 s`, `250 ms`: a wait in milliseconds as people read it.
pub fn wait(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shell_words_survive_a_shell() {
        use super::shell_word;
        assert_eq!(shell_word("/tmp/ws-1"), "/tmp/ws-1");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("my dir"), "'my dir'");
        assert_eq!(shell_word("it's $HOME"), "'it'\\''s $HOME'");
    }

    use super::*;

    #[test]
    fn counts_read_as_english() {
        assert_eq!(count(1u64, "line"), "1 line");
        assert_eq!(count(0u64, "line"), "0 lines");
        assert_eq!(count(2u32, "step"), "2 steps");
        assert_eq!(count(1u32, "run"), "1 run");
        assert_eq!(count(3u64, "match"), "3 matches");
        assert_eq!(plural(2, "pass"), "passes");
    }

    #[test]
    fn escape_leaves_plain_text_alone() {
        assert_eq!(escape("SIGNAL:SUCCESS é ✓ \\n"), "SIGNAL:SUCCESS é ✓ \\n");
    }

    #[test]
    fn escape_shows_what_a_terminal_would_act_on() {
        assert_eq!(escape("a\u{1b}[2Jb"), "a\\e[2Jb");
        assert_eq!(escape("\u{1b}]0;title\u{7}x"), "\\e]0;title\\u{7}x");
        assert_eq!(escape("ok\rrun x succeeded\n"), "ok\\rrun x succeeded\\n");
        assert_eq!(escape("\u{9b}2J\u{7f}"), "\\u{9b}2J\\u{7f}");
        assert_eq!(escape("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert!(!escape("x\u{0}\u{8}\t").chars().any(is_unsafe));
    }
}
