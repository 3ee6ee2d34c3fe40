//! What a credential may do: the OAuth scopes vidforge defines, and which of them each request
//! needs (one table for every route; `/mcp` decides by its JSON-RPC method in `vidforge-mcp`).
//!
//! | scope | grants |
//! |---|---|
//! | `vidforge:render` | upload, create, approve, cancel; read its own renders and assets |
//! | `vidforge:read` | read its own renders, results and previews only |
//! | `vidforge:admin` | every principal's renders on the dashboard, `/metrics` from anywhere |
//!
//! A static bearer token (the `tokens` table) holds `render` and `read`, and `admin` when its
//! principal is in `admins`: what it could do before scopes existed.

use axum::http::Method;

pub const RENDER: &str = "vidforge:render";
pub const READ: &str = "vidforge:read";
pub const ADMIN: &str = "vidforge:admin";
/// Every scope vidforge defines (`scopes_supported` in its protected resource metadata).
pub const ALL: [&str; 3] = [RENDER, READ, ADMIN];

/// The scopes a credential holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scopes {
    pub render: bool,
    pub read: bool,
    pub admin: bool,
}

impl Scopes {
    /// What a static token (or the anonymous principal of a server without tokens) may do.
    pub fn static_token(admin: bool) -> Scopes {
        Scopes {
            render: true,
            read: true,
            admin,
        }
    }

    /// The scopes named in a space-separated OAuth `scope` value; others are ignored.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Scopes {
        let mut s = Scopes::default();
        for name in names {
            match name {
                RENDER => s.render = true,
                READ => s.read = true,
                ADMIN => s.admin = true,
                _ => {}
            }
        }
        s
    }

    /// Whether these scopes allow an operation that needs `need`.
    pub fn allow(&self, need: Need) -> bool {
        match need {
            Need::Render => self.render,
            Need::Read => self.read || self.render,
            Need::Admin => self.admin,
        }
    }
}

/// What an operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Changes something: `vidforge:render`.
    Render,
    /// Reads the caller's own things: `vidforge:read` or `vidforge:render`.
    Read,
    /// Everyone's things: `vidforge:admin`.
    Admin,
}

impl Need {
    /// The scopes to ask for (the `scope` of a challenge): the least that allows it.
    pub fn scopes(self) -> &'static str {
        match self {
            Need::Render => RENDER,
            Need::Read => READ,
            Need::Admin => ADMIN,
        }
    }
}

/// What a request outside `/mcp` needs: anything that changes state (uploads, asset deletion,
/// the approval form, sign-out) needs `render`; reading needs `read`. `/mcp` needs `read`
/// here; its wire layer (in `vidforge-mcp`) asks for `render` by the JSON-RPC method.
pub fn for_route(method: &Method, path: &str) -> Need {
    if path == "/mcp" {
        return Need::Read;
    }
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => Need::Read,
        _ => Need::Render,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_needs() {
        let read_only = Scopes::parse("openid vidforge:read".split(' '));
        assert!(read_only.allow(Need::Read));
        assert!(!read_only.allow(Need::Render));
        assert!(!read_only.allow(Need::Admin));
        let render = Scopes::parse([RENDER]);
        assert!(render.allow(Need::Read) && render.allow(Need::Render));
        assert!(!render.allow(Need::Admin));
        assert!(Scopes::parse([ADMIN]).allow(Need::Admin));
        assert_eq!(Scopes::parse(["vidforge:everything"]), Scopes::default());
        assert_eq!(for_route(&Method::POST, "/assets"), Need::Render);
        assert_eq!(for_route(&Method::DELETE, "/assets/a_1"), Need::Render);
        assert_eq!(for_route(&Method::GET, "/videos/x/final.mp4"), Need::Read);
        assert_eq!(for_route(&Method::POST, "/mcp"), Need::Read);
    }
}
