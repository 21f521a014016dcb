//! The link guard: symbolic links a guest makes or moves must stay inside
//! the workspace.
//!
//! WASI keeps a guest inside its preopens and refuses absolute link
//! targets, but it lets a guest create a relative link that climbs out
//! (`notes/cache -> ../../victim`): harmless to the guest, which can never
//! follow it, but the link outlives the block, and exec commands, agent CLIs
//! and the user's tools follow it later with the host's authority. So the
//! three calls that put a link somewhere are checked against
//! [`wfhost_core::workspace::links`] before wasmtime-wasi carries them out:
//!
//! - `symlink-at`: the new link's target, from the directory it is made in;
//! - `rename-at` of a link, or of a directory holding links, to a shallower
//!   place (a link valid at one depth can lead out at another);
//! - `link-at` of a link (a hard link to a symbolic link is a second copy of
//!   it, anywhere).
//!
//! Depths are counted in the guest's view (`/workspace/...`), found from
//! the directory handle itself (`/proc/self/fd`), so a staged copy of a
//! writable directory is judged where the guest sees it, which is where its
//! changes land. A refused call fails in the guest with `not-permitted`.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::Dir;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::{self, ErrorCode, HostDescriptor, PathFlags};
use wfhost_core::workspace::links;

use crate::host_state::HostState;
use crate::sandbox::{GUEST_WORKSPACE, Mount};

/// The WASI filesystem interface as wasmtime-wasi defines it in the linker
/// (guests importing any 0.2.x version are served by it). The guard's tests
/// fail if this stops matching.
pub(crate) const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Where each preopened host directory appears in the guest.
#[derive(Debug, Clone, Default)]
pub struct GuestMounts(Arc<Vec<(PathBuf, String)>>);

impl GuestMounts {
    pub fn new(mounts: &[Mount]) -> Self {
        GuestMounts(Arc::new(
            mounts
                .iter()
                .map(|m| (m.host.clone(), m.guest.clone()))
                .collect(),
        ))
    }

    /// How deep below `/workspace` the host directory `host` is in the
    /// guest's view, by the longest mount that holds it.
    fn depth_of(&self, host: &Path) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        for (mount, guest) in self.0.iter() {
            // Canonical on demand: links are rare, blocks are many.
            let Ok(mount) = std::fs::canonicalize(mount) else {
                continue;
            };
            let Ok(rest) = host.strip_prefix(&mount) else {
                continue;
            };
            let len = mount.components().count();
            if best.is_none_or(|(l, _)| len > l) {
                let below = guest.strip_prefix(GUEST_WORKSPACE)?;
                if !(below.is_empty() || below.starts_with('/')) {
                    return None;
                }
                let depth =
                    below.split('/').filter(|p| !p.is_empty()).count() + rest.components().count();
                best = Some((len, depth));
            }
        }
        best.map(|(_, depth)| depth)
    }
}

/// The directory handle behind a descriptor, if it is a directory.
fn dir_handle(state: &mut HostState, fd: &Resource<Descriptor>) -> Option<Arc<std::fs::File>> {
    match state.table.get(fd).ok()? {
        Descriptor::Dir(d) => Some(Arc::clone(&d.dir)),
        Descriptor::File(_) => None,
    }
}

fn refused(e: io::Error) -> ErrorCode {
    match e.kind() {
        io::ErrorKind::NotFound => ErrorCode::NoEntry,
        io::ErrorKind::NotADirectory => ErrorCode::NotDirectory,
        _ => ErrorCode::NotPermitted,
    }
}

/// The directory `path`'s last component is in, opened under `dir` the way
/// WASI resolves it (never leaving `dir`), and its depth in the guest.
fn parent_of(
    dir: &std::fs::File,
    path: &str,
    mounts: &GuestMounts,
) -> Result<(Dir, usize), ErrorCode> {
    let base = Dir::from_std_file(dir.try_clone().map_err(refused)?);
    let parent = match Path::new(path).parent() {
        Some(p) if !p.as_os_str().is_empty() => base.open_dir(p).map_err(refused)?,
        _ => base,
    };
    let host =
        std::fs::read_link(format!("/proc/self/fd/{}", parent.as_raw_fd())).map_err(refused)?;
    let depth = mounts.depth_of(&host).ok_or(ErrorCode::NotPermitted)?;
    Ok((parent, depth))
}

fn last_name(path: &str) -> &str {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
}

/// A new link `link` with `target`, made under `dir`.
fn check_new(
    dir: &std::fs::File,
    link: &str,
    target: &str,
    mounts: &GuestMounts,
) -> Result<(), ErrorCode> {
    let (_, depth) = parent_of(dir, link, mounts)?;
    links::check_target(depth, target).map_err(|_| ErrorCode::NotPermitted)
}

/// `old` under `from` moved (or hard-linked) to `new` under `to`: every
/// link it is or holds must still stay inside at its new depth.
fn check_move(
    from: &std::fs::File,
    old: &str,
    to: &std::fs::File,
    new: &str,
    mounts: &GuestMounts,
) -> Result<(), ErrorCode> {
    let (old_parent, old_depth) = parent_of(from, old, mounts)?;
    let name = last_name(old);
    let Ok(meta) = old_parent.symlink_metadata(name) else {
        return Ok(()); // wasmtime-wasi reports the error itself
    };
    let kind = meta.file_type();
    if !kind.is_symlink() && !kind.is_dir() {
        return Ok(());
    }
    let (_, new_depth) = parent_of(to, new, mounts)?;
    if kind.is_symlink() {
        let target = old_parent.read_link_contents(name).map_err(refused)?;
        return links::check_target(new_depth, &target.to_string_lossy())
            .map_err(|_| ErrorCode::NotPermitted);
    }
    if new_depth >= old_depth {
        return Ok(()); // deeper: every link inside keeps at least its room
    }
    let moved = old_parent.open_dir(name).map_err(refused)?;
    check_tree(&moved, new_depth + 1)
}

/// Every link in `dir` (itself `depth` below the workspace in its new
/// place), recursively, without following any.
fn check_tree(dir: &Dir, depth: usize) -> Result<(), ErrorCode> {
    for entry in dir.entries().map_err(refused)? {
        let entry = entry.map_err(refused)?;
        let kind = entry.file_type().map_err(refused)?;
        let name = entry.file_name();
        if kind.is_symlink() {
            let target = dir.read_link_contents(&name).map_err(refused)?;
            links::check_target(depth, &target.to_string_lossy())
                .map_err(|_| ErrorCode::NotPermitted)?;
        } else if kind.is_dir() {
            let sub = dir.open_dir(&name).map_err(refused)?;
            check_tree(&sub, depth + 1)?;
        }
    }
    Ok(())
}

/// Run a check on tokio's blocking pool, like every guest file operation:
/// it touches the filesystem, and the block's deadline must be able to
/// abandon it.
async fn blocking(
    check: impl FnOnce() -> Result<(), ErrorCode> + Send + 'static,
) -> Result<(), ErrorCode> {
    tokio::task::spawn_blocking(check)
        .await
        .unwrap_or(Err(ErrorCode::Io))
}

/// [`check_move`] for two descriptors, when both are directories
/// (otherwise wasmtime-wasi refuses the call itself).
async fn guard_move(
    state: &mut HostState,
    fd: &Resource<Descriptor>,
    old: &str,
    new_fd: &Resource<Descriptor>,
    new: &str,
) -> Result<(), ErrorCode> {
    let (Some(from), Some(to)) = (dir_handle(state, fd), dir_handle(state, new_fd)) else {
        return Ok(());
    };
    let (mounts, old, new) = (state.mounts.clone(), old.to_string(), new.to_string());
    blocking(move || check_move(&from, &old, &to, &new, &mounts)).await
}

fn settle(
    state: &mut HostState,
    result: FsResult<()>,
) -> wasmtime::Result<(Result<(), ErrorCode>,)> {
    match result {
        Ok(()) => Ok((Ok(()),)),
        Err(e) => Ok((Err(types::Host::convert_error_code(
            &mut state.filesystem(),
            e,
        )?),)),
    }
}

type SymlinkArgs = (Resource<Descriptor>, String, String);
type RenameArgs = (Resource<Descriptor>, String, Resource<Descriptor>, String);
type LinkArgs = (
    Resource<Descriptor>,
    PathFlags,
    String,
    Resource<Descriptor>,
    String,
);

/// Put the guard in front of wasmtime-wasi's `symlink-at`, `rename-at` and
/// `link-at`. Call after `wasmtime_wasi::p2::add_to_linker_async`.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store, (fd, target, link): SymlinkArgs| {
            Box::new(async move {
                let state = store.data_mut();
                if let Some(dir) = dir_handle(state, &fd) {
                    let (mounts, l, t) = (state.mounts.clone(), link.clone(), target.clone());
                    if let Err(code) = blocking(move || check_new(&dir, &l, &t, &mounts)).await {
                        return Ok((Err(code),));
                    }
                }
                let result =
                    HostDescriptor::symlink_at(&mut state.filesystem(), fd, target, link).await;
                settle(state, result)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.rename-at",
        |mut store, (fd, old, new_fd, new): RenameArgs| {
            Box::new(async move {
                let state = store.data_mut();
                if let Err(code) = guard_move(state, &fd, &old, &new_fd, &new).await {
                    return Ok((Err(code),));
                }
                let result =
                    HostDescriptor::rename_at(&mut state.filesystem(), fd, old, new_fd, new).await;
                settle(state, result)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store, (fd, flags, old, new_fd, new): LinkArgs| {
            Box::new(async move {
                let state = store.data_mut();
                if let Err(code) = guard_move(state, &fd, &old, &new_fd, &new).await {
                    return Ok((Err(code),));
                }
                let result =
                    HostDescriptor::link_at(&mut state.filesystem(), fd, flags, old, new_fd, new)
                        .await;
                settle(state, result)
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
