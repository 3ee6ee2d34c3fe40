//! Range checks of the resolved configuration.

use std::time::Duration;

use super::{Config, ConfigError, MAX_WATERMARK_SIDE, MIN_CONNECTION_TIMEOUT};
use crate::engine::{SegmentPlanOptions, SourceLimits};

/// The refusal of `field`.
fn bad(field: &'static str, reason: &str) -> Result<(), ConfigError> {
    Err(ConfigError::Invalid {
        field,
        reason: reason.to_string(),
    })
}

impl Config {
    /// Checks ranges that would make the service misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_webhooks()?;
        if self.render_slots == 0 || self.render_slots > 64 {
            return bad("render_slots", "must be between 1 and 64");
        }
        if self.oauth_max_token_lifetime.is_zero() {
            return bad("oauth_max_token_lifetime", "must be positive");
        }
        if self.render_nice > 19 {
            return bad("render_nice", "must be between 0 and 19");
        }
        if self.per_principal_concurrent == 0 {
            return bad("per_principal_concurrent", "must be at least 1");
        }
        if self.max_render_crashes == 0 {
            return bad("max_render_crashes", "must be at least 1");
        }
        if self.segment_attempts == 0 {
            return bad("segment_attempts", "must be at least 1");
        }
        if self.segment_plan().check().is_err() {
            let min = SegmentPlanOptions::MIN_TARGET_SECONDS;
            return bad("segment_seconds", &format!("must be at least {min}s"));
        }
        if self.max_upload_bytes == 0 {
            return bad("max_upload_bytes", "must be positive");
        }
        let engine = SourceLimits::ENGINE;
        if self.max_source_side == 0 || self.max_source_side > engine.max_side {
            return bad(
                "max_source_side",
                &format!("must be between 1 and {}", engine.max_side),
            );
        }
        if self.max_source_pixels == 0 || self.max_source_pixels > engine.max_pixels {
            return bad(
                "max_source_pixels",
                &format!("must be between 1 and {}", engine.max_pixels),
            );
        }
        if self.max_watermark_side == 0 || self.max_watermark_side > MAX_WATERMARK_SIDE {
            return bad(
                "max_watermark_side",
                &format!("must be between 1 and {MAX_WATERMARK_SIDE}"),
            );
        }
        if self.max_source_seconds == 0 {
            return bad("max_source_seconds", "must be at least 1");
        }
        if self.render_pixel_rate == 0 {
            return bad("render_pixel_rate", "must be at least 1");
        }
        if self.max_render_seconds == 0 {
            return bad("max_render_seconds", "must be at least 1");
        }
        if self.render_budget_window < Duration::from_secs(1) {
            return bad("render_budget_window", "must be at least 1s");
        }
        if self.max_concurrent_probes == 0 {
            return bad("max_concurrent_probes", "must be at least 1");
        }
        self.validate_timeouts()?;
        self.validate_access()
    }

    /// Lifetimes, intervals and connection limits.
    fn validate_timeouts(&self) -> Result<(), ConfigError> {
        if self.approval_timeout.is_zero() {
            return bad("approval_timeout", "must be positive");
        }
        if self.asset_ttl.is_zero() {
            return bad("asset_ttl", "must be positive");
        }
        if self.result_ttl < self.task_ttl {
            return bad("result_ttl", "must not be shorter than task_ttl");
        }
        if self.sweep_interval.is_zero() || self.tick_interval.is_zero() {
            return bad("sweep_interval", "intervals must be positive");
        }
        if self.auth_failure_interval < Duration::from_millis(1)
            || self.auth_failure_interval > Duration::from_secs(3600)
        {
            return bad("auth_failure_interval", "must be between 1ms and 1h");
        }
        if self.header_read_timeout < MIN_CONNECTION_TIMEOUT {
            return bad("header_read_timeout", "must be at least 100ms");
        }
        if self.idle_timeout < Duration::from_secs(1) {
            return bad("idle_timeout", "must be at least 1s");
        }
        if self.body_idle_timeout < MIN_CONNECTION_TIMEOUT {
            return bad("body_idle_timeout", "must be at least 100ms");
        }
        if self.max_connections == 0 {
            return bad("max_connections", "must be at least 1");
        }
        if let Some(n) = self.max_concurrent_uploads
            && (n == 0 || n > self.max_connections / 2)
        {
            return bad(
                "max_concurrent_uploads",
                &format!(
                    "must be between 1 and half of max_connections ({}), so that uploads alone \
                     cannot take every connection",
                    self.max_connections / 2
                ),
            );
        }
        if self.max_uploads_per_peer == 0 {
            return bad("max_uploads_per_peer", "must be at least 1");
        }
        if self.upload_rate_grace < MIN_CONNECTION_TIMEOUT {
            return bad("upload_rate_grace", "must be at least 100ms");
        }
        if self.lease_ttl < Duration::from_secs(1) {
            return bad("lease_ttl", "must be at least 1s");
        }
        for issuer in &self.oauth_issuers {
            if let Err(why) = check_issuer(issuer) {
                return bad("oauth_issuers", &format!("{issuer}: {why}"));
            }
        }
        if self.oauth_browser_client_secret.is_some() && self.oauth_browser_client_id.is_none() {
            return bad(
                "oauth_browser_client_secret",
                "needs oauth_browser_client_id",
            );
        }
        if self.oauth_browser_client_id.is_some() && self.oauth_issuers.is_empty() {
            return bad("oauth_browser_client_id", "needs an oauth_issuers entry");
        }
        if self.stream_max_lifetime < Duration::from_secs(1) {
            return bad("stream_max_lifetime", "must be at least 1s");
        }
        if self.legacy_session_idle_timeout < Duration::from_secs(1) {
            return bad("legacy_session_idle_timeout", "must be at least 1s");
        }
        if self.max_legacy_sessions == 0 {
            return bad("max_legacy_sessions", "must be at least 1");
        }
        if self.max_legacy_sessions_per_principal == 0 {
            return bad("max_legacy_sessions_per_principal", "must be at least 1");
        }
        if self.session_idle_timeout < Duration::from_secs(1) {
            return bad("session_idle_timeout", "must be at least 1s");
        }
        if self.session_max_age < self.session_idle_timeout {
            return bad(
                "session_max_age",
                "must not be shorter than session_idle_timeout",
            );
        }
        Ok(())
    }

    /// Node name, tokens and links.
    fn validate_access(&self) -> Result<(), ConfigError> {
        if self
            .node_id
            .as_ref()
            .is_some_and(|n| n.trim().is_empty() || n.len() > 200)
        {
            return bad("node_id", "must be 1 to 200 characters");
        }
        for (token, principal) in &self.tokens {
            if token.len() < 8 {
                return bad("tokens", "every token needs at least 8 characters");
            }
            if principal.is_empty() || principal.contains('\0') {
                return bad("tokens", "principal names must be non-empty");
            }
            if principal.contains('#') {
                return bad(
                    "tokens",
                    "principal names must not contain '#' (OAuth principals are ISSUER#SUBJECT)",
                );
            }
        }
        if let Some(url) = &self.public_base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return bad("public_base_url", "must start with http:// or https://");
        }
        Ok(())
    }
}

/// An issuer identifier (RFC 8414 §2): an `https` URL without query or fragment; plain `http`
/// only on a loopback host (tests, a laptop).
fn check_issuer(issuer: &str) -> Result<(), &'static str> {
    let rest = if let Some(rest) = issuer.strip_prefix("https://") {
        rest
    } else if let Some(rest) = issuer.strip_prefix("http://") {
        let host = rest.split(['/', ':']).next().unwrap_or_default();
        let loopback = host == "localhost" || host == "127.0.0.1" || rest.starts_with("[::1]");
        if !loopback {
            return Err("must be an https URL (plain http only on a loopback host)");
        }
        rest
    } else {
        return Err("must be an https URL");
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err("has no host");
    }
    if issuer.contains(['?', '#']) {
        return Err("must have no query or fragment");
    }
    Ok(())
}

#[cfg(test)]
mod issuer_tests {
    use super::check_issuer;

    #[test]
    fn issuers_are_https_or_loopback_http() {
        assert!(check_issuer("https://as.example.com").is_ok());
        assert!(check_issuer("https://as.example.com/tenant").is_ok());
        assert!(check_issuer("http://127.0.0.1:9000").is_ok());
        assert!(check_issuer("http://localhost:9000/x").is_ok());
        assert!(check_issuer("http://[::1]:9000").is_ok());
        assert!(check_issuer("http://as.example.com").is_err());
        assert!(check_issuer("http://127.0.0.1.evil.com").is_err());
        assert!(check_issuer("https://as.example.com/?a=b").is_err());
        assert!(check_issuer("https://as.example.com#x").is_err());
        assert!(check_issuer("ftp://as").is_err());
        assert!(check_issuer("https://").is_err());
    }
}
