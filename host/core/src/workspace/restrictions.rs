//! File restrictions: which workspace paths a block may modify.
//!
//! A block's `file_restrictions` are glob patterns relative to the workspace
//! root. They split into two kinds, because a sandbox can only grant whole
//! directories:
//!
//! - **directory prefixes** (`src/workers/**`): the whole directory is
//!   writable, so the sandbox mounts it writable and writes elsewhere fail
//!   inside the guest;
//! - **exact patterns** (`**/*.md`, `docs/*.txt`, `README.md`): cannot be
//!   expressed as a mount, so the adapter stages the workspace, lets the
//!   block write to the copy, and applies only changes that match, refusing
//!   the block otherwise. They are never widened to a directory.
//!
//! `.output/` is always writable: it is where blocks leave structured output.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// The workspace-relative directory every block may write to.
pub const OUTPUT_DIR: &str = ".output";

/// A pattern that cannot be a file restriction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("file restriction `{pattern}`: {reason}")]
pub struct RestrictionError {
    pub pattern: String,
    pub reason: String,
}

/// The checked form of a block's file restrictions.
#[derive(Debug, Clone)]
pub struct RestrictionPlan {
    unrestricted: bool,
    writable_dirs: Vec<String>,
    exact_patterns: Vec<String>,
    exact_set: GlobSet,
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}'])
}

fn normalize(pattern: &str) -> Result<String, RestrictionError> {
    let bad = |reason: &str| RestrictionError {
        pattern: pattern.to_string(),
        reason: reason.to_string(),
    };
    if pattern.trim().is_empty() {
        return Err(bad("must not be empty"));
    }
    if pattern.starts_with('/') || pattern.contains('\\') || pattern.contains('\0') {
        return Err(bad(
            "must be a relative path with `/` separators inside the workspace",
        ));
    }
    let mut parts = Vec::new();
    for part in pattern.split('/') {
        match part {
            "" | "." => continue,
            ".." => return Err(bad("must not contain `..`")),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(bad("names no path"));
    }
    Ok(parts.join("/"))
}

impl RestrictionPlan {
    /// Check a block's patterns. `None` is unrestricted.
    pub fn new(patterns: Option<&[String]>) -> Result<Self, RestrictionError> {
        let Some(patterns) = patterns else {
            return Ok(Self::unrestricted());
        };
        let mut writable_dirs: Vec<String> = Vec::new();
        let mut exact_patterns = Vec::new();
        let mut exact = GlobSetBuilder::new();
        for raw in patterns {
            let pattern = normalize(raw)?;
            if pattern == "**" || pattern == "**/*" {
                return Ok(Self::unrestricted());
            }
            match pattern.strip_suffix("/**") {
                Some(dir) if !has_glob_meta(dir) => writable_dirs.push(dir.to_string()),
                _ => {
                    let glob: Glob = GlobBuilder::new(&pattern)
                        .literal_separator(true)
                        .build()
                        .map_err(|e| RestrictionError {
                            pattern: raw.clone(),
                            reason: e.kind().to_string(),
                        })?;
                    exact.add(glob);
                    exact_patterns.push(pattern);
                }
            }
        }
        // A directory inside another writable one adds nothing.
        writable_dirs.sort();
        writable_dirs.dedup();
        let all = writable_dirs.clone();
        writable_dirs.retain(|d| !all.iter().any(|outer| outer != d && is_under(d, outer)));
        writable_dirs.retain(|d| !is_under(d, OUTPUT_DIR));
        let exact_set = exact.build().map_err(|e| RestrictionError {
            pattern: patterns.join(", "),
            reason: e.to_string(),
        })?;
        Ok(RestrictionPlan {
            unrestricted: false,
            writable_dirs,
            exact_patterns,
            exact_set,
        })
    }

    /// A plan that lets the block write anywhere in the workspace.
    pub fn unrestricted() -> Self {
        RestrictionPlan {
            unrestricted: true,
            writable_dirs: Vec::new(),
            exact_patterns: Vec::new(),
            exact_set: GlobSet::empty(),
        }
    }

    pub fn is_unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// Writable directories (workspace-relative), none inside another, not
    /// including `.output`.
    pub fn writable_dirs(&self) -> &[String] {
        &self.writable_dirs
    }

    /// Patterns that must be enforced by staging.
    pub fn exact_patterns(&self) -> &[String] {
        &self.exact_patterns
    }

    /// Whether enforcing this plan needs a staged copy of the workspace.
    pub fn needs_staging(&self) -> bool {
        !self.unrestricted && !self.exact_patterns.is_empty()
    }

    /// Whether a block may create, modify or delete `path` (workspace
    /// relative, `/`-separated).
    pub fn permits(&self, path: &str) -> bool {
        self.unrestricted
            || is_under(path, OUTPUT_DIR)
            || self.writable_dirs.iter().any(|d| is_under(path, d))
            || self.exact_set.is_match(path)
    }

    /// Whether `path` lies in a directory mounted writable (or `.output`).
    pub fn in_writable_dir(&self, path: &str) -> bool {
        is_under(path, OUTPUT_DIR) || self.writable_dirs.iter().any(|d| is_under(path, d))
    }
}

/// `path` is `dir` or inside it.
pub fn is_under(path: &str, dir: &str) -> bool {
    path == dir
        || (path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/')
}

/// What a read-only block's `FILE_RESTRICTIONS` says: only `.output/` may
/// change. A JSON array like any other value, so an agent that reads the
/// variable as glob patterns gets the right answer, and distinct from `[]`,
/// which the env contract (seed 000) gives an unrestricted block.
pub const READ_ONLY_ENV: &str = r#"[".output/**"]"#;

/// The env contract's `FILE_RESTRICTIONS` for a block's
/// `file_restrictions`: `[]` when unrestricted (none), [`READ_ONLY_ENV`]
/// when read-only (an empty list), else the patterns as a JSON array.
pub fn env_value(restrictions: Option<&[String]>) -> String {
    match restrictions {
        None => "[]".to_string(),
        Some([]) => READ_ONLY_ENV.to_string(),
        Some(patterns) => serde_json::to_string(patterns).expect("strings serialize"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_env_value_tells_read_only_from_unrestricted() {
        use super::{READ_ONLY_ENV, env_value};
        assert_eq!(env_value(None), "[]");
        assert_eq!(env_value(Some(&[])), READ_ONLY_ENV);
        assert_ne!(env_value(Some(&[])), env_value(None));
        assert_eq!(
            env_value(Some(&["src/**".to_string(), "docs/\"q\".md".to_string()])),
            r#"["src/**","docs/\"q\".md"]"#
        );
        // What the read-only value permits, read back as patterns, is what
        // a read-only block may change.
        let patterns: Vec<String> = serde_json::from_str(READ_ONLY_ENV).unwrap();
        let plan = super::RestrictionPlan::new(Some(&patterns)).unwrap();
        assert!(plan.permits(".output/block-a.json") && !plan.permits("src/a.rs"));
    }

    use super::*;

    fn plan(patterns: &[&str]) -> RestrictionPlan {
        let owned: Vec<String> = patterns.iter().map(|s| s.to_string()).collect();
        RestrictionPlan::new(Some(&owned)).unwrap()
    }

    #[test]
    fn prefix_patterns_become_writable_dirs() {
        let p = plan(&["src/workers/**", "./docs/**"]);
        assert_eq!(p.writable_dirs(), ["docs", "src/workers"]);
        assert!(!p.needs_staging());
        assert!(p.permits("src/workers/pool.rs"));
        assert!(p.permits("src/workers"));
        assert!(!p.permits("src/workers2/x"));
        assert!(!p.permits("src/core/x.rs"));
        assert!(p.permits(".output/block-a.json"));
    }

    #[test]
    fn nested_dirs_collapse() {
        let p = plan(&["src/**", "src/workers/**", ".output/x/**"]);
        assert_eq!(p.writable_dirs(), ["src"]);
    }

    #[test]
    fn non_prefix_patterns_are_exact_not_widened() {
        let p = plan(&["**/*.md", "docs/*.txt"]);
        assert!(p.writable_dirs().is_empty());
        assert!(p.needs_staging());
        assert!(p.permits("README.md"));
        assert!(p.permits("a/b/c.md"));
        assert!(p.permits("docs/x.txt"));
        assert!(!p.permits("docs/sub/x.txt"), "`*` must not cross `/`");
        assert!(!p.permits("src/main.rs"));
    }

    #[test]
    fn everything_patterns_are_unrestricted() {
        assert!(plan(&["**"]).is_unrestricted());
        assert!(RestrictionPlan::new(None).unwrap().is_unrestricted());
    }

    #[test]
    fn empty_list_is_read_only_except_output() {
        let p = plan(&[]);
        assert!(!p.is_unrestricted());
        assert!(!p.permits("a"));
        assert!(p.permits(".output/x.json"));
    }

    #[test]
    fn escaping_patterns_are_refused() {
        for bad in ["../x/**", "/etc/**", "a/../../b", "", "a\\b"] {
            assert!(
                RestrictionPlan::new(Some(&[bad.to_string()])).is_err(),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn is_under_respects_component_boundaries() {
        assert!(is_under("a/b", "a"));
        assert!(is_under("a", "a"));
        assert!(!is_under("ab", "a"));
        assert!(!is_under("a", "a/b"));
    }
}
