// console.js — the operator console's page logic (docs/console.md).
//
// Rules this file keeps (src/serve/console.c, OC1-OC4):
//  - The API key is held in `session.key`, a variable of this module: never
//    written to a cookie, localStorage/sessionStorage, a URL, the history or
//    the console log. Sign-out and a 401 drop it. Reloading the tab forgets it.
//  - Every call goes to this origin's JSON routes with that key in the
//    Authorization header (credentials: 'omit', no cookies exist anyway).
//  - Every value received is written with textContent / createElement, never
//    innerHTML: markup in an account id or a reason is shown, never run.
'use strict';

const session = { key: null, principal: null };
const $main = () => document.getElementById('main');

// ---------------------------------------------------------------------------
// DOM helpers: the only way this file writes to the page (OC4).
// ---------------------------------------------------------------------------
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') e.textContent = String(v);
    else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}
function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
function show(...kids) { const m = clear($main()); m.append(...kids.flat().filter(Boolean)); }
function msg(kind, text) { return el('div', { class: 'msg ' + kind, role: kind === 'error' ? 'alert' : 'status', text }); }
function notice(kind, text) {
  const n = clear(document.getElementById('notice'));
  if (text) n.append(msg(kind, text));
}

// ---------------------------------------------------------------------------
// Times: UTC, and the viewer's zone beside it.
// ---------------------------------------------------------------------------
const localZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'local';
function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const utc = d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace('Z', ' UTC');
  if (d.getTimezoneOffset() === 0 && /^(UTC|Etc\/UTC|Etc\/GMT|GMT)$/.test(localZone)) return utc; // the viewer is on UTC
  const local = d.toLocaleString(undefined, { year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  return utc + ' (' + local + ' ' + localZone + ')';
}
function timeEl(iso) { return el('time', { datetime: iso || null, text: fmtTime(iso) }); }
function fmtAge(s) {
  if (s === null || s === undefined) return '—';
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min';
  if (s < 86400) return (s / 3600).toFixed(1) + ' h';
  return (s / 86400).toFixed(1) + ' d';
}
// The age buckets of /metrics (oncegate_operations_backlog{age=...}).
const BUCKETS = [['lt_1m', 60, 'under 1 min'], ['lt_10m', 600, 'under 10 min'],
  ['lt_1h', 3600, 'under 1 h'], ['lt_1d', 86400, 'under 1 day'], ['ge_1d', Infinity, '1 day or more']];
function bucketOf(age) { return BUCKETS.find(([, bound]) => age < bound)[0]; }

// ---------------------------------------------------------------------------
// The API: same routes, same checks as any client (OC1).
// ---------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body, retryAfter) {
    super(explain(status, body, retryAfter));
    this.status = status; this.body = body; this.code = body && body.error;
  }
}
// What a failed call means to the person at the screen, and what to do.
function explain(status, body, retryAfter) {
  const code = body && body.error ? body.error : null;
  const detail = body && body.message ? ' (' + code + ': ' + body.message + ')' : code ? ' (' + code + ')' : '';
  switch (status) {
    case 0: return 'The server did not answer. If you were changing something, it may or may not have been applied: reload the record to see its state before trying again.';
    case 400: return 'The server refused the request as malformed' + detail + '. Check the fields and try again.';
    case 401: return 'The key was not accepted (it is unknown or was removed). Sign in again.';
    case 403: return 'This key is not allowed to do that: its principal lacks the role this needs' + detail + '.';
    case 404: return 'Not found' + detail + '.';
    case 409: return 'Refused: the state is not what this action needs' + detail + '. Nothing was changed. Reload to see the current state.';
    case 429: return 'Too many requests from this key or address' + detail + '. Wait ' + (retryAfter || 'a few') + ' seconds, then retry.';
    case 503: return 'The store is unavailable; nothing was changed. Retry' + (retryAfter ? ' in ' + retryAfter + ' s' : '') + '.';
    default: return 'The server answered ' + status + detail + '.';
  }
}
async function api(method, path, body, key) {
  const headers = { 'Accept': 'application/json' };
  const k = key === undefined ? session.key : key;
  if (k) headers['Authorization'] = 'Bearer ' + k;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit', cache: 'no-store', redirect: 'error', referrerPolicy: 'no-referrer' });
  } catch (e) {
    throw new ApiError(0, null, null);
  }
  let json = null;
  try { json = await res.json(); } catch (e) { json = null; }
  if (!res.ok) {
    if (res.status === 401 && key === undefined) signOut('The key was not accepted any more: sign in again.');
    throw new ApiError(res.status, json, res.headers.get('Retry-After'));
  }
  return json;
}

// ---------------------------------------------------------------------------
// Sign-in: the key typed here stays in this module's memory (OC3).
// ---------------------------------------------------------------------------
function signOut(why) {
  session.key = null; session.principal = null;
  document.getElementById('nav').hidden = true;
  document.getElementById('signout').hidden = true;
  document.getElementById('who').textContent = '';
  stopLive();
  if (location.hash !== '' && location.hash !== '#/') location.hash = '#/';
  else route();
  if (why) notice('warn', why);
}
function pageSignIn() {
  const input = el('input', { type: 'password', id: 'apikey', name: 'apikey', autocomplete: 'off',
    spellcheck: 'false', required: true, 'aria-describedby': 'keyhint' });
  const out = el('div');
  const form = el('form', { id: 'signin', on: { submit: async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    input.value = '';
    clear(out);
    if (!key) { out.append(msg('error', 'Enter an operator API key.')); return; }
    try {
      await api('GET', '/v1/admin/operations?limit=1', undefined, key);
    } catch (e) {
      out.append(msg('error', e.status === 403
        ? 'This key is valid but its principal has no operator role: the console needs one.'
        : e.message));
      return;
    }
    session.key = key;
    document.getElementById('nav').hidden = false;
    document.getElementById('signout').hidden = false;
    document.getElementById('who').textContent = 'signed in (operator)';
    notice();
    location.hash = '#/backlog';
  } } },
  el('label', { for: 'apikey', text: 'Operator API key' }), input,
  el('p', { class: 'hint', id: 'keyhint', text: 'Kept only in this tab\u2019s memory: never stored, never put in a URL. Reloading the page signs you out.' }),
  el('button', { type: 'submit', text: 'Sign in' }));
  show(el('h1', { text: 'Sign in' }), form, out);
  input.focus();
}

// ---------------------------------------------------------------------------
// The backlog: Unknown and NeedsReconciliation operations, oldest first.
// ---------------------------------------------------------------------------
function statusBadge(s) { return el('span', { class: 'status ' + s, text: s }); }
function table(cols, rows, empty) {
  if (!rows.length) return el('p', { class: 'empty', text: empty });
  return el('div', { class: 'tablewrap' }, el('table', { class: 'responsive' },
    el('thead', {}, el('tr', {}, cols.map((c) => el('th', { scope: 'col', text: c[0] })))),
    el('tbody', {}, rows.map((r) => el('tr', {}, cols.map((c) => {
      const v = c[1](r);
      return el('td', { 'data-label': c[0], class: c[2] || null }, v instanceof Node ? v : String(v ?? '—'));
    }))))));
}
async function pageBacklog(params) {
  const kind = params.get('kind') || '';
  const status = params.get('status') || 'unknown,needs_reconciliation';
  const form = el('form', { class: 'row', id: 'backlog-filter', on: { submit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    if (kindSel.value) q.set('kind', kindSel.value);
    if (statSel.value !== 'unknown,needs_reconciliation') q.set('status', statSel.value);
    location.hash = '#/backlog' + (q.toString() ? '?' + q : '');
  } } });
  const kindSel = el('select', { id: 'f-kind' },
    el('option', { value: '', text: 'all kinds' }), el('option', { value: 'credit', text: 'credits' }),
    el('option', { value: 'payout', text: 'payout attempts' }));
  kindSel.value = kind;
  const statSel = el('select', { id: 'f-status' },
    el('option', { value: 'unknown,needs_reconciliation', text: 'Unknown and NeedsReconciliation' }),
    el('option', { value: 'unknown', text: 'Unknown' }),
    el('option', { value: 'needs_reconciliation', text: 'NeedsReconciliation' }));
  statSel.value = status;
  form.append(el('div', {}, el('label', { for: 'f-kind', text: 'Kind' }), kindSel),
    el('div', {}, el('label', { for: 'f-status', text: 'Status' }), statSel),
    el('div', {}, el('button', { type: 'submit', text: 'Filter' })),
    el('div', {}, el('button', { type: 'button', class: 'secondary', text: 'Refresh', on: { click: () => route() } })));
  show(el('h1', { text: 'Backlog' }), form, el('p', { class: 'hint', text: 'Loading\u2026' }));
  const q = new URLSearchParams({ status, limit: '1000' });
  if (kind) q.set('kind', kind);
  let data;
  try { data = await api('GET', '/v1/admin/operations?' + q); } catch (e) {
    show(el('h1', { text: 'Backlog' }), form, msg('error', e.message)); return;
  }
  const ops = data.operations || [];
  const counts = Object.fromEntries(BUCKETS.map(([b]) => [b, 0]));
  for (const o of ops) counts[bucketOf(o.age_seconds)]++;
  const buckets = el('div', { class: 'buckets', 'aria-label': 'By age' },
    BUCKETS.map(([b, , label]) => el('div', { class: 'bucket', 'data-bucket': b }, el('b', { text: counts[b] }), ' ' + label)));
  const tbl = table([
    ['Operation', (o) => el('a', { href: '#/operation/' + encodeURIComponent(o.operation_id), text: o.operation_id }), 'mono'],
    ['Kind', (o) => o.kind],
    ['Status', (o) => statusBadge(o.status)],
    ['Age', (o) => fmtAge(o.age_seconds)],
    ['Created', (o) => timeEl(o.created_at)],
    ['Account', (o) => o.account],
    ['Amount', (o) => o.amount + ' ' + o.currency],
    ['Reason', (o) => o.reason],
    ['Caller', (o) => o.caller],
  ], ops, kind || status !== 'unknown,needs_reconciliation'
    ? 'Nothing matches this filter: no operation of this kind is in this status.'
    : 'The backlog is empty: no operation or payout attempt is Unknown or awaiting reconciliation.');
  show(el('h1', { text: 'Backlog' }), form,
    el('p', { class: 'hint', text: ops.length + ' operation' + (ops.length === 1 ? '' : 's') + ', oldest first.' + (ops.length >= 1000 ? ' Only the oldest 1000 are shown.' : '') }),
    buckets, tbl);
}

// ---------------------------------------------------------------------------
// One operation: its record, its history as a timeline, the hand resolution.
// ---------------------------------------------------------------------------
function kv(pairs) {
  return el('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) =>
    [el('dt', { text: k }), el('dd', {}, v instanceof Node ? v : String(v ?? '—'))]));
}
async function pageOperation(id) {
  show(el('h1', { text: 'Operation' }), el('p', { class: 'hint', text: 'Loading\u2026' }));
  let op;
  try { op = await api('GET', '/v1/admin/operations/' + encodeURIComponent(id)); } catch (e) {
    show(el('h1', { text: 'Operation' }), msg('error', e.status === 404 ? 'No operation has this id.' : e.message),
      el('p', {}, el('a', { href: '#/backlog', text: 'Back to the backlog' })));
    return;
  }
  renderOperation(op);
}
function renderOperation(op, banner) {
  const hist = op.history || [];
  const timeline = hist.length ? el('ol', { class: 'timeline', id: 'timeline' }, hist.map((h) => el('li', {},
    el('div', {}, el('strong', { text: h.kind }), ' ', statusBadge(h.from), ' \u2192 ', statusBadge(h.to)),
    el('div', { class: 'when' }, timeEl(h.at), ' \u00b7 seq ' + h.seq + ' \u00b7 owner version ' + h.owner_version + ' \u00b7 by ', el('span', { class: 'mono', text: h.actor })),
    h.reason ? el('div', {}, 'reason: ', el('span', { class: 'mono', text: h.reason })) : null,
    h.provider_reference ? el('div', {}, 'provider reference: ', el('span', { class: 'mono', text: h.provider_reference })) : null,
    h.evidence ? el('pre', { class: 'evidence', text: h.evidence }) : null)))
    : el('p', { class: 'empty', text: 'No history recorded for this operation.' });
  const parts = [el('h1', {}, 'Operation ', el('span', { class: 'mono', text: op.operation_id })), banner || null,
    kv([['Status', statusBadge(op.status)], ['Kind', op.kind], ['Issuer', op.issuer], ['Grant', op.grant_id],
      ['Caller', op.caller], ['Account', op.account], ['Amount', op.amount + ' ' + op.currency],
      ['Owner version', op.owner_version], ['Provider reference', op.provider_reference], ['Reason', op.reason],
      ['Created', timeEl(op.created_at)], ['Updated', timeEl(op.updated_at)],
      ['Lease until', timeEl(op.lease_until)], ['Submit by', timeEl(op.submit_by)]]),
    el('h2', { text: 'History and evidence' }), timeline];
  if (op.status === 'needs_reconciliation') parts.push(resolveForm(op));
  else parts.push(el('p', { class: 'hint', text: op.status === 'unknown'
    ? 'Unknown: recovery looks the outcome up at the provider; it is resolved by hand only once it awaits reconciliation.'
    : 'This operation is not awaiting reconciliation: there is nothing to resolve by hand.' }));
  parts.push(el('p', {}, el('a', { href: '#/backlog', text: 'Back to the backlog' })));
  show(parts);
}
function resolveForm(op) {
  const out = el('div', { id: 'resolve-result' });
  const statusSel = el('select', { id: 'r-status', required: true },
    el('option', { value: '', text: 'choose the outcome' }),
    el('option', { value: 'succeeded', text: 'succeeded: the provider applied it' }),
    el('option', { value: 'failed', text: 'failed: the provider did not apply it and never will' }),
    op.kind === 'payout' ? el('option', { value: 'not_applied', text: 'not applied: nothing sent can take effect any more' }) : null);
  const reason = el('input', { type: 'text', id: 'r-reason', required: true, maxlength: '128', placeholder: 'e.g. provider_statement_checked' });
  const evidence = el('textarea', { id: 'r-evidence', required: true, maxlength: '4000' });
  const ref = el('input', { type: 'text', id: 'r-ref', maxlength: '128' });
  const confirmBox = el('div');
  const form = el('form', { id: 'resolve', on: { submit: (ev) => {
    ev.preventDefault();
    clear(out); clear(confirmBox);
    if (!statusSel.value || !reason.value.trim() || !evidence.value.trim()) {
      out.append(msg('error', 'Choose the outcome and give a reason and the evidence.'));
      return;
    }
    const body = { status: statusSel.value, reason: reason.value.trim(), evidence: evidence.value.trim() };
    if (ref.value.trim()) body.provider_reference = ref.value.trim();
    const yes = el('button', { type: 'button', class: 'danger', id: 'r-confirm', text: 'Confirm: resolve as ' + body.status });
    const no = el('button', { type: 'button', class: 'secondary', text: 'Cancel', on: { click: () => { clear(confirmBox); statusSel.focus(); } } });
    yes.addEventListener('click', async () => {
      yes.disabled = true; no.disabled = true;
      try {
        const r = await api('POST', '/v1/admin/operations/' + encodeURIComponent(op.operation_id) + '/resolve', body);
        const fresh = r.operation || op;
        renderOperation(fresh, msg('ok', 'Resolved as ' + body.status + '.' + (r.payout ? ' The payout is now ' + r.payout.state + '.' : '')));
      } catch (e) {
        clear(confirmBox);
        out.append(msg('error', e.message));
      }
    });
    confirmBox.append(el('div', { class: 'confirm', role: 'alertdialog', 'aria-labelledby': 'r-q' },
      el('p', { id: 'r-q', text: 'Resolve operation ' + op.operation_id + ' as ' + body.status + '? This is final: it fences any late writer and cannot be undone.' }),
      el('div', { class: 'row' }, yes, no)));
    yes.focus();
  } } },
  el('h2', { text: 'Resolve by hand' }),
  el('p', { class: 'hint', text: 'Only once the provider\u2019s records say what happened. The grant stays spent whatever you choose.' }),
  el('label', { for: 'r-status', text: 'Outcome' }), statusSel,
  el('label', { for: 'r-reason', text: 'Reason (a short code)' }), reason,
  el('label', { for: 'r-evidence', text: 'Evidence (what you checked, where)' }), evidence,
  el('label', { for: 'r-ref', text: 'Provider reference (optional)' }), ref,
  el('p', {}, el('button', { type: 'submit', text: 'Review' })));
  return el('section', {}, form, confirmBox, out);
}

// ---------------------------------------------------------------------------
// Payouts: the attempts awaiting an outcome, and one payout whole.
// ---------------------------------------------------------------------------
async function pagePayouts() {
  const idIn = el('input', { type: 'text', id: 'p-id', placeholder: 'payout id', required: true });
  const look = el('form', { class: 'row', id: 'payout-lookup', on: { submit: (ev) => {
    ev.preventDefault();
    if (idIn.value.trim()) location.hash = '#/payout/' + encodeURIComponent(idIn.value.trim());
  } } }, el('div', {}, el('label', { for: 'p-id', text: 'Open a payout' }), idIn),
  el('div', {}, el('button', { type: 'submit', text: 'Open' })));
  show(el('h1', { text: 'Payouts' }), look, el('p', { class: 'hint', text: 'Loading\u2026' }));
  let data;
  try { data = await api('GET', '/v1/admin/payout-backlog?limit=1000'); } catch (e) {
    show(el('h1', { text: 'Payouts' }), look, msg('error', e.message)); return;
  }
  const rows = data.backlog || [];
  show(el('h1', { text: 'Payouts' }), look,
    el('h2', { text: 'Attempts awaiting an outcome' }),
    el('p', { class: 'hint', text: (data.unknown || 0) + ' Unknown, ' + (data.needs_reconciliation || 0) + ' NeedsReconciliation; oldest first.' }),
    table([
      ['Attempt', (a) => el('a', { href: '#/operation/' + encodeURIComponent(a.attempt), text: a.attempt }), 'mono'],
      ['Payout', (a) => el('a', { href: '#/payout/' + encodeURIComponent(a.payout), text: a.payout }), 'mono'],
      ['Status', (a) => statusBadge(a.status)],
      ['Age', (a) => fmtAge(a.age_seconds)],
      ['Created', (a) => timeEl(a.created_at)],
      ['Owner version', (a) => a.owner_version],
      ['Provider reference', (a) => a.provider_reference],
      ['Reason', (a) => a.reason],
    ], rows, 'No payout attempt is Unknown or awaiting reconciliation.'));
}
// A record of any shape, as rows of text (a payout grant carries no token).
function recordTable(title, list, empty) {
  const items = Array.isArray(list) ? list : list ? [list] : [];
  if (!items.length) return [el('h2', { text: title }), el('p', { class: 'empty', text: empty })];
  const cols = [...new Set(items.flatMap((o) => Object.keys(o).filter((k) => typeof o[k] !== 'object' || o[k] === null)))];
  return [el('h2', { text: title }), table(cols.map((c) => [c, (o) => {
    const v = o[c];
    if (typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v)) return timeEl(v);
    if (c === 'attempt' || (c === 'operation_id' && v)) return el('a', { href: '#/operation/' + encodeURIComponent(v), text: v });
    return v === null || v === undefined ? '—' : String(v);
  }]), items, empty)];
}
async function pagePayout(id) {
  show(el('h1', { text: 'Payout' }), el('p', { class: 'hint', text: 'Loading\u2026' }));
  let p;
  try { p = await api('GET', '/v1/admin/payouts/' + encodeURIComponent(id)); } catch (e) {
    show(el('h1', { text: 'Payout' }), msg('error', e.status === 404 ? 'No payout has this id.' : e.message),
      el('p', {}, el('a', { href: '#/payouts', text: 'Back to payouts' })));
    return;
  }
  const rec = p.payout || {};
  const scalar = (v) => v === null || typeof v !== 'object';
  const events = Array.isArray(p.history) ? p.history : [];
  show(el('h1', {}, 'Payout ', el('span', { class: 'mono', text: id })),
    el('h2', { text: 'Record' }),
    kv(Object.keys(rec).filter((k) => scalar(rec[k])).map((k) => [k,
      k === 'state' ? statusBadge(String(rec[k])) : typeof rec[k] === 'string' && /^\d{4}-\d\d-\d\dT/.test(rec[k]) ? timeEl(rec[k]) : rec[k]])),
    recordTable('Decisions', p.decisions, 'No decision yet.'),
    recordTable('Grants (no credential is ever shown)', p.grants, 'No grant issued.'),
    recordTable('Attempts', p.attempts, 'No attempt yet.'),
    el('h2', { text: 'History' }),
    events.length ? el('ol', { class: 'timeline', id: 'payout-history' }, events.map((h) => el('li', {},
      el('div', {}, el('strong', { text: h.kind || 'event' }), h.to_state ? [' \u2192 ', statusBadge(String(h.to_state))] : null),
      el('div', { class: 'when' }, timeEl(h.at), ' \u00b7 seq ' + h.seq + ' \u00b7 by ', el('span', { class: 'mono', text: h.actor || '\u2014' })),
      el('div', { class: 'hint' }, Object.keys(h).filter((k) => !['kind', 'to_state', 'at', 'seq', 'actor'].includes(k) && h[k] !== null && scalar(h[k]))
        .map((k) => k + ': ' + h[k]).join(' \u00b7 ')))))
      : el('p', { class: 'empty', text: 'No history.' }),
    el('p', {}, el('a', { href: '#/payouts', text: 'Back to payouts' })));
}

// ---------------------------------------------------------------------------
// Grants and families: revocation, with a revoker key given for the act.
// ---------------------------------------------------------------------------
function pageGrants() {
  const rkey = el('input', { type: 'password', id: 'g-key', autocomplete: 'off', required: true });
  const out = el('div', { id: 'revoke-result' });
  const act = async (path, body, what) => {
    clear(out);
    const key = rkey.value.trim();
    if (!key) { out.append(msg('error', 'A revocation needs a key of a principal with the revoker role.')); return; }
    try {
      const r = await api('POST', path, body, key);
      if (r.family !== undefined) {
        const n = (r.revoked || []).length;
        out.append(msg('ok', 'Family ' + r.family + ' revoked; ' + n + ' live grant' + (n === 1 ? '' : 's') + ' revoked with it' + (n ? ': ' + r.revoked.join(', ') : ' (none live, or revoked before)') + '.'));
      } else {
        out.append(msg('ok', what + ' revoked.'));
      }
    } catch (e) {
      out.append(msg('error', e.code === 'already_used_or_revoked'
        ? 'Not revoked: the grant was already used or revoked. Nothing was changed.'
        : e.code === 'grant_not_issued' ? 'Not revoked: there is no record of this grant\u2019s issuance.' : e.message));
    }
  };
  const gIssuer = el('input', { type: 'text', id: 'g-issuer', required: true });
  const gId = el('input', { type: 'text', id: 'g-id', required: true });
  const fIssuer = el('input', { type: 'text', id: 'f-issuer', placeholder: 'default: the configured issuer' });
  const fName = el('input', { type: 'text', id: 'f-name', required: true });
  show(el('h1', { text: 'Grants and families' }),
    el('p', { class: 'hint', text: 'Revocation stops a grant (or every live grant of a family) from being admitted from now on; it never recalls an operation admitted before. It needs a revoker\u2019s key, used for this request only and not kept.' }),
    el('label', { for: 'g-key', text: 'Revoker API key' }), rkey,
    el('form', { id: 'revoke-grant', on: { submit: (ev) => { ev.preventDefault(); act('/v1/grants/revoke', { issuer: gIssuer.value.trim(), grant_id: gId.value.trim() }, 'Grant ' + gId.value.trim()); } } },
      el('h2', { text: 'Revoke a grant' }),
      el('label', { for: 'g-issuer', text: 'Issuer' }), gIssuer,
      el('label', { for: 'g-id', text: 'Grant id' }), gId,
      el('p', {}, el('button', { type: 'submit', class: 'danger', text: 'Revoke the grant' }))),
    el('form', { id: 'revoke-family', on: { submit: (ev) => { ev.preventDefault(); const b = fIssuer.value.trim() ? { issuer: fIssuer.value.trim() } : {}; act('/v1/families/' + encodeURIComponent(fName.value.trim()) + '/revoke', b, 'Family'); } } },
      el('h2', { text: 'Revoke a family' }),
      el('label', { for: 'f-issuer', text: 'Issuer (optional)' }), fIssuer,
      el('label', { for: 'f-name', text: 'Family' }), fName,
      el('p', {}, el('button', { type: 'submit', class: 'danger', text: 'Revoke the family' }))),
    out);
}

// ---------------------------------------------------------------------------
// Live: small time series drawn from /metrics (public, no key sent).
// ---------------------------------------------------------------------------
const live = { timer: null, samples: [], max: 120 };
function parseMetrics(text) {
  const m = new Map();
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const mm = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!mm) continue;
    const labels = {};
    if (mm[2]) for (const l of mm[2].slice(1, -1).matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    const v = Number(mm[3]);
    if (!m.has(mm[1])) m.set(mm[1], []);
    m.get(mm[1]).push({ labels, v });
  }
  return m;
}
function sum(m, name, pred) { return (m.get(name) || []).filter((s) => !pred || pred(s.labels)).reduce((a, s) => a + s.v, 0); }
function groupBy(m, name, label) {
  const out = {};
  for (const s of m.get(name) || []) { const k = s.labels[label] || '—'; out[k] = (out[k] || 0) + s.v; }
  return out;
}
async function sampleLive() {
  let text = null, ready = false;
  try { const r = await fetch('/metrics', { credentials: 'omit', cache: 'no-store' }); if (r.ok) text = await r.text(); } catch (e) { text = null; }
  try { const r = await fetch('/readyz', { credentials: 'omit', cache: 'no-store' }); ready = r.ok; } catch (e) { ready = false; }
  const t = Date.now() / 1000;
  const s = { t, ok: text !== null, ready };
  if (text !== null) {
    const m = parseMetrics(text);
    s.admissions = sum(m, 'oncegate_admissions_total', (l) => !l.outcome || l.outcome === 'admitted');
    s.refusals = groupBy(m, 'oncegate_refusals_total', 'reason');
    s.unknown = groupBy({ get: (n) => (m.get(n) || []).filter((x) => x.labels.status === 'unknown') }, 'oncegate_operations_backlog', 'age');
    s.unavailable = sum(m, 'oncegate_store_unavailable_total');
  }
  live.samples.push(s);
  if (live.samples.length > live.max) live.samples.shift();
  drawLive();
}
const COLORS = ['#0b57d0', '#b3261e', '#146c2e', '#8a5a00', '#6f2da8', '#00696e', '#5b6570'];
function chart(id, title, series, unit, emptyText) {
  const W = 320, H = 120, pad = 4;
  const svgNS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(svgNS, 'svg');
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', title);
  const all = series.flatMap((s) => s.points.filter((p) => p !== null));
  const max = Math.max(1, ...all);
  series.forEach((s, i) => {
    const n = s.points.length;
    const pts = s.points.map((v, j) => v === null ? null : [pad + (W - 2 * pad) * (n <= 1 ? 1 : j / (n - 1)), H - pad - (H - 2 * pad) * v / max]);
    const d = pts.filter(Boolean).map((p, j) => (j ? 'L' : 'M') + p[0].toFixed(1) + ' ' + p[1].toFixed(1)).join(' ');
    if (!d) return;
    const path = document.createElementNS(svgNS, 'path');
    path.setAttribute('d', d); path.setAttribute('fill', 'none');
    path.setAttribute('stroke', COLORS[i % COLORS.length]); path.setAttribute('stroke-width', '2');
    svg.append(path);
    const lastPt = pts.filter(Boolean).pop(); // the newest sample, also when it is the only one
    const dot = document.createElementNS(svgNS, 'circle');
    dot.setAttribute('cx', lastPt[0].toFixed(1)); dot.setAttribute('cy', lastPt[1].toFixed(1));
    dot.setAttribute('r', '3'); dot.setAttribute('fill', COLORS[i % COLORS.length]);
    svg.append(dot);
  });
  const scale = document.createElementNS(svgNS, 'text'); // the top of the scale
  scale.setAttribute('x', String(pad)); scale.setAttribute('y', '10');
  scale.textContent = 'max ' + (Math.round(max * 100) / 100) + unit;
  svg.append(scale);
  const last = (s) => { for (let j = s.points.length - 1; j >= 0; j--) if (s.points[j] !== null) return s.points[j]; return null; };
  return el('div', { class: 'chart', id },
    el('h2', { text: title }),
    all.length ? svg : el('p', { class: 'empty', text: emptyText }),
    el('div', { class: 'legend' }, series.map((s, i) => el('span', {},
      el('span', { class: 'sw', style: null, 'data-c': i }), s.name + ': ' + (last(s) === null ? '—' : (Math.round(last(s) * 100) / 100) + unit)))));
}
function rates(key, sub) {
  const out = [];
  for (let i = 0; i < live.samples.length; i++) {
    const a = live.samples[i - 1], b = live.samples[i];
    if (!a || !a.ok || !b.ok) { out.push(null); continue; }
    const va = sub ? (a[key][sub] || 0) : a[key], vb = sub ? (b[key][sub] || 0) : b[key];
    out.push(Math.max(0, (vb - va) / Math.max(0.001, b.t - a.t)));
  }
  return out;
}
function drawLive() {
  const host = document.getElementById('live-charts');
  if (!host) return;
  const reasons = [...new Set(live.samples.filter((s) => s.ok).flatMap((s) => Object.keys(s.refusals)))];
  const ages = BUCKETS.map(([b]) => b);
  const last = live.samples[live.samples.length - 1];
  clear(host).append(
    chart('c-admissions', 'Admissions per second', [{ name: 'admitted', points: rates('admissions') }], '/s', 'Waiting for a second sample\u2026'),
    chart('c-refusals', 'Refusals per second, by reason', reasons.length ? reasons.map((r) => ({ name: r, points: rates('refusals', r) })) : [], '/s', 'No refusal counted since the server started.'),
    chart('c-unknown', 'Unknown operations, by age', ages.map((a) => ({ name: a, points: live.samples.map((s) => s.ok ? (s.unknown[a] || 0) : null) })), '', 'Waiting for a sample\u2026'),
    chart('c-store', 'Store availability', [{ name: 'ready (1) / not (0)', points: live.samples.map((s) => s.ready ? 1 : 0) },
      { name: 'store unavailable answers/s', points: rates('unavailable') }], '', 'Waiting for a sample\u2026'));
  // Legend swatches: colours set through the CSSOM (no inline style attribute: CSP).
  for (const sw of host.querySelectorAll('.sw')) sw.style.background = COLORS[Number(sw.dataset.c) % COLORS.length];
  const st = document.getElementById('live-state');
  if (st && last) {
    clear(st).append(!last.ok ? msg('error', 'The server did not answer /metrics at ' + fmtTime(new Date(last.t * 1000).toISOString()) + '; retrying every 5 s.')
      : !last.ready ? msg('warn', 'The server says it is not ready (/readyz): the store may be unavailable. Requests that need it are answered 503 retry_later; nothing is changed.')
        : msg('ok', 'Ready. Last sample ' + fmtTime(new Date(last.t * 1000).toISOString()) + '.'));
  }
}
function stopLive() { if (live.timer) { clearInterval(live.timer); live.timer = null; } }
function pageLive() {
  show(el('h1', { text: 'Live' }),
    el('p', { class: 'hint', text: 'Sampled from this server\u2019s /metrics and /readyz every 5 seconds while this page is open (this instance only; the last 10 minutes).' }),
    el('div', { id: 'live-state' }), el('div', { class: 'charts', id: 'live-charts' }));
  drawLive();
  sampleLive();
  live.timer = setInterval(sampleLive, 5000);
}

// ---------------------------------------------------------------------------
// Routing on the fragment: no key, no secret, only a page name and ids.
// ---------------------------------------------------------------------------
function route() {
  const h = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = h.split('?');
  const params = new URLSearchParams(qs || '');
  const seg = path.split('/').filter(Boolean).map(decodeURIComponent);
  stopLive();
  notice();
  if (!session.key) { pageSignIn(); return; }
  const page = seg[0] || 'backlog';
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.page === (page === 'operation' ? 'backlog' : page === 'payout' ? 'payouts' : page)) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  switch (page) {
    case 'backlog': pageBacklog(params); break;
    case 'operation': pageOperation(seg[1] || ''); break;
    case 'payouts': pagePayouts(); break;
    case 'payout': pagePayout(seg[1] || ''); break;
    case 'grants': pageGrants(); break;
    case 'live': pageLive(); break;
    default: show(el('h1', { text: 'Not found' }), el('p', {}, 'No such page. ', el('a', { href: '#/backlog', text: 'Go to the backlog' })));
  }
  $main().focus({ preventScroll: true });
}

window.addEventListener('hashchange', route);
document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('signout').addEventListener('click', () => signOut('Signed out. The key is forgotten.'));
  route();
});
