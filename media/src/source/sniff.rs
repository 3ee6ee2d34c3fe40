//! What a file is before (or besides) what FFmpeg makes of it: readable, empty, text, a still
//! image.

use std::io::Read;
use std::path::Path;

use crate::error::MediaError;

/// Demuxers that produce a single still picture: an image is not a video.
pub(crate) fn is_still_image_format(name: &str) -> bool {
    name == "image2" || name.ends_with("_pipe")
}

/// Heuristic: the head of the file is text (UTF-8 without control bytes).
pub(crate) fn looks_like_text(path: &Path) -> bool {
    let mut head = [0u8; 4096];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(n) = f.read(&mut head) else {
        return false;
    };
    if n == 0 {
        return false;
    }
    let head = &head[..n];
    if head
        .iter()
        .any(|&b| b < 0x09 || (b > 0x0d && b < 0x20) || b == 0x7f)
    {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        // A multi-byte character cut at the 4 KiB boundary is still text.
        Err(e) => e.error_len().is_none() && e.valid_up_to() + 4 > n,
    }
}

/// Checks the file exists, is a readable, non-empty regular file. Returns its size.
pub(crate) fn check_readable(what: &'static str, path: &Path) -> Result<u64, MediaError> {
    let meta = std::fs::metadata(path).map_err(|e| MediaError::not_found(what, path, e))?;
    if meta.is_dir() {
        return Err(MediaError::not_found(what, path, "is a directory"));
    }
    std::fs::File::open(path).map_err(|e| MediaError::not_found(what, path, e))?;
    if meta.len() == 0 {
        return Err(MediaError::invalid(format!(
            "{what} {} is empty (0 bytes)",
            path.display()
        )));
    }
    Ok(meta.len())
}
