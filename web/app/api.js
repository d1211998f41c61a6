// @ts-check
/**
 * The UI's only way to the server: GraphQL over HTTP (POST /graphql, JSON),
 * the same public API front-end apps use. The token lives in sessionStorage
 * (one tab, gone when the browser closes); an UNAUTHENTICATED answer clears it
 * and calls the handler the shell installed, which sends the curator to sign
 * in again without losing what the view holds.
 */

const TOKEN_KEY = 'kartei.token';

/** An error the server reported, with its `extensions.code`. */
export class ApiError extends Error {
  /**
   * @param {string} message
   * @param {string} code
   * @param {Record<string, any>} [extensions]
   */
  constructor(message, code, extensions = {}) {
    super(message);
    this.code = code;
    this.extensions = extensions;
  }
}

/** @type {() => void} */
let onUnauthenticated = () => {};

/** @param {() => void} handler called when the server refuses the token */
export function setUnauthenticatedHandler(handler) {
  onUnauthenticated = handler;
}

/** @returns {string | null} */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** @param {string | null} value */
export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/**
 * Runs one GraphQL operation; resolves with `data`, or rejects with the first
 * error as an ApiError (the network failing is code NETWORK).
 * @param {string} query
 * @param {Record<string, any>} [variables]
 * @param {{ token?: string | null }} [options] another token than the stored one
 * @returns {Promise<any>}
 */
export async function gql(query, variables = {}, options = {}) {
  const bearer = options.token === undefined ? token() : options.token;
  /** @type {Record<string, string>} */
  const headers = {
    'content-type': 'application/json',
    accept: 'application/graphql-response+json, application/json',
  };
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  let response;
  try {
    response = await fetch('/graphql', {
      method: 'POST',
      headers,
      body: JSON.stringify({ query, variables }),
    });
  } catch (e) {
    throw new ApiError(e instanceof Error ? e.message : String(e), 'NETWORK');
  }
  let body;
  try {
    body = await response.json();
  } catch {
    throw new ApiError(`HTTP ${response.status}`, response.status >= 500 ? 'UNAVAILABLE' : 'BAD_REQUEST');
  }
  const error = body.errors && body.errors[0];
  if (error) {
    const code = (error.extensions && error.extensions.code) || 'INTERNAL';
    if (code === 'UNAUTHENTICATED' && bearer && options.token === undefined) {
      setToken(null);
      onUnauthenticated();
    }
    throw new ApiError(error.message, code, error.extensions || {});
  }
  return body.data;
}

/**
 * Saves what a GET answers as a file (an export), sent with the stored
 * token; rejects with the server's error as an ApiError. The browser holds
 * the whole file before it is saved: for very large exports use the
 * endpoint directly (README, "Export").
 * @param {string} path with its query string
 * @param {string} accept
 * @returns {Promise<number>} the bytes saved
 */
export async function download(path, accept) {
  const bearer = token();
  /** @type {Record<string, string>} */
  const headers = { accept };
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  let response;
  try {
    response = await fetch(path, { headers });
  } catch (e) {
    throw new ApiError(e instanceof Error ? e.message : String(e), 'NETWORK');
  }
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    const error = (body.errors && body.errors[0]) || {};
    throw new ApiError(error.message || `HTTP ${response.status}`, (error.extensions && error.extensions.code) || 'UNAVAILABLE');
  }
  const blob = await response.blob();
  const name = /filename="([^"]+)"/.exec(response.headers.get('content-disposition') || '');
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name ? name[1] : 'export';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  return blob.size;
}

/**
 * Runs `fn` at most once per `ms` of quiet: the last call wins.
 * @template {any[]} A
 * @param {(...args: A) => void} fn
 * @param {number} ms
 * @returns {(...args: A) => void}
 */
export function debounce(fn, ms) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
