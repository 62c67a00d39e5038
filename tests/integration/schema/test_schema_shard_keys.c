/* Shard keys (docs/operations/sharding.md), over the catalog of a database this build migrated
 * (with one ledger): every table of schema rowlock is in one list below; every primary key, unique
 * index and exclusion constraint of a family's shared table has its distribution column as a key
 * column, except the known gaps, each still a gap (the list only shrinks). The last test breaks a
 * scratch database and needs each break reported. To see a failure: add a migration with
 * CREATE UNIQUE INDEX ON rowlock.topic_heads (key). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A family's shared table (the rows of many resources) and the column naming the resource: its
 * distribution column, co-located with every other table of the list. */
struct shard_table {
    const char *table, *column;
};
static const struct shard_table shared_tables[] = {
    /* topics */
    {"topic_messages", "topic_id"},
    {"topic_heads", "topic_id"},
    {"topic_consumers", "topic_id"},
    {"producers", "topic_id"},
    /* queues */
    {"jobs", "queue_id"},
    {"job_bodies", "queue_id"},
    {"job_attempts", "queue_id"},
    {"job_dedupe", "queue_id"},
    {"queue_keys", "queue_id"},
    {"queue_limiter", "queue_id"},
    /* schedules */
    {"schedule_fires", "schedule_id"},
    /* every family's upkeep; and the three it replaced, kept for builds of schema 12 */
    {"upkeep", "resource_id"},
    {"topic_upkeep", "topic_id"},
    {"queue_upkeep", "queue_id"},
    {"ledger_upkeep", "ledger_id"},
};

/* Every other table of schema rowlock, and why it is no family's shared storage. */
#define CATALOGUE                                                                                  \
    "catalogue: unique by name and resolved by name in each request, which a table distributed "   \
    "by id can neither keep unique nor route; a reference table"
struct other_table {
    const char *table, *why;
};
static const struct other_table other_tables[] = {
    {"schema_version", "system: one row, read by each starting process; a reference table"},
    {"migrations", "system: written by migrations only; a reference table"},
    {"topics", CATALOGUE},
    {"queues", CATALOGUE},
    {"ledgers", CATALOGUE},
    {"schedules", CATALOGUE},
};

/* A ledger's generated tables, rowlock.<prefix><ledger id>: each holds one ledger's rows only. */
static const char *const ledger_prefixes[] = {"objects_", "displays_", "transactions_", "events_",
                                              "checkpoints_"};

/* Known gaps: keys of shared tables without the distribution column, each with the storage change
 * that closes it. A gap closed fails the test until it is taken off this list. */
struct gap {
    const char *table, *index, *fix;
};
static const struct gap gaps[] = {
    {"jobs", "jobs_pkey", "primary key (queue_id, id)"},
    {"job_bodies", "job_bodies_pkey", "a queue_id column; primary key (queue_id, job_id)"},
    {"job_attempts", "job_attempts_pkey",
     "a queue_id column; primary key (queue_id, job_id, fence)"},
};
#define NGAPS ARRAY_LEN(gaps)

/* Tables of schema rowlock (partitions follow their parent). */
static const char sql_tables[] =
    "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'rowlock'::regnamespace "
    "AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1";
/* Whether table $1 has column $2. */
static const char sql_column[] =
    "SELECT EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
    "WHERE c.relnamespace = 'rowlock'::regnamespace AND c.relname = $1 AND a.attname = $2 "
    "AND a.attnum > 0 AND NOT a.attisdropped)";
/* Table $1's primary key, unique indexes and exclusion constraints: name, and whether column $2
 * is one of its key columns (an INCLUDE column enforces nothing). */
static const char sql_keys[] =
    "SELECT ic.relname, EXISTS (SELECT 1 FROM unnest(i.indkey::int2[]) WITH ORDINALITY "
    "  AS k(attnum, n) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
    "  WHERE k.n <= i.indnkeyatts AND a.attname = $2) "
    "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_class ic ON ic.oid = "
    "i.indexrelid WHERE c.relnamespace = 'rowlock'::regnamespace AND c.relname = $1 "
    "AND (i.indisprimary OR i.indisunique OR i.indisexclusion) ORDER BY 1";
static const char sql_ledger[] = "SELECT EXISTS (SELECT 1 FROM rowlock.ledgers WHERE id = $1)";

/* What a catalog breaks of the rules, one line each; bounded, and says when lines were cut. */
struct problems {
    char text[8192];
    size_t len;
    int n, cut;
};

static void problem(struct problems *p, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    p->n++;
    p->cut |= n >= (int)sizeof(line);
    size_t need = strlen(line) + 1;
    if (p->len + need >= sizeof(p->text)) {
        p->cut = 1;
        return;
    }
    memcpy(p->text + p->len, line, need - 1);
    p->len += need;
    p->text[p->len - 1] = '\n';
    p->text[p->len] = '\0';
}

/* Runs a query that must return rows (fails the test otherwise); the caller PQclears it. */
static PGresult *rows(PGconn *c, const char *sql, int nparams, const char *const *params)
{
    PGresult *r = PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("catalog query failed: %s", PQerrorMessage(c));
    return r;
}

/* The first value of a query's first row is true. */
static int is_true(PGconn *c, const char *sql, int nparams, const char *const *params)
{
    PGresult *r = rows(c, sql, nparams, params);
    int yes = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    return yes;
}

static const struct shard_table *shared_of(const char *table)
{
    for (size_t i = 0; i < ARRAY_LEN(shared_tables); i++)
        if (strcmp(shared_tables[i].table, table) == 0)
            return &shared_tables[i];
    return NULL;
}

static int other_of(const char *table)
{
    for (size_t i = 0; i < ARRAY_LEN(other_tables); i++)
        if (strcmp(other_tables[i].table, table) == 0)
            return 1;
    return 0;
}

/* 1 when table is a generated table of a ledger that exists; 0 when it is named like none. */
static int ledger_table(PGconn *c, const char *table, struct problems *p)
{
    for (size_t i = 0; i < ARRAY_LEN(ledger_prefixes); i++) {
        size_t n = strlen(ledger_prefixes[i]);
        const char *id = table + n;
        if (strncmp(table, ledger_prefixes[i], n) != 0 || *id == '\0' ||
            strspn(id, "0123456789") != strlen(id))
            continue;
        const char *params[] = {id};
        if (!is_true(c, sql_ledger, 1, params))
            problem(p, "rowlock.%s is named as a ledger's table, but ledger %s does not exist",
                    table, id);
        return 1;
    }
    return 0;
}

/* Every table of schema rowlock is in one list, and every listed table exists. */
static void check_classified(PGconn *c, struct problems *p)
{
    PGresult *r = rows(c, sql_tables, 0, NULL);
    for (int i = 0; i < PQntuples(r); i++) {
        const char *t = PQgetvalue(r, i, 0);
        if (shared_of(t) == NULL && !other_of(t) && !ledger_table(c, t, p))
            problem(p,
                    "rowlock.%s is in no list: a family's shared table goes in shared_tables "
                    "with its resource's id column, any other in other_tables with the reason",
                    t);
    }
    PQclear(r);
    for (size_t i = 0; i < ARRAY_LEN(shared_tables) + ARRAY_LEN(other_tables); i++) {
        const char *t = i < ARRAY_LEN(shared_tables)
                            ? shared_tables[i].table
                            : other_tables[i - ARRAY_LEN(shared_tables)].table;
        const char *params[] = {t};
        PGresult *e =
            rows(c, "SELECT to_regclass('rowlock.' || quote_ident($1)) IS NOT NULL", 1, params);
        if (PQgetvalue(e, 0, 0)[0] != 't')
            problem(p, "rowlock.%s is listed but does not exist: update the lists", t);
        PQclear(e);
    }
}

/* The known gap of this key, or NULL. */
static const struct gap *gap_of(const char *table, const char *index)
{
    for (size_t i = 0; i < NGAPS; i++)
        if (strcmp(gaps[i].table, table) == 0 && strcmp(gaps[i].index, index) == 0)
            return &gaps[i];
    return NULL;
}

static int table_has_gap(const char *table)
{
    for (size_t i = 0; i < NGAPS; i++)
        if (strcmp(gaps[i].table, table) == 0)
            return 1;
    return 0;
}

/* The keys of shared table t include its column, or are known gaps (marked in seen). */
static void check_table_keys(PGconn *c, const struct shard_table *t, int *seen, struct problems *p)
{
    const char *params[] = {t->table, t->column};
    if (!is_true(c, sql_column, 2, params) && !table_has_gap(t->table))
        problem(p, "rowlock.%s has no column %s, its distribution column", t->table, t->column);
    PGresult *r = rows(c, sql_keys, 2, params);
    for (int i = 0; i < PQntuples(r); i++) {
        const char *index = PQgetvalue(r, i, 0);
        if (PQgetvalue(r, i, 1)[0] == 't')
            continue;
        const struct gap *g = gap_of(t->table, index);
        if (g != NULL)
            seen[g - gaps] = 1;
        else
            problem(p,
                    "rowlock.%s: key %s does not include %s: a shared table's primary key and "
                    "unique indexes must include its resource's id (docs/operations/sharding.md)",
                    t->table, index, t->column);
    }
    PQclear(r);
}

/* Every shared table's keys, and every known gap still a gap. */
static void check_keys(PGconn *c, struct problems *p)
{
    int seen[NGAPS] = {0};
    for (size_t i = 0; i < ARRAY_LEN(shared_tables); i++)
        check_table_keys(c, &shared_tables[i], seen, p);
    for (size_t i = 0; i < NGAPS; i++)
        if (shared_of(gaps[i].table) == NULL)
            problem(p, "known gap names rowlock.%s, which is not in shared_tables", gaps[i].table);
        else if (!seen[i])
            problem(p,
                    "known gap closed: rowlock.%s key %s now includes %s or is gone (the fix was: "
                    "%s); take it off the gaps list",
                    gaps[i].table, gaps[i].index, shared_of(gaps[i].table)->column, gaps[i].fix);
}

static void assert_none(const struct problems *p)
{
    if (p->n > 0)
        fail_msg("%d problem(s)%s:\n%s", p->n, p->cut ? " (not all shown)" : "", p->text);
}

/* A database migrated by this build (--migrate-only), its URL in url. */
static PGconn *migrated(const char *name, char *url, size_t size)
{
    static const char *const only[] = {"ROWLOCK_MIGRATE_ONLY=true", NULL};
    assert_int_equal(th_db_create(name, url, size), 0);
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, only), -1);
    assert_int_equal(svc.exit_code, 0);
    assert_true(th_service_logged(&svc, "schema migrations done"));
    return th_pg(url);
}

static int setup(void **state)
{
    char url[1024];
    PGconn *c = migrated("shard_keys", url, sizeof(url));
    /* a ledger made by the service, so that its generated tables are in the catalog */
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    struct th_response r;
    json_t *body = json_object();
    assert_int_equal(th_http_json(svc.port, "PUT", "/ledgers/shard_keys", body, &r), 0);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
    json_decref(body);
    assert_int_equal(th_service_stop(&svc), 0);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    PQfinish(*state);
    return 0;
}

static void every_table_is_classified(void **state)
{
    PGconn *c = *state;
    struct problems p = {.len = 0};
    check_classified(c, &p);
    assert_none(&p);
    PGresult *r = rows(c,
                       "SELECT count(*) FROM pg_tables WHERE schemaname = 'rowlock' AND "
                       "tablename ~ '^(objects|displays|transactions|events|checkpoints)_[0-9]+$'",
                       0, NULL);
    assert_int_equal(atoi(PQgetvalue(r, 0, 0)), (int)ARRAY_LEN(ledger_prefixes));
    PQclear(r);
}

static void shared_keys_include_the_resource_id(void **state)
{
    struct problems p = {.len = 0};
    check_keys(*state, &p);
    assert_none(&p);
}

/* Negative control: each break, made by SQL in a scratch database, is reported, and nothing else:
 * a unique index without the column, one with it only as an INCLUDE column, a known gap closed,
 * a table in no list, and a ledger's table of no ledger. */
static void each_break_is_reported(void **state)
{
    static const char *const breaks[] = {
        "CREATE UNIQUE INDEX heads_by_key ON rowlock.topic_heads (key)",
        "CREATE UNIQUE INDEX consumers_by_name ON rowlock.topic_consumers (name) INCLUDE "
        "(topic_id)",
        "ALTER TABLE rowlock.job_attempts ADD COLUMN queue_id bigint NOT NULL DEFAULT 0, "
        "DROP CONSTRAINT job_attempts_pkey, ADD PRIMARY KEY (queue_id, job_id, fence)",
        "CREATE TABLE rowlock.job_tags (job_id bigint PRIMARY KEY, tag text)",
        "CREATE TABLE rowlock.objects_999999 (object_id text PRIMARY KEY)",
    };
    static const char *const reported[] = {
        "key heads_by_key does not include topic_id",
        "key consumers_by_name does not include topic_id",
        "known gap closed: rowlock.job_attempts key job_attempts_pkey",
        "rowlock.job_tags is in no list",
        "rowlock.objects_999999 is named as a ledger's table, but ledger 999999 does not exist",
    };
    char url[1024];
    PGconn *c = migrated("shard_keys_broken", url, sizeof(url));
    for (size_t i = 0; i < ARRAY_LEN(breaks); i++)
        PQclear(th_sql(c, breaks[i]));
    struct problems p = {.len = 0};
    check_classified(c, &p);
    check_keys(c, &p);
    fprintf(stderr, "reported, as it must be:\n%s", p.text);
    for (size_t i = 0; i < ARRAY_LEN(reported); i++)
        if (strstr(p.text, reported[i]) == NULL)
            fail_msg("not reported: %s", reported[i]);
    assert_int_equal(p.n, (int)ARRAY_LEN(reported));
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_table_is_classified),
        cmocka_unit_test(shared_keys_include_the_resource_id),
        cmocka_unit_test(each_break_is_reported),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
