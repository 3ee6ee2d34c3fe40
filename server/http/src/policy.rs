//! The request policy every route but `/healthz` answers to: `Host` (DNS-rebinding
//! protection) and `Origin` (cross-site requests from browsers), one decision for `/mcp`, the
//! HTTP routes and any route added later (`vidforge::app::router_with` wraps them all in
//! [`enforce`]).
//!
//! - **Host**: the loopback names (`localhost`, `127.0.0.1`, `::1`), the listen address's IP
//!   and `allowed_hosts`. An entry without a port matches any port.
//! - **Origin**: `http://127.0.0.1:PORT`, `http://localhost:PORT`, `http://[::1]:PORT`, the
//!   origin of `public_base_url` (the server's own pages) and `allowed_origins`. A request
//!   without `Origin` (every non-browser client) passes; a present one must match by scheme,
//!   host and port (`:*` matches any port, an entry without a port matches any port, a
//!   missing port means the scheme's default).
//!
//! A refusal is `403` with the §6 envelope, code `request_forbidden`, `details.field` naming
//! the header. The matching follows rmcp 3.11's Streamable HTTP checks rule for rule (rmcp's
//! own checks are switched off in `mcp::router` so `/mcp` is decided here too).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::envelope::Envelope;
use vidforge_core::catalog::ErrorCode;
use vidforge_core::config::Config;

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The header at fault: `Host` or `Origin`.
    pub field: &'static str,
    pub reason: String,
}

/// The allowed `Host` and `Origin` values of one deployment.
#[derive(Clone, Debug)]
pub struct RequestPolicy {
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl RequestPolicy {
    /// The one place the allowed lists are built from the configuration.
    pub fn from_config(config: &Config) -> RequestPolicy {
        let port = config.listen.port();
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        hosts.push(config.listen.ip().to_string());
        hosts.extend(config.allowed_hosts.iter().cloned());
        let mut origins: Vec<String> = vec![
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
            format!("http://[::1]:{port}"),
        ];
        origins.extend(config.allowed_origins.iter().cloned());
        // The pages' own forms, when they are served at the public base URL.
        if let Some(url) = &config.public_base_url {
            let after_scheme = url.find("://").map_or(0, |i| i + 3);
            let end = url[after_scheme..]
                .find('/')
                .map_or(url.len(), |i| after_scheme + i);
            origins.push(url[..end].to_string());
        }
        RequestPolicy { hosts, origins }
    }

    /// Allowed `Host` values.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Allowed `Origin` values.
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// Decides one request from its URI (for HTTP/2's `:authority`) and headers.
    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_host(uri, headers)?;
        self.check_origin(headers)
    }

    fn check_host(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        let refuse = |reason: &str| Refusal {
            field: "Host",
            reason: reason.into(),
        };
        let host = match headers.get(header::HOST) {
            Some(value) => {
                let text = value
                    .to_str()
                    .map_err(|_| refuse("the Host header is not valid text"))?;
                let authority = http::uri::Authority::try_from(text)
                    .map_err(|_| refuse("the Host header is malformed"))?;
                Authority::new(authority.host(), authority.port_u16())
            }
            None => {
                let authority = uri
                    .authority()
                    .ok_or_else(|| refuse("the request names no Host"))?;
                Authority::new(authority.host(), authority.port_u16())
            }
        };
        let allowed = self
            .hosts
            .iter()
            .filter_map(|h| Authority::parse_allowed(h))
            .any(|a| a.host == host.host && a.port.is_none_or(|p| host.port == Some(p)));
        if allowed {
            Ok(())
        } else {
            Err(refuse(
                "this Host is not one the server answers to (DNS-rebinding protection); the \
                 operator can add it to allowed_hosts",
            ))
        }
    }

    fn check_origin(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let refuse = |reason: &str| Refusal {
            field: "Origin",
            reason: reason.into(),
        };
        let Some(value) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let text = value
            .to_str()
            .map_err(|_| refuse("the Origin header is not valid text"))?;
        let origin = Origin::parse(text).ok_or_else(|| refuse("the Origin header is malformed"))?;
        if self
            .origins
            .iter()
            .filter_map(|o| AllowedOrigin::parse(o))
            .any(|a| a.matches(&origin))
        {
            Ok(())
        } else {
            Err(refuse(
                "requests from this Origin are not allowed (cross-site protection); the operator \
                 can add it to allowed_origins",
            ))
        }
    }
}

/// The `403` answer for a refusal.
pub fn forbidden(refusal: &Refusal) -> Response {
    let env = Envelope::new(
        ErrorCode::RequestForbidden,
        format!("Forbidden: the {} header is not allowed.", refusal.field),
    )
    .field(refusal.field)
    .reason(refusal.reason.clone())
    .for_stranger();
    crate::envelope::error_response(StatusCode::FORBIDDEN, &env)
}

/// Middleware: [`RequestPolicy::check`], or `403` with the envelope.
pub async fn enforce(
    State(policy): State<Arc<RequestPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    match policy.check(request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::warn!(
                path = %request.uri().path(),
                field = refusal.field,
                "refused a request with a disallowed header"
            );
            forbidden(&refusal)
        }
    }
}

/// A host and optional port, the host lowercased and without IPv6 brackets.
#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    fn new(host: &str, port: Option<u16>) -> Authority {
        Authority {
            host: normalize_host(host),
            port,
        }
    }

    /// An `allowed_hosts` entry: `host` or `host:port` (a bare IPv6 address is a host).
    fn parse_allowed(entry: &str) -> Option<Authority> {
        let entry = entry.trim();
        if entry.is_empty() {
            return None;
        }
        Some(match http::uri::Authority::try_from(entry) {
            Ok(a) => Authority::new(a.host(), a.port_u16()),
            Err(_) => Authority::new(entry, None),
        })
    }
}

fn normalize_host(host: &str) -> String {
    host.trim_matches('[')
        .trim_matches(']')
        .to_ascii_lowercase()
}

/// A request's `Origin`: `null`, or scheme, host and optional port.
#[derive(Debug, PartialEq, Eq)]
enum Origin {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

impl Origin {
    fn parse(value: &str) -> Option<Origin> {
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        if value.eq_ignore_ascii_case("null") {
            return Some(Origin::Null);
        }
        let uri = Uri::try_from(value).ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let authority = uri.authority()?;
        Some(Origin::Tuple {
            scheme,
            host: normalize_host(authority.host()),
            port: authority.port_u16(),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AllowedPort {
    /// `:*`
    Any,
    /// No port in the entry: any port.
    Unspecified,
    Exact(u16),
}

/// An `allowed_origins` entry.
#[derive(Debug, PartialEq, Eq)]
enum AllowedOrigin {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: AllowedPort,
    },
}

impl AllowedOrigin {
    fn parse(entry: &str) -> Option<AllowedOrigin> {
        let entry = entry.trim();
        if let Some(base) = entry.strip_suffix(":*") {
            let Origin::Tuple {
                scheme,
                host,
                port: None,
            } = Origin::parse(base)?
            else {
                return None;
            };
            return Some(AllowedOrigin::Tuple {
                scheme,
                host,
                port: AllowedPort::Any,
            });
        }
        Some(match Origin::parse(entry)? {
            Origin::Null => AllowedOrigin::Null,
            Origin::Tuple { scheme, host, port } => AllowedOrigin::Tuple {
                scheme,
                host,
                port: port.map_or(AllowedPort::Unspecified, AllowedPort::Exact),
            },
        })
    }

    fn matches(&self, origin: &Origin) -> bool {
        match (self, origin) {
            (AllowedOrigin::Null, Origin::Null) => true,
            (
                AllowedOrigin::Tuple { scheme, host, port },
                Origin::Tuple {
                    scheme: o_scheme,
                    host: o_host,
                    port: o_port,
                },
            ) => {
                scheme == o_scheme
                    && host == o_host
                    && match port {
                        AllowedPort::Any | AllowedPort::Unspecified => true,
                        // An origin without a port has its scheme's default (RFC 6454 §4).
                        AllowedPort::Exact(p) => {
                            o_port.or_else(|| default_port(o_scheme)) == Some(*p)
                        }
                    }
            }
            _ => false,
        }
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn policy(allowed_hosts: &[&str], allowed_origins: &[&str]) -> RequestPolicy {
        let mut c = Config {
            listen: "127.0.0.1:8080".parse().unwrap(),
            ..Config::default()
        };
        c.allowed_hosts = allowed_hosts.iter().map(|s| s.to_string()).collect();
        c.allowed_origins = allowed_origins.iter().map(|s| s.to_string()).collect();
        RequestPolicy::from_config(&c)
    }

    fn decide(
        p: &RequestPolicy,
        host: Option<&str>,
        origin: Option<&str>,
    ) -> Result<(), &'static str> {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
        }
        if let Some(v) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(v).unwrap());
        }
        p.check(&Uri::from_static("/assets"), &h)
            .map_err(|r| r.field)
    }

    #[test]
    fn hosts() {
        let p = policy(&["renders.example.com", "api.example.com:8443"], &[]);
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST:1",
            "127.0.0.1:8080",
            "[::1]:8080",
            "renders.example.com",
            "renders.example.com:443",
            "api.example.com:8443",
        ] {
            assert_eq!(decide(&p, Some(ok), None), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example.com",
            "evil.example.com:8080",
            "api.example.com:8444",
            "api.example.com",
            "127.0.0.2:8080",
            "localhost.evil.example.com",
            "a b",
        ] {
            assert_eq!(decide(&p, Some(bad), None), Err("Host"), "{bad}");
        }
        // No Host header and no authority in the URI: refused.
        assert_eq!(decide(&p, None, None), Err("Host"));
        let mut h = HeaderMap::new();
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://localhost:8080"),
        );
        let uri: Uri = "http://localhost:8080/mcp".parse().unwrap();
        assert_eq!(p.check(&uri, &h), Ok(()));
    }

    #[test]
    fn origins() {
        let p = policy(
            &[],
            &[
                "http://localhost:3000",
                "https://app.example.com",
                "https://any.example.com:*",
            ],
        );
        let host = Some("127.0.0.1:8080");
        for ok in [
            None,
            Some("http://127.0.0.1:8080"),
            Some("http://localhost:8080"),
            Some("http://[::1]:8080"),
            Some("HTTP://LOCALHOST:3000"),
            Some("https://app.example.com"),
            Some("https://app.example.com:8443"),
            Some("https://any.example.com:1234"),
        ] {
            assert_eq!(decide(&p, host, ok), Ok(()), "{ok:?}");
        }
        for bad in [
            "http://evil.example.com",
            "http://localhost:3001",
            "http://localhost",
            "https://localhost:3000",
            "http://127.0.0.1:8081",
            "null",
            "not an origin",
            "",
        ] {
            assert_eq!(decide(&p, host, Some(bad)), Err("Origin"), "{bad}");
        }
        // An explicit default port matches an origin that omits it.
        let p = policy(&[], &["https://app.example.com:443", "null"]);
        assert_eq!(decide(&p, host, Some("https://app.example.com")), Ok(()));
        assert_eq!(decide(&p, host, Some("null")), Ok(()));
        // The Host is checked first.
        assert_eq!(
            decide(
                &p,
                Some("evil.example.com"),
                Some("http://evil.example.com")
            ),
            Err("Host")
        );
    }

    #[test]
    fn refusals_are_403_envelopes() {
        let r = forbidden(&Refusal {
            field: "Origin",
            reason: "x".into(),
        });
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
}
