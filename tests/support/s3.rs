//! A real S3-compatible server for the media-store tests: moto's server from PyPI (pinned in
//! `tests/s3/requirements.txt`, installed by `scripts/s3-server.sh install`), on a free
//! loopback port, killed on drop. The test reads the bucket over plain S3 calls (moto does not
//! check signatures), and can freeze the server (SIGSTOP: requests hang, as with a bucket
//! that stopped answering) and thaw it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, repo_root};

/// The bucket every test uses.
pub const BUCKET: &str = "vidforge";
/// The credentials handed to vidforge (any pair works with moto).
pub const ENV: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "vidforge-test"),
    ("AWS_SECRET_ACCESS_KEY", "vidforge-test-secret"),
    ("AWS_REGION", "us-east-1"),
];

pub struct S3 {
    pub port: u16,
    child: Child,
    log_path: PathBuf,
}

impl S3 {
    /// Installs the pinned server if needed, starts it, waits until it answers and makes
    /// [`BUCKET`]. Panics (the test fails) if any of that cannot be done.
    pub fn start(dir: &Path) -> S3 {
        let script = repo_root().join("scripts/s3-server.sh");
        let ok = Command::new(&script)
            .arg("install")
            .status()
            .expect("run scripts/s3-server.sh install");
        assert!(ok.success(), "scripts/s3-server.sh install failed");
        let port = free_port();
        std::fs::create_dir_all(dir).unwrap();
        let log_path = dir.join("s3.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(repo_root().join("tests/s3/.venv/bin/moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start moto_server");
        let s3 = S3 {
            port,
            child,
            log_path,
        };
        let client = http();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = client.get(format!("{}/moto-api/", s3.endpoint())).send()
                && r.status().is_success()
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer:\n{}",
                s3.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let made = client
            .put(format!("{}/{BUCKET}", s3.endpoint()))
            .send()
            .unwrap();
        assert!(
            made.status().is_success(),
            "create bucket: {}",
            made.status()
        );
        s3
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `vidforge serve` flags for media under `s3://vidforge/<prefix>`.
    pub fn media_args(&self, prefix: &str) -> Vec<String> {
        vec![
            "--media-store".into(),
            format!("s3://{BUCKET}/{prefix}"),
            "--s3-endpoint".into(),
            self.endpoint(),
        ]
    }

    /// Every key under `prefix` (ListObjectsV2, all pages).
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        list_keys(&self.endpoint(), prefix)
    }

    /// The multipart uploads in progress in the bucket (ListMultipartUploads): their keys.
    pub fn multipart_uploads(&self) -> Vec<String> {
        let body = http()
            .get(format!("{}/{BUCKET}?uploads", self.endpoint()))
            .send()
            .unwrap()
            .text()
            .unwrap();
        between_all(&body, "<Upload>", "</Upload>")
            .iter()
            .flat_map(|u| between_all(u, "<Key>", "</Key>"))
            .collect()
    }

    /// How many requests the server logged whose line contains `needle`.
    pub fn requests_matching(&self, needle: &str) -> usize {
        self.log().lines().filter(|l| l.contains(needle)).count()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Freezes the server: connections are accepted by the kernel, nothing answers.
    pub fn pause(&self) {
        signal(self.child.id(), "-STOP");
    }

    /// Thaws it.
    pub fn resume(&self) {
        signal(self.child.id(), "-CONT");
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        signal(self.child.id(), "-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every key under `prefix` in [`BUCKET`] of the S3 server at `endpoint` (all pages).
pub fn list_keys(endpoint: &str, prefix: &str) -> Vec<String> {
    let client = http();
    let mut keys = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..1000 {
        let mut url = format!("{endpoint}/{BUCKET}?list-type=2&prefix={prefix}");
        if let Some(t) = &token {
            url.push_str(&format!("&continuation-token={t}"));
        }
        let body = client.get(url).send().unwrap().text().unwrap();
        keys.extend(between_all(&body, "<Key>", "</Key>"));
        token = between_all(&body, "<NextContinuationToken>", "</NextContinuationToken>")
            .into_iter()
            .next();
        if token.is_none() {
            break;
        }
    }
    keys
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// The texts between every `open` … `close` pair of `s`.
fn between_all(s: &str, open: &str, close: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find(open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(close) else { break };
        out.push(after[..end].to_string());
        rest = &after[end + close.len()..];
    }
    out
}
