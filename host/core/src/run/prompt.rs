//! The system prompt handed to a block, assembled in seed 000's order:
//!
//! 1. the workflow's `rules` (injected into every block);
//! 2. the block's prompt `prefix` (its harness, e.g. "You are a senior planner");
//! 3. the block's `task`;
//! 4. the file-restriction instruction, when the block has restrictions;
//! 5. the output checklist, as a numbered list.
//!
//! Sections are separated by one blank line; an absent or empty section is
//! omitted entirely, never leaving blank lines behind.

/// The pieces of a system prompt.
#[derive(Debug, Clone, Copy, Default)]
pub struct PromptParts<'a> {
    pub rules: Option<&'a str>,
    pub prefix: Option<&'a str>,
    pub task: Option<&'a str>,
    pub file_restrictions: Option<&'a [String]>,
    pub output_checklist: &'a [String],
}

/// Render the system prompt.
pub fn assemble(parts: PromptParts<'_>) -> String {
    let mut sections: Vec<String> = Vec::new();
    for text in [parts.rules, parts.prefix, parts.task]
        .into_iter()
        .flatten()
    {
        let text = text.trim();
        if !text.is_empty() {
            sections.push(text.to_string());
        }
    }
    if let Some(patterns) = parts.file_restrictions {
        sections.push(if patterns.is_empty() {
            "Do not modify any files. Only the .output/ directory is writable.".to_string()
        } else {
            format!(
                "Only modify files matching: {}. Other files are read-only, except the .output/ directory, which is always writable.",
                patterns.join(", ")
            )
        });
    }
    let items: Vec<&str> = parts
        .output_checklist
        .iter()
        .map(|i| i.trim())
        .filter(|i| !i.is_empty())
        .collect();
    if !items.is_empty() {
        let mut list = String::from("You must produce the following outputs:");
        for (n, item) in items.iter().enumerate() {
            list.push_str(&format!("\n{}) {item}", n + 1));
        }
        sections.push(list);
    }
    sections.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_come_in_seed_order() {
        let restrictions = vec!["src/workers/**".to_string(), "src/core/**".to_string()];
        let checklist = vec!["a plan".to_string(), "a task list".to_string()];
        let prompt = assemble(PromptParts {
            rules: Some("Never push to main."),
            prefix: Some("You are a senior planner."),
            task: Some("Plan the pool."),
            file_restrictions: Some(&restrictions),
            output_checklist: &checklist,
        });
        assert_eq!(
            prompt,
            "Never push to main.\n\n\
             You are a senior planner.\n\n\
             Plan the pool.\n\n\
             Only modify files matching: src/workers/**, src/core/**. Other files are read-only, except the .output/ directory, which is always writable.\n\n\
             You must produce the following outputs:\n1) a plan\n2) a task list"
        );
    }

    #[test]
    fn empty_sections_leave_no_blank_lines() {
        let checklist = vec!["  ".to_string(), "the report".to_string()];
        let prompt = assemble(PromptParts {
            rules: Some("   "),
            prefix: None,
            task: Some("Review."),
            file_restrictions: None,
            output_checklist: &checklist,
        });
        assert_eq!(
            prompt,
            "Review.\n\nYou must produce the following outputs:\n1) the report"
        );
        assert!(!prompt.contains("\n\n\n"));
        assert_eq!(assemble(PromptParts::default()), "");
    }

    #[test]
    fn an_empty_restriction_list_means_read_only() {
        let prompt = assemble(PromptParts {
            file_restrictions: Some(&[]),
            ..Default::default()
        });
        assert!(prompt.starts_with("Do not modify any files"));
    }
}
