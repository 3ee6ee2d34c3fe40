//! Webhook endpoints: where a principal's render events go (`[webhooks.PRINCIPAL]` in the
//! file), or one endpoint for every principal (`webhook_url` + `webhook_secret`); a
//! principal's own entry replaces the shared one. Checked at start: an `http(s)` URL with a
//! host and no credentials, a Standard Webhooks secret (`whsec_` + base64 of 24 to 64 bytes),
//! known event names.

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;

use super::{Config, ConfigError};
use crate::store::EventKind;

/// The Standard Webhooks secret prefix.
pub const SECRET_PREFIX: &str = "whsec_";
/// Secret key sizes the Standard Webhooks specification recommends.
const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// One principal's endpoint as the file states it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookFile {
    pub url: String,
    pub secret: String,
    /// Event types (`render.succeeded`, ...); absent: all of them.
    #[serde(default)]
    pub events: Option<Vec<String>>,
}

/// Where one principal's events go.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// An `http(s)` URL (checked).
    pub url: String,
    /// `whsec_…` (checked).
    pub secret: String,
    /// The events it wants.
    pub events: Vec<EventKind>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("secret", &"whsec_…")
            .field("events", &self.events)
            .finish()
    }
}

/// The settings of the shared endpoint, as a refusal names them.
const SHARED_FIELDS: (&str, &str) = ("webhook_url", "webhook_secret");

impl Endpoint {
    /// Checks and resolves an endpoint; `fields` name its URL and its secret in a refusal
    /// (the shared endpoint's are two settings, a principal's table is one).
    pub fn parse(
        fields: (&'static str, &'static str),
        url: &str,
        secret: &str,
        events: Option<&[String]>,
    ) -> Result<Endpoint, ConfigError> {
        let (url_field, secret_field) = fields;
        let bad = |reason: String| ConfigError::Invalid {
            field: url_field,
            reason,
        };
        check_url(url).map_err(|e| bad(e.to_string()))?;
        check_secret(secret).map_err(|e| ConfigError::Invalid {
            field: secret_field,
            reason: e.to_string(),
        })?;
        let events = match events {
            None => EventKind::ALL.to_vec(),
            Some([]) => EventKind::ALL.to_vec(),
            Some(names) => names
                .iter()
                .map(|n| {
                    EventKind::parse_lenient(n).ok_or_else(|| {
                        bad(format!(
                            "unknown event `{n}` (known: {})",
                            EventKind::ALL.map(EventKind::as_str).join(", ")
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Endpoint {
            url: url.trim().to_string(),
            secret: secret.trim().to_string(),
            events,
        })
    }

    pub fn wants(&self, kind: EventKind) -> bool {
        self.events.contains(&kind)
    }
}

/// Resolves the file's `[webhooks.PRINCIPAL]` tables.
pub(super) fn endpoints_from_file(
    v: BTreeMap<String, WebhookFile>,
) -> Result<BTreeMap<String, Endpoint>, ConfigError> {
    v.into_iter()
        .map(|(principal, w)| {
            Endpoint::parse(
                ("webhooks", "webhooks"),
                &w.url,
                &w.secret,
                w.events.as_deref(),
            )
            .map(|e| (principal, e))
        })
        .collect()
}

/// Why an endpoint's URL or secret is refused (the reason of its [`ConfigError::Invalid`]).
#[derive(Debug, thiserror::Error)]
enum EndpointProblem {
    #[error("`{0}` is not an http:// or https:// URL")]
    NotHttp(String),
    #[error("`{0}` has no host")]
    NoHost(String),
    #[error("the URL must not carry credentials (the signature authenticates)")]
    Credentials,
    #[error("`{0}` is not a plain URL")]
    NotPlain(String),
    #[error("the secret must be a Standard Webhooks secret: whsec_ followed by base64")]
    NotWhsec,
    #[error("the secret after whsec_ is not base64")]
    NotBase64,
    #[error(
        "the secret is {len} bytes; it must be {min} to {max}",
        min = SECRET_BYTES.start(),
        max = SECRET_BYTES.end()
    )]
    SecretLength { len: usize },
}

fn check_url(url: &str) -> Result<(), EndpointProblem> {
    let url = url.trim();
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| EndpointProblem::NotHttp(url.to_string()))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        return Err(EndpointProblem::NoHost(url.to_string()));
    }
    if authority.contains('@') {
        return Err(EndpointProblem::Credentials);
    }
    if url.contains('#') || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(EndpointProblem::NotPlain(url.to_string()));
    }
    Ok(())
}

fn check_secret(secret: &str) -> Result<(), EndpointProblem> {
    let key = secret
        .trim()
        .strip_prefix(SECRET_PREFIX)
        .ok_or(EndpointProblem::NotWhsec)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(key)
        .map_err(|_| EndpointProblem::NotBase64)?;
    if !SECRET_BYTES.contains(&bytes.len()) {
        return Err(EndpointProblem::SecretLength { len: bytes.len() });
    }
    Ok(())
}

impl Config {
    /// Where `principal`'s events go: its own endpoint, else the shared one, else none.
    pub fn webhook_endpoint(&self, principal: &str) -> Option<Endpoint> {
        if let Some(e) = self.webhooks.get(principal) {
            return Some(e.clone());
        }
        let (url, secret) = (self.webhook_url.as_ref()?, self.webhook_secret.as_ref()?);
        Endpoint::parse(
            SHARED_FIELDS,
            url,
            secret,
            Some(self.webhook_events.as_slice()),
        )
        .ok()
    }

    /// Whether any endpoint is configured (the delivery worker runs only then).
    pub fn webhooks_enabled(&self) -> bool {
        !self.webhooks.is_empty() || self.webhook_url.is_some()
    }

    /// The shared endpoint's settings go together and must be valid.
    pub(super) fn validate_webhooks(&self) -> Result<(), ConfigError> {
        match (&self.webhook_url, &self.webhook_secret) {
            (Some(url), Some(secret)) => {
                Endpoint::parse(SHARED_FIELDS, url, secret, Some(&self.webhook_events))?;
            }
            (Some(_), None) => {
                return Err(ConfigError::Invalid {
                    field: "webhook_secret",
                    reason:
                        "--webhook-url needs --webhook-secret whsec_… (VIDFORGE_WEBHOOK_SECRET)"
                            .into(),
                });
            }
            (None, Some(_)) => {
                return Err(ConfigError::Invalid {
                    field: "webhook_url",
                    reason: "--webhook-secret is set but --webhook-url is not".into(),
                });
            }
            (None, None) => {}
        }
        let bad = |field, reason: &str| {
            Err(ConfigError::Invalid {
                field,
                reason: reason.to_string(),
            })
        };
        if self.webhook_timeout.is_zero() || self.webhook_timeout.as_secs() > 60 {
            return bad("webhook_timeout", "must be between 1ms and 60s");
        }
        if self.webhook_max_in_flight == 0 || self.webhook_max_in_flight > 1024 {
            return bad("webhook_max_in_flight", "must be between 1 and 1024");
        }
        if self.webhook_retry_initial.is_zero() {
            return bad("webhook_retry_initial", "must be positive");
        }
        if self.webhook_retry_for < self.webhook_retry_initial {
            return bad(
                "webhook_retry_for",
                "must be at least webhook_retry_initial",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn endpoints_are_checked() {
        let ok = Endpoint::parse(("f", "g"), "https://hooks.example/x?y=1", SECRET, None).unwrap();
        assert_eq!(ok.events, EventKind::ALL.to_vec());
        let some = ["succeeded".to_string(), "render.failed".to_string()];
        let e = Endpoint::parse(("f", "g"), "http://127.0.0.1:9/h", SECRET, Some(&some)).unwrap();
        assert!(e.wants(EventKind::Failed) && !e.wants(EventKind::InputRequired));
        for (url, secret) in [
            ("ftp://x/y", SECRET),
            ("https://", SECRET),
            ("https://user:pw@x/y", SECRET),
            ("https://x/y#frag", SECRET),
            ("https://x/y", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            ("https://x/y", "whsec_not base64!"),
            ("https://x/y", "whsec_c2hvcnQ="),
        ] {
            assert!(
                Endpoint::parse(("f", "g"), url, secret, None).is_err(),
                "{url} {secret}"
            );
        }
        // A bad secret is named as the secret's setting, a bad URL as the URL's.
        let field = |url, secret| match Endpoint::parse(("f", "g"), url, secret, None) {
            Err(ConfigError::Invalid { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field("ftp://x/y", SECRET), "f");
        assert_eq!(field("https://x/y", "whsec_c2hvcnQ="), "g");
        let unknown = ["render.started".to_string()];
        assert!(Endpoint::parse(("f", "g"), "https://x/y", SECRET, Some(&unknown)).is_err());
        assert!(
            !format!("{ok:?}").contains("MfKQ"),
            "Debug hides the secret"
        );
    }
}
