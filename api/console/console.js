// The operator console: the sales, one sale's live view, and the admin
// API's actions, each behind a confirmation. Everything it shows and does
// goes through the admin API (api.js).

import { call, newKey, setToken, token } from "./api.js";

const $ = (id) => document.getElementById(id);
const refreshEvery = 2000;

// The reservation path's filter layers, cheapest first; a layer the page
// does not know is listed after them.
const layers = ["validation", "global_limit", "addr_limit", "sale_cache", "gate", "sold_out_mark",
  "user_limit", "blacklist", "lottery", "redis", "database"];
// Outcomes that let a request through its layer.
const passed = new Set(["pass", "ok", "replay"]);
const statuses = ["QUEUED", "PENDING_PAYMENT", "PAID", "EXPIRED", "CANCELLED", "FAILED"];

const state = { sales: [], selected: 0, detail: null, timer: 0, lastReport: null };

// el builds an element; text is set as text, never parsed as HTML.
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const num = (n) => (n ?? 0).toLocaleString("en-US");
const money = (cents) => `¥${(cents / 100).toFixed(2)}`;
const when = (iso) => new Date(iso).toLocaleString("en-GB", { dateStyle: "short", timeStyle: "short" });
const badge = (text, cls = text) => el("span", { class: `badge ${cls}` }, text);
// meter is a bar px wide; sized through the CSSOM, as the page's policy
// refuses style attributes.
function meter(px, cls = "") {
  const m = el("span", { class: `meter ${cls}` });
  m.style.width = `${Math.max(1, Math.round(px))}px`;
  return m;
}

function toast(text, failed = false) {
  const t = $("toast");
  t.textContent = text;
  t.classList.toggle("failed", failed);
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 3500);
}

function logActivity(text, failed = false) {
  const li = el("li", failed ? { class: "failed" } : {}, el("time", {}, new Date().toLocaleTimeString("en-GB")), text);
  $("log").prepend(li);
  while ($("log").children.length > 50) $("log").lastChild.remove();
}

// ---- sign-in ----

function showSignedIn(on) {
  $("login").hidden = on;
  $("app").hidden = !on;
  for (const id of ["sign-out", "new-sale", "live"]) $(id).hidden = !on;
}

async function signIn(ev) {
  ev.preventDefault();
  const t = $("token").value.trim();
  setToken(t);
  try {
    await call("GET", "/admin/v1/sales");
  } catch (e) {
    setToken("");
    $("login-error").textContent = e.status === 401 || e.status === 403 ? "That token is not an admin token." : e.message;
    return;
  }
  $("token").value = "";
  $("login-error").textContent = "";
  start();
}

function signOut() {
  setToken("");
  clearTimeout(state.timer);
  showSignedIn(false);
}

// ---- refresh ----

async function refresh() {
  clearTimeout(state.timer);
  try {
    const [list, appeals] = await Promise.all([
      call("GET", "/admin/v1/sales"),
      call("GET", "/admin/v1/appeals?state=open"),
    ]);
    state.sales = list.sales;
    renderSales();
    renderAppeals(appeals.appeals || []);
    if (state.selected) {
      state.detail = await call("GET", `/admin/v1/sales/${state.selected}`);
      renderDetail();
    }
    $("updated").textContent = new Date().toLocaleTimeString("en-GB");
  } catch (e) {
    if (e.status === 401) {
      signOut();
      $("login-error").textContent = "The token was refused; sign in again.";
      return;
    }
    $("updated").textContent = `error: ${e.message}`;
  }
  state.timer = setTimeout(refresh, refreshEvery);
}

function renderSales() {
  const body = $("sales").tBodies[0];
  body.replaceChildren(...state.sales.map((s) => {
    const tr = el("tr", { dataset: { saleId: s.sale_id } },
      el("td", {}, s.sale_id),
      el("td", { title: s.title }, s.title),
      el("td", {}, badge(s.control === "paused" ? "paused" : s.state, s.control === "paused" ? "paused" : s.state)),
      el("td", {}, badge(s.mode)),
      el("td", { class: "num" }, `${num(s.stock_left)} / ${num(s.stock_total)}`),
      el("td", { class: "num" }, num(s.waitlist_length)),
      el("td", { class: "num" }, s.challenge_difficulty ? num(s.challenge_difficulty) : "—"));
    if (s.sale_id === state.selected) tr.classList.add("selected");
    return tr;
  }));
  $("sales-count").textContent = `${state.sales.length} shown`;
}

function select(id) {
  state.selected = id;
  state.lastReport = null;
  history.replaceState(null, "", `#sale=${id}`);
  $("empty").hidden = true;
  $("detail").hidden = false;
  refresh();
}

function renderDetail() {
  const { sale, orders, refunds } = state.detail;
  $("d-title").textContent = sale.title;
  $("d-id").textContent = `sale ${sale.sale_id} · goods ${sale.goods_id}`;
  $("d-window").textContent = `${when(sale.starts_at)} → ${when(sale.ends_at)}`;
  $("d-price").textContent = `${money(sale.price_cents)} · pay within ${sale.payment_window_seconds}s${sale.restricted ? " · allowlist only" : ""}`;
  $("d-state").replaceWith(Object.assign(badge(sale.state), { id: "d-state" }));
  $("d-control").replaceWith(Object.assign(badge(sale.control), { id: "d-control" }));
  $("d-mode").replaceWith(Object.assign(badge(`${sale.mode} mode`, sale.mode), { id: "d-mode" }));
  $("d-stock").textContent = `${num(sale.stock_left)} / ${num(sale.stock_total)}`;
  $("d-stock-bar").style.width = `${sale.stock_total ? (100 * sale.stock_left) / sale.stock_total : 0}%`;
  $("d-waitlist").textContent = num(sale.waitlist_length);
  $("d-pending").textContent = num(orders.PENDING_PAYMENT);
  $("d-paid").textContent = num(orders.PAID);
  $("d-refunds").textContent = num(refunds);
  $("d-challenge").textContent = sale.challenge_difficulty ? num(sale.challenge_difficulty) : "off";
  for (const b of document.querySelectorAll("[data-action]")) {
    const a = b.dataset.action;
    b.disabled = (a === "pause" && sale.control !== "active") || (a === "resume" && sale.control !== "paused") ||
      (a === "stop" && sale.control === "stopped");
  }
  renderOrders(orders);
  renderFunnel(state.detail.funnel || []);
  renderReport();
}

function renderOrders(orders) {
  const names = [...statuses, ...Object.keys(orders).filter((k) => !statuses.includes(k))];
  const total = names.reduce((n, k) => n + (orders[k] || 0), 0) || 1;
  $("orders").tBodies[0].replaceChildren(...names.map((k) => el("tr", { dataset: { status: k } },
    el("td", {}, k),
    el("td", { class: "num" }, num(orders[k])),
    el("td", {}, meter((80 * (orders[k] || 0)) / total)))));
}

function renderFunnel(counts) {
  const byLayer = new Map();
  for (const c of counts) {
    const l = byLayer.get(c.layer) || { pass: 0, refused: 0, reasons: [] };
    if (passed.has(c.outcome)) l.pass += c.count;
    else { l.refused += c.count; l.reasons.push(`${c.outcome} ${num(c.count)}`); }
    byLayer.set(c.layer, l);
  }
  const names = [...layers.filter((l) => byLayer.has(l)), ...[...byLayer.keys()].filter((l) => !layers.includes(l))];
  const top = Math.max(1, ...names.map((n) => byLayer.get(n).pass + byLayer.get(n).refused));
  $("funnel").tBodies[0].replaceChildren(...names.map((n) => {
    const l = byLayer.get(n);
    return el("tr", { dataset: { layer: n, pass: l.pass, refused: l.refused } },
      el("td", {}, n),
      el("td", { class: "num" }, num(l.pass), " ", meter((60 * l.pass) / top)),
      el("td", { class: "num" }, num(l.refused), " ", meter((60 * l.refused) / top, "refused")),
      el("td", { class: "reasons", title: l.reasons.join(", ") }, l.reasons.join(", ") || "—"));
  }));
  if (!names.length) $("funnel").tBodies[0].replaceChildren(el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No reservation requests yet.")));
}

// renderReport shows a fresh reconciliation when the operator ran one for
// this sale, else the sale workflow's last report.
function renderReport() {
  const d = state.detail;
  const box = $("report");
  let rep = state.lastReport;
  $("report-source").textContent = rep ? `fresh run, ${new Date(rep.checked_at || Date.now()).toLocaleTimeString("en-GB")}` : "the sale workflow's last report";
  if (!rep) rep = d.report;
  if (!rep) {
    box.replaceChildren(el("p", { class: "muted" }, `No report: ${d.report_error || "none yet"}.`));
    return;
  }
  if (rep.report === null || rep.phase) {
    box.replaceChildren(el("p", { class: "muted" }, `Phase ${rep.phase}: ${rep.note || "no report yet"}.`));
    return;
  }
  const disc = rep.discrepancies || [];
  const line = el("div", { class: "report-line" },
    el("span", { id: "report-verdict", class: rep.consistent ? "ok" : "bad" }, rep.consistent ? "✓ consistent" : "✗ inconsistent"),
    el("span", {}, "redis stock ", el("b", {}, num(rep.redis_stock))),
    el("span", {}, "db stock ", el("b", {}, num(rep.db_stock))),
    el("span", {}, "in flight ", el("b", {}, num(rep.in_flight))),
    el("span", {}, "inbox ", el("b", {}, num(rep.inbox_pending))),
    el("span", {}, "dead letters ", el("b", {}, num(rep.dead_letters))),
    el("span", { class: "muted" }, rep.checked_at ? `checked ${new Date(rep.checked_at).toLocaleTimeString("en-GB")}` : ""));
  const table = el("table", { class: "grid compact", id: "discrepancies" },
    el("thead", {}, el("tr", {}, el("th", {}, "Kind"), el("th", {}, "User"), el("th", {}, "Token"), el("th", {}, "Detail"))),
    el("tbody", {}, ...(disc.length ? disc.map((x) => el("tr", {},
      el("td", {}, badge(x.kind, "bad")), el("td", {}, x.user_id ?? "—"), el("td", { title: x.token || "" }, x.token || "—"),
      el("td", { title: x.detail || "" }, `${x.detail || ""}${x.repaired ? " (repaired)" : ""}`)))
      : [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No discrepancies."))])));
  box.replaceChildren(line, table);
}

function renderAppeals(appeals) {
  $("appeals-count").textContent = appeals.length ? `${appeals.length}` : "";
  const body = $("appeals").tBodies[0];
  if (!appeals.length) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "None open.")));
    return;
  }
  body.replaceChildren(...appeals.map((a) => el("tr", { dataset: { appealId: a.appeal_id }, title: a.message },
    el("td", {}, a.appeal_id), el("td", {}, a.user_id), el("td", {}, a.sale_id), el("td", {}, a.reason),
    el("td", {}, el("button", { class: "btn", dataset: { resolve: a.appeal_id } }, "Resolve…")))));
  body.__appeals = new Map(appeals.map((a) => [String(a.appeal_id), a]));
}

// ---- confirmations ----

// confirmAction opens the confirmation: fields (a node or none), then run
// with the dialog's form and an Idempotency-Key made when it opened, so a
// second click of Confirm repeats the same write. A failure keeps the
// dialog open with the API's message.
function confirmAction(title, body, run) {
  const dlg = $("confirm");
  const key = newKey();
  $("confirm-title").textContent = title;
  $("confirm-body").replaceChildren(...[body].flat());
  $("confirm-error").textContent = "";
  const form = $("confirm-form");
  form.onsubmit = async (ev) => {
    if (ev.submitter && ev.submitter.value === "cancel") return;
    ev.preventDefault();
    $("confirm-ok").disabled = true;
    try {
      const what = await run(new FormData(form), key);
      dlg.close();
      toast(what);
      logActivity(what);
      refresh();
    } catch (e) {
      $("confirm-error").textContent = e.code ? `${e.code}: ${e.message}` : e.message;
      logActivity(`${title}: ${e.message}`, true);
    } finally {
      $("confirm-ok").disabled = false;
    }
  };
  dlg.showModal();
}

const field = (label, input, wide = false) => el("div", wide ? { class: "wide" } : {}, el("label", { for: input.id }, label), input);
const input = (id, attrs) => el("input", { id, name: id, ...attrs });
const localTime = (d) => new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);

function createSale() {
  const now = new Date();
  const fields = el("div", { class: "fields" },
    field("Title", input("f-title", { required: "", maxlength: "200" }), true),
    field("Goods id", input("f-goods", { type: "number", min: "1", required: "", value: "1" })),
    field("Price (¥)", input("f-price", { type: "number", min: "0", step: "0.01", required: "", value: "99.00" })),
    field("Stock", input("f-stock", { type: "number", min: "1", max: "10000000", required: "", value: "100" })),
    field("Buckets", input("f-buckets", { type: "number", min: "1", max: "1024", value: "16" })),
    field("Starts", input("f-starts", { type: "datetime-local", required: "", value: localTime(now) })),
    field("Ends", input("f-ends", { type: "datetime-local", required: "", value: localTime(new Date(now.getTime() + 2 * 3600e3)) })),
    field("Payment window (s)", input("f-window", { type: "number", min: "1", max: "86400", value: "900" })),
    field("Challenge difficulty", input("f-challenge", { type: "number", min: "0", max: "10000000", value: "0" })));
  confirmAction("Create a sale", fields, async (f, key) => {
    const sale = await call("POST", "/admin/v1/sales", {
      goods_id: Number(f.get("f-goods")), title: f.get("f-title"),
      price_cents: Math.round(Number(f.get("f-price")) * 100), stock: Number(f.get("f-stock")),
      buckets: Number(f.get("f-buckets")), starts_at: new Date(f.get("f-starts")).toISOString(),
      ends_at: new Date(f.get("f-ends")).toISOString(), payment_window_seconds: Number(f.get("f-window")),
      challenge_difficulty: Number(f.get("f-challenge")),
    }, { key });
    select(sale.sale_id);
    return `Created sale ${sale.sale_id} “${sale.title}”`;
  });
}

// saleActions are the actions of the selected sale's toolbar.
const saleActions = {
  pause: (s) => confirmAction(`Pause sale ${s.sale_id}?`, el("p", {}, "New reservations are refused (403 sale_paused) until resumed; existing ones are untouched."),
    async () => { await call("POST", `/admin/v1/sales/${s.sale_id}/pause`); return `Paused sale ${s.sale_id}`; }),
  resume: (s) => confirmAction(`Resume sale ${s.sale_id}?`, el("p", {}, "Reservations are taken again."),
    async () => { await call("POST", `/admin/v1/sales/${s.sale_id}/resume`); return `Resumed sale ${s.sale_id}`; }),
  stop: (s) => confirmAction(`Stop sale ${s.sale_id}?`, el("p", {}, "The sale ends now (403 sale_ended); this cannot be undone. Existing reservations run their course."),
    async () => { await call("POST", `/admin/v1/sales/${s.sale_id}/stop`); return `Stopped sale ${s.sale_id}`; }),
  warmup: (s) => confirmAction(`Warm up sale ${s.sale_id}?`, el("p", {}, "Loads the sale's stock and buyers into Redis (409 already_live once it took reservations)."),
    async () => { const r = await call("POST", `/admin/v1/sales/${s.sale_id}/warmup`); return `Warmed sale ${s.sale_id}: ${r.redis_stock} in Redis`; }),
  stock: (s) => confirmAction(`Adjust the stock of sale ${s.sale_id}`,
    [el("p", {}, `Now ${num(s.stock_left)} left of ${num(s.stock_total)}. A negative delta withdraws unsold units.`),
      field("Delta", input("f-delta", { type: "number", required: "", step: "1" }))],
    async (f, key) => {
      const delta = Number(f.get("f-delta"));
      await call("POST", `/admin/v1/sales/${s.sale_id}/stock`, { delta }, { key });
      return `Stock of sale ${s.sale_id} ${delta > 0 ? "+" : ""}${delta}`;
    }),
  allowlist: (s) => confirmAction(`Allowlist of sale ${s.sale_id}`,
    [field("Add user ids (comma or space separated)", input("f-add", {})),
      field("Remove user ids", input("f-remove", {})),
      el("label", { class: "check" }, el("input", { type: "checkbox", name: "f-restricted", id: "f-restricted", ...(s.restricted ? { checked: "" } : {}) }), "Only listed users may reserve")],
    async (f) => {
      const ids = (v) => String(v || "").split(/[\s,]+/).filter(Boolean).map(Number);
      const r = await call("POST", `/admin/v1/sales/${s.sale_id}/allowlist`,
        { add: ids(f.get("f-add")), remove: ids(f.get("f-remove")), restricted: f.get("f-restricted") === "on" });
      return `Allowlist of sale ${s.sale_id}: ${r.listed} listed, ${r.restricted ? "restricted" : "open to all"}`;
    }),
  reconcile: (s) => confirmAction(`Reconcile sale ${s.sale_id} now?`,
    [el("p", {}, "Runs a fresh two-pass reconciliation (a few seconds)."),
      el("label", { class: "check" }, el("input", { type: "checkbox", name: "f-repair", id: "f-repair" }), "Also repair what is safe")],
    async (f) => {
      const repair = f.get("f-repair") === "on";
      state.lastReport = await call("GET", `/admin/v1/sales/${s.sale_id}/reconciliation${repair ? "?repair=true" : ""}`, undefined, { timeout: 30000 });
      return `Reconciled sale ${s.sale_id}: ${state.lastReport.consistent ? "consistent" : `${state.lastReport.discrepancies.length} discrepancies`}`;
    }),
};

// userActions are the users card's actions on the typed user id.
const userActions = {
  "blacklist-add": (u) => ["PUT", `/admin/v1/blacklist/${u}`, `Blacklist user ${u}?`, "Their reservations are refused (403 blacklisted).", `Blacklisted user ${u}`],
  "blacklist-remove": (u) => ["DELETE", `/admin/v1/blacklist/${u}`, `Take user ${u} off the blacklist?`, "They may reserve again.", `Unblacklisted user ${u}`],
  "exempt-add": (u) => ["PUT", `/admin/v1/challenge-exemptions/${u}`, `Exempt user ${u} from challenges?`, "They reserve without a challenge pass.", `Exempted user ${u}`],
  "exempt-remove": (u) => ["DELETE", `/admin/v1/challenge-exemptions/${u}`, `End user ${u}'s exemption?`, "They solve challenges again.", `Unexempted user ${u}`],
};

function userAction(name) {
  const u = Number($("user-id").value);
  if (!Number.isInteger(u) || u < 1) {
    toast("Type a user id first.", true);
    return;
  }
  const [method, path, title, effect, done] = userActions[name](u);
  confirmAction(title, el("p", {}, effect), async () => { await call(method, path); return done; });
}

function resolveAppeal(a) {
  const choices = [["unblacklist", "Take the user off the blacklist"], ["exempt", "Exempt the user from challenges"], ["reject", "Reject the appeal"]];
  const body = [el("p", {}, `User ${a.user_id}, sale ${a.sale_id}, ${a.reason}: “${a.message}”`),
    ...choices.map(([v, label], i) => el("label", { class: "check" },
      el("input", { type: "radio", name: "f-action", value: v, id: `f-action-${v}`, ...(i === 0 ? { checked: "" } : {}) }), label))];
  confirmAction(`Resolve appeal ${a.appeal_id}`, body, async (f) => {
    const r = await call("POST", `/admin/v1/appeals/${a.appeal_id}/resolve`, { action: f.get("f-action") });
    return `Appeal ${a.appeal_id} ${r.state} (${f.get("f-action")})`;
  });
}

// ---- wiring ----

function start() {
  showSignedIn(true);
  const m = /sale=(\d+)/.exec(location.hash);
  if (m) select(Number(m[1]));
  else refresh();
}

function wire() {
  $("login-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  $("new-sale").addEventListener("click", createSale);
  $("sales").addEventListener("click", (ev) => {
    const tr = ev.target.closest("tr[data-sale-id]");
    if (tr) select(Number(tr.dataset.saleId));
  });
  for (const b of document.querySelectorAll("[data-action]")) {
    b.addEventListener("click", () => state.detail && saleActions[b.dataset.action](state.detail.sale));
  }
  for (const b of document.querySelectorAll("[data-user]")) b.addEventListener("click", () => userAction(b.dataset.user));
  $("user-form").addEventListener("submit", (ev) => ev.preventDefault());
  $("appeals").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-resolve]");
    if (b) resolveAppeal($("appeals").tBodies[0].__appeals.get(b.dataset.resolve));
  });
  if (token()) start();
  else showSignedIn(false);
}

wire();
