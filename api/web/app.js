// seckill storefront: plain JavaScript, no build step. Every time shown is
// computed on the server's clock (from the Date header), never the browser's.
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);
  const saleId = new URLSearchParams(location.search).get('sale');
  const SETTLED = ['PAID', 'EXPIRED', 'CANCELLED', 'FAILED'];

  // Server clock: Date has whole seconds, so each answer bounds the offset
  // (server minus browser) from both sides; we keep the tightest bounds.
  let offsetLow = -Infinity;
  let offsetHigh = Infinity;
  const serverNow = () => {
    if (offsetLow === -Infinity) return Date.now();
    const off = offsetHigh >= offsetLow ? (offsetLow + offsetHigh) / 2 : offsetLow;
    return Date.now() + off;
  };

  let jwt = sessionStorage.getItem('seckill.jwt') || '';
  let who = sessionStorage.getItem('seckill.user') || '';
  let sale = null;
  // Buying: 'idle' (the button may be pressed), 'busy' (a request is out),
  // 'wait' (blocked until waitUntil), 'done' (nothing more to buy).
  let buyState = 'idle';
  let waitUntil = 0;
  let pendingRequestId = null; // kept so a retry re-sends the same request
  let reservation = null;
  let payRef = null; // kept so a retried payment is the same payment
  let paying = false;
  let waitPosition = 0; // this user's place on the sale's waitlist (0: not waiting)

  async function call(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (jwt) headers.Authorization = 'Bearer ' + jwt;
    const sent = Date.now();
    const resp = await fetch(path, {
      method, headers, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const received = Date.now();
    const date = Date.parse(resp.headers.get('Date') || '');
    if (!Number.isNaN(date)) {
      offsetLow = Math.max(offsetLow, date - received);
      offsetHigh = Math.min(offsetHigh, date + 1000 - sent);
    }
    const text = await resp.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
    const retryAfter = parseInt(resp.headers.get('Retry-After') || '', 10);
    return { status: resp.status, body: json, retryAfter: Number.isNaN(retryAfter) ? 1 : Math.max(retryAfter, 1) };
  }

  const code = (r) => (r.body && r.body.error && r.body.error.code) || 'http_' + r.status;

  const MESSAGES = {
    sold_out: () => 'Sold out: every unit has been taken.',
    already_purchased: () => 'You already hold this item: one per customer.',
    rate_limited: (r) => `Busy right now (at the opening: the draw decides, not speed). Trying again in ${r.retryAfter} s…`,
    sale_not_started: () => 'The sale has not started yet. The button opens when the countdown ends.',
    sale_ended: () => 'The sale has ended.',
    sale_paused: () => 'The sale is paused by the shop. Please try again shortly.',
    blacklisted: () => 'This account may not take part in the sale.',
    unavailable: (r) => `The shop is busy; the outcome is unknown. Retrying the same request in ${r.retryAfter} s…`,
    unauthorized: () => 'Please log in first (your session may have expired).',
    forbidden: () => 'This account may not do that.',
    not_found: () => 'No such sale or reservation.',
    invalid_request: (r) => 'The request was refused: ' + ((r.body && r.body.error && r.body.error.message) || 'invalid'),
    not_payable: () => 'This reservation cannot be paid now (it is not awaiting payment).',
    not_cancellable: () => 'This reservation can no longer be cancelled.',
    network: () => 'Network error: the outcome is unknown. Press "Retry" to send the same request again.',
    challenge_required: () => 'The shop needs to check that you are a person first: press "Buy now" again.',
    challenge_failed: () => 'The check did not go through: press "Buy now" to try again.',
    not_eligible: () => 'This sale is for invited members only.',
  };

  function say(kind, codeName, text) {
    const m = $('message');
    m.dataset.kind = kind;
    m.dataset.code = codeName || '';
    m.textContent = text;
  }
  function sayError(r, c) {
    c = c || code(r);
    const f = MESSAGES[c];
    say('error', c, f ? f(r) : `Unexpected answer (${r.status}).`);
  }

  const money = (cents) => '¥' + (cents / 100).toFixed(2);
  function duration(ms) {
    if (ms <= 0) return '0s';
    const s = Math.ceil(ms / 1000);
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60), sec = s % 60;
    const pad = (n) => String(n).padStart(2, '0');
    return (d ? d + 'd ' : '') + (d || h ? pad(h) + ':' : '') + pad(m) + ':' + pad(sec);
  }

  // Sale state on the server's clock: the view's state may be a second old.
  function saleState() {
    if (!sale) return null;
    if (sale.state === 'upcoming' && serverNow() >= Date.parse(sale.starts_at)) return 'live';
    if (sale.state === 'live' && serverNow() >= Date.parse(sale.ends_at)) return 'ended';
    return sale.state;
  }

  function render() {
    const st = saleState();
    if (sale) {
      $('title').textContent = sale.title;
      $('price').textContent = money(sale.price_cents);
      $('stock').textContent = sale.stock_left;
      $('stock-total').textContent = sale.stock_total;
      $('state').textContent = st.replace('_', ' ');
      $('state').dataset.state = st;
      const now = serverNow();
      if (st === 'upcoming') {
        $('countdown-label').textContent = 'Starts in';
        $('countdown').textContent = duration(Date.parse(sale.starts_at) - now);
      } else if (st === 'live' || st === 'sold_out') {
        $('countdown-label').textContent = 'Ends in';
        $('countdown').textContent = duration(Date.parse(sale.ends_at) - now);
      } else {
        $('countdown-label').textContent = 'Ended';
        $('countdown').textContent = new Date(sale.ends_at).toLocaleString();
      }
    }
    if (buyState === 'wait' && serverNow() >= waitUntil) buyState = 'idle';
    const buy = $('buy');
    if (buyState !== 'busy') buy.textContent = pendingRequestId ? 'Retry' : 'Buy now';
    buy.disabled = !jwt || !sale || buyState !== 'idle' || (st !== 'live' && !pendingRequestId);
    if (sale && st === 'sold_out' && buyState === 'idle' && !reservation) sayError({ status: 410 }, 'sold_out');
    renderWaitlist(st);
    $('who').textContent = who ? 'Logged in as user ' + who : '';
    $('clock').textContent = 'Server clock: ' + new Date(serverNow()).toISOString().slice(11, 19) + ' UTC';
    renderReservation();
  }

  // The waitlist is offered on a sold-out sale to a user holding nothing.
  function renderWaitlist(st) {
    const holds = reservation && (!SETTLED.includes(reservation.status) || reservation.status === 'PAID');
    $('waitlist').hidden = !jwt || !sale || holds || (st !== 'sold_out' && !waitPosition);
    $('wait').hidden = waitPosition > 0;
    $('wait-position').textContent = waitPosition
      ? `You are number ${waitPosition} on the waitlist: a unit that comes back is offered in turn, and yours shows up here.`
      : '';
  }

  // A unit handed over leaves the waitlist (404) and shows as a reservation.
  async function pollWaitlist() {
    if (!jwt || !saleId) return;
    try {
      const r = await call('GET', `/api/v1/sales/${encodeURIComponent(saleId)}/waitlist`);
      if (r.status === 200) waitPosition = r.body.position;
      else if (r.status === 404 && waitPosition) { waitPosition = 0; await findMine(); }
    } catch (e) { /* the next poll retries */ }
    render();
    if (waitPosition) setTimeout(pollWaitlist, 2000);
  }

  async function joinWaitlist() {
    try {
      const r = await call('POST', `/api/v1/sales/${encodeURIComponent(saleId)}/waitlist`);
      if (r.status !== 200) { sayError(r); return; }
      waitPosition = r.body.position;
      render();
      setTimeout(pollWaitlist, 2000);
    } catch (e) {
      sayError({ status: 0 }, 'network');
    }
  }

  function renderReservation() {
    const box = $('reservation');
    if (!reservation) { box.hidden = true; return; }
    box.hidden = false;
    const s = $('res-status');
    s.textContent = reservation.status;
    s.dataset.status = reservation.status;
    $('res-order').textContent = reservation.order_no || '–';
    $('res-amount').textContent = money(reservation.amount_cents);
    const pending = reservation.status === 'PENDING_PAYMENT';
    $('pay-by-row').hidden = !(pending && reservation.pay_by);
    if (pending && reservation.pay_by) $('pay-by').textContent = duration(Date.parse(reservation.pay_by) - serverNow());
    const pay = $('pay');
    pay.hidden = !pending;
    pay.disabled = paying || !pending || Date.parse(reservation.pay_by || 0) <= serverNow();
  }

  async function loadSale() {
    try {
      const r = await call('GET', '/api/v1/sales/' + encodeURIComponent(saleId));
      if (r.status === 200) sale = r.body;
      else if (r.status === 404) { say('error', 'not_found', 'This sale does not exist.'); $('title').textContent = 'Unknown sale'; return; }
    } catch (e) { /* keep the last view; the next poll retries */ }
    render();
    setTimeout(loadSale, 2000);
  }

  // The storefront's listing (GET /api/v1/sales), a section for a status:
  // a first page, then "More" follows the page's opaque next_cursor (the
  // cursor keeps the status and order). A failed page leaves the button
  // to try it again.
  const PAGE_SIZE = 20;
  function listSales(box, status, sort, none) {
    const list = box.querySelector('.sales');
    const more = box.querySelector('.more');
    const note = box.querySelector('.message');
    let cursor = '';
    let loading = false;
    async function next() {
      if (loading) return;
      loading = true;
      more.disabled = true;
      const q = new URLSearchParams({ status, sort, limit: String(PAGE_SIZE) });
      if (cursor) q.set('cursor', cursor);
      let failed = '';
      try {
        const r = await call('GET', '/api/v1/sales?' + q);
        if (r.status === 200) {
          for (const s of r.body.sales) list.append(listedSale(s));
          cursor = r.body.next_cursor || '';
        } else if (r.status === 400 && cursor) {
          // The cursor is no longer read (the key that signed it was
          // rotated away): the list starts again from its first page.
          list.replaceChildren();
          cursor = '';
          failed = 'The list has to start again: press "Try again".';
        } else {
          failed = `The list did not load (${code(r)}).`;
        }
      } catch (e) {
        failed = 'Network error: the list did not load.';
      }
      note.dataset.kind = failed ? 'error' : 'info';
      note.textContent = failed || (list.children.length ? '' : none);
      note.hidden = !note.textContent;
      more.textContent = failed ? 'Try again' : 'More';
      more.hidden = !failed && !cursor;
      more.disabled = false;
      loading = false;
    }
    more.addEventListener('click', next);
    next();
  }

  // listedSale is a sale of the listing, linking to its page.
  function listedSale(s) {
    const part = (tag, cls, text) => { const e = document.createElement(tag); e.className = cls; e.textContent = text; return e; };
    const a = document.createElement('a');
    a.href = '/?sale=' + encodeURIComponent(s.sale_id);
    a.dataset.saleId = s.sale_id;
    const badge = part('span', 'badge', s.state.replace('_', ' '));
    badge.dataset.state = s.state;
    const at = (t) => new Date(t).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
    const units = s.stock_total === 1 ? '1 unit' : s.stock_total + ' units';
    const note = s.state === 'upcoming' ? `Opens ${at(s.starts_at)} · ${units}`
      : `${s.stock_left} of ${s.stock_total} left · ends ${at(s.ends_at)}`;
    a.append(badge, part('span', 'sale-title', s.title), part('span', 'sale-price', money(s.price_cents)), part('span', 'sale-note', note));
    const li = document.createElement('li');
    li.append(a);
    return li;
  }

  function newId(prefix) {
    const b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return prefix + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  // The sale's challenge (ALTCHA proof of work): find n with
  // SHA-256(salt + n) = challenge, trade it for a pass bound to this user
  // and sale, and keep the pass until shortly before it expires.
  let pass = null; // { value, expires } (expires on the server's clock)
  const hex = (buf) => Array.from(new Uint8Array(buf), (x) => x.toString(16).padStart(2, '0')).join('');

  async function solve(ch, progress) {
    const enc = new TextEncoder();
    for (let n = 0; n <= ch.maxnumber; n++) {
      if (hex(await crypto.subtle.digest('SHA-256', enc.encode(ch.salt + n))) === ch.challenge) return n;
      if (n % 5000 === 0) progress(n / ch.maxnumber);
    }
    return -1;
  }

  // ensurePass answers the pass to send ('' when the sale needs none), or
  // the failed answer to show.
  async function ensurePass() {
    if (!sale || !sale.challenge_difficulty) return { value: '' };
    if (pass && pass.expires - serverNow() > 30000) return pass;
    const path = `/api/v1/sales/${encodeURIComponent(saleId)}/challenge`;
    say('info', 'challenge', 'Checking that you are a person…');
    let r = await call('GET', path);
    if (r.status !== 200) return { failed: r };
    const ch = r.body;
    const n = await solve(ch, (f) => say('info', 'challenge', `Checking that you are a person… ${Math.floor(f * 100)}%`));
    const payload = btoa(JSON.stringify({ algorithm: ch.algorithm, challenge: ch.challenge, number: n, salt: ch.salt, signature: ch.signature }));
    r = await call('POST', path, { payload });
    if (r.status !== 200) return { failed: r };
    pass = { value: r.body.pass, expires: Date.parse(r.body.expires_at) };
    window.seckillChallengesSolved = (window.seckillChallengesSolved || 0) + 1;
    return pass;
  }

  async function buy() {
    if (buyState !== 'idle' || !jwt) return;
    buyState = 'busy'; // the first filter: one click, one request
    const button = $('buy');
    button.disabled = true;
    button.textContent = 'Reserving…';
    if (!pendingRequestId) pendingRequestId = newId('web-');
    let r;
    try {
      const p = await ensurePass();
      if (p.failed) {
        buyState = 'idle';
        sayError(p.failed, code(p.failed));
        render();
        return;
      }
      say('info', 'pending', 'Reserving…');
      const body = { request_id: pendingRequestId };
      if (p.value) body.pass = p.value;
      r = await call('POST', `/api/v1/sales/${encodeURIComponent(saleId)}/reservations`, body);
    } catch (e) {
      buyState = 'idle'; // pendingRequestId stays: "Retry" re-sends it
      sayError({ status: 0 }, 'network');
      render();
      return;
    }
    if (r.status === 202) {
      pendingRequestId = null;
      buyState = 'done';
      say('ok', 'reserved', 'Reserved! Creating your order…');
      reservation = { token: r.body.token, status: r.body.status, amount_cents: sale ? sale.price_cents : 0 };
      sessionStorage.setItem('seckill.reservation.' + saleId, r.body.token);
      render();
      pollReservation();
      return;
    }
    const c = code(r);
    sayError(r, c);
    switch (c) {
      case 'unavailable': // outcome unknown: the same request_id again, after the wait
        buyState = 'wait';
        waitUntil = serverNow() + r.retryAfter * 1000;
        setTimeout(() => { if (buyState === 'idle' || buyState === 'wait') { buyState = 'idle'; buy(); } }, r.retryAfter * 1000);
        break;
      case 'rate_limited': // nothing was reserved; at the opening this is
        // the sale's lottery: the page asks again when Retry-After says
        // (asking sooner would change nothing).
        pendingRequestId = null;
        buyState = 'wait';
        waitUntil = serverNow() + r.retryAfter * 1000;
        setTimeout(() => { if (buyState === 'wait' || buyState === 'idle') { buyState = 'idle'; buy(); } }, r.retryAfter * 1000);
        break;
      case 'already_purchased':
        pendingRequestId = null;
        buyState = 'done';
        findMine();
        break;
      case 'sold_out': case 'sale_ended': case 'blacklisted': case 'not_eligible':
        pendingRequestId = null;
        buyState = 'done';
        break;
      case 'challenge_required': // nothing was reserved: a new pass next time
        pass = null;
        pendingRequestId = null;
        buyState = 'idle';
        break;
      case 'unauthorized':
        pendingRequestId = null;
        buyState = 'idle';
        logout();
        break;
      default:
        pendingRequestId = null;
        buyState = 'idle';
    }
    render();
  }

  // findMine shows the reservation the user already holds for this sale.
  async function findMine() {
    try {
      const r = await call('GET', '/api/v1/me/reservations?sale_id=' + encodeURIComponent(saleId));
      if (r.status !== 200 || !r.body.reservations.length) return;
      const mine = r.body.reservations.find((x) => !SETTLED.includes(x.status) || x.status === 'PAID') || r.body.reservations[0];
      reservation = mine;
      render();
      if (!SETTLED.includes(mine.status)) pollReservation();
    } catch (e) { /* best effort */ }
  }

  // The reservation's status: the server-sent event stream first (fetch
  // and a stream reader, so the token stays in the Authorization header),
  // polling with backoff when the stream fails. ?transport=poll forces
  // polling. window.seckillTransport says which one is in use.
  const forcePoll = new URLSearchParams(location.search).get('transport') === 'poll';
  window.seckillTransport = 'none';

  function applyStatus(view) {
    if (!reservation || view.token !== reservation.token) return;
    reservation = view;
    if (view.status === 'PENDING_PAYMENT' && $('message').dataset.code === 'reserved') say('ok', 'order', 'Your order is ready: please pay before the time runs out.');
    if (view.status === 'EXPIRED') say('error', 'expired', 'The payment window has passed; the unit went back on sale.');
    if (view.status === 'FAILED') say('error', 'failed', 'The order could not be created; the unit went back on sale.');
    if (view.status === 'CANCELLED') say('error', 'cancelled', 'The reservation was cancelled.');
    if (SETTLED.includes(view.status)) buyState = view.status === 'PAID' ? 'done' : 'idle';
    render();
  }

  let watching = false;
  async function pollReservation() {
    if (watching || !reservation) return;
    watching = true;
    const token = reservation.token;
    let ok = !forcePoll && await streamReservation(token);
    let delay = 1000;
    while (!ok && reservation && reservation.token === token && !SETTLED.includes(reservation.status)) {
      window.seckillTransport = 'poll';
      await new Promise((done) => setTimeout(done, delay));
      try {
        const r = await call('GET', '/api/v1/reservations/' + encodeURIComponent(token));
        if (r.status === 200) {
          applyStatus(r.body);
          delay = 2000;
        } else {
          delay = Math.max(r.retryAfter * 1000, Math.min(delay * 2, 15000));
        }
      } catch (e) {
        delay = Math.min(delay * 2, 15000); // back off while the network fails
      }
    }
    watching = false;
  }

  // streamReservation follows the event stream; true when it saw the
  // reservation end, false when the stream failed (the caller polls).
  async function streamReservation(token) {
    let lastId = '';
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const headers = { Accept: 'text/event-stream', Authorization: 'Bearer ' + jwt };
        if (lastId) headers['Last-Event-ID'] = lastId;
        const resp = await fetch('/api/v1/reservations/' + encodeURIComponent(token) + '/events', { headers, cache: 'no-store' });
        if (resp.status !== 200 || !resp.body) return false;
        window.seckillTransport = 'stream';
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          if (!reservation || reservation.token !== token) { reader.cancel(); return true; } // another reservation now
          buf += value;
          let end;
          while ((end = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            let id = '', data = '';
            for (const line of block.split('\n')) {
              if (line.startsWith('id: ')) id = line.slice(4);
              else if (line.startsWith('data: ')) data += line.slice(6);
            }
            if (!data) continue; // a comment or the retry field
            if (id) lastId = id;
            applyStatus(JSON.parse(data));
          }
        }
        if (!reservation || reservation.token !== token || SETTLED.includes(reservation.status)) return true;
      } catch (e) { /* reconnect below, then poll */ }
      await new Promise((done) => setTimeout(done, 1000));
    }
    return false;
  }

  async function pay() {
    if (paying || !reservation || reservation.status !== 'PENDING_PAYMENT') return;
    paying = true;
    render();
    if (!payRef) payRef = newId('dev-pay-');
    say('info', 'paying', 'Paying…');
    try {
      const r = await call('POST', `/api/v1/reservations/${encodeURIComponent(reservation.token)}/payment`, { payment_ref: payRef });
      if (r.status === 200) {
        reservation = r.body;
        buyState = 'done';
        say('ok', 'paid', 'Paid. Thank you!');
      } else {
        sayError(r);
        if (code(r) !== 'unavailable') payRef = null;
        pollReservation();
      }
    } catch (e) {
      sayError({ status: 0 }, 'network'); // payRef stays: the retry is the same payment
    } finally {
      paying = false;
      render();
    }
  }

  async function login(ev) {
    ev.preventDefault();
    const id = parseInt($('user-id').value, 10);
    if (!(id > 0)) { say('error', 'invalid_request', 'Enter a positive user id.'); return; }
    try {
      const r = await call('POST', '/dev/login', { user_id: id });
      if (r.status === 404) { say('error', 'not_found', 'Development login is off on this server.'); return; }
      if (r.status !== 200) { sayError(r); return; }
      jwt = r.body.token;
      who = String(id);
      sessionStorage.setItem('seckill.jwt', jwt);
      sessionStorage.setItem('seckill.user', who);
      reservation = null; waitPosition = 0; buyState = 'idle'; pendingRequestId = null; payRef = null;
      say('info', 'logged_in', 'Logged in as user ' + id + '.');
      render();
      if (saleId) { findMine(); pollWaitlist(); }
    } catch (e) {
      sayError({ status: 0 }, 'network');
    }
  }

  function logout() {
    jwt = ''; who = '';
    sessionStorage.removeItem('seckill.jwt');
    sessionStorage.removeItem('seckill.user');
  }

  $('buy').addEventListener('click', buy);
  $('pay').addEventListener('click', pay);
  $('wait').addEventListener('click', joinWaitlist);
  $('login-form').addEventListener('submit', login);
  if (who) $('user-id').value = who;
  if (saleId) {
    $('sale').hidden = false;
    $('back').hidden = false;
    loadSale();
  } else {
    $('listing').hidden = false;
    listSales($('live'), 'live', '-starts_at', 'No sale is live right now.');
    listSales($('upcoming'), 'upcoming', 'starts_at', 'No sale is coming up.');
  }
  if (jwt && saleId) { findMine(); pollWaitlist(); }
  setInterval(render, 250);
})();
