//! A private PostgreSQL 15 for tests and benchmarks: `initdb` into a temp dir, started on a
//! free loopback port, stopped (immediately) on drop. As root its programs run as the
//! `postgres` user (PostgreSQL refuses root). Binaries: Debian's `postgresql` package
//! (`VIDFORGE_PG_BIN` overrides the directory); missing ones fail the caller, never skip it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A private PostgreSQL server, stopped on drop.
pub struct Postgres {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    data: PathBuf,
    port: u16,
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Postgres {
    fn bin_dir() -> PathBuf {
        let bin = PathBuf::from(
            std::env::var("VIDFORGE_PG_BIN").unwrap_or("/usr/lib/postgresql/15/bin".into()),
        );
        assert!(
            bin.join("initdb").exists(),
            "{} has no initdb: install PostgreSQL 15 (scripts/install-deps.sh)",
            bin.display()
        );
        bin
    }

    /// A PostgreSQL program, run as the `postgres` user when we are root (it refuses root).
    fn command(bin: &Path, program: &str) -> Command {
        let exe = bin.join(program);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.current_dir("/");
        cmd
    }

    /// Runs a PostgreSQL program ([`Postgres::command`]) and requires it to succeed.
    fn run(bin: &Path, program: &str, args: &[&str]) {
        let mut cmd = Self::command(bin, program);
        // No pipes: a server started by pg_ctl may inherit them and hold them open forever.
        let status = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run a PostgreSQL program");
        assert!(status.success(), "{program} {args:?} failed: {status}");
    }

    pub fn start() -> Postgres {
        let bin = Self::bin_dir();
        let dir = tempfile::tempdir().expect("temp dir");
        if is_root() {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(ok.success());
        }
        let data = dir.path().join("pg");
        let data_s = data.to_str().unwrap().to_string();
        Self::run(
            &bin,
            "initdb",
            &[
                "-D",
                &data_s,
                "-U",
                "vidforge",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
        );
        let port = free_port();
        let log = dir.path().join("pg.log");
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1",
            dir.path().display()
        );
        Self::run(
            &bin,
            "pg_ctl",
            &[
                "-D",
                &data_s,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "-o",
                &opts,
                "start",
            ],
        );
        Postgres {
            _dir: dir,
            bin,
            data,
            port,
        }
    }

    /// `postgres://vidforge@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://vidforge@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl restart -m fast`.
    #[allow(dead_code)] // not every user restarts it
    pub fn restart(&self) {
        Self::run(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-w",
                "-m",
                "fast",
                "restart",
            ],
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data.to_str().unwrap().to_string();
        let _ = Self::command(&self.bin, "pg_ctl")
            .args(["-D", &data, "-m", "immediate", "stop"])
            .output();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Runs `sql` with `psql` (PostgreSQL's own client, beside `initdb`) on the database at `url`,
/// as the test's superuser; its output, unaligned, without headers. Panics when it fails.
#[allow(dead_code)] // not every user runs SQL of its own
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new(Postgres::bin_dir().join("psql"))
        .args([
            "-X",
            "-q",
            "-t",
            "-A",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            sql,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql {sql:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
