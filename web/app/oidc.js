// @ts-check
/**
 * Sign-in with the institution's OpenID Connect provider, when the server has
 * one (`GET /auth/config`): the authorization code flow with PKCE (S256), a
 * state and a nonce, run in the browser as a public client. The ID token it
 * ends with is the bearer token, kept like a pasted one.
 */

const FLOW_KEY = 'kartei.oidc';

/**
 * @typedef {object} OidcConfig
 * @property {string} issuer @property {string} clientId @property {string} scope
 * @property {string} authorizationEndpoint @property {string} tokenEndpoint
 */

/** @type {Promise<OidcConfig | null> | null} */
let config = null;

/** The provider, or null when the server has none (or does not say). */
export function oidcConfig() {
  if (!config) {
    config = fetch('/auth/config')
      .then((r) => (r.ok ? r.json() : { oidc: null }))
      .then((c) => c.oidc || null)
      .catch(() => null);
  }
  return config;
}

/** @param {Uint8Array} bytes */
function base64url(bytes) {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random() {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

function redirectUri() {
  return `${location.origin}/ui/callback`;
}

/**
 * Leaves for the provider's sign-in page; `returnTo` is where the UI opens
 * again afterwards.
 * @param {OidcConfig} cfg @param {string} returnTo
 */
export async function beginSignIn(cfg, returnTo) {
  const verifier = random();
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  const state = random();
  const nonce = random();
  sessionStorage.setItem(FLOW_KEY, JSON.stringify({ verifier, state, nonce, returnTo }));
  const url = new URL(cfg.authorizationEndpoint);
  for (const [k, v] of Object.entries({
    response_type: 'code',
    client_id: cfg.clientId,
    redirect_uri: redirectUri(),
    scope: cfg.scope,
    state,
    nonce,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  })) {
    url.searchParams.set(k, v);
  }
  location.assign(url.toString());
}

/**
 * At `/ui/callback`: the provider's answer exchanged for the ID token, its
 * state and nonce checked against the flow this tab began.
 * @returns {Promise<{ token: string, returnTo: string }>}
 */
export async function finishSignIn() {
  const params = new URLSearchParams(location.search);
  const flow = JSON.parse(sessionStorage.getItem(FLOW_KEY) || 'null');
  sessionStorage.removeItem(FLOW_KEY);
  if (params.get('error')) throw new Error(params.get('error_description') || params.get('error') || 'error');
  if (!flow || params.get('state') !== flow.state) throw new Error('state');
  const cfg = await oidcConfig();
  if (!cfg) throw new Error('no provider');
  const r = await fetch(cfg.tokenEndpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: params.get('code') || '',
      redirect_uri: redirectUri(),
      client_id: cfg.clientId,
      code_verifier: flow.verifier,
    }),
  });
  const answer = await r.json().catch(() => ({}));
  if (!r.ok || !answer.id_token) throw new Error(answer.error_description || answer.error || `HTTP ${r.status}`);
  const payload = JSON.parse(atob(answer.id_token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')));
  if (payload.nonce !== flow.nonce) throw new Error('nonce');
  return { token: answer.id_token, returnTo: flow.returnTo || '/ui/queue' };
}
