//! Truncation checks: a render whose source decodes far short of what its container declares
//! (frames or length) is an error, not a short video passed off as complete.

use crate::error::MediaError;
use crate::pipeline::DecodedExtent;

/// A source whose container declares many more frames than could be decoded is truncated
/// or damaged (an mp4 cut short keeps its index): its render is an error, not a short video
/// passed off as complete. A tenth of slack covers edit lists and decoders that drop a few
/// frames.
/// Whether `got` falls more than a tenth short of `declared` (the slack every truncation check
/// allows: edit lists, decoders that drop a few frames).
pub(crate) fn far_short(got: f64, declared: f64) -> bool {
    got * 10.0 < declared * 9.0
}

pub(crate) fn check_complete(frames: u64, declared: Option<u64>) -> Result<(), MediaError> {
    match declared {
        Some(declared) if frames.saturating_mul(10) < declared.saturating_mul(9) => {
            Err(MediaError::invalid(format!(
                "the source is truncated or damaged: its container declares {declared} frames \
                 but only {frames} could be decoded; upload the complete file"
            )))
        }
        _ => Ok(()),
    }
}

/// The length a source declares before it is decoded, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct DeclaredLength {
    /// The video stream's own duration (mp4/mov indexes; unknown in Matroska).
    pub video: Option<f64>,
    /// The container's duration (Matroska/WebM write it in the segment header, which a cut
    /// file keeps).
    pub container: Option<f64>,
}

/// A source whose decoded length falls far short of the length it declares is truncated or
/// damaged, whatever its container: its render is an error, not a short video passed off as
/// complete. The video stream's duration is compared with the end of the last decoded video
/// frame; without one, the container's duration is compared with the end of the last video
/// frame or audio packet (a complete file whose audio outlasts its video reaches the
/// container's end through its audio). Same tenth of slack as [`check_complete`]; a length
/// that is unknown or only estimated from the bitrate is not checked.
pub(crate) fn check_length(
    decoded: &DecodedExtent,
    declared: DeclaredLength,
) -> Result<(), MediaError> {
    let (declared, got) = match (declared.video, declared.container) {
        (Some(d), _) => (d, decoded.video_seconds()),
        (None, Some(d)) => (d, decoded.container_seconds()),
        (None, None) => return Ok(()),
    };
    // No timestamps at all: nothing to compare (the frame count check still applies).
    let Some(got) = got else { return Ok(()) };
    if far_short(got, declared) {
        return Err(MediaError::invalid(format!(
            "the source is truncated or damaged: its container declares {declared:.2} s but \
             only {:.2} s could be decoded; upload the complete file",
            got.max(0.0)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_that_decodes_far_short_of_its_declared_length_is_an_error() {
        let extent = |origin, video_end, audio_end| DecodedExtent {
            video_end: Some(video_end),
            audio_end,
            origin,
        };
        let container = |d| DeclaredLength {
            video: None,
            container: Some(d),
        };
        // A webm cut at half: 1.9 s of 4.0 s.
        let e = check_length(&extent(-0.007, 1.87, Some(1.893)), container(4.008)).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        let msg = e.to_string();
        assert!(msg.contains("truncated"), "{msg}");
        assert!(msg.contains("4.01 s") && msg.contains("1.90 s"), "{msg}");
        // Complete, and within the tenth of slack.
        assert!(check_length(&extent(-0.007, 4.0, Some(4.001)), container(4.008)).is_ok());
        assert!(check_length(&extent(0.0, 3.7, None), container(4.0)).is_ok());
        // Audio outlasting the video reaches the container's end.
        assert!(check_length(&extent(0.0, 2.0, Some(4.0)), container(4.0)).is_ok());
        // Timestamps that start late: Matroska declares the end, counted from 0.
        assert!(check_length(&extent(0.0, 7.0, None), container(7.0)).is_ok());
        // The video stream's own duration wins over the container's.
        let both = DeclaredLength {
            video: Some(2.0),
            container: Some(4.0),
        };
        assert!(check_length(&extent(0.0, 2.0, None), both).is_ok());
        let video = DeclaredLength {
            video: Some(4.0),
            container: None,
        };
        assert!(check_length(&extent(0.0, 1.5, Some(5.0)), video).is_err());
        // Unknown lengths or timestamps: nothing to compare.
        let none = DeclaredLength {
            video: None,
            container: None,
        };
        assert!(check_length(&extent(0.0, 0.1, None), none).is_ok());
        assert!(check_length(&DecodedExtent::default(), container(4.0)).is_ok());
    }

    #[test]
    fn a_source_that_decodes_far_short_of_its_declared_frames_is_an_error() {
        assert!(check_complete(26, Some(90)).is_err());
        assert!(check_complete(85, Some(90)).is_ok());
        assert!(check_complete(26, None).is_ok());
        let e = check_complete(0, Some(90)).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
    }
}
