// Drives vidforge with the official TypeScript MCP client (@modelcontextprotocol/client 2.x)
// and the official tasks extension client (@modelcontextprotocol/ext-tasks 0.2.x).
//
// Scenario: discover, list tools, call vidforge_render_video with a watermark through the task
// path (the ext-tasks session polls tasks/get), answer the form elicitation (the session sends
// it back with tasks/update), read the resource_link, download the video over HTTP and check
// with ffprobe that it decodes at the requested size. Every step asserts; failure exits 1.
//
// Usage: node task_render.mjs MCP_URL CLIP_URI LOGO_URI
// Set VIDFORGE_TOKEN when the server requires bearer tokens.
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const [url, clip, logo] = process.argv.slice(2);
if (!url || !clip || !logo) {
  console.error("usage: node task_render.mjs MCP_URL CLIP_URI LOGO_URI");
  process.exit(2);
}

function check(cond, what, got) {
  if (!cond) throw new Error(`${what}; got: ${JSON.stringify(got)}`);
  console.log(`  ok: ${what}`);
}

// Sent with every request (MCP and the download) when set.
const auth = process.env.VIDFORGE_TOKEN ? { authorization: `Bearer ${process.env.VIDFORGE_TOKEN}` } : {};

const clientInfo = { name: "vidforge-ts-client-check", version: "1.0.0" };
const clientCapabilities = { elicitation: { form: {} }, extensions: { [TASKS]: {} } };

// The tasks session needs a raw JSON-RPC path (the SDK's own codecs reject V2 task traffic):
// one POST per request with the 2026-07-28 routing headers, answered as JSON or SSE, handed
// back in the port's `{kind: "result" | "error"}` shape.
// The session hands over `{method, params}`; the host owns JSON-RPC framing and ids.
let nextId = 1;
async function rawDispatch(body, options = {}) {
  const request = { jsonrpc: "2.0", id: `ts-${nextId++}`, ...body };
  const params = request.params ?? {};
  const headers = {
    ...auth,
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": PROTOCOL,
    "mcp-method": request.method,
  };
  const name = request.method === "tools/call" || request.method === "prompts/get"
    ? params.name
    : request.method.startsWith("tasks/") ? params.taskId : request.method === "resources/read" ? params.uri : undefined;
  if (typeof name === "string") headers["mcp-name"] = name;
  if (process.env.VIDFORGE_TS_DEBUG) console.error("->", JSON.stringify(request));
  const resp = await fetch(url, { method: "POST", headers, body: JSON.stringify(request), signal: options.signal });
  const text = await resp.text();
  if ((resp.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    const messages = text.split("\n").filter((l) => l.startsWith("data:"))
      .map((l) => { try { return JSON.parse(l.slice(5).trim()); } catch { return undefined; } })
      .filter((m) => m && m.id !== undefined);
    if (messages.length === 0) throw new Error(`no JSON-RPC response in SSE answer to ${request.method}`);
    return toPort(messages[messages.length - 1]);
  }
  return toPort(JSON.parse(text));
}

function toPort(message) {
  if (message.error !== undefined) return { kind: "error", error: message.error };
  if (message.result !== undefined) return { kind: "result", result: message.result };
  throw new Error(`not a JSON-RPC response: ${JSON.stringify(message)}`);
}

const client = new Client(clientInfo, {
  versionNegotiation: { mode: { pin: PROTOCOL } },
  capabilities: { elicitation: { form: {} } },
});
const transport = new StreamableHTTPClientTransport(new URL(url), process.env.VIDFORGE_TOKEN ? { requestInit: { headers: auth } } : undefined);
const work = mkdtempSync(join(tmpdir(), "vidforge-ts-"));
try {
  console.log("discover + tools/list");
  await client.connect(transport);
  check(client.getNegotiatedProtocolVersion() === PROTOCOL, "negotiated 2026-07-28", client.getNegotiatedProtocolVersion());
  check(client.getServerVersion()?.name === "vidforge", "server is vidforge", client.getServerVersion());
  const caps = client.getServerCapabilities();
  check(caps?.extensions?.[TASKS] !== undefined, "server advertises the tasks extension", caps);
  const { tools } = await client.listTools();
  const render = tools.find((t) => t.name === "vidforge_render_video");
  check(render !== undefined, "tools/list has vidforge_render_video", tools.map((t) => t.name));

  console.log("render with a watermark through the task path");
  const seen = { statuses: new Set(), elicitations: 0 };
  const session = createTaskSessionFromClient(client, {
    endpointId: "vidforge-ts-check",
    rawDispatch,
    v2RequestFraming: { protocolVersion: PROTOCOL, clientInfo, clientCapabilities },
    onInputRequest: async (request, context) => {
      check(request.kind === "elicitation", "input request is an elicitation", request);
      check(context.delivery === "task-update", "elicitation arrives through the task (answered by tasks/update)", context);
      check(request.params.mode === "form", "form-mode elicitation", request.params);
      check(String(request.params.message).includes("top_left, opacity 0.6"), "elicitation describes the watermark", request.params.message);
      seen.elicitations += 1;
      return { action: "accept", content: { approved: true } };
    },
  });
  let result;
  try {
    const execution = await session.callTool("vidforge_render_video", {
      source_asset_uri: clip,
      output_format: "mp4",
      resolution: "720p",
      watermark: { image_asset_uri: logo, position: "top_left", opacity: 0.6 },
    });
    const { outcome } = await execution.settle({
      onEvent: (event) => {
        if (event.type === "task") seen.statuses.add(event.task.status);
      },
    });
    check(outcome.status === "completed", "task completed", outcome);
    result = resultFromTaskOutcome(outcome);
  } finally {
    await session.close();
  }
  check(seen.elicitations === 1, "exactly one elicitation was answered", seen.elicitations);
  check(seen.statuses.has("input_required"), "tasks/get showed input_required", [...seen.statuses]);
  check(result.isError === false, "render result is not an error", result);
  const sc = result.structuredContent;
  check(sc?.resolution === "720p" && sc?.watermark_applied === true, "structured result: 720p, watermark applied", sc);
  const link = result.content.find((c) => c.type === "resource_link");
  check(link !== undefined && link.uri === sc.video_uri, "result carries a resource_link to the video", result.content);

  console.log("read the resource_link, download, probe");
  const read = await client.readResource({ uri: link.uri });
  const contents = read.contents[0];
  check(contents.uri === link.uri, "resources/read answers for the linked video", contents);
  // The link advertises its plain-HTTP download URL (videos are too large to inline).
  const http = link._meta?.["com.vidforge/download_url"];
  check(typeof http === "string" && http.startsWith("http"), "resource_link carries a download URL", link._meta);
  const resp = await fetch(http, { headers: auth });
  check(resp.ok, `GET ${http} succeeds`, resp.status);
  const bytes = Buffer.from(await resp.arrayBuffer());
  check(bytes.length === sc.size_bytes, "downloaded size matches size_bytes", [bytes.length, sc.size_bytes]);
  const file = join(work, "final.mp4");
  writeFileSync(file, bytes);
  const probe = JSON.parse(execFileSync("ffprobe", ["-v", "error", "-select_streams", "v:0", "-count_frames",
    "-show_entries", "stream=width,height,codec_name,nb_read_frames", "-of", "json", file]).toString());
  const v = probe.streams[0];
  check(v.width === 1280 && v.height === 720, "video decodes at 1280x720", v);
  check(Number(v.nb_read_frames) > 0, "video has decodable frames", v);
  console.log("typescript task client: PASS");
} catch (err) {
  console.error(`typescript task client: FAIL: ${err?.stack ?? err}`);
  if (err?.cause) console.error("caused by:", err.cause);
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
  rmSync(work, { recursive: true, force: true });
}
