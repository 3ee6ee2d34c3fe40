//! Values derived from the configuration: limits in the units the service counts in, links,
//! directories, this node's name.

use std::path::{Path, PathBuf};

use super::{Config, ConfigError, DEFAULT_MAX_CONCURRENT_UPLOADS};

use crate::catalog;
use crate::engine::{HdrPolicy, SegmentPlanOptions, SourceLimits};

/// The directory of segment files under the media root (locally, or in the bucket).
pub const SEGMENTS_DIR: &str = "segments";

impl Config {
    /// Uploads served at once: `max_concurrent_uploads`, by default
    /// [`DEFAULT_MAX_CONCURRENT_UPLOADS`] but never more than half of `max_connections` (at
    /// least one).
    pub fn upload_slots(&self) -> usize {
        self.max_concurrent_uploads
            .unwrap_or_else(|| DEFAULT_MAX_CONCURRENT_UPLOADS.min(self.max_connections / 2))
            .max(1)
    }

    /// [`Config::max_render_seconds`] in output pixel-frames.
    pub fn max_render_pixel_frames(&self) -> u64 {
        self.max_render_seconds
            .saturating_mul(self.render_pixel_rate)
    }

    /// [`Config::render_budget_seconds`] in output pixel-frames (`None`: no budget).
    pub fn render_budget_pixel_frames(&self) -> Option<u64> {
        (self.render_budget_seconds > 0).then(|| {
            self.render_budget_seconds
                .saturating_mul(self.render_pixel_rate)
        })
    }

    /// [`Config::long_render_seconds`] in output pixel-frames.
    pub fn long_render_pixel_frames(&self) -> u64 {
        self.long_render_seconds
            .saturating_mul(self.render_pixel_rate)
    }

    /// What an upload may be.
    pub fn upload_limits(&self) -> crate::assets::UploadLimits {
        crate::assets::UploadLimits {
            max_bytes: self.max_upload_bytes,
            source: SourceLimits {
                max_side: self.max_source_side,
                max_pixels: self.max_source_pixels,
            },
            max_watermark_side: self.max_watermark_side,
            concurrent_probes: self.max_concurrent_probes,
        }
    }

    /// How a render's source is cut into segments (`fanout`): the one place
    /// `segment_seconds` and `segment_min_duration` become the engine's terms.
    pub fn segment_plan(&self) -> SegmentPlanOptions {
        SegmentPlanOptions {
            target_seconds: self.segment_seconds.as_secs_f64(),
            min_source_seconds: self.segment_min_duration.as_secs_f64(),
        }
    }

    /// The configured TTLs and approval timeout, as descriptions and messages state them.
    pub fn lifetimes(&self) -> catalog::Lifetimes {
        catalog::Lifetimes {
            asset_ttl: self.asset_ttl,
            task_ttl: self.task_ttl,
            result_ttl: self.result_ttl,
            idempotency_ttl: self.idempotency_ttl,
            approval_timeout: self.approval_timeout,
        }
    }

    /// Refuses a non-loopback listen address when neither tokens nor OAuth issuers are
    /// configured: then every caller is the same anonymous principal, which is only
    /// acceptable on this machine.
    pub fn check_bind_safety(&self) -> Result<(), ConfigError> {
        if !self.auth_required() && !self.listen.ip().is_loopback() {
            return Err(ConfigError::UnsafeBind {
                listen: self.listen,
            });
        }
        Ok(())
    }

    /// True when bearer tokens (static ones or OAuth access tokens) are required.
    pub fn auth_required(&self) -> bool {
        !self.tokens.is_empty() || !self.oauth_issuers.is_empty()
    }

    /// True when `principal` is listed in `admins` (sees every render on the dashboard, reads
    /// `/metrics` from any address).
    pub fn is_admin(&self, principal: &str) -> bool {
        self.admins.iter().any(|a| a == principal)
    }

    /// What `principal`'s renders do with an HDR source: keep it when `keep_hdr` names the
    /// principal (or `*`), else tone-map it.
    pub fn hdr_policy_for(&self, principal: &str) -> HdrPolicy {
        HdrPolicy::keeping(self.keep_hdr.iter().any(|p| p == principal || p == "*"))
    }

    /// Base URL for links (`public_base_url`, or `http://<listen>`), without a trailing slash.
    pub fn base_url(&self) -> String {
        match &self.public_base_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => format!("http://{}", self.listen),
        }
    }

    /// The sled database directory.
    pub fn db_dir(&self) -> PathBuf {
        self.data_dir.join("db")
    }
    /// Root of the media: `media_dir`, or the data directory.
    /// With media in a bucket, the data directory: scratch files before their upload.
    pub fn media_root(&self) -> &Path {
        match &self.media_store {
            crate::config::MediaStoreSetting::Dir(dir) => dir,
            _ => &self.data_dir,
        }
    }
    /// Sources downloaded from the bucket (`media_store/cache.rs`).
    pub fn media_cache_dir(&self) -> PathBuf {
        self.data_dir.join("cache")
    }
    /// Uploaded assets.
    pub fn assets_dir(&self) -> PathBuf {
        self.media_root().join("assets")
    }
    /// Rendered results: `results/<render id>/final.<ext>`.
    pub fn results_dir(&self) -> PathBuf {
        self.media_root().join("results")
    }
    /// Segments of a render split for parallel rendering:
    /// `segments/<render id>/<segment file>`, deleted when the render ends.
    pub fn segments_dir(&self) -> PathBuf {
        self.media_root().join(SEGMENTS_DIR)
    }
    /// Watermark previews: `previews/<render id>/watermark-preview.png`.
    pub fn previews_dir(&self) -> PathBuf {
        self.media_root().join("previews")
    }

    /// This node's name in work leases: `node_id`, or `HOST:PORT` of the listen address
    /// (stable across restarts, so a restarted node recognises its own leases).
    pub fn node_name(&self) -> String {
        if let Some(n) = &self.node_id {
            return n.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        format!("{host}:{}", self.listen.port())
    }

    /// Creates the data directory tree.
    pub fn ensure_dirs(&self) -> std::io::Result<()> {
        for d in [
            self.db_dir(),
            self.assets_dir(),
            self.results_dir(),
            self.segments_dir(),
            self.previews_dir(),
        ] {
            std::fs::create_dir_all(d)?;
        }
        Ok(())
    }
}
