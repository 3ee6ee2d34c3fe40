//! This node's copies of sources kept in the bucket, so repeat renders of one asset do not
//! download it again. Bounded by `media_cache_bytes`: past it, the least recently used copies
//! go (a copy's modification time is its last use). Downloads land under a temporary name
//! and are renamed into place complete, so the cache never holds a half-written file; it
//! survives restarts, and a crash's temporaries are deleted when it opens.
//!
//! A copy deleted while the engine reads it stays readable through the open file (POSIX).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::error::ServiceError;
use crate::sync::lock;

/// Prefix of downloads in progress.
const PARTIAL_PREFIX: &str = ".partial-";

pub(super) struct SourceCache {
    dir: PathBuf,
    max_bytes: u64,
    /// Serialises adoption and eviction (downloads themselves run in parallel).
    evicting: Mutex<()>,
}

impl SourceCache {
    /// The cache in `dir` (created), without a crash's temporaries.
    pub(super) fn open(dir: PathBuf, max_bytes: u64) -> Result<SourceCache, ServiceError> {
        std::fs::create_dir_all(&dir)?;
        for e in std::fs::read_dir(&dir)?.flatten() {
            if e.file_name().to_string_lossy().starts_with(PARTIAL_PREFIX) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok(SourceCache {
            dir,
            max_bytes,
            evicting: Mutex::new(()),
        })
    }

    /// The copy's file: the media path flattened into one name that keeps its extension
    /// (`assets/a_x/clip.mp4` → `assets~a_x~clip.mp4`), the prober's format hint.
    fn path_of(&self, rel: &Path) -> PathBuf {
        let name: Vec<_> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        self.dir.join(name.join("~"))
    }

    /// Deletes the copies of everything under the directory `rel` (its media was deleted).
    pub(super) fn forget_dir(&self, rel: &str) {
        let prefix = self.path_of(Path::new(rel));
        let Some(prefix) = prefix
            .file_name()
            .map(|n| format!("{}~", n.to_string_lossy()))
        else {
            return;
        };
        let _guard = lock(&self.evicting);
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// A fresh temporary name for a download.
    pub(super) fn partial_path(&self) -> PathBuf {
        self.dir
            .join(format!("{PARTIAL_PREFIX}{}", crate::ids::new_asset_id()))
    }

    /// The copy of `rel`, if this node has one (its use recorded).
    pub(super) fn get(&self, rel: &Path) -> Option<PathBuf> {
        let path = self.path_of(rel);
        touch(&path).ok()?;
        Some(path)
    }

    /// Makes the complete file `file` (in this file system) the copy of `rel`, then evicts
    /// the least recently used others past the bound. Returns the copy's path; if the file
    /// cannot be moved in, it is deleted and the path is where it would have been.
    pub(super) fn adopt(&self, rel: &Path, file: &Path) -> PathBuf {
        let path = self.path_of(rel);
        let _guard = lock(&self.evicting);
        if let Err(e) = std::fs::rename(file, &path) {
            tracing::warn!(error = %e, "cannot keep a source in the media cache");
            let _ = std::fs::remove_file(file);
            return path;
        }
        let _ = touch(&path);
        self.evict(&path);
        path
    }

    /// Deletes least recently used copies (never `keep`) until the rest fit the bound.
    fn evict(&self, keep: &Path) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut copies: Vec<(SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with(PARTIAL_PREFIX))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                m.is_file().then(|| {
                    (
                        m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                        m.len(),
                        e.path(),
                    )
                })
            })
            .collect();
        let mut total: u64 = copies.iter().map(|c| c.1).sum();
        copies.sort();
        for (_, len, path) in copies {
            if total <= self.max_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                tracing::debug!(path = %path.display(), "media cache: evicted");
            }
        }
    }
}

/// Records a use: the modification time becomes now.
fn touch(path: &Path) -> std::io::Result<()> {
    std::fs::File::options()
        .write(true)
        .open(path)?
        .set_modified(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_recently_used_copies_go_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path()).unwrap();
        std::fs::write(dir.path().join(".partial-crash"), b"half").unwrap();
        let cache = SourceCache::open(dir.path().to_path_buf(), 25).unwrap();
        assert!(!dir.path().join(".partial-crash").exists());
        let add = |name: &str| {
            let tmp = cache.partial_path();
            std::fs::write(&tmp, [0u8; 10]).unwrap();
            cache.adopt(Path::new(&format!("assets/{name}/clip.mp4")), &tmp)
        };
        let a = add("a");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = add("b");
        std::thread::sleep(std::time::Duration::from_millis(20));
        // `a` used again: `b` is now the least recent.
        assert_eq!(cache.get(Path::new("assets/a/clip.mp4")), Some(a.clone()));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let c = add("c");
        assert!(a.exists() && c.exists() && !b.exists());
        assert!(c.to_string_lossy().ends_with("assets~c~clip.mp4"));
        assert_eq!(cache.get(Path::new("assets/b/clip.mp4")), None);
        // One copy over the bound alone is kept.
        let tmp = cache.partial_path();
        std::fs::write(&tmp, [0u8; 40]).unwrap();
        let big = cache.adopt(Path::new("assets/d/big.mp4"), &tmp);
        assert!(big.exists() && !a.exists() && !c.exists());
    }
}
