// console.test.mjs — the operator console driven in a real browser
// (Debian's chromium through playwright-core), as a person uses it, against
// a running `oncegate serve --dev` with its sandbox (tests/console/run.sh
// starts both and passes their URLs and the dev keys in the environment).
//
// Each case is named; a failed assertion fails the run. Screenshots of every
// page go to OG_ARTIFACTS.
import { chromium } from 'playwright-core';
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { strict as assert } from 'node:assert';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const env = (k) => { const v = process.env[k]; if (!v) throw new Error(k + ' is not set'); return v; };
const URL_ = env('OG_URL');
const SANDBOX = env('OG_SANDBOX');
const ART = env('OG_ARTIFACTS');
const ENGINE = process.env.OG_ENGINE || 'sqlite';
const KEYS = { operator: env('OG_OPERATOR_KEY'), issuer: env('OG_ISSUER_KEY'), agent: env('OG_AGENT_KEY'), revoker: env('OG_REVOKER_KEY'), clerk: env('OG_CLERK_KEY') };
mkdirSync(ART, { recursive: true });

// ---------------------------------------------------------------------------
// The API, as a client outside the browser (to set the scene and to check
// what the console did).
// ---------------------------------------------------------------------------
async function call(method, p, key, body) {
  const headers = {};
  if (key) headers.Authorization = 'Bearer ' + key;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(URL_ + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { json = null; }
  return { status: r.status, json, text, headers: r.headers };
}
async function fault(name, count, match) {
  const body = { fault: name, count };
  if (match) body.match = match;
  const r = await fetch(SANDBOX + '/_control/faults', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  assert.ok(r.ok, 'arming sandbox fault ' + name + ': ' + r.status + ' ' + await r.text());
}
// A grant for `account`, presented as a credit: the answer and the operation id.
async function credit(account) {
  const params = { account, amount: '12.50', currency: 'USD' };
  const g = await call('POST', '/v1/grants', KEYS.issuer, { subject: 'dev-agent', action: 'credit.apply', params, ttl_seconds: 900 });
  assert.equal(g.status, 201, 'issue: ' + g.text);
  const body = { operation_id: g.json.operation_id, token: g.json.token, params };
  if (g.json.operation_mac) body.operation_mac = g.json.operation_mac;
  const r = await call('POST', '/v1/operations', KEYS.agent, body);
  return { op: g.json.operation_id, grant: g.json.grant_id, issuer: g.json.issuer, answer: r };
}
async function opStatus(id) {
  const r = await call('GET', '/v1/admin/operations/' + id, KEYS.operator);
  assert.equal(r.status, 200, 'admin read: ' + r.text);
  return r.json;
}
async function waitStatus(id, want, ms) {
  const until = Date.now() + ms;
  let last;
  while (Date.now() < until) {
    last = (await opStatus(id)).status;
    if (want.includes(last)) return last;
    await new Promise((res) => setTimeout(res, 250));
  }
  throw new Error('operation ' + id + ' stayed ' + last + ', expected ' + want.join('|'));
}

// ---------------------------------------------------------------------------
// The runner.
// ---------------------------------------------------------------------------
const results = [];
let browser, context, page;
const consoleErrors = [];
async function shot(name) { await page.screenshot({ path: path.join(ART, name + '.png'), fullPage: true }); }
async function test(name, fn) {
  const t0 = Date.now();
  try { await fn(); results.push([name, true]); console.log('ok   ' + name + ' (' + (Date.now() - t0) + ' ms)'); } catch (e) {
    results.push([name, false]);
    console.log('FAIL ' + name + ': ' + (e && e.stack ? e.stack : e));
    try { await shot('FAILED-' + name); } catch { /* no page */ }
  }
}
async function signIn(key) {
  await page.goto(URL_ + '/console');
  await page.fill('#apikey', key);
  await page.click('#signin button[type=submit]');
}

browser = await chromium.launch({ executablePath: env('OG_CHROMIUM'), headless: true, args: ['--no-sandbox'] });
context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
page = await context.newPage();
page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
page.on('pageerror', (e) => consoleErrors.push(String(e)));
const dialogs = [];
page.on('dialog', async (d) => { dialogs.push(d.message()); await d.dismiss(); });

await test('console_pages_carry_a_strict_content_security_policy', async () => {
  for (const p of ['/console', '/console/console.js', '/console/console.css']) {
    const r = await call('GET', p);
    assert.equal(r.status, 200, p);
    const csp = r.headers.get('content-security-policy') || '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/);
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(r.headers.get('set-cookie'), null);
  }
  const html = (await call('GET', '/console')).text;
  assert.doesNotMatch(html, /<script>|<script [^>]*>[^<]|\son[a-z]+=|<style/i, 'no inline script, handler or style');
  assert.doesNotMatch(html, /https?:\/\//, 'nothing fetched from elsewhere');
  assert.equal((await call('GET', '/console/other.js')).status, 404);
});

await test('sign_in_refuses_an_unknown_key', async () => {
  await signIn('og_not-a-key');
  await page.waitForSelector('.msg.error');
  assert.match(await page.textContent('.msg.error'), /not accepted/);
  assert.equal(await page.isVisible('#nav'), false);
});

await test('sign_in_refuses_a_key_without_the_operator_role', async () => {
  await signIn(KEYS.agent);
  await page.waitForSelector('.msg.error');
  assert.match(await page.textContent('.msg.error'), /no operator role/);
});

await test('sign_in_keeps_the_key_out_of_storage_cookies_and_urls', async () => {
  const requests = [];
  const onReq = (r) => requests.push(r.url());
  page.on('request', onReq);
  await signIn(KEYS.operator);
  await page.waitForSelector('#backlog-filter');
  await page.click('nav a[data-page=live]');
  await page.waitForSelector('#live-charts');
  await page.click('nav a[data-page=backlog]');
  await page.waitForSelector('#backlog-filter');
  page.off('request', onReq);
  const where = await page.evaluate(() => ({
    cookie: document.cookie, local: localStorage.length, session: sessionStorage.length,
    url: location.href, html: document.documentElement.outerHTML, histLen: history.length,
    input: [...document.querySelectorAll('input')].map((i) => i.value).join('|'),
  }));
  assert.equal(where.cookie, '');
  assert.equal(where.local, 0);
  assert.equal(where.session, 0);
  assert.ok(!where.url.includes(KEYS.operator), 'the key is not in the URL');
  assert.ok(!where.html.includes(KEYS.operator), 'the key is not in the page');
  assert.ok(!where.input.includes(KEYS.operator), 'the sign-in field was cleared');
  assert.deepEqual(await context.cookies(), []);
  for (const u of requests) assert.ok(!u.includes(KEYS.operator), 'a request URL carried the key: ' + u);
  assert.ok(requests.some((u) => u.includes('/v1/admin/operations')), 'the page called the API');
  const storage = await context.storageState();
  assert.deepEqual(storage.cookies, []);
  assert.ok(storage.origins.every((o) => o.localStorage.length === 0));
});

// The lost answer: the sandbox makes the credit but drops its answer, so the
// operation is Unknown until recovery looks it up and finds the credit.
let lost;
await test('an_operation_the_lost_answer_made_unknown_appears_in_the_backlog', async () => {
  await fault('drop_response_after_effect', 1);
  lost = await credit('A-console-lost');
  assert.equal(lost.answer.status, 202, 'the lost answer: ' + lost.answer.text);
  assert.equal((await opStatus(lost.op)).status, 'unknown');
  await page.click('#backlog-filter button.secondary'); // Refresh
  await page.waitForSelector(`a[href="#/operation/${lost.op}"]`, { timeout: 5000 });
  const row = page.locator('tr', { has: page.locator(`a[href="#/operation/${lost.op}"]`) });
  assert.match(await row.textContent(), /unknown/);
  assert.match(await row.textContent(), /A-console-lost/);
  assert.match(await row.textContent(), /credit/);
  await shot('backlog');
});

await test('recovery_moves_it_and_the_console_shows_it', async () => {
  await page.click(`a[href="#/operation/${lost.op}"]`);
  await page.waitForSelector('#timeline, .empty');
  assert.match(await page.textContent('dl.kv'), /unknown|succeeded/);
  await waitStatus(lost.op, ['succeeded'], 30000);
  await page.reload(); // a reload forgets the key: the sign-in page again
  await page.waitForSelector('#apikey');
  await page.fill('#apikey', KEYS.operator);
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('#backlog-filter');
  await page.waitForSelector('p.hint');
  assert.equal(await page.locator(`a[href="#/operation/${lost.op}"]`).count(), 0, 'gone from the backlog');
  await page.goto(URL_ + '/console#/operation/' + lost.op); // same tab: the key stays
  await page.waitForSelector('#timeline');
  assert.match(await page.textContent('dl.kv'), /succeeded/);
  assert.ok((await page.locator('#timeline li').count()) >= 2, 'its history is shown');
  assert.match(await page.textContent('#timeline'), /UTC/);
  await shot('operation');
});

// Creates that keep failing before any effect: recovery resubmits until
// submit_by, then parks the credit in NeedsReconciliation.
async function parked(account) {
  await fault('error_500_before_effect', 1000, { account });
  const c = await credit(account);
  assert.equal(c.answer.status, 202, 'a failing create: ' + c.answer.text);
  return c;
}
let nr1, nr2, xss;
await test('recovery_parks_a_credit_in_needs_reconciliation', async () => {
  // three at once: they park together (15 s submission window)
  [nr1, nr2, xss] = await Promise.all([parked('A-console-nr1'), parked('A-console-nr2'),
    parked('<img/src=x/onerror=window.__xss=1><script>window.__xss=2</script>')]);
  for (const c of [nr1, nr2, xss]) await waitStatus(c.op, ['needs_reconciliation'], 60000);
  await page.goto(URL_ + '/console#/backlog?status=needs_reconciliation');
  await page.waitForSelector(`a[href="#/operation/${nr1.op}"]`);
  assert.equal(await page.inputValue('#f-status'), 'needs_reconciliation');
  await shot('backlog-needs-reconciliation');
});

await test('the_xss_probe_is_shown_never_run', async () => {
  await page.waitForSelector(`a[href="#/operation/${xss.op}"]`);
  const row = page.locator('tr', { has: page.locator(`a[href="#/operation/${xss.op}"]`) });
  assert.match(await row.textContent(), /<img\/src=x\/onerror=window.__xss=1><script>/);
  assert.equal(await page.locator('main img').count(), 0, 'no image element was created');
  assert.equal(await page.locator('main script').count(), 0, 'no script element was created');
  await page.click(`a[href="#/operation/${xss.op}"]`);
  await page.waitForSelector('#timeline');
  assert.match(await page.textContent('dl.kv'), /<script>window.__xss=2<\/script>/);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.deepEqual(dialogs, []);
});

await test('resolving_by_hand_is_reflected_by_the_api', async () => {
  await page.goto(URL_ + '/console#/operation/' + nr1.op);
  await page.waitForSelector('#resolve');
  await page.selectOption('#r-status', 'failed');
  await page.fill('#r-reason', 'provider_statement_checked');
  await page.fill('#r-evidence', 'statement 2026-12 has no credit with this reference <b>bold?</b>');
  await page.click('#resolve button[type=submit]');
  await page.waitForSelector('#r-confirm');
  await shot('resolve-confirm');
  await page.click('#r-confirm');
  await page.waitForSelector('.msg.ok');
  assert.match(await page.textContent('.msg.ok'), /Resolved as failed/);
  const op = await opStatus(nr1.op);
  assert.equal(op.status, 'failed');
  const last = op.history[op.history.length - 1];
  assert.equal(last.reason, 'provider_statement_checked');
  assert.match(last.evidence, /<b>bold\?<\/b>/);
  assert.match(await page.textContent('#timeline'), /<b>bold\?<\/b>/, 'the evidence is shown as text');
  await shot('resolved');
});

await test('a_stale_resolution_is_refused_with_the_apis_error', async () => {
  await page.goto(URL_ + '/console#/operation/' + nr2.op);
  await page.waitForSelector('#resolve');
  await page.selectOption('#r-status', 'succeeded');
  await page.fill('#r-reason', 'found_at_provider');
  await page.fill('#r-evidence', 'seen in the provider console');
  await page.click('#resolve button[type=submit]');
  await page.waitForSelector('#r-confirm');
  // Meanwhile another operator resolves it.
  const other = await call('POST', '/v1/admin/operations/' + nr2.op + '/resolve', KEYS.operator,
    { status: 'failed', reason: 'other_operator', evidence: 'resolved elsewhere first' });
  assert.equal(other.status, 200, other.text);
  await page.click('#r-confirm');
  await page.waitForSelector('#resolve-result .msg.error');
  const text = await page.textContent('#resolve-result .msg.error');
  assert.match(text, /not_needs_reconciliation/);
  assert.match(text, /Nothing was changed/);
  assert.equal((await opStatus(nr2.op)).status, 'failed', 'the first resolution stands');
  await shot('resolve-stale');
});

// Makes the store unavailable to the server for ms — SQLite: another
// process holds the write lock (BEGIN IMMEDIATE); PostgreSQL: the test's own
// database refuses connections and the server's are ended — and resolves,
// once it is, to { released }: a promise of the store's return.
function holdStoreLock(ms) {
  const target = env('OG_STORE_LOCK');
  const admin = process.env.OG_TEST_PG_URL || '';
  const child = ENGINE === 'postgres'
    ? spawn('sh', ['-c', `psql -qAt "$1" -c "ALTER DATABASE $2 ALLOW_CONNECTIONS false" -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '$2'" > /dev/null && echo held && sleep ${ms / 1000}; psql -qAt "$1" -c "ALTER DATABASE $2 ALLOW_CONNECTIONS true"`, 'sh', admin, target])
    : spawn('python3', ['-c', `import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(${ms / 1000}); c.execute('COMMIT')`, target]);
  const done = new Promise((res) => child.on('exit', res));
  return new Promise((res, rej) => {
    child.stdout.on('data', (d) => { if (/held/.test(String(d))) res({ released: done }); });
    child.on('error', rej);
    setTimeout(() => rej(new Error('the store lock was not taken')), 10000);
  });
}

await test('a_store_outage_says_nothing_changed_and_a_retry_applies', async () => {
  await page.goto(URL_ + '/console#/operation/' + xss.op);
  await page.waitForSelector('#resolve');
  await page.selectOption('#r-status', 'failed');
  await page.fill('#r-reason', 'store_outage_retry');
  await page.fill('#r-evidence', 'retried after a 503');
  await page.click('#resolve button[type=submit]');
  await page.waitForSelector('#r-confirm');
  const { released } = await holdStoreLock(6000);
  await page.click('#r-confirm');
  await page.waitForSelector('#resolve-result .msg.error', { timeout: 10000 });
  const text = await page.textContent('#resolve-result .msg.error');
  assert.match(text, /The store is unavailable; nothing was changed\. Retry/);
  await shot('store-unavailable');
  await released;
  assert.equal((await opStatus(xss.op)).status, 'needs_reconciliation', 'nothing was changed');
  await page.click('#resolve button[type=submit]'); // the same request again
  await page.click('#r-confirm');
  await page.waitForSelector('.msg.ok');
  assert.equal((await opStatus(xss.op)).status, 'failed', 'the retry applied');
});

await test('grants_and_families_are_revoked_with_a_revoker_key', async () => {
  const params = { account: 'A-console-rev', amount: '1', currency: 'USD' };
  const fam = 'fam-console-' + randomUUID().slice(0, 8);
  const g1 = await call('POST', '/v1/grants', KEYS.issuer, { subject: 'dev-agent', action: 'credit.apply', params, ttl_seconds: 900 });
  const g2 = await call('POST', '/v1/grants', KEYS.issuer, { subject: 'dev-agent', action: 'credit.apply', params, ttl_seconds: 900, family: fam });
  assert.equal(g1.status, 201); assert.equal(g2.status, 201);
  await page.goto(URL_ + '/console#/grants');
  await page.waitForSelector('#revoke-grant');
  await page.fill('#g-key', KEYS.operator); // not a revoker: refused by the API
  await page.fill('#g-issuer', g1.json.issuer);
  await page.fill('#g-id', g1.json.grant_id);
  await page.click('#revoke-grant button[type=submit]');
  await page.waitForSelector('#revoke-result .msg.error');
  assert.match(await page.textContent('#revoke-result'), /not allowed/);
  await page.fill('#g-key', KEYS.revoker);
  await page.click('#revoke-grant button[type=submit]');
  await page.waitForSelector('#revoke-result .msg.ok');
  await page.click('#revoke-grant button[type=submit]'); // again: already revoked
  await page.waitForSelector('#revoke-result .msg.error');
  assert.match(await page.textContent('#revoke-result'), /already used or revoked/);
  await page.fill('#f-name', fam);
  await page.click('#revoke-family button[type=submit]');
  await page.waitForSelector('#revoke-result .msg.ok');
  assert.match(await page.textContent('#revoke-result'), new RegExp(g2.json.grant_id));
  // The API agrees: both grants are refused now.
  const present = await call('POST', '/v1/operations', KEYS.agent, { operation_id: g2.json.operation_id, token: g2.json.token, params, operation_mac: g2.json.operation_mac || undefined });
  assert.equal(present.status, 409, present.text);
  const where = await page.evaluate(() => ({ html: document.documentElement.outerHTML, local: localStorage.length, cookie: document.cookie }));
  assert.ok(!where.html.includes(KEYS.revoker), 'the revoker key is not in the page (only in its field\'s value)');
  assert.equal(where.local, 0); assert.equal(where.cookie, '');
  await shot('grants');
});

// The payout path of dev mode's scenario: PAY-3107 submitted, its answer
// lost, so its attempt is Unknown until the reconciler finds it: Paid.
await test('a_payout_attempt_made_unknown_appears_and_its_payout_opens', async () => {
  await fault('drop_response_after_effect', 1);
  const release = new Date(Date.now() + 2000).toISOString().replace(/\.\d+Z$/, 'Z');
  const sub = await call('POST', '/v1/payouts/PAY-3107/submit', KEYS.clerk, { beneficiary_id: 'BEN-2208',
    destination_id: 'DST-77', amount: '4250.00', currency: 'EUR', purpose: 'supplier-invoice INV-9031',
    payout_version: 1, release_at: release });
  assert.equal(sub.status, 200, 'submit: ' + sub.text);
  let attempt = null;
  for (let i = 0; i < 120 && !attempt; i++) {
    const b = await call('GET', '/v1/admin/payout-backlog', KEYS.operator);
    attempt = (b.json.backlog || []).find((a) => a.payout === 'PAY-3107');
    if (!attempt) await new Promise((res) => setTimeout(res, 250));
  }
  assert.ok(attempt, 'the attempt reached the payout backlog');
  await page.goto(URL_ + '/console#/backlog?kind=payout');
  await page.waitForSelector('#backlog-filter');
  await page.waitForSelector('table, p.empty');
  const seenInBacklog = await page.locator(`a[href="#/operation/${attempt.attempt}"]`).count();
  await page.goto(URL_ + '/console#/payouts');
  await page.waitForSelector('#payout-lookup');
  await page.waitForSelector('h2');
  const seenInPayouts = await page.locator(`a[href="#/payout/PAY-3107"]`).count();
  // The reconciler first looks 8 s after the attempt went Unknown (run.sh).
  assert.equal((await opStatus(attempt.attempt)).status, 'unknown', 'still Unknown while the page looked');
  assert.equal(seenInBacklog, 1, 'the attempt is in the backlog (kind payout)');
  assert.equal(seenInPayouts >= 1, true, 'the attempt is on the payouts page');
  await shot('payouts');
  await waitStatus(attempt.attempt, ['succeeded'], 90000);
  await page.goto(URL_ + '/console#/payout/PAY-3107');
  await page.waitForSelector('h2');
  await page.waitForFunction(() => /Attempts/.test(document.querySelector('main').textContent));
  const text = await page.textContent('main');
  assert.match(text, /Paid/);
  assert.match(text, /Decisions/);
  assert.match(text, /Grants/);
  assert.ok(text.includes(attempt.attempt), 'the attempt is listed');
  assert.doesNotMatch(text, /eyJ[A-Za-z0-9_-]{10,}/, 'no credential is shown');
  await shot('payout');
});

await test('payouts_page_lists_attempts_and_opens_a_payout', async () => {
  await page.goto(URL_ + '/console#/payouts');
  await page.waitForSelector('#payout-lookup');
  await page.waitForSelector('h2');
  assert.match(await page.textContent('main'), /Unknown|No payout attempt/);
  await page.fill('#p-id', 'PAY-does-not-exist');
  await page.click('#payout-lookup button[type=submit]');
  await page.waitForSelector('.msg.error');
  assert.match(await page.textContent('.msg.error'), /No payout has this id/);
  await page.goto(URL_ + '/console#/payouts');
  await page.waitForSelector('#payout-lookup');
  await shot('payouts');
});

await test('live_view_draws_admissions_from_metrics', async () => {
  await page.goto(URL_ + '/console#/live');
  await page.waitForSelector('#c-admissions');
  await credit('A-console-live'); // one more admission between two samples
  await page.waitForFunction(() => document.querySelectorAll('#c-admissions svg path').length > 0, null, { timeout: 15000 });
  assert.match(await page.textContent('#live-state'), /Ready/);
  assert.match(await page.textContent('#c-unknown'), /lt_1m/);
  await shot('live');
});

await test('errors_say_what_to_do', async () => {
  await page.goto(URL_ + '/console#/operation/' + randomUUID());
  await page.waitForSelector('.msg.error');
  assert.match(await page.textContent('.msg.error'), /No operation has this id/);
  await page.goto(URL_ + '/console#/backlog?kind=payout');
  await page.waitForSelector('#backlog-filter');
  await page.waitForSelector('p.empty, table');
  assert.equal(await page.inputValue('#f-kind'), 'payout');
});

await test('phone_width_and_keyboard', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(URL_ + '/console#/backlog');
  await page.waitForSelector('#backlog-filter');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, 'no horizontal scrolling at 390 px: ' + overflow);
  await shot('backlog-phone');
  await page.setViewportSize({ width: 1280, height: 900 });
  // Tab reaches the navigation and the filter; Enter follows a link.
  await page.keyboard.press('Tab');
  const seen = [];
  for (let i = 0; i < 12; i++) {
    seen.push(await page.evaluate(() => document.activeElement && (document.activeElement.id || document.activeElement.textContent.trim())));
    await page.keyboard.press('Tab');
  }
  assert.ok(seen.includes('Payouts'), 'the navigation is reachable: ' + seen.join(','));
  assert.ok(seen.includes('f-kind'), 'the filter is reachable: ' + seen.join(','));
});

await test('times_show_utc_and_the_viewers_zone', async () => {
  const ctx = await browser.newContext({ timezoneId: 'Asia/Kolkata' });
  const p2 = await ctx.newPage();
  await p2.goto(URL_ + '/console');
  await p2.fill('#apikey', KEYS.operator);
  await p2.click('#signin button[type=submit]');
  await p2.waitForSelector('#backlog-filter');
  await p2.goto(URL_ + '/console#/operation/' + lost.op);
  await p2.waitForSelector('#timeline');
  const created = await p2.locator('dl.kv time').first().textContent();
  assert.ok(created, 'the page: ' + await p2.textContent('main'));
  assert.match(created, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(.*Asia\/(Kolkata|Calcutta)\)$/); // ICU may give its old name
  // 05:30 ahead of UTC: the two readings differ by that much
  const [, utcH, utcM] = /(\d\d):(\d\d):\d\d UTC/.exec(created);
  const [, locH, locM] = /, (\d\d):(\d\d):\d\d Asia/.exec(created);
  const diff = ((Number(locH) * 60 + Number(locM)) - (Number(utcH) * 60 + Number(utcM)) + 1440) % 1440;
  assert.equal(diff, 330);
  await ctx.close();
});

await test('sign_out_forgets_the_key', async () => {
  await page.click('#signout');
  await page.waitForSelector('#apikey');
  await page.goto(URL_ + '/console#/backlog');
  await page.waitForSelector('#apikey');
  assert.equal(await page.isVisible('#nav'), false);
});

await test('no_script_errors_and_no_csp_violations', async () => {
  const bad = consoleErrors.filter((e) => !/Failed to load resource/.test(e));
  assert.deepEqual(bad, []);
});

await browser.close();
const failed = results.filter(([, ok]) => !ok);
console.log(`console (${ENGINE}): ${results.length - failed.length} passed, ${failed.length} failed; screenshots in ${ART}`);
process.exit(failed.length ? 1 : 0);
