// Browser tests of the dashboard (/ui): a real rowlock (the built binary) on a database of its
// own, with a tokens file (an admin token and a read-only one), driven through Debian's chromium
// headless by playwright-core; axe-core checks accessibility. Resources are made through the JSON
// API, and each check compares what the page shows with what the API answers.
//
// Run alone:  node tests/browser/ui.test.mjs   (deploy/local.sh test runs it too)
// Environment: ROWLOCK_TEST_ADMIN_URL (required: a PostgreSQL URL allowed to create databases),
// ROWLOCK_BINARY (default build/rowlock), ROWLOCK_BROWSER_NODE_MODULES (default
// .rowlock/node-browser/node_modules), ROWLOCK_TEST_CHROMIUM (default /usr/bin/chromium).
// Screenshots of every view go to .rowlock/logs/ui/ (with the service's log).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BINARY = process.env.ROWLOCK_BINARY || path.join(ROOT, 'build/rowlock');
const MODULES = process.env.ROWLOCK_BROWSER_NODE_MODULES || path.join(ROOT, '.rowlock/node-browser/node_modules');
const CHROMIUM = process.env.ROWLOCK_TEST_CHROMIUM || '/usr/bin/chromium';
const SHOTS = path.join(ROOT, '.rowlock/logs/ui');
const ADMIN = 'ui-test-admin-token-5f2c9a1e';
const READER = 'ui-test-read-token-7b3d0e4f';
const DB = 'rowlock_t_ui_browser';
const METRICS_MAX = 3;

const require = createRequire(path.join(MODULES, 'noop.js'));
const { chromium } = require('playwright-core');
const AXE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

let service;
let base;
let browser;
const pageErrors = [];

// ---- the service ----

function databaseUrl() {
  const admin = process.env.ROWLOCK_TEST_ADMIN_URL;
  if (!admin) throw new Error('ROWLOCK_TEST_ADMIN_URL is not set: run with deploy/local.sh test or source its environment');
  execFileSync('psql', [admin, '-qX', '-v', 'ON_ERROR_STOP=1', '-c', 'SET client_min_messages = warning',
    '-c', `DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`, '-c', `CREATE DATABASE ${DB}`], { stdio: 'inherit' });
  if (/^postgres(ql)?:\/\//.test(admin)) {
    const u = new URL(admin);
    u.pathname = `/${DB}`;
    return u.toString();
  }
  return `${admin} dbname=${DB}`;
}

function startService() {
  fs.mkdirSync(SHOTS, { recursive: true });
  const tokens = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rowlock-ui-')), 'tokens');
  fs.writeFileSync(tokens, `# browser test\n${ADMIN} admin\n${READER} read\n`, { mode: 0o600 });
  const log = fs.createWriteStream(path.join(SHOTS, 'rowlock.log'));
  const child = spawn(BINARY, [], {
    env: {
      ...process.env, ROWLOCK_DATABASE_URL: databaseUrl(), ROWLOCK_PORT: '0', ROWLOCK_LISTEN_ADDRESS: '127.0.0.1',
      ROWLOCK_DB_STARTUP_WAIT_S: '20', ROWLOCK_TOKENS_FILE: tokens, ROWLOCK_JANITOR_INTERVAL_MS: '300',
      ROWLOCK_OPEN_OPS: 'false', // the page still loads; /metrics and /readyz then take the token too
      // past the first 3 topics and ledgers, their counters are summed as "_other" in /metrics
      ROWLOCK_METRICS_MAX_RESOURCES: String(METRICS_MAX),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error('rowlock did not log "listening" within 30 s')), 30000);
    child.once('exit', (code) => reject(new Error(`rowlock exited with ${code}; see ${SHOTS}/rowlock.log`)));
    child.stderr.on('data', (chunk) => {
      log.write(chunk);
      buf += chunk;
      const m = /"msg":"listening".*?"port":(\d+)/.exec(buf);
      if (m) { clearTimeout(timer); buf = ''; resolve({ child, port: Number(m[1]) }); }
    });
  });
}

async function api(method, p, body, { token = ADMIN, headers = {} } = {}) {
  const res = await fetch(base + p, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body)),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

async function ok(method, p, body) {
  const r = await api(method, p, body);
  assert.ok(r.status < 300, `${method} ${p}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

// Polls fn until it returns a truthy value (returned) or the time runs out.
async function until(fn, what, ms = 15000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e.message; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

// ---- the browser ----

async function openPage(token, width = 1280) {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    // an API answer of 4xx is logged by the browser as a failed load: that is not a page error
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(m.text());
  });
  await page.goto(`${base}/ui`);
  await page.getByLabel('Bearer token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('main[data-view="overview"]').waitFor();
  return page;
}

async function go(page, hash, view) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.locator(`main[data-view="${view}"]`).waitFor();
}

const text = (loc) => loc.innerText().then((t) => t.trim());

async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

async function axe(page, name) {
  await page.evaluate(AXE);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`), [],
    `axe-core: serious or critical violations on ${name}`);
}

before(async () => {
  ({ child: service, port: base } = await startService());
  base = `http://127.0.0.1:${base}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});

after(async () => {
  await browser?.close();
  if (service) {
    const exited = new Promise((resolve) => service.once('exit', (code, signal) => resolve(code ?? signal)));
    service.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running after 20 s'), 20000))]);
    assert.equal(code, 0, `rowlock's exit after SIGTERM (a sanitizer report makes it non-zero; see ${SHOTS}/rowlock.log)`);
  }
  assert.deepEqual(pageErrors, [], 'the page logged errors (a Content-Security-Policy violation, an exception)');
});

// ---- the tests ----

test('the page and its files are served without a token (even with ROWLOCK_OPEN_OPS=false), with CSP, nosniff and an ETag', async () => {
  for (const [p, type] of [['/ui', 'text/html'], ['/ui/app.js', 'text/javascript'], ['/ui/app.css', 'text/css']]) {
    const res = await fetch(base + p);
    assert.equal(res.status, 200, p);
    assert.match(res.headers.get('content-type'), new RegExp(`^${type}`));
    assert.match(res.headers.get('content-security-policy'), /default-src 'none'; script-src 'self'; style-src 'self'/);
    assert.doesNotMatch(res.headers.get('content-security-policy'), /unsafe/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    const etag = res.headers.get('etag');
    assert.match(etag, /^"[0-9a-f]{16}"$/);
    const again = await fetch(base + p, { headers: { 'If-None-Match': etag } });
    assert.equal(again.status, 304, `${p} with If-None-Match`);
  }
  const html = await (await fetch(`${base}/ui`)).text();
  assert.doesNotMatch(html, /<script>|<style|style="|\son[a-z]+="/i, 'no inline script, style or handler');
  assert.equal((await fetch(`${base}/queues`)).status, 401, 'the data still needs a token');
  assert.equal((await fetch(`${base}/metrics`)).status, 401, 'ROWLOCK_OPEN_OPS=false closes /metrics, not /ui');
  assert.deepEqual((await api('GET', '/whoami', undefined, { token: READER })).body, { open: false, scopes: ['read'] });
  assert.equal((await api('GET', '/whoami', undefined, { token: 'not-a-token-at-all-x' })).status, 401);
  const slash = await fetch(`${base}/ui/`, { redirect: 'manual' });
  assert.equal(slash.status, 308, '/ui/ redirects');
  assert.equal(slash.headers.get('location'), '/ui');
});

test('overview counts match the API', async () => {
  await ok('PUT', '/queues/mail', { max_attempts: 1, lease_seconds: 30 });
  for (let i = 0; i < 5; i++) await ok('POST', '/queues/mail/jobs', { payload: { n: i } });
  const claim = await ok('POST', '/queues/mail/leases', { owner: 'w', max_jobs: 2 });
  await ok('POST', `/queues/mail/leases/${claim.leases[0].job_id}/complete`, { owner: 'w', fence: claim.leases[0].fence });
  await ok('PUT', '/topics/carts', { headless_ttl_seconds: 3600 });
  await ok('POST', '/topics/carts/messages', { messages: [{ key: 'cart-1', value: { items: 1 } }, { key: 'cart-2', value: { items: 2 } }] });
  await ok('PUT', '/ledgers/main', { tombstone_retention_seconds: 86400 });
  await ok('POST', '/ledgers/main/transactions', { digest: 'tx-1', writes: [{ object_id: 'coin-1', version: 1, type: 'Coin', data: { value: 10 } }], events: [{ type: 'Minted', data: { coin: 'coin-1' } }] });

  const page = await openPage(ADMIN);
  const q = (await ok('GET', '/queues/mail')).counts;
  const row = page.locator('tr[data-queue="mail"] td');
  await until(async () => (await text(row.nth(0))) === String(q.pending), 'the pending count of mail');
  assert.deepEqual(await Promise.all([0, 1, 2, 3].map((i) => text(row.nth(i)))),
    [q.pending, q.processing, q.succeeded, q.failed].map(String));
  const t = (await ok('GET', '/topics/carts')).counts;
  const trow = page.locator('tr[data-topic="carts"] td');
  assert.deepEqual(await Promise.all([0, 1].map((i) => text(trow.nth(i)))), [t.messages, t.heads].map(String));
  const l = await ok('GET', '/ledgers/main');
  const lrow = page.locator('tr[data-ledger="main"] td');
  await until(async () => (await text(lrow.nth(0))) === String(l.watermark), 'the ledger row');
  assert.equal(l.counts.pending_transactions, 1, 'tx-1 came optimistically; no checkpoint yet');
  assert.deepEqual(await Promise.all([2, 4, 5, 6].map((i) => text(lrow.nth(i)))),
    [l.counts.objects, l.counts.transactions, l.counts.pending_transactions, l.counts.events].map(String));
  assert.equal(await text(page.locator('[data-testid="health-db"] dd')), 'reachable');
  await until(async () => /\/s$/.test(await text(page.locator('[data-testid="health-rps"] dd'))), 'a request rate');
  await shot(page, 'overview');
  await axe(page, 'overview');
  // the keyboard alone: the skip link moves focus to the content, a nav link opens its view;
  // a reload keeps the token (session storage) and starts with nothing focused
  await go(page, '#/queues', 'queues');
  await page.reload();
  await page.locator('main[data-view="queues"] tr[data-queue="mail"]').waitFor();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Skip to content');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'main');
  assert.equal(await page.evaluate(() => location.hash), '#/queues', 'the skip link leaves the view as it is');
  await page.getByRole('link', { name: 'Topics', exact: true }).focus();
  await page.keyboard.press('Enter');
  await page.locator('main[data-view="topics"] tr[data-topic="carts"]').waitFor();

  await go(page, '#/queues/mail', 'queues');
  await until(async () => (await text(page.locator('[data-testid="count-succeeded"] dd'))) === String(q.succeeded), 'queue counts');
  assert.equal(await text(page.locator('[data-testid="count-pending"] dd')), String(q.pending));
  assert.equal(await page.locator('tr[data-job]').count(), 5, 'every job listed');
  await page.getByRole('link', { name: 'succeeded', exact: true }).click();
  await until(async () => (await page.locator('tr[data-job]').count()) === 1, 'the succeeded filter');
  await until(async () => await page.locator('.chart polyline.s-claims').getAttribute('points'), 'a throughput line');
  await shot(page, 'queue');
  await axe(page, 'queue');
  await go(page, '#/queues', 'queues');
  await shot(page, 'queues');
  await go(page, '#/ledgers', 'ledgers');
  await page.locator('tr[data-ledger="main"]').waitFor();
  await shot(page, 'ledgers');
  await go(page, '#/ledgers/main', 'ledgers');
  await page.getByLabel('Object id').fill('coin-1');
  await page.getByRole('button', { name: 'Look up' }).click();
  await until(async () => (await page.locator('main').innerText()).includes('"value": 10'), 'the object');
  await ok('POST', '/ledgers/main/transactions', { digest: 'tx-2', events: [{ type: 'Burnt', data: { coin: 'coin-1' } }] });
  await until(async () => (await page.locator('main').innerText()).includes('Burnt'), 'a new event, live');
  const pendingCard = page.locator('[data-testid="pending"] dd');
  await until(async () => (await text(pendingCard)) === '2', 'two pending transactions');
  await ok('POST', '/ledgers/main/checkpoints', { sequence: 1, transactions: [{ digest: 'tx-1' }] });
  assert.equal((await ok('GET', '/ledgers/main')).counts.pending_transactions, 1);
  await until(async () => (await text(pendingCard)) === '1', 'one pending after the checkpoint carried tx-1');
  await shot(page, 'ledger');
  await axe(page, 'ledger');
  await page.setViewportSize({ width: 375, height: 800 });
  await go(page, '#/', 'overview');
  await shot(page, 'overview-phone');
  await axe(page, 'overview at phone width');
  await page.context().close();
});

test('a job page shows the attempt history of a fenced takeover', async () => {
  await ok('PUT', '/queues/takeover', { max_attempts: 5, lease_seconds: 1 });
  const { id } = await ok('POST', '/queues/takeover/jobs', { payload: { to: 'ada' } });
  const first = await ok('POST', '/queues/takeover/leases', { owner: 'worker-1', max_jobs: 1 });
  assert.equal(first.leases[0].fence, 1);
  await new Promise((r) => setTimeout(r, 1300)); // the 1 s lease runs out
  const second = await ok('POST', '/queues/takeover/leases', { owner: 'worker-2', max_jobs: 1 });
  assert.equal(second.leases[0].fence, 2);
  const stale = await api('POST', `/queues/takeover/leases/${id}/complete`, { owner: 'worker-1', fence: 1 });
  assert.equal(stale.status, 409);
  await ok('PATCH', `/queues/takeover/leases/${id}`, { owner: 'worker-2', fence: 2, progress: { step: 3 } });

  const page = await openPage(ADMIN);
  await go(page, `#/queues/takeover/jobs/${id}`, 'queues');
  const job = await ok('GET', `/queues/takeover/jobs/${id}`);
  assert.equal(job.history.length, 2);
  const items = page.locator('.timeline li');
  await until(async () => (await items.count()) === 2, 'two attempts');
  for (let i = 0; i < 2; i++) {
    const a = job.history[i];
    const t = await text(items.nth(i));
    assert.match(t, new RegExp(`Attempt ${a.attempt} · fence ${a.fence} · owner ${a.owner}`));
    assert.match(t, new RegExp(a.outcome || 'running'));
  }
  assert.match(await page.locator('main').innerText(), /"step": 3/);
  await shot(page, 'job');
  await axe(page, 'job');
  await page.context().close();
});

test('a job of a workflow lists its parents (states, queues, links, counts by state) and its children; waiting jobs have their filter', async () => {
  await ok('PUT', '/queues/flow', { max_attempts: 1 });
  await ok('PUT', '/queues/flow-other', { max_attempts: 1 });
  const { id: ext } = await ok('POST', '/queues/flow-other/jobs', { payload: { n: 'ext' } });
  // a and b in this queue, ext in another: c waits for all three, runs even if one fails; d waits for c
  const enq = await ok('POST', '/queues/flow/jobs', { jobs: [
    { ref: 'a', payload: { n: 'a' } }, { ref: 'b', payload: { n: 'b' } },
    { ref: 'c', payload: { n: 'c' }, parents: ['a', 'b', ext], on_parent_failure: 'run' },
    { ref: 'd', payload: { n: 'd' }, parents: ['c'] }, { ref: 'e', payload: { n: 'e' }, parents: ['b'] }] });
  assert.deepEqual(enq.jobs.map((j) => j.state), ['pending', 'pending', 'waiting', 'waiting', 'waiting']);
  const [a, b, c, d, e] = enq.jobs.map((j) => j.id);
  const far = (await ok('POST', '/queues/flow-other/jobs', { jobs: [{ payload: { n: 'far' }, parents: [c] }] })).jobs[0].id;
  const claim = await ok('POST', '/queues/flow/leases', { owner: 'w', max_jobs: 2 });
  const fence = Object.fromEntries(claim.leases.map((l) => [l.job_id, l.fence]));
  await ok('POST', `/queues/flow/leases/${a}/complete`, { owner: 'w', fence: fence[a], result: { rows: 7 } });
  await ok('POST', `/queues/flow/leases/${b}/fail`, { owner: 'w', fence: fence[b], error: { reason: 'no disk' } });
  assert.deepEqual((await ok('GET', `/queues/flow/jobs/${e}`)).last_error, { cancelled: true, parent_failed: b });
  const job = await ok('GET', `/queues/flow/jobs/${c}`);
  assert.deepEqual([job.state, job.waiting_on, job.on_parent_failure, job.parents, job.children], ['waiting', 1, 'run', [a, b, ext], [d, far]]);
  const parents = (await ok('GET', `/queues/flow/jobs/${c}/parents`)).parents;
  assert.deepEqual(parents.map((x) => [x.id, x.queue, x.state]), [[a, 'flow', 'succeeded'], [b, 'flow', 'failed'], [ext, 'flow-other', 'pending']]);

  const page = await openPage(ADMIN);
  await go(page, `#/queues/flow/jobs/${c}`, 'queues');
  const rows = page.locator('#parents tr[data-parent]');
  await until(async () => (await rows.count()) === 3, 'three parents');
  for (let i = 0; i < parents.length; i++) {
    const x = parents[i];
    assert.equal(await rows.nth(i).getAttribute('data-parent'), String(x.id));
    assert.equal(await rows.nth(i).getByRole('link', { name: `#${x.id}` }).getAttribute('href'), `#/queues/${x.queue}/jobs/${x.id}`);
    assert.equal(await text(rows.nth(i).locator('.state')), x.state);
    assert.equal(await text(rows.nth(i).locator('td').nth(1)), x.queue);
  }
  assert.match(await text(rows.nth(0)), /"rows":7/, 'a parent\'s result');
  for (const [st, n] of [['succeeded', 1], ['failed', 1], ['pending', 1]]) {
    assert.equal(await text(page.locator(`[data-testid="parents-${st}"] dd`)), String(n), `parents ${st}`);
  }
  assert.equal(await page.locator('[data-testid="parents-waiting"]').count(), 0, 'no state without parents in it, but succeeded');
  assert.match(await text(page.locator('[data-testid="parents-progress"]')), /^1 of 3 parents succeeded; waiting on 1\. Runs even when a parent fails/);
  assert.equal(await text(page.locator('[data-testid="waiting-on"]')), '1 parent');
  assert.equal(await text(page.locator('[data-testid="on-parent-failure"]')), 'run');
  assert.match(await text(page.locator('main h1')), /waiting/);
  // children: d in this queue links to its page with its state; far, in another queue, is an id alone
  const kids = page.locator('#children tr[data-child]');
  await until(async () => (await kids.count()) === 2, 'two children');
  assert.equal(await kids.nth(0).getByRole('link', { name: `#${d}` }).getAttribute('href'), `#/queues/flow/jobs/${d}`);
  assert.equal(await text(kids.nth(0).locator('.state')), 'waiting');
  assert.equal(await kids.nth(1).getByRole('link').count(), 0);
  assert.match(await text(kids.nth(1)), new RegExp(`#${far}\\s+another queue`));
  await shot(page, 'job-workflow');
  await axe(page, 'job-workflow');
  // ext succeeds: the page, live, counts it and c is released
  const other = await ok('POST', '/queues/flow-other/leases', { owner: 'w', max_jobs: 1 });
  assert.equal(other.leases[0].job_id, ext);
  await ok('POST', `/queues/flow-other/leases/${ext}/complete`, { owner: 'w', fence: other.leases[0].fence });
  await until(async () => (await text(page.locator('[data-testid="parents-succeeded"] dd'))) === '2', 'two parents succeeded');
  assert.equal(await page.locator('[data-testid="parents-pending"]').count(), 0);
  await until(async () => (await text(page.locator('[data-testid="waiting-on"]'))) === '0 parents', 'waiting on none');
  assert.match(await text(page.locator('main h1')), /pending/);
  // a parent's page lists c as a child in this queue
  await rows.nth(0).getByRole('link', { name: `#${a}` }).click();
  await until(async () => (await text(page.locator('main h1'))).includes(`#${a}`), 'the parent\'s page');
  await until(async () => (await page.locator(`#children tr[data-child="${c}"] a[href="#/queues/flow/jobs/${c}"]`).count()) === 1, 'c as a child of a');
  assert.equal(await page.locator('#parents').count(), 0, 'a has no parents');
  // e, cancelled because b failed, says so with a link to b
  await go(page, `#/queues/flow/jobs/${e}`, 'queues');
  await until(async () => (await page.locator('[data-testid="parent-failed"]').count()) === 1, 'the failed parent named');
  assert.equal(await page.locator('[data-testid="parent-failed"] a').getAttribute('href'), `#/queues/flow/jobs/${b}`);
  assert.equal(await text(page.locator('[data-testid="parents-failed"] dd')), '1');
  // the queue: d is the one waiting job, its own filter and count
  await go(page, '#/queues/flow', 'queues');
  await until(async () => (await text(page.locator('[data-testid="count-waiting"] dd'))) === '1', 'one waiting job counted');
  await page.getByRole('link', { name: 'waiting', exact: true }).click();
  await until(async () => (await page.locator('tr[data-job]').count()) === 1, 'the waiting filter');
  assert.equal(await page.locator('tr[data-job]').first().getAttribute('data-job'), String(d));
  assert.match(await text(page.locator(`tr[data-job="${d}"]`)), /waiting/);
  assert.equal(await page.locator('[aria-current="true"]').getAttribute('href'), '#/queues/flow?state=waiting');
  await shot(page, 'queue-waiting');
  await page.context().close();
});

test('the headless count rises after no-op PATCHes on new keys and falls after the janitor', async () => {
  await ok('PUT', '/topics/fresh', { headless_ttl_seconds: 4 });
  const page = await openPage(ADMIN);
  await go(page, '#/topics/fresh', 'topics');
  const cell = page.locator('[data-testid="headless-rows"] dd');
  await until(async () => (await text(cell)) === '0', 'no headless rows at first');
  for (const key of ['new-1', 'new-2', 'new-3']) {
    // If-Match on a key without a head: 412, nothing written, but the key's row was locked
    const r = await api('PATCH', `/topics/fresh/keys/${key}/head`, '{"a":1}', { headers: { 'Content-Type': 'application/merge-patch+json', 'If-Match': '"1"' } });
    assert.equal(r.status, 412);
  }
  assert.equal((await ok('GET', '/topics/fresh')).counts.headless_rows, 3);
  await until(async () => (await text(cell)) === '3', 'three headless rows on the page');
  await shot(page, 'topic-headless');
  await until(async () => (await text(cell)) === '0', 'the janitor deleting them (TTL 4 s)', 20000);
  assert.equal((await ok('GET', '/topics/fresh')).counts.headless_rows, 0);
  await page.context().close();
});

test('the log tail shows a message produced after the page opened, and keys search by prefix', async () => {
  const page = await openPage(ADMIN);
  await go(page, '#/topics/carts', 'topics');
  await page.locator('#log-tail li').first().waitFor();
  const produced = await ok('POST', '/topics/carts/messages', { key: 'cart-77', value: { note: 'after the page opened' } });
  const offset = produced.offset ?? produced.messages?.[0]?.offset;
  await until(async () => (await page.locator(`#log-tail li[data-offset="${offset}"]`).count()) === 1, 'the new message in the tail');
  assert.match(await text(page.locator(`#log-tail li[data-offset="${offset}"]`)), /cart-77.*after the page opened/);
  await ok('POST', '/topics/carts/messages', { messages: [{ key: 'user-1', value: {} }, { key: 'user-2', value: {} }] });
  await page.getByLabel('Key prefix').fill('cart-');
  await page.getByRole('button', { name: 'Search' }).click();
  await until(async () => (await page.locator('tr[data-key^="cart-"]').count()) === 3 &&
    (await page.locator('tr[data-key^="user-"]').count()) === 0, 'the cart- keys only');
  await shot(page, 'topic');
  await axe(page, 'topic');
  await go(page, '#/topics/carts/keys/cart-77', 'topics');
  await until(async () => (await page.locator('main').innerText()).includes('after the page opened'), 'the head value');
  // its history, newest first, as GET .../keys/cart-77/messages gives it, live
  await ok('POST', '/topics/carts/messages', { key: 'cart-77', value: { note: 'second' } });
  await ok('DELETE', '/topics/carts/keys/cart-77/head');
  await ok('POST', '/topics/carts/messages', { key: 'cart-77', value: { note: 'third' } });
  const history = (await ok('GET', '/topics/carts/keys/cart-77/messages')).messages;
  assert.deepEqual(history.map((m) => m.value?.note ?? null), ['third', null, 'second', 'after the page opened']);
  const rows = page.locator('#history tr[data-offset]');
  await until(async () => (await rows.count()) === 4 && (await rows.first().getAttribute('data-offset')) === String(history[0].offset), 'four messages in the history');
  assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.offset)), history.map((m) => String(m.offset)));
  assert.match(await text(rows.nth(0)), /head/);
  assert.match(await text(rows.nth(1)), /deleted \(tombstone\)/);
  assert.match(await text(rows.nth(3)), /after the page opened/);
  await shot(page, 'head');
  await axe(page, 'head');
  await go(page, '#/topics', 'topics');
  await shot(page, 'topics');
  await page.context().close();
});

async function failedJob(queue) {
  await ok('PUT', `/queues/${queue}`, { max_attempts: 1, lease_seconds: 30 });
  const { id } = await ok('POST', `/queues/${queue}/jobs`, { payload: { to: 'bob' } });
  const c = await ok('POST', `/queues/${queue}/leases`, { owner: 'w', max_jobs: 1 });
  await ok('POST', `/queues/${queue}/leases/${id}/fail`, { owner: 'w', fence: c.leases[0].fence, error: { reason: 'smtp down' } });
  assert.equal((await ok('GET', `/queues/${queue}/jobs/${id}`)).state, 'failed');
  return id;
}

test('a failed job is retried from the page, after a confirmation; a pending and a running job are cancelled, and a cancelled one retried', async () => {
  const id = await failedJob('retry');
  const page = await openPage(ADMIN);
  await go(page, `#/queues/retry/jobs/${id}`, 'queues');
  const button = page.getByRole('button', { name: 'Retry job' });
  // by keyboard: Enter opens the confirmation with the harmless choice focused, Escape declines
  await button.focus();
  await page.keyboard.press('Enter');
  await page.getByRole('dialog').waitFor();
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Keep it as it is');
  await page.keyboard.press('Escape');
  await page.getByRole('dialog').waitFor({ state: 'hidden' });
  await button.click();
  await page.getByRole('button', { name: 'Keep it as it is' }).click(); // declined: nothing happens
  await new Promise((r) => setTimeout(r, 500));
  assert.equal((await ok('GET', `/queues/retry/jobs/${id}`)).state, 'failed');
  await button.click();
  await page.locator('#confirm-yes').click();
  await until(async () => (await ok('GET', `/queues/retry/jobs/${id}`)).state === 'pending', 'the job pending again');
  await until(async () => (await button.count()) === 0, 'the Retry button gone');
  await page.getByRole('button', { name: 'Cancel job' }).waitFor(); // a pending job may be cancelled
  await page.getByRole('button', { name: 'Cancel job' }).click();
  await page.locator('#confirm-yes').click();
  await until(async () => (await ok('GET', `/queues/retry/jobs/${id}`)).state === 'cancelled', 'the job cancelled');
  await until(async () => /cancelled/.test(await text(page.locator('main h1'))), 'the cancelled badge');
  // a cancelled job may be retried too; a running one cancelled from its page
  await page.getByRole('button', { name: 'Retry job' }).click();
  await page.locator('#confirm-yes').click();
  await until(async () => (await ok('GET', `/queues/retry/jobs/${id}`)).state === 'pending', 'the cancelled job pending again');
  const c = await ok('POST', '/queues/retry/leases', { owner: 'w2', max_jobs: 1 });
  assert.equal(c.leases[0].job_id, id);
  await until(async () => (await text(page.locator('main h1'))).includes('processing'), 'the job running');
  await page.getByRole('button', { name: 'Cancel job' }).click();
  await page.locator('#confirm-yes').click();
  await until(async () => (await ok('GET', `/queues/retry/jobs/${id}`)).state === 'cancelled', 'the running job cancelled');
  const hb = await api('PATCH', `/queues/retry/leases/${id}`, { owner: 'w2', fence: c.leases[0].fence });
  assert.equal(hb.status, 409);
  assert.equal(hb.body.code, 'job_cancelled');
  await page.context().close();
});

test('a queue page shows its limits, how often each held a job back, its keys and each job\'s key', async () => {
  await ok('PUT', '/queues/tenants', { lease_seconds: 30, limits: { concurrency: 5 },
    key_limits: { concurrency: 1, rate: { limit: 10, period_seconds: 2, burst: 3 } } });
  await ok('PUT', '/queues/tenants/keys/big', { limits: { concurrency: 2 } });
  await ok('POST', '/queues/tenants/jobs', { jobs: [
    { payload: { n: 1 }, concurrency_key: 'small' }, { payload: { n: 2 }, concurrency_key: 'small' },
    { payload: { n: 3 }, concurrency_key: 'big' }, { payload: { n: 4 }, concurrency_key: 'big' },
    { payload: { n: 5 }, concurrency_key: 'big' }] });
  const claimed = (await ok('POST', '/queues/tenants/leases', { owner: 'w', max_jobs: 10 })).leases;
  assert.deepEqual(claimed.map((l) => l.concurrency_key).sort(), ['big', 'big', 'small']);
  const q = await ok('GET', '/queues/tenants');
  const page = await openPage(ADMIN);
  await go(page, '#/queues/tenants', 'queues');
  await until(async () => /The queue: at most 5 at once/.test(await text(page.locator('[data-testid="queue-limits"]'))), 'the limits');
  assert.match(await text(page.locator('[data-testid="queue-limits"]')), /Each concurrency key: at most 1 at once, 10 per 2 s \(bursts of 3\)/);
  assert.equal(await text(page.locator('[data-testid="held-key_concurrency"] dd')), String(q.limits_held_back.key_concurrency));
  assert.ok(q.limits_held_back.key_concurrency > 0);
  assert.match(await text(page.locator('tr[data-key="big"]')), /at most 2 at once, 10 per 2 s \(bursts of 3\)\s*2/);
  const first = claimed[0];
  assert.match(await text(page.locator(`tr[data-job="${first.job_id}"]`)), new RegExp(first.concurrency_key));
  await shot(page, 'queue-limits');
  await axe(page, 'queue-limits');
  await go(page, `#/queues/tenants/jobs/${first.job_id}`, 'queues');
  await until(async () => /Concurrency key\s*(big|small)/.test(await page.locator('dl.kv').innerText()), 'the job\'s key');
  await page.context().close();
});

test('Retry all failed and Cancel all pending page through jobs:retry and jobs:cancel, after a confirmation', async () => {
  await ok('PUT', '/queues/bulk', { max_attempts: 1, lease_seconds: 30 });
  const failed = [];
  for (let i = 0; i < 3; i++) {
    const { id } = await ok('POST', '/queues/bulk/jobs', { payload: { n: i } });
    const c = await ok('POST', '/queues/bulk/leases', { owner: 'w', max_jobs: 1 });
    await ok('POST', `/queues/bulk/leases/${id}/fail`, { owner: 'w', fence: c.leases[0].fence, error: { n: i } });
    failed.push(id);
  }
  // more pending jobs than one page of 1000 holds, and one running job that stays as it is
  await ok('POST', '/queues/bulk/jobs', { jobs: Array.from({ length: 1000 }, (_, n) => ({ payload: { n } })) });
  await ok('POST', '/queues/bulk/jobs', { jobs: [{ payload: 1 }, { payload: 2 }, { payload: 3 }] });
  const run = await ok('POST', '/queues/bulk/leases', { owner: 'w2', max_jobs: 1 });
  const counts = async () => (await ok('GET', '/queues/bulk')).counts;
  assert.deepEqual([(await counts()).failed, (await counts()).pending], [3, 1002]);
  const page = await openPage(ADMIN);
  const pages = { retry: 0, cancel: 0 };
  page.on('request', (r) => { const m = /\/queues\/bulk\/jobs:(retry|cancel)$/.exec(r.url()); if (m && r.method() === 'POST') pages[m[1]]++; });
  await go(page, '#/queues/bulk', 'queues');
  const retryAll = page.getByRole('button', { name: 'Retry all failed' });
  await retryAll.click();
  assert.match(await text(page.locator('#confirm-text')), /Retry every failed job of queue bulk \(3 now\)\?/);
  await page.getByRole('button', { name: 'Keep it as it is' }).click(); // declined: nothing happens
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await counts()).failed, 3);
  await retryAll.click();
  await page.locator('#confirm-yes').click();
  await until(async () => /^3 failed jobs of queue bulk pending again\.$/.test(await text(page.locator('#status'))), 'the retry\'s status');
  assert.deepEqual([(await counts()).failed, (await counts()).pending], [0, 1005]);
  for (const id of failed) assert.equal((await ok('GET', `/queues/bulk/jobs/${id}`)).attempts, 0);
  await until(async () => (await retryAll.count()) === 0, 'Retry all failed gone (none failed)');
  await page.getByRole('button', { name: 'Cancel all pending' }).click();
  assert.match(await text(page.locator('#confirm-text')), /Cancel every pending job of queue bulk \(1005 now\)/);
  await page.locator('#confirm-yes').click();
  await until(async () => /^1005 pending jobs of queue bulk cancelled\.$/.test(await text(page.locator('#status'))), 'the cancel\'s status');
  const after = await counts();
  assert.deepEqual([after.pending, after.cancelled, after.processing], [0, 1005, 1]);
  assert.deepEqual(pages, { retry: 1, cancel: 2 }); // 1000 and 5: two pages
  assert.equal((await ok('GET', `/queues/bulk/jobs/${run.leases[0].job_id}`)).state, 'processing');
  await until(async () => (await page.getByRole('button', { name: 'Cancel all pending' }).count()) === 0, 'Cancel all pending gone');
  await axe(page, 'queue-bulk');
  await page.context().close();
});

test('a queue is paused and resumed from its page, and a paused queue says so in the list', async () => {
  await ok('PUT', '/queues/held', { lease_seconds: 30 });
  await ok('POST', '/queues/held/jobs', { payload: { n: 1 } });
  const page = await openPage(ADMIN);
  await go(page, '#/queues/held', 'queues');
  await page.getByRole('button', { name: 'Pause queue' }).click();
  await page.getByRole('button', { name: 'Keep it as it is' }).click(); // declined: nothing happens
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await ok('GET', '/queues/held')).paused, false);
  await page.getByRole('button', { name: 'Pause queue' }).click();
  await page.locator('#confirm-yes').click();
  await until(async () => (await ok('GET', '/queues/held')).paused === true, 'the queue paused');
  await page.getByRole('button', { name: 'Resume queue' }).waitFor();
  await until(async () => /^Paused since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d/.test(await text(page.locator('[data-testid="paused"]'))), 'the paused note');
  assert.match(await text(page.locator('main h1')), /paused/);
  // a claim hands out nothing while it is paused
  assert.equal((await ok('POST', '/queues/held/leases', { owner: 'w', max_jobs: 5 })).leases.length, 0);
  await shot(page, 'queue-paused');
  await axe(page, 'queue-paused');
  await go(page, '#/queues', 'queues');
  await until(async () => /paused/.test(await text(page.locator('tr[data-queue="held"]'))), 'the badge in the list');
  await go(page, '#/queues/held', 'queues');
  await page.getByRole('button', { name: 'Resume queue' }).click();
  await page.locator('#confirm-yes').click();
  await until(async () => (await ok('GET', '/queues/held')).paused === false, 'the queue resumed');
  await page.getByRole('button', { name: 'Pause queue' }).waitFor();
  assert.equal((await ok('POST', '/queues/held/leases', { owner: 'w', max_jobs: 5 })).leases.length, 1);
  await page.context().close();
  const reader = await openPage(READER);
  await go(reader, '#/queues/held', 'queues');
  await until(async () => (await text(reader.locator('main h1'))).includes('held'), 'the queue page');
  assert.equal(await reader.locator('[data-action="pause"], [data-action="resume"]').count(), 0);
  await reader.context().close();
});

test('pending jobs not due yet read scheduled or retrying, in the list and on their page', async () => {
  await ok('PUT', '/queues/later', { backoff_base_seconds: 3600, max_attempts: 3 });
  const { id: now } = await ok('POST', '/queues/later/jobs', { payload: { n: 1 } });
  const c = await ok('POST', '/queues/later/leases', { owner: 'w', max_jobs: 1 });
  await ok('POST', `/queues/later/leases/${now}/fail`, { owner: 'w', fence: c.leases[0].fence, retry: true });
  const { id: later } = await ok('POST', '/queues/later/jobs', { payload: { n: 2 }, delay_seconds: 3600 });
  const { id: due } = await ok('POST', '/queues/later/jobs', { payload: { n: 3 } });
  const page = await openPage(ADMIN);
  await go(page, '#/queues/later', 'queues');
  const row = (id) => page.locator(`tr[data-job="${id}"]`);
  await until(async () => (await row(due).count()) === 1, 'the jobs listed');
  assert.match(await text(row(now)), /retrying/);
  assert.match(await text(row(later)), /scheduled/);
  assert.match(await text(row(due)), /pending/);
  await go(page, `#/queues/later/jobs/${later}`, 'queues');
  await until(async () => /scheduled/.test(await text(page.locator('main h1'))), 'the scheduled badge');
  await page.context().close();
});

test('a read-only token sees no action buttons', async () => {
  const failed = await failedJob('readonly');
  const { id: pending } = await ok('POST', '/queues/readonly/jobs', { payload: {} });
  const page = await openPage(READER);
  assert.match(await text(page.locator('#session')), /Scopes: read/);
  for (const id of [failed, pending]) {
    await go(page, `#/queues/readonly/jobs/${id}`, 'queues');
    await page.locator('.timeline, main p.hint').first().waitFor();
    await until(async () => (await text(page.locator('main h1'))).includes(`#${id}`), `job ${id}`);
    assert.equal(await page.locator('[data-action="retry"], [data-action="cancel"]').count(), 0);
  }
  await go(page, '#/queues/readonly', 'queues');
  await until(async () => (await text(page.locator('main h1'))).includes('readonly'), 'the queue page');
  assert.equal(await page.locator('[data-action="retry-all"], [data-action="cancel-all"], [data-action="pause"]').count(), 0);
  await shot(page, 'job-read-only');
  await page.context().close();
});

test('the jobs list pages through a queue, 25 at a time, and back', async () => {
  await ok('PUT', '/queues/many', { max_attempts: 3 });
  await ok('POST', '/queues/many/jobs', { jobs: Array.from({ length: 30 }, (_, i) => ({ payload: { i } })) });
  const ids = (await ok('GET', '/queues/many/jobs?limit=100')).jobs.map((j) => String(j.id));
  assert.equal(ids.length, 30);
  const page = await openPage(READER);
  await go(page, '#/queues/many', 'queues');
  const rows = page.locator('tr[data-job]');
  await until(async () => (await rows.count()) === 25, 'a first page of 25');
  assert.equal(await rows.first().getAttribute('data-job'), ids[0]);
  await page.getByRole('link', { name: 'Next page' }).click();
  await until(async () => (await rows.count()) === 5 && (await rows.first().getAttribute('data-job')) === ids[25], 'the last 5');
  assert.equal(await page.getByRole('link', { name: 'Next page' }).count(), 0);
  await page.getByRole('link', { name: 'Previous page' }).click();
  await until(async () => (await rows.count()) === 25 && (await rows.first().getAttribute('data-job')) === ids[0], 'the first page again');
  await page.context().close();
});

test('every topic and ledger is listed past ROWLOCK_METRICS_MAX_RESOURCES, and "_other" is never a name on the page', async () => {
  for (let i = 1; i <= METRICS_MAX + 2; i++) {
    await ok('PUT', `/ledgers/zz-ledger-${i}`, {});
    await ok('POST', `/ledgers/zz-ledger-${i}/transactions`, { digest: `d-${i}`, events: [{ type: 'E', data: {} }] });
    await ok('PUT', `/topics/zz-topic-${i}`, {});
    await ok('POST', `/topics/zz-topic-${i}/messages`, { key: 'k', value: { i } });
  }
  const metrics = await (await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${ADMIN}` } })).text();
  assert.match(metrics, /ledger="_other"/, 'the ledgers past the cap are summed in /metrics');
  assert.match(metrics, /topic="_other"/, 'the topics past the cap are summed in /metrics');
  const ledgers = (await ok('GET', '/ledgers?limit=1000')).ledgers.map((l) => l.name);
  const topics = (await ok('GET', '/topics?limit=1000')).topics.map((t) => t.name);
  assert.ok(ledgers.length > METRICS_MAX + 2 && topics.length > METRICS_MAX + 2);
  const page = await openPage(READER);
  for (const [hash, view] of [['#/', 'overview'], ['#/ledgers', 'ledgers'], ['#/topics', 'topics']]) {
    await go(page, hash, view);
    if (view !== 'topics') {
      await until(async () => (await page.locator('tr[data-ledger]').count()) === ledgers.length, `every ledger on ${hash}`);
      assert.deepEqual(await page.locator('tr[data-ledger]').evaluateAll((trs) => trs.map((tr) => tr.dataset.ledger)), ledgers);
    }
    if (view !== 'ledgers') {
      await until(async () => (await page.locator('tr[data-topic]').count()) === topics.length, `every topic on ${hash}`);
      assert.deepEqual(await page.locator('tr[data-topic]').evaluateAll((trs) => trs.map((tr) => tr.dataset.topic)), topics);
    }
    assert.doesNotMatch(await page.locator('main').innerText(), /_other/, `"_other" on ${hash}`);
  }
  // /ui/ (what people type) lands on the page, with its view
  await page.goto(`${base}/ui/#/ledgers/zz-ledger-${METRICS_MAX + 2}`);
  await page.locator('main[data-view="ledgers"] [data-testid="transactions"]').waitFor();
  assert.equal(page.url(), `${base}/ui#/ledgers/zz-ledger-${METRICS_MAX + 2}`);
  await page.context().close();
});

test('a key\'s history pages back with Older messages, 25 at a time', async () => {
  await ok('PUT', '/topics/hist', {});
  await ok('POST', '/topics/hist/messages', { messages: Array.from({ length: 30 }, (_, i) => ({ key: 'k', value: { i } })) });
  const all = (await ok('GET', '/topics/hist/keys/k/messages?limit=1000')).messages.map((m) => String(m.offset));
  assert.equal(all.length, 30);
  const page = await openPage(READER);
  await go(page, '#/topics/hist/keys/k', 'topics');
  const rows = page.locator('#history tr[data-offset]');
  await until(async () => (await rows.count()) === 25, 'the newest 25');
  assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.offset)), all.slice(0, 25));
  await page.getByRole('button', { name: 'Older messages' }).click();
  await until(async () => (await rows.count()) === 30, 'the 5 older ones below');
  assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.offset)), all);
  await until(async () => (await page.getByRole('button', { name: 'Older messages' }).count()) === 0, 'no older messages left');
  await page.context().close();
});

// What a table row shows: each cell's text, or for a time its datetime (as the API wrote it).
const cells = (row) => row.locator('td').evaluateAll((tds) => tds.map((c) => c.querySelector('time')?.getAttribute('datetime') ?? c.innerText.trim()));
const scheduleRow = (x) => [x.cron, x.time_zone, x.queue, x.paused ? 'paused' : 'active', x.next_fire_at ?? '–',
  x.last_fire_at ?? '–', String(x.fired), String(x.skipped)];

test('the schedules page shows what GET /schedules says, a schedule\'s page its ticks and fires, and Fire now adds a fire', async () => {
  await ok('PUT', '/queues/cron', { max_attempts: 2 });
  await ok('PUT', '/schedules/every-second', { cron: '* * * * * *', queue: 'cron', payload: { kind: 'tick' } });
  await ok('PUT', '/schedules/new-year', { cron: '0 0 1 1 *', time_zone: 'Europe/Berlin', queue: 'cron', payload: { kind: 'report' },
    misfire: 'catch_up', catch_up_max: 3, jitter_seconds: 5 });
  const page = await openPage(ADMIN);
  await page.getByRole('link', { name: 'Schedules', exact: true }).click();
  await page.locator('main[data-view="schedules"] tr[data-schedule]').first().waitFor();
  // this process fires every-second's ticks: /metrics gives the cards a rate and a mean lag
  const rate = page.locator('[data-testid="fire-rate"] dd');
  await until(async () => /\/s$/.test(await text(rate)) && (await text(rate)) !== '0.00/s' &&
    (await text(page.locator('[data-testid="fire-lag"] dd'))) !== '–', 'a fire rate and a mean lag');
  await until(async () => (await ok('GET', '/schedules/every-second')).fired >= 3, 'three ticks of every-second');
  const paused = await ok('PUT', '/schedules/every-second', { cron: '* * * * * *', queue: 'cron', payload: { kind: 'tick' }, paused: true });
  assert.equal(paused.next_fire_at, null, 'a paused schedule has no next tick');

  const list = (await ok('GET', '/schedules')).schedules;
  assert.deepEqual(list.map((x) => x.name), ['every-second', 'new-year']);
  for (const x of list) {
    const row = page.locator(`tr[data-schedule="${x.name}"]`);
    await until(async () => JSON.stringify(await cells(row)) === JSON.stringify(scheduleRow(x)), `the row of ${x.name} as the API gives it`);
  }
  await shot(page, 'schedules');
  await axe(page, 'schedules');
  await go(page, '#/', 'overview');
  await until(async () => (await page.locator('tr[data-schedule]').count()) === 2, 'the schedules on the overview');
  assert.deepEqual(await cells(page.locator('tr[data-schedule="new-year"]')), scheduleRow(list[1]));

  // a schedule's page: its fires, newest first, each with its lag and a link to its job
  await go(page, '#/schedules/every-second', 'schedules');
  const es = await ok('GET', '/schedules/every-second');
  assert.ok(es.last_fires.length >= 3 && es.last_fires.every((f) => !f.manual), JSON.stringify(es.last_fires));
  const fires = page.locator('#last-fires tr[data-fire]');
  await until(async () => (await fires.count()) === es.last_fires.length, 'every fire of every-second');
  assert.deepEqual(await fires.evaluateAll((trs) => trs.map((tr) => tr.dataset.fire)), es.last_fires.map((f) => f.fire_at));
  for (let i = 0; i < es.last_fires.length; i++) {
    const f = es.last_fires[i];
    const lag = (Date.parse(f.enqueued_at) - Date.parse(f.fire_at)) / 1000;
    assert.ok(lag >= 0, `a tick enqueued before its time: ${JSON.stringify(f)}`);
    assert.equal(Number(await fires.nth(i).locator('[data-seconds]').getAttribute('data-seconds')), lag);
    assert.equal(await fires.nth(i).getByRole('link').getAttribute('href'), `#/queues/cron/jobs/${f.job_id}`);
    assert.equal((await cells(fires.nth(i)))[3], 'tick');
  }
  assert.equal(await page.locator('[data-testid="lag"] [data-seconds]').getAttribute('data-seconds'),
    await fires.first().locator('[data-seconds]').getAttribute('data-seconds'), 'the lag card is the newest tick\'s');
  assert.equal(await text(page.locator('[data-testid="fired"] dd')), String(es.fired));
  assert.match(await text(page.locator('main h1')), /paused/);
  assert.match(await page.locator('main').innerText(), /None while it is paused/);

  // new-year: its next ticks, Berlin's midnight of January 1st; Fire now adds a manual fire
  await go(page, '#/schedules/new-year', 'schedules');
  const ny = await ok('GET', '/schedules/new-year');
  assert.equal(ny.next_fires.length, 5);
  assert.equal(ny.last_fires.length, 0);
  const next = page.locator('#next-fires li');
  await until(async () => (await next.count()) === 5, 'the next five ticks');
  assert.deepEqual(await next.locator('time').evaluateAll((ts) => ts.map((t) => t.getAttribute('datetime'))), ny.next_fires);
  assert.match(await text(next.first()), /-01-01 00:00:00 .*\(Europe\/Berlin\)$/);
  const settings = await text(page.locator('#settings'));
  for (const want of ['catch up (at most 3 missed ticks)', 'up to 5 s', 'the queue\'s', '60 s']) assert.ok(settings.includes(want), `${want} in ${settings}`);
  assert.match(await page.locator('main').innerText(), /"kind": "report"/);
  assert.equal(await fires.count(), 0);
  const jobs = async () => (await ok('GET', '/queues/cron/jobs?limit=1000')).jobs.length;
  const before = await jobs();
  await page.getByRole('button', { name: 'Fire now' }).click();
  await page.getByRole('dialog').waitFor();
  assert.match(await text(page.locator('#confirm-text')), /Fire schedule new-year now\? One job goes into queue cron/);
  await page.locator('#confirm-yes').click();
  const after = await until(async () => { const r = await ok('GET', '/schedules/new-year'); return r.last_fires.length === 1 && r; }, 'the manual fire');
  const f = after.last_fires[0];
  assert.equal(f.manual, true);
  assert.equal(after.next_fire_at, ny.next_fire_at, 'a manual fire leaves the next tick');
  assert.equal(await jobs(), before + 1);
  await until(async () => (await fires.count()) === 1, 'the new fire on the page');
  assert.equal(await fires.first().getAttribute('data-fire'), f.fire_at);
  assert.deepEqual((await cells(fires.first())).slice(2, 4), ['–', 'manual'], 'a manual fire has no lag');
  assert.equal(await text(page.locator('[data-testid="lag"] dd')), '–', 'no tick yet, so no lag');
  assert.equal(await text(page.locator('#status')), `Schedule new-year fired: job #${f.job_id} in queue cron.`);
  await shot(page, 'schedule');
  await axe(page, 'schedule');
  await fires.first().getByRole('link', { name: `Job #${f.job_id}` }).click();
  await until(async () => (await text(page.locator('main[data-view="queues"] h1'))).includes(`#${f.job_id}`), 'the fire\'s job');
  assert.match(await page.locator('main').innerText(), /"kind": "report"/);

  // a fire that fails says the problem's detail: the schedule deleted while the question is open
  await go(page, '#/schedules/new-year', 'schedules');
  await page.getByRole('button', { name: 'Fire now' }).click();
  await page.getByRole('dialog').waitFor();
  await ok('DELETE', '/schedules/new-year');
  await page.locator('#confirm-yes').click();
  await until(async () => (await text(page.locator('#status'))) === 'Fire now failed: no schedule named new-year', 'the problem\'s detail');
  await page.locator('#missing').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Fire now' }).count(), 0);
  assert.equal(await jobs(), before + 1, 'no job from the failed fire');
  await page.context().close();

  const reader = await openPage(READER);
  await go(reader, '#/schedules/every-second', 'schedules');
  await reader.locator('#settings').waitFor();
  assert.equal(await reader.locator('[data-action="fire"]').count(), 0, 'no Fire now for a read-only token');
  await reader.context().close();
});
