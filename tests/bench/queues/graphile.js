// tests/bench/queues/graphile.js: graphile-worker processing JOBS no-op jobs, for
// tests/bench/queues.sh (run by it with NODE_PATH at the bench's npm install).
//
// Environment: DATABASE_URL (a database of its own: graphile-worker installs its schema
// there), JOBS, CONCURRENCY (concurrentJobs, default 24), POOL (maxPoolSize, default
// CONCURRENCY + 1), LOCAL_QUEUE (localQueue.size, default 500), COMPLETE_DELAY
// (completeJobBatchDelay and failJobBatchDelay in ms, default 0), TIMEOUT_S (default 600).
// The defaults are the configuration of graphile-worker's documented performance run
// (worker.graphile.org/docs/performance, "Batching"): localQueue { size: 500 },
// completeJobBatchDelay 0, failJobBatchDelay 0, concurrentJobs 24, maxPoolSize 25.
//
// Steps: migrate; enqueue JOBS jobs with WorkerUtils.addJobs (batches of 1000, untimed apart
// from its own figure); VACUUM ANALYZE its job table (the bench does the same for every
// system); then, timed: run() the worker pool until every job's handler has run and every
// job row is gone (graphile-worker deletes a job once its completion is committed).
// Prints one line of key=value (see the end; cpu_s: this process's CPU time over the timed
// part); exits 1 when the run did not complete.
"use strict";
const { run, runMigrations, makeWorkerUtils, Logger } = require("graphile-worker");
const { Client } = require("pg");
const { execFileSync } = require("child_process");

const env = (name, def) => (process.env[name] === undefined ? def : process.env[name]);
const URL = env("DATABASE_URL");
const JOBS = Number(env("JOBS", "20000"));
const CONCURRENCY = Number(env("CONCURRENCY", "24"));
const POOL = Number(env("POOL", String(CONCURRENCY + 1)));
const LOCAL_QUEUE = Number(env("LOCAL_QUEUE", "500"));
const COMPLETE_DELAY = Number(env("COMPLETE_DELAY", "0"));
const TIMEOUT_S = Number(env("TIMEOUT_S", "600"));
const TASK = "bench_noop";

// errors only: graphile-worker logs every pool start and stop at info
const logger = new Logger(() => (level, message) => {
  if (level === "error") console.error(`graphile-worker: ${message}`);
});

const preset = {
  worker: {
    connectionString: URL,
    concurrentJobs: CONCURRENCY,
    maxPoolSize: POOL,
    localQueue: { size: LOCAL_QUEUE },
    completeJobBatchDelay: COMPLETE_DELAY,
    failJobBatchDelay: COMPLETE_DELAY,
  },
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// PostgreSQL's CPU clock ticks, from the bench's PG_TICKS_CMD (run outside the timed part)
const pgTicks = () =>
  process.env.PG_TICKS_CMD
    ? execFileSync(process.env.PG_TICKS_CMD, { encoding: "utf8" }).trim()
    : "";

async function main() {
  if (!URL) throw new Error("DATABASE_URL is not set");
  await runMigrations({ preset, logger });
  const db = new Client({ connectionString: URL });
  await db.connect();
  const left = async () =>
    Number(
      (
        await db.query(
          "SELECT count(*) FROM graphile_worker._private_jobs j " +
            "JOIN graphile_worker._private_tasks t ON t.id = j.task_id WHERE t.identifier = $1",
          [TASK],
        )
      ).rows[0].count,
    );
  if ((await left()) !== 0) throw new Error(`jobs of task ${TASK} are already queued`);

  const utils = await makeWorkerUtils({ preset, logger });
  const e0 = process.hrtime.bigint();
  for (let done = 0; done < JOBS; ) {
    const n = Math.min(1000, JOBS - done);
    const specs = [];
    for (let k = 0; k < n; k++) specs.push({ identifier: TASK, payload: { i: done + k } });
    await utils.addJobs(specs);
    done += n;
  }
  const enqueueS = Number(process.hrtime.bigint() - e0) / 1e9;
  await utils.release();
  if ((await left()) !== JOBS) throw new Error("addJobs did not queue every job");
  await db.query("VACUUM ANALYZE graphile_worker._private_jobs");

  const execs = new Uint32Array(JOBS);
  let executions = 0, strays = 0, maxAttempts = 0, firstJobS = -1;
  let allRun;
  const allRunP = new Promise((resolve) => (allRun = resolve));
  const taskList = {
    [TASK]: async (payload, helpers) => {
      const k = payload && payload.i;
      if (Number.isInteger(k) && k >= 0 && k < JOBS) execs[k]++;
      else strays++;
      if (helpers.job.attempts > maxAttempts) maxAttempts = helpers.job.attempts;
      if (firstJobS < 0) firstJobS = Number(process.hrtime.bigint() - t0) / 1e9;
      if (++executions === JOBS) allRun();
    },
  };

  const pg0 = pgTicks();
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const runner = await run({ preset, taskList, logger, noHandleSignals: true });
  const timeout = sleep(TIMEOUT_S * 1000).then(() => "timeout");
  let timedOut = (await Promise.race([allRunP, timeout])) === "timeout";
  // every handler has run: now wait for the completions to be committed (batched)
  let remaining = await left();
  while (!timedOut && remaining > 0) {
    await sleep(2);
    remaining = await left();
    timedOut = Number(process.hrtime.bigint() - t0) / 1e9 > TIMEOUT_S;
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const pg1 = pgTicks();
  await runner.stop();
  remaining = await left();
  await db.end();

  let notOnce = 0;
  for (let k = 0; k < JOBS; k++) if (execs[k] !== 1) notOnce++;
  const completed = JOBS - remaining;
  console.log(
    `seconds=${seconds.toFixed(3)} completed=${completed} ` +
      `jobs_per_s=${(completed / seconds).toFixed(1)} executions=${executions} ` +
      `cpu_s=${((cpu.user + cpu.system) / 1e6).toFixed(3)} pg_ticks_before=${pg0} ` +
      `pg_ticks_after=${pg1} ` +
      `not_once=${notOnce} strays=${strays} max_attempts=${maxAttempts} left=${remaining} ` +
      `enqueue_seconds=${enqueueS.toFixed(3)} first_job_ms=${(firstJobS * 1000).toFixed(1)} ` +
      `timed_out=${timedOut ? 1 : 0} ` +
      `config=concurrentJobs:${CONCURRENCY},maxPoolSize:${POOL},localQueue.size:${LOCAL_QUEUE},` +
      `completeJobBatchDelay:${COMPLETE_DELAY},failJobBatchDelay:${COMPLETE_DELAY}`,
  );
  return timedOut || remaining !== 0 || notOnce !== 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`graphile.js: ${err && err.stack ? err.stack : err}`);
    process.exit(1);
  },
);
