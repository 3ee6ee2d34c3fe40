//! `vidforge assets add FILE`: adds an asset directly to the store (the server must not be
//! running on the same data dir: sled holds an exclusive lock), or uploads it to a running
//! server with `--server http://HOST:PORT`. Prints the asset URI.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use crate::assets::AssetCatalog;
use crate::clock;
use crate::config::{ANONYMOUS_PRINCIPAL, Config, ConfigArgs};
use crate::http::asset_json;
use crate::media_backend::MediaProber;
use crate::store::Store;

#[derive(Debug, Args)]
pub struct AssetsArgs {
    #[command(subcommand)]
    pub command: AssetsCommand,
}

#[derive(Debug, Subcommand)]
pub enum AssetsCommand {
    /// Add a video or PNG image and print its vidforge://assets/… URI.
    Add(AddArgs),
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The file to add.
    pub file: PathBuf,
    /// Owner of the asset (default: the anonymous principal "local"; required when tokens are
    /// configured). Direct mode only; with --server the token decides.
    #[arg(long)]
    pub principal: Option<String>,
    /// File name to record (default: FILE's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Upload to a running server (http://HOST:PORT) instead of opening the store.
    #[arg(long)]
    pub server: Option<String>,
    /// Bearer token for --server.
    #[arg(long, env = "VIDFORGE_TOKEN", hide_env_values = true)]
    pub bearer: Option<String>,
    /// Print the full asset JSON instead of the URI.
    #[arg(long)]
    pub json: bool,
    /// TOML configuration file (for data_dir, tokens, max_upload_bytes).
    #[arg(long, env = "VIDFORGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory (default ./vidforge-data).
    #[arg(long, env = "VIDFORGE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

pub fn run_assets(args: AssetsArgs) -> anyhow::Result<()> {
    match args.command {
        AssetsCommand::Add(a) => run_add(a),
    }
}

fn run_add(args: AddArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let json = match &args.server {
        Some(server) => runtime.block_on(upload_to_server(server, &args))?,
        None => runtime.block_on(add_direct(&args))?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let uri = json["uri"].as_str().unwrap_or_default();
        println!("{uri}");
        eprintln!(
            "{} asset, {} bytes",
            json["kind"].as_str().unwrap_or("?"),
            json["size_bytes"]
        );
    }
    Ok(())
}

async fn add_direct(args: &AddArgs) -> anyhow::Result<serde_json::Value> {
    let config = Config::load(&ConfigArgs {
        config: args.config.clone(),
        data_dir: args.data_dir.clone(),
        ..Default::default()
    })?;
    let principal = match &args.principal {
        Some(p) => p.clone(),
        None if config.auth_required() => {
            bail!("tokens are configured: pass --principal NAME (the owner of the asset)")
        }
        None => ANONYMOUS_PRINCIPAL.to_string(),
    };
    if config.auth_required() && !config.tokens.values().any(|p| *p == principal) {
        bail!("principal '{principal}' has no token in the configuration");
    }
    config
        .ensure_dirs()
        .with_context(|| format!("cannot create the data dir {}", config.data_dir.display()))?;
    let data_dir = std::path::absolute(&config.data_dir)?;
    let store = Store::open(&data_dir.join("db"))?;
    let catalog = AssetCatalog::new(
        store,
        data_dir.join("assets"),
        config.upload_limits(),
        Arc::new(MediaProber),
        clock::from_env(),
    );
    let rec = catalog
        .add_path(&principal, &args.file, args.name.as_deref())
        .await?;
    Ok(asset_json(&rec))
}

/// Minimal HTTP/1.0 POST over plain TCP (1.0 so the answer is never chunked) (the server speaks plain HTTP; put TLS in front of it
/// with a reverse proxy, and use direct mode or curl there).
async fn upload_to_server(server: &str, args: &AddArgs) -> anyhow::Result<serde_json::Value> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let rest = server
        .strip_prefix("http://")
        .context("--server must be an http:// URL (use curl for https)")?;
    let (authority, base_path) = match rest.split_once('/') {
        Some((a, p)) => (a, format!("/{}", p.trim_end_matches('/'))),
        None => (rest, String::new()),
    };
    let base_path = base_path.trim_end_matches('/');
    let name = args
        .name
        .clone()
        .or_else(|| {
            args.file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "upload".into());
    let encoded: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let mut file = tokio::fs::File::open(&args.file)
        .await
        .with_context(|| format!("cannot open {}", args.file.display()))?;
    let len = file.metadata().await?.len();
    let addr = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    let mut head = format!(
        "POST {base_path}/assets?name={encoded} HTTP/1.0\r\nHost: {authority}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {len}\r\nConnection: close\r\n"
    );
    if let Some(t) = &args.bearer {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    tokio::io::copy(&mut file, &mut stream).await?;
    stream.flush().await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    let (status_line, rest) = text.split_once("\r\n").context("empty response")?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("malformed response")?;
    let body = rest.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    if status != 201 {
        bail!("upload failed with HTTP {status}: {}", body.trim());
    }
    serde_json::from_str(body).context("the server answered with invalid JSON")
}
