// tests/bench/queues/pgboss.js: pg-boss processing JOBS no-op jobs, for tests/bench/queues.sh
// (run by it with NODE_PATH at the bench's npm install).
//
// Environment: DATABASE_URL (a database of its own: pg-boss installs its schema there), JOBS,
// MODE, WORKERS (default 4), BATCH (default 500), POOL (its pg pool size, default WORKERS + 2),
// TIMEOUT_S (default 600). The defaults were the fastest of those tried on the 2-core machine
// (20000 jobs: fetch 4 x 500 about 20k jobs/s; 4 x 200 12-15k; 8 x 100 10-11k; 16 x 50 4-7k;
// work 16 x 500 17-18k; work 8 x 1000 13-17k).
// MODE picks one of pg-boss's two documented ways to consume a queue, both with batch fetch:
//   fetch (default): WORKERS loops of `boss.fetch(queue, { batchSize: BATCH })` then
//          `boss.complete(queue, ids)`: a worker fetches again as soon as it has settled; the
//          same shape as rowlock's batch workers (claim BATCH, settle them in one request).
//   work:  WORKERS `boss.work(queue, { batchSize: BATCH, pollingIntervalSeconds: 0.5 }, handler)`
//          (0.5 s is the least pg-boss accepts): pg-boss's own polling worker, which completes
//          a batch without waiting (not awaited) and then sleeps out the rest of its interval
//          before fetching again, even when jobs are waiting, so it is capped at
//          WORKERS x BATCH jobs every 0.5 s.
// In pg-boss 10 batchSize replaced teamSize/teamConcurrency (9.x and before).
//
// Steps: start pg-boss (migrates its schema) with supervise and schedule off (no maintenance
// or cron work during the run); createQueue; enqueue JOBS jobs with boss.insert (batches of
// 1000); VACUUM ANALYZE its job table (the bench does the same for every system); then, timed:
// consume until every job has run and is state 'completed' in the database.
// Prints one line of key=value (see the end; cpu_s: this process's CPU time over the timed
// part); exits 1 when the run did not complete.
"use strict";
const PgBoss = require("pg-boss");
const { Client } = require("pg");
const { execFileSync } = require("child_process");

const env = (name, def) => (process.env[name] === undefined ? def : process.env[name]);
const URL = env("DATABASE_URL");
const JOBS = Number(env("JOBS", "20000"));
const MODE = env("MODE", "fetch");
const WORKERS = Number(env("WORKERS", "4"));
const BATCH = Number(env("BATCH", "500"));
const POOL = Number(env("POOL", String(WORKERS + 2)));
const TIMEOUT_S = Number(env("TIMEOUT_S", "600"));
const QUEUE = `bench-${process.pid}`;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// PostgreSQL's CPU clock ticks, from the bench's PG_TICKS_CMD (run outside the timed part)
const pgTicks = () =>
  process.env.PG_TICKS_CMD
    ? execFileSync(process.env.PG_TICKS_CMD, { encoding: "utf8" }).trim()
    : "";
const since = (t) => Number(process.hrtime.bigint() - t) / 1e9;

async function main() {
  if (!URL) throw new Error("DATABASE_URL is not set");
  if (MODE !== "fetch" && MODE !== "work") throw new Error(`MODE is fetch or work, not ${MODE}`);
  const boss = new PgBoss({ connectionString: URL, max: POOL, supervise: false, schedule: false });
  boss.on("error", (err) => console.error(`pg-boss: ${err.message || err}`));
  await boss.start();
  await boss.createQueue(QUEUE);
  const db = new Client({ connectionString: URL });
  await db.connect();
  const counts = async () =>
    (
      await db.query(
        "SELECT count(*) FILTER (WHERE state = 'completed')::int AS completed, " +
          "count(*) FILTER (WHERE retry_count > 0)::int AS retried, count(*)::int AS total " +
          "FROM pgboss.job WHERE name = $1",
        [QUEUE],
      )
    ).rows[0];

  const e0 = process.hrtime.bigint();
  for (let done = 0; done < JOBS; ) {
    const n = Math.min(1000, JOBS - done);
    const jobs = [];
    for (let k = 0; k < n; k++) jobs.push({ name: QUEUE, data: { i: done + k } });
    await boss.insert(jobs);
    done += n;
  }
  const enqueueS = since(e0);
  if ((await counts()).total !== JOBS) throw new Error("insert did not queue every job");
  await db.query("VACUUM ANALYZE pgboss.job");

  const execs = new Uint32Array(JOBS);
  let executions = 0, strays = 0, firstJobS = -1, fetches = 0, emptyFetches = 0, failed = 0;
  let allRun;
  const allRunP = new Promise((resolve) => (allRun = resolve));
  const pg0 = pgTicks();
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const handle = (jobs) => {
    if (firstJobS < 0 && jobs.length > 0) firstJobS = since(t0);
    for (const job of jobs) {
      const k = job.data && job.data.i;
      if (Number.isInteger(k) && k >= 0 && k < JOBS) execs[k]++;
      else strays++;
      if (++executions === JOBS) allRun();
    }
  };
  const deadline = () => since(t0) > TIMEOUT_S;

  let workers = [];
  if (MODE === "work") {
    for (let w = 0; w < WORKERS; w++)
      await boss.work(QUEUE, { batchSize: BATCH, pollingIntervalSeconds: 0.5 }, async (jobs) => {
        fetches++;
        handle(jobs);
      });
  } else {
    let stop = false;
    allRunP.then(() => (stop = true));
    const loop = async () => {
      let backoff = 0;
      while (!stop && !deadline()) {
        const jobs = await boss.fetch(QUEUE, { batchSize: BATCH });
        fetches++;
        if (!jobs || jobs.length === 0) {
          // the last jobs are with other loops: 1, 2, 4 .. 32 ms, as tests/bench/queues/worker.c
          emptyFetches++;
          await sleep(1 << backoff);
          if (backoff < 5) backoff++;
          continue;
        }
        backoff = 0;
        handle(jobs);
        try {
          await boss.complete(QUEUE, jobs.map((j) => j.id));
        } catch (err) {
          failed++;
          console.error(`pgboss.js: complete: ${err.message}`);
        }
      }
    };
    for (let w = 0; w < WORKERS; w++) workers.push(loop());
  }
  const timeout = sleep(TIMEOUT_S * 1000).then(() => "timeout");
  let timedOut = (await Promise.race([allRunP, timeout])) === "timeout";
  await Promise.all(workers);
  // every job has run: wait for the completions to be committed
  let c = await counts();
  while (!timedOut && c.completed < JOBS) {
    await sleep(2);
    c = await counts();
    timedOut = deadline();
  }
  const seconds = since(t0);
  const cpu = process.cpuUsage(cpu0);
  const pg1 = pgTicks();
  await boss.stop({ graceful: true, wait: true, timeout: 10000 });
  c = await counts();
  await db.end();

  let notOnce = 0;
  for (let k = 0; k < JOBS; k++) if (execs[k] !== 1) notOnce++;
  console.log(
    `seconds=${seconds.toFixed(3)} completed=${c.completed} ` +
      `jobs_per_s=${(c.completed / seconds).toFixed(1)} executions=${executions} ` +
      `cpu_s=${((cpu.user + cpu.system) / 1e6).toFixed(3)} pg_ticks_before=${pg0} ` +
      `pg_ticks_after=${pg1} ` +
      `not_once=${notOnce} strays=${strays} retried=${c.retried} left=${JOBS - c.completed} ` +
      `fetches=${fetches} empty_fetches=${emptyFetches} failed=${failed} ` +
      `enqueue_seconds=${enqueueS.toFixed(3)} first_job_ms=${(firstJobS * 1000).toFixed(1)} ` +
      `timed_out=${timedOut ? 1 : 0} ` +
      `config=mode:${MODE},workers:${WORKERS},batchSize:${BATCH},max:${POOL}` +
      (MODE === "work" ? ",pollingIntervalSeconds:0.5" : ""),
  );
  return timedOut || c.completed !== JOBS || notOnce !== 0 || c.retried !== 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`pgboss.js: ${err && err.stack ? err.stack : err}`);
    process.exit(1);
  },
);
