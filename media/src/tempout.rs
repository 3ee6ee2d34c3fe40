//! Output files appear atomically: written under a hidden temporary name in the destination
//! directory and renamed into place only on success; removed on any failure or cancel.

use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};

use crate::error::MediaError;

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

    /// Moves the finished file into place.
    pub fn commit(mut self) -> Result<(), MediaError> {
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| {
            MediaError::failed(format!(
                "moving the finished file to {}: {e}",
                self.dest.display()
            ))
        })?;
        self.committed = true;
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
