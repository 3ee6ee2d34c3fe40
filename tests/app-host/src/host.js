// A small MCP Apps host for vidforge's tests: the official TypeScript MCP client talks to the
// server (through the test's same-origin /mcp relay), and the official ext-apps host bridge
// (AppBridge + PostMessageTransport) renders the tool's view in a sandbox proxy on another
// origin, which loads the view in an inner iframe under the CSP of `_meta.ui.csp`.
// Bundled by esbuild into build/host.js; driven by tests/app-host/host_test.py.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  AppBridge,
  PostMessageTransport,
  getToolUiResourceUri,
  isToolVisibilityAppOnly,
} from "@modelcontextprotocol/ext-apps/app-bridge";

const UI = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";
const query = new URLSearchParams(location.search);
const state = { appCalls: [], refusedAppCalls: [], errors: [] };
window.hostState = state;
const hostInfo = { name: "vidforge-test-host", version: "1.0.0" };

async function connect() {
  const client = new Client(hostInfo, { capabilities: { extensions: { [UI]: { mimeTypes: [MIME] } } } });
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", location.href), {
    requestInit: { headers: { Authorization: `Bearer ${query.get("token")}` } },
  });
  await client.connect(transport);
  return client;
}

async function main() {
  const client = await connect();
  const { tools } = await client.listTools();
  state.allTools = tools.map((t) => t.name);
  // What this host would give the model: visibility honoured.
  state.modelTools = tools.filter((t) => !isToolVisibilityAppOnly(t)).map((t) => t.name);
  const mode = query.get("mode") || "render";
  if (mode === "call") {
    state.callResult = await client.callTool({ name: query.get("tool"), arguments: JSON.parse(query.get("args")) });
    state.done = true;
    return;
  }
  const render = tools.find((t) => t.name === "vidforge_render_video");
  const uri = getToolUiResourceUri(render);
  const args = JSON.parse(query.get("args"));
  const result = await client.callTool({ name: render.name, arguments: args });
  state.renderResult = result;
  const read = await client.readResource({ uri });
  const content = read.contents[0];
  if (content.mimeType !== MIME) throw new Error(`view MIME ${content.mimeType}`);
  const csp = content._meta?.ui?.csp;
  state.csp = csp;

  const iframe = document.createElement("iframe");
  iframe.id = "sandbox";
  iframe.setAttribute("sandbox", "allow-scripts allow-same-origin");
  iframe.style.cssText = "width:420px;height:700px;border:1px solid #999";
  iframe.src = query.get("sandbox");
  const bridge = new AppBridge(null, hostInfo, { serverTools: {}, logging: {} }, {
    hostContext: { theme: "light", displayMode: "inline", platform: "web", containerDimensions: { maxWidth: 420 } },
  });
  // The host decides which tools the view may call: only those whose visibility has "app".
  bridge.oncalltool = async (params) => {
    const tool = tools.find((t) => t.name === params.name);
    const visibility = tool?._meta?.ui?.visibility ?? ["model", "app"];
    if (!tool || !visibility.includes("app")) {
      state.refusedAppCalls.push(params.name);
      throw new Error(`tool ${params.name} is not callable by the app`);
    }
    state.appCalls.push(params.name);
    return client.callTool(params);
  };
  bridge.onsizechange = ({ height }) => {
    if (height) iframe.style.height = `${Math.min(height + 4, 2000)}px`;
  };
  bridge.onsandboxready = () => {
    bridge.sendSandboxResourceReady({ html: content.text, csp, permissions: content._meta?.ui?.permissions });
  };
  bridge.oninitialized = () => {
    state.viewInitialized = true;
    bridge.sendToolInput({ arguments: args });
    bridge.sendToolResult(result);
  };
  document.body.appendChild(iframe);
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  state.bridgeConnected = true;
}

main().catch((e) => {
  state.errors.push(String(e && e.stack || e));
});
