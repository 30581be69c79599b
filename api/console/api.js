// The admin API as the console calls it: the bearer token from this tab's
// session storage, JSON in and out, the contract's error shape turned into
// an Error with its code.

const tokenKey = "seckill.console.token";

export function token() {
  return sessionStorage.getItem(tokenKey) || "";
}

export function setToken(t) {
  if (t) sessionStorage.setItem(tokenKey, t);
  else sessionStorage.removeItem(tokenKey);
}

// newKey is an Idempotency-Key: crypto.randomUUID where the page is a
// secure context, else a version 4 UUID from getRandomValues (an admin
// listener on a private address over plain HTTP).
export function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export class APIError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
  }
}

// call sends one admin request, bounded by a timeout; opts.key sets the
// Idempotency-Key of the writes that take one.
export async function call(method, path, body, opts = {}) {
  const headers = { Authorization: `Bearer ${token()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (opts.key) headers["Idempotency-Key"] = opts.key;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), opts.timeout || 20000);
  let res;
  try {
    res = await fetch(path, {
      method, headers, signal: ctl.signal, cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new APIError(0, "network", ctl.signal.aborted ? "the admin API did not answer in time" : "the admin API is unreachable");
  } finally {
    clearTimeout(timer);
  }
  if (res.status === 204) return null;
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (!res.ok) {
    const err = (data && data.error) || {};
    throw new APIError(res.status, err.code, err.message);
  }
  return data;
}
