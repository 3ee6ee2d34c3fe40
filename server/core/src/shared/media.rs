//! The media side: where assets, previews and results live (a directory or a bucket), the
//! asset catalog, and the free-space floor.

use std::path::PathBuf;

use crate::assets::AssetCatalog;
use crate::disk::DiskGuard;
use crate::media_store::MediaStore;

/// Media and disk (see the module documentation).
pub(crate) struct MediaSide {
    /// Where assets, previews and results live.
    pub store: MediaStore,
    pub assets: AssetCatalog,
    /// Refuses new uploads and renders under the free-space floor.
    pub disk: DiskGuard,
    results_dir: PathBuf,
    segments_dir: PathBuf,
    previews_dir: PathBuf,
}

impl MediaSide {
    pub fn new(
        store: MediaStore,
        assets: AssetCatalog,
        disk: DiskGuard,
        results_dir: PathBuf,
        segments_dir: PathBuf,
        previews_dir: PathBuf,
    ) -> Self {
        MediaSide {
            store,
            assets,
            disk,
            results_dir,
            segments_dir,
            previews_dir,
        }
    }

    /// This node's directory of a render's result (its scratch copy with a bucket).
    pub fn result_dir(&self, id: &str) -> PathBuf {
        self.results_dir.join(id)
    }

    /// This node's directory of a render's segment files (their scratch copies with a
    /// bucket, where they live under `segments/<id>/`).
    pub fn segments_dir(&self, id: &str) -> PathBuf {
        self.segments_dir.join(id)
    }

    /// This node's directory of a render's preview.
    pub fn preview_dir(&self, id: &str) -> PathBuf {
        self.previews_dir.join(id)
    }
}
