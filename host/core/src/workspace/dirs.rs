//! Directories the host mounts into a sandbox or keeps in the workspace.

use std::io;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;

use super::handles;

/// Make sure `root/rel` is a real directory reached without passing through
/// a symlink, creating missing components when `create` is set. Returns the
/// full path. This is what makes it safe to hand the directory to a sandbox:
/// a symlink planted in the workspace can never redirect a mount outside.
pub fn ensure_real_dir(root: &Path, rel: &str, create: bool) -> io::Result<PathBuf> {
    open_real_dir(root, rel, create)?;
    path_of(root, rel)
}

fn path_of(root: &Path, rel: &str) -> io::Result<PathBuf> {
    let mut path = root.to_path_buf();
    path.extend(handles::components(rel)?);
    Ok(path)
}

/// [`ensure_real_dir`], returning a handle of the directory.
pub fn open_real_dir(root: &Path, rel: &str, create: bool) -> io::Result<Dir> {
    let mut dir = handles::open_root(root)?;
    let mut prefix = String::new();
    for part in handles::components(rel)? {
        prefix = handles::join(&prefix, part);
        // Opened without following: a link is refused, also one swapped
        // in after a look.
        dir = match handles::open_child(&dir, part, &prefix) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                match dir.create_dir(part) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                    _ => {}
                }
                handles::open_child(&dir, part, &prefix)
            }
            other => other,
        }
        .map_err(|e| shown(root, &prefix, e))?;
    }
    Ok(dir)
}

/// The error for `rel` naming its full path, as a user knows it.
fn shown(root: &Path, rel: &str, e: io::Error) -> io::Error {
    let path = root.join(rel);
    match e.kind() {
        io::ErrorKind::PermissionDenied => io::Error::new(
            e.kind(),
            format!(
                "{} is a symbolic link; refusing to use it as a directory",
                path.display()
            ),
        ),
        io::ErrorKind::AlreadyExists => {
            io::Error::new(e.kind(), format!("{} is not a directory", path.display()))
        }
        _ => e,
    }
}

/// [`ensure_real_dir`] for a directory the host keeps in the workspace
/// (`.output`, `.agents-work`): also writes a `.gitignore` of `*` in it
/// when there is none, so a repository never picks the host's files up.
pub fn ensure_host_dir(root: &Path, rel: &str) -> io::Result<PathBuf> {
    let dir = open_real_dir(root, rel, true)?;
    // create_new never follows or replaces whatever is there.
    match super::regular_file::create_new_in(&dir, ".gitignore", 0o666) {
        Ok(mut f) => {
            use std::io::Write;
            f.write_all(b"# Written by wfhost: the host's files, not the project's.\n*\n")?;
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    path_of(root, rel)
}
