//! `vidforge assets add FILE` and `vidforge assets rm ASSET`: directly on the store (the server
//! must not be running on the same data dir: sled holds an exclusive lock), or against a
//! running server with `--server http://HOST:PORT`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use vidforge_core::assets::{AssetCatalog, in_use_by};
use vidforge_core::clock;
use vidforge_core::config::{ANONYMOUS_PRINCIPAL, Config, ConfigArgs};
use vidforge_core::media_backend::MediaProber;
use vidforge_core::store::Store;
use vidforge_http::routes::asset_json;

#[derive(Debug, Args)]
pub struct AssetsArgs {
    #[command(subcommand)]
    pub command: AssetsCommand,
}

#[derive(Debug, Subcommand)]
pub enum AssetsCommand {
    /// Add a video or PNG image and print its vidforge://assets/… URI.
    Add(AddArgs),
    /// Delete an asset (refused while a render that has not finished uses it).
    Rm(RmArgs),
}

/// Where the command acts: a running server (`--server`) or the store in a data dir.
#[derive(Debug, Args)]
pub struct Target {
    /// Owner of the asset (default: the anonymous principal "local"; required when tokens are
    /// configured). Direct mode only; with --server the token decides.
    #[arg(long)]
    pub principal: Option<String>,
    /// Act on a running server (http://HOST:PORT) instead of opening the store.
    #[arg(long)]
    pub server: Option<String>,
    /// Bearer token for --server.
    #[arg(long, env = "VIDFORGE_TOKEN", hide_env_values = true)]
    pub bearer: Option<String>,
    /// TOML configuration file (for data_dir, tokens and the upload limits).
    #[arg(long, env = "VIDFORGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory (default ./vidforge-data).
    #[arg(long, env = "VIDFORGE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The file to add.
    pub file: PathBuf,
    /// File name to record (default: FILE's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Print the full asset JSON instead of the URI.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// The asset: its vidforge://assets/… URI or its id.
    pub asset: String,
    #[command(flatten)]
    pub target: Target,
}

pub fn run_assets(args: AssetsArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match args.command {
        AssetsCommand::Add(a) => runtime.block_on(run_add(a)),
        AssetsCommand::Rm(a) => runtime.block_on(run_rm(a)),
    }
}

async fn run_add(args: AddArgs) -> anyhow::Result<()> {
    let json = match &args.target.server {
        Some(server) => upload_to_server(server, &args).await?,
        None => add_direct(&args).await?,
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

async fn run_rm(args: RmArgs) -> anyhow::Result<()> {
    let id = vidforge_core::uri::parse_asset_uri(&args.asset).unwrap_or(&args.asset);
    match &args.target.server {
        Some(server) => {
            let (status, body) = http_call(
                server,
                "DELETE",
                &format!("/assets/{id}"),
                args.target.bearer.as_deref(),
                None,
            )
            .await?;
            if status != 204 {
                bail!("delete failed with HTTP {status}: {}", body.trim());
            }
        }
        None => {
            let (config, principal) = open_target(&args.target)?;
            let store = Store::open(&std::path::absolute(&config.data_dir)?.join("db"))?;
            let catalog = catalog(&config, store.clone())?;
            let Some(rec) = catalog.lookup(&principal, id)? else {
                bail!("no asset {id} owned by '{principal}'");
            };
            let renders = in_use_by(&store, &rec.id)?;
            if !renders.is_empty() {
                bail!(
                    "asset {id} is used by renders that have not finished: {}",
                    renders.join(", ")
                );
            }
            catalog.remove(&rec)?;
        }
    }
    eprintln!("deleted {}", vidforge_core::uri::asset_uri(id));
    Ok(())
}

/// The configuration and the principal a direct-mode command acts as.
fn open_target(target: &Target) -> anyhow::Result<(Config, String)> {
    let config = Config::load(&ConfigArgs {
        config: target.config.clone(),
        data_dir: target.data_dir.clone(),
        ..Default::default()
    })?;
    let principal = match &target.principal {
        Some(p) => p.clone(),
        None if config.auth_required() => {
            bail!("tokens are configured: pass --principal NAME (the owner of the asset)")
        }
        None => ANONYMOUS_PRINCIPAL.to_string(),
    };
    // A static token's principal, or an OAuth one (ISSUER#SUBJECT) of a trusted issuer.
    let oauth_principal = principal
        .split_once('#')
        .is_some_and(|(issuer, _)| config.oauth_issuers.iter().any(|i| i == issuer));
    if config.auth_required()
        && !oauth_principal
        && !config.tokens.values().any(|p| *p == principal)
    {
        bail!(
            "principal '{principal}' has no token in the configuration (OAuth principals are ISSUER#SUBJECT of a trusted issuer)"
        );
    }
    Ok((config, principal))
}

fn catalog(config: &Config, store: Store) -> anyhow::Result<AssetCatalog> {
    let data_dir = std::path::absolute(&config.data_dir)?;
    // Direct mode is the embedded single node's: sled and the data directory.
    Ok(AssetCatalog::new(
        store,
        vidforge_core::media_store::MediaStore::local(data_dir.clone()),
        data_dir.join("assets"),
        config.upload_limits(),
        Arc::new(MediaProber),
        clock::from_env(),
    ))
}

async fn add_direct(args: &AddArgs) -> anyhow::Result<serde_json::Value> {
    let (config, principal) = open_target(&args.target)?;
    config
        .ensure_dirs()
        .with_context(|| format!("cannot create the data dir {}", config.data_dir.display()))?;
    let store = Store::open(&std::path::absolute(&config.data_dir)?.join("db"))?;
    let rec = catalog(&config, store)?
        .add_path(&principal, &args.file, args.name.as_deref())
        .await?;
    let expires_at = vidforge_core::clock::add_ms(rec.created_at, config.asset_ttl);
    Ok(asset_json(&rec, expires_at))
}

async fn upload_to_server(server: &str, args: &AddArgs) -> anyhow::Result<serde_json::Value> {
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
    let file = tokio::fs::File::open(&args.file)
        .await
        .with_context(|| format!("cannot open {}", args.file.display()))?;
    let (status, body) = http_call(
        server,
        "POST",
        &format!("/assets?name={encoded}"),
        args.target.bearer.as_deref(),
        Some(file),
    )
    .await?;
    if status != 201 {
        bail!("upload failed with HTTP {status}: {}", body.trim());
    }
    serde_json::from_str(&body).context("the server answered with invalid JSON")
}

/// One HTTP/1.0 request over plain TCP (1.0 so the answer is never chunked), streaming `body`
/// as `application/octet-stream`. Returns the status and the body text. The server speaks
/// plain HTTP; put TLS in front of it with a reverse proxy, and use direct mode or curl there.
async fn http_call(
    server: &str,
    method: &str,
    path_and_query: &str,
    bearer: Option<&str>,
    body: Option<tokio::fs::File>,
) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let rest = server
        .strip_prefix("http://")
        .context("--server must be an http:// URL (use curl for https)")?;
    let (authority, base_path) = match rest.split_once('/') {
        Some((a, p)) => (a, format!("/{}", p.trim_end_matches('/'))),
        None => (rest, String::new()),
    };
    let base_path = base_path.trim_end_matches('/');
    let addr = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    let mut head = format!(
        "{method} {base_path}{path_and_query} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n"
    );
    if let Some(file) = &body {
        let len = file.metadata().await?.len();
        head.push_str(&format!(
            "Content-Type: application/octet-stream\r\nContent-Length: {len}\r\n"
        ));
    }
    if let Some(t) = bearer {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    if let Some(mut file) = body {
        tokio::io::copy(&mut file, &mut stream).await?;
    }
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
    Ok((status, body.to_string()))
}
