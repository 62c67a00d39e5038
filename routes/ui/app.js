// rowlock dashboard: hash-routed views over the service's own JSON API and /metrics, refreshed by
// short polling while the tab is visible. No framework: h() builds a view's tree, morph() patches
// the page with it (so focus and scroll survive a refresh), and clicks and form submits are
// handled by delegation (data-action, data-form). The bearer token lives in sessionStorage.

const POLL_MS = 2000;
const HISTORY_S = 300;
const PAGE = 25;
const TAIL = 50;
const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

// ---- building and patching the DOM ----

const SVGNS = 'http://www.w3.org/2000/svg';

function build(doc, ns, tag, attrs, kids) {
  const el = ns ? doc.createElementNS(ns, tag) : doc.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}
const h = (tag, attrs, ...kids) => build(document, null, tag, attrs, kids);
const s = (tag, attrs, ...kids) => build(document, SVGNS, tag, attrs, kids);

// Makes old look like nu, reusing old's nodes where tag and data-key agree. Elements marked
// data-keep (forms the user types into) are left alone once they exist.
function morph(old, nu) {
  for (const a of [...old.attributes]) if (!nu.hasAttribute(a.name)) old.removeAttribute(a.name);
  for (const a of nu.attributes) if (old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
  const oc = [...old.childNodes];
  const nc = [...nu.childNodes];
  nc.forEach((n, i) => {
    const o = oc[i];
    if (!o) return old.append(n);
    const same = o.nodeType === n.nodeType && o.nodeName === n.nodeName &&
      (o.nodeType !== 1 || o.getAttribute('data-key') === n.getAttribute('data-key'));
    if (!same) return old.replaceChild(n, o);
    if (o.nodeType === 3) { if (o.data !== n.data) o.data = n.data; return; }
    if (o.nodeType === 1 && o.hasAttribute('data-keep')) return;
    if (o.nodeType === 1) morph(o, n);
  });
  for (let i = nc.length; i < oc.length; i++) oc[i].remove();
}

// ---- formatting ----

const fmtNum = (n) => (n === null || n === undefined) ? '–' : Number(n).toLocaleString('en-US');
function fmtAge(sec) {
  if (sec === null || sec === undefined) return '–';
  if (sec < 1) return `${Math.round(sec * 1000)} ms`;
  if (sec < 120) return `${sec.toFixed(1)} s`;
  if (sec < 7200) return `${(sec / 60).toFixed(1)} min`;
  if (sec < 172800) return `${(sec / 3600).toFixed(1)} h`;
  return `${(sec / 86400).toFixed(1)} d`;
}
const fmtRate = (r) => (r === null || r === undefined) ? '–' : `${r.toFixed(r < 10 ? 2 : 1)}/s`;
function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  const hms = d.toLocaleTimeString('en-GB', { hour12: false });
  return h('time', { datetime: iso, title: iso }, `${d.toISOString().slice(0, 10)} ${hms}.${String(d.getMilliseconds()).padStart(3, '0')}`);
}
const json = (v) => h('pre', {}, v === null || v === undefined ? 'null' : JSON.stringify(v, null, 2));
const badge = (state) => h('span', { class: `state state-${state}` }, state);
// A job's state as the page shows it: a pending job not due yet is "scheduled" (its first run is
// ahead: run_at or delay_seconds) or "retrying" (waiting out its backoff after a failed attempt).
const jobState = (j) => (j.state === 'pending' && Date.parse(j.run_at) > Date.now()
  ? (j.attempts > 0 ? 'retrying' : 'scheduled') : j.state);
const jobBadge = (j) => {
  const st = jobState(j);
  return st === j.state ? badge(st) : h('span', { class: `state state-${st}`, title: `pending, due ${j.run_at}` }, st);
};

// ---- the API ----

const session = { token: sessionStorage.getItem('rowlock.token') || '', scopes: [], open: false };
const can = (scope) => session.scopes.includes(scope) || session.scopes.includes('admin');

class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || `HTTP ${status}`);
    this.status = status;
    this.code = problem.code || '';
    this.problem = problem;
  }
}

async function api(path, { method = 'GET', text = false, body } = {}) {
  const headers = { Accept: text ? 'text/plain' : 'application/json' };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, cache: 'no-store', body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.ok) return text ? res.text() : res.json();
  let problem = {};
  try { problem = await res.json(); } catch { problem = { detail: `HTTP ${res.status}` }; }
  if (res.status === 401 && path !== '/whoami') signOut('The token is no longer accepted: sign in again.');
  throw new ApiError(res.status, problem);
}

// Every page of a list (queues, topics, ledgers), following next.
async function listAll(path, member) {
  const out = [];
  let after = null;
  for (let i = 0; i < 20; i++) {
    const r = await api(`${path}?limit=1000${after === null ? '' : `&after=${enc(after)}`}`);
    out.push(...r[member]);
    if (r.next === null || r.next === undefined || r[member].length === 0) break;
    after = r.next;
  }
  return out;
}

// The highest offset of a log (messages, events) read only through "after": has(x) is true
// while some offset above x exists. hint (a count) makes the usual case two requests.
async function lastOffset(has, hint) {
  hint = Math.max(0, Math.floor(hint || 0));
  if (hint > 0 && await has(hint - 1) && !(await has(hint))) return hint;
  if (!(await has(0))) return 0;
  let lo = 0;
  let hi = Math.max(hint, 1);
  while (await has(hi)) { lo = hi; hi *= 2; }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await has(mid)) lo = mid; else hi = mid;
  }
  return hi;
}

// ---- /metrics: Prometheus text, parsed, and the samples the rates come from ----

function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[3] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => c === 'n' ? '\n' : c);
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

// Sum of the samples named name whose labels include every pair of want.
function metric(ms, name, want = {}) {
  let sum = null;
  for (const x of ms) {
    if (x.name !== name) continue;
    if (Object.entries(want).some(([k, v]) => x.labels[k] !== v)) continue;
    sum = (sum || 0) + x.value;
  }
  return sum;
}

const samples = []; // {t: seconds, ms: parsed metrics}

async function sampleMetrics() {
  const ms = parseMetrics(await api('/metrics', { text: true }));
  const t = performance.now() / 1000;
  samples.push({ t, ms });
  while (samples.length && samples[0].t < t - HISTORY_S - 5) samples.shift();
  return ms;
}

// The rate of a counter (fn of parsed metrics) over the last `window` seconds, or null. A counter
// that went down (a restart, or another process behind the balancer answered) gives null.
function windowRate(fn, window) {
  if (samples.length < 2) return null;
  const last = samples[samples.length - 1];
  const first = samples.find((x) => x.t >= last.t - window - 0.5) || samples[0];
  if (first === last) return null;
  const a = fn(first.ms);
  const b = fn(last.ms);
  if (a === null || b === null || b < a) return null;
  return (b - a) / (last.t - first.t);
}

// Per-interval rates of a counter across the samples: [{t, r}].
function series(fn) {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const a = fn(samples[i - 1].ms);
    const b = fn(samples[i].ms);
    const dt = samples[i].t - samples[i - 1].t;
    if (a === null || b === null || b < a || dt <= 0) continue;
    out.push({ t: samples[i].t, r: (b - a) / dt });
  }
  return out;
}

// ---- per-view state kept between polls (tails, pagers, searches) ----

let ui = {};
let uiKey = '';

function viewState(key) {
  if (key !== uiKey) { ui = {}; uiKey = key; }
  return ui;
}

// ---- routing ----

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(query) };
}

function route() {
  const { parts, query } = parseHash();
  const [kind, name, sub, id] = parts;
  if (kind === 'queues' && name && sub === 'jobs' && id) return { view: jobView, p: { queue: name, id }, nav: 'queues' };
  if (kind === 'queues' && name) return { view: queueView, p: { queue: name, state: query.get('state') || '', after: query.get('after') || '0' }, nav: 'queues' };
  if (kind === 'queues') return { view: queuesView, p: {}, nav: 'queues' };
  if (kind === 'topics' && name && sub === 'keys' && id) return { view: headView, p: { topic: name, key: id }, nav: 'topics' };
  if (kind === 'topics' && name) return { view: topicView, p: { topic: name }, nav: 'topics' };
  if (kind === 'topics') return { view: topicsView, p: {}, nav: 'topics' };
  if (kind === 'ledgers' && name) return { view: ledgerView, p: { ledger: name }, nav: 'ledgers' };
  if (kind === 'ledgers') return { view: ledgersView, p: {}, nav: 'ledgers' };
  if (kind === 'schedules' && name) return { view: scheduleView, p: { schedule: name }, nav: 'schedules' };
  if (kind === 'schedules') return { view: schedulesView, p: {}, nav: 'schedules' };
  return { view: overviewView, p: {}, nav: 'overview' };
}

const link = (href, text, attrs = {}) => h('a', { href, ...attrs }, text);
const qHref = (q) => `#/queues/${enc(q)}`;
const tHref = (t) => `#/topics/${enc(t)}`;
const lHref = (l) => `#/ledgers/${enc(l)}`;
const sHref = (x) => `#/schedules/${enc(x)}`;

function table(caption, heads, rows, attrs = {}) {
  return h('div', { class: 'scroll', role: 'region', 'aria-label': caption, tabindex: 0, ...attrs },
    h('table', {},
      h('caption', {}, caption),
      h('thead', {}, h('tr', {}, heads.map((x) => h('th', { scope: 'col', class: x.num ? 'num' : null }, x.label || x)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: heads.length }, 'None.')))));
}
const td = (v, num) => h('td', { class: num ? 'num' : null }, v);
const cards = (label, items) => h('dl', { class: 'cards', 'aria-label': label },
  items.map(([k, v, key]) => h('div', { class: 'card', 'data-testid': key || null }, h('dt', {}, k), h('dd', {}, v))));

// ---- health (overview) ----

async function loadHealth(ms) {
  let ready;
  try { ready = await api('/readyz'); } catch (e) { ready = { status: 'unavailable', detail: e.message }; }
  return { ready, ms };
}

function renderHealth({ ready, ms }) {
  const total = (m) => metric(m, 'rowlock_http_requests_total');
  const errors = (m) => {
    let n = 0;
    for (const x of m) if (x.name === 'rowlock_http_requests_total' && x.labels.status >= '500') n += x.value;
    return n;
  };
  const rps = windowRate(total, 10);
  const eps = windowRate(errors, 10);
  const inUse = metric(ms, 'rowlock_db_pool_in_use');
  const size = metric(ms, 'rowlock_db_pool_size');
  const ok = ready.status === 'ready';
  return h('section', { 'aria-labelledby': 'health-h' },
    h('h2', { id: 'health-h' }, 'Service'),
    cards('Service health', [
      ['Database', h('span', { class: `state state-${ok ? 'ok' : 'bad'}` }, ok ? 'reachable' : 'unavailable'), 'health-db'],
      ['Pool in use', `${fmtNum(inUse)} of ${fmtNum(size)}`, 'health-pool'],
      ['Requests', fmtRate(rps), 'health-rps'],
      ['Error rate (5xx)', rps ? `${((eps || 0) / rps * 100).toFixed(1)} %` : '–', 'health-errors'],
      ['Wake-ups', ready.wake_ups || '–', 'health-wakeups'],
      ['Long-polls waiting', fmtNum(metric(ms, 'rowlock_http_long_polls_waiting')), 'health-waiting'],
    ]),
    ok ? h('p', { class: 'hint' }, `Schema version ${ready.schema_version}; build ${ready.build?.version} (${ready.build?.commit}). Rates over the last 10 s of /metrics of the process that answered.`)
      : h('p', { class: 'error' }, `Not ready: ${ready.detail || ''}`));
}

// ---- Overview ----

const overviewView = {
  title: () => 'Overview',
  async load(p, ms) {
    const [health, queues, topics, ledgers, schedules] = await Promise.all([
      loadHealth(ms), listAll('/queues', 'queues'), listAll('/topics', 'topics'), loadLedgers(),
      listAll('/schedules', 'schedules')]);
    return { health, queues, topics, ledgers, schedules };
  },
  render(d) {
    return [h('h1', {}, 'Overview'), renderHealth(d.health),
      h('h2', {}, 'Queues'), queuesTable(d.queues),
      h('h2', {}, 'Topics'), topicsTable(d.topics),
      h('h2', {}, 'Ledgers'), ledgersTable(d.ledgers),
      h('h2', {}, 'Schedules'), schedulesTable(d.schedules)];
  },
};

function queuesTable(queues) {
  return table(`Queues (${queues.length})`,
    ['Queue', { label: 'Pending', num: 1 }, { label: 'Processing', num: 1 }, { label: 'Succeeded', num: 1 }, { label: 'Failed', num: 1 }, { label: 'Cancelled', num: 1 }, { label: 'Oldest pending', num: 1 }],
    queues.map((q) => h('tr', { 'data-key': q.name, 'data-queue': q.name },
      h('th', { scope: 'row' }, link(qHref(q.name), q.name), q.paused ? [' ', badge('paused')] : null),
      td(fmtNum(q.counts?.pending), 1), td(fmtNum(q.counts?.processing), 1),
      td(fmtNum(q.counts?.succeeded), 1), td(fmtNum(q.counts?.failed), 1), td(fmtNum(q.counts?.cancelled), 1),
      td(fmtAge(q.counts?.oldest_pending_age_seconds), 1))));
}

function topicsTable(topics) {
  return table(`Topics (${topics.length})`,
    ['Topic', { label: 'Messages', num: 1 }, { label: 'Heads', num: 1 }, { label: 'Headless rows', num: 1 }, { label: 'Oldest headless', num: 1 }, { label: 'Headless TTL', num: 1 }],
    topics.map((t) => h('tr', { 'data-key': t.name, 'data-topic': t.name, class: t.counts?.headless_oldest_age_seconds > t.headless_ttl_seconds ? 'over' : null },
      h('th', { scope: 'row' }, link(tHref(t.name), t.name)),
      td(fmtNum(t.counts?.messages), 1), td(fmtNum(t.counts?.heads), 1),
      td(fmtNum(t.counts?.headless_rows), 1), td(t.counts?.headless_rows ? fmtAge(t.counts.headless_oldest_age_seconds) : '–', 1),
      td(fmtAge(t.headless_ttl_seconds), 1))));
}

// Ledgers come from GET /ledgers, never from /metrics: there only the first
// ROWLOCK_METRICS_MAX_RESOURCES have series of their own (the others are summed as "_other").
const loadLedgers = () => listAll('/ledgers', 'ledgers');

function ledgersTable(ledgers) {
  return table(`Ledgers (${ledgers.length})`,
    ['Ledger', { label: 'Watermark', num: 1 }, { label: 'Horizon', num: 1 }, { label: 'Objects', num: 1 }, { label: 'Tombstones', num: 1 }, { label: 'Transactions', num: 1 }, { label: 'Pending', num: 1 }, { label: 'Events', num: 1 }, { label: 'Checkpoints', num: 1 }],
    ledgers.map((l) => h('tr', { 'data-key': l.name, 'data-ledger': l.name },
      h('th', { scope: 'row' }, link(lHref(l.name), l.name)),
      td(fmtNum(l.watermark), 1), td(fmtNum(l.horizon), 1), td(fmtNum(l.counts?.objects), 1),
      td(fmtNum(l.counts?.tombstones), 1), td(fmtNum(l.counts?.transactions), 1),
      td(fmtNum(l.counts?.pending_transactions), 1), td(fmtNum(l.counts?.events), 1),
      td(fmtNum(l.counts?.checkpoints), 1))));
}

// ---- Queues ----

const queuesView = {
  title: () => 'Queues',
  async load() { return { queues: await listAll('/queues', 'queues') }; },
  render(d) { return [h('h1', {}, 'Queues'), queuesTable(d.queues)]; },
};

const STATES = ['waiting', 'pending', 'processing', 'succeeded', 'failed', 'cancelled'];
// GET /queues/{queue} counts every state but waiting; the waiting jobs are counted from a page of
// them, up to this many.
const WAITING_COUNT_MAX = 100;

// How long a queue keeps the jobs that end in a state (0: deleted by the statement that ends them).
const kept = (sec) => (sec === 0 ? 'deleted at end' : `kept ${fmtAge(sec)}`);

function queueSettings(q, c) {
  const win = q.dedupe_window_seconds
    ? `dedupe window ${fmtAge(q.dedupe_window_seconds)} (${fmtNum(c.dedupe_keys)} ${c.dedupe_keys === 1 ? 'key' : 'keys'} held)`
    : 'no dedupe window (a key is held while its job is unfinished)';
  return `max_attempts ${q.max_attempts}, lease ${q.lease_seconds} s, backoff ${q.backoff_base_seconds}–${q.backoff_max_seconds} s; `
    + `succeeded ${kept(q.succeeded_retention_seconds)}, failed ${kept(q.failed_retention_seconds)}, cancelled ${kept(q.cancelled_retention_seconds)}; ${win}.`;
}

// A queue's or key's limits as words: "at most 20 at once, 10 per 1 s (bursts of 10)".
function limitsText(l) {
  const parts = [];
  if (l && l.concurrency) parts.push(`at most ${fmtNum(l.concurrency)} at once`);
  if (l && l.rate) parts.push(`${fmtNum(l.rate.limit)} per ${l.rate.period_seconds} s (bursts of ${fmtNum(l.rate.burst)})`);
  return parts.length ? parts.join(', ') : 'none';
}

// The queue's limits, how often each held a job back, and the keys with limits of their own.
function queueLimits(q, keys) {
  const held = q.limits_held_back || {};
  const limited = limitsText(q.limits) !== 'none' || limitsText(q.key_limits) !== 'none' || keys.length > 0;
  return [
    h('h2', {}, 'Limits'),
    h('p', { class: 'hint', 'data-testid': 'queue-limits' },
      `The queue: ${limitsText(q.limits)}. Each concurrency key: ${limitsText(q.key_limits)}.`),
    limited ? cards('Jobs held back by a limit', [
      ['Queue concurrency', fmtNum(held.concurrency), 'held-concurrency'],
      ['Key concurrency', fmtNum(held.key_concurrency), 'held-key_concurrency'],
      ['Queue rate', fmtNum(held.rate), 'held-rate'],
      ['Key rate', fmtNum(held.key_rate), 'held-key_rate'],
    ]) : null,
    keys.length ? table('Keys with limits of their own', ['Key', 'Limits', { label: 'Processing', num: 1 }],
      keys.map((k) => h('tr', { 'data-key': k.key },
        h('th', { scope: 'row' }, k.key), td(limitsText(k.limits_in_effect)), td(fmtNum(k.processing), 1)))) : null,
  ];
}

// The waiting jobs of a page of them (limit WAITING_COUNT_MAX): their number, or "100+" when
// the page is full and more follow.
const waitingCount = (page) => (page.next !== null && page.next !== undefined
  ? `${WAITING_COUNT_MAX}+` : page.jobs.length);
const fmtCount = (n) => (typeof n === 'string' ? n : fmtNum(n));

const queueView = {
  title: (p) => `Queue ${p.queue}`,
  async load(p) {
    const st = viewState(`queue:${p.queue}:${p.state}`);
    st.trail = st.trail || ['0'];
    const i = st.trail.indexOf(p.after);
    if (i >= 0) st.trail.length = i + 1; else st.trail.push(p.after);
    const q = `/queues/${enc(p.queue)}`;
    const [queue, jobs, keys, waiting] = await Promise.all([api(q),
      api(`${q}/jobs?limit=${PAGE}&after=${enc(p.after)}${p.state ? `&state=${p.state}` : ''}`),
      api(`${q}/keys?limit=100`), api(`${q}/jobs?state=waiting&limit=${WAITING_COUNT_MAX}`)]);
    if (queue.counts && queue.counts.waiting === undefined) queue.counts.waiting = waitingCount(waiting);
    return { queue, jobs, keys: keys.keys, prev: st.trail.length > 1 ? st.trail[st.trail.length - 2] : null };
  },
  render(d, p, ms) {
    const c = d.queue.counts || {};
    const name = p.queue;
    const base = `${qHref(name)}?state=${p.state}`;
    const reasons = ms.filter((x) => x.name === 'rowlock_queue_fence_rejections_total' && x.labels.queue === name);
    return [
      h('p', { class: 'crumbs' }, link('#/queues', 'Queues'), ' / '),
      h('h1', {}, `Queue ${name} `, d.queue.paused ? badge('paused') : null),
      d.queue.paused ? h('p', { class: 'hint', 'data-testid': 'paused' },
        'Paused since ', fmtTime(d.queue.paused_at), ': claims hand out nothing until it is resumed; enqueues and the leases already held go on.') : null,
      can('write') ? h('div', { class: 'actions' }, d.queue.paused
        ? h('button', { type: 'button', class: 'primary', 'data-action': 'resume', 'data-queue': name }, 'Resume queue')
        : h('button', { type: 'button', class: 'danger', 'data-action': 'pause', 'data-queue': name }, 'Pause queue'),
      c.failed > 0 ? h('button', { type: 'button', class: 'primary', 'data-action': 'retry-all', 'data-queue': name, 'data-count': c.failed }, 'Retry all failed') : null,
      c.pending > 0 ? h('button', { type: 'button', class: 'danger', 'data-action': 'cancel-all', 'data-queue': name, 'data-count': c.pending }, 'Cancel all pending') : null) : null,
      cards('Jobs by state', [
        ...STATES.map((s2) => [s2[0].toUpperCase() + s2.slice(1), fmtCount(c[s2]), `count-${s2}`]),
        ['Oldest pending', fmtAge(c.oldest_pending_age_seconds), 'oldest-pending'],
      ]),
      h('p', { class: 'hint', 'data-testid': 'queue-settings' }, queueSettings(d.queue, c)),
      ...queueLimits(d.queue, d.keys),
      h('h2', {}, 'Throughput'),
      throughputChart(name),
      h('h3', {}, 'Fence rejections by reason'),
      reasons.length ? h('ul', {}, reasons.map((x) => h('li', { 'data-key': x.labels.reason }, `${x.labels.reason}: ${fmtNum(x.value)}`)))
        : h('p', { class: 'hint' }, 'None since this process started.'),
      h('h2', { id: 'jobs-h' }, 'Jobs'),
      h('ul', { class: 'filters', 'aria-label': 'Filter jobs by state' },
        ['', ...STATES].map((s2) => h('li', { 'data-key': s2 || 'all' },
          link(`${qHref(name)}?state=${s2}`, s2 || 'all', { 'aria-current': p.state === s2 ? 'true' : null })))),
      table(`Jobs${p.state ? ` (${p.state})` : ''}, after id ${p.after}`,
        [{ label: 'Id', num: 1 }, 'State', { label: 'Attempts', num: 1 }, 'Key', 'Owner', 'Updated', 'Last error'],
        d.jobs.jobs.map((j) => h('tr', { 'data-key': j.id, 'data-job': j.id },
          h('th', { scope: 'row', class: 'num' }, link(`${qHref(name)}/jobs/${j.id}`, `#${j.id}`)),
          td(jobBadge(j)), td(`${j.attempts} / ${j.max_attempts}`, 1), td(j.concurrency_key || '–'), td(j.owner || '–'),
          td(fmtTime(j.updated_at)), td(j.last_error ? JSON.stringify(j.last_error).slice(0, 80) : '–')))),
      h('nav', { class: 'pager', 'aria-label': 'Job pages' },
        p.after !== '0' ? link(`${base}&after=0`, 'First page') : null,
        d.prev !== null ? link(`${base}&after=${d.prev}`, 'Previous page') : null,
        d.jobs.next !== null && d.jobs.next !== undefined ? link(`${base}&after=${d.jobs.next}`, 'Next page') : null),
    ];
  },
};

// Claims, completions and failures per second of one queue over the samples so far.
function throughputChart(queue) {
  const names = { claims: 'rowlock_queue_claims_total', completions: 'rowlock_queue_completions_total', failures: 'rowlock_queue_failures_total' };
  const data = Object.fromEntries(Object.entries(names).map(([k, n]) => [k, series((ms) => metric(ms, n, { queue }) ?? 0)]));
  const now = samples.length ? samples[samples.length - 1].t : 0;
  const W = 600, H = 160, L = 44, B = 20, T = 8;
  let max = 1;
  for (const pts of Object.values(data)) for (const x of pts) max = Math.max(max, x.r);
  const mag = 10 ** Math.floor(Math.log10(max));
  max = Math.ceil(max / mag) * mag;
  const x = (t) => L + (W - L - 4) * (1 - (now - t) / HISTORY_S);
  const y = (r) => T + (H - T - B) * (1 - r / max);
  const last = (k) => {
    const pts = data[k].filter((p) => p.t >= now - 60);
    return pts.length ? pts.reduce((a, p) => a + p.r, 0) / pts.length : null;
  };
  const summary = `Last minute, per second: claims ${fmtRate(last('claims'))}, completions ${fmtRate(last('completions'))}, failures ${fmtRate(last('failures'))}.`;
  return h('figure', { class: 'chart', 'data-key': 'chart' },
    s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `Throughput of queue ${queue} over the last 5 minutes. ${summary}` },
      [0, 0.5, 1].map((f) => s('line', { class: 'grid', x1: L, x2: W - 4, y1: y(max * f), y2: y(max * f) })),
      s('text', { class: 'axis', x: 2, y: y(max) + 10 }, `${max}/s`),
      s('text', { class: 'axis', x: 2, y: y(0) }, '0'),
      s('text', { class: 'axis', x: L, y: H - 4 }, '−5 min'),
      s('text', { class: 'axis', x: W - 30, y: H - 4 }, 'now'),
      Object.keys(names).map((k) => s('polyline', {
        class: `s-${k}`, points: data[k].filter((p) => p.t >= now - HISTORY_S).map((p) => `${x(p.t).toFixed(1)},${y(p.r).toFixed(1)}`).join(' '),
      }))),
    h('figcaption', {},
      h('ul', { class: 'legend' }, Object.keys(names).map((k) => h('li', {}, h('span', { class: `sw sw-${k}`, 'aria-hidden': 'true' }), k))),
      h('span', { class: 'hint' }, `${summary} From the counters of /metrics, polled every ${POLL_MS / 1000} s since this page opened.`)));
}

// ---- a job's parents and children (dependencies) ----

const CHILDREN_CHECKED = 100;

// Every parent of a job, in position order, from GET .../parents (each with its queue and state,
// null when the parent is gone).
async function jobParents(queue, id) {
  const out = [];
  let after = 0;
  for (let i = 0; i < 20; i++) {
    const r = await api(`/queues/${enc(queue)}/jobs/${enc(id)}/parents?limit=1000&after=${after}`);
    out.push(...r.parents);
    if (r.next === null || r.next === undefined || r.parents.length === 0) break;
    after = r.next;
  }
  return out;
}

// The job's children as far as this queue knows them: a job lists its children by id alone, and
// a child may be in another queue. The first CHILDREN_CHECKED are looked up in this queue: {id,
// job} when found there as a child of parent, {id} otherwise (another queue, or purged). Where a
// child is found is kept for the view's life (a job never changes queue); its state is read anew.
async function jobChildren(queue, parent, ids, st) {
  st.childQueue = st.childQueue || {};
  return Promise.all(ids.map(async (id, i) => {
    if (i >= CHILDREN_CHECKED || st.childQueue[id] === false) return { id };
    try {
      const job = await api(`/queues/${enc(queue)}/jobs/${enc(id)}`);
      const mine = (job.parents || []).map(String).includes(String(parent));
      st.childQueue[id] = mine;
      return mine ? { id, job } : { id };
    } catch (e) {
      if (e.status !== 404) throw e;
      st.childQueue[id] = false;
      return { id };
    }
  }));
}

// How many of the parents are in each state ("gone": purged or deleted with their queue).
function parentCounts(parents) {
  const n = {};
  for (const x of parents) n[x.state || 'gone'] = (n[x.state || 'gone'] || 0) + 1;
  return n;
}

function jobDependencies(d, queue) {
  const j = d.job;
  if (!(j.parents || []).length && !(j.children || []).length) return [];
  const n = parentCounts(d.parents);
  const jobLink = (q, id) => (q ? link(`${qHref(q)}/jobs/${id}`, `#${id}`) : `#${id}`);
  const failed = j.last_error?.parent_failed;
  const failedParent = d.parents.find((x) => String(x.id) === String(failed));
  return [
    h('h2', { id: 'workflow-h' }, 'Workflow'),
    failed ? h('p', { 'data-testid': 'parent-failed' }, 'Cancelled because its parent ',
      jobLink(failedParent?.queue, failed), ' failed or was cancelled.') : null,
    j.parents.length ? [
      h('h3', {}, 'Parents by state'),
      cards(`Parents by state (${d.parents.length})`, [...STATES, 'gone'].filter((x) => n[x] || x === 'succeeded')
        .map((x) => [x[0].toUpperCase() + x.slice(1), fmtNum(n[x] || 0), `parents-${x}`])),
      h('p', { class: 'hint', 'data-testid': 'parents-progress' },
        `${fmtNum(n.succeeded || 0)} of ${fmtNum(d.parents.length)} parents succeeded; `,
        j.state === 'waiting' ? `waiting on ${fmtNum(j.waiting_on)}. ` : `waiting on none. `,
        j.on_parent_failure === 'run' ? 'Runs even when a parent fails or is cancelled.'
          : 'Cancelled when a parent fails or is cancelled.'),
      table(`Parents (${d.parents.length})`, [{ label: 'Position', num: 1 }, { label: 'Job', num: 1 }, 'Queue', 'State', 'Finished', 'Result'],
        d.parents.map((x) => h('tr', { 'data-key': x.position, 'data-parent': x.id },
          td(fmtNum(x.position), 1), h('th', { scope: 'row', class: 'num' }, jobLink(x.queue, x.id)),
          td(x.queue ? link(qHref(x.queue), x.queue) : '–'), td(badge(x.state || 'gone')),
          td(fmtTime(x.finished_at)), td(x.result === null || x.result === undefined ? '–' : JSON.stringify(x.result).slice(0, 80)))),
        { id: 'parents' }),
    ] : null,
    j.children.length ? [
      table(`Children (${j.children.length})`, [{ label: 'Job', num: 1 }, 'Queue', 'State'],
        d.children.map((x) => h('tr', { 'data-key': x.id, 'data-child': x.id },
          h('th', { scope: 'row', class: 'num' }, jobLink(x.job ? queue : null, x.id)),
          td(x.job ? link(qHref(queue), queue) : 'another queue, or gone'), td(x.job ? jobBadge(x.job) : '–'))),
        { id: 'children' }),
      h('p', { class: 'hint' }, `A job knows its children by id alone: those found in queue ${queue} link to their page`,
        j.children.length > CHILDREN_CHECKED ? ` (the first ${CHILDREN_CHECKED} are looked up)` : '', '.'),
    ] : null,
  ];
}

const jobView = {
  title: (p) => `Job ${p.id} of ${p.queue}`,
  async load(p) {
    let job;
    try { job = await api(`/queues/${enc(p.queue)}/jobs/${enc(p.id)}`); } catch (e) {
      if (e.status !== 404) throw e;
      return { missing: e }; // never enqueued, purged, or deleted as it ended (the detail says what the queue deletes)
    }
    const st = viewState(`job:${p.queue}:${p.id}`);
    const [parents, children] = await Promise.all([
      (job.parents || []).length ? jobParents(p.queue, p.id) : [],
      jobChildren(p.queue, job.id, job.children || [], st)]);
    return { job, parents, children };
  },
  render(d, p) {
    const crumbs = h('p', { class: 'crumbs' }, link('#/queues', 'Queues'), ' / ', link(qHref(p.queue), p.queue), ' / ');
    if (d.missing) return [crumbs, h('h1', {}, `Job #${p.id}`), h('p', { id: 'missing' }, `${d.missing.message}.`)];
    const j = d.job;
    const write = can('write');
    return [
      crumbs,
      h('h1', {}, `Job #${j.id} `, jobBadge(j)),
      h('div', { class: 'actions' },
        write && (j.state === 'failed' || j.state === 'cancelled') ? h('button', { type: 'button', class: 'primary', 'data-action': 'retry', 'data-queue': p.queue, 'data-job': j.id }, 'Retry job') : null,
        write && (j.state === 'waiting' || j.state === 'pending' || j.state === 'processing') ? h('button', { type: 'button', class: 'danger', 'data-action': 'cancel', 'data-queue': p.queue, 'data-job': j.id }, 'Cancel job') : null),
      h('dl', { class: 'kv' },
        [['State', jobBadge(j)], ['Attempts', `${j.attempts} of ${j.max_attempts}`], ['Fence', j.fence],
          ['Owner', j.owner || '–'], ['Lease expires', fmtTime(j.lease_expires_at)], ['Priority', j.priority],
          ['Run at', fmtTime(j.run_at)], ['Created', fmtTime(j.created_at)], ['Updated', fmtTime(j.updated_at)],
          ['Finished', fmtTime(j.finished_at)], ['Dedupe key', j.dedupe_key || '–'],
          ['Concurrency key', j.concurrency_key || '–'],
          ['Parents', (j.parents || []).length ? fmtNum(j.parents.length) : 'none'],
          ['Waiting on', (j.parents || []).length ? `${fmtNum(j.waiting_on)} ${j.waiting_on === 1 ? 'parent' : 'parents'}` : '–', 'waiting-on'],
          ['On parent failure', j.on_parent_failure || '–', 'on-parent-failure'],
          ['Children', (j.children || []).length ? fmtNum(j.children.length) : 'none']]
          .map(([k, v, key]) => [h('dt', {}, k), h('dd', { 'data-testid': key || null }, v)])),
      ...jobDependencies(d, p.queue),
      h('h2', {}, 'Attempt history'),
      (j.history || []).length ? h('ol', { class: 'timeline', 'aria-label': 'Attempts, oldest first' }, j.history.map((a) => {
        const outcome = a.outcome || (a.ended_at ? 'ended' : 'running');
        const took = a.ended_at ? ` (${fmtAge((new Date(a.ended_at) - new Date(a.claimed_at)) / 1000)})` : '';
        return h('li', { class: `outcome-${outcome}`, 'data-key': `${a.attempt}-${a.fence}` },
          h('strong', {}, `Attempt ${a.attempt}`), ` · fence ${a.fence} · owner ${a.owner} · `, h('span', { class: 'outcome' }, outcome), h('br'),
          'claimed ', fmtTime(a.claimed_at), a.ended_at ? [' · ended ', fmtTime(a.ended_at), took] : ' · not ended');
      })) : h('p', { class: 'hint' }, 'Never claimed.'),
      h('h2', {}, 'Payload'), json(j.payload),
      h('h2', {}, 'Progress'), json(j.progress),
      h('h2', {}, 'Result'), json(j.result),
      h('h2', {}, 'Last error'), json(j.last_error),
    ];
  },
};

// ---- Topics ----

const topicsView = {
  title: () => 'Topics',
  async load() { return { topics: await listAll('/topics', 'topics') }; },
  render(d) { return [h('h1', {}, 'Topics'), topicsTable(d.topics)]; },
};

// A live tail: finds the end of the log once, then reads what comes after it at each poll.
async function tail(st, path, member, hint) {
  if (st.after === undefined) {
    const has = async (a) => (await api(`${path}?after=${a}&limit=1`))[member].length > 0;
    st.after = Math.max(0, (await lastOffset(has, hint)) - 20);
    st.items = [];
  }
  for (let i = 0; i < 5; i++) {
    const r = await api(`${path}?after=${st.after}&limit=200`);
    st.items.push(...r[member]);
    if (r.next !== null && r.next !== undefined) st.after = r.next;
    if (r[member].length < 200) break;
  }
  st.items = st.items.slice(-TAIL);
  return st.items;
}

// Keys with a prefix: the key list sorts by bytes, so they follow "after the prefix" (the key
// equal to the prefix is read on its own).
async function keysByPrefix(topic, prefix, after) {
  const base = `/topics/${enc(topic)}`;
  if (!prefix) return api(`${base}/keys?limit=${PAGE}${after ? `&after=${enc(after)}` : ''}`);
  const page = await api(`${base}/keys?limit=${PAGE}&after=${enc(after || prefix)}`);
  const keys = page.keys.filter((k) => k.key.startsWith(prefix));
  if (!after) {
    try { keys.unshift({ ...(await api(`${base}/keys/${enc(prefix)}/head`)), key: prefix }); } catch (e) { if (e.status !== 404) throw e; }
  }
  const more = page.next && page.keys.every((k) => k.key.startsWith(prefix));
  return { keys, next: more ? page.next : null };
}

const topicView = {
  title: (p) => `Topic ${p.topic}`,
  async load(p) {
    const st = viewState(`topic:${p.topic}`);
    st.log = st.log || {};
    st.prefix = st.prefix || '';
    const topic = await api(`/topics/${enc(p.topic)}`);
    const [keys, log] = await Promise.all([keysByPrefix(p.topic, st.prefix, st.keysAfter || ''),
      tail(st.log, `/topics/${enc(p.topic)}/messages`, 'messages', topic.counts?.messages)]);
    return { topic, keys, log, st };
  },
  render(d, p) {
    const t = d.topic;
    const c = t.counts || {};
    const over = c.headless_oldest_age_seconds > t.headless_ttl_seconds;
    return [
      h('p', { class: 'crumbs' }, link('#/topics', 'Topics'), ' / '),
      h('h1', {}, `Topic ${p.topic}`),
      cards('Topic numbers', [
        ['Messages', fmtNum(c.messages), 'messages'], ['Heads', fmtNum(c.heads), 'heads'],
        ['Headless rows', fmtNum(c.headless_rows), 'headless-rows'],
        ['Oldest headless', h('span', { class: over ? 'state state-bad' : null }, c.headless_rows ? fmtAge(c.headless_oldest_age_seconds) : '–'), 'headless-oldest'],
        ['Headless TTL', fmtAge(t.headless_ttl_seconds), 'headless-ttl'],
        ['Retention', t.retention_seconds ? fmtAge(t.retention_seconds) : 'keep all', 'retention'],
      ]),
      h('p', { class: 'hint' }, over ? 'The oldest headless row is older than the TTL: the janitor has not caught up (or the row is locked).'
        : 'Headless rows are locked keys without a head yet; the janitor deletes those older than the TTL.'),
      h('h2', {}, 'Keys'),
      h('form', { class: 'inline', 'data-form': 'prefix', 'data-keep': true, role: 'search' },
        h('div', {}, h('label', { for: 'prefix' }, 'Key prefix'), h('input', { id: 'prefix', name: 'prefix', type: 'search', value: d.st.prefix, autocomplete: 'off' })),
        h('button', { type: 'submit' }, 'Search')),
      table(`Heads${d.st.prefix ? ` starting with “${d.st.prefix}”` : ''}`, ['Key', { label: 'Offset', num: 1 }, { label: 'Rank', num: 1 }, 'Updated', 'Value'],
        d.keys.keys.map((k) => h('tr', { 'data-key': k.key },
          h('th', { scope: 'row' }, link(`${tHref(p.topic)}/keys/${enc(k.key)}`, k.key)),
          td(fmtNum(k.offset), 1), td(fmtNum(k.rank), 1), td(fmtTime(k.updated_at)),
          td(JSON.stringify(k.value).slice(0, 80))))),
      h('nav', { class: 'pager', 'aria-label': 'Key pages' },
        d.st.keysAfter ? h('button', { type: 'button', 'data-action': 'keys-first' }, 'First page') : null,
        d.keys.next ? h('button', { type: 'button', 'data-action': 'keys-next', 'data-after': d.keys.next }, 'Next page') : null),
      h('h2', {}, 'Log (live)'),
      h('ol', { class: 'tail', 'aria-label': `Latest ${TAIL} messages, newest last`, tabindex: 0, id: 'log-tail' },
        d.log.map((m) => h('li', { 'data-key': m.offset, 'data-offset': m.offset },
          `${m.offset} `, h('strong', {}, m.key), ` ${JSON.stringify(m.value)}`))),
      d.log.length ? null : h('p', { class: 'hint' }, 'No messages yet; new ones appear here.'),
    ];
  },
};

// A key's history: GET .../keys/{key}/messages from just above its head, newest first. Each
// request looks at a window of the log (the API bounds it), so an empty page with a next is
// followed a few times; "Older messages" goes on from where the last page stopped.
const HISTORY_HOPS = 5;
async function keyHistory(topic, key, before) {
  const base = `/topics/${enc(topic)}/keys/${enc(key)}/messages?limit=${PAGE}`;
  let page = { messages: [], next: before };
  for (let i = 0; i < HISTORY_HOPS && !page.messages.length && page.next !== null; i++) {
    page = await api(`${base}${page.next ? `&before=${page.next}` : ''}`);
  }
  return page;
}

const headView = {
  title: (p) => `Key ${p.key} of ${p.topic}`,
  async load(p) {
    const st = viewState(`head:${p.topic}:${p.key}`);
    let head = null;
    let missing = null;
    try { head = await api(`/topics/${enc(p.topic)}/keys/${enc(p.key)}/head`); } catch (e) {
      if (e.status !== 404) throw e;
      missing = e;
    }
    const top = head ? head.offset : missing.problem?.offset;
    const history = await keyHistory(p.topic, p.key, top ? top + 1 : 0);
    if (st.top !== top) { st.top = top; st.older = []; st.olderNext = undefined; }
    if (st.olderNext === undefined) st.olderNext = history.next;
    return { head, missing, history, st };
  },
  render(d, p) {
    const crumbs = h('p', { class: 'crumbs' }, link('#/topics', 'Topics'), ' / ', link(tHref(p.topic), p.topic), ' / ');
    const x = d.head;
    const top = x ? x.offset : d.missing?.problem?.offset;
    const rows = [...d.history.messages, ...d.st.older];
    return [crumbs, h('h1', {}, `Key ${p.key}`),
      x ? [h('dl', { class: 'kv' }, [['Offset (ETag)', x.offset], ['Rank', x.rank], ['Schema version', x.schema_version]]
        .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
      h('h2', {}, 'Value'), json(x.value)]
        : h('p', {}, d.missing.code === 'key_deleted' ? `Deleted by the tombstone at offset ${d.missing.problem.offset}.` : d.missing.message),
      h('h2', {}, 'History'),
      table(`Messages of ${p.key}, newest first`, [{ label: 'Offset', num: 1 }, 'Value', { label: 'Rank', num: 1 }, 'Producer', 'Created'],
        rows.map((m) => h('tr', { 'data-key': m.offset, 'data-offset': m.offset, class: m.offset === top ? 'current' : null },
          td(m.offset === top ? [fmtNum(m.offset), ' ', h('span', { class: 'state state-ok' }, 'head')] : fmtNum(m.offset), 1),
          td(m.value === null ? h('em', {}, 'deleted (tombstone)') : JSON.stringify(m.value).slice(0, 120)),
          td(fmtNum(m.rank), 1), td(m.producer || '–'), td(fmtTime(m.created_at)))),
        { id: 'history' }),
      h('nav', { class: 'pager', 'aria-label': 'History pages' },
        d.st.olderNext !== null && d.st.olderNext !== undefined ? h('button', { type: 'button', 'data-action': 'history-older' }, 'Older messages') : null),
      h('p', { class: 'hint' }, 'From the topic\'s log, which has no index by key: each request looks at up to 10,000 offsets below the last one shown. Messages compacted away by the topic\'s retention are no longer there.')];
  },
};

// ---- Ledgers ----

const ledgersView = {
  title: () => 'Ledgers',
  async load() { return { ledgers: await loadLedgers() }; },
  render(d) { return [h('h1', {}, 'Ledgers'), ledgersTable(d.ledgers)]; },
};

const ledgerView = {
  title: (p) => `Ledger ${p.ledger}`,
  async load(p) {
    const st = viewState(`ledger:${p.ledger}`);
    st.events = st.events || {};
    const base = `/ledgers/${enc(p.ledger)}`;
    const ledger = await api(base);
    const events = await tail(st.events, `${base}/events`, 'events', ledger.counts?.events);
    let object = null;
    if (st.objectId) {
      try { object = await api(`${base}/objects/${enc(st.objectId)}`); } catch (e) {
        if (e.status !== 404) throw e;
        object = { missing: e };
      }
    }
    return { ledger, events, object, st };
  },
  render(d, p) {
    const l = d.ledger;
    const c = l.counts || {};
    const o = d.object;
    return [
      h('p', { class: 'crumbs' }, link('#/ledgers', 'Ledgers'), ' / '),
      h('h1', {}, `Ledger ${p.ledger}`),
      cards('Ledger numbers', [['Watermark', fmtNum(l.watermark), 'watermark'], ['Horizon', fmtNum(l.horizon), 'horizon'],
        ['Objects', fmtNum(c.objects), 'objects'], ['Tombstones', fmtNum(c.tombstones), 'tombstones'],
        ['Transactions', fmtNum(c.transactions), 'transactions'], ['Pending transactions', fmtNum(c.pending_transactions), 'pending'],
        ['Checkpoints', fmtNum(c.checkpoints), 'checkpoints'], ['Events', fmtNum(c.events), 'events']]),
      h('p', { class: 'hint' }, 'Watermark: the highest checkpoint below which every checkpoint has arrived. Horizon: tombstones of checkpoints up to it are purged; older checkpoints are refused. Pending: transactions applied optimistically that no checkpoint has carried yet.'),
      h('h2', {}, 'Object lookup'),
      h('form', { class: 'inline', 'data-form': 'object', 'data-keep': true },
        h('div', {}, h('label', { for: 'object-id' }, 'Object id'), h('input', { id: 'object-id', name: 'object', autocomplete: 'off', required: true })),
        h('button', { type: 'submit' }, 'Look up')),
      o ? h('section', { 'aria-label': `Object ${d.st.objectId}`, 'data-key': `obj-${d.st.objectId}` },
        o.missing ? h('p', {}, o.missing.code === 'object_deleted' ? `Object ${d.st.objectId}: deleted (tombstone at version ${o.missing.problem.version ?? '?'}).` : `Object ${d.st.objectId}: ${o.missing.message}`)
          : [h('dl', { class: 'kv' }, [['Object', o.object_id], ['Type', o.type], ['Version', o.version], ['Updated', fmtTime(o.updated_at)]]
            .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])), json(o.data)]) : null,
      h('h2', {}, 'Events (live)'),
      table(`Latest ${TAIL} events, newest last`, [{ label: 'Offset', num: 1 }, 'Type', 'Transaction', 'Created', 'Data'],
        d.events.map((e) => h('tr', { 'data-key': e.offset },
          td(fmtNum(e.offset), 1), td(e.type), td(e.digest), td(fmtTime(e.created_at)), td(JSON.stringify(e.data).slice(0, 100))))),
    ];
  },
};

// ---- Schedules ----

// A schedule's state, written out: paused, active (it has a next tick) or ended (its
// expression fires no more).
const scheduleState = (x) => badge(x.paused ? 'paused' : x.next_fire_at ? 'active' : 'ended');

// A tick's lag: from its time to its job's commit. A manual fire has none (its time is the
// moment its job went in).
function fireLag(f) {
  if (f.manual) return '–';
  const sec = (Date.parse(f.enqueued_at) - Date.parse(f.fire_at)) / 1000;
  return h('span', { 'data-seconds': sec }, fmtAge(sec));
}

// A time as the clock of a time zone shows it ("2026-03-29 03:00:00 CEST"), or null when this
// browser does not know the zone.
function fmtZoned(iso, zone) {
  try {
    const f = new Intl.DateTimeFormat('sv-SE', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false, timeZoneName: 'short' });
    return f.format(new Date(iso));
  } catch { return null; }
}

function schedulesTable(list) {
  return table(`Schedules (${list.length})`,
    ['Schedule', 'Cron', 'Time zone', 'Queue', 'State', 'Next fire', 'Last fire', { label: 'Fired', num: 1 }, { label: 'Skipped', num: 1 }],
    list.map((x) => h('tr', { 'data-key': x.name, 'data-schedule': x.name },
      h('th', { scope: 'row' }, link(sHref(x.name), x.name)),
      td(h('code', {}, x.cron)), td(x.time_zone), td(link(qHref(x.queue), x.queue)), td(scheduleState(x)),
      td(fmtTime(x.next_fire_at)), td(fmtTime(x.last_fire_at)), td(fmtNum(x.fired), 1), td(fmtNum(x.skipped), 1))));
}

// This process's firing, from /metrics: ticks per second and their mean lag over the last
// minute, misfires and skipped ticks since it started.
function firingCards(ms) {
  const lagSum = windowRate((m) => metric(m, 'rowlock_schedule_fire_lag_seconds_sum'), 60);
  const lagCount = windowRate((m) => metric(m, 'rowlock_schedule_fire_lag_seconds_count'), 60);
  return cards('Firing of the process that answered', [
    ['Ticks fired', fmtRate(windowRate((m) => metric(m, 'rowlock_schedule_fires_total'), 60)), 'fire-rate'],
    ['Mean fire lag', lagCount ? fmtAge(lagSum / lagCount) : '–', 'fire-lag'],
    ['Misfires', fmtNum(metric(ms, 'rowlock_schedule_misfires_total')), 'misfires'],
    ['Skipped ticks', fmtNum(metric(ms, 'rowlock_schedule_skipped_ticks_total')), 'skipped-ticks'],
  ]);
}

const schedulesView = {
  title: () => 'Schedules',
  async load() { return { schedules: await listAll('/schedules', 'schedules') }; },
  render(d, p, ms) {
    return [h('h1', {}, 'Schedules'), firingCards(ms),
      h('p', { class: 'hint' }, 'From /metrics of the process that answered (its own ticks, not the fleet\'s): rates and the mean lag (tick to enqueue) over the last minute since this page opened; misfires (ticks handled later than their grace) and skipped ticks since the process started.'),
      schedulesTable(d.schedules)];
  },
};

function scheduleSettings(x) {
  const misfire = x.misfire === 'catch_up' ? `catch up (at most ${x.catch_up_max} missed ticks)` : 'skip to the next tick';
  return h('dl', { class: 'kv', id: 'settings' },
    [['Cron', h('code', {}, x.cron)], ['Time zone', x.time_zone], ['Queue', link(qHref(x.queue), x.queue)],
      ['State', scheduleState(x)], ['Misfire policy', misfire], ['Misfire grace', `${x.misfire_grace_seconds} s`],
      ['Jitter', x.jitter_seconds ? `up to ${x.jitter_seconds} s` : 'none'], ['Priority', x.priority],
      ['Max attempts', x.max_attempts ?? 'the queue\'s'], ['Created', fmtTime(x.created_at)], ['Updated', fmtTime(x.updated_at)]]
      .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

const scheduleView = {
  title: (p) => `Schedule ${p.schedule}`,
  async load(p) {
    try { return { x: await api(`/schedules/${enc(p.schedule)}`) }; } catch (e) {
      if (e.status !== 404) throw e;
      return { missing: e };
    }
  },
  render(d, p) {
    const crumbs = h('p', { class: 'crumbs' }, link('#/schedules', 'Schedules'), ' / ');
    if (d.missing) return [crumbs, h('h1', {}, `Schedule ${p.schedule}`), h('p', { id: 'missing' }, `${d.missing.message} (deleted, or never made).`)];
    const x = d.x;
    const tick = x.last_fires.find((f) => !f.manual);
    return [crumbs,
      h('h1', {}, `Schedule ${x.name} `, scheduleState(x)),
      can('write') ? h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'primary', 'data-action': 'fire', 'data-schedule': x.name, 'data-queue': x.queue }, 'Fire now')) : null,
      cards('Schedule numbers', [
        ['Next fire', fmtTime(x.next_fire_at), 'next-fire'], ['Last fire', fmtTime(x.last_fire_at), 'last-fire'],
        ['Lag of the newest tick', tick ? fireLag(tick) : '–', 'lag'],
        ['Fired', fmtNum(x.fired), 'fired'], ['Skipped', fmtNum(x.skipped), 'skipped']]),
      h('p', { class: 'hint' }, 'Fired, skipped and the last fire count the ticks; Fire now enqueues a job of its own (a manual fire) and leaves the next tick where it is. Lag: from a tick to the commit of its job.'),
      h('h2', {}, 'Settings'), scheduleSettings(x),
      h('h3', {}, 'Payload of its jobs'), json(x.payload),
      h('h2', {}, 'Next fires'),
      x.next_fires.length ? h('ol', { id: 'next-fires', 'aria-label': `The next ${x.next_fires.length} ticks` },
        x.next_fires.map((t) => {
          const zoned = fmtZoned(t, x.time_zone);
          return h('li', { 'data-key': t }, fmtTime(t), zoned ? ` · ${zoned} (${x.time_zone})` : null);
        }))
        : h('p', { class: 'hint' }, x.paused ? 'None while it is paused.' : 'None: the expression fires no more.'),
      h('h2', {}, 'Last fires'),
      table('The newest fires (up to 10), newest first', ['Fire time', 'Enqueued', { label: 'Lag', num: 1 }, 'Kind', 'Job'],
        x.last_fires.map((f) => h('tr', { 'data-key': f.fire_at, 'data-fire': f.fire_at },
          td(fmtTime(f.fire_at)), td(fmtTime(f.enqueued_at)), td(fireLag(f), 1), td(f.manual ? 'manual' : 'tick'),
          td(link(`${qHref(x.queue)}/jobs/${f.job_id}`, `Job #${f.job_id}`)))),
        { id: 'last-fires' }),
    ];
  },
};

// ---- actions, forms, session ----

function setStatus(text) { $('status').textContent = text; }

function confirmDialog(text, yes) {
  const dlg = $('confirm');
  $('confirm-text').textContent = text;
  $('confirm-yes').textContent = yes;
  dlg.returnValue = '';
  dlg.showModal();
  $('confirm-no').focus();
  return new Promise((resolve) => dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true }));
}

// Every page of a bulk action (jobs:retry, jobs:cancel) with filter, a page per request and
// transaction, until the answer's next is null; the status line counts as it goes. Returns how
// many jobs the pages changed (counted: the answer's member that says so).
async function bulkAll(queue, action, filter, counted) {
  let after = 0;
  let total = 0;
  for (;;) {
    const r = await api(`/queues/${enc(queue)}/jobs:${action}`, { method: 'POST', body: { ...filter, limit: 1000, after } });
    total += r[counted];
    if (r.next === null || r.next === undefined) return total;
    setStatus(`${total} jobs ${counted} so far…`);
    after = r.next;
  }
}

// The writes the page offers, each asked for first: the question, its button, the request (or
// run, when it takes several), and what to say after it (r: the answer's body, or what run
// returned). On failure the status line gives the problem's detail.
const WRITES = {
  retry: ({ queue, job }) => ({ verb: 'Retry', ask: `Retry job #${job} of queue ${queue}?`, yes: 'Retry job', method: 'POST',
    path: `/queues/${enc(queue)}/jobs/${enc(job)}/retry`, done: () => `Job #${job} pending again.` }),
  cancel: ({ queue, job }) => ({ verb: 'Cancel', ask: `Cancel job #${job} of queue ${queue}?`, yes: 'Cancel job', method: 'DELETE',
    path: `/queues/${enc(queue)}/jobs/${enc(job)}`, done: () => `Job #${job} cancelled.` }),
  'retry-all': ({ queue, count }) => ({ verb: 'Retry all failed', ask: `Retry every failed job of queue ${queue} (${count} now)? Each becomes pending, due at once, with a fresh set of attempts.`,
    yes: 'Retry all failed', run: () => bulkAll(queue, 'retry', { state: 'failed' }, 'retried'), done: (n) => `${n} failed jobs of queue ${queue} pending again.` }),
  'cancel-all': ({ queue, count }) => ({ verb: 'Cancel all pending', ask: `Cancel every pending job of queue ${queue} (${count} now), scheduled and retrying ones included? Running jobs go on.`,
    yes: 'Cancel all pending', run: () => bulkAll(queue, 'cancel', { state: 'pending' }, 'cancelled'), done: (n) => `${n} pending jobs of queue ${queue} cancelled.` }),
  pause: ({ queue }) => ({ verb: 'Pause', ask: `Pause queue ${queue}? Its claims hand out nothing until it is resumed; enqueues and the leases already held go on.`,
    yes: 'Pause queue', method: 'POST', path: `/queues/${enc(queue)}/pause`, done: () => `Queue ${queue} paused.` }),
  resume: ({ queue }) => ({ verb: 'Resume', ask: `Resume queue ${queue}? Its claims hand out jobs again.`, yes: 'Resume queue',
    method: 'POST', path: `/queues/${enc(queue)}/resume`, done: () => `Queue ${queue} resumed.` }),
  fire: ({ schedule, queue }) => ({ verb: 'Fire now', ask: `Fire schedule ${schedule} now? One job goes into queue ${queue}; the next tick stays where it is.`,
    yes: 'Fire now', method: 'POST', path: `/schedules/${enc(schedule)}/fire`,
    done: (r) => `Schedule ${schedule} fired: job #${r.job_id} in queue ${r.queue}.` }),
};

async function act(el) {
  const { action } = el.dataset;
  if (action === 'history-older') {
    const r = route();
    const page = await keyHistory(r.p.topic, r.p.key, ui.olderNext);
    ui.older.push(...page.messages);
    ui.olderNext = page.next;
    return refresh();
  }
  if (action === 'keys-next' || action === 'keys-first') {
    ui.keysAfter = action === 'keys-next' ? el.dataset.after : '';
    return refresh();
  }
  const w = WRITES[action]?.(el.dataset);
  if (!w || !(await confirmDialog(w.ask, w.yes))) return;
  try {
    setStatus(w.done(await (w.run ? w.run() : api(w.path, { method: w.method }))));
  } catch (e) {
    setStatus(`${w.verb} failed: ${e.message}`);
  }
  refresh();
}

document.addEventListener('click', (ev) => {
  if (ev.target.closest('[data-skip]')) { ev.preventDefault(); $('main').focus(); return; }
  const el = ev.target.closest('[data-action]');
  if (el) { ev.preventDefault(); act(el); }
});

document.addEventListener('submit', (ev) => {
  const form = ev.target;
  if (form.getAttribute('id') === 'login-form') { ev.preventDefault(); return signIn(form.elements.token.value.trim()); }
  if (form.dataset.form === 'prefix') { ev.preventDefault(); ui.prefix = form.elements.prefix.value; ui.keysAfter = ''; refresh(); }
  if (form.dataset.form === 'object') { ev.preventDefault(); ui.objectId = form.elements.object.value.trim(); refresh(); }
});

function renderSession() {
  const box = $('session');
  box.replaceChildren();
  if (session.open) box.append('Open service (no tokens): every action shown');
  else if (session.token && session.scopes.length) {
    box.append(`Scopes: ${session.scopes.join(', ')}`,
      h('button', { type: 'button', id: 'sign-out' }, 'Sign out'));
    $('sign-out').addEventListener('click', () => signOut('Signed out.'));
  }
}

function signOut(why) {
  session.token = '';
  session.scopes = [];
  sessionStorage.removeItem('rowlock.token');
  clearTimeout(timer);
  showLogin(why);
}

function showLogin(why) {
  $('main').replaceChildren();
  $('main').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = why || '';
  renderSession();
  $('token').focus();
}

async function signIn(token) {
  session.token = token;
  try {
    await whoami();
    sessionStorage.setItem('rowlock.token', token);
    $('token').value = '';
    refresh(true);
  } catch (e) {
    session.token = '';
    $('login-error').textContent = e.status === 401 ? 'This token is not accepted.' : e.message;
  }
}

async function whoami() {
  const w = await api('/whoami');
  session.scopes = w.scopes;
  session.open = w.open;
  $('login').hidden = true;
  $('main').hidden = false;
  renderSession();
}

// ---- the loop: one refresh per POLL_MS while the tab is visible ----

let timer = null;
let generation = 0;
let shown = '';

async function refresh(moveFocus = false) {
  clearTimeout(timer);
  const gen = ++generation;
  const r = route();
  const key = location.hash;
  try {
    const ms = await sampleMetrics();
    const data = await r.view.load(r.p, ms);
    if (gen !== generation) return;
    const main = $('main');
    const next = h('main', { id: 'main', tabindex: -1, 'data-view': r.nav }, r.view.render(data, r.p, ms));
    if (shown !== key) main.replaceChildren(...next.childNodes); else morph(main, next);
    shown = key;
    document.title = `${r.view.title(r.p)} · rowlock`;
    for (const a of document.querySelectorAll('[data-nav]')) a.setAttribute('aria-current', a.dataset.nav === r.nav ? 'page' : 'false');
    if ($('status').textContent.startsWith('Cannot')) setStatus('');
    if (moveFocus) main.focus();
  } catch (e) {
    if (gen !== generation) return;
    if (e.status === 401) return;
    setStatus(e.status === 403 ? `Cannot show this view: ${e.message}` : `Cannot refresh: ${e.message}`);
  }
  if (gen === generation && !document.hidden && session.scopes.length) timer = setTimeout(refresh, POLL_MS);
}

document.addEventListener('visibilitychange', () => {
  if (document.hidden) clearTimeout(timer);
  else if (session.scopes.length) refresh();
});
window.addEventListener('hashchange', () => { if (session.scopes.length) refresh(true); });

(async function start() {
  try {
    await whoami();
    refresh();
  } catch (e) {
    if (e.status === 401) showLogin(session.token ? 'The saved token is no longer accepted.' : '');
    else {
      setStatus(`Cannot reach the service: ${e.message}`);
      setTimeout(start, 5000);
    }
  }
}());
