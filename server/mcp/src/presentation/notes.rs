//! Sentences about a render that its status and result texts carry: what happened to an HDR
//! source, how faithful the video is.

use vidforge_core::store::{Outcome, OutputFormat, QualityFigures, RenderRecord};

/// What a render does with an HDR source, for its status message: nothing for SDR.
pub(super) fn hdr_note(rec: &RenderRecord) -> String {
    let Some(transfer) = rec.source_hdr.as_deref() else {
        return String::new();
    };
    let transfer = transfer.to_ascii_uppercase();
    if !rec.hdr.keeps() {
        return format!(" The source is HDR ({transfer}): tone-mapped to SDR (BT.709).");
    }
    let codec = match rec.args.output_format {
        OutputFormat::Webm => "VP9 profile 2",
        OutputFormat::Mp4 | OutputFormat::Mov => "HEVC Main10",
    };
    format!(" The source is HDR ({transfer}): kept HDR ({codec}, 10-bit, its metadata carried).")
}

/// `; PSNR 43.2 dB, worst 39.8 dB at 00:07, SSIM 0.987` for a result link's description.
pub(super) fn quality_note(q: Option<&QualityFigures>) -> String {
    q.map(|q| format!("; {}", q.whole.line()))
        .unwrap_or_default()
}

/// ` Quality: PSNR 43.2 dB, worst 39.8 dB at 00:07, SSIM 0.987.` for a measured render's
/// status; nothing otherwise.
pub(super) fn quality_sentence(rec: &RenderRecord) -> String {
    match &rec.outcome {
        Some(Outcome::Success {
            quality: Some(q), ..
        }) => format!(" Quality: {}.", q.whole.line()),
        _ => String::new(),
    }
}
