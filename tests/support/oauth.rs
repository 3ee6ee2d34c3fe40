//! A real OAuth 2.1 authorization server for the end-to-end tests: `oidc-provider` (npm,
//! OpenID-certified; nobody here wrote it), configured by `tests/oauth/authorization-server.mjs`
//! and run on the project-local Node 22 (the npm `node` package in `tests/oauth/`'s lockfile) on
//! a free loopback port. It issues RS256 JWT access tokens (RFC 9068, `typ: at+jwt`) for a
//! resource indicator (RFC 8707), by the client-credentials grant (`sub` = the client id) or the
//! authorization-code flow with PKCE (automatic sign-in as the `login_hint` account, `sub` = that
//! account), and serves open dynamic client registration at `/reg`.
//!
//! The Node dependencies are installed from the lockfile (`npm ci`) when missing or stale; no
//! npm fails the test, never skips it.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Confidential client of the client-credentials grant; its tokens have `sub` = this id.
pub const CLIENT_ID: &str = "vidforge-tests";
pub const CLIENT_SECRET: &str = "vidforge-tests-secret";
/// A second client-credentials client: another subject.
pub const CLIENT2_ID: &str = "vidforge-tests-2";
pub const CLIENT2_SECRET: &str = "vidforge-tests-2-secret";
/// vidforge's browser sign-in client (authorization code + PKCE, `client_secret_basic`),
/// registered with the redirect URIs given to [`AuthServer::start`] (absent when none).
pub const BROWSER_CLIENT_ID: &str = "vidforge-browser";
pub const BROWSER_CLIENT_SECRET: &str = "vidforge-browser-secret";

pub const SCOPE_RENDER: &str = "vidforge:render";
pub const SCOPE_READ: &str = "vidforge:read";
pub const SCOPE_ADMIN: &str = "vidforge:admin";

/// Access-token lifetime the server is started with (its minimum).
pub const TOKEN_TTL_SECS: u64 = 300;

/// How long a start may take before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Serializes `npm ci` between the tests of one test binary (they run on threads).
static INSTALL: Mutex<()> = Mutex::new(());

/// A running authorization server, killed on drop. Its issuer is `http://127.0.0.1:<port>`.
pub struct AuthServer {
    port: u16,
    resource: String,
    redirect_uris: Vec<String>,
    dir: tempfile::TempDir,
    kid: String,
    child: Option<Child>,
}

fn oauth_dir() -> PathBuf {
    super::repo_root().join("tests").join("oauth")
}

/// `npm ci` in tests/oauth when node_modules is missing or older than the lockfile (as
/// scripts/run-clients.sh does for clients/ts); returns the project-local Node 22.
fn ensure_deps() -> PathBuf {
    let dir = oauth_dir();
    let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let lock = dir.join("package-lock.json");
    let installed = dir.join("node_modules").join(".package-lock.json");
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    let stale = match (modified(&installed), modified(&lock)) {
        (Some(installed), Some(lock)) => lock > installed,
        _ => true,
    };
    if stale {
        let started = Instant::now();
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "the OAuth tests need npm (Node.js) to install the authorization server \
                     from tests/oauth/package-lock.json: running `npm ci` failed: {e}"
                )
            });
        assert!(
            out.status.success(),
            "`npm ci` in {} failed ({}):\n{}{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "oauth: npm ci in {} took {:.1} s",
            dir.display(),
            started.elapsed().as_secs_f64()
        );
    }
    let node = dir.join("node_modules").join(".bin").join("node");
    assert!(
        node.exists(),
        "{} is missing after npm ci (the `node` package of tests/oauth/package.json)",
        node.display()
    );
    node
}

impl AuthServer {
    /// Starts an authorization server for `resource` (vidforge's MCP endpoint URI, e.g.
    /// `http://127.0.0.1:<port>/mcp`) with a fresh RS256 key; `redirect_uris` are those of the
    /// [`BROWSER_CLIENT_ID`] client (vidforge's sign-in callback).
    pub fn start(resource: &str, redirect_uris: &[&str]) -> AuthServer {
        let dir = tempfile::Builder::new()
            .prefix("vidforge-oauth-")
            .tempdir()
            .expect("a temp dir for the authorization server");
        let mut server = AuthServer {
            port: 0,
            resource: resource.to_string(),
            redirect_uris: redirect_uris.iter().map(|s| s.to_string()).collect(),
            dir,
            kid: String::new(),
            child: None,
        };
        // A free port can be taken between the probe and node's bind: a few tries.
        let mut last = String::new();
        for _ in 0..3 {
            server.port = super::free_port();
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last = e,
            }
        }
        panic!("the authorization server did not start: {last}");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`, exactly as in the tokens' `iss`.
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn jwks_uri(&self) -> String {
        format!("{}/jwks", self.issuer())
    }

    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer())
    }

    /// The resource it was started for.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The `kid` of the current signing key.
    pub fn kid(&self) -> String {
        self.kid.clone()
    }

    /// The current signing key, private, PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`): forge
    /// tokens the server itself could have signed.
    pub fn private_key_pem(&self) -> String {
        fs::read_to_string(self.key_path("keys.json.pem"))
            .expect("the authorization server's private key PEM")
    }

    /// The current signing key's public half, SPKI PEM (`-----BEGIN PUBLIC KEY-----`).
    pub fn public_key_pem(&self) -> String {
        fs::read_to_string(self.key_path("keys.json.pub.pem"))
            .expect("the authorization server's public key PEM")
    }

    /// What it wrote on stderr so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_file()).unwrap_or_default()
    }

    /// A client-credentials access token for `resource` with `scope` (space-separated); panics
    /// unless the token endpoint issues one.
    pub fn token(&self, client_id: &str, secret: &str, scope: &str, resource: &str) -> String {
        let (status, body) = self.token_response(client_id, secret, scope, resource);
        assert_eq!(
            status,
            200,
            "token endpoint refused {client_id} (scope {scope:?}, resource {resource}): {body}\n{}",
            self.log()
        );
        body["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access_token in {body}"))
            .to_string()
    }

    /// The token endpoint's status and JSON body for a client-credentials request; empty
    /// `scope` or `resource` leaves that parameter out (no resource: an opaque token).
    pub fn token_response(
        &self,
        client_id: &str,
        secret: &str,
        scope: &str,
        resource: &str,
    ) -> (u16, Value) {
        let mut form = vec![("grant_type", "client_credentials")];
        if !scope.is_empty() {
            form.push(("scope", scope));
        }
        if !resource.is_empty() {
            form.push(("resource", resource));
        }
        let reply = http()
            .post(self.token_endpoint())
            .basic_auth(client_id, Some(secret))
            .form(&form)
            .send()
            .unwrap_or_else(|e| panic!("POST {}: {e}\n{}", self.token_endpoint(), self.log()));
        let status = reply.status().as_u16();
        let text = reply.text().unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, body)
    }

    /// Stops it (SIGTERM, then SIGKILL after 5 s): the authorization server "down".
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port with the same keys (stopping it first if running).
    /// Registered clients and sign-in sessions are gone (in-memory store); tokens issued
    /// before stay valid (same key, same issuer).
    pub fn start_again(&mut self) {
        self.stop();
        self.spawn_on_same_port();
    }

    /// Restarts it on the same port with a NEW signing key (new `kid`); the old key is
    /// dropped from its JWKS. Returns the new kid.
    pub fn rotate_keys(&mut self) -> String {
        self.stop();
        let old = self.kid.clone();
        for name in ["keys.json", "keys.json.pem", "keys.json.pub.pem"] {
            let _ = fs::remove_file(self.key_path(name));
        }
        self.spawn_on_same_port();
        assert_ne!(self.kid, old, "rotate_keys kept the old kid");
        self.kid.clone()
    }

    fn spawn_on_same_port(&mut self) {
        // The port was ours a moment ago; give the OS a few tries to hand it back.
        let mut last = String::new();
        for _ in 0..5 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "the authorization server did not start again on port {}: {last}",
            self.port
        );
    }

    /// The private JWKS; the script writes `keys.json.pem` and `keys.json.pub.pem` beside it.
    fn keys_file(&self) -> PathBuf {
        self.key_path("keys.json")
    }

    fn key_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log_file(&self) -> PathBuf {
        self.dir.path().join("authorization-server.log")
    }

    /// Starts the process and waits (bounded) for its ready line.
    fn spawn(&mut self) -> Result<(), String> {
        let node = ensure_deps();
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_file())
            .map_err(|e| format!("log file: {e}"))?;
        let mut cmd = Command::new(&node);
        cmd.arg(oauth_dir().join("authorization-server.mjs"))
            .args(["--port", &self.port.to_string()])
            .args(["--resource", &self.resource])
            .arg("--keys")
            .arg(self.keys_file())
            .args(["--ttl", &TOKEN_TTL_SECS.to_string()]);
        for uri in &self.redirect_uris {
            cmd.args(["--redirect-uri", uri]);
        }
        let started = Instant::now();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", node.display()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            // Keep draining, so the process never blocks on a full pipe.
            for _ in lines {}
        });
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(Ok(line))) => line,
            Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = child.kill();
                let status = child.wait().ok();
                return Err(format!(
                    "it exited ({status:?}) before its ready line:\n{}",
                    self.log()
                ));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no ready line within {START_TIMEOUT:?}:\n{}",
                    self.log()
                ));
            }
        };
        let ready: Value = serde_json::from_str(&line)
            .map_err(|e| format!("ready line {line:?} is not JSON: {e}"))?;
        assert_eq!(
            ready["issuer"].as_str(),
            Some(self.issuer().as_str()),
            "ready line {line}"
        );
        self.kid = ready["kid"]
            .as_str()
            .unwrap_or_else(|| panic!("no kid in the ready line {line}"))
            .to_string();
        self.child = Some(child);
        eprintln!(
            "oauth: authorization server {} up in {} ms (kid {})",
            self.issuer(),
            started.elapsed().as_millis(),
            self.kid
        );
        Ok(())
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client")
}
