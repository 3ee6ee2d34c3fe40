//! The `vidforge://` resource URIs and their parsers (the MCP layer's `resources/read` and the
//! HTTP routes share them).

use crate::ids;
use crate::store::OutputFormat;

/// URI scheme of every vidforge resource.
pub const SCHEME: &str = "vidforge://";
/// File name of a render's watermark preview.
pub const PREVIEW_FILE_NAME: &str = "watermark-preview.png";
/// File name of its copy sized for a chat view (the MCP App's, inlined), beside it.
pub const VIEW_PREVIEW_FILE_NAME: &str = "watermark-preview-view.png";

/// `vidforge://assets/<id>`.
pub fn asset_uri(asset_id: &str) -> String {
    format!("{SCHEME}assets/{asset_id}")
}

/// `vidforge://videos/<render id>/final.<ext>`.
pub fn video_uri(render_id: &str, format: OutputFormat) -> String {
    format!("{SCHEME}videos/{render_id}/{}", final_file_name(format))
}

/// `vidforge://renders/<render id>/watermark-preview.png`.
pub fn preview_uri(render_id: &str) -> String {
    format!("{SCHEME}renders/{render_id}/{PREVIEW_FILE_NAME}")
}

/// The asset id in `vidforge://assets/<id>`, if `uri` has that shape.
pub fn parse_asset_uri(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(SCHEME)?.strip_prefix("assets/")?;
    ids::is_well_formed(id, ids::ASSET_ID_PREFIX).then_some(id)
}

/// `(render id, format)` of `vidforge://videos/<id>/final.<ext>`.
pub fn parse_video_uri(uri: &str) -> Option<(&str, OutputFormat)> {
    let rest = uri.strip_prefix(SCHEME)?.strip_prefix("videos/")?;
    let (id, file) = rest.split_once('/')?;
    let format = parse_final_file_name(file)?;
    ids::is_well_formed(id, ids::RENDER_ID_PREFIX).then_some((id, format))
}

/// The render id of `vidforge://renders/<id>/watermark-preview.png`.
pub fn parse_preview_uri(uri: &str) -> Option<&str> {
    let rest = uri.strip_prefix(SCHEME)?.strip_prefix("renders/")?;
    let (id, file) = rest.split_once('/')?;
    (file == PREVIEW_FILE_NAME && ids::is_well_formed(id, ids::RENDER_ID_PREFIX)).then_some(id)
}

/// A render's result file name: `final.<ext>`.
pub fn final_file_name(format: OutputFormat) -> String {
    format!("final.{}", format.extension())
}

/// The HTTP download URL of a render's video: `<base>/videos/<id>/final.<ext>`.
pub fn download_url(base_url: &str, render_id: &str, format: OutputFormat) -> String {
    format!("{base_url}/videos/{render_id}/{}", final_file_name(format))
}

/// The path of a render's approval page (`/approvals/<id>`, served by `vidforge_http::web`).
pub fn approval_path(render_id: &str) -> String {
    format!("/approvals/{render_id}")
}

/// The approval page's URL: `<base>/approvals/<id>`. It carries no credential: the page asks
/// the browser to sign in.
pub fn approval_url(base_url: &str, render_id: &str) -> String {
    format!("{base_url}{}", approval_path(render_id))
}

/// The HTTP URL of a render's watermark preview image.
pub fn preview_http_path(render_id: &str) -> String {
    format!("/renders/{render_id}/{PREVIEW_FILE_NAME}")
}

/// The format named by `final.<ext>`.
pub fn parse_final_file_name(file: &str) -> Option<OutputFormat> {
    OutputFormat::from_name(file.strip_prefix("final.")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let r = ids::new_render_id();
        let a = ids::new_asset_id();
        assert_eq!(parse_asset_uri(&asset_uri(&a)), Some(a.as_str()));
        assert_eq!(
            parse_video_uri(&video_uri(&r, OutputFormat::Webm)),
            Some((r.as_str(), OutputFormat::Webm))
        );
        assert_eq!(parse_preview_uri(&preview_uri(&r)), Some(r.as_str()));
        assert_eq!(parse_asset_uri("vidforge://assets/../../x"), None);
        assert_eq!(parse_asset_uri("file:///etc/passwd"), None);
        assert_eq!(
            parse_video_uri(&format!("vidforge://videos/{r}/final.avi")),
            None
        );
    }
}
