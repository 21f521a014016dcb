//! How `sbatch` reads a list of options, so that the options wfhost sets
//! itself are refused in every spelling sbatch accepts, not only in the
//! one wfhost writes.
//!
//! sbatch reads its command line, and the words of a script's `#SBATCH`
//! lines (all the lines together, as one list), with glibc's
//! `getopt_long`, which accepts:
//!
//! - a long option by its whole name or by any prefix that names one
//!   option only (`--arr=0-2` is `--array=0-2`); a whole name wins over a
//!   longer one it is a prefix of (`--cluster`), and a prefix that names
//!   several options is an error (`--co`);
//! - a long option's value after `=`, or, when the option requires one, as
//!   the next word (`--array 0-2`), whatever that word looks like
//!   (`--account -a` gives `--account` the value `-a`: no `-a` there); an
//!   optional value only after `=`;
//! - short options, alone or bundled (`-H -a 0-2`, `-Ha 0-2`, `-Ha0-2`):
//!   the first one that takes a value ends the word, its value being the
//!   rest of the word or else the next word;
//! - `--`, and the first word that is not an option, end the options
//!   (sbatch's option string starts with `+`): that word is the batch
//!   script's name.
//!
//! [`resolve`] reads a list of words the same way, with sbatch's own
//! option table; [`check`] also refuses the options a caller reserves.
//! Options the table does not know are refused (sbatch would refuse them
//! too, later and with a worse message; and an option sbatch gained in a
//! later Slurm might take the next word as its value, which this reading
//! could not know), and so is any word sbatch would take for the script.

use std::fmt;

/// The Slurm release [`LONG_OPTIONS`] and [`SHORT_OPTIONS`] come from.
pub const SLURM_VERSION: &str = "22.05.8";

/// Whether an option takes a value (getopt_long's `has_arg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// `no_argument`: `--hold`; `--hold=x` is an error.
    No,
    /// `required_argument`: `--array=0-2` or `--array 0-2`.
    Required,
    /// `optional_argument`: `--nice` or `--nice=10`, never `--nice 10`.
    Optional,
}

/// One entry of sbatch's long-option table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongOption {
    /// Without the dashes.
    pub name: &'static str,
    pub arg: Arg,
    /// getopt_long's `val`: the short option's character for an option
    /// that has one, else Slurm's own number. Two names with the same
    /// `val` (and `arg`) are one option (`--tasks-per-node` is
    /// `--ntasks-per-node`).
    pub val: u16,
}

const fn long(name: &'static str, arg: Arg, val: u16) -> LongOption {
    LongOption { name, arg, val }
}

const fn short(name: &'static str, arg: Arg, c: u8) -> LongOption {
    LongOption {
        name,
        arg,
        val: c as u16,
    }
}

use Arg::{No, Optional, Required};

/// sbatch's long options, in its own order: the table sbatch 22.05.8 (the
/// Slurm installed by `scripts/services.sh slurm`, Debian's slurm-wlm)
/// hands to `getopt_long`, read from the running binary (a preloaded
/// `getopt_long` that prints its arguments) and checked against
/// `sbatch --help` and `man sbatch`. Where the help says otherwise the
/// table is what sbatch reads: `--wrap[=command string]` in the help
/// requires its value, `--no-kill` and `--nice` take an optional one.
pub const LONG_OPTIONS: &[LongOption] = &[
    short("account", Required, b'A'),
    long("acctg-freq", Required, 258),
    short("array", Required, b'a'),
    long("batch", Required, 261),
    short("begin", Required, b'b'),
    long("bb", Required, 267),
    long("bbf", Required, 266),
    long("cluster-constraint", Required, 269),
    short("chdir", Required, b'D'),
    long("cluster", Required, 268),
    short("clusters", Required, b'M'),
    long("comment", Required, 270),
    long("container", Required, 272),
    long("context", Required, 273),
    long("contiguous", No, 274),
    short("constraint", Required, b'C'),
    short("core-spec", Required, b'S'),
    long("cores-per-socket", Required, 276),
    long("cpu-freq", Required, 278),
    long("cpus-per-gpu", Required, 279),
    short("cpus-per-task", Required, b'c'),
    long("deadline", Required, 280),
    long("delay-boot", Required, 282),
    short("dependency", Required, b'd'),
    short("distribution", Required, b'm'),
    short("error", Required, b'e'),
    short("exclude", Required, b'x'),
    long("exclusive", Optional, 286),
    long("export", Required, 287),
    long("export-file", Required, 288),
    short("extra-node-info", Required, b'B'),
    long("get-user-env", Optional, 289),
    long("gid", Required, 290),
    long("gpu-bind", Required, 291),
    long("gpu-freq", Required, 292),
    short("gpus", Required, b'G'),
    long("gpus-per-node", Required, 294),
    long("gpus-per-socket", Required, 295),
    long("gpus-per-task", Required, 296),
    long("gres", Required, 297),
    long("gres-flags", Required, 298),
    short("help", No, b'h'),
    long("hint", Required, 299),
    short("hold", No, b'H'),
    long("ignore-pbs", No, 300),
    short("input", Required, b'i'),
    short("job-name", Required, b'J'),
    long("kill-on-invalid-dep", Required, 303),
    short("licenses", Required, b'L'),
    long("mail-type", Required, 307),
    long("mail-user", Required, 308),
    long("mcs-label", Required, 309),
    long("mem", Required, 310),
    long("mem-bind", Required, 311),
    long("mem-per-cpu", Required, 312),
    long("mem-per-gpu", Required, 313),
    long("mincpus", Required, 315),
    long("network", Required, 322),
    long("nice", Optional, 323),
    short("no-kill", Optional, b'k'),
    long("no-requeue", No, 325),
    short("nodefile", Required, b'F'),
    short("nodelist", Required, b'w'),
    short("nodes", Required, b'N'),
    short("ntasks", Required, b'n'),
    long("ntasks-per-core", Required, 327),
    long("ntasks-per-gpu", Required, 328),
    long("ntasks-per-node", Required, 329),
    long("ntasks-per-socket", Required, 330),
    long("ntasks-per-tres", Required, 331),
    long("open-mode", Required, 332),
    short("output", Required, b'o'),
    short("overcommit", No, b'O'),
    short("oversubscribe", No, b's'),
    long("parsable", No, 335),
    short("partition", Required, b'p'),
    long("power", Required, 336),
    long("prefer", Required, 337),
    long("priority", Required, 338),
    long("profile", Required, 339),
    long("propagate", Optional, 341),
    short("qos", Required, b'q'),
    short("quiet", No, b'Q'),
    long("reboot", No, 345),
    long("requeue", No, 346),
    long("reservation", Required, 347),
    long("signal", Required, 350),
    long("sockets-per-node", Required, 352),
    long("spread-job", No, 353),
    long("switches", Required, 356),
    long("tasks-per-node", Required, 329),
    long("test-only", No, 359),
    long("thread-spec", Required, 360),
    long("threads-per-core", Required, 361),
    short("time", Required, b't'),
    long("time-min", Required, 362),
    long("tmp", Required, 363),
    long("uid", Required, 365),
    long("use-min-nodes", No, 368),
    short("verbose", No, b'v'),
    short("version", No, b'V'),
    long("usage", No, 367),
    short("wait", No, b'W'),
    long("wait-all-nodes", Required, 369),
    long("wckey", Required, 370),
    long("wrap", Required, 372),
];

/// sbatch's short options, as its `getopt_long` option string (from the
/// same sbatch 22.05.8, less its leading `+`: options end at the first
/// word that is not one): `x:` requires a value, `x::` takes an optional
/// one (attached only: `-kfoo`).
pub const SHORT_OPTIONS: &str = "A:a:b:D:M:C:S:c:d:m:e:x:B:G:hHi:J:L:k::F:w:N:n:o:Osp:q:Qt:vVW";

/// The long option whose whole name is `name`.
pub fn long_option(name: &str) -> Option<&'static LongOption> {
    LONG_OPTIONS.iter().find(|o| o.name == name)
}

/// The short option `c` as the option string has it: its value, and the
/// long option of the same `val`.
fn short_option(c: char) -> Option<(Arg, &'static LongOption)> {
    if !c.is_ascii_alphanumeric() {
        // getopt never takes `:` (or `;`) for an option.
        return None;
    }
    let at = SHORT_OPTIONS.find(c)?;
    let after = &SHORT_OPTIONS[at + 1..];
    let arg = if after.starts_with("::") {
        Arg::Optional
    } else if after.starts_with(':') {
        Arg::Required
    } else {
        Arg::No
    };
    let option = LONG_OPTIONS.iter().find(|o| o.val == c as u16)?;
    Some((arg, option))
}

/// How getopt_long finds the long option a word names.
enum Lookup {
    Found(&'static LongOption),
    Ambiguous(Vec<&'static str>),
    Unknown,
}

fn lookup(name: &str) -> Lookup {
    if let Some(exact) = long_option(name) {
        return Lookup::Found(exact);
    }
    let matches: Vec<&'static LongOption> = LONG_OPTIONS
        .iter()
        .filter(|o| o.name.starts_with(name))
        .collect();
    match matches.first() {
        None => Lookup::Unknown,
        // Names that are one option (same value and val) are no choice.
        Some(first)
            if matches
                .iter()
                .all(|o| o.arg == first.arg && o.val == first.val) =>
        {
            Lookup::Found(first)
        }
        Some(_) => Lookup::Ambiguous(matches.iter().map(|o| o.name).collect()),
    }
}

/// One option of a list, as sbatch reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Where its word is in the list.
    pub index: usize,
    /// The option it is, e.g. `array` for `--arr=0-2`, `-a0-2` or `-a 0-2`.
    pub option: &'static LongOption,
    /// Its value, if it has one.
    pub value: Option<String>,
    /// How it is written: its word, and the next word when that is its
    /// value (`-a 0-2`).
    pub written: String,
    /// The short option's letter when it is one of several bundled in one
    /// word (`a` of `-Ha`).
    pub bundled: Option<char>,
}

/// A word sbatch would not read as wfhost means it, or an option that is
/// not the caller's to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    /// Where the word is in the list.
    pub index: usize,
    pub message: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OptionError {}

/// A word as the user wrote it, safe to print on one line.
fn shown(word: &str) -> String {
    format!("`{}`", word.escape_debug())
}

/// Reads a list of words as sbatch's getopt_long does, an option at a
/// time.
struct Reader<'a, S: AsRef<str>> {
    words: &'a [S],
    next: usize,
    /// Options resolved but not handed out yet (a bundle of short ones).
    queue: std::collections::VecDeque<Resolved>,
    /// The last option read took an optional value and got none: a next
    /// word that is not an option was probably meant as its value.
    optional_without_value: Option<&'static str>,
}

impl<'a, S: AsRef<str>> Reader<'a, S> {
    fn error(&self, index: usize, message: String) -> OptionError {
        OptionError { index, message }
    }

    /// The word after `index`, as the value of the option there.
    fn value_word(
        &mut self,
        index: usize,
        written: &str,
        option: &str,
    ) -> Result<String, OptionError> {
        match self.words.get(index + 1) {
            Some(value) => {
                self.next = index + 2;
                Ok(value.as_ref().to_string())
            }
            None => Err(self.error(
                index,
                format!(
                    "{} needs a value: sbatch's --{option} takes one (write --{option}=VALUE)",
                    shown(written)
                ),
            )),
        }
    }

    fn read_long(&mut self, index: usize, word: &str) -> Result<(), OptionError> {
        let body = &word[2..];
        let (name, attached) = match body.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (body, None),
        };
        let option = match lookup(name) {
            Lookup::Found(option) => option,
            Lookup::Ambiguous(names) => {
                return Err(self.error(
                    index,
                    format!(
                        "{} is ambiguous: sbatch could read it as --{} (and refuses it); write the option out",
                        shown(word),
                        names.join(", --")
                    ),
                ));
            }
            Lookup::Unknown => {
                return Err(self.error(
                    index,
                    format!(
                        "{} is not an option of sbatch (Slurm {SLURM_VERSION}'s, which wfhost knows; see `sbatch --help`)",
                        shown(word)
                    ),
                ));
            }
        };
        self.next = index + 1;
        let (value, written) = match (option.arg, attached) {
            (Arg::No, Some(_)) => {
                return Err(self.error(
                    index,
                    format!("{}: sbatch's --{} takes no value", shown(word), option.name),
                ));
            }
            (Arg::No, None) => (None, word.to_string()),
            (Arg::Optional, value) => {
                if value.is_none() {
                    self.optional_without_value = Some(option.name);
                }
                (value.map(str::to_string), word.to_string())
            }
            (Arg::Required, Some(value)) => (Some(value.to_string()), word.to_string()),
            (Arg::Required, None) => {
                let value = self.value_word(index, word, option.name)?;
                let written = format!("{word} {value}");
                (Some(value), written)
            }
        };
        self.queue.push_back(Resolved {
            index,
            option,
            value,
            written,
            bundled: None,
        });
        Ok(())
    }

    fn read_short(&mut self, index: usize, word: &str) -> Result<(), OptionError> {
        let letters = &word[1..];
        let mut found = Vec::new();
        self.next = index + 1;
        let mut value_word = None;
        for (at, c) in letters.char_indices() {
            let Some((arg, option)) = short_option(c) else {
                return Err(self.error(
                    index,
                    if letters.chars().count() == 1 {
                        format!(
                            "{} is not an option of sbatch (Slurm {SLURM_VERSION}'s, which wfhost knows; see `sbatch --help`)",
                            shown(word)
                        )
                    } else {
                        format!(
                            "{}: -{} is not an option of sbatch (Slurm {SLURM_VERSION}'s, which wfhost knows; see `sbatch --help`)",
                            shown(word),
                            c.escape_debug()
                        )
                    },
                ));
            };
            let rest = &letters[at + c.len_utf8()..];
            match arg {
                Arg::No => found.push((c, option, None)),
                Arg::Optional => {
                    if rest.is_empty() {
                        self.optional_without_value = Some(option.name);
                    }
                    found.push((c, option, (!rest.is_empty()).then(|| rest.to_string())));
                    break;
                }
                Arg::Required if !rest.is_empty() => {
                    found.push((c, option, Some(rest.to_string())));
                    break;
                }
                Arg::Required => {
                    let value = self.value_word(index, word, option.name)?;
                    value_word = Some(value.clone());
                    found.push((c, option, Some(value)));
                    break;
                }
            }
        }
        let written = match &value_word {
            Some(value) => format!("{word} {value}"),
            None => word.to_string(),
        };
        let bundle = found.len() > 1;
        for (c, option, value) in found {
            self.queue.push_back(Resolved {
                index,
                option,
                value,
                written: written.clone(),
                bundled: bundle.then_some(c),
            });
        }
        Ok(())
    }
}

impl<S: AsRef<str>> Iterator for Reader<'_, S> {
    type Item = Result<Resolved, OptionError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(resolved) = self.queue.pop_front() {
                return Some(Ok(resolved));
            }
            let index = self.next;
            let words = self.words;
            let word = words.get(index)?.as_ref();
            let after_optional = self.optional_without_value.take();
            let read = if word == "--" {
                Err(self.error(
                    index,
                    "`--` ends sbatch's options: the words after it would be taken for the batch script and its arguments".into(),
                ))
            } else if word.starts_with("--") {
                self.read_long(index, word)
            } else if word.starts_with('-') && word.len() > 1 {
                self.read_short(index, word)
            } else {
                let hint = match after_optional {
                    Some(option) => format!(
                        " (--{option}'s value goes after `=`: --{option}={})",
                        word.escape_debug()
                    ),
                    None => String::new(),
                };
                Err(self.error(
                    index,
                    format!(
                        "{} is not an option: sbatch would end its options there and take it for the batch script{hint}",
                        shown(word)
                    ),
                ))
            };
            if let Err(e) = read {
                // Nothing after an error is read.
                self.next = self.words.len();
                return Some(Err(e));
            }
        }
    }
}

/// The options of `words` (each an argument as sbatch gets it) as
/// sbatch reads them, in order; the first word sbatch would refuse, or
/// take for something else than an option, is an error.
pub fn resolve<S: AsRef<str>>(words: &[S]) -> Result<Vec<Resolved>, OptionError> {
    reader(words).collect()
}

fn reader<S: AsRef<str>>(words: &[S]) -> Reader<'_, S> {
    Reader {
        words,
        next: 0,
        queue: std::collections::VecDeque::new(),
        optional_without_value: None,
    }
}

/// [`resolve`], refusing as well each option of `reserved` (long names,
/// each with the reason wfhost sets it itself) however it is written:
/// the first problem in the list's order is the error.
pub fn check<S: AsRef<str>>(
    words: &[S],
    reserved: &[(&str, &str)],
) -> Result<Vec<Resolved>, OptionError> {
    let mut all = Vec::new();
    for resolved in reader(words) {
        let resolved = resolved?;
        let hit = reserved
            .iter()
            .find(|(name, _)| long_option(name).is_some_and(|o| o.val == resolved.option.val));
        if let Some((name, why)) = hit {
            let what = match resolved.bundled {
                Some(c) => format!("{} holds -{c}, sbatch's --{name}", shown(&resolved.written)),
                None => format!("{} is sbatch's --{name}", shown(&resolved.written)),
            };
            return Err(OptionError {
                index: resolved.index,
                message: format!("{what}, which wfhost sets itself: {why}"),
            });
        }
        all.push(resolved);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(words: &[&str]) -> Vec<(&'static str, Option<String>)> {
        resolve(words)
            .unwrap_or_else(|e| panic!("{words:?}: {e}"))
            .into_iter()
            .map(|r| (r.option.name, r.value))
            .collect()
    }

    fn refused(words: &[&str]) -> String {
        match resolve(words) {
            Ok(r) => panic!("{words:?} resolved: {r:?}"),
            Err(e) => e.message,
        }
    }

    fn v(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn the_short_options_agree_with_the_long_table() {
        let mut letters = 0;
        for c in SHORT_OPTIONS.chars().filter(|c| *c != ':') {
            let (arg, option) =
                short_option(c).unwrap_or_else(|| panic!("-{c} has no long option"));
            assert_eq!(arg, option.arg, "-{c} / --{}", option.name);
            letters += 1;
        }
        // Every long option with a letter for a `val` is in the string.
        let with_letters = LONG_OPTIONS.iter().filter(|o| o.val < 128).count();
        assert_eq!(letters, with_letters);
        // Names are unique; two names of one `val` are one option.
        for (i, a) in LONG_OPTIONS.iter().enumerate() {
            for b in &LONG_OPTIONS[i + 1..] {
                assert_ne!(a.name, b.name);
                if a.val == b.val {
                    assert_eq!(a.arg, b.arg, "{} / {}", a.name, b.name);
                }
            }
        }
    }

    #[test]
    fn long_options_by_name_and_by_unique_prefix() {
        assert_eq!(names(&["--array=0-2"]), [("array", v("0-2"))]);
        assert_eq!(names(&["--arr=0-2"]), [("array", v("0-2"))]);
        assert_eq!(names(&["--arr", "0-2"]), [("array", v("0-2"))]);
        assert_eq!(names(&["--out=x"]), [("output", v("x"))]);
        assert_eq!(names(&["--comm=x"]), [("comment", v("x"))]);
        assert_eq!(names(&["--chd=/"]), [("chdir", v("/"))]);
        assert_eq!(names(&["--job-n=x"]), [("job-name", v("x"))]);
        assert_eq!(names(&["--wr=true"]), [("wrap", v("true"))]);
        assert_eq!(names(&["--comment="]), [("comment", v(""))]);
        // A whole name wins over the longer names it begins.
        assert_eq!(names(&["--cluster=x"]), [("cluster", v("x"))]);
        assert_eq!(names(&["--mem=1G"]), [("mem", v("1G"))]);
        // Two names of one option are no choice.
        assert_eq!(names(&["--tasks=2"]), [("tasks-per-node", v("2"))]);
        assert_eq!(lookup("tasks-per-node").found().val, 329);
    }

    impl Lookup {
        fn found(self) -> &'static LongOption {
            match self {
                Lookup::Found(o) => o,
                _ => panic!("not found"),
            }
        }
    }

    #[test]
    fn an_ambiguous_prefix_is_refused_as_sbatch_refuses_it() {
        let e = refused(&["--co=x"]);
        assert!(e.contains("`--co=x` is ambiguous"), "{e}");
        assert!(e.contains("--comment, --container"), "{e}");
        assert!(refused(&["--clu=x"]).contains("ambiguous"));
        assert!(refused(&["--pa", "debug"]).contains("--parsable, --partition"));
        assert!(refused(&["--=x"]).contains("ambiguous"));
    }

    #[test]
    fn a_required_value_may_be_the_next_word_whatever_it_looks_like() {
        assert_eq!(names(&["--time", "5"]), [("time", v("5"))]);
        assert_eq!(
            names(&["--partition", "debug"]),
            [("partition", v("debug"))]
        );
        // The value of --account, not an --array.
        assert_eq!(names(&["--account", "-a"]), [("account", v("-a"))]);
        assert_eq!(
            names(&["--account", "--array=0-2", "--hold"]),
            [("account", v("--array=0-2")), ("hold", None)]
        );
        let e = refused(&["--hold", "--account"]);
        assert!(e.contains("`--account` needs a value"), "{e}");
        assert!(refused(&["-A"]).contains("`-A` needs a value"));
        assert!(refused(&["-HA"]).contains("`-HA` needs a value"));
    }

    #[test]
    fn short_options_alone_and_bundled() {
        assert_eq!(names(&["-a", "0-2"]), [("array", v("0-2"))]);
        assert_eq!(names(&["-a0-2"]), [("array", v("0-2"))]);
        assert_eq!(names(&["-c", "2"]), [("cpus-per-task", v("2"))]);
        assert_eq!(names(&["-N1"]), [("nodes", v("1"))]);
        assert_eq!(
            names(&["-Ha", "0-2"]),
            [("hold", None), ("array", v("0-2"))]
        );
        assert_eq!(names(&["-Ha0-2"]), [("hold", None), ("array", v("0-2"))]);
        assert_eq!(
            names(&["-HQa", "0-2", "-v"]),
            [
                ("hold", None),
                ("quiet", None),
                ("array", v("0-2")),
                ("verbose", None)
            ]
        );
        // A value ends the bundle: `-aH` is --array=H.
        assert_eq!(names(&["-aH"]), [("array", v("H"))]);
        // `-k`'s value is optional, attached only.
        assert_eq!(names(&["-k"]), [("no-kill", None)]);
        assert_eq!(names(&["-kyes"]), [("no-kill", v("yes"))]);
        let r = resolve(&["-Ha", "0-2"]).unwrap();
        assert_eq!(r[1].written, "-Ha 0-2");
        assert_eq!(r[1].bundled, Some('a'));
        assert_eq!(r[1].index, 0);
    }

    #[test]
    fn optional_values_and_options_without_values() {
        assert_eq!(names(&["--nice"]), [("nice", None)]);
        assert_eq!(names(&["--nice=10"]), [("nice", v("10"))]);
        assert_eq!(names(&["--exclusive=user"]), [("exclusive", v("user"))]);
        let e = refused(&["--exclusive", "user"]);
        assert!(e.contains("`user` is not an option"), "{e}");
        assert!(e.contains("--exclusive=user"), "{e}");
        let e = refused(&["--hold=1"]);
        assert!(
            e.contains("`--hold=1`: sbatch's --hold takes no value"),
            "{e}"
        );
    }

    #[test]
    fn unknown_options_and_words_sbatch_would_take_for_the_script() {
        for (words, says) in [
            (&["--foo"][..], "`--foo` is not an option of sbatch"),
            (&["--mem=1G", "-Z"], "`-Z` is not an option of sbatch"),
            (&["-HZ"], "`-HZ`: -Z is not an option of sbatch"),
            (&["-:"], "is not an option of sbatch"),
            (&["-Hé"], "-é is not an option of sbatch"),
            (
                &["job.sh"],
                "`job.sh` is not an option: sbatch would end its options there",
            ),
            (&["-"], "`-` is not an option"),
            (&[""], "`` is not an option"),
            (&["--", "--mem=1G"], "`--` ends sbatch's options"),
            (&["--mem=1G", ":"], "`:` is not an option"),
            (&["a\nb"], "`a\\nb` is not an option"),
        ] {
            let e = refused(words);
            assert!(e.contains(says), "{words:?}: {e}");
        }
        assert_eq!(resolve(&["--mem=1G", "x"]).unwrap_err().index, 1);
        assert_eq!(resolve(&["--time", "5", "-Z"]).unwrap_err().index, 2);
        assert!(resolve::<&str>(&[]).unwrap().is_empty());
    }

    const RESERVED: &[(&str, &str)] = &[
        ("array", "why a"),
        ("comment", "why c"),
        ("output", "why o"),
    ];

    #[test]
    fn reserved_options_are_refused_however_they_are_written() {
        for (words, says) in [
            (
                &["--array=0-2"][..],
                "`--array=0-2` is sbatch's --array, which wfhost sets itself: why a",
            ),
            (
                &["--arr=0-2"],
                "`--arr=0-2` is sbatch's --array, which wfhost sets itself: why a",
            ),
            (&["--arr", "0-2"], "`--arr 0-2` is sbatch's --array"),
            (&["-a", "0-2"], "`-a 0-2` is sbatch's --array"),
            (&["-a0-2"], "`-a0-2` is sbatch's --array"),
            (
                &["-Ha", "0-2"],
                "`-Ha 0-2` holds -a, sbatch's --array, which wfhost sets itself: why a",
            ),
            (
                &["--mem=1G", "-Ho", "x"],
                "`-Ho x` holds -o, sbatch's --output",
            ),
            (
                &["--comm=x"],
                "`--comm=x` is sbatch's --comment, which wfhost sets itself: why c",
            ),
            (&["--out=x"], "`--out=x` is sbatch's --output"),
        ] {
            match check(words, RESERVED) {
                Ok(r) => panic!("{words:?}: {r:?}"),
                Err(e) => assert!(e.message.contains(says), "{words:?}: {e}"),
            }
        }
        // The first problem in order.
        let e = check(&["--out=x", "--foo"], RESERVED).unwrap_err();
        assert_eq!(e.index, 0);
        let e = check(&["--foo", "--out=x"], RESERVED).unwrap_err();
        assert!(e.message.contains("--foo"), "{e}");
        // A reserved option's spelling as another's value is only a value.
        assert!(check(&["--account", "--comment=x"], RESERVED).is_ok());
        let ok = check(
            &[
                "--mem=1G",
                "--time",
                "5",
                "-c",
                "2",
                "--partition",
                "debug",
                "-H",
                "--export=ALL",
            ],
            RESERVED,
        )
        .unwrap();
        assert_eq!(ok.len(), 6);
    }
}
