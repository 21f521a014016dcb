//! Reading a manifest: the file (a bounded regular file), its JSON (line
//! and column on errors, duplicate keys refused), schema files it names,
//! then the static checks.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{Workflow, check};
use crate::json_pointer::pointer;

/// A manifest error: the file, the place in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub file: PathBuf,
    /// `line:column` for syntax errors, a JSON pointer for semantic ones.
    pub location: Option<String>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(at) => write!(f, "{}: {at}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for ManifestError {}

/// A list of manifest errors, displayed one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestErrors(pub Vec<ManifestError>);

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ManifestErrors {}

/// A parsed, checked workflow together with where it came from.
#[derive(Debug, Clone)]
pub struct LoadedWorkflow {
    pub workflow: Workflow,
    pub file: PathBuf,
}

impl LoadedWorkflow {
    /// The directory relative paths of the manifest are resolved against.
    pub fn base_dir(&self) -> &Path {
        manifest_dir(&self.file)
    }
}

/// The directory a manifest file is in: `.` for a bare file name (whose
/// `parent()` is the empty path, which names no directory).
pub fn manifest_dir(file: &Path) -> &Path {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Read a manifest file: a bounded regular file, UTF-8.
pub fn read(file: &Path) -> Result<String, ManifestErrors> {
    let one = |location: Option<String>, message: String| {
        ManifestErrors(vec![ManifestError {
            file: file.to_path_buf(),
            location,
            message,
        }])
    };
    let text = crate::workspace::regular_file::read_regular(
        file,
        crate::workspace::regular_file::MAX_MANIFEST_BYTES,
    )
    .map_err(|e| one(None, format!("cannot read manifest: {e}")))?;
    String::from_utf8(text).map_err(|e| {
        one(
            None,
            format!(
                "manifest is not UTF-8 (byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// Finish loading a parsed workflow read from `file`: the schema files it
/// names are read, then the static checks run. `builtin_plugins` are the
/// plugin names available without a `plugins` entry.
pub fn finish(
    file: &Path,
    mut workflow: Workflow,
    builtin_plugins: &[&str],
) -> Result<LoadedWorkflow, ManifestErrors> {
    let base_dir = manifest_dir(file);
    let mut errors = resolve_schemas(file, base_dir, &mut workflow);
    errors.extend(check(file, &workflow, builtin_plugins));
    if !errors.is_empty() {
        return Err(ManifestErrors(errors));
    }
    Ok(LoadedWorkflow {
        workflow,
        file: file.to_path_buf(),
    })
}

/// Parse manifest text; errors carry line and column and the JSON path.
pub fn parse(file: &Path, text: &str) -> Result<Workflow, ManifestErrors> {
    if let Err(e) = crate::manifest::strict_json::check_no_duplicate_keys(text) {
        let mut message = e.to_string();
        if let Some(cut) = message.rfind(" at line ") {
            message.truncate(cut);
        }
        return Err(ManifestErrors(vec![ManifestError {
            file: file.to_path_buf(),
            location: Some(format!("{}:{}", e.line(), e.column())),
            message,
        }]));
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize::<_, Workflow>(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let mut message = inner.to_string();
        // serde_json appends " at line L column C"; we report that as the location.
        if let Some(cut) = message.rfind(" at line ") {
            message.truncate(cut);
        }
        if path != "." && !path.is_empty() {
            message = format!("{message} (at `{path}`)");
        }
        ManifestErrors(vec![ManifestError {
            file: file.to_path_buf(),
            location: Some(format!("{}:{}", inner.line(), inner.column())),
            message,
        }])
    })
}

/// Replace schema paths by the schemas they name.
fn resolve_schemas(file: &Path, base_dir: &Path, wf: &mut Workflow) -> Vec<ManifestError> {
    let mut errors = Vec::new();
    for (node_id, node) in wf.nodes.iter_mut() {
        for (block_id, block) in node.blocks.iter_mut() {
            let Some(serde_json::Value::String(rel)) = &block.validation_schema else {
                continue;
            };
            let path = base_dir.join(rel);
            let at = pointer(&["nodes", node_id, "blocks", block_id, "validation_schema"]);
            let loaded = crate::workspace::regular_file::read_regular(
                &path,
                crate::workspace::regular_file::MAX_SCHEMA_BYTES,
            )
            .and_then(|bytes| {
                String::from_utf8(bytes).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, "is not UTF-8")
                })
            })
            .map_err(|e| format!("cannot read schema file {}: {e}", path.display()))
            .and_then(|text| {
                crate::manifest::strict_json::check_no_duplicate_keys(&text)
                    .and_then(|()| serde_json::from_str(&text))
                    .map_err(|e| format!("schema file {} is not JSON: {e}", path.display()))
            });
            match loaded {
                Ok(schema) => block.validation_schema = Some(schema),
                Err(message) => errors.push(ManifestError {
                    file: file.to_path_buf(),
                    location: Some(at),
                    message,
                }),
            }
        }
    }
    errors
}
