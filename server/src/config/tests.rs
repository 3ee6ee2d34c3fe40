//! Configuration: defaults, precedence (file < env < flags), parsing and validation.

use super::*;

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
