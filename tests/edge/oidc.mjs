// A real OpenID Connect provider for the browser test (the `oidc-provider`
// package, its development login and consent pages): one public client,
// `kartei-ui`, with the authorization code flow and PKCE; an account's
// `roles` claim goes into the ID token. Any login name signs in; its roles
// are the part after a dash (`olga-editor` is an editor, `paul` has none).
//
//   node tests/edge/oidc.mjs PORT REDIRECT_URI
import Provider from 'oidc-provider';

const [port, redirect] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'kartei-ui',
      token_endpoint_auth_method: 'none',
      application_type: 'web',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: [redirect],
    },
  ],
  claims: { openid: ['sub'], profile: ['name'], roles: ['roles'] },
  scopes: ['openid', 'profile', 'roles'],
  // The claims of the scopes asked for go into the ID token, which the UI
  // sends as its bearer token.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  clientBasedCORS: () => true,
  features: { devInteractions: { enabled: true } },
  findAccount: (_ctx, sub) => ({
    accountId: sub,
    claims: () => ({ sub, name: sub, roles: sub.includes('-') ? sub.split('-').slice(1) : [] }),
  }),
  ttl: { IdToken: 600, AccessToken: 600, AuthorizationCode: 60, Session: 3600, Interaction: 600, Grant: 3600 },
});
// Plain HTTP on the loopback address: the library allows it only in development.
provider.proxy = false;
provider.listen(Number(port), '127.0.0.1', () => console.log(`oidc provider on ${issuer}`));
