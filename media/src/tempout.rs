//! Output files appear atomically: written under a hidden temporary name in the destination
//! directory and renamed into place only on success; removed on any failure or cancel.

use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};

use crate::error::MediaError;

/// Flushes a directory's entries (a rename or a new file in it) to disk.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// [`sync_dir`] on the directory holding `path` and on its parent, which holds that
/// directory's own entry when it was just created.
pub fn sync_parent_dirs(path: &Path) -> std::io::Result<()> {
    let mut dir = path.parent();
    for _ in 0..2 {
        match dir {
            Some(d) if !d.as_os_str().is_empty() => {
                sync_dir(d)?;
                dir = d.parent();
            }
            _ => break,
        }
    }
    Ok(())
}

pub(crate) struct TempOutput {
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

fn random_suffix() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

impl TempOutput {
    pub fn new(dest: &Path) -> Result<Self, MediaError> {
        let name = dest
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                MediaError::invalid(format!("output path {} has no file name", dest.display()))
            })?;
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(MediaError::failed(format!(
                "output directory {} does not exist",
                dir.display()
            )));
        }
        if dest.is_dir() {
            return Err(MediaError::invalid(format!(
                "output path {} is a directory",
                dest.display()
            )));
        }
        let tmp = dir.join(format!(".{name}.partial-{:016x}", random_suffix()));
        Ok(TempOutput {
            tmp,
            dest: dest.to_path_buf(),
            committed: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Moves the finished file into place durably: the file's data reaches the disk before
    /// the rename, and the rename (directory entry) before this returns, so a record written
    /// afterwards never points at an empty or missing file after a power loss.
    pub fn commit(mut self) -> Result<(), MediaError> {
        let io = |what: &str, e: std::io::Error| {
            MediaError::failed(format!("{what} {}: {e}", self.dest.display()))
        };
        std::fs::File::open(&self.tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| io("syncing the finished file for", e))?;
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| io("moving the finished file to", e))?;
        self.committed = true;
        sync_parent_dirs(&self.dest).map_err(|e| io("syncing the directory of", e))?;
        Ok(())
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
