// paystate dashboard: plain JavaScript, no build step, no external resources.
// Charts are drawn by Chart.js (chart.min.js, served next to this file).
//
// Everything that comes from the API is put into the page as text
// (textContent, text nodes, attribute values), never parsed as HTML: order
// ids, notes and error messages are merchant or PSP input.
//
// Links: every payment id is an <a href="/#/payments/<id>"> that opens the
// payment's page, so it opens in a new tab and can be copied. The page never
// shows a client secret or a redirect URL, whatever the API returns.
'use strict';

(function () {
  const TERMINAL = new Set(['captured', 'failed', 'refunded']);
  const PALETTE = ['#2456d3', '#16794a', '#b42318', '#b54708', '#7a3fc2', '#0e7c86', '#667085', '#c11574'];
  const PAGE_SIZE = 25;
  const METRICS_EVERY = 3000;
  const REFRESH_EVERY = 5000;
  const HISTORY = 120;

  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || '';
  const $ = (sel, root) => (root || document).querySelector(sel);

  // el builds an element; children are nodes or strings (added as text).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function badge(value, extra) {
    return el('span', { class: 'badge ' + String(value || '').replace(/[^a-z_]/g, '') + (extra ? ' ' + extra : ''), text: value || '—' });
  }

  function fmtTime(s) {
    if (!s) return '';
    const d = new Date(s);
    if (isNaN(d)) return String(s);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }

  function fmtAmount(amount, currency) {
    try {
      const f = new Intl.NumberFormat(undefined, { style: 'currency', currency: currency });
      const digits = f.resolvedOptions().maximumFractionDigits;
      return f.format(Number(amount) / Math.pow(10, digits));
    } catch (e) {
      return String(amount) + ' ' + String(currency || '');
    }
  }

  // ---- API ---------------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message, requestID) {
      super(message);
      this.status = status;
      this.code = code;
      this.requestID = requestID;
    }
  }

  // api calls the JSON API with the session's CSRF token on writes; extra
  // holds more request headers.
  async function api(method, path, body, extra) {
    const opts = { method: method, credentials: 'same-origin', headers: Object.assign({ 'Accept': 'application/json' }, extra || {}) };
    if (method !== 'GET' && method !== 'HEAD') opts.headers['X-CSRF-Token'] = csrf;
    if (body instanceof Blob) {
      // A file (a settlement report): sent as it is, the browser
      // streaming it from disk.
      opts.headers['Content-Type'] = 'text/csv';
      opts.body = body;
    } else if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, opts);
    } catch (e) {
      throw new APIError(0, 'network', 'paystate did not answer (' + e.message + ')');
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    if (!res.ok) {
      const err = (data && data.error) || {};
      throw new APIError(res.status, err.code || 'http_' + res.status, err.message || res.statusText || 'request failed', err.request_id);
    }
    return data;
  }

  // errorView turns an API error into an empty state the user can act on.
  function errorView(err, what) {
    if (err.status === 501) {
      return el('div', { class: 'empty', 'data-error': err.code },
        what + ' is not available in this build of paystate yet (' + err.code + ').');
    }
    if (err.status === 401) {
      return el('div', { class: 'empty error', 'data-error': err.code },
        'Not signed in: ' + err.message + ' ',
        el('a', { href: '/' }, 'Sign in again'));
    }
    const parts = [what + ' could not be loaded: ' + err.message];
    if (err.requestID) parts.push(' (request id ' + err.requestID + ')');
    return el('div', { class: 'empty error', 'data-error': err.code }, parts.join(''));
  }

  // ---- tabs and navigation -------------------------------------------------

  let activeTab = 'payments';
  const TABS = ['payments', 'revenue', 'review', 'disputes', 'reconciliation', 'deliveries', 'charts'];

  // paymentHref is the address of a payment's page.
  function paymentHref(id) {
    return '/#/payments/' + encodeURIComponent(id);
  }

  // paymentLink is a payment id as a link to its page.
  function paymentLink(id, attrs) {
    return el('a', Object.assign({ href: paymentHref(id), class: 'mono payment-link', 'data-payment-link': id }, attrs || {}), id);
  }

  function selectTab(name) {
    activeTab = name;
    for (const b of document.querySelectorAll('[role="tab"]')) {
      b.setAttribute('aria-selected', String(b.dataset.tab === name));
    }
    for (const p of document.querySelectorAll('[role="tabpanel"]')) {
      p.hidden = p.id !== 'panel-' + name;
    }
    if (name === 'payments' && !openPaymentID) loadPayments();
    if (name === 'revenue') loadRevenue();
    if (name === 'review') loadReview();
    if (name === 'disputes') loadDisputes();
    if (name === 'reconciliation') loadReconciliation();
    if (name === 'deliveries') loadDeliveries();
    if (name === 'charts') drawCharts();
  }

  // route shows what the address names: #/payments/<id> (also the older
  // #payment/<id>) a payment's page, #<tab> a tab.
  function route() {
    let h = location.hash.replace(/^#\/?/, '');
    try { h = decodeURIComponent(h); } catch (e) { h = ''; }
    const m = /^payments?\/(.+)$/.exec(h);
    if (m) {
      showPayment(m[1]);
      selectTab('payments');
      return;
    }
    showPayment('');
    selectTab(TABS.includes(h) ? h : 'payments');
  }

  // showPayment switches the payments tab between the list ('') and the
  // page of one payment.
  function showPayment(id) {
    const was = openPaymentID;
    openPaymentID = id;
    $('#payments-list').hidden = !!id;
    $('#timeline').hidden = !id;
    if (id) {
      if (id !== was) {
        clear($('#timeline')).append(el('p', { class: 'hint', text: 'Loading payment ' + id + '…' }));
        window.scrollTo(0, 0);
      }
      openTimeline(id);
    } else {
      clear($('#timeline'));
    }
  }

  // ---- payments ------------------------------------------------------------

  // The list's filters as the user set them, and the paging cursors.
  const payments = { status: '', orderID: '', customer: '', from: '', to: '', cursor: '', prev: [], next: '' };

  // addDays returns the UTC day (YYYY-MM-DD) n days after day.
  function addDays(day, n) {
    const d = new Date(day + 'T00:00:00Z');
    d.setUTCDate(d.getUTCDate() + n);
    return d.toISOString().slice(0, 10);
  }

  // filterQuery is the API's query for the filters: a customer with an @ is
  // an e-mail, else an id; the days are UTC and both inclusive.
  function filterQuery() {
    const q = new URLSearchParams();
    if (payments.status) q.set('status', payments.status);
    if (payments.orderID) q.set('order_id', payments.orderID);
    if (payments.customer) q.set(payments.customer.includes('@') ? 'customer_email' : 'customer_id', payments.customer);
    if (payments.from) q.set('created_from', payments.from);
    if (payments.to) q.set('created_before', addDays(payments.to, 1));
    return q;
  }

  function filtered() {
    return !!(payments.status || payments.orderID || payments.customer || payments.from || payments.to);
  }

  // paymentsLoads counts the loads of the list begun: a load whose answer
  // comes after a newer one began (the periodic refresh with the old
  // filters, answered after a search was submitted) is dropped, so that
  // the list always shows the last filters asked for.
  let paymentsLoads = 0;

  // loadPayments shows the list's current page. The periodic refresh
  // (periodic) leaves the rows alone when nothing in them changed, so that
  // a row is not replaced under the pointer that is about to click it.
  async function loadPayments(periodic) {
    const load = ++paymentsLoads;
    const q = filterQuery();
    q.set('limit', String(PAGE_SIZE));
    if (payments.cursor) q.set('cursor', payments.cursor);
    const body = $('#payments-body');
    try {
      const res = await api('GET', '/v1/payments?' + q.toString());
      if (load !== paymentsLoads) return;
      payments.next = res.next_cursor || '';
      renderPayments(res.data || [], periodic);
      $('#payments-updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    } catch (err) {
      if (load !== paymentsLoads) return;
      payments.next = '';
      clear(body).append(errorView(err, 'The payment list'));
    }
    $('#page-older').disabled = !payments.next;
    $('#page-newer').disabled = payments.prev.length === 0;
  }

  function renderPayments(list, periodic) {
    const sig = JSON.stringify([list, filtered()]);
    if (periodic && shownAs($('#payments-body'), sig)) return;
    const body = clear($('#payments-body'));
    if (list.length === 0) {
      body.append(drawnFrom(sig, el('div', { class: 'empty', id: 'payments-empty' },
        filtered() ? 'No payment matches these filters.' : 'No payments yet. Create one with POST /v1/payments.')));
      return;
    }
    const rows = list.map((p) => el('tr', {
      class: 'clickable',
      'data-payment-id': p.id,
      // A click on the row opens the page; one on the link itself is the
      // link's (a new tab with Ctrl or the middle button).
      onclick: (ev) => { if (!ev.target.closest('a')) location.hash = '#/payments/' + encodeURIComponent(p.id); },
    },
    el('td', {}, paymentLink(p.id)),
    el('td', { class: 'order wrap', text: p.order_id }),
    el('td', { class: 'num', text: fmtAmount(p.amount, p.currency) }),
    el('td', {}, badge(p.status), p.dispute ? disputeBadge(p.dispute) : null),
    el('td', { class: 'customer wrap', text: [p.customer && p.customer.id, p.customer && p.customer.email].filter(Boolean).join(' · ') }),
    el('td', {}, p.provider, p.flow === 'payment_link' ? el('span', { class: 'badge source', title: 'made from a Stripe Payment Link', text: 'Payment Link' }) : null),
    el('td', { class: 'mono wrap' }, providerRef(p)),
    el('td', { text: fmtTime(p.created_at) }),
    el('td', { text: fmtTime(p.updated_at) })));
    body.append(drawnFrom(sig, el('table', { id: 'payments-table' },
      el('thead', {}, el('tr', {}, ['Payment', 'Order id', 'Amount', 'Status', 'Customer', 'Provider', 'Provider ref', 'Created', 'Updated'].map((h) => el('th', { text: h })))),
      el('tbody', {}, rows))));
  }

  // pspDashboards make the link to a payment in its PSP's own dashboard,
  // by provider, from its reference; a provider not listed shows the
  // reference as text, unless the server gives the address (provider_url:
  // PayPal's, which depends on the capture and the environment).
  const pspDashboards = {
    mollie: (ref) => /^tr_[A-Za-z0-9]+$/.test(ref) ? 'https://my.mollie.com/dashboard/payments/' + ref : '',
  };

  // providerRef is a payment's PSP reference, a link to the PSP's
  // dashboard where paystate knows its address.
  function providerRef(p) {
    const ref = p.provider_ref || '';
    const own = /^https:\/\/[^/]+\//.test(p.provider_url || '') ? p.provider_url : '';
    const href = own || (ref && pspDashboards[p.provider] ? pspDashboards[p.provider](ref) : '');
    if (!href) return ref;
    return el('a', { class: 'psp-link', href, target: '_blank', rel: 'noopener noreferrer', title: 'open in ' + p.provider + "'s dashboard", text: ref });
  }

  // disputeBadge marks a payment with a dispute: "disputed" while it is
  // open, "charged back" once lost, "dispute won" after a win.
  function disputeBadge(status) {
    const text = { needs_response: 'disputed', under_review: 'disputed', lost: 'charged back', won: 'dispute won' }[status] || status;
    return el('span', { class: 'badge dispute ' + String(status).replace(/[^a-z_]/g, ''), 'data-dispute': status, title: 'dispute: ' + status, text: text });
  }

  // refundBlocked reports whether the payment's dispute forbids a refund
  // (open or lost), as the server decides it.
  function refundBlocked(p) {
    return p.dispute === 'needs_response' || p.dispute === 'under_review' || p.dispute === 'lost';
  }

  // exportCSV downloads the list with the current filters, every page of
  // it, as the API's CSV (Accept: text/csv).
  async function exportCSV() {
    const out = $('#export-result');
    out.className = 'hint';
    out.textContent = 'Exporting…';
    let res, text;
    try {
      res = await fetch('/v1/payments?' + filterQuery().toString(), { credentials: 'same-origin', headers: { 'Accept': 'text/csv' } });
      text = await res.text();
    } catch (e) {
      out.className = 'error';
      out.textContent = 'The export failed: ' + e.message;
      return;
    }
    if (!res.ok) {
      let msg = res.statusText;
      try { msg = JSON.parse(text).error.message; } catch (e) { /* not JSON */ }
      out.className = 'error';
      out.textContent = 'The export failed: ' + msg;
      return;
    }
    const m = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') || '');
    const name = m ? m[1] : 'payments.csv';
    const rows = Math.max(0, text.split('\n').length - 2);
    const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
    const a = el('a', { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    out.textContent = 'Exported ' + rows + (rows === 1 ? ' payment' : ' payments') + ' to ' + name + '.';
    out.dataset.rows = String(rows);
  }

  function bindPayments() {
    $('#payment-filters').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const from = $('#filter-from').value, to = $('#filter-to').value;
      if (from && to && from > to) {
        clear($('#payments-body')).append(el('div', { class: 'empty error', id: 'payments-bad-range' }, 'The date range ends before it starts.'));
        return;
      }
      payments.status = $('#filter-status').value;
      payments.orderID = $('#filter-order').value.trim();
      payments.customer = $('#filter-customer').value.trim();
      payments.from = from;
      payments.to = to;
      payments.cursor = '';
      payments.prev = [];
      loadPayments();
    });
    $('#payments-refresh').addEventListener('click', () => { loadPayments(); });
    $('#payments-export').addEventListener('click', exportCSV);
    $('#page-older').addEventListener('click', () => {
      if (!payments.next) return;
      payments.prev.push(payments.cursor);
      payments.cursor = payments.next;
      loadPayments();
    });
    $('#page-newer').addEventListener('click', () => {
      if (payments.prev.length === 0) return;
      payments.cursor = payments.prev.pop();
      loadPayments();
    });
  }

  // ---- timeline ------------------------------------------------------------

  let openPaymentID = '';

  // verdict says which path won and what was absorbed on the way.
  function verdict(p, steps) {
    const won = steps.find((s) => s.kind === 'transition' && TERMINAL.has(s.to) && s.to !== 'refunded') ||
      steps.find((s) => s.kind === 'transition' && TERMINAL.has(s.to));
    const counts = {};
    for (const s of steps) {
      if (['duplicate', 'stale', 'version_conflict', 'conflicting_terminal'].includes(s.kind)) {
        const k = s.kind + ' from ' + s.source;
        counts[k] = (counts[k] || 0) + 1;
      }
    }
    const absorbed = Object.entries(counts).map(([k, n]) => n + ' × ' + k);
    let text;
    if (won) {
      text = 'The ' + won.source + ' path won: it moved the payment ' + (won.from || '?') + ' → ' + won.to +
        ' at version ' + won.version + (won.event_id ? ' (event ' + won.event_id + ')' : '') + '.';
    } else if (TERMINAL.has(p.status)) {
      text = 'Final status ' + p.status + '.';
    } else {
      text = 'Not final yet: status ' + p.status + ' at version ' + p.version + '.';
    }
    if (absorbed.length) text += ' Absorbed: ' + absorbed.join(', ') + '.';
    return { text: text, wonSeq: won ? won.seq : null };
  }

  // openTimeline (re)draws the page of payment id: its facts, its refunds
  // with the refund form when it is captured, and the timeline. The
  // periodic refresh (periodic) leaves the page alone when nothing on it
  // changed (see loadPayments).
  async function openTimeline(id, periodic) {
    const box = $('#timeline');
    let p, steps, refunds = [], refundsErr = null;
    try {
      const res = await Promise.all([
        api('GET', '/v1/payments/' + encodeURIComponent(id)),
        api('GET', '/v1/payments/' + encodeURIComponent(id) + '/events'),
        // The refunds are shown, or why not, without losing the page.
        api('GET', '/v1/payments/' + encodeURIComponent(id) + '/refunds').catch((err) => ({ error: err })),
      ]);
      p = res[0];
      steps = (res[1] && res[1].data) || [];
      if (res[2] && res[2].error instanceof APIError) refundsErr = res[2].error;
      else refunds = (res[2] && res[2].data) || [];
    } catch (err) {
      if (openPaymentID !== id) return;
      clear(box).append(backLink(), el('h2', {}, 'Payment ', el('span', { class: 'mono', id: 'timeline-id', text: id })), errorView(err, 'This payment'));
      return;
    }
    if (openPaymentID !== id) return;
    // The refund form's own state is not in it: the form redraws itself,
    // and the periodic refresh is for what changed on the server.
    const sig = JSON.stringify([p, steps, refunds, refundsErr && refundsErr.message]);
    if (periodic && shownAs(box, sig)) return;
    steps.sort((a, b) => a.seq - b.seq);
    const v = verdict(p, steps);
    // Only these fields are shown: never client_secret or redirect_url.
    const facts = [
      ['Order id', p.order_id], ['Amount', fmtAmount(p.amount, p.currency)], ['Status', p.status],
      ['Version', p.version], ['Provider', p.provider + (p.flow ? ' (' + (p.flow === 'payment_link' ? 'Payment Link' : p.flow) + ')' : '')],
      ['Provider ref', providerRef(p) || '—'],
      ['Customer', [p.customer && p.customer.id, p.customer && p.customer.email].filter(Boolean).join(' · ') || '—'],
      ['Created', fmtTime(p.created_at)], ['Updated', fmtTime(p.updated_at)],
    ];
    if (Number(p.amount_refunded) > 0 || p.status === 'captured') {
      facts.splice(2, 0, ['Refunded', fmtAmount(p.amount_refunded || 0, p.currency)], ['Left to refund', fmtAmount(refundable(p), p.currency)]);
    }
    if (p.dispute) facts.splice(3, 0, ['Dispute', p.dispute]);
    const rows = steps.map((s) => el('tr', {
      class: s.seq === v.wonSeq ? 'won' : (['duplicate', 'stale', 'version_conflict'].includes(s.kind) ? 'absorbed' : ''),
      'data-kind': s.kind,
    },
    el('td', { class: 'num', text: s.seq }),
    el('td', { text: fmtTime(s.at) }),
    el('td', { class: 'source', text: s.source }),
    el('td', {}, badge(s.kind)),
    el('td', { class: 'wrap', text: (s.from || '') + (s.from || s.to ? ' → ' : '') + (s.to || '') }),
    el('td', { class: 'num', text: s.version }),
    el('td', { class: 'mono wrap', text: s.event_id || '' }),
    el('td', { class: 'wrap', text: s.note || '' })));
    clear(box).append(
      drawnFrom(sig, backLink()),
      el('h2', {}, 'Payment ', el('a', { class: 'mono', id: 'timeline-id', href: paymentHref(p.id), text: p.id }), el('span', { id: 'payment-status' }, badge(p.status)),
        p.dispute ? el('span', { id: 'payment-dispute' }, disputeBadge(p.dispute)) : null),
      el('dl', { class: 'facts' }, facts.map(([k, val]) => el('div', {}, el('dt', { text: k }), val instanceof Node ? el('dd', {}, val) : el('dd', { text: val })))),
      refundView(p, refunds, refundsErr),
      el('p', { class: 'verdict', id: 'timeline-verdict', text: v.text }),
      el('table', { id: 'timeline-table' },
        el('thead', {}, el('tr', {}, ['#', 'At', 'Source', 'Kind', 'From → to', 'Version', 'Event id', 'Note'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows)));
  }

  // A drawn list or page remembers the data it was drawn from, as JSON, in
  // a map beside its first element (not in the page: the data may hold a
  // client secret, which the page never shows). drawnFrom records sig for
  // e and returns e; shownAs reports whether box shows what sig describes.
  const drawnSigs = new WeakMap();

  function drawnFrom(sig, e) {
    drawnSigs.set(e, sig);
    return e;
  }

  function shownAs(box, sig) {
    const first = box.firstElementChild;
    return !!first && drawnSigs.get(first) === sig;
  }

  function backLink() {
    return el('a', { href: '#payments', class: 'back', id: 'payment-back', text: '← All payments' });
  }

  // ---- refunds -------------------------------------------------------------

  // The refund being entered, confirmed or sent, on the open payment's
  // page. It outlives a redraw of the page (the page refreshes itself).
  // Its idempotency key is made when a refund is asked for and kept, with
  // the amount and reason it was made for, until paystate answers: after a
  // lost answer, "Send again" repeats the same request under the same key,
  // so the refund cannot be made twice. stage is 'idle' (the form),
  // 'confirm' (the question, or a resend after a lost answer) or 'busy'
  // (sent, no answer yet).
  const NO_REFUND = { id: '', stage: 'idle', key: '', amount: 0, reason: '', sent: false, amountText: '', reasonText: '', error: '', done: '' };
  let refund = Object.assign({}, NO_REFUND);

  function resetRefund(id, fields) {
    refund = Object.assign({}, NO_REFUND, { id: id || '' }, fields || {});
  }

  // refundInUse reports whether the user is busy with a refund, so the
  // periodic refresh leaves the page alone.
  function refundInUse() {
    if (refund.id !== openPaymentID) return false;
    if (refund.stage !== 'idle' || refund.amountText || refund.reasonText) return true;
    const box = $('#refund');
    return !!(box && box.contains(document.activeElement));
  }

  function newIdempotencyKey() {
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return 'dashboard-refund-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  // refundable is what is left to refund of a payment, in minor units.
  function refundable(p) {
    if (typeof p.amount_refundable === 'number') return p.amount_refundable;
    return Number(p.amount) - Number(p.amount_refunded || 0);
  }

  // currencyDigits is the number of decimals of a currency's major unit
  // (2 for EUR, 0 for JPY); 2 for a code the browser does not know.
  function currencyDigits(currency) {
    try {
      return new Intl.NumberFormat('en', { style: 'currency', currency: currency }).resolvedOptions().maximumFractionDigits;
    } catch (e) {
      return 2;
    }
  }

  // parseMajor reads an amount typed in major units ("4.50", "4,5", "12")
  // into minor units, with no floating point: { minor } or { error }, the
  // error naming the field.
  function parseMajor(text, currency) {
    const digits = currencyDigits(currency);
    const s = String(text || '').trim();
    if (!s) return { error: 'Amount: enter the amount to refund in ' + currency + ', or use Refund the rest.' };
    const m = /^(\d{1,15})(?:[.,](\d*))?$/.exec(s);
    if (!m) return { error: 'Amount: "' + s + '" is not an amount in ' + currency + ' (write it like ' + (digits ? '4.50' : '450') + ').' };
    const frac = m[2] || '';
    if (frac.length > digits) {
      return { error: 'Amount: ' + currency + (digits ? ' has ' + digits + ' decimals' : ' has no decimals') + ', got "' + s + '".' };
    }
    const minor = Number(m[1]) * Math.pow(10, digits) + Number((frac + '0'.repeat(digits)).slice(0, digits) || '0');
    if (!Number.isSafeInteger(minor)) return { error: 'Amount: "' + s + '" is too large.' };
    if (minor <= 0) return { error: 'Amount: the refund must be more than zero.' };
    return { minor: minor };
  }

  // refundsTable lists a payment's refunds, oldest first.
  function refundsTable(list, currency) {
    return el('table', { id: 'refunds-table' },
      el('thead', {}, el('tr', {}, ['Refund', 'Amount', 'Status', 'Reason', 'Requested', 'Updated', 'Provider ref'].map((h) => el('th', { text: h })))),
      el('tbody', {}, list.map((r) => el('tr', { 'data-refund-id': r.id, 'data-status': r.status },
        el('td', { class: 'mono', text: r.id }),
        el('td', { class: 'num amount', text: fmtAmount(r.amount, r.currency || currency) }),
        el('td', { class: 'status' }, badge(r.status)),
        el('td', { class: 'wrap reason', text: r.reason || '' }),
        el('td', { text: fmtTime(r.created_at) }),
        el('td', { text: fmtTime(r.updated_at) }),
        el('td', { class: 'mono wrap', text: r.provider_ref || '' })))));
  }

  // refundView is the refund part of a payment's page: its refunds, and on
  // a captured payment with something left a form for a partial refund
  // and a button for the rest, each asking for a confirmation that names
  // the amount. The request always names the amount confirmed: if another
  // refund took part of it meanwhile, paystate refuses it (409) rather
  // than refund something else.
  function refundView(p, list, listErr) {
    if (refund.id !== p.id) resetRefund(p.id);
    const box = el('section', { class: 'refund', id: 'refund' }, el('h3', { text: 'Refunds' }));
    if (listErr) box.append(errorView(listErr, 'The refunds'));
    else if (list.length === 0) box.append(el('p', { class: 'hint', id: 'refunds-empty', text: 'No refunds.' }));
    else box.append(refundsTable(list, p.currency));
    if (refund.done) box.append(el('p', { class: 'notice', id: 'refund-result', role: 'status', text: refund.done }));
    const left = refundable(p);
    if (p.status === 'captured' && refundBlocked(p)) {
      // No form and no button: the bank holds or gave back the money, and
      // paystate refuses the refund (409 charge_disputed).
      box.append(el('p', { class: 'notice', id: 'refund-disputed', role: 'status',
        text: p.dispute === 'lost'
          ? 'No refund: this payment was charged back (its dispute was lost); the customer has the money back from the bank.'
          : 'No refund while the dispute is open (' + p.dispute + '): the bank holds the money. A won dispute makes it refundable again.' }));
      return box;
    }
    if (refund.stage !== 'idle') {
      box.append(refundConfirm(p));
      return box;
    }
    if (p.status !== 'captured' || !(left > 0)) return box;
    const amount = el('input', {
      type: 'text', id: 'refund-amount', name: 'amount', inputmode: 'decimal', autocomplete: 'off', size: '12',
      placeholder: majorText(left, p.currency), value: refund.amountText,
    });
    const reason = el('input', { type: 'text', id: 'refund-reason', name: 'reason', maxlength: '500', size: '32', placeholder: 'e.g. one item returned', value: refund.reasonText });
    const error = el('p', { class: 'error', id: 'refund-error', role: 'alert', text: refund.error, hidden: !refund.error });
    amount.addEventListener('input', () => { refund.amountText = amount.value; });
    reason.addEventListener('input', () => { refund.reasonText = reason.value; });
    // ask moves to the confirmation of minor units with a new key.
    const ask = (minor) => {
      const why = reason.value.trim();
      const problem = minor > left ? 'Amount: at most ' + fmtAmount(left, p.currency) + ' is left to refund.'
        : (new TextEncoder().encode(why).length > 500 ? 'Reason: at most 500 bytes.' : '');
      if (problem) {
        refund.error = error.textContent = problem;
        error.hidden = false;
        return;
      }
      refund = Object.assign(refund, { stage: 'confirm', key: newIdempotencyKey(), amount: minor, reason: why, sent: false, error: '', done: '' });
      openTimeline(p.id);
    };
    const form = el('form', { class: 'filters refund-form', id: 'refund-form', novalidate: true },
      el('label', {}, 'Amount (' + p.currency + ')', amount),
      el('label', {}, 'Reason (optional)', reason),
      el('button', { type: 'submit', class: 'danger', id: 'refund-start', text: 'Refund…' }),
      el('button', { type: 'button', class: 'secondary', id: 'refund-rest', text: (left < Number(p.amount) ? 'Refund the rest' : 'Refund all') + ' (' + fmtAmount(left, p.currency) + ')…', onclick: () => ask(left) }));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const r = parseMajor(amount.value, p.currency);
      if (r.error) {
        refund.error = error.textContent = r.error;
        error.hidden = false;
        amount.focus();
        return;
      }
      ask(r.minor);
    });
    box.append(form, el('p', { class: 'hint', id: 'refund-left' },
      'Refunded ' + fmtAmount(p.amount_refunded || 0, p.currency) + ' of ' + fmtAmount(p.amount, p.currency) + '; ' + fmtAmount(left, p.currency) + ' left.'), error);
    return box;
  }

  // majorText is minor units written in major units, as the form reads them.
  function majorText(minor, currency) {
    const digits = currencyDigits(currency);
    const s = String(Math.trunc(Number(minor))).padStart(digits + 1, '0');
    return digits ? s.slice(0, -digits) + '.' + s.slice(-digits) : s;
  }

  // refundConfirm asks to confirm the refund in refund (or, after a lost
  // answer, to send the same request again).
  function refundConfirm(p) {
    const busy = refund.stage === 'busy';
    const confirm = el('button', {
      type: 'button', class: 'danger', id: 'refund-confirm', disabled: busy,
      text: busy ? 'Refunding…' : (refund.sent ? 'Send again' : 'Refund ' + fmtAmount(refund.amount, p.currency)),
    });
    confirm.addEventListener('click', () => sendRefund(p));
    // Once sent without an answer, the key is kept: no way back but an
    // answer (or leaving the page).
    const cancel = refund.sent ? null : el('button', { type: 'button', class: 'secondary', id: 'refund-cancel', disabled: busy, text: 'Cancel' });
    if (cancel) {
      cancel.addEventListener('click', () => {
        resetRefund(p.id, { amountText: refund.amountText, reasonText: refund.reasonText });
        openTimeline(p.id);
      });
    }
    return el('div', { class: 'confirm', role: 'alertdialog', 'aria-labelledby': 'refund-question' },
      el('p', { id: 'refund-question' }, 'Refund ', el('strong', { text: fmtAmount(refund.amount, p.currency) }),
        ' of ' + fmtAmount(p.amount, p.currency) + ' (order ', el('span', { class: 'wrap', text: p.order_id }), ') to the customer through ' + p.provider,
        refund.reason ? [', reason “', el('span', { class: 'wrap', id: 'refund-question-reason', text: refund.reason }), '”'] : null,
        '? This cannot be undone.'),
      confirm, ' ', cancel,
      refund.error ? el('p', { class: 'error', id: 'refund-error', role: 'alert', text: refund.error }) : null);
  }

  // sendRefund asks the API for the confirmed refund, with the session's
  // CSRF token and the refund's idempotency key.
  async function sendRefund(p) {
    const asked = refund;
    asked.stage = 'busy';
    asked.error = '';
    asked.sent = true;
    openTimeline(p.id);
    const body = { amount: asked.amount };
    if (asked.reason) body.reason = asked.reason;
    try {
      const res = (await api('POST', '/v1/payments/' + encodeURIComponent(p.id) + '/refund', body, { 'Idempotency-Key': asked.key })) || {};
      const amount = typeof res.amount === 'number' ? res.amount : asked.amount;
      resetRefund(p.id, { done: 'Refund ' + (res.id || '') + ' of ' + fmtAmount(amount, p.currency) + ': ' + (res.status || 'sent') + '.' });
    } catch (err) {
      const msg = 'The refund failed: ' + err.message + (err.requestID ? ' (request id ' + err.requestID + ')' : '');
      if (err.status >= 400 && err.status < 500 && err.code !== 'idempotency_key_in_use') {
        // Refused (too much, not captured any more, signed out): nothing
        // was refunded under this key; back to the form, a new key next.
        resetRefund(p.id, { amountText: asked.amountText, reasonText: asked.reasonText, error: msg });
      } else {
        // No answer (network, 5xx, still in flight): keep the key.
        asked.stage = 'confirm';
        asked.error = msg + '. Send again asks for the same refund under the same idempotency key, so it cannot be made twice.';
      }
    }
    if (openPaymentID === p.id) openTimeline(p.id);
  }

  // ---- revenue -------------------------------------------------------------

  let revenueCharts = [];

  // majorUnits converts minor units to the currency's major unit.
  function majorUnits(amount, currency) {
    let digits = 2;
    try {
      digits = new Intl.NumberFormat('en', { style: 'currency', currency: currency }).resolvedOptions().maximumFractionDigits;
    } catch (e) { /* an unknown code: cents */ }
    return Number(amount) / Math.pow(10, digits);
  }

  // loadRevenue shows what the ledger says was captured, refunded and net
  // per UTC day and currency over the chosen days, and the balances.
  async function loadRevenue() {
    const fromIn = $('#revenue-from'), toIn = $('#revenue-to');
    const q = new URLSearchParams();
    if (fromIn.value) q.set('from', fromIn.value);
    if (toIn.value) q.set('to', toIn.value);
    const body = $('#revenue-body');
    let rev, bal;
    try {
      [rev, bal] = await Promise.all([api('GET', '/v1/ledger/revenue?' + q.toString()), api('GET', '/v1/ledger/balances')]);
    } catch (err) {
      destroyRevenueCharts();
      clear(body).append(errorView(err, 'Revenue'));
      return;
    }
    fromIn.value = rev.from;
    toIn.value = rev.to;
    renderRevenue(rev, (bal && bal.data) || []);
  }

  function destroyRevenueCharts() {
    for (const c of revenueCharts) c.destroy();
    revenueCharts = [];
  }

  function renderRevenue(rev, balances) {
    destroyRevenueCharts();
    const body = clear($('#revenue-body'));
    const rows = rev.data || [];
    const days = [];
    for (let d = rev.from; d <= rev.to && days.length < 400; d = addDays(d, 1)) days.push(d);
    const currencies = Array.from(new Set(rows.map((r) => r.currency))).sort();
    const charts = el('div', { class: 'charts', id: 'revenue-charts' });
    body.append(charts);
    if (currencies.length === 0) {
      charts.append(el('div', { class: 'empty', id: 'revenue-empty' }, 'Nothing was captured, refunded, lost or charged in fees from ' + rev.from + ' to ' + rev.to + ' (UTC).'));
    }
    for (const cur of currencies) {
      const byDay = new Map(rows.filter((r) => r.currency === cur).map((r) => [r.date, r]));
      const sum = (k) => rows.filter((r) => r.currency === cur).reduce((n, r) => n + r[k], 0);
      const canvas = el('canvas', { 'aria-label': 'Revenue in ' + cur + ' per day', role: 'img' });
      charts.append(el('figure', { class: 'chart revenue-chart', 'data-currency': cur },
        el('figcaption', {}, cur + ': captured ' + fmtAmount(sum('captured'), cur) + ', refunded ' + fmtAmount(sum('refunded'), cur) +
          ', lost to disputes ' + fmtAmount(sum('dispute_losses'), cur) + ', fees ' + fmtAmount(sum('fees'), cur) + ', net ' + fmtAmount(sum('net'), cur)),
        el('div', { class: 'chart-box' }, canvas)));
      // Bars in major units; each dataset keeps its minor units for the
      // tooltip, which formats them as the tables do.
      const minor = (k) => days.map((d) => (byDay.has(d) ? byDay.get(d)[k] : 0));
      const dataset = (k, label, extra) => Object.assign({ label: label, data: minor(k).map((n) => majorUnits(n, cur)), minor: minor(k) }, extra);
      revenueCharts.push(new Chart(canvas, {
        type: 'bar',
        data: {
          labels: days,
          datasets: [
            dataset('captured', 'Captured', { backgroundColor: '#16794a', order: 2 }),
            dataset('refunded', 'Refunded', { backgroundColor: '#b42318', order: 2 }),
            dataset('dispute_losses', 'Lost to disputes', { backgroundColor: '#7a2e0e', order: 2 }),
            dataset('fees', 'Fees', { backgroundColor: '#b54708', order: 2 }),
            dataset('net', 'Net', { type: 'line', borderColor: '#2456d3', backgroundColor: '#2456d3', pointRadius: 2, tension: 0.2, order: 1 }),
          ],
        },
        options: {
          animation: false,
          maintainAspectRatio: false,
          interaction: { mode: 'index', intersect: false },
          plugins: { tooltip: { callbacks: { label: (c) => c.dataset.label + ': ' + fmtAmount(c.dataset.minor[c.dataIndex], cur) } } },
          scales: { x: { ticks: { maxTicksLimit: 10 } }, y: { beginAtZero: true, title: { display: true, text: cur } } },
        },
      }));
    }
    if (rows.length) {
      body.append(el('h3', { text: 'Per day (UTC)' }),
        el('p', { class: 'hint', id: 'revenue-net' }, 'Net = captured − refunded − lost to disputes − fees, each on the day the ledger posted it. Money held by an open dispute, and payouts to your bank, are not in it: the balances below show them.'),
        el('table', { id: 'revenue-table' },
        el('thead', {}, el('tr', {}, ['Date', 'Currency', 'Captured', 'Refunded', 'Lost to disputes', 'Fees', 'Net'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows.map((r) => el('tr', { 'data-date': r.date, 'data-currency': r.currency },
          el('td', { text: r.date }), el('td', { text: r.currency }),
          el('td', { class: 'num captured', text: fmtAmount(r.captured, r.currency) }),
          el('td', { class: 'num refunded', text: fmtAmount(r.refunded, r.currency) }),
          el('td', { class: 'num dispute_losses', text: fmtAmount(r.dispute_losses || 0, r.currency) }),
          el('td', { class: 'num fees', text: fmtAmount(r.fees || 0, r.currency) }),
          el('td', { class: 'num net', text: fmtAmount(r.net, r.currency) }))))));
    }
    body.append(balancesView(balances));
  }

  // ACCOUNT_MEANING says what each ledger account's balance means, with its
  // sign: debits are positive, credits negative, and each currency sums to
  // zero.
  const ACCOUNT_MEANING = {
    psp_receivable: 'Positive: what the PSP holds for you (captured, less refunds, money held or lost in disputes, fees and payouts).',
    merchant_revenue: 'Negative: what you earned (captures, less refunds); a credit, so it shows below zero.',
    disputes: 'Positive: money the bank holds while disputes are open; it goes back to psp_receivable if won, to dispute_losses if lost.',
    dispute_losses: 'Positive: money lost to disputes.',
    psp_fees: 'Positive: fees the PSP took (settlement reconciliation).',
    payouts: 'Positive: what the PSP paid out to your bank (settlement reconciliation).',
  };

  // balancesView lists the ledger balance of each account and currency,
  // and whether each currency's accounts sum to zero.
  function balancesView(balances) {
    const box = el('section', { id: 'balances' }, el('h3', { text: 'Ledger balances' }));
    if (balances.length === 0) {
      box.append(el('div', { class: 'empty', id: 'balances-empty' }, 'The ledger is empty: nothing was captured yet.'));
      return box;
    }
    const sums = new Map();
    for (const b of balances) sums.set(b.currency, (sums.get(b.currency) || 0) + b.amount);
    const off = Array.from(sums).filter(([, n]) => n !== 0);
    box.append(el('table', { id: 'balances-table' },
      el('thead', {}, el('tr', {}, ['Account', 'Currency', 'Balance', 'What its sign means'].map((h) => el('th', { text: h })))),
      el('tbody', {}, balances.map((b) => el('tr', { 'data-account': b.account, 'data-currency': b.currency },
        el('td', { class: 'mono', text: b.account }), el('td', { text: b.currency }),
        el('td', { class: 'num', text: fmtAmount(b.amount, b.currency) }),
        el('td', { class: 'hint wrap account-meaning', text: ACCOUNT_MEANING[b.account] || '' }))))),
    el('p', { class: off.length ? 'error' : 'hint', id: 'balances-check' },
      off.length ? 'The ledger does not balance in ' + off.map(([c]) => c).join(', ') + ': run paystate verify.'
        : 'Balanced: in each currency the accounts sum to zero (debits positive, credits negative).'));
    return box;
  }

  // ---- review --------------------------------------------------------------

  const REVIEW_FIELDS = ['reason', 'payment_id', 'observed', 'status', 'provider', 'provider_ref', 'event_id', 'last_psp', 'note', 'created_at'];

  async function loadReview() {
    const body = $('#review-body');
    let items;
    try {
      const res = await api('GET', '/v1/review');
      items = (res && res.data) || [];
    } catch (err) {
      clear(body).append(errorView(err, 'The review queue'));
      return;
    }
    setReviewCount(items.length);
    clear(body);
    if (items.length === 0) {
      body.append(el('div', { class: 'empty', id: 'review-empty' }, 'The review queue is empty: nothing needs a human.'));
      return;
    }
    for (const it of items) body.append(reviewItem(it));
  }

  function setReviewCount(n) {
    const c = $('#review-count');
    c.textContent = String(n);
    c.hidden = !(n > 0);
  }

  function reviewItem(it) {
    // The item's id is the payment id, or orphan_<provider>_<event id> for
    // an event of a payment paystate does not know (only dismissable).
    const target = it.id || it.payment_id;
    const orphan = !it.payment_id;
    const facts = [];
    const seen = new Set(['id', 'evidence']);
    for (const k of REVIEW_FIELDS.concat(Object.keys(it))) {
      if (seen.has(k)) continue;
      seen.add(k);
      const val = it[k];
      if (val === null || val === undefined || val === '' || typeof val === 'object') continue;
      facts.push(el('div', {}, el('dt', { text: k.replace(/_/g, ' ') }), el('dd', { class: k === 'note' ? '' : 'wrap', text: k.endsWith('_at') ? fmtTime(val) : String(val) })));
    }
    const ev = it.evidence && typeof it.evidence === 'object' ? it.evidence : null;
    const current = ev && ev.payment ? ev.payment.status : '';
    const choices = orphan ? ['dismissed'] : ['captured', 'failed', 'refunded'];
    const status = el('select', { name: 'status', required: true },
      choices.map((s) => el('option', { value: s, text: s, selected: s === current })));
    const note = el('input', { type: 'text', name: 'note', maxlength: '1000', placeholder: 'what the PSP says, who decided', required: true });
    const submit = el('button', { type: 'submit', text: orphan ? 'Dismiss' : 'Resolve' });
    const result = el('span', { class: 'result', role: 'status' });
    const form = el('form', { class: 'resolve', 'data-payment-id': it.payment_id || '', 'data-review-id': target },
      el('label', {}, orphan ? 'Resolution' : 'Final status', status),
      el('label', {}, 'Note (kept in the timeline)', note),
      submit, result);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      submit.disabled = true;
      result.className = 'result';
      result.textContent = 'Resolving…';
      try {
        const res = await api('POST', '/v1/review/' + encodeURIComponent(target) + '/resolve', { status: status.value, note: note.value });
        const st = res && res.status;
        showNotice('Resolved ' + target + (st ? (orphan ? ': ' + st : ': the payment is ' + st) : '') + '.');
        loadReview();
      } catch (err) {
        submit.disabled = false;
        result.className = 'result error';
        result.textContent = err.message + (err.requestID ? ' (request id ' + err.requestID + ')' : '');
      }
    });
    return el('article', { class: 'review-item', 'data-review-id': target },
      el('header', {}, badge(it.reason),
        orphan ? el('span', { class: 'mono', text: it.id })
          : paymentLink(it.payment_id),
        current ? badge(current) : null),
      el('dl', { class: 'facts' }, facts),
      ev ? evidenceView(ev) : null, form);
  }

  // evidenceView shows what a human needs to decide: the timeline, the raw
  // webhooks received and the PSP's last status answer.
  function evidenceView(ev) {
    const steps = Array.isArray(ev.timeline) ? ev.timeline : [];
    const hooks = Array.isArray(ev.webhooks) ? ev.webhooks : [];
    const psp = ev.last_psp_status;
    const parts = [steps.length + ' timeline steps', hooks.length + ' webhooks received',
      psp ? 'last PSP answer: ' + (psp.status || (psp.found === false ? 'not found' : '?')) : 'PSP not asked'];
    const body = [];
    if (steps.length) {
      body.push(el('h4', { text: 'Timeline' }), el('table', { class: 'evidence-timeline' },
        el('thead', {}, el('tr', {}, ['#', 'At', 'Source', 'Kind', 'From → to', 'Version', 'Event id', 'Note'].map((h) => el('th', { text: h })))),
        el('tbody', {}, steps.map((s) => el('tr', {},
          el('td', { class: 'num', text: s.seq }), el('td', { text: fmtTime(s.at) }), el('td', { text: s.source }),
          el('td', {}, badge(s.kind)), el('td', { text: (s.from || '') + ' → ' + (s.to || '') }),
          el('td', { class: 'num', text: s.version }), el('td', { class: 'mono wrap', text: s.event_id || '' }),
          el('td', { class: 'wrap', text: s.note || '' }))))));
    }
    if (hooks.length) {
      body.push(el('h4', { text: 'Webhooks received' }), el('ul', { class: 'evidence-webhooks' }, hooks.map((w) => el('li', {},
        el('details', {},
          el('summary', {}, el('span', { class: 'mono', text: w.event_id }), ' ', w.type || '', ' · ', w.provider || '',
            ' · received ' + fmtTime(w.received_at), w.processed ? ' · applied' : ' · waiting'),
          el('pre', { text: JSON.stringify(w.body, null, 2) }))))));
    }
    if (psp) {
      body.push(el('h4', { text: 'Last PSP status answer' }), el('pre', { text: JSON.stringify(psp, null, 2) }));
    }
    return el('details', { class: 'evidence' }, el('summary', { text: 'Evidence: ' + parts.join(', ') }), body);
  }

  function showNotice(msg) {
    const body = $('#review-body');
    const n = el('div', { class: 'notice', id: 'review-notice', role: 'status', text: msg });
    const old = $('#review-notice');
    if (old) old.remove();
    body.parentNode.insertBefore(n, body);
  }

  // ---- disputes ------------------------------------------------------------

  const OPEN_DISPUTES = ['needs_response', 'under_review'];
  const HOUR = 3600 * 1000;

  // deadlineOf is a dispute's evidence deadline in ms, Infinity when the
  // PSP gave none (listed last).
  function deadlineOf(d) {
    const t = d.evidence_due_by ? Date.parse(d.evidence_due_by) : NaN;
    return isNaN(t) ? Infinity : t;
  }

  // fmtSpan writes a duration in ms as minutes, hours or days.
  function fmtSpan(ms) {
    const h = ms / HOUR;
    if (h < 1) return Math.max(1, Math.round(ms / 60000)) + ' min';
    if (h < 48) return Math.round(h) + (Math.round(h) === 1 ? ' hour' : ' hours');
    return Math.round(h / 24) + ' days';
  }

  // loadDisputes lists the disputes in the chosen status ("open": needs
  // response or under review), soonest evidence deadline first. A dispute
  // that still needs a response past its deadline is marked overdue.
  async function loadDisputes() {
    const sel = $('#dispute-status').value;
    const statuses = sel === 'open' ? OPEN_DISPUTES : [sel];
    const body = $('#disputes-body');
    let items = [];
    try {
      const res = await Promise.all(statuses.map((st) => {
        const q = new URLSearchParams({ limit: '500' });
        if (st) q.set('status', st);
        return api('GET', '/v1/disputes?' + q.toString());
      }));
      for (const r of res) items = items.concat((r && r.data) || []);
    } catch (err) {
      clear(body).append(errorView(err, 'Disputes'));
      return;
    }
    items.sort((a, b) => (deadlineOf(a) - deadlineOf(b)) || String(a.created_at).localeCompare(String(b.created_at)));
    if (sel === 'open' || sel === 'needs_response') setDisputesCount(items.filter((d) => d.status === 'needs_response').length);
    clear(body);
    if (items.length === 0) {
      body.append(el('div', { class: 'empty', id: 'disputes-empty' },
        sel === 'open' ? 'No open disputes: no chargeback waits for an answer.' : 'No ' + (sel || '') + ' disputes.'));
      return;
    }
    const now = Date.now();
    body.append(el('table', { id: 'disputes-table' },
      el('thead', {}, el('tr', {}, ['Evidence due by', 'Status', 'Payment', 'Amount', 'Reason', 'Dispute', 'Provider', 'Opened'].map((h) => el('th', { text: h })))),
      el('tbody', {}, items.map((d) => {
        const due = deadlineOf(d);
        const overdue = d.status === 'needs_response' && due < now;
        let when = '';
        if (due === Infinity) when = 'no deadline given';
        else if (OPEN_DISPUTES.includes(d.status)) when = due < now ? 'overdue by ' + fmtSpan(now - due) : 'in ' + fmtSpan(due - now);
        return el('tr', { 'data-dispute-id': d.id, 'data-payment-id': d.payment_id, 'data-status': d.status, class: overdue ? 'overdue' : null, 'data-overdue': overdue ? 'true' : null },
          el('td', { class: 'deadline' }, el('span', { class: 'due', text: due === Infinity ? '—' : fmtTime(d.evidence_due_by) }),
            overdue ? [' ', badge('overdue')] : null, when ? el('div', { class: 'hint when', text: when }) : null),
          el('td', {}, badge(d.status)),
          el('td', {}, d.payment_id ? paymentLink(d.payment_id) : '—'),
          el('td', { class: 'num amount', text: fmtAmount(d.amount, d.currency) }),
          el('td', { class: 'wrap', text: d.reason || '' }),
          el('td', { class: 'mono wrap', text: d.id }),
          el('td', { text: d.provider || '' }),
          el('td', { text: fmtTime(d.created_at) }));
      }))));
  }

  // countDisputes sets the tab's count of disputes that need a response.
  async function countDisputes() {
    try {
      const res = await api('GET', '/v1/disputes?status=needs_response&limit=500');
      setDisputesCount(((res && res.data) || []).length);
    } catch (e) { /* the tab shows the error when opened */ }
  }

  function setDisputesCount(n) {
    const c = $('#disputes-count');
    c.textContent = String(n);
    c.hidden = !(n > 0);
  }

  // ---- reconciliation ------------------------------------------------------

  // A run's counts, as GET /v1/reconciliation/runs lists them (a count, or
  // the lines themselves).
  const RUN_COUNTS = [['lines', 'Lines'], ['matched', 'Matched'], ['posted', 'Posted'], ['mismatched', 'Mismatched'], ['missing_locally', 'Missing here'], ['missing_at_psp', 'Missing at the PSP']];
  const UNMATCHED = ['mismatched', 'missing_locally', 'missing_at_psp'];
  // The columns of an unmatched line shown first; any other field follows.
  const LINE_COLUMNS = ['kind', 'problem', 'reason', 'line', 'line_id', 'id', 'provider_ref', 'payment_id', 'type', 'amount', 'expected', 'expected_amount', 'fee', 'net', 'currency', 'payout_id', 'available_on', 'captured_at', 'note'];
  const MONEY_COLUMNS = ['amount', 'expected', 'fee', 'net'];
  // The run whose lines are shown: the newest, until the user picks one.
  let openRunID = '';
  let runPicked = false;

  function countOf(v) {
    if (Array.isArray(v)) return v.length;
    if (typeof v === 'number') return v;
    return v === undefined || v === null ? 0 : Number(v) || 0;
  }

  function unmatchedCount(run) {
    return UNMATCHED.reduce((n, k) => n + countOf(run[k]), 0);
  }

  function noRunsView(code) {
    return el('div', { class: 'empty', id: 'reconciliation-empty', 'data-error': code || null },
      'No reconciliation runs yet: import a settlement report with ', el('code', { text: 'paystate reconcile import -format stripe|paypal|mollie|generic FILE' }),
      ' or read Stripe\'s with ', el('code', { text: 'paystate reconcile stripe -since DATE' }), '.');
  }

  // loadReconciliation lists the last runs and the unmatched lines of the
  // chosen one (the latest at first). paystate answers 404 when it has no
  // run to list, which is shown as such.
  async function loadReconciliation() {
    const body = $('#reconciliation-body');
    let runs;
    try {
      const res = await api('GET', '/v1/reconciliation/runs');
      runs = (res && res.data) || [];
    } catch (err) {
      clear($('#reconciliation-run'));
      clear(body).append(err.status === 404 ? noRunsView(err.code) : errorView(err, 'Reconciliation runs'));
      return;
    }
    clear(body);
    if (runs.length === 0) {
      clear($('#reconciliation-run'));
      body.append(noRunsView(''));
      return;
    }
    runs = runs.slice(0, 20);
    if (!runPicked || !runs.some((r) => r.id === openRunID)) {
      openRunID = runs[0].id;
      runPicked = false;
    }
    body.append(el('table', { id: 'reconciliation-table' },
      el('thead', {}, el('tr', {}, ['Run', 'Provider', 'Source', 'At'].concat(RUN_COUNTS.map(([, h]) => h), ['']).map((h) => el('th', { text: h })))),
      el('tbody', {}, runs.map((r) => {
        const open = el('button', { type: 'button', class: 'secondary show-run', text: 'Unmatched lines' });
        open.addEventListener('click', () => { openRunID = r.id; runPicked = true; markRun(); loadRun(r.id); });
        const bad = unmatchedCount(r);
        return el('tr', { 'data-run-id': r.id, class: bad ? 'unmatched' : null, 'data-ok': bad ? 'false' : 'true' },
          el('td', { class: 'mono wrap', text: r.id }),
          el('td', { text: r.provider || '' }),
          el('td', { class: 'wrap', text: r.source || '' }),
          el('td', { text: fmtTime(r.finished_at || r.created_at || r.started_at || r.at) }),
          RUN_COUNTS.map(([k]) => el('td', { class: 'num ' + k + (UNMATCHED.includes(k) && countOf(r[k]) > 0 ? ' bad' : ''), text: String(countOf(r[k])) })),
          el('td', {}, open));
      }))));
    markRun();
    loadRun(openRunID);
  }

  // importReport sends the chosen settlement report to POST
  // /v1/reconciliation/runs (the session's CSRF token goes with it, as
  // with every change) and opens the run it made.
  async function importReport(ev) {
    ev.preventDefault();
    const file = $('#reconciliation-file').files[0];
    const status = $('#reconciliation-import-status');
    if (!file) {
      status.textContent = 'Choose a settlement report first.';
      return;
    }
    const q = new URLSearchParams({ format: $('#reconciliation-format').value, name: file.name });
    const provider = $('#reconciliation-provider').value.trim();
    if (provider) q.set('provider', provider);
    const button = $('#reconciliation-import-submit');
    button.disabled = true;
    status.textContent = 'Importing ' + file.name + '…';
    try {
      const run = await api('POST', '/v1/reconciliation/runs?' + q.toString(), file);
      status.dataset.runId = run.id;
      status.textContent = 'Imported ' + file.name + ': ' + run.lines + ' lines, ' + run.matched + ' matched, ' + run.posted + ' posted, ' +
        unmatchedCount(run) + ' not matched.';
      openRunID = run.id;
      runPicked = true;
      $('#reconciliation-import').reset();
    } catch (err) {
      delete status.dataset.runId;
      status.textContent = 'Import refused: ' + err.message + (err.requestID ? ' (request id ' + err.requestID + ')' : '');
    } finally {
      button.disabled = false;
    }
    loadReconciliation();
  }

  function markRun() {
    for (const tr of document.querySelectorAll('#reconciliation-table tbody tr')) {
      tr.classList.toggle('selected', tr.dataset.runId === openRunID);
    }
  }

  // linesOf finds a run's unmatched lines: one list (items, unmatched),
  // or a list per kind, each line then tagged with its kind.
  function linesOf(run) {
    for (const k of ['items', 'unmatched', 'unmatched_lines']) {
      if (Array.isArray(run[k])) return run[k];
    }
    const out = [];
    for (const k of UNMATCHED) {
      if (Array.isArray(run[k])) for (const l of run[k]) out.push(Object.assign({ kind: k }, l));
    }
    if (out.length === 0 && Array.isArray(run.lines)) return run.lines.filter((l) => !l.matched && l.status !== 'matched');
    return out;
  }

  // loadRun shows the unmatched lines of run id.
  async function loadRun(id) {
    const box = $('#reconciliation-run');
    let res;
    try {
      res = await api('GET', '/v1/reconciliation/runs/' + encodeURIComponent(id));
    } catch (err) {
      if (openRunID === id) clear(box).append(errorView(err, 'Run ' + id));
      return;
    }
    if (openRunID !== id) return;
    const run = (res && res.run) || res || {};
    const lines = linesOf(Object.assign({}, run, res && res.run ? res : {}));
    clear(box).append(el('h3', { id: 'reconciliation-run-title' }, 'Run ', el('span', { class: 'mono', text: id }),
      ': ' + countOf(run.lines) + ' lines, ' + countOf(run.matched) + ' matched, ' + unmatchedCount(run) + ' unmatched'));
    if (lines.length === 0) {
      box.append(el('div', { class: 'empty', id: 'reconciliation-lines-empty' }, unmatchedCount(run) ? 'paystate did not list the unmatched lines of this run.' : 'Every line of this run matched the ledger.'));
      return;
    }
    const seen = new Set();
    for (const l of lines) for (const k of Object.keys(l)) seen.add(k);
    const cols = LINE_COLUMNS.filter((c) => seen.has(c)).concat(Array.from(seen).filter((c) => !LINE_COLUMNS.includes(c)).sort());
    box.append(el('table', { id: 'reconciliation-lines' },
      el('thead', {}, el('tr', {}, cols.map((c) => el('th', { text: c.replace(/_/g, ' ') })))),
      el('tbody', {}, lines.map((l) => el('tr', { 'data-kind': l.kind || l.problem || l.reason || '', 'data-provider-ref': l.provider_ref || null },
        cols.map((c) => {
          const v = l[c];
          if (v === undefined || v === null) return el('td', {});
          if (['kind', 'problem', 'reason'].includes(c)) return el('td', {}, badge(String(v)));
          if (c === 'payment_id' && v) return el('td', {}, paymentLink(String(v)));
          if (typeof v === 'number' && l.currency && (MONEY_COLUMNS.includes(c) || c.endsWith('_amount'))) {
            return el('td', { class: 'num ' + c, text: fmtAmount(v, l.currency) });
          }
          if (typeof v === 'object') return el('td', { class: 'mono wrap', text: JSON.stringify(v) });
          return el('td', { class: (c === 'id' || c.endsWith('_id') || c.endsWith('_ref') ? 'mono wrap ' : 'wrap ') + c, text: c.endsWith('_at') ? fmtTime(v) : String(v) });
        }))))));
  }

  // ---- deliveries ----------------------------------------------------------

  const DELIVERY_COLUMNS = ['id', 'effect', 'endpoint', 'event_type', 'event_id', 'payment_id', 'state', 'attempts', 'last_error', 'note', 'next_attempt_at', 'event_at', 'updated_at'];

  const deliveries = { cursor: '', prev: [], next: '' };

  async function loadDeliveries() {
    const state = $('#delivery-state').value;
    const body = $('#deliveries-body');
    $('#replay-dead').hidden = state !== 'dead';
    const q = new URLSearchParams({ state: state, limit: '100' });
    if (deliveries.cursor) q.set('cursor', deliveries.cursor);
    let items;
    try {
      const res = await api('GET', '/v1/deliveries?' + q.toString());
      items = (res && res.data) || [];
      deliveries.next = (res && res.next_cursor) || '';
    } catch (err) {
      deliveries.next = '';
      clear(body).append(errorView(err, 'Deliveries'));
      return;
    } finally {
      $('#deliveries-older').disabled = !deliveries.next;
      $('#deliveries-newer').disabled = deliveries.prev.length === 0;
    }
    clear(body);
    if (items.length === 0) {
      body.append(el('div', { class: 'empty', id: 'deliveries-empty' },
        state === 'dead' ? 'No dead letters: every effect was delivered or is still being retried.' : 'No ' + state + ' deliveries.'));
      return;
    }
    const cols = DELIVERY_COLUMNS.filter((c) => items.some((d) => d[c] !== undefined && d[c] !== null && d[c] !== ''));
    const rows = items.map((d) => {
      const retry = d.state === 'done' ? null : el('button', { type: 'button', class: 'secondary retry', text: d.state === 'dead' ? 'Retry' : 'Retry now' });
      const cell = el('td', {}, retry);
      if (retry) {
        retry.addEventListener('click', async () => {
          retry.disabled = true;
          try {
            const res = await api('POST', '/v1/deliveries/' + encodeURIComponent(d.id) + '/retry');
            cell.append(el('span', { class: 'hint', text: ' ' + ((res && res.state) || 'queued') }));
          } catch (err) {
            retry.disabled = false;
            cell.append(el('span', { class: 'error', text: ' ' + err.message }));
          }
        });
      }
      return el('tr', { 'data-delivery-id': d.id }, cell,
        cols.map((c) => {
          const v = d[c];
          if (c === 'state') return el('td', {}, badge(String(v)));
          if (c === 'payment_id' && v) {
            return el('td', {}, paymentLink(v));
          }
          if (typeof v === 'object' && v !== null) return el('td', { class: 'mono wrap', text: JSON.stringify(v) });
          const cls = c === 'attempts' ? 'num' : (c === 'id' || c.endsWith('_id') || c === 'endpoint' ? 'mono wrap' : 'wrap');
          return el('td', { class: cls, text: c.endsWith('_at') ? fmtTime(v) : (v === undefined || v === null ? '' : String(v)) });
        }));
    });
    body.append(el('table', { id: 'deliveries-table' },
      el('thead', {}, el('tr', {}, el('th', {}), cols.map((c) => el('th', { text: c.replace(/_/g, ' ') })))),
      el('tbody', {}, rows)));
  }

  function bindDeliveries() {
    const reset = () => { deliveries.cursor = ''; deliveries.prev = []; loadDeliveries(); };
    $('#deliveries-refresh').addEventListener('click', reset);
    $('#delivery-state').addEventListener('change', reset);
    $('#deliveries-older').addEventListener('click', () => {
      if (!deliveries.next) return;
      deliveries.prev.push(deliveries.cursor);
      deliveries.cursor = deliveries.next;
      loadDeliveries();
    });
    $('#deliveries-newer').addEventListener('click', () => {
      if (deliveries.prev.length === 0) return;
      deliveries.cursor = deliveries.prev.pop();
      loadDeliveries();
    });
    // Replay the dead letters that died since a time (all of them when no
    // time is given).
    $('#replay-dead').addEventListener('submit', async (e) => {
      e.preventDefault();
      const out = $('#replay-result');
      const v = $('#replay-since').value;
      const since = v ? new Date(v).toISOString() : '1970-01-01T00:00:00Z';
      out.className = 'hint';
      out.textContent = 'Replaying…';
      try {
        const res = await api('POST', '/v1/deliveries/retry?state=dead&since=' + encodeURIComponent(since));
        out.textContent = 'Replayed ' + ((res && res.retried) || 0) + ' dead letters.';
        reset();
      } catch (err) {
        out.className = 'error';
        out.textContent = err.message;
      }
    });
  }

  // ---- charts --------------------------------------------------------------

  // parseProm parses the Prometheus text format into samples.
  function parseProm(text) {
    const out = [];
    for (const raw of text.split('\n')) {
      const line = raw.trim();
      if (!line || line[0] === '#') continue;
      const m = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
      if (!m) continue;
      const name = m[0];
      let i = name.length;
      const labels = {};
      if (line[i] === '{') {
        i++;
        for (;;) {
          while (line[i] === ' ' || line[i] === ',') i++;
          if (line[i] === '}') { i++; break; }
          const lm = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(i));
          if (!lm || line[i + lm[0].length] !== '=' || line[i + lm[0].length + 1] !== '"') { i = -1; break; }
          i += lm[0].length + 2;
          let v = '';
          while (i < line.length && line[i] !== '"') {
            if (line[i] === '\\' && i + 1 < line.length) {
              const c = line[i + 1];
              v += c === 'n' ? '\n' : c;
              i += 2;
            } else {
              v += line[i++];
            }
          }
          if (line[i] !== '"') { i = -1; break; }
          i++;
          labels[lm[0]] = v;
        }
        if (i < 0) continue;
      }
      const value = parseFloat(line.slice(i).trim().split(/\s+/)[0]);
      if (isNaN(value)) continue;
      out.push({ name: name, labels: labels, value: value });
    }
    return out;
  }

  function sumBy(samples, name, label) {
    const m = new Map();
    let found = false;
    for (const s of samples) {
      if (s.name !== name) continue;
      found = true;
      const k = label ? (s.labels[label] || '(none)') : 'total';
      m.set(k, (m.get(k) || 0) + s.value);
    }
    return found ? m : null;
  }

  // Each chart keeps its series: name → [{t, v}].
  const charts = {
    webhooks: { id: 'chart-webhooks', unit: '/s', series: new Map() },
    finalize: { id: 'chart-finalize', unit: '/s', series: new Map() },
    drift: { id: 'chart-drift', unit: '/min', series: new Map() },
    lag: { id: 'chart-lag', unit: 's', series: new Map() },
  };
  let lastSample = null;

  function push(chart, key, t, v) {
    let s = chart.series.get(key);
    if (!s) { s = []; chart.series.set(key, s); }
    s.push({ t: t, v: v });
    if (s.length > HISTORY) s.shift();
  }

  // rates turns two cumulative counters into per-unit rates.
  function rates(chart, cur, prev, t, dt, per) {
    if (!cur) return;
    for (const [k, v] of cur) {
      const p = prev && prev.has(k) ? prev.get(k) : (prev ? 0 : null);
      if (p === null) continue;
      const d = v - p;
      push(chart, k, t, d < 0 ? 0 : d / dt * per);
    }
  }

  async function pollMetrics() {
    let text;
    try {
      const res = await fetch('/metrics', { credentials: 'same-origin' });
      if (!res.ok) throw new Error('HTTP ' + res.status);
      text = await res.text();
    } catch (e) {
      $('#charts-status').textContent = 'the last read failed: ' + e.message;
      return;
    }
    const t = Date.now();
    const samples = parseProm(text);
    const cur = {
      webhooks: sumBy(samples, 'paystate_webhooks_total'),
      finalize: sumBy(samples, 'paystate_finalize_outcomes_total', 'outcome'),
      drift: sumBy(samples, 'paystate_sweeper_drift_corrected_total', 'to'),
      lag: sumBy(samples, 'paystate_ripple_outbox_lag_seconds'),
      lagSum: sumBy(samples, 'paystate_ripple_outbox_lag_seconds_sum'),
      lagCount: sumBy(samples, 'paystate_ripple_outbox_lag_seconds_count'),
      review: sumBy(samples, 'paystate_review_queue_size'),
    };
    if (lastSample) {
      const dt = (t - lastSample.t) / 1000;
      if (dt > 0) {
        rates(charts.webhooks, cur.webhooks, lastSample.webhooks, t, dt, 1);
        rates(charts.finalize, cur.finalize, lastSample.finalize, t, dt, 1);
        rates(charts.drift, cur.drift, lastSample.drift, t, dt, 60);
        if (!cur.lag && cur.lagSum && cur.lagCount && lastSample.lagSum && lastSample.lagCount) {
          const ds = cur.lagSum.get('total') - lastSample.lagSum.get('total');
          const dc = cur.lagCount.get('total') - lastSample.lagCount.get('total');
          push(charts.lag, 'mean', t, dc > 0 ? ds / dc : 0);
        }
      }
    }
    if (cur.lag) push(charts.lag, 'lag', t, cur.lag.get('total'));
    if (cur.review) setReviewCount(cur.review.get('total'));
    cur.t = t;
    lastSample = cur;
    $('#charts-status').textContent = 'last read ' + new Date(t).toLocaleTimeString();
    if (activeTab === 'charts') drawCharts();
  }

  function drawCharts() {
    for (const c of Object.values(charts)) drawChart(c);
  }

  // chartColor is the i-th colour of the palette.
  function chartColor(i) {
    return PALETTE[i % PALETTE.length];
  }

  // drawChart draws a live chart with Chart.js: one line per series over
  // the last HISTORY samples, and the last value of each in the legend.
  function drawChart(chart) {
    const fig = document.getElementById(chart.id);
    const canvas = fig.querySelector('canvas');
    const legend = clear(fig.querySelector('.legend'));
    const status = fig.querySelector('.chart-empty');
    const keys = Array.from(chart.series.keys()).sort();
    const empty = keys.every((k) => chart.series.get(k).length === 0);
    status.hidden = !empty;
    status.textContent = lastSample ? 'no data yet: nothing counted since paystate started' : 'waiting for two samples…';
    const datasets = keys.map((k, i) => ({
      label: k,
      data: chart.series.get(k).map((p) => ({ x: p.t, y: p.v })),
      borderColor: chartColor(i),
      backgroundColor: chartColor(i),
      borderWidth: 1.8,
      pointRadius: 0,
      tension: 0.2,
    }));
    const now = Date.now();
    if (!chart.chart) {
      chart.chart = new Chart(canvas, {
        type: 'line',
        data: { datasets: datasets },
        options: {
          animation: false,
          maintainAspectRatio: false,
          parsing: false,
          interaction: { mode: 'nearest', axis: 'x', intersect: false },
          plugins: { legend: { display: false }, tooltip: { callbacks: { label: (c) => c.dataset.label + ': ' + fmtNum(c.parsed.y) + ' ' + chart.unit } } },
          scales: {
            x: { type: 'linear', ticks: { maxTicksLimit: 6, callback: (v) => new Date(v).toLocaleTimeString() } },
            y: { beginAtZero: true, ticks: { callback: (v) => fmtNum(v) } },
          },
        },
      });
    } else {
      chart.chart.data.datasets = datasets;
    }
    chart.chart.options.scales.x.min = now - HISTORY * METRICS_EVERY;
    chart.chart.options.scales.x.max = now;
    chart.chart.update('none');
    keys.forEach((k, i) => {
      const pts = chart.series.get(k);
      const last = pts.length ? pts[pts.length - 1].v : 0;
      legend.append(el('li', {}, el('span', { class: 'swatch c' + (i % PALETTE.length) }), k + ': ' + fmtNum(last) + ' ' + chart.unit));
    });
  }

  function fmtNum(v) {
    if (v === 0) return '0';
    if (Math.abs(v) >= 100) return v.toFixed(0);
    if (Math.abs(v) >= 1) return v.toFixed(1);
    return v.toFixed(2);
  }

  // ---- start ---------------------------------------------------------------

  function start() {
    for (const b of document.querySelectorAll('[role="tab"]')) {
      b.addEventListener('click', () => { location.hash = '#' + b.dataset.tab; });
    }
    bindPayments();
    $('#revenue-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadRevenue(); });
    $('#review-refresh').addEventListener('click', loadReview);
    $('#disputes-refresh').addEventListener('click', loadDisputes);
    $('#dispute-status').addEventListener('change', loadDisputes);
    $('#reconciliation-refresh').addEventListener('click', loadReconciliation);
    $('#reconciliation-import').addEventListener('submit', importReport);
    bindDeliveries();
    window.addEventListener('hashchange', route);
    window.addEventListener('resize', () => { if (activeTab === 'charts') drawCharts(); });
    route();
    countDisputes();
    pollMetrics();
    setInterval(pollMetrics, METRICS_EVERY);
    // The first page of payments and the open timeline follow live changes;
    // the review and deliveries lists reload on demand (their forms would
    // otherwise be reset under the user's hands).
    setInterval(() => {
      if (document.hidden || activeTab !== 'payments') return;
      if (openPaymentID) {
        if (!refundInUse()) openTimeline(openPaymentID, true);
      } else if (!payments.cursor) {
        loadPayments(true);
      }
    }, REFRESH_EVERY);
    // The tabs are in the page before this script runs (it is deferred):
    // a click that early does nothing. Browser tests wait for this mark.
    document.documentElement.dataset.ready = 'true';
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
