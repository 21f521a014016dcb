//! A guest cannot open a FIFO, a socket or a device.
//!
//! Opening a FIFO waits for a writer, forever if none comes, and reading a
//! device can be endless (`/dev/zero`). Guest file calls run in place on
//! the engine's thread (a fraction of the cost of handing each to a
//! blocking pool), where such a wait could not be abandoned at the block's
//! deadline. So `open-at` first looks at what the path names, through the
//! guest's own directory handle (never leaving it), and refuses anything
//! that is neither a regular file nor a directory with `not-permitted`,
//! before any open is attempted. This matches the host's own walks, which
//! skip special files (`wfhost_core::workspace`).
//!
//! What this cannot see: a special file put in place by another process
//! between the look and the open. Nothing wfhost runs can do that during a
//! block (commands and agents run while the guest waits for them; lanes
//! have their own workspaces); only a process outside wfhost writing into
//! the workspace at that instant could.

use std::sync::Arc;

use cap_std::fs::Dir;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};

use crate::host_state::HostState;
use crate::links::FILESYSTEM_TYPES;

type OpenArgs = (
    Resource<Descriptor>,
    PathFlags,
    String,
    OpenFlags,
    DescriptorFlags,
);

/// Whether `path` under `dir` names something a guest may not open.
fn is_special(dir: &std::fs::File, path: &str, follow: bool) -> bool {
    let Ok(file) = dir.try_clone() else {
        return false;
    };
    let dir = Dir::from_std_file(file);
    let meta = if follow {
        dir.metadata(path)
    } else {
        dir.symlink_metadata(path)
    };
    // Missing (to be created) or unreadable: wasmtime-wasi decides.
    meta.is_ok_and(|m| {
        let kind = m.file_type();
        !(kind.is_file() || kind.is_dir() || kind.is_symlink())
    })
}

fn dir_handle(state: &mut HostState, fd: &Resource<Descriptor>) -> Option<Arc<std::fs::File>> {
    match state.table.get(fd).ok()? {
        Descriptor::Dir(d) => Some(Arc::clone(&d.dir)),
        Descriptor::File(_) => None,
    }
}

/// Put the check in front of wasmtime-wasi's `open-at`.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.instance(FILESYSTEM_TYPES)?.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store, (fd, path_flags, path, oflags, flags): OpenArgs| {
            Box::new(async move {
                let state = store.data_mut();
                let follow = path_flags.contains(PathFlags::SYMLINK_FOLLOW);
                if let Some(dir) = dir_handle(state, &fd)
                    && is_special(&dir, &path, follow)
                {
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                let mut view = state.filesystem();
                let opened =
                    HostDescriptor::open_at(&mut view, fd, path_flags, path, oflags, flags).await;
                match opened {
                    Ok(descriptor) => Ok((Ok(descriptor),)),
                    Err(e) => Ok((Err(types::Host::convert_error_code(&mut view, e)?),)),
                }
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
