//! Configuration: defaults, precedence (file < env < flags), parsing and validation.

use super::*;
use crate::catalog;

#[test]
fn defaults_are_zero_config_and_safe() {
    let c = Config::default();
    assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);
    assert!(c.tokens.is_empty());
    assert_eq!(c.approval_timeout, catalog::APPROVAL_TIMEOUT);
    c.validate().unwrap();
    c.check_bind_safety().unwrap();
    assert_eq!(c.base_url(), "http://127.0.0.1:8080");
}

#[test]
fn non_loopback_without_tokens_is_refused() {
    let mut c = Config {
        listen: "0.0.0.0:8080".parse().unwrap(),
        ..Config::default()
    };
    let e = c.check_bind_safety().unwrap_err();
    assert!(
        e.to_string().contains("refusing to listen on 0.0.0.0:8080"),
        "{e}"
    );
    c.tokens.insert("0123456789".into(), "alice".into());
    c.check_bind_safety().unwrap();
    c.listen = "[::1]:9000".parse().unwrap();
    c.tokens.clear();
    c.check_bind_safety().unwrap();
}

#[test]
fn file_then_flags() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vidforge.toml");
    std::fs::write(
        &path,
        r#"
listen = "127.0.0.1:9999"
render_slots = 2
max_upload_bytes = "1MiB"
approval_timeout = 90
result_ttl = "8d"
backend = "cpu"
hwdecode = "off"
encoder = "nvenc"
header_read_timeout = "3s"
idle_timeout = 90
max_connections = 64
[tokens]
"tok-alice-123" = "alice"
"#,
    )
    .unwrap();
    let args = ConfigArgs {
        config: Some(path),
        listen: Some("localhost:7000".into()),
        approval_timeout: Some("2m".into()),
        idle_timeout: Some("45s".into()),
        encoder: Some(EncoderSetting::X264),
        ..Default::default()
    };
    let c = Config::load(&args).unwrap();
    assert_eq!(c.hwdecode, HwDecodeSetting::Off);
    // Flags win over the file.
    assert_eq!(c.encoder, EncoderSetting::X264);
    assert_eq!(c.listen.to_string(), "127.0.0.1:7000");
    assert_eq!(c.render_slots, 2);
    assert_eq!(c.max_upload_bytes, 1 << 20);
    assert_eq!(c.approval_timeout, Duration::from_secs(120));
    assert_eq!(c.result_ttl, Duration::from_secs(8 * 86_400));
    assert_eq!(c.backend, BackendSetting::Cpu);
    assert_eq!(c.header_read_timeout, Duration::from_secs(3));
    assert_eq!(c.idle_timeout, Duration::from_secs(45));
    assert_eq!(c.body_idle_timeout, DEFAULT_BODY_IDLE_TIMEOUT);
    assert_eq!(c.max_connections, 64);
    assert_eq!(
        c.tokens.get("tok-alice-123").map(String::as_str),
        Some("alice")
    );
}

#[test]
fn rejects_unknown_keys_and_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "listn = \"x\"\n").unwrap();
    let args = ConfigArgs {
        config: Some(path),
        ..Default::default()
    };
    assert!(matches!(
        Config::load(&args),
        Err(ConfigError::Parse { .. })
    ));
    assert!(parse_duration("10 parsecs", "x").is_err());
    assert_eq!(
        parse_duration("500ms", "x").unwrap(),
        Duration::from_millis(500)
    );
    assert!(parse_bytes("-1", "x").is_err());
    assert_eq!(parse_bytes("2GiB", "x").unwrap(), 2 << 30);
    let args = ConfigArgs {
        tokens: vec!["no-equals-sign".into()],
        ..Default::default()
    };
    assert!(Config::load(&args).is_err());
}

#[test]
fn upload_limits_keep_connections_for_everything_else() {
    let c = Config::default();
    assert_eq!(c.upload_slots(), DEFAULT_MAX_CONCURRENT_UPLOADS);
    assert_eq!(c.max_uploads_per_peer, DEFAULT_MAX_UPLOADS_PER_PEER);
    assert_eq!(c.upload_min_rate, 16 << 10);
    // The default shrinks with a small connection cap: half stays for /mcp and downloads.
    let small = Config {
        max_connections: 10,
        ..Config::default()
    };
    small.validate().unwrap();
    assert_eq!(small.upload_slots(), 5);
    let tiny = Config {
        max_connections: 1,
        ..Config::default()
    };
    tiny.validate().unwrap();
    assert_eq!(tiny.upload_slots(), 1);
    // An explicit cap over half of max_connections is refused at load.
    let args = ConfigArgs {
        max_connections: Some(64),
        max_concurrent_uploads: Some(33),
        ..Default::default()
    };
    let e = Config::load(&args).unwrap_err();
    assert!(e.to_string().contains("max_concurrent_uploads"), "{e}");
    for bad in [
        ConfigArgs {
            max_concurrent_uploads: Some(0),
            ..Default::default()
        },
        ConfigArgs {
            max_uploads_per_peer: Some(0),
            ..Default::default()
        },
        ConfigArgs {
            upload_rate_grace: Some("10ms".into()),
            ..Default::default()
        },
    ] {
        assert!(Config::load(&bad).is_err(), "{bad:?}");
    }
    // File, then flags.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vidforge.toml");
    std::fs::write(
        &path,
        "max_connections = 64\nmax_concurrent_uploads = 32\nmax_uploads_per_peer = 4\n\
         upload_min_rate = \"1KiB\"\nupload_rate_grace = \"2s\"\n",
    )
    .unwrap();
    let args = ConfigArgs {
        config: Some(path),
        max_uploads_per_peer: Some(6),
        ..Default::default()
    };
    let c = Config::load(&args).unwrap();
    assert_eq!(c.upload_slots(), 32);
    assert_eq!(c.max_uploads_per_peer, 6);
    assert_eq!(c.upload_min_rate, 1024);
    assert_eq!(c.upload_rate_grace, Duration::from_secs(2));
}

#[test]
fn session_lifetimes_from_file_and_flags() {
    let c = Config::default();
    assert_eq!(c.session_idle_timeout, DEFAULT_SESSION_IDLE_TIMEOUT);
    assert_eq!(c.session_max_age, DEFAULT_SESSION_MAX_AGE);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vidforge.toml");
    std::fs::write(
        &path,
        "session_idle_timeout = \"30m\"\nsession_max_age = \"8h\"\n",
    )
    .unwrap();
    let args = ConfigArgs {
        config: Some(path),
        session_idle_timeout: Some("10m".into()),
        ..Default::default()
    };
    let c = Config::load(&args).unwrap();
    assert_eq!(c.session_idle_timeout, Duration::from_secs(600));
    assert_eq!(c.session_max_age, Duration::from_secs(8 * 3600));
    // A cap shorter than the idle timeout is a mistake, not a silent clamp.
    let args = ConfigArgs {
        session_idle_timeout: Some("3h".into()),
        session_max_age: Some("2h".into()),
        ..Default::default()
    };
    assert!(matches!(
        Config::load(&args),
        Err(ConfigError::Invalid {
            field: "session_max_age",
            ..
        })
    ));
}

#[test]
fn render_work_limits_from_file_and_flags() {
    let c = Config::default();
    assert_eq!(
        c.max_render_pixel_frames(),
        DEFAULT_MAX_RENDER_SECONDS * DEFAULT_RENDER_PIXEL_RATE
    );
    assert!(c.render_budget_pixel_frames().is_some());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vidforge.toml");
    std::fs::write(
        &path,
        "render_pixel_rate = 1000\nmax_render_seconds = 60\nrender_budget_seconds = 0\n\
         render_budget_window = \"30m\"\nlong_render_seconds = 5\n",
    )
    .unwrap();
    let args = ConfigArgs {
        config: Some(path),
        max_render_seconds: Some(90),
        ..Default::default()
    };
    let c = Config::load(&args).unwrap();
    assert_eq!(c.max_render_pixel_frames(), 90_000);
    assert_eq!(c.render_budget_pixel_frames(), None);
    assert_eq!(c.render_budget_window, Duration::from_secs(1800));
    assert_eq!(c.long_render_pixel_frames(), 5_000);
    let args = ConfigArgs {
        render_pixel_rate: Some(0),
        ..Default::default()
    };
    assert!(matches!(
        Config::load(&args),
        Err(ConfigError::Invalid {
            field: "render_pixel_rate",
            ..
        })
    ));
}

#[test]
fn auth_limits_and_trusted_proxies_from_file_and_flags() {
    let d = Config::default();
    assert_eq!(d.auth_failure_burst, DEFAULT_AUTH_FAILURE_BURST);
    assert_eq!(d.auth_failure_interval, DEFAULT_AUTH_FAILURE_INTERVAL);
    assert!(
        d.trusted_proxies.is_empty(),
        "no proxy is trusted by default"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vidforge.toml");
    std::fs::write(
        &path,
        "auth_failure_burst = 5\nauth_failure_interval = \"2s\"\n\
         trusted_proxies = [\"10.0.0.0/8\", \"192.0.2.7\"]\n",
    )
    .unwrap();
    let c = Config::load(&ConfigArgs {
        config: Some(path.clone()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(c.auth_failure_burst, 5);
    assert_eq!(c.auth_failure_interval, Duration::from_secs(2));
    assert_eq!(c.trusted_proxies.len(), 2);
    assert!(c.trusted_proxies[0].contains(&"10.1.2.3".parse::<std::net::IpAddr>().unwrap()));
    // Flags win over the file.
    let c = Config::load(&ConfigArgs {
        config: Some(path),
        auth_failure_burst: Some(0),
        trusted_proxies: vec!["127.0.0.1".into()],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(c.auth_failure_burst, 0);
    assert_eq!(c.trusted_proxies.len(), 1);
    for (args, field) in [
        (
            ConfigArgs {
                trusted_proxies: vec!["nginx".into()],
                ..Default::default()
            },
            "trusted_proxies",
        ),
        (
            ConfigArgs {
                auth_failure_interval: Some("0s".into()),
                ..Default::default()
            },
            "auth_failure_interval",
        ),
    ] {
        match Config::load(&args) {
            Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn durations_and_sizes_accept_every_form_they_did() {
    for (text, ms) in [
        ("500ms", 500),
        ("90s", 90_000),
        ("30m", 1_800_000),
        ("10min", 600_000),
        ("24h", 86_400_000),
        ("7d", 604_800_000),
        ("90", 90_000),
        ("1.5", 1_500),
        ("1.5h", 5_400_000),
        (".5s", 500),
        ("1.s", 1_000),
        (" 90 s ", 90_000),
        ("0", 0),
    ] {
        let d = parse_duration(text, "x").unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(d, Duration::from_millis(ms), "{text:?}");
    }
    for (text, bytes) in [
        ("1048576", 1_048_576),
        ("500KB", 500_000),
        ("500mb", 500_000_000),
        ("2GB", 2_000_000_000),
        ("64KiB", 64 << 10),
        ("2GiB", 2 << 30),
        ("1 MiB", 1 << 20),
        ("5b", 5),
        ("0", 0),
        ("18446744073709551615", u64::MAX),
    ] {
        let b = parse_bytes(text, "x").unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(b, bytes, "{text:?}");
    }
    for bad in ["10 parsecs", "-1s", "", "1e13", "2H"] {
        let e = parse_duration(bad, "lease_ttl").unwrap_err().to_string();
        assert_eq!(
            e,
            format!("invalid lease_ttl: '{bad}' is not a duration like 500ms, 90s, 30m, 24h or 7d")
        );
    }
    for bad in ["-1", "", "99999999999GiB", "1e3", "12 furlongs"] {
        let e = parse_bytes(bad, "min_free_bytes").unwrap_err().to_string();
        assert_eq!(
            e,
            format!("invalid min_free_bytes: '{bad}' is not a size like 1048576, 500MB or 2GiB")
        );
    }
}

#[test]
fn media_choices_from_file_are_exact_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vidforge.toml");
    std::fs::write(&path, "backend = \"gpu\"\n").unwrap();
    let e = Config::load(&ConfigArgs {
        config: Some(path),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("unknown variant `gpu`, expected one of `auto`, `wgpu`, `cpu`"),
        "{e}"
    );
}

#[test]
fn media_store_is_a_directory_or_an_s3_url() {
    use super::MediaStoreSetting as M;
    assert_eq!(
        M::parse("s3://render-media/prod/v1/").unwrap(),
        M::S3 {
            bucket: "render-media".into(),
            prefix: "prod/v1".into()
        }
    );
    assert_eq!(
        M::parse("s3://bucket").unwrap(),
        M::S3 {
            bucket: "bucket".into(),
            prefix: String::new()
        }
    );
    assert_eq!(M::parse("/mnt/media").unwrap(), M::Dir("/mnt/media".into()));
    for bad in [
        "s3://",
        "s3://Bad_Bucket/x",
        "s3://ab",
        "s3://bucket/../etc",
        "s3://bucket/a//b",
        "gs://bucket/x",
        "",
    ] {
        let e = M::parse(bad).unwrap_err().to_string();
        assert!(e.contains("media_store"), "{bad}: {e}");
    }
    // The file reads the same values; a bucket keeps only scratch in the data dir.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vidforge.toml");
    std::fs::write(&path, "media_store = \"s3://media/prefix\"\n").unwrap();
    let cfg = Config::load(&ConfigArgs {
        config: Some(path),
        ..Default::default()
    })
    .unwrap();
    assert!(cfg.media_store.is_object_store());
    assert_eq!(cfg.media_root(), cfg.data_dir.as_path());
}

#[test]
fn a_segment_target_under_a_second_is_refused_at_start() {
    let mut c = Config {
        segment_seconds: std::time::Duration::from_millis(999),
        ..Config::default()
    };
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("segment_seconds") && e.contains("must be at least 1s"),
        "{e}"
    );
    c.segment_seconds = std::time::Duration::from_secs(1);
    c.validate().unwrap();
}
