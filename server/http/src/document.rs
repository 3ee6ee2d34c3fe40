//! A fixed public document (the MCP Server Card, the AI Catalog) served with a strong entity
//! tag, so a client revalidates it instead of fetching it again: `If-None-Match` naming the
//! tag (or `*`) is answered `304 Not Modified` with no body (RFC 9110 §13.1.2, weak
//! comparison).

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// A document, its type, caching rule and tag (built once; cheap to clone).
#[derive(Clone, Debug)]
pub struct Document {
    body: Arc<String>,
    content_type: &'static str,
    cache_control: &'static str,
    etag: HeaderValue,
}

impl Document {
    /// `body` served as `content_type` with `cache_control`; its tag is a hash of the bytes.
    pub fn new(body: String, content_type: &'static str, cache_control: &'static str) -> Self {
        let digest = Sha256::digest(body.as_bytes());
        let etag = HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..16])))
            .expect("a quoted hex string is a valid header value");
        Document {
            body: Arc::new(body),
            content_type,
            cache_control,
            etag,
        }
    }

    /// The document's entity tag, quoted.
    pub fn etag(&self) -> &HeaderValue {
        &self.etag
    }

    pub fn body(&self) -> &str {
        &self.body
    }

    /// The answer to a `GET` or `HEAD` with `request` headers: `304` when its
    /// `If-None-Match` names this version, else `200` with the body.
    pub fn respond(&self, request: &HeaderMap) -> Response {
        let fresh = request
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|tag| tag.trim())
            .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == self.etag);
        let mut r = if fresh {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            let mut r = self.body.as_str().to_owned().into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(self.content_type),
            );
            r
        };
        let h = r.headers_mut();
        h.insert(header::ETAG, self.etag.clone());
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(self.cache_control),
        );
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::IF_NONE_MATCH, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_matching_tag_is_not_modified_and_another_gets_the_body() {
        let doc = Document::new("{\"a\":1}".into(), "application/json", "public, max-age=60");
        let tag = doc.etag().to_str().unwrap().to_string();
        assert!(
            tag.starts_with('"') && tag.ends_with('"') && tag.len() == 34,
            "{tag}"
        );
        assert_eq!(doc.respond(&HeaderMap::new()).status(), StatusCode::OK);
        for matching in [
            tag.clone(),
            format!("W/{tag}"),
            format!("\"other\", {tag}"),
            "*".into(),
        ] {
            let r = doc.respond(&asking(&[&matching]));
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{matching}");
            assert_eq!(r.headers()[header::ETAG], tag.as_str());
        }
        let r = doc.respond(&asking(&["\"other\""]));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[header::CACHE_CONTROL], "public, max-age=60");
        let changed = Document::new("{\"a\":2}".into(), "application/json", "no-cache");
        assert_ne!(changed.etag(), doc.etag());
    }
}
