//! Reading an outbound answer's body with a cap that holds while it arrives: chunk by chunk,
//! stopping at the cap, so a peer that sends a huge (or endless, close-delimited) body costs at
//! most the cap in memory, never the whole body.

/// Why a capped body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CappedError {
    /// The body is larger than the cap (declared so, or seen to be while reading).
    #[error("answer larger than {0} bytes")]
    TooLarge(usize),
    /// The connection failed while reading.
    #[error("{0}")]
    Http(#[from] reqwest::Error),
}

/// The whole body of `response`, at most `max` bytes: refused at once when its
/// `Content-Length` says more, else read chunk by chunk and refused as soon as it passes `max`.
pub async fn body(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, CappedError> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(CappedError::TooLarge(max));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > max {
            return Err(CappedError::TooLarge(max));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}
