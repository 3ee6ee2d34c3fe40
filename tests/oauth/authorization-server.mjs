// The authorization server of vidforge's OAuth tests: one `oidc-provider` (npm, OpenID-certified;
// nobody here wrote it) on 127.0.0.1, configured for vidforge as an OAuth 2.1 resource server:
// resource indicators (RFC 8707) with JWT access tokens (RFC 9068, `typ: at+jwt`, RS256),
// the client-credentials grant, open dynamic client registration (RFC 7591), authorization code
// with PKCE (required for every client) and an automatic sign-in (no form: the account is the
// `login_hint` authorization parameter, `alice` when absent) so headless tests and Chromium can
// run the authorization-code flow without typing. Started by tests/support/oauth.rs.
//
// Flags (or env):
//   --port N             (OAUTH_PORT)        listens on 127.0.0.1:N; the issuer is http://127.0.0.1:N
//   --resource URI       (OAUTH_RESOURCE)    vidforge's resource (its MCP endpoint URI); repeatable.
//                                            Any other absolute http(s) URI is served too, as its own
//                                            audience (tokens for the wrong audience).
//   --keys FILE          (OAUTH_KEYS)        private JWKS (JSON); made (one RS256 key, random kid)
//                                            when missing. FILE.pem / FILE.pub.pem get the signing
//                                            key's private (PKCS#8) and public (SPKI) PEM.
//   --redirect-uri URI   (OAUTH_REDIRECT_URI) of the `vidforge-browser` client; repeatable.
//   --ttl SECONDS        (OAUTH_TTL)         access-token lifetime, default 300 (at least 300).
//   --default-login NAME (OAUTH_DEFAULT_LOGIN) the account signed in without a login_hint
//                                            (default alice; a browser's sign-in sends none).
//
// Prints one JSON line {"issuer", "jwks_uri", "kid"} on stdout once listening; errors go to
// stderr; SIGTERM/SIGINT close it and exit 0.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { parseArgs } from 'node:util';

import Provider, { errors, interactionPolicy } from 'oidc-provider';

const SCOPES = ['vidforge:render', 'vidforge:read', 'vidforge:admin'];

// Static clients: the confidential test clients of the client-credentials grant (a client's
// tokens have `sub` = its client id) and vidforge's own browser sign-in client.
const CLIENTS = {
  'vidforge-tests': 'vidforge-tests-secret',
  'vidforge-tests-2': 'vidforge-tests-2-secret',
  'vidforge-browser': 'vidforge-browser-secret',
};

function fail(message) {
  process.stderr.write(`authorization-server: ${message}\n`);
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    resource: { type: 'string', multiple: true },
    keys: { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true },
    ttl: { type: 'string' },
    'default-login': { type: 'string' },
  },
  strict: true,
});
const list = (flag, env) => flag ?? (process.env[env] ? process.env[env].split(/\s+/).filter(Boolean) : []);
const port = Number(values.port ?? process.env.OAUTH_PORT);
const resources = list(values.resource, 'OAUTH_RESOURCE');
const keysFile = values.keys ?? process.env.OAUTH_KEYS;
const redirectUris = list(values['redirect-uri'], 'OAUTH_REDIRECT_URI');
const ttl = Number(values.ttl ?? process.env.OAUTH_TTL ?? 300);
// The account signed in when an authorization request names none (`login_hint`).
const defaultLogin = values['default-login'] ?? process.env.OAUTH_DEFAULT_LOGIN ?? 'alice';
if (!Number.isInteger(port) || port <= 0 || port > 65535) fail('--port N is required');
if (resources.length === 0) fail('--resource URI is required');
if (!keysFile) fail('--keys FILE is required');
if (!Number.isInteger(ttl) || ttl < 300) fail('--ttl must be an integer >= 300');

// The signing keys: a private JWKS, generated on first use, kept across restarts (same file).
function loadKeys(file) {
  if (!fs.existsSync(file)) {
    const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    const jwk = {
      ...privateKey.export({ format: 'jwk' }),
      kid: `vf-${crypto.randomBytes(8).toString('hex')}`,
      alg: 'RS256',
      use: 'sig',
    };
    fs.writeFileSync(file, `${JSON.stringify({ keys: [jwk] }, null, 2)}\n`, { mode: 0o600 });
  }
  const jwks = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (!Array.isArray(jwks.keys) || jwks.keys.length === 0) fail(`${file} holds no keys`);
  const signing = crypto.createPrivateKey({ key: jwks.keys[0], format: 'jwk' });
  fs.writeFileSync(`${file}.pem`, signing.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  fs.writeFileSync(
    `${file}.pub.pem`,
    crypto.createPublicKey(signing).export({ type: 'spki', format: 'pem' }),
  );
  return jwks;
}
const jwks = loadKeys(keysFile);

const issuer = `http://127.0.0.1:${port}`;
const allScopes = SCOPES.join(' ');

const clients = [
  {
    client_id: 'vidforge-tests',
    client_secret: CLIENTS['vidforge-tests'],
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope: allScopes,
  },
  {
    client_id: 'vidforge-tests-2',
    client_secret: CLIENTS['vidforge-tests-2'],
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope: allScopes,
  },
];
if (redirectUris.length > 0) {
  clients.push({
    client_id: 'vidforge-browser',
    client_secret: CLIENTS['vidforge-browser'],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: redirectUris,
    token_endpoint_auth_method: 'client_secret_basic',
    scope: `openid offline_access ${allScopes}`,
  });
}

function isResourceUri(value) {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && !url.hash;
  } catch {
    return false;
  }
}

// The default prompts, plus: a `login_hint` naming another account than the signed-in one
// signs in again (one browser can sign in as alice, then as bob).
const policy = interactionPolicy.base();
policy.get('login').checks.add(new interactionPolicy.Check(
  'login_hint_mismatch',
  'login_hint names another account than the signed-in one',
  (ctx) => {
    const { oidc } = ctx;
    const hint = oidc.params.login_hint;
    return hint && oidc.session.accountId && hint !== oidc.session.accountId
      ? interactionPolicy.Check.REQUEST_PROMPT
      : interactionPolicy.Check.NO_NEED_TO_PROMPT;
  },
));

const provider = new Provider(issuer, {
  interactions: { policy },
  clients,
  jwks,
  // OAuth 2.1: the code flow only (no implicit, no hybrid).
  responseTypes: ['code'],
  scopes: ['openid', 'offline_access', ...SCOPES],
  claims: { openid: ['sub'] },
  // Headless and ephemeral: an in-memory adapter (the default), fixed cookie keys.
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    // Plain bearer tokens (vidforge takes them in the Authorization header only).
    dPoP: { enabled: false },
    clientCredentials: { enabled: true },
    registration: { enabled: true, initialAccessToken: false },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // A client that names no resource gets none (an opaque, userinfo-only token): RFC 8707
      // wants clients to say which resource they ask for, and the MCP spec makes them.
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      // The token request of the code flow may leave out the resource granted at /auth.
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, resourceIndicator) => {
        if (!isResourceUri(resourceIndicator)) {
          throw new errors.InvalidTarget('resource must be an absolute http(s) URI');
        }
        // vidforge's resource(s), and any other URI as its own audience (the wrong-audience
        // tests get a genuine token for somebody else).
        return {
          audience: resourceIndicator,
          scope: allScopes,
          accessTokenTTL: ttl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  ttl: {
    AccessToken: ttl,
    ClientCredentials: ttl,
    AuthorizationCode: 300,
    IdToken: ttl,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
    RefreshToken: 3600,
  },
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  renderError: async (ctx, out) => {
    ctx.type = 'application/json';
    ctx.body = out;
  },
});

// The automatic interaction: `/interaction/<uid>` signs in the account named by `login_hint`
// (default `alice`, or --default-login) and grants whatever OIDC scopes and resource scopes the client asked for.
async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  let result;
  if (prompt.name === 'login') {
    const accountId = typeof params.login_hint === 'string' && params.login_hint ? params.login_hint : defaultLogin;
    result = { login: { accountId } };
  } else if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  } else {
    result = { error: 'access_denied', error_description: `unsupported prompt ${prompt.name}` };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

provider.on('server_error', (_ctx, err) => process.stderr.write(`authorization-server: server_error: ${err.stack ?? err}\n`));
for (const event of ['grant.error', 'registration_create.error', 'authorization.error', 'introspection.error']) {
  provider.on(event, (_ctx, err) => process.stderr.write(`authorization-server: ${event}: ${err.message}${err.error_description ? ` (${err.error_description})` : ''}\n`));
}

const callback = provider.callback();
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((err) => {
      process.stderr.write(`authorization-server: interaction: ${err.stack ?? err}\n`);
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'text/plain' });
      }
      res.end('interaction failed\n');
    });
    return;
  }
  callback(req, res);
});
server.on('error', (err) => fail(`listen on 127.0.0.1:${port}: ${err.message}`));
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks`, kid: jwks.keys[0].kid })}\n`);
});

function shutdown() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
