//! One trusted issuer's signing keys: found through its RFC 8414 authorization-server
//! metadata (falling back to OpenID discovery), fetched from its `jwks_uri`, cached, and
//! fetched again on an unknown `kid` at most once per [`REFETCH_INTERVAL`]. The metadata is
//! read again with every key fetch (an issuer may move its `jwks_uri`), and the
//! `authorization_endpoint` and `token_endpoint` it names ([`IssuerKeys::endpoints`], for the
//! pages' browser sign-in) are kept at most [`METADATA_MAX_AGE`].
//!
//! A request never waits longer than [`FETCH_TIMEOUT`] on a fetch, and requests whose key is
//! cached never wait at all: when the issuer is down, tokens signed with known keys keep
//! working and an unknown `kid` is a `401`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use reqwest::Url;
use serde_json::Value;

/// Unknown `kid`s fetch the key set again at most this often.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// After a failed fetch (the issuer down, or not up yet when vidforge started), the next
/// one may come this soon: often enough to recover quickly, seldom enough to spare it.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// The longest a request waits on the issuer (metadata and key set together).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest the pages' sign-in uses metadata without reading it again.
pub const METADATA_MAX_AGE: Duration = Duration::from_secs(60 * 60);
/// Largest metadata document or key set read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// A verification key and the algorithm its JWK pins (if it names one).
pub struct Key {
    pub decoding: DecodingKey,
    pub alg: Option<Algorithm>,
}

/// Why keys could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("issuer unreachable or answering badly: {0}")]
    Http(String),
    #[error("issuer metadata: {0}")]
    Metadata(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
}

/// What vidforge uses of an issuer's metadata.
#[derive(Clone, Debug)]
pub struct Endpoints {
    pub jwks_uri: Url,
    /// Where a browser signs in (absent: the issuer offers no authorization-code flow).
    pub authorization_endpoint: Option<Url>,
    /// Where codes are exchanged for tokens.
    pub token_endpoint: Option<Url>,
}

#[derive(Default)]
struct Cache {
    keys: HashMap<String, Arc<Key>>,
    /// The discovered metadata, and when it was read.
    endpoints: Option<(Endpoints, Instant)>,
    /// When the last fetch was tried, and whether it failed.
    tried: Option<(Instant, bool)>,
}

/// The keys of one issuer.
pub struct IssuerKeys {
    issuer: String,
    client: reqwest::Client,
    cache: RwLock<Cache>,
    /// One fetch at a time; requests for the same unknown `kid` wait for it.
    fetching: tokio::sync::Mutex<()>,
}

impl IssuerKeys {
    pub fn new(issuer: String, client: reqwest::Client) -> IssuerKeys {
        IssuerKeys {
            issuer,
            client,
            cache: RwLock::new(Cache::default()),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    fn cached(&self, kid: &str) -> Option<Arc<Key>> {
        self.cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys
            .get(kid)
            .cloned()
    }

    /// The key `kid`: cached, or fetched when the cache has not been refreshed for
    /// [`REFETCH_INTERVAL`]. `Ok(None)`: the issuer has no such key (now).
    pub async fn key(&self, kid: &str) -> Result<Option<Arc<Key>>, FetchError> {
        if let Some(key) = self.cached(kid) {
            return Ok(Some(key));
        }
        let _one = self.fetching.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(key) = self.cached(kid) {
            return Ok(Some(key));
        }
        let recent = self
            .cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tried
            .is_some_and(|(t, failed)| {
                t.elapsed()
                    < if failed {
                        RETRY_AFTER_FAILURE
                    } else {
                        REFETCH_INTERVAL
                    }
            });
        if recent {
            return Ok(None);
        }
        self.refresh().await?;
        Ok(self.cached(kid))
    }

    /// The issuer's metadata: cached once discovered, otherwise discovered now (a request
    /// waits at most [`FETCH_TIMEOUT`]).
    pub async fn endpoints(&self) -> Result<Endpoints, FetchError> {
        if let Some(e) = self.cached_endpoints() {
            return Ok(e);
        }
        let _one = self.fetching.lock().await;
        if let Some(e) = self.cached_endpoints() {
            return Ok(e);
        }
        let found = tokio::time::timeout(FETCH_TIMEOUT, self.discover())
            .await
            .unwrap_or(Err(FetchError::Timeout(FETCH_TIMEOUT)))?;
        self.cache
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .endpoints = Some((found.clone(), Instant::now()));
        Ok(found)
    }

    /// The metadata, when read less than [`METADATA_MAX_AGE`] ago.
    fn cached_endpoints(&self) -> Option<Endpoints> {
        self.cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .endpoints
            .as_ref()
            .filter(|(_, read)| read.elapsed() < METADATA_MAX_AGE)
            .map(|(e, _)| e.clone())
    }

    /// Reads the metadata and fetches the key set now (at start-up, and for an unknown `kid`),
    /// replacing the cache when it works; a failure keeps what is already known.
    pub async fn refresh(&self) -> Result<(), FetchError> {
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, self.fetch())
            .await
            .unwrap_or(Err(FetchError::Timeout(FETCH_TIMEOUT)));
        let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
        cache.tried = Some((Instant::now(), fetched.is_err()));
        match fetched {
            Ok((endpoints, keys)) => {
                tracing::info!(issuer = %self.issuer, keys = keys.len(), "OAuth issuer keys fetched");
                cache.endpoints = Some((endpoints, Instant::now()));
                cache.keys = keys;
                Ok(())
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, error = %e, "cannot fetch the OAuth issuer's keys; tokens signed with cached keys still work, others are refused (401) until a fetch succeeds");
                Err(e)
            }
        }
    }

    async fn fetch(&self) -> Result<(Endpoints, HashMap<String, Arc<Key>>), FetchError> {
        let endpoints = self.discover().await?;
        let uri = endpoints.jwks_uri.clone();
        let set: JwkSet = serde_json::from_value(self.get_json(uri.clone()).await?)
            .map_err(|e| FetchError::Metadata(format!("jwks_uri {uri}: {e}")))?;
        let mut keys = HashMap::new();
        for jwk in &set.keys {
            let Some(kid) = jwk.common.key_id.clone() else {
                continue;
            };
            if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
                continue;
            }
            let Ok(decoding) = DecodingKey::from_jwk(jwk) else {
                tracing::debug!(issuer = %self.issuer, %kid, "skipping a JWK vidforge cannot use");
                continue;
            };
            let alg = jwk.common.key_algorithm.and_then(key_algorithm);
            keys.insert(kid, Arc::new(Key { decoding, alg }));
        }
        Ok((endpoints, keys))
    }

    /// The issuer's metadata (`jwks_uri` required; the authorization and token endpoints when
    /// it has them): RFC 8414 first, then OpenID discovery. The document must name this exact
    /// issuer.
    async fn discover(&self) -> Result<Endpoints, FetchError> {
        let mut last = FetchError::Metadata("no metadata document".into());
        for url in metadata_urls(&self.issuer)? {
            match self.get_json(url.clone()).await {
                Ok(doc) => {
                    if doc["issuer"].as_str() != Some(self.issuer.as_str()) {
                        last = FetchError::Metadata(format!(
                            "{url} names issuer {}, not {}",
                            doc["issuer"], self.issuer
                        ));
                        continue;
                    }
                    let Some(jwks) = doc["jwks_uri"].as_str() else {
                        last = FetchError::Metadata(format!("{url} has no jwks_uri"));
                        continue;
                    };
                    let jwks_uri = Url::parse(jwks)
                        .map_err(|e| FetchError::Metadata(format!("jwks_uri {jwks}: {e}")))?;
                    let url_of = |field: &str| doc[field].as_str().and_then(|u| Url::parse(u).ok());
                    return Ok(Endpoints {
                        jwks_uri,
                        authorization_endpoint: url_of("authorization_endpoint"),
                        token_endpoint: url_of("token_endpoint"),
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn get_json(&self, url: Url) -> Result<Value, FetchError> {
        let response = self
            .client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| FetchError::Http(format!("{url}: {e}")))?;
        let bytes = super::capped::body(response, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| match e {
                super::capped::CappedError::TooLarge(_) => {
                    FetchError::Metadata(format!("{url}: document too large"))
                }
                super::capped::CappedError::Http(e) => FetchError::Http(format!("{url}: {e}")),
            })?;
        serde_json::from_slice(&bytes).map_err(|e| FetchError::Metadata(format!("{url}: {e}")))
    }
}

/// Where an issuer's metadata lives: RFC 8414 §3.1 (the well-known path inserted between host
/// and the issuer's path), then OpenID Connect Discovery (appended).
pub fn metadata_urls(issuer: &str) -> Result<[Url; 2], FetchError> {
    let base =
        Url::parse(issuer).map_err(|e| FetchError::Metadata(format!("issuer {issuer}: {e}")))?;
    let path = base.path().trim_end_matches('/');
    let mut rfc8414 = base.clone();
    rfc8414.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
    let mut oidc = base.clone();
    oidc.set_path(&format!("{path}/.well-known/openid-configuration"));
    Ok([rfc8414, oidc])
}

/// The JWS algorithm a JWK's `alg` names (encryption algorithms are not signatures).
fn key_algorithm(a: KeyAlgorithm) -> Option<Algorithm> {
    Some(match a {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        KeyAlgorithm::HS256 => Algorithm::HS256,
        KeyAlgorithm::HS384 => Algorithm::HS384,
        KeyAlgorithm::HS512 => Algorithm::HS512,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_follow_rfc_8414_then_openid() {
        let [a, b] = metadata_urls("https://as.example.com").unwrap();
        assert_eq!(
            a.as_str(),
            "https://as.example.com/.well-known/oauth-authorization-server"
        );
        assert_eq!(
            b.as_str(),
            "https://as.example.com/.well-known/openid-configuration"
        );
        let [a, b] = metadata_urls("https://as.example.com/tenant/1").unwrap();
        assert_eq!(
            a.as_str(),
            "https://as.example.com/.well-known/oauth-authorization-server/tenant/1"
        );
        assert_eq!(
            b.as_str(),
            "https://as.example.com/tenant/1/.well-known/openid-configuration"
        );
        assert!(metadata_urls("not a url").is_err());
    }
}
