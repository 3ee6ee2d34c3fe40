//! Assets: uploaded videos and images, owned by one principal, with what probing found.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::DynamicRange;

/// What an asset is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AssetKind {
    Video,
    Image,
}

vidforge_names::enum_names!(AssetKind {
    Video => "video",
    Image => "image",
});

/// What probing found in an asset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AssetProbe {
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub duration_seconds: Option<f64>,
    pub video_codec: Option<String>,
    pub audio_codec: Option<String>,
    /// Container / image format name (`mov,mp4,m4a,3gp,3g2,mj2`, `png`).
    pub format: Option<String>,
    /// Average video frame rate (frames per second); `None` for images and for assets
    /// probed before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fps: Option<f64>,
    /// The colour a video declares (`None` for images and for assets probed before it was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<AssetColor>,
}

/// The colour a video asset declares: its tags, and whether they make it HDR, with the HDR
/// metadata that came with it. Names as FFmpeg gives them (`bt2020`, `smpte2084`, ...).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AssetColor {
    pub primaries: String,
    pub transfer: String,
    pub matrix: String,
    /// `tv` (limited), `pc` (full) or `unknown`.
    pub range: String,
    /// `sdr`, `hlg` or `pq`.
    pub dynamic_range: String,
    /// The mastering display's peak and black, in nits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mastering_max_nits: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mastering_min_nits: Option<f64>,
    /// The content light level: brightest pixel, brightest frame average, in nits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cll: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fall: Option<u32>,
    /// The Dolby Vision profile, when a configuration record is present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dolby_vision_profile: Option<u8>,
}

impl AssetColor {
    /// Its dynamic range when that is HDR ([`DynamicRange::is_hdr`]); `None` for SDR.
    pub fn hdr(&self) -> Option<DynamicRange> {
        DynamicRange::from_name(&self.dynamic_range).filter(|d| d.is_hdr())
    }
}

/// An uploaded asset, owned by one principal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssetRecord {
    /// `a_` + 26 chars.
    pub id: String,
    /// `vidforge://assets/<id>`.
    pub uri: String,
    pub principal: String,
    pub kind: AssetKind,
    /// The uploader's file name, sanitised.
    pub file_name: String,
    /// The stored file: an absolute path, or (media in a bucket) the media path relative to
    /// the bucket's prefix, `assets/<id>/<name>` (`media_store`).
    pub path: PathBuf,
    pub size_bytes: u64,
    /// Unix ms.
    pub created_at: u64,
    pub probe: AssetProbe,
}
