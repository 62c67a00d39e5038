// tests/bench/latency/latency.js: enqueue-to-start latency and enqueue throughput, for
// tests/bench/latency.sh (run by it with NODE_PATH at the bench's npm install for graphile-worker).
//
// MODE=rowlock: ENQ_URL and CLAIM_URL (two rowlock processes on one database), QUEUE, JOBS. One
//   claimer long-polls CLAIM_URL (POST /queues/Q/leases, max_jobs 1, wait_seconds 10) and
//   completes each job; one enqueuer POSTs one job at a time to ENQ_URL, waits until the
//   claimer holds it, pauses PAUSE_MS (2) so that the claimer is waiting again, and goes on.
//   Latency: from just before the enqueue request is sent to the claim's answer arriving, so it
//   includes two HTTP exchanges (the enqueue's request, the claim's answer); enq_call_* is the
//   enqueue request alone (sent to answered), the write's own share.
// MODE=graphile: DATABASE_URL, JOBS. graphile-worker's own add_job-to-start: run() with
//   concurrency 1 in its default configuration (LISTEN/NOTIFY on insert), addJob through
//   WorkerUtils in the same way: one at a time, from just before addJob to the task starting:
//   one SQL call inside the process that runs the task, no HTTP; enq_call_* is addJob alone.
// MODE=throughput: ENQ_URL, QUEUE, SECONDS, CLIENTS (8), BATCH (1 or 50): CLIENTS loops POST
//   /queues/Q/jobs with BATCH jobs each for SECONDS; prints jobs/s and requests/s.
// Prints one line of key=value; exits 1 when the run did not complete.
"use strict";

const env = (name, def) => (process.env[name] === undefined ? def : process.env[name]);
const JOBS = Number(env("JOBS", "2000"));
const PAUSE_MS = Number(env("PAUSE_MS", "2"));
const now = () => Number(process.hrtime.bigint()) / 1e6; // ms
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const sorted = (ms) => [...ms].sort((a, b) => a - b);
const quantile = (s, p) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
const f2 = (x) => x.toFixed(2);

// ms: enqueue-to-start latencies; call: the enqueue calls' own durations.
function summary(ms, call) {
  const s = sorted(ms), c = sorted(call);
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  return `jobs=${s.length} p50_ms=${f2(quantile(s, 50))} p90_ms=${f2(quantile(s, 90))} p99_ms=${f2(quantile(s, 99))} max_ms=${f2(s[s.length - 1])} mean_ms=${f2(mean)} enq_call_p50_ms=${f2(quantile(c, 50))} enq_call_p99_ms=${f2(quantile(c, 99))}`;
}

// POST over node's http module with a keep-alive agent: one warm connection per server and
// client, as a web backend would hold. (fetch, undici, cost 0.1-0.3 ms more a request here.)
const http = require("http");
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
function post(url, body, want) {
  const u = new URL(url);
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({
      agent, host: u.hostname, port: u.port, path: u.pathname, method: "POST",
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data) },
    }, (r) => {
      const chunks = [];
      r.on("data", (c) => chunks.push(c));
      r.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        if (r.statusCode !== want) {
          reject(new Error(`POST ${url}: ${r.statusCode} ${text.slice(0, 300)}`));
          return;
        }
        try { resolve(JSON.parse(text)); } catch (e) { reject(e); }
      });
      r.on("error", reject);
    });
    req.on("error", reject);
    req.end(data);
  });
}

// A promise per job index, resolved by whoever sees the job start.
function starts(n) {
  const resolvers = [];
  const promises = [];
  for (let i = 0; i < n; i++) promises.push(new Promise((r) => (resolvers[i] = r)));
  return { promises, resolve: (i, t) => resolvers[i] && resolvers[i](t) };
}

async function rowlockLatency() {
  const ENQ = env("ENQ_URL"), CLAIM = env("CLAIM_URL"), Q = env("QUEUE", "latency");
  const st = starts(JOBS);
  let stop = false;
  const claimer = (async () => {
    while (!stop) {
      const got = await post(`${CLAIM}/queues/${Q}/leases`,
        { owner: "bench", max_jobs: 1, wait_seconds: 10 }, 200);
      const t = now();
      for (const l of got.leases) {
        st.resolve(l.payload.i, t);
        await post(`${CLAIM}/queues/${Q}/leases/${l.job_id}/complete`,
          { owner: "bench", fence: l.fence }, 200);
      }
    }
  })();
  await sleep(200); // the claimer is waiting
  const ms = [], call = [];
  for (let i = 0; i < JOBS; i++) {
    const t0 = now();
    await post(`${ENQ}/queues/${Q}/jobs`, { payload: { i } }, 201);
    call.push(now() - t0);
    const t1 = await Promise.race([st.promises[i], sleep(15000).then(() => -1)]);
    if (t1 < 0) throw new Error(`job ${i} was not claimed within 15 s`);
    ms.push(t1 - t0);
    await sleep(PAUSE_MS);
  }
  stop = true;
  await post(`${ENQ}/queues/${Q}/jobs`, { payload: { i: -1 } }, 201); // ends the last wait
  await claimer;
  console.log(`system=rowlock ${summary(ms, call)}`);
}

async function graphileLatency() {
  const { run, makeWorkerUtils, Logger } = require("graphile-worker");
  const logger = new Logger(() => (level, message) => {
    if (level === "error") console.error(`graphile-worker: ${message}`);
  });
  const preset = { worker: { connectionString: env("DATABASE_URL"), concurrentJobs: 1 } };
  const st = starts(JOBS);
  const runner = await run({
    preset,
    logger,
    taskList: { bench_latency: async (p) => st.resolve(p.i, now()) },
  });
  const utils = await makeWorkerUtils({ preset, logger });
  await sleep(500);
  const ms = [], call = [];
  for (let i = 0; i < JOBS; i++) {
    const t0 = now();
    await utils.addJob("bench_latency", { i });
    call.push(now() - t0);
    const t1 = await Promise.race([st.promises[i], sleep(15000).then(() => -1)]);
    if (t1 < 0) throw new Error(`graphile job ${i} did not start within 15 s`);
    ms.push(t1 - t0);
    await sleep(PAUSE_MS);
  }
  await utils.release();
  await runner.stop();
  const { version } = require("graphile-worker/package.json");
  console.log(`system=graphile-worker-${version} ${summary(ms, call)}`);
}

async function throughput() {
  const ENQ = env("ENQ_URL"), Q = env("QUEUE", "tput");
  const SECONDS = Number(env("SECONDS", "5")), CLIENTS = Number(env("CLIENTS", "8"));
  const BATCH = Number(env("BATCH", "1"));
  const jobs = [];
  for (let k = 0; k < BATCH; k++) jobs.push({ payload: { k } });
  const body = BATCH === 1 ? jobs[0] : { jobs };
  let requests = 0;
  const end = now() + SECONDS * 1000;
  const t0 = now();
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (now() < end) {
      await post(`${ENQ}/queues/${Q}/jobs`, body, 201);
      requests++;
    }
  }));
  const s = (now() - t0) / 1000;
  console.log(`batch=${BATCH} clients=${CLIENTS} requests_per_s=${(requests / s).toFixed(0)} jobs_per_s=${((requests * BATCH) / s).toFixed(0)}`);
}

const modes = { rowlock: rowlockLatency, graphile: graphileLatency, throughput };
const mode = modes[env("MODE", "rowlock")];
mode().then(() => process.exit(0), (e) => {
  console.error(`latency.js: ${e.stack || e}`);
  process.exit(1);
});
