/* Schedules (see schedules.h): create, read, list, delete, fire now; the plan of a schedule's
 * due ticks; the firing transaction; the zones loaded once per process; the upkeep that trims
 * each schedule's fire history. */
#include "db/schedules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/sql.h"
#include "db/tx.h"
#include "db/upkeep.h"

#define FAMILY "schedules"

/* clang-format off */
#define SCHEDULE_COLUMNS \
    "s.id, s.name, s.cron, s.time_zone, q.name, s.payload::text, s.priority, " \
    "coalesce(s.max_attempts, 0), s.misfire, s.catch_up_max, s.misfire_grace_seconds, " \
    "s.jitter_seconds, s.paused, coalesce(extract(epoch FROM s.next_fire_at)::int8, -1), " \
    "coalesce(extract(epoch FROM s.last_fire_at)::int8, -1), s.fired, s.skipped, " \
    DB_TS("s.created_at") ", " DB_TS("s.updated_at")
#define SCHEDULE_NCOLUMNS 19
/* clang-format on */

/* Put, first: the queue's id, the time now, and the schedule as it is (locked), if any. */
static const struct db_stmt st_put_read = {
    "schedule_put_read",
    "SELECT (SELECT id FROM rowlock.queues WHERE name = $2), extract(epoch FROM now())::float8, "
    "s.cron, s.time_zone, s.paused, coalesce(extract(epoch FROM s.next_fire_at)::int8, -1) "
    "FROM (SELECT 1) one LEFT JOIN (SELECT * FROM rowlock.schedules WHERE name = $1 FOR UPDATE) "
    "s ON true",
    2};
/* Put, then: the row ($14: the next tick, UTC seconds, NULL for none). */
static const struct db_stmt st_put_write = {
    "schedule_put_write",
    "WITH w AS (INSERT INTO rowlock.schedules AS s (name, cron, time_zone, queue_id, payload, "
    "  priority, max_attempts, misfire, catch_up_max, misfire_grace_seconds, jitter_seconds, "
    "  paused, next_fire_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6, nullif($7::integer, 0), $8, "
    "  $9, $10, $11, $12, to_timestamp($13::float8)) "
    "  ON CONFLICT (name) DO UPDATE SET cron = EXCLUDED.cron, time_zone = EXCLUDED.time_zone, "
    "  queue_id = EXCLUDED.queue_id, payload = EXCLUDED.payload, priority = EXCLUDED.priority, "
    "  max_attempts = EXCLUDED.max_attempts, misfire = EXCLUDED.misfire, "
    "  catch_up_max = EXCLUDED.catch_up_max, "
    "  misfire_grace_seconds = EXCLUDED.misfire_grace_seconds, "
    "  jitter_seconds = EXCLUDED.jitter_seconds, paused = EXCLUDED.paused, "
    "  next_fire_at = EXCLUDED.next_fire_at, updated_at = now() "
    "  RETURNING (xmax = 0) AS created, s.*) "
    "SELECT s.created, " SCHEDULE_COLUMNS " FROM w s JOIN rowlock.queues q ON q.id = s.queue_id",
    13};
/* One schedule and its newest fires, as JSON-free rows: the schedule's columns, then each
 * fire's (fire_at, enqueued_at, job, manual), NULL when it has none. */
static const struct db_stmt st_get = {
    "schedule_get",
    "SELECT " SCHEDULE_COLUMNS ", " DB_TS("f.fire_at") ", " DB_TS(
        "f.enqueued_at") ", f.job_id, "
                         "f.manual FROM rowlock.schedules s JOIN rowlock.queues q ON q.id = "
                         "s.queue_id "
                         "LEFT JOIN LATERAL (SELECT * FROM rowlock.schedule_fires WHERE "
                         "schedule_id = s.id "
                         "  ORDER BY fire_at DESC LIMIT " DB_UPKEEP_SQL(
                             DB_SCHEDULE_HISTORY) ") f ON true "
                                                  "WHERE s.name = $1 ORDER BY f.fire_at DESC",
    1};
static const struct db_stmt st_list = {
    "schedule_list",
    "SELECT " SCHEDULE_COLUMNS " FROM rowlock.schedules s JOIN rowlock.queues q "
    "ON q.id = s.queue_id WHERE s.name > coalesce($1, '') ORDER BY s.name LIMIT $2",
    2};
static const struct db_stmt st_delete = {
    "schedule_delete", "DELETE FROM rowlock.schedules WHERE name = $1 RETURNING id", 1};

/* The due schedules of a firing pass ($1 how many), locked: those another pass holds are
 * skipped, and a schedule another pass moved on since this statement began is re-read and no
 * longer due (READ COMMITTED re-checks the locked row), so one tick is fired by one pass. */
static const struct db_stmt st_due = {
    "schedules_due",
    "SELECT s.id, s.cron, s.time_zone, extract(epoch FROM s.next_fire_at)::int8, s.misfire, "
    "s.catch_up_max, s.misfire_grace_seconds, s.jitter_seconds, "
    "extract(epoch FROM now())::float8 FROM rowlock.schedules s "
    "WHERE s.next_fire_at <= now() ORDER BY s.next_fire_at LIMIT $1 FOR UPDATE SKIP LOCKED",
    1};

/* The fires and the advance of a pass in one statement. Fires: $1 schedule ids, $2 ticks (UTC
 * seconds; NULL: now, a manual fire). A tick already recorded inserts nothing (the primary key
 * is the tick's identity), and so makes no job. Each new fire's job goes into the schedule's
 * queue as an enqueue's would (db/queues.c): pending, due at its tick plus a random delay of up
 * to the schedule's jitter (not before now), with the schedule's priority and attempts (or the
 * queue's). Advance: $3 schedule ids, $4 next ticks (NULL: none), $5 last fired ticks (NULL:
 * none this pass), $6 fires, $7 skipped, $8 pause (its zone or expression no longer loads). A
 * schedule that fired is due for upkeep a minute on. Returns each new fire's schedule, tick
 * (UTC seconds), job, queue name and the tick as the API writes it, and the time now. */
/* clang-format off */
static const struct db_stmt st_fire = {
    "schedules_fire",
    "WITH input AS (SELECT x.sid, coalesce(to_timestamp(x.t), now()) AS fire_at, "
    "  x.t IS NULL AS manual FROM unnest($1::int8[], $2::float8[]) AS x(sid, t)), "
    "f AS (INSERT INTO rowlock.schedule_fires (schedule_id, fire_at, job_id, manual) "
    "  SELECT sid, fire_at, nextval('rowlock.jobs_id_seq'), manual FROM input "
    "  ON CONFLICT (schedule_id, fire_at, manual) DO NOTHING RETURNING schedule_id, fire_at, job_id, "
    "  manual), "
    "fj AS (SELECT f.*, s.queue_id, s.priority, coalesce(s.max_attempts, q.max_attempts) AS "
    "  max_attempts, s.payload, q.name AS queue, greatest(now(), f.fire_at + make_interval(secs "
    "  => CASE WHEN f.manual THEN 0 ELSE random() * s.jitter_seconds END)) AS due "
    "  FROM f JOIN rowlock.schedules s ON s.id = f.schedule_id "
    "  JOIN rowlock.queues q ON q.id = s.queue_id), "
    "jobs AS (INSERT INTO rowlock.jobs (id, queue_id, state, priority, run_at, claimable_at, "
    "  max_attempts) SELECT job_id, queue_id, 'pending', priority, due, due, max_attempts "
    "  FROM fj), "
    "bodies AS (INSERT INTO rowlock.job_bodies (job_id, payload) SELECT job_id, payload FROM fj), "
    "adv AS (UPDATE rowlock.schedules s SET next_fire_at = to_timestamp(a.next), "
    "  last_fire_at = coalesce(to_timestamp(a.last), s.last_fire_at), fired = s.fired + a.fired, "
    "  skipped = s.skipped + a.skipped, paused = s.paused OR a.pause "
    "  FROM unnest($3::int8[], $4::float8[], $5::float8[], $6::int8[], $7::int8[], $8::bool[]) "
    "  AS a(sid, next, last, fired, skipped, pause) WHERE s.id = a.sid), "
    "up AS (UPDATE rowlock.upkeep u SET due_at = least(u.due_at, now() + interval '60 s') "
    "  WHERE u.family = '" FAMILY "' AND u.resource_id IN (SELECT schedule_id FROM f)) "
    "SELECT schedule_id, extract(epoch FROM fire_at)::float8, job_id, queue, "
    DB_TS("fire_at") ", extract(epoch FROM now())::float8, manual FROM fj",
    8};
/* clang-format on */

/* Upkeep: the claim of schedules whose history is due for a trim, the trim (the fires older
 * than the newest DB_SCHEDULE_HISTORY of $1) and when it is next due: not until it fires again
 * (the firing statement makes it due). */
static const struct db_stmt st_upkeep_due = {"schedules_upkeep_due",
                                             DB_UPKEEP_CLAIM_SQL(FAMILY, "schedules", "r.id"), 2};
static const struct db_stmt st_trim = {
    "schedule_trim",
    "WITH gone AS (DELETE FROM rowlock.schedule_fires WHERE schedule_id = $1 AND fire_at < "
    "  (SELECT fire_at FROM rowlock.schedule_fires WHERE schedule_id = $1 ORDER BY fire_at DESC "
    "  OFFSET (" DB_UPKEEP_SQL(DB_SCHEDULE_HISTORY) " - 1) LIMIT 1)) " DB_UPKEEP_SET_NEXT_SQL(
        FAMILY, "$1::bigint", "'infinity'::timestamptz"),
    1};

const char *db_misfire_name(enum db_misfire m)
{
    return m == DB_MISFIRE_CATCH_UP ? "catch_up" : "skip";
}

int db_misfire_parse(const char *name, enum db_misfire *out)
{
    if (strcmp(name, "skip") == 0)
        *out = DB_MISFIRE_SKIP;
    else if (strcmp(name, "catch_up") == 0)
        *out = DB_MISFIRE_CATCH_UP;
    else
        return -1;
    return 0;
}

void db_time_text(int64_t t, char *buf, size_t size)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) == NULL || strftime(buf, size, "%Y-%m-%dT%H:%M:%S.000000Z", &tm) == 0)
        db_copy(buf, size, "");
}

/* ---- the plan of a schedule's due ticks ---- */

/* Keeps the newest catch_up_max misfires in a ring (fires[0..cap)), counting the ones it
 * pushes out as skipped. */
struct misfire_ring {
    int64_t *slots;
    int cap, n, head;
};

static void ring_push(struct misfire_ring *r, int64_t t, int64_t *skipped)
{
    if (r->cap == 0) {
        (*skipped)++;
        return;
    }
    if (r->n == r->cap) {
        (*skipped)++; /* the oldest gives way */
        r->slots[r->head] = t;
        r->head = (r->head + 1) % r->cap;
        return;
    }
    r->slots[(r->head + r->n++) % r->cap] = t;
}

void db_schedule_plan(const struct db_cron *c, const struct db_tz *z, int64_t due, double now,
                      enum db_misfire misfire, int catch_up_max, int grace_s,
                      struct db_schedule_plan *out)
{
    int64_t ring_slots[DB_SCHEDULE_CATCH_UP_MAX];
    struct misfire_ring ring = {ring_slots, 0, 0, 0};
    if (misfire == DB_MISFIRE_CATCH_UP)
        ring.cap = catch_up_max < 1                          ? 1
                   : catch_up_max > DB_SCHEDULE_CATCH_UP_MAX ? DB_SCHEDULE_CATCH_UP_MAX
                                                             : catch_up_max;
    out->nfires = 0;
    out->misfires = out->skipped = 0;
    int64_t t = due, ontime[DB_SCHEDULE_FIRES_MAX];
    int nontime = 0;
    long walked = 0;
    /* the ticks up to now, oldest first: misfires, then those within the grace */
    while (t >= 0 && (double)t <= now && walked < DB_SCHEDULE_WALK_MAX) {
        if (now - (double)t > (double)grace_s) {
            out->misfires++;
            ring_push(&ring, t, &out->skipped);
        } else if (ring.n + nontime < DB_SCHEDULE_FIRES_MAX) {
            ontime[nontime++] = t;
        } else {
            break; /* t fires in the next pass */
        }
        walked++;
        int64_t next;
        t = db_cron_next(c, z, t, &next) ? next : -1;
    }
    if (walked == DB_SCHEDULE_WALK_MAX && t >= 0 && now - (double)t > (double)grace_s) {
        /* still behind: the newest misfires are yet to come, in the next pass */
        out->skipped += ring.n;
        ring.n = 0;
    }
    for (int i = 0; i < ring.n; i++)
        out->fires[out->nfires++] = ring.slots[(ring.head + i) % ring.cap];
    for (int i = 0; i < nontime; i++)
        out->fires[out->nfires++] = ontime[i];
    out->next = t;
}

/* ---- reads ---- */

void db_schedule_clear(struct db_schedule *s)
{
    free(s->payload);
    memset(s, 0, sizeof(*s));
}

/* Row i of r from column at (SCHEDULE_COLUMNS) into *s (cleared first). 0, or -1 when out of
 * memory. */
static int schedule_from_row(const PGresult *r, int i, int at, struct db_schedule *s)
{
    memset(s, 0, sizeof(*s));
    s->id = strtoll(PQgetvalue(r, i, at), NULL, 10);
    db_copy(s->name, sizeof(s->name), PQgetvalue(r, i, at + 1));
    db_copy(s->cron, sizeof(s->cron), PQgetvalue(r, i, at + 2));
    db_copy(s->time_zone, sizeof(s->time_zone), PQgetvalue(r, i, at + 3));
    db_copy(s->queue, sizeof(s->queue), PQgetvalue(r, i, at + 4));
    s->payload = strdup(PQgetvalue(r, i, at + 5));
    s->priority = atoi(PQgetvalue(r, i, at + 6));
    s->max_attempts = atoi(PQgetvalue(r, i, at + 7));
    if (db_misfire_parse(PQgetvalue(r, i, at + 8), &s->misfire) != 0)
        s->misfire = DB_MISFIRE_SKIP;
    s->catch_up_max = atoi(PQgetvalue(r, i, at + 9));
    s->misfire_grace_seconds = atoi(PQgetvalue(r, i, at + 10));
    s->jitter_seconds = atoi(PQgetvalue(r, i, at + 11));
    s->paused = PQgetvalue(r, i, at + 12)[0] == 't';
    s->next_fire_at = strtoll(PQgetvalue(r, i, at + 13), NULL, 10);
    s->last_fire_at = strtoll(PQgetvalue(r, i, at + 14), NULL, 10);
    s->fired = strtoll(PQgetvalue(r, i, at + 15), NULL, 10);
    s->skipped = strtoll(PQgetvalue(r, i, at + 16), NULL, 10);
    db_copy(s->created_at, sizeof(s->created_at), PQgetvalue(r, i, at + 17));
    db_copy(s->updated_at, sizeof(s->updated_at), PQgetvalue(r, i, at + 18));
    return s->payload == NULL ? -1 : 0;
}

static enum db_status out_of_memory(struct db_error *err)
{
    db_error_set(err, "", "out of memory");
    return DB_ERR_HARD;
}

enum db_status db_schedules_get(struct db_pool *pool, const char *name, struct db_schedule *out,
                                enum db_schedule_verdict *verdict, struct db_error *err)
{
    const char *params[] = {name};
    PGresult *r = NULL;
    *verdict = DB_S_NOT_FOUND;
    memset(out, 0, sizeof(*out));
    enum db_status st = db_tx_query(pool, &st_get, params, &r, err);
    if (st != DB_OK)
        return st;
    int n = PQntuples(r);
    if (n > 0 && schedule_from_row(r, 0, 0, out) != 0)
        st = out_of_memory(err);
    for (int i = 0; st == DB_OK && i < n && i < DB_SCHEDULE_HISTORY; i++) {
        if (PQgetisnull(r, i, SCHEDULE_NCOLUMNS + 2))
            break;
        struct db_schedule_fire *f = &out->fires[out->nfires++];
        db_copy(f->fire_at, sizeof(f->fire_at), PQgetvalue(r, i, SCHEDULE_NCOLUMNS));
        db_copy(f->enqueued_at, sizeof(f->enqueued_at), PQgetvalue(r, i, SCHEDULE_NCOLUMNS + 1));
        f->job_id = strtoll(PQgetvalue(r, i, SCHEDULE_NCOLUMNS + 2), NULL, 10);
        f->manual = PQgetvalue(r, i, SCHEDULE_NCOLUMNS + 3)[0] == 't';
    }
    PQclear(r);
    if (st == DB_OK && n > 0)
        *verdict = DB_S_OK;
    return st;
}

enum db_status db_schedules_list(struct db_pool *pool, const char *after, int limit,
                                 db_schedule_each each, void *ctx, struct db_error *err)
{
    char lim[DB_INT_TEXT];
    db_i64(lim, sizeof(lim), limit);
    const char *params[] = {after, lim};
    PGresult *r = NULL;
    enum db_status st = db_tx_query(pool, &st_list, params, &r, err);
    for (int i = 0; st == DB_OK && i < PQntuples(r); i++) {
        struct db_schedule s;
        if (schedule_from_row(r, i, 0, &s) != 0)
            st = out_of_memory(err);
        else
            each(&s, ctx);
        db_schedule_clear(&s);
    }
    PQclear(r);
    return st;
}

enum db_status db_schedules_delete(struct db_pool *pool, const char *name,
                                   enum db_schedule_verdict *verdict, struct db_error *err)
{
    const char *params[] = {name};
    PGresult *r = NULL;
    enum db_status st = db_tx_query(pool, &st_delete, params, &r, err);
    *verdict = st == DB_OK && PQntuples(r) > 0 ? DB_S_OK : DB_S_NOT_FOUND;
    PQclear(r);
    return st;
}

/* ---- put ---- */

struct put {
    const char *name;
    const struct db_schedule_config *cfg;
    const struct db_cron *cron;
    const struct db_tz *tz;
    struct db_schedule *out;
    enum db_schedule_verdict verdict;
};

/* The next tick of a put: none while paused; the one it had when the expression, the zone and
 * the running state stay; else the first after now. */
static double put_next(const struct put *a, const PGresult *r)
{
    const struct db_schedule_config *cfg = a->cfg;
    if (cfg->paused)
        return -1;
    int64_t kept = strtoll(PQgetvalue(r, 0, 5), NULL, 10);
    if (!PQgetisnull(r, 0, 2) && strcmp(PQgetvalue(r, 0, 2), cfg->cron) == 0 &&
        strcmp(PQgetvalue(r, 0, 3), cfg->time_zone) == 0 && PQgetvalue(r, 0, 4)[0] == 'f' &&
        kept >= 0)
        return (double)kept;
    int64_t next;
    double now = strtod(PQgetvalue(r, 0, 1), NULL);
    return db_cron_next(a->cron, a->tz, (int64_t)now /* now > 0: its floor */, &next) ? (double)next
                                                                                      : -1;
}

static enum db_status put_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct put *a = arg;
    const struct db_schedule_config *cfg = a->cfg;
    a->verdict = DB_S_QUEUE_NOT_FOUND;
    const char *read_params[] = {a->name, cfg->queue};
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_put_read, read_params, &r, err);
    if (st != DB_OK)
        return st;
    if (PQgetisnull(r, 0, 0)) {
        PQclear(r);
        return DB_ABORTED;
    }
    char qid[DB_INT_TEXT], prio[DB_INT_TEXT], attempts[DB_INT_TEXT], cum[DB_INT_TEXT],
        grace[DB_INT_TEXT], jitter[DB_INT_TEXT], next[DB_INT_TEXT];
    db_copy(qid, sizeof(qid), PQgetvalue(r, 0, 0));
    double n = put_next(a, r);
    PQclear(r);
    db_i64(prio, sizeof(prio), cfg->priority);
    db_i64(attempts, sizeof(attempts), cfg->max_attempts);
    db_i64(cum, sizeof(cum), cfg->catch_up_max);
    db_i64(grace, sizeof(grace), cfg->misfire_grace_seconds);
    db_i64(jitter, sizeof(jitter), cfg->jitter_seconds);
    db_i64(next, sizeof(next), (int64_t)n);
    const char *params[] = {a->name,
                            cfg->cron,
                            cfg->time_zone,
                            qid,
                            cfg->payload,
                            prio,
                            attempts,
                            db_misfire_name(cfg->misfire),
                            cum,
                            grace,
                            jitter,
                            cfg->paused ? "true" : "false",
                            n < 0 ? NULL : next};
    db_tx_commit_with_next(c);
    st = db_query(c, &st_put_write, params, &r, err);
    if (st == DB_ERR_HARD && strcmp(err->sqlstate, "23503") == 0)
        return DB_ABORTED; /* the queue was deleted meanwhile */
    if (st != DB_OK)
        return st;
    if (schedule_from_row(r, 0, 1, a->out) != 0) {
        PQclear(r);
        return out_of_memory(err); /* committed: the caller answers 500 */
    }
    a->verdict = PQgetvalue(r, 0, 0)[0] == 't' ? DB_S_CREATED : DB_S_OK;
    PQclear(r);
    return DB_OK;
}

enum db_status db_schedules_put(struct db_pool *pool, const char *name,
                                const struct db_schedule_config *cfg, const struct db_cron *c,
                                const struct db_tz *z, struct db_schedule *out,
                                enum db_schedule_verdict *verdict, struct db_error *err)
{
    struct put a = {.name = name, .cfg = cfg, .cron = c, .tz = z, .out = out};
    memset(out, 0, sizeof(*out));
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, put_tx, &a, err);
    *verdict = a.verdict;
    return st == DB_ABORTED ? DB_OK : st;
}

/* ---- firing ---- */

/* A fire of a pass (st_fire's $1, $2) and a schedule's advance ($3 to $8); -1 is NULL. */
struct fire_item {
    int64_t sid, t;
};
struct advance_item {
    int64_t sid, next, last, fired, skipped;
    int pause;
};

static const char *int_or_null(int64_t v, char *buf, size_t size)
{
    if (v < 0)
        return NULL;
    db_i64(buf, size, v);
    return buf;
}

static const char *fire_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct fire_item *f = (const struct fire_item *)items + i;
    return int_or_null(col == 0 ? f->sid : f->t, buf, size);
}

static const char *advance_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct advance_item *a = (const struct advance_item *)items + i;
    const int64_t v[] = {a->sid, a->next, a->last, a->fired, a->skipped};
    if (col == 5)
        return a->pause ? "true" : "false";
    return int_or_null(v[col], buf, size);
}

struct fire_pass {
    struct fire_item *fires;
    struct advance_item *advances;
    size_t nfires, nadvances;
    struct db_schedules_fired *out;
};

/* Row i of the due schedules (st_due): its fires and its advance into the pass. */
static void plan_row(struct fire_pass *p, const PGresult *r, int i, struct db_schedule_plan *plan)
{
    char why[DB_CRON_ERROR_SIZE > DB_TZ_ERROR_SIZE ? DB_CRON_ERROR_SIZE : DB_TZ_ERROR_SIZE];
    struct db_cron c;
    const struct db_tz *z = NULL;
    int64_t sid = strtoll(PQgetvalue(r, i, 0), NULL, 10);
    struct advance_item *a = &p->advances[p->nadvances++];
    if (db_cron_parse(PQgetvalue(r, i, 1), &c, why, sizeof(why)) != 0 ||
        (z = db_tz_get(PQgetvalue(r, i, 2), why, sizeof(why))) == NULL) {
        /* paused: it cannot say when it fires */
        *a = (struct advance_item){.sid = sid, .next = -1, .last = -1, .pause = 1};
        return;
    }
    enum db_misfire m;
    if (db_misfire_parse(PQgetvalue(r, i, 4), &m) != 0)
        m = DB_MISFIRE_SKIP;
    db_schedule_plan(&c, z, strtoll(PQgetvalue(r, i, 3), NULL, 10),
                     strtod(PQgetvalue(r, i, 8), NULL), m, atoi(PQgetvalue(r, i, 5)),
                     atoi(PQgetvalue(r, i, 6)), plan);
    for (int k = 0; k < plan->nfires; k++)
        p->fires[p->nfires++] = (struct fire_item){sid, plan->fires[k]};
    *a = (struct advance_item){.sid = sid,
                               .next = plan->next,
                               .last = plan->nfires > 0 ? plan->fires[plan->nfires - 1] : -1,
                               .fired = plan->nfires,
                               .skipped = plan->skipped};
    p->out->misfires += plan->misfires;
    p->out->skipped += plan->skipped;
}

/* What the fires went into, from st_fire's rows, into out. */
static void fired_from_rows(struct db_schedules_fired *out, const PGresult *r)
{
    out->fires = PQntuples(r);
    for (int i = 0; i < PQntuples(r); i++) {
        const char *queue = PQgetvalue(r, i, 3);
        int seen = 0;
        for (int k = 0; k < out->nqueues && !seen; k++)
            seen = strcmp(out->queues[k], queue) == 0;
        if (!seen && out->nqueues < DB_SCHEDULE_PASS_MAX)
            db_copy(out->queues[out->nqueues++], DB_NAME_SIZE, queue);
        if (out->nlags < DB_SCHEDULE_PASS_MAX && PQgetvalue(r, i, 6)[0] == 'f')
            out->lags[out->nlags++] =
                strtod(PQgetvalue(r, i, 5), NULL) - strtod(PQgetvalue(r, i, 1), NULL);
    }
}

/* Sends the pass's fires and advances (st_fire) as the transaction's last statement. */
static enum db_status fire_write(struct db_conn *c, struct fire_pass *p, struct db_error *err)
{
    struct db_arrays fires = {0, 0, NULL}, advances = {0, 0, NULL};
    enum db_status st = DB_OK;
    if (db_arrays_build(&fires, p->fires, p->nfires, 2, fire_column) != 0 ||
        db_arrays_build(&advances, p->advances, p->nadvances, 6, advance_column) != 0)
        st = out_of_memory(err);
    PGresult *r = NULL;
    if (st == DB_OK) {
        const char *params[] = {fires.arr[0],    fires.arr[1],    advances.arr[0], advances.arr[1],
                                advances.arr[2], advances.arr[3], advances.arr[4], advances.arr[5]};
        db_tx_commit_with_next(c);
        st = db_query(c, &st_fire, params, &r, err);
    }
    db_arrays_free(&fires);
    db_arrays_free(&advances);
    if (st == DB_OK)
        fired_from_rows(p->out, r);
    PQclear(r);
    return st;
}

static enum db_status fire_due_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct fire_pass *p = arg;
    memset(p->out, 0, sizeof(*p->out));
    p->nfires = p->nadvances = 0;
    char lim[DB_INT_TEXT];
    db_i64(lim, sizeof(lim), DB_SCHEDULE_PASS_MAX);
    const char *params[] = {lim};
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_due, params, &r, err);
    if (st != DB_OK)
        return st;
    int n = PQntuples(r);
    p->out->full = n == DB_SCHEDULE_PASS_MAX;
    if (n == 0) {
        PQclear(r);
        return DB_ABORTED;
    }
    struct db_schedule_plan *plan = malloc(sizeof(*plan));
    if (plan == NULL) {
        PQclear(r);
        return out_of_memory(err);
    }
    /* a transaction makes at most about DB_SCHEDULE_TX_FIRES jobs: the schedules after that
     * are left as they are (due: the next transaction takes them) */
    for (int i = 0; i < n; i++) {
        if (p->nfires >= DB_SCHEDULE_TX_FIRES) {
            p->out->full = 1;
            break;
        }
        plan_row(p, r, i, plan);
    }
    free(plan);
    PQclear(r);
    return fire_write(c, p, err);
}

enum db_status db_schedules_fire_due(struct db_pool *pool, struct db_schedules_fired *out,
                                     struct db_error *err)
{
    /* room for every fire the pass may plan: DB_SCHEDULE_TX_FIRES, then one schedule's more */
    struct fire_pass p = {
        .fires = malloc((DB_SCHEDULE_TX_FIRES + DB_SCHEDULE_FIRES_MAX) * sizeof(*p.fires)),
        .advances = malloc(DB_SCHEDULE_PASS_MAX * sizeof(*p.advances)),
        .out = out};
    enum db_status st = DB_OK;
    if (p.fires == NULL || p.advances == NULL)
        st = out_of_memory(err);
    else
        st = db_tx_run(pool, DB_READ_COMMITTED, fire_due_tx, &p, err);
    free(p.fires);
    free(p.advances);
    return st == DB_ABORTED ? DB_OK : st;
}

/* ---- fire now ---- */

struct fire_now {
    const char *name;
    struct db_schedule_fire *out;
    char *queue;
    enum db_schedule_verdict verdict;
};

static const struct db_stmt st_fire_now_id = {
    "schedule_fire_now_id", "SELECT id FROM rowlock.schedules WHERE name = $1", 1};

static enum db_status fire_now_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct fire_now *a = arg;
    a->verdict = DB_S_NOT_FOUND;
    const char *params[] = {a->name};
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_fire_now_id, params, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return DB_ABORTED;
    }
    char sids[DB_INT_TEXT + 4];
    snprintf(sids, sizeof(sids), "{%s}", PQgetvalue(r, 0, 0));
    PQclear(r);
    const char *fire[] = {sids, "{NULL}", "{}", "{}", "{}", "{}", "{}", "{}"};
    db_tx_commit_with_next(c);
    st = db_query(c, &st_fire, fire, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 0) { /* a fire of this schedule at this very moment: another moment */
        PQclear(r);
        return DB_ERR_REDO;
    }
    a->out->job_id = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
    a->out->manual = 1;
    db_copy(a->out->fire_at, sizeof(a->out->fire_at), PQgetvalue(r, 0, 4));
    db_copy(a->out->enqueued_at, sizeof(a->out->enqueued_at), PQgetvalue(r, 0, 4));
    db_copy(a->queue, DB_NAME_SIZE, PQgetvalue(r, 0, 3));
    PQclear(r);
    a->verdict = DB_S_OK;
    return DB_OK;
}

enum db_status db_schedules_fire_now(struct db_pool *pool, const char *name,
                                     struct db_schedule_fire *out, char *queue,
                                     enum db_schedule_verdict *verdict, struct db_error *err)
{
    struct fire_now a = {.name = name, .out = out, .queue = queue};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, fire_now_tx, &a, err);
    *verdict = a.verdict;
    return st == DB_ABORTED ? DB_OK : st;
}

/* ---- upkeep ---- */

static enum db_status trim_visit(struct db_pool *pool, const PGresult *claimed, int row, void *ctx)
{
    (void)ctx;
    const char *params[] = {PQgetvalue(claimed, row, 0)};
    PGresult *r = NULL;
    struct db_error err;
    enum db_status st = db_tx_query(pool, &st_trim, params, &r, &err);
    PQclear(r);
    return st;
}

const struct db_upkeep db_schedules_upkeep = {
    .family = FAMILY, .claim = &st_upkeep_due, .visit = trim_visit};
