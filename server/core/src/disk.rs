//! Disk space: the free-space floor that new uploads and renders need, and the ballast file
//! that lets the server start (and serve reads) on a full disk.
//!
//! The database needs a little space to open. A full disk would otherwise keep the server
//! down, and finished results could not even be downloaded. So the server keeps a ballast
//! file of `Config::disk_reserve_bytes` in the data dir: when opening the
//! database fails for lack of space, the ballast is released and the open retried; the
//! server then refuses new work ([`DiskGuard`]) until space is back, and puts the ballast
//! back when it can.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::ServiceError;

/// The ballast file in the data dir.
pub const BALLAST_FILE: &str = ".disk-reserve";

/// Free bytes available to this process on the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let st = rustix::fs::statvfs(dir).map_err(std::io::Error::from)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Refuses new work while free space on the data dir is under the floor.
#[derive(Clone, Debug)]
pub struct DiskGuard {
    dir: PathBuf,
    floor_bytes: u64,
}

impl DiskGuard {
    pub fn new(dir: impl Into<PathBuf>, floor_bytes: u64) -> Self {
        DiskGuard {
            dir: dir.into(),
            floor_bytes,
        }
    }

    /// `Err(StorageFull)` when free space is under the floor (an unreadable file system
    /// counts as full: nothing new should be written there).
    /// Whether free space is at or above the floor, quietly (for work nobody asked for: a
    /// speculative render).
    pub fn has_room(&self) -> bool {
        free_bytes(&self.dir).is_ok_and(|free| free >= self.floor_bytes)
    }

    pub fn check(&self) -> Result<(), ServiceError> {
        let free_bytes = free_bytes(&self.dir).unwrap_or(0);
        if free_bytes < self.floor_bytes {
            tracing::warn!(
                free_bytes,
                floor_bytes = self.floor_bytes,
                "disk nearly full: refusing new work"
            );
            return Err(ServiceError::StorageFull {
                reason: format!(
                    "{free_bytes} bytes free, under the floor of {} bytes kept for finishing work",
                    self.floor_bytes
                ),
            });
        }
        Ok(())
    }
}

/// Creates the ballast file of `bytes` in `dir` if it is missing (written out, not sparse,
/// and synced, so the space is really taken). A partial ballast is removed.
pub fn ensure_ballast(dir: &Path, bytes: u64) -> std::io::Result<()> {
    let path = dir.join(BALLAST_FILE);
    if bytes == 0 || path.metadata().is_ok_and(|m| m.len() == bytes) {
        return Ok(());
    }
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&path)?;
        let chunk = vec![0u8; 1 << 20];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            file.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        file.sync_all()
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&path);
    })
}

/// Puts the ballast back in `dir` if it is missing and the disk has room for it beyond the
/// free-space floor (called at start and after each sweep).
pub fn refill_reserve(dir: &Path, reserve_bytes: u64, floor_bytes: u64) {
    if reserve_bytes == 0 || dir.join(BALLAST_FILE).exists() {
        return;
    }
    let room = free_bytes(dir).unwrap_or(0);
    if room < reserve_bytes.saturating_add(floor_bytes) {
        return;
    }
    if let Err(e) = ensure_ballast(dir, reserve_bytes) {
        tracing::warn!(error = %e, "cannot create the disk reserve");
    }
}

/// Deletes the ballast file; whether there was one.
pub fn release_ballast(dir: &Path) -> bool {
    let released = std::fs::remove_file(dir.join(BALLAST_FILE)).is_ok();
    if released {
        tracing::warn!(dir = %dir.display(), "disk full: released the disk reserve to start");
    }
    released
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::is_no_space;

    #[test]
    fn ballast_is_created_once_and_released() {
        let dir = tempfile::tempdir().unwrap();
        ensure_ballast(dir.path(), 3 << 20).unwrap();
        let len = || {
            std::fs::metadata(dir.path().join(BALLAST_FILE))
                .unwrap()
                .len()
        };
        assert_eq!(len(), 3 << 20);
        ensure_ballast(dir.path(), 3 << 20).unwrap();
        assert!(release_ballast(dir.path()));
        assert!(!release_ballast(dir.path()));
    }

    #[test]
    fn the_guard_refuses_under_the_floor() {
        let dir = tempfile::tempdir().unwrap();
        assert!(DiskGuard::new(dir.path(), 0).check().is_ok());
        let err = DiskGuard::new(dir.path(), u64::MAX).check().unwrap_err();
        assert_eq!(err.code(), crate::catalog::ErrorCode::StorageFull);
        assert!(is_no_space(&std::io::Error::from_raw_os_error(
            rustix::io::Errno::NOSPC.raw_os_error()
        )));
    }
}
