/* A primary that fails: a primary and its synchronous standby on this machine
 * ($ROWLOCK_TEST_PGPAIR, made by deploy/local.sh pgpair; the test fails without it), and one
 * rowlock pointed at both with a multi-host connection string (target_session_attrs=read-write)
 * and a 2 s deadline. Client threads write what can be repeated safely (jobs with dedupe keys,
 * messages of a named producer with sequences, ledger checkpoints), each write sent again after
 * every non-2xx answer until one is 2xx. In the middle the standby stalls past the deadline
 * (its WAL sender stopped) and catches up, so that writes answered outcome_unknown did commit (a
 * racer thread sends one enqueue twice across it); then it stalls again and the primary is
 * killed (SIGKILL, its postmaster and every backend) with commits waiting for it, and the
 * standby is promoted. Checked on the promoted server: every
 * acknowledged write is there, exactly once (one job per dedupe key with the id the answer gave,
 * each producer's sequences once and in order at the offsets answered, every checkpoint, one set
 * of events per transaction); a write answered 503 outcome_unknown landed once after its retry;
 * the only non-2xx answers were 503 with Retry-After; the same rowlock process answers 2xx again
 * (the time from the promotion to the first 2xx is printed); and a lease claimed before the kill
 * completes after it with its fence while a stale fence is still refused (409).
 *
 * Before that, the read-only defences: a rowlock pointed at the standby alone (with
 * target_session_attrs=any, so that only the pool's own check stands between it and the
 * standby) answers reads and writes 503, never data a standby may not have yet; a rowlock given
 * the standby first and no target_session_attrs writes to the primary (the pool's default); a
 * primary set read-only (default_transaction_read_only) answers writes 503, never 2xx or 500,
 * and writes succeed again, without a restart, once it is reset. Runs alone (SERIAL): it starts
 * two PostgreSQL servers of its own and stops them by pid, also when it fails. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define DEADLINE_MS    2000
#define CLIENTS        4
#define MAX_OPS        3000
#define OPS_AFTER      10   /* acknowledged writes each client makes after the promotion */
#define OP_GIVE_UP_S   45.0 /* one write unacknowledged this long fails the test */
#define LOAD_BOUND_S   60.0 /* the whole load phase */
#define RETRY_DELAY_US 100000

static const char dbname[] = "rowlock_failover";
static char pgpair[1024], psock[256], ssock[256];
static struct th_service svc, side;
static int svc_up, side_up, pair_up;

/* Runs $ROWLOCK_TEST_PGPAIR action; 0 when it succeeded. */
static int pair_run(const char *action)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "%s %s >&2", pgpair, action);
    return system(cmd) == 0 ? 0 : -1;
}

/* Reads the two socket directories from the pair's status ("ROLE STATE KIND SOCKET"). */
static int read_sockets(void)
{
    char cmd[1100], line[1024], role[32], state[32], kind[32], sock[256];
    snprintf(cmd, sizeof(cmd), "%s status", pgpair);
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%31s %31s %31s %255s", role, state, kind, sock) != 4)
            continue;
        if (strcmp(role, "primary") == 0)
            snprintf(psock, sizeof(psock), "%s", sock);
        else if (strcmp(role, "standby") == 0)
            snprintf(ssock, sizeof(ssock), "%s", sock);
    }
    return pclose(f) == 0 && psock[0] != '\0' && ssock[0] != '\0' ? 0 : -1;
}

static void conninfo(char *out, size_t size, const char *hosts, const char *db, const char *extra)
{
    snprintf(out, size, "host=%s dbname=%s user=rowlock %s", hosts, db, extra);
}

static PGconn *connect_to(const char *sock, const char *db)
{
    char ci[1200];
    conninfo(ci, sizeof(ci), sock, db, "");
    return th_pg(ci);
}

static int setup(void **state)
{
    (void)state;
    const char *p = getenv("ROWLOCK_TEST_PGPAIR");
    if (p == NULL || p[0] == '\0') {
        fprintf(stderr, "ROWLOCK_TEST_PGPAIR is not set: run the suite with deploy/local.sh test, "
                        "or point it at a script running deploy/local.sh pgpair DIR\n");
        return -1;
    }
    snprintf(pgpair, sizeof(pgpair), "%s", p);
    pair_up = 1;
    if (pair_run("init") != 0 || read_sockets() != 0) {
        fprintf(stderr, "%s init failed\n", pgpair);
        pair_run("stop"); /* cmocka runs no group teardown after a failed setup */
        return -1;
    }
    fprintf(stderr, "pair: primary %s, standby %s\n", psock, ssock);
    PGconn *c = connect_to(psock, "postgres");
    PQclear(th_sql(c, "CREATE DATABASE rowlock_failover"));
    PQfinish(c);
    return 0;
}

static atomic_int load_abort;

static int teardown(void **state)
{
    (void)state;
    atomic_store(&load_abort, 1);
    if (side_up)
        th_service_stop(&side);
    if (svc_up)
        th_service_stop(&svc);
    side_up = svc_up = 0;
    if (pair_up && pair_run("stop") != 0)
        fprintf(stderr, "%s stop failed\n", pgpair);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Requests and their answers */

static long request(int port, const char *method, const char *path, const char *body, char *code,
                    size_t codesize, json_t **out)
{
    struct th_response r;
    const char *hdr[] = {"Content-Type: application/json", NULL};
    if (th_http(port, method, path, hdr, body, body ? strlen(body) : 0, &r) != 0) {
        snprintf(code, codesize, "transport_error");
        return -1;
    }
    snprintf(code, codesize, "%s", th_problem_code(&r));
    if (out != NULL) {
        *out = r.json;
        r.json = NULL;
    }
    long s = r.status;
    th_response_free(&r);
    return s;
}

/* Sends until the answer is not a 503 (a few seconds at most); returns that answer's status. */
static long until_not_503(int port, const char *method, const char *path, const char *body,
                          char *code, size_t codesize, json_t **out)
{
    long s = 503;
    for (int i = 0; i < 200 && s == 503; i++) {
        if (out != NULL && *out != NULL) {
            json_decref(*out);
            *out = NULL;
        }
        s = request(port, method, path, body, code, codesize, out);
        if (s == 503)
            usleep(RETRY_DELAY_US);
    }
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * The read-only defences */

static void start_side(const char *hosts, const char *extra, int notify)
{
    char ci[1200];
    conninfo(ci, sizeof(ci), hosts, dbname, extra);
    const char *env[] = {"ROWLOCK_MIGRATE=off", "ROWLOCK_POOL_SIZE=2",
                         "ROWLOCK_POLL_INTERVAL_MS=5000",
                         notify ? "ROWLOCK_NOTIFY=true" : "ROWLOCK_NOTIFY=false", NULL};
    assert_int_equal(th_service_start(&side, ci, env), 0);
    side_up = 1;
}

static void stop_side(void)
{
    side_up = 0;
    assert_int_equal(th_service_stop(&side), 0);
}

/* Waits until the standby has replayed job id (it is there once the primary acknowledged, but
 * replay may trail the flush the primary waited for). */
static void await_on_standby(long id)
{
    char ci[1200], sql[128];
    conninfo(ci, sizeof(ci), ssock, dbname, "");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM rowlock.jobs WHERE id = %ld", id);
    int seen = 0;
    for (int i = 0; i < 500 && !seen; i++) {
        /* the database, then its schema, then the row: each fails until it is replayed */
        PGconn *c = PQconnectdb(ci);
        PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
        seen = PQresultStatus(r) == PGRES_TUPLES_OK && atoi(PQgetvalue(r, 0, 0)) == 1;
        PQclear(r);
        PQfinish(c);
        if (!seen)
            usleep(10000);
    }
    assert_true(seen);
}

/* A rowlock on the standby alone: target_session_attrs=any lets libpq connect to it, and the
 * pool must refuse the connection. Reads would otherwise answer from a server that may lack an
 * acknowledged write (the primary waits for the standby's flush, not its replay), and writes
 * would fail in PostgreSQL. */
static void standby_alone_answers_503(long probe_id)
{
    await_on_standby(probe_id);
    start_side(ssock, "target_session_attrs=any", 0);
    char path[96], code[64];
    snprintf(path, sizeof(path), "/queues/fq/jobs/%ld", probe_id);
    long got = request(side.port, "GET", path, NULL, code, sizeof(code), NULL);
    fprintf(stderr, "standby alone: GET job %ld answered %ld %s\n", probe_id, got, code);
    assert_int_equal(got, 503);
    assert_string_equal(code, "database_unavailable");
    got = request(side.port, "POST", "/queues/fq/jobs", "{\"payload\": {}, \"dedupe_key\": \"sb\"}",
                  code, sizeof(code), NULL);
    fprintf(stderr, "standby alone: POST job answered %ld %s\n", got, code);
    assert_int_equal(got, 503);
    assert_string_equal(code, "database_unavailable");
    double refused = th_metric(side.port, "rowlock_db_pool_read_only_total");
    fprintf(stderr, "standby alone: rowlock_db_pool_read_only_total %.0f\n", refused);
    assert_true(refused >= 2);
    stop_side();
}

static double listener_up(const struct th_service *s)
{
    double up = 0;
    for (int i = 0; i < 100 && up != 1; i++) {
        up = th_metric(s->port, "rowlock_notify_listener_up");
        if (up != 1)
            usleep(30000);
    }
    return up;
}

static void wake_claim_body(int i, char *buf, size_t size)
{
    (void)i;
    snprintf(buf, size, "{\"owner\":\"w\",\"wait_seconds\":10}");
}

/* Both hosts, the standby first, no target_session_attrs: the default (read-write) of the pool
 * and of the LISTEN connection makes libpq pass the standby by: writes go to the primary, and
 * cross-process wake-ups work (LISTEN fails on a standby). With a synchronous standby a quiet
 * enqueue does not NOTIFY inside its transaction (whose COMMIT waits for the standby, and would
 * hold the database's notify lock as long): the listener announces it, at once. */
static void standby_first_writes_to_primary(void)
{
    char hosts[1100];
    snprintf(hosts, sizeof(hosts), "%s,%s", ssock, psock);
    start_side(hosts, "", 1);
    double up = listener_up(&side);
    fprintf(stderr, "standby listed first: rowlock_notify_listener_up %.0f\n", up);
    assert_true(up == 1);
    char code[64];
    long got = request(side.port, "POST", "/queues/fq/jobs",
                       "{\"payload\": {}, \"dedupe_key\": \"sf\"}", code, sizeof(code), NULL);
    fprintf(stderr, "standby listed first: POST job answered %ld %s\n", got, code);
    assert_int_equal(got, 201);

    assert_true(listener_up(&svc) == 1);
    json_decref(th_call(svc.port, "PUT", "/queues/fq-wake", "{}", 201));
    double waiting = th_metric(side.port, "rowlock_http_long_polls_waiting");
    double inlined = th_metric(svc.port, "rowlock_notify_inline_total");
    double sent = th_metric(svc.port, "rowlock_notify_sent_total");
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/queues/fq-wake/leases", side.port);
    struct th_crowd w;
    th_crowd_start(&w, 1, url, wake_claim_body);
    pthread_t t;
    pthread_create(&t, NULL, th_crowd_run, &w);
    for (int i = 0; i < 500 && th_metric(side.port, "rowlock_http_long_polls_waiting") <= waiting;
         i++)
        usleep(10000);
    usleep(200000); /* past svc's coalescing window: its process is quiet */
    json_decref(th_call(svc.port, "POST", "/queues/fq-wake/jobs", "{\"payload\": {}}", 201));
    double written = th_now();
    pthread_join(t, NULL);
    long status = w.w[0].status;
    double after = w.w[0].done_at - written;
    json_t *answer = json_loadb(w.w[0].body.data ? w.w[0].body.data : "", w.w[0].body.len, 0, NULL);
    th_crowd_free(&w);
    fprintf(stderr,
            "synchronous standby: a claim on the side process answered %ld %.3f s after a quiet "
            "enqueue; inline NOTIFYs %.0f -> %.0f, listener batches %.0f -> %.0f\n",
            status, after, inlined, th_metric(svc.port, "rowlock_notify_inline_total"), sent,
            th_metric(svc.port, "rowlock_notify_sent_total"));
    assert_int_equal(status, 200);
    assert_int_equal(json_array_size(json_object_get(answer, "leases")), 1);
    json_decref(answer);
    assert_true(after < 2.5); /* the side process re-checks every 5 s */
    assert_true(th_metric(svc.port, "rowlock_notify_inline_total") == inlined);
    assert_true(th_metric(svc.port, "rowlock_notify_sent_total") >= sent + 1);
    stop_side();
}

static void primary_read_only(int on)
{
    PGconn *c = connect_to(psock, "postgres");
    PQclear(th_sql(c, "SET default_transaction_read_only = off"));
    PQclear(th_sql(c, on ? "ALTER SYSTEM SET default_transaction_read_only = on"
                         : "ALTER SYSTEM RESET default_transaction_read_only"));
    PQclear(th_sql(c, "SELECT pg_reload_conf()"));
    PQfinish(c);
    for (int i = 0; i < 300; i++) { /* the reload is asynchronous: until a new session sees it */
        PGconn *s = connect_to(psock, "postgres");
        PGresult *r = th_sql(s, "SHOW default_transaction_read_only");
        int seen = strcmp(PQgetvalue(r, 0, 0), on ? "on" : "off") == 0;
        PQclear(r);
        PQfinish(s);
        if (seen)
            return;
        usleep(10000);
    }
    fail_msg("default_transaction_read_only did not become %s", on ? "on" : "off");
}

#define RO_WRITES 12

/* The primary set read-only under the running service: every write answers 503 (never 2xx,
 * never 500); reset, the same writes succeed, once each, without a restart. */
static void read_only_primary_answers_503(void)
{
    primary_read_only(1);
    char body[128], code[64];
    int refused = 0;
    for (int i = 0; i < RO_WRITES; i++) {
        snprintf(body, sizeof(body), "{\"payload\": {\"ro\": %d}, \"dedupe_key\": \"ro-%d\"}", i,
                 i);
        long got = request(svc.port, "POST", "/queues/fq/jobs", body, code, sizeof(code), NULL);
        if (got != 503 || strcmp(code, "database_unavailable") != 0)
            fprintf(stderr, "read-only primary: write %d answered %ld %s\n", i, got, code);
        refused += got == 503 && strcmp(code, "database_unavailable") == 0;
    }
    long ready = request(svc.port, "GET", "/readyz", NULL, code, sizeof(code), NULL);
    fprintf(stderr, "read-only primary: %d of %d writes 503 database_unavailable, readyz %ld\n",
            refused, RO_WRITES, ready);
    primary_read_only(0);
    assert_int_equal(refused, RO_WRITES);
    assert_int_equal(ready, 503);
    double t0 = th_now();
    for (int i = 0; i < RO_WRITES; i++) {
        snprintf(body, sizeof(body), "{\"payload\": {\"ro\": %d}, \"dedupe_key\": \"ro-%d\"}", i,
                 i);
        long got =
            until_not_503(svc.port, "POST", "/queues/fq/jobs", body, code, sizeof(code), NULL);
        assert_int_equal(got, 201); /* 201, not 200 duplicate: the refused write wrote nothing */
    }
    fprintf(stderr, "read-only primary reset: writes 201 again after %.2f s\n", th_now() - t0);
}

/* ---------------------------------------------------------------------------------------------
 * The load: client threads of writes repeated until acknowledged */

enum op_kind { OP_JOB, OP_MESSAGE, OP_CHECKPOINT };

struct op {
    enum op_kind kind;
    int n;              /* the job's number, the message's sequence, the checkpoint's sequence */
    int attempts;       /* answers received */
    int unknown;        /* of them 503 outcome_unknown */
    int unavailable;    /* 503 with another code */
    int unexpected;     /* anything else that is not 2xx (a 500, a 4xx, no answer) */
    int no_retry_after; /* 503s without Retry-After */
    int acked;
    int repeat;  /* the 2xx said duplicate or replay: an earlier attempt had committed */
    long result; /* the job id or message offset the 2xx named */
    double acked_at;
};

struct client {
    int id;
    pthread_t thread;
    struct op ops[MAX_OPS];
    atomic_int nops;        /* ops begun */
    atomic_int acked_after; /* ops acknowledged after the promotion */
    int gave_up;
    char unexpected[256]; /* the first unexpected answer */
};

/* clients[CLIENTS] is the racer: one job, enqueued during the stall past the deadline */
static struct client clients[CLIENTS + 1];
static atomic_int load_stop;
static _Atomic double promoted_at; /* 0 until the standby is promoted */

static void op_body(const struct client *cl, const struct op *o, char *out, size_t size)
{
    int t = cl->id, n = o->n;
    if (o->kind == OP_JOB)
        snprintf(out, size, "{\"payload\": {\"t\": %d, \"n\": %d}, \"dedupe_key\": \"c%d-%d\"}", t,
                 n, t, n);
    else if (o->kind == OP_MESSAGE)
        snprintf(out, size,
                 "{\"producer\": \"p%d\", \"key\": \"k%d\", \"value\": {\"n\": %d}, "
                 "\"sequence\": %d}",
                 t, t, n, n);
    else
        snprintf(out, size,
                 "{\"sequence\": %d, \"transactions\": [{\"digest\": \"c%d-%d\", \"writes\": "
                 "[{\"object_id\": \"o%d\", \"version\": %d, \"type\": \"Counter\", \"data\": "
                 "{\"n\": %d}}], \"events\": [{\"type\": \"Tick\", \"data\": {\"n\": %d}}]}]}",
                 n, t, n, t, n, n, n);
}

static void op_path(const struct client *cl, const struct op *o, char *out, size_t size)
{
    if (o->kind == OP_JOB)
        snprintf(out, size, "/queues/fq/jobs");
    else if (o->kind == OP_MESSAGE)
        snprintf(out, size, "/topics/ft/messages");
    else
        snprintf(out, size, "/ledgers/fl%d/checkpoints", cl->id);
}

/* Notes the 2xx answer r of o. */
static void op_acked(struct op *o, const struct th_response *r)
{
    o->acked = 1;
    o->acked_at = th_now();
    json_t *j = r->json;
    if (o->kind == OP_JOB) {
        o->result = (long)json_integer_value(json_object_get(j, "id"));
        o->repeat = json_is_true(json_object_get(j, "duplicate"));
    } else if (o->kind == OP_MESSAGE) {
        o->result = (long)json_integer_value(json_object_get(j, "offset"));
        const char *head = json_string_value(json_object_get(j, "head"));
        o->repeat = head != NULL && strcmp(head, "duplicate") == 0;
    } else {
        o->result = (long)json_integer_value(json_object_get(j, "sequence"));
        o->repeat = json_is_true(json_object_get(j, "replay"));
    }
}

/* Sends o until an answer is 2xx (or the test gives up or is over). */
static void op_run(struct client *cl, struct op *o)
{
    char path[96], body[512], ra[16];
    op_path(cl, o, path, sizeof(path));
    op_body(cl, o, body, sizeof(body));
    const char *hdr[] = {"Content-Type: application/json", NULL};
    double start = th_now();
    while (!o->acked && !atomic_load(&load_abort)) {
        if (th_now() - start > OP_GIVE_UP_S) {
            cl->gave_up = 1;
            return;
        }
        struct th_response r;
        int rc = th_http(svc.port, "POST", path, hdr, body, strlen(body), &r);
        o->attempts++;
        if (rc == 0 && r.status >= 200 && r.status < 300) {
            op_acked(o, &r);
        } else if (rc == 0 && r.status == 503) {
            if (strcmp(th_problem_code(&r), "outcome_unknown") == 0)
                o->unknown++;
            else
                o->unavailable++;
            o->no_retry_after += th_header(&r, "Retry-After", ra, sizeof(ra)) != 0;
        } else {
            o->unexpected++;
            if (cl->unexpected[0] == '\0' &&
                snprintf(cl->unexpected, sizeof(cl->unexpected), "%s %s answered %ld %s", path,
                         body, rc == 0 ? r.status : -1L,
                         rc == 0 ? th_problem_code(&r) : "") >= (int)sizeof(cl->unexpected))
                memcpy(cl->unexpected + sizeof(cl->unexpected) - 4, "...", 4); /* cut */
        }
        if (rc == 0)
            th_response_free(&r);
        if (!o->acked)
            usleep(RETRY_DELAY_US);
    }
}

static void *client_main(void *arg)
{
    struct client *cl = arg;
    int next[3] = {1, 1, 1};
    for (int i = 0; i < MAX_OPS && !atomic_load(&load_stop) && !cl->gave_up; i++) {
        struct op *o = &cl->ops[i];
        o->kind = (enum op_kind)(i % 3);
        o->n = next[o->kind]++;
        atomic_store(&cl->nops, i + 1);
        op_run(cl, o);
        double p = atomic_load(&promoted_at);
        if (o->acked && p > 0 && o->acked_at > p)
            atomic_fetch_add(&cl->acked_after, 1);
    }
    return NULL;
}

/* The racer: one job enqueued while every commit waits for the standby. The deadline cuts it
 * (outcome_unknown; it did commit), and its repeat, sent while the first still waits, waits on
 * the first's dedupe key, to answer 200 duplicate with the job's id once the standby catches up.
 */
static void *racer_main(void *arg)
{
    struct client *cl = arg;
    struct op *o = &cl->ops[0];
    o->kind = OP_JOB;
    o->n = 1;
    atomic_store(&cl->nops, 1);
    op_run(cl, o);
    return NULL;
}

static int begun_total(void)
{
    int n = 0;
    for (int t = 0; t < CLIENTS; t++)
        n += atomic_load(&clients[t].nops);
    return n;
}

static int all_acked_after(int want)
{
    for (int t = 0; t < CLIENTS; t++)
        if (atomic_load(&clients[t].acked_after) < want)
            return 0;
    return 1;
}

/* ---------------------------------------------------------------------------------------------
 * Checks on the promoted server */

static long one_long(PGconn *c, const char *sql)
{
    PGresult *r = th_sql(c, sql);
    long v = PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) ? atol(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return v;
}

/* Every job op: one row for its dedupe key, the id its 2xx answered; no other row. */
static int check_jobs(PGconn *c)
{
    int bad = 0, njobs = 0;
    char sql[256];
    for (int t = 0; t <= CLIENTS; t++) { /* the racer's job too */
        struct client *cl = &clients[t];
        for (int i = 0; i < cl->nops; i++) {
            struct op *o = &cl->ops[i];
            if (o->kind != OP_JOB || !o->acked)
                continue;
            njobs++;
            snprintf(sql, sizeof(sql),
                     "SELECT count(*), min(id) FROM rowlock.jobs WHERE dedupe_key = 'c%d-%d'", t,
                     o->n);
            PGresult *r = th_sql(c, sql);
            long count = atol(PQgetvalue(r, 0, 0)), id = atol(PQgetvalue(r, 0, 1));
            PQclear(r);
            if (count != 1 || id != o->result) {
                fprintf(stderr, "job c%d-%d: %ld rows, id %ld; acknowledged as id %ld\n", t, o->n,
                        count, id, o->result);
                bad++;
            }
        }
    }
    long rows = one_long(c, "SELECT count(*) FROM rowlock.jobs j JOIN rowlock.queues q ON "
                            "q.id = j.queue_id WHERE q.name = 'fq' AND dedupe_key LIKE 'c%'");
    if (rows != njobs) {
        fprintf(stderr, "jobs: %ld rows for %d acknowledged enqueues\n", rows, njobs);
        bad++;
    }
    return bad;
}

/* Each producer's messages: sequences 1..n, each once, in offset order, at the offsets
 * answered. */
static int check_messages(PGconn *c)
{
    long topic = one_long(c, "SELECT id FROM rowlock.topics WHERE name = 'ft'");
    int bad = 0;
    char sql[256];
    for (int t = 0; t < CLIENTS; t++) {
        struct client *cl = &clients[t];
        snprintf(sql, sizeof(sql),
                 "SELECT sequence, \"offset\" FROM rowlock.topic_messages WHERE topic_id = %ld "
                 "AND producer = 'p%d' AND NOT hole ORDER BY \"offset\"",
                 topic, t);
        PGresult *r = th_sql(c, sql);
        int row = 0;
        for (int i = 0; i < cl->nops; i++) {
            struct op *o = &cl->ops[i];
            if (o->kind != OP_MESSAGE || !o->acked)
                continue;
            long seq = row < PQntuples(r) ? atol(PQgetvalue(r, row, 0)) : -1;
            long off = row < PQntuples(r) ? atol(PQgetvalue(r, row, 1)) : -1;
            if (seq != o->n || off != o->result) {
                fprintf(stderr, "producer p%d: row %d is sequence %ld at %ld; expected %d at %ld\n",
                        t, row, seq, off, o->n, o->result);
                bad++;
            }
            row++;
        }
        if (PQntuples(r) != row) {
            fprintf(stderr, "producer p%d: %d messages for %d acknowledged\n", t, PQntuples(r),
                    row);
            bad++;
        }
        PQclear(r);
    }
    return bad;
}

/* Each ledger: checkpoints 1..n, one event per transaction, the object at version n. */
static int check_ledgers(PGconn *c)
{
    int bad = 0;
    char sql[256];
    for (int t = 0; t < CLIENTS; t++) {
        struct client *cl = &clients[t];
        int n = 0;
        for (int i = 0; i < cl->nops; i++)
            if (cl->ops[i].kind == OP_CHECKPOINT && cl->ops[i].acked)
                n = cl->ops[i].n;
        snprintf(sql, sizeof(sql), "SELECT id FROM rowlock.ledgers WHERE name = 'fl%d'", t);
        long id = one_long(c, sql);
        long got[4];
        const char *what[] = {"checkpoints", "watermark", "events", "object version"};
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM rowlock.checkpoints_%ld", id);
        got[0] = one_long(c, sql);
        snprintf(sql, sizeof(sql), "SELECT rowlock.ledger_watermark(%ld)", id);
        got[1] = one_long(c, sql);
        snprintf(sql, sizeof(sql),
                 "SELECT count(DISTINCT digest) * 1000 + count(*) FROM rowlock.events_%ld "
                 "WHERE NOT hole",
                 id);
        got[2] = one_long(c, sql);
        snprintf(sql, sizeof(sql),
                 "SELECT version FROM rowlock.objects_%ld WHERE object_id = 'o%d'", id, t);
        got[3] = one_long(c, sql);
        long want[4] = {n, n, n * 1000L + n, n > 0 ? n : -1};
        for (int k = 0; k < 4; k++) {
            if (got[k] != want[k]) {
                fprintf(stderr, "ledger fl%d: %s %ld, expected %ld\n", t, what[k], got[k], want[k]);
                bad++;
            }
        }
    }
    return bad;
}

/* ---------------------------------------------------------------------------------------------
 * The test */

static void create_resources(void)
{
    json_decref(th_call(svc.port, "PUT", "/queues/fq", "{}", 201));
    json_decref(th_call(svc.port, "PUT", "/queues/fl", "{\"lease_seconds\": 600}", 201));
    json_decref(th_call(svc.port, "PUT", "/topics/ft", "{\"headless_ttl_seconds\": 3600}", 201));
    char path[64];
    for (int t = 0; t < CLIENTS; t++) {
        snprintf(path, sizeof(path), "/topics/ft/producers/p%d", t);
        json_decref(th_call(svc.port, "PUT", path, "{\"schema_version\": 1}", 201));
        snprintf(path, sizeof(path), "/ledgers/fl%d", t);
        json_decref(
            th_call(svc.port, "PUT", path, "{\"tombstone_retention_seconds\": 86400}", 201));
    }
}

/* Claims a job of queue fl for owner w1, hands it back and claims it again: fence 1 is stale,
 * fence 2 current. Returns the job's id. */
static long lease_with_stale_fence(void)
{
    json_t *j = th_call(svc.port, "POST", "/queues/fl/jobs", "{\"payload\": {\"lease\": 1}}", 201);
    long id = (long)json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    const char claim[] = "{\"owner\": \"w1\", \"max_jobs\": 1}";
    char path[96];
    j = th_call(svc.port, "POST", "/queues/fl/leases", claim, 200);
    assert_int_equal(json_integer_value(
                         json_object_get(json_array_get(json_object_get(j, "leases"), 0), "fence")),
                     1);
    json_decref(j);
    snprintf(path, sizeof(path), "/queues/fl/leases/%ld/handback", id);
    json_decref(th_call(svc.port, "POST", path, "{\"owner\": \"w1\", \"fence\": 1}", 200));
    j = th_call(svc.port, "POST", "/queues/fl/leases", claim, 200);
    assert_int_equal(json_integer_value(
                         json_object_get(json_array_get(json_object_get(j, "leases"), 0), "fence")),
                     2);
    json_decref(j);
    return id;
}

/* After the failover: the stale fence is refused, the current one completes the job. */
static void fencing_holds(long id)
{
    char path[96], code[64];
    snprintf(path, sizeof(path), "/queues/fl/leases/%ld/complete", id);
    long stale = until_not_503(svc.port, "POST", path, "{\"owner\": \"w1\", \"fence\": 1}", code,
                               sizeof(code), NULL);
    fprintf(stderr, "fencing after failover: fence 1 answered %ld %s\n", stale, code);
    assert_int_equal(stale, 409);
    assert_string_equal(code, "lease_fence_mismatch");
    json_t *j = NULL;
    long done = until_not_503(svc.port, "POST", path, "{\"owner\": \"w1\", \"fence\": 2}", code,
                              sizeof(code), &j);
    fprintf(stderr, "fencing after failover: fence 2 answered %ld %s\n", done, code);
    assert_int_equal(done, 200);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "succeeded");
    json_decref(j);
    stale = until_not_503(svc.port, "POST", path, "{\"owner\": \"w1\", \"fence\": 1}", code,
                          sizeof(code), NULL);
    assert_int_equal(stale, 409);
}

/* Sends sig (SIGSTOP, SIGCONT) to the primary's WAL sender, by pid. While it is stopped, every
 * COMMIT waits for the standby's acknowledgement, committed on the primary alone. 0, or -1 when
 * there is no WAL sender. */
static int walsender_signal(int sig)
{
    static int pid;
    if (pid == 0) {
        PGconn *c = connect_to(psock, "postgres");
        PGresult *r = th_sql(c, "SELECT pid FROM pg_stat_replication");
        pid = PQntuples(r) == 1 ? atoi(PQgetvalue(r, 0, 0)) : -1;
        PQclear(r);
        PQfinish(c);
    }
    return pid > 0 && kill(pid, sig) == 0 ? 0 : -1;
}

/* Backends of the primary whose COMMIT waits for the standby. */
static int syncrep_waiting(void)
{
    PGconn *c = connect_to(psock, "postgres");
    PGresult *r = th_sql(c, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
    int waiting = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return waiting;
}

struct failover_times {
    double killed_at, promote_began, promoted_at;
    int cut;     /* commits waiting for the standby when the deadline had passed */
    int stalled; /* commits waiting for the standby when the primary was killed */
};

/* Under the load: stalls the standby past the deadline and lets it catch up; then kills the
 * primary while its commits wait for the standby again, and promotes the standby. Returns when
 * every client has made OPS_AFTER acknowledged writes since, or the bound passed. */
static void fail_over_under_load(struct failover_times *ft)
{
    for (int t = 0; t < CLIENTS; t++) {
        clients[t].id = t;
        pthread_create(&clients[t].thread, NULL, client_main, &clients[t]);
    }
    double t0 = th_now();
    while (th_now() - t0 < 2.0 || (begun_total() < 40 && th_now() - t0 < 20.0))
        usleep(50000);
    /* the standby stalls past the deadline, then catches up: the writes cut by the deadline
     * answer outcome_unknown, and they did commit (their retries answer duplicate or replay) */
    int stopped = walsender_signal(SIGSTOP) == 0;
    struct client *racer = &clients[CLIENTS];
    racer->id = CLIENTS;
    usleep(50000);
    pthread_create(&racer->thread, NULL, racer_main, racer);
    usleep((DEADLINE_MS + 700) * 1000);
    ft->cut = syncrep_waiting();
    int resumed = walsender_signal(SIGCONT) == 0;
    usleep(500000);
    /* the standby stalls again, and the primary dies: these commits are lost with it */
    stopped = stopped && resumed && walsender_signal(SIGSTOP) == 0;
    usleep(500000);
    ft->stalled = stopped ? syncrep_waiting() : -1;
    fprintf(stderr,
            "load: %d writes begun before the kill; %d commits waited for the standby past the "
            "deadline, %d wait when the primary is killed\n",
            begun_total(), ft->cut, ft->stalled);
    ft->killed_at = th_now();
    int killed = pair_run("kill-primary") == 0;
    ft->promote_began = th_now();
    int promoted = killed && pair_run("promote") == 0;
    ft->promoted_at = th_now();
    atomic_store(&promoted_at, ft->promote_began);
    while (promoted && !all_acked_after(OPS_AFTER) && th_now() - t0 < LOAD_BOUND_S)
        usleep(50000);
    atomic_store(&load_stop, 1);
    for (int t = 0; t <= CLIENTS; t++)
        pthread_join(clients[t].thread, NULL);
    assert_true(killed);
    assert_true(promoted);
    assert_true(ft->cut >= 1);
    assert_true(ft->stalled >= 1);
}

static void failover_loses_no_acknowledged_write(void **state)
{
    (void)state;
    char ci[1200], hosts[1100], deadline[64];
    snprintf(hosts, sizeof(hosts), "%s,%s", psock, ssock);
    conninfo(ci, sizeof(ci), hosts, dbname, "target_session_attrs=read-write");
    snprintf(deadline, sizeof(deadline), "ROWLOCK_DB_DEADLINE_MS=%d", DEADLINE_MS);
    const char *env[] = {deadline, "ROWLOCK_STATEMENT_TIMEOUT_MS=1000", NULL};
    assert_int_equal(th_service_start(&svc, ci, env), 0);
    svc_up = 1;
    create_resources();
    json_t *j = th_call(svc.port, "POST", "/queues/fq/jobs",
                        "{\"payload\": {}, \"dedupe_key\": \"probe\"}", 201);
    long probe = (long)json_integer_value(json_object_get(j, "id"));
    json_decref(j);

    standby_alone_answers_503(probe);
    standby_first_writes_to_primary();
    read_only_primary_answers_503();
    long lease_job = lease_with_stale_fence();
    pid_t pid = svc.pid;

    struct failover_times ft = {0};
    fail_over_under_load(&ft);

    /* what the clients saw */
    int ops = 0, unknown = 0, unknown_repeat = 0, unavailable = 0, unexpected = 0, no_ra = 0,
        gave_up = 0, after = 0;
    double first_2xx = 1e9, p = atomic_load(&promoted_at);
    for (int t = 0; t < CLIENTS; t++) {
        struct client *cl = &clients[t];
        gave_up += cl->gave_up;
        after += atomic_load(&cl->acked_after);
        if (cl->unexpected[0] != '\0')
            fprintf(stderr, "client %d: %s\n", t, cl->unexpected);
        for (int i = 0; i < cl->nops; i++) {
            struct op *o = &cl->ops[i];
            ops++;
            unknown += o->unknown > 0;
            unknown_repeat += o->unknown > 0 && o->repeat;
            unavailable += o->unavailable;
            unexpected += o->unexpected;
            no_ra += o->no_retry_after;
            if (o->acked && o->acked_at > p && o->acked_at - p < first_2xx)
                first_2xx = o->acked_at - p;
        }
    }
    fprintf(stderr,
            "failover: %d acknowledged writes (%d after the promotion); kill to promote %.3f s, "
            "pg_ctl promote took %.3f s; first 2xx %.3f s after the promotion began (%.3f s "
            "after pg_ctl promote returned); %d writes answered 503 outcome_unknown (%d of them "
            "had committed: their retry answered duplicate/replay; the others landed with their "
            "retry), %d answers 503 database_unavailable, %d unexpected answers\n",
            ops, after, ft.promote_began - ft.killed_at, ft.promoted_at - ft.promote_began,
            first_2xx, first_2xx - (ft.promoted_at - ft.promote_began), unknown, unknown_repeat,
            unavailable, unexpected);
    struct op *race = &clients[CLIENTS].ops[0];
    fprintf(stderr, "racer: %d answers outcome_unknown, then %s (duplicate %d) naming job %ld\n",
            race->unknown, race->acked ? "2xx" : "none", race->repeat, race->result);
    assert_true(race->acked && race->unknown >= 1 && race->repeat);
    assert_int_equal(gave_up, 0);
    assert_int_equal(unexpected, 0);
    assert_int_equal(no_ra, 0);
    assert_true(all_acked_after(OPS_AFTER));
    assert_true(first_2xx < 20.0);
    /* the commits cut by the deadline had committed; of those cut by the kill, the ones whose
     * WAL the standby had flushed before its acknowledgement was lost had too */
    assert_true(unknown_repeat >= 1);

    /* on the promoted server: every acknowledged write, once */
    PGconn *c = connect_to(ssock, dbname);
    PGresult *r = th_sql(c, "SELECT pg_is_in_recovery()");
    assert_string_equal(PQgetvalue(r, 0, 0), "f");
    PQclear(r);
    int bad = check_jobs(c) + check_messages(c) + check_ledgers(c);
    assert_int_equal(one_long(c, "SELECT count(*) FROM rowlock.jobs WHERE dedupe_key LIKE 'ro-%'"),
                     RO_WRITES);
    PQfinish(c);
    assert_int_equal(bad, 0);

    fencing_holds(lease_job);
    /* recovered by itself: the same process, ready */
    assert_int_equal(svc.pid, pid);
    char code[64];
    assert_int_equal(until_not_503(svc.port, "GET", "/readyz", NULL, code, sizeof(code), NULL),
                     200);
    svc_up = 0;
    assert_int_equal(th_service_stop(&svc), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(failover_loses_no_acknowledged_write),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
