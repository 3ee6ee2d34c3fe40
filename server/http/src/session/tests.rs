//! Sessions and CSRF tokens: sign-in, verification, renewal, sign-out, OAuth sessions.

use super::*;
use axum::http::{HeaderValue, header};
use std::sync::Arc;
use vidforge_core::clock::OffsetClock;

const LIMITS: SessionLimits = SessionLimits {
    idle_timeout: Duration::from_secs(2 * 3600),
    max_age: Duration::from_secs(12 * 3600),
};

struct Fixture {
    _dir: tempfile::TempDir,
    clock: Arc<OffsetClock>,
    s: Sessions,
}

fn sessions() -> Fixture {
    let mut c = Config::default();
    c.tokens.insert("alice-token-1".into(), "alice".into());
    c.tokens.insert("alice-token-2".into(), "alice".into());
    c.tokens.insert("bob-token-22".into(), "bob".into());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let clock = Arc::new(OffsetClock::new());
    let s = Sessions::new(Auth::from_config(&c), store, clock.clone(), LIMITS, false);
    Fixture {
        _dir: dir,
        clock,
        s,
    }
}

fn with_cookie(set_cookie: &str) -> HeaderMap {
    let pair = set_cookie.split(';').next().unwrap();
    let mut h = HeaderMap::new();
    h.insert(header::COOKIE, HeaderValue::from_str(pair).unwrap());
    h
}

fn signed_in(s: &Sessions, token: &str) -> String {
    s.sign_in(token).unwrap().unwrap().1
}

#[test]
fn sign_in_verify_and_csrf() {
    let Fixture { s, .. } = sessions();
    assert!(s.sign_in("nope").unwrap().is_none());
    let (p, set) = s.sign_in("alice-token-1").unwrap().unwrap();
    assert_eq!(p.as_str(), "alice");
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"));
    assert!(set.contains("Max-Age=7200"), "the idle timeout: {set}");
    assert!(!set.contains("alice-token-1"));
    let session = s.session(&with_cookie(&set)).unwrap();
    assert_eq!(session.principal.as_str(), "alice");
    assert!(session.renewal().is_none(), "just issued");
    let csrf = s.csrf_token(&session);
    assert!(s.csrf_ok(&session, Some(&csrf)));
    assert!(!s.csrf_ok(&session, None));
    assert!(!s.csrf_ok(&session, Some("00")));
    // Bob's token does not validate for Alice's session.
    let bob = signed_in(&s, "bob-token-22");
    let bob_session = s.session(&with_cookie(&bob)).unwrap();
    assert!(!s.csrf_ok(&bob_session, Some(&csrf)));
    // A tampered principal fails; so does a cookie of the old, epoch-less format.
    let value = set.split(';').next().unwrap();
    let forged = value.replace(&hex(b"alice"), &hex(b"bob"));
    assert!(s.session(&with_cookie(&forged)).is_none());
    let old = value.split_once('.').unwrap().1;
    assert!(s.session(&with_cookie(old)).is_none());
    assert!(s.session(&HeaderMap::new()).is_none());
}

#[test]
fn sign_out_ends_every_session_of_the_principal_for_good() {
    let Fixture { s, _dir, .. } = sessions();
    let a1 = signed_in(&s, "alice-token-1");
    let a2 = signed_in(&s, "alice-token-2");
    let bob = signed_in(&s, "bob-token-22");
    let session = s.session(&with_cookie(&a1)).unwrap();
    let csrf = s.csrf_token(&session);
    s.sign_out(&session).unwrap();
    assert!(s.session(&with_cookie(&a1)).is_none());
    assert!(
        s.session(&with_cookie(&a2)).is_none(),
        "every browser of alice"
    );
    assert!(
        s.session(&with_cookie(&bob)).is_some(),
        "bob is not signed out"
    );
    // Signing in again works, and the new cookie is not the old one.
    let again = signed_in(&s, "alice-token-1");
    let new_session = s.session(&with_cookie(&again)).unwrap();
    assert!(
        !s.csrf_ok(&new_session, Some(&csrf)),
        "the old session's forms are dead too"
    );
    // A node that opens the store afresh (a restart) refuses the old cookie too.
    let store = s.store.clone();
    drop(s);
    drop(store);
    let store = Store::open(_dir.path()).unwrap();
    let mut c = Config::default();
    c.tokens.insert("alice-token-1".into(), "alice".into());
    let s2 = Sessions::new(
        Auth::from_config(&c),
        store,
        Arc::new(OffsetClock::new()),
        LIMITS,
        false,
    );
    assert!(s2.session(&with_cookie(&a1)).is_none());
    assert!(s2.session(&with_cookie(&again)).is_some());
}

#[test]
fn idle_sessions_end_used_ones_slide_until_the_cap() {
    let Fixture { s, clock, .. } = sessions();
    let mut cookie = signed_in(&s, "alice-token-1");
    let first = cookie.clone();
    let csrf = s.csrf_token(&s.session(&with_cookie(&cookie)).unwrap());
    // Used every 40 minutes: re-issued each time (a quarter of the idle timeout passed),
    // its CSRF token still good; the first cookie is refused once 2 h passed unused.
    for step in 1..=17 {
        clock.advance(Duration::from_secs(40 * 60));
        let h = with_cookie(&cookie);
        let session = match s.session(&h) {
            Some(session) => session,
            None => {
                // 17 × 40 min = 11 h 20 min < 12 h: only the cap may end it, and not yet.
                panic!("step {step}: a used session ended early");
            }
        };
        assert!(s.renewal_due(&h));
        assert!(s.csrf_ok(&session, Some(&csrf)), "step {step}");
        cookie = session.renewal().expect("re-issued").to_string();
        if step == 3 {
            assert!(s.session(&with_cookie(&first)).is_none(), "idle 2 h");
        }
    }
    // The last re-issue says what is left before the cap (40 min), not the idle timeout.
    assert!(cookie.contains("Max-Age=2400"), "{cookie}");
    clock.advance(Duration::from_secs(40 * 60));
    assert!(
        s.session(&with_cookie(&cookie)).is_none(),
        "12 h after sign-in it is over, however recently used"
    );
    // Unused for the idle timeout exactly: over.
    let fresh = signed_in(&s, "bob-token-22");
    clock.advance(LIMITS.idle_timeout);
    assert!(s.session(&with_cookie(&fresh)).is_none());
}

#[test]
fn oauth_sessions_carry_their_scopes_under_the_store_secret() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::default();
    c.tokens.insert("alice-token-1".into(), "alice".into());
    c.oauth_issuers = vec!["https://as.example.com".into()];
    let make = |store: Store, c: &Config| {
        Sessions::new(
            Auth::from_config(c),
            store,
            Arc::new(OffsetClock::new()),
            LIMITS,
            false,
        )
    };
    let s = make(Store::open(dir.path()).unwrap(), &c);
    let who = "https://as.example.com#carol";
    let verified = Verified {
        principal: who.into(),
        scopes: Scopes::parse([crate::scope::RENDER, crate::scope::READ]),
    };
    let set = s.sign_in_oauth(&verified).unwrap();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    assert!(set.contains("Max-Age=7200"), "{set}");
    let session = s.session(&with_cookie(&set)).unwrap();
    assert_eq!(session.principal.as_str(), who);
    assert!(session.by_oauth() && session.scopes == verified.scopes);
    assert!(!session.scopes.admin);
    let csrf = s.csrf_token(&session);
    assert!(s.csrf_ok(&session, Some(&csrf)));
    // The scopes are under the MAC: claiming admin fails; so does another subject, and a
    // static-token session of the same name is no OAuth one.
    let value = set.split(';').next().unwrap();
    let admin = value.replace(".3.", ".7.");
    assert_ne!(admin, value);
    assert!(s.session(&with_cookie(&admin)).is_none());
    let other = value.replace(&hex(who.as_bytes()), &hex(b"https://as.example.com#dave"));
    assert!(s.session(&with_cookie(&other)).is_none());
    // Every node sharing the store (a restart here) has the same secret.
    drop(s);
    let s = make(Store::open(dir.path()).unwrap(), &c);
    let session = s
        .session(&with_cookie(&set))
        .expect("the secret is durable");
    assert!(s.csrf_ok(&session, Some(&csrf)));
    // An issuer no longer trusted: its sessions end.
    let mut untrusted = c.clone();
    untrusted.oauth_issuers = vec!["https://other.example.com".into()];
    let store = s.store.clone();
    let s2 = make(store, &untrusted);
    assert!(s2.session(&with_cookie(&set)).is_none());
    // Sign-out ends it for good.
    s.sign_out(&session).unwrap();
    assert!(s.session(&with_cookie(&set)).is_none());
    let again = s.sign_in_oauth(&verified).unwrap();
    assert!(s.session(&with_cookie(&again)).is_some());
    // The sign-in flow's MAC is keyed by the same secret, per purpose.
    let a = s.server_mac("oauth-flow", &[b"x"]).unwrap();
    assert_eq!(a, s2.server_mac("oauth-flow", &[b"x"]).unwrap());
    assert_ne!(a, s.server_mac("other", &[b"x"]).unwrap());
}

#[test]
fn anonymous_mode_needs_no_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let s = Sessions::new(
        Auth::from_config(&Config::default()),
        Store::open(dir.path()).unwrap(),
        Arc::new(OffsetClock::new()),
        LIMITS,
        true,
    );
    let session = s.session(&HeaderMap::new()).unwrap();
    assert_eq!(session.principal.as_str(), ANONYMOUS_PRINCIPAL);
    let csrf = s.csrf_token(&session);
    assert!(s.csrf_ok(&session, Some(&csrf)));
    assert!(s.sign_out_cookie().contains("Secure"));
    s.sign_out(&session).unwrap();
}
