//! The MCP App (extension `io.modelcontextprotocol/ui`) over real HTTP: negotiated only with
//! hosts that declare it (others see the surface unchanged), the view resource and its CSP,
//! the app-only tools for the caller's own renders only, and the signed playback link
//! (served with `Range`; refused when altered, another principal's or expired).

use std::time::Duration;

use crate::support::*;
use serde_json::{Value, json};

const UI: &str = "io.modelcontextprotocol/ui";
const VIEW: &str = "ui://vidforge/render";

fn ui_caps() -> Value {
    json!({ "extensions": { UI: { "mimeTypes": ["text/html;profile=mcp-app"] } } })
}

fn session(server: &Server, token: Option<&str>, caps: Value) -> Legacy {
    let mut client = Legacy::new(server, token);
    let init = client.initialize("2025-11-25", caps);
    assert_eq!(init.status, 200, "{}", init.body);
    client.notify("notifications/initialized");
    client
}

fn tool_names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_extension_is_negotiated_and_its_view_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);

    // A host without the extension: today's surface, and no app-only tool to call.
    let mut plain = Legacy::new(&server, None);
    let init = plain.initialize("2025-11-25", json!({}));
    assert!(init.result()["capabilities"].get("extensions").is_none());
    plain.notify("notifications/initialized");
    let list = plain.request("tools/list", json!({}));
    assert_eq!(tool_names(list.result()).len(), 5);
    assert!(!list.body.to_string().contains("ui://"), "{}", list.body);
    let refused = plain.tool("vidforge_app_preview", json!({"render_id": "r_x"}));
    assert!(refused.body.get("error").is_some(), "{}", refused.body);
    let mut modern = server.mcp();
    let listed = modern.call("tools/list", json!({}), Caps::NONE);
    assert_eq!(tool_names(listed.result()).len(), 5);
    let discover = modern.call("server/discover", json!({}), Caps::NONE);
    assert!(
        discover.body.to_string().contains(UI),
        "discover advertises the extension: {}",
        discover.body
    );

    // A host with it: the capability, the view on the render tool, the app-only tools.
    let mut host = Legacy::new(&server, None);
    let init = host.initialize("2025-11-25", ui_caps());
    assert_eq!(
        init.result()["capabilities"]["extensions"][UI]["mimeTypes"],
        json!(["text/html;profile=mcp-app"])
    );
    host.notify("notifications/initialized");
    let list = host.request("tools/list", json!({}));
    let tools = list.result()["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 7);
    assert_eq!(tools[0]["name"], "vidforge_render_video");
    assert_eq!(tools[0]["_meta"]["ui"]["resourceUri"], VIEW);
    for app in &tools[5..] {
        assert_eq!(app["_meta"]["ui"]["visibility"], json!(["app"]), "{app}");
    }
    let resources = host.request("resources/list", json!({}));
    assert!(
        resources.body.to_string().contains(VIEW),
        "{}",
        resources.body
    );
    let read = host.request("resources/read", json!({"uri": VIEW}));
    let content = &read.result()["contents"][0];
    assert_eq!(content["mimeType"], "text/html;profile=mcp-app");
    assert_eq!(
        content["_meta"]["ui"]["csp"]["resourceDomains"],
        json!([server.base()])
    );
    assert_eq!(content["_meta"]["ui"]["prefersBorder"], true);
    assert!(
        content["text"]
            .as_str()
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );

    // Discovery: the AI Catalog points at the Server Card, generated from server.json and
    // the live tool list (the model's: no app-only tool).
    let base = server.base();
    let catalog: Value = reqwest::blocking::get(format!("{base}/.well-known/ai-catalog.json"))
        .unwrap()
        .json()
        .unwrap();
    let card_url = catalog["agents"][0]["cardUrl"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(card_url, format!("{base}/mcp/server-card"));
    let card: Value = reqwest::blocking::get(&card_url).unwrap().json().unwrap();
    // The same card at the well-known path; both revalidate with their ETag (304, no body).
    let http = reqwest::blocking::Client::new();
    let mut etags = Vec::new();
    for url in [
        card_url.clone(),
        format!("{base}/.well-known/mcp/server-card.json"),
    ] {
        let first = http.get(&url).send().unwrap();
        assert_eq!(first.status().as_u16(), 200, "{url}");
        let etag = first.headers()["etag"].to_str().unwrap().to_string();
        assert_eq!(first.json::<Value>().unwrap(), card, "{url}");
        let again = http
            .get(&url)
            .header("If-None-Match", &etag)
            .send()
            .unwrap();
        assert_eq!(again.status().as_u16(), 304, "{url}");
        assert_eq!(again.headers()["etag"], etag.as_str());
        assert!(again.bytes().unwrap().is_empty());
        let stale = http
            .get(&url)
            .header("If-None-Match", "\"not-this-one\"")
            .send()
            .unwrap();
        assert_eq!(stale.status().as_u16(), 200, "{url}");
        etags.push(etag);
    }
    assert_eq!(etags[0], etags[1]);
    let listing: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("server.json")).unwrap())
            .unwrap();
    assert_eq!(card["name"], listing["name"]);
    assert_eq!(card["version"], listing["version"]);
    assert_eq!(catalog["agents"][0]["id"], listing["name"]);
    assert_eq!(card["remotes"][0]["url"], format!("{base}/mcp"));
    assert_eq!(
        card["capabilities"]["extensions"][UI]["mimeTypes"][0],
        "text/html;profile=mcp-app"
    );
    assert_eq!(tool_names(&card), tool_names(listed.result()));
}

/// Starts a watermarked render with `args` and waits until it awaits approval; its id.
fn awaiting_approval(client: &mut Legacy, args: Value) -> String {
    let accepted = client.tool("vidforge_render_video", args);
    let id = accepted.result()["structuredContent"]["render_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(client, &id, |s| s["state"] == "awaiting_watermark_approval");
    id
}

fn wait_state(client: &mut Legacy, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut status = Value::Null;
    for _ in 0..1200 {
        let reply = client.tool("vidforge_get_render_status", json!({"render_id": id}));
        status = reply.result()["structuredContent"].clone();
        if done(&status) {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("render {id} never got there: {status}");
}

fn get(url: &str, range: Option<&str>) -> (u16, Vec<u8>) {
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut req = client.get(url);
    if let Some(range) = range {
        req = req.header("Range", range);
    }
    let resp = req.send().unwrap();
    let status = resp.status().as_u16();
    (status, resp.bytes().unwrap().to_vec())
}

#[test]
fn the_view_previews_approves_and_plays_for_its_principal_only() {
    let dir = tempfile::tempdir().unwrap();
    let offset = dir.path().join("clock-offset");
    std::fs::write(&offset, "0").unwrap();
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &[
            "--token",
            "token-alice-1=alice",
            "--token",
            "token-bob-22=bob",
        ],
        &[("VIDFORGE_TEST_CLOCK_OFFSET_FILE", offset.to_str().unwrap())],
    );
    let clip = upload(
        &server,
        Some("token-alice-1"),
        &make_clip(dir.path(), "clip.mp4", 320, 180, 0.6, false),
    );
    let logo = upload(&server, Some("token-alice-1"), &make_logo(dir.path()));
    let mut alice = session(&server, Some("token-alice-1"), ui_caps());
    let mut bob = session(&server, Some("token-bob-22"), ui_caps());

    let id = awaiting_approval(
        &mut alice,
        json!({"source_asset_uri": clip, "output_format": "mp4", "resolution": "720p",
               "watermark": {"image_asset_uri": logo, "position": "top_left", "opacity": 0.6}}),
    );

    let preview = alice.tool("vidforge_app_preview", json!({"render_id": id}));
    let sc = &preview.result()["structuredContent"];
    assert_eq!(preview.result()["isError"], false, "{}", preview.body);
    let image = sc["image"].as_str().unwrap();
    assert!(
        image.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{}",
        &image[..40]
    );
    assert_eq!(sc["watermark"]["position"], "top_left");
    assert_eq!(sc["watermark"]["opacity"], 0.6);
    assert_eq!(sc["source_name"], "clip.mp4");

    // Another principal: not found, for the preview and for the decision.
    for (name, args) in [
        ("vidforge_app_preview", json!({"render_id": id})),
        (
            "vidforge_approve_watermark",
            json!({"render_id": id, "approved": true}),
        ),
    ] {
        let refused = bob.tool(name, args);
        assert_eq!(refused.result()["isError"], true, "{name}");
        assert_eq!(
            refused.result()["structuredContent"]["code"],
            "render_not_found"
        );
    }

    let approve = alice.tool(
        "vidforge_approve_watermark",
        json!({"render_id": id, "approved": true}),
    );
    assert_eq!(approve.result()["isError"], false, "{}", approve.body);
    let done = wait_state(&mut alice, &id, |s| s["terminal"] == true);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["watermark_applied"], true);

    let refused = bob.tool("vidforge_app_playback", json!({"render_id": id}));
    assert_eq!(
        refused.result()["structuredContent"]["code"],
        "render_not_found"
    );
    let playback = alice.tool("vidforge_app_playback", json!({"render_id": id}));
    let sc = playback.result()["structuredContent"].clone();
    let url = sc["url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with(&format!("{}/play/{id}/final.mp4?", server.base())),
        "{url}"
    );

    // No credential: the link is enough, with Range as on the download; nothing caches it
    // longer than the link lives (ten minutes).
    let (status, body) = get(&url, None);
    assert_eq!(status, 200);
    let plain = reqwest::blocking::get(&url).unwrap();
    let cache = plain.headers()["cache-control"]
        .to_str()
        .unwrap()
        .to_string();
    let max_age: u64 = cache.rsplit("max-age=").next().unwrap().parse().unwrap();
    assert!(
        cache.starts_with("private") && (590..=600).contains(&max_age),
        "{cache}"
    );
    assert_eq!(body.len() as u64, sc["size_bytes"].as_u64().unwrap());
    let (status, body) = get(&url, Some("bytes=0-99"));
    assert_eq!((status, body.len()), (206, 100));

    // A sandboxed player sends `Origin: null`: accepted; the Host check still applies.
    let client = reqwest::blocking::Client::new();
    let sandboxed = client.get(&url).header("Origin", "null").send().unwrap();
    assert_eq!(sandboxed.status().as_u16(), 200);
    let rebound = client
        .get(&url)
        .header("Host", "evil.example")
        .send()
        .unwrap();
    assert_eq!(rebound.status().as_u16(), 403);

    // Altered: the tag, the principal, the expiry.
    let last = url.pop_last_hex();
    assert_eq!(get(&last, None).0, 403);
    let as_bob = url.replace(&hex_of("alice"), &hex_of("bob"));
    assert_ne!(as_bob, url);
    assert_eq!(get(&as_bob, None).0, 403);
    let longer = url.replacen("&x=", "&x=9", 1);
    assert_eq!(get(&longer, None).0, 403);
    // Expired: eleven minutes later.
    std::fs::write(&offset, "660").unwrap();
    assert_eq!(get(&url, None).0, 403);
}

fn hex_of(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

trait AlterTag {
    fn pop_last_hex(&self) -> String;
}

impl AlterTag for String {
    /// The link with the last hex digit of its tag changed.
    fn pop_last_hex(&self) -> String {
        let mut out = self.clone();
        let last = out.pop().unwrap();
        out.push(if last == '0' { '1' } else { '0' });
        out
    }
}

#[test]
fn with_media_in_a_bucket_the_view_plays_the_presigned_link() {
    use crate::support::s3::{ENV, S3};
    let dir = tempfile::tempdir().unwrap();
    let s3 = S3::start(&dir.path().join("s3"));
    let media = s3.media_args("app");
    let mut args: Vec<&str> = vec!["--token", "token-alice-1=alice"];
    args.extend(media.iter().map(String::as_str));
    let server = Server::start_with_env(&dir.path().join("data"), &args, &ENV);
    let clip = upload(
        &server,
        Some("token-alice-1"),
        &make_clip(dir.path(), "clip.mp4", 320, 180, 0.4, false),
    );
    let mut alice = session(&server, Some("token-alice-1"), ui_caps());

    // The bucket's origin is declared beside the public one, and nothing else.
    let read = alice.request("resources/read", json!({"uri": VIEW}));
    assert_eq!(
        read.result()["contents"][0]["_meta"]["ui"]["csp"]["resourceDomains"],
        json!([server.base(), s3.endpoint()])
    );
    let accepted = alice.tool(
        "vidforge_render_video",
        json!({"source_asset_uri": clip, "output_format": "mp4", "resolution": "720p"}),
    );
    let id = accepted.result()["structuredContent"]["render_id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = wait_state(&mut alice, &id, |s| s["terminal"] == true);
    assert_eq!(done["state"], "succeeded", "{done}");
    let playback = alice.tool("vidforge_app_playback", json!({"render_id": id}));
    let sc = playback.result()["structuredContent"].clone();
    let url = sc["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("{}/", s3.endpoint())), "{url}");
    // Signed for the playback link's ten minutes (not presigned_url_ttl's fifteen).
    assert!(url.contains("X-Amz-Expires=600"), "{url}");
    let (status, body) = get(url, None);
    assert_eq!(status, 200);
    assert_eq!(body.len() as u64, sc["size_bytes"].as_u64().unwrap());
}

/// A 4k watermark preview of pure noise (a PNG of about 25 MB) read inline by 24 concurrent
/// `vidforge_app_preview` calls and 24 concurrent `resources/read`s of its owner: the view gets
/// a copy sized for a chat view (640x360, well under 2 MB), the full preview is read under the
/// principal's inline budget (the reads past it wait, then are refused, temporary), the
/// server's peak memory during the burst grows by less than 384 MB (measured 180-220 MB;
/// before: 24 calls took the server from 109 MB to 1.44 GB), and another principal is
/// answered meanwhile.
#[test]
fn inline_previews_of_a_4k_noise_frame_keep_memory_bounded() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &TWO_PRINCIPALS);
    let noise = dir.path().join("noise.mp4");
    ffmpeg_lavfi(
        "nullsrc=s=3840x2160:r=1:d=1,geq=lum='random(1)*255':cb='random(2)*255':cr='random(3)*255'",
        &[
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-qp",
            "4",
            "-pix_fmt",
            "yuv420p",
        ],
        &noise,
    );
    let clip = upload(&server, Some("token-alice-1"), &noise);
    let logo = upload(&server, Some("token-alice-1"), &make_logo(dir.path()));
    let mut alice = session(&server, Some("token-alice-1"), ui_caps());
    let id = awaiting_approval(
        &mut alice,
        json!({"source_asset_uri": clip, "output_format": "mp4", "resolution": "4k",
               "watermark": {"image_asset_uri": logo}}),
    );
    let uri = format!("vidforge://renders/{id}/watermark-preview.png");
    let mut clients: Vec<Legacy> = (0..48)
        .map(|_| session(&server, Some("token-alice-1"), ui_caps()))
        .collect();
    // The peak from here on.
    server.reset_peak_rss();
    let before = server.rss_kib() << 10;
    let replies: Vec<WireReply> = std::thread::scope(|s| {
        let calls: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(i, client)| {
                let (id, uri) = (id.clone(), uri.clone());
                s.spawn(move || {
                    if i % 2 == 0 {
                        client.tool("vidforge_app_preview", json!({"render_id": id}))
                    } else {
                        client.request("resources/read", json!({"uri": uri}))
                    }
                })
            })
            .collect();
        // Another principal is answered meanwhile (the time shares two cores with 48 clients
        // parsing their answers: printed, not asserted).
        let mut bob = Mcp::new(&server.base()).with_token("token-bob-22");
        let asked = std::time::Instant::now();
        assert_eq!(bob.call("tools/list", json!({}), Caps::NONE).status, 200);
        eprintln!(
            "mcp_app: bob's tools/list during the burst: {:?}",
            asked.elapsed()
        );
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let grown = (server.peak_rss_kib() << 10).saturating_sub(before);
    eprintln!(
        "mcp_app: 48 inline reads of a 4k noise preview: peak RSS +{} MB",
        grown >> 20
    );
    let (mut read_whole, mut refused) = (0, 0);
    for (i, reply) in replies.iter().enumerate() {
        if i % 2 == 0 {
            let image = reply.result()["structuredContent"]["image"]
                .as_str()
                .unwrap();
            let png = image.strip_prefix("data:image/png;base64,").unwrap();
            assert!(
                png.len() < 2 << 20,
                "an inline preview of {} bytes",
                png.len()
            );
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(png)
                .unwrap();
            let info = png::Decoder::new(std::io::Cursor::new(bytes))
                .read_info()
                .unwrap();
            assert_eq!((info.info().width, info.info().height), (640, 360));
        } else if reply.body["result"]["contents"][0]["blob"].is_string() {
            read_whole += 1;
        } else {
            assert!(matches!(reply.status, 429 | 503), "{}", reply.body);
            let data = &reply.body["error"]["data"];
            assert_eq!(data["temporary"], true, "{}", reply.body);
            assert!(data["retry_after_ms"].as_u64().is_some(), "{}", reply.body);
            refused += 1;
        }
    }
    eprintln!("mcp_app: full previews read inline {read_whole}, refused for the budget {refused}");
    assert!(
        read_whole >= 1 && read_whole + refused == 24,
        "{read_whole} {refused}"
    );
    // One full read at a time plus the copies measures 180-220 MB here; unbounded, 24 calls
    // took 1.3 GB more. The bound leaves room for a noisy allocator.
    assert!(grown < 384 << 20, "peak RSS grew by {} MB", grown >> 20);
}
