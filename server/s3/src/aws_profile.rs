//! Credentials and region from the shared AWS files, for what the `AWS_*` variables left
//! unset: `AWS_SHARED_CREDENTIALS_FILE` (default `~/.aws/credentials`) and `AWS_CONFIG_FILE`
//! (default `~/.aws/config`), profile `AWS_PROFILE` (default `default`; `[profile NAME]` in
//! the config file), as the AWS CLI and SDKs read them. Static keys only: SSO and
//! `credential_process` profiles are the AWS CLI's, not ours.

use std::path::PathBuf;

use ini::Ini;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};

/// `builder` with the profile's keys and region where it has none.
pub(super) fn fill_from_files(mut builder: AmazonS3Builder) -> AmazonS3Builder {
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |var: &str, name: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let credentials = file("AWS_SHARED_CREDENTIALS_FILE", "credentials")
        .and_then(|p| Ini::load_from_file(p).ok());
    let config = file("AWS_CONFIG_FILE", "config").and_then(|p| Ini::load_from_file(p).ok());
    let config_section = if profile == "default" {
        "default".to_string()
    } else {
        format!("profile {profile}")
    };
    let lookup = |key: &str| -> Option<String> {
        credentials
            .as_ref()
            .and_then(|c| c.get_from(Some(profile.as_str()), key))
            .or_else(|| {
                config
                    .as_ref()
                    .and_then(|c| c.get_from(Some(config_section.as_str()), key))
            })
            .map(str::to_string)
    };
    let has_keys = builder
        .get_config_value(&AmazonS3ConfigKey::AccessKeyId)
        .is_some();
    if !has_keys
        && let (Some(id), Some(secret)) =
            (lookup("aws_access_key_id"), lookup("aws_secret_access_key"))
    {
        builder = builder
            .with_access_key_id(id)
            .with_secret_access_key(secret);
        if let Some(token) = lookup("aws_session_token") {
            builder = builder.with_token(token);
        }
    }
    if builder
        .get_config_value(&AmazonS3ConfigKey::Region)
        .is_none()
        && let Some(region) = lookup("region")
    {
        builder = builder.with_region(region);
    }
    builder
}
