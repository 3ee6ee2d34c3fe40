//! A real webhook receiver for the webhook tests: `tests/webhooks/receiver.py`, which verifies
//! every delivery with the official Standard Webhooks library (PyPI `standardwebhooks`, pinned
//! in `tests/webhooks/requirements.txt`, installed into `tests/webhooks/.venv` on first use),
//! on a loopback port, killed on drop. It can be stopped and started again on the same port
//! (a receiver that is down), and told to fail, hang or redirect.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{free_port, repo_root};

/// A Standard Webhooks secret (`whsec_` + base64 of 24 bytes).
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Another one, for a principal's own endpoint.
pub const OTHER_SECRET: &str = "whsec_c2Vjb25kLXRlc3Qtc2VjcmV0LTI0Ynl0ZXM=";

pub struct Receiver {
    pub port: u16,
    secret: String,
    child: Option<Child>,
    log_path: PathBuf,
}

fn venv_python() -> PathBuf {
    repo_root().join("tests/webhooks/.venv/bin/python")
}

/// The receiver's venv (idempotent); panics if it cannot be made.
fn install() {
    let dir = repo_root().join("tests/webhooks");
    let marker = dir.join(".venv/.installed");
    if marker.exists() {
        return;
    }
    let venv = Command::new("python3")
        .args(["-m", "venv"])
        .arg(dir.join(".venv"))
        .status()
        .expect("python3 -m venv");
    assert!(
        venv.success(),
        "python3 -m venv tests/webhooks/.venv failed"
    );
    let pip = Command::new(dir.join(".venv/bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(dir.join("requirements.txt"))
        .status()
        .expect("pip install");
    assert!(
        pip.success(),
        "pip install -r tests/webhooks/requirements.txt failed"
    );
    std::fs::write(marker, b"").unwrap();
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

impl Receiver {
    /// Starts a receiver verifying with `secret` on a free port.
    pub fn start(secret: &str) -> Receiver {
        install();
        let log_path = std::env::temp_dir().join(format!("vidforge-receiver-{}.log", free_port()));
        let mut r = Receiver {
            port: free_port(),
            secret: secret.to_string(),
            child: None,
            log_path,
        };
        r.start_again();
        r
    }

    /// The delivery URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// (Re)starts it on the same port; waits (bounded) until it answers. What it recorded
    /// before is gone (the tests read it before a stop).
    pub fn start_again(&mut self) {
        self.stop();
        let log = std::fs::File::create(&self.log_path).unwrap();
        let child = Command::new(venv_python())
            .arg(repo_root().join("tests/webhooks/receiver.py"))
            .args(["--port", &self.port.to_string(), "--secret", &self.secret])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start tests/webhooks/receiver.py");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while http()
            .get(format!("http://127.0.0.1:{}/deliveries", self.port))
            .send()
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "the receiver did not answer:\n{}",
                std::fs::read_to_string(&self.log_path).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills it: deliveries find the port closed.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `ok`, `fail` (503), `hang` (no answer) or `redirect` (307).
    pub fn set_mode(&self, mode: &str) {
        let r = http()
            .post(format!("http://127.0.0.1:{}/mode?m={mode}", self.port))
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
    }

    /// `{"delivered": [...], "attempts": N, "invalid": N, "elsewhere": N}`.
    pub fn state(&self) -> Value {
        http()
            .get(format!("http://127.0.0.1:{}/deliveries", self.port))
            .send()
            .unwrap()
            .json()
            .unwrap()
    }

    /// The verified deliveries so far (duplicates kept).
    pub fn delivered(&self) -> Vec<Value> {
        self.state()["delivered"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits (bounded by `timeout`) until a delivery of `kind` for `render` arrived; returns it.
    pub fn wait_for(&self, render: &str, kind: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(d) = self
                .delivered()
                .into_iter()
                .find(|d| d["type"] == kind && d["data"]["render_id"].as_str() == Some(render))
            {
                return d;
            }
            assert!(
                Instant::now() < deadline,
                "no {kind} for {render} within {timeout:?}; got: {}",
                self.state()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.log_path);
    }
}
