/* Applying and checking the schema (see schema.h): the migration list, the state of a database
 * (empty, built before migrations, or migrated), the verdict on it, and applying what is pending
 * under a session advisory lock taken only here, at startup; the data paths never use advisory
 * locks. */
#include "db/schema.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/clock.h"
#include "db/sql.h"
#include "db/tx.h"

extern const char db_schema_sql[];

struct migration {
    int number;
    const char *name;
    /* the oldest build schema version that can still serve the data once this migration ran */
    int serves_from;
    const char *sql;
};

/* THE MIGRATIONS. Every schema change is a new file db/schema/migrations/NNN_name.sql (NNN = the
 * next number); the build compiles it in and lists it (db_migration_files), and
 * DB_SCHEMA_VERSION becomes its number. A file once applied is never edited: its checksum is
 * recorded where it was applied, and a changed one makes startup refuse (but see reworded[]).
 *
 * The expand/contract rule, so that the previous release keeps running on a migrated database
 * during a rolling upgrade: a migration may only ADD what the previous release ignores (a table,
 * a nullable column or one with a default, an index, a constraint every row the previous release
 * writes satisfies); its serves_from stays that of the migration before it. A REMOVAL (dropping or
 * renaming a column or table, a constraint the previous release would break) comes one release
 * later, when no build that uses the old shape runs any more: it is listed in contracts[] with
 * the first schema version that no longer uses what it removes, and older builds refuse to start
 * on it. rowlock.schema_version holds serves_from (builds from before migration 7 compare it with
 * 6). */
static const struct {
    int number, serves_from;
} contracts[] = {
    /* topics' logs and heads moved to the shared rowlock.topic_messages and topic_heads, their
     * generated tables dropped (the release before migrations reads them) */
    {12, 12},
    /* the jobs' claim and listing indexes over every state (jobs_claim, jobs_listing) dropped,
     * and their foreign key to the queue, whose check builds before schema 17 rely on */
    {18, 17},
};

/* Migrations whose comments were reworded after databases had recorded them: the checksum of
 * the text as first applied, which this build still records and expects as long as the
 * statements are unchanged (the checksum of the text without its comment lines,
 * statements_checksum, is still `statements`); once they change, the file's own checksum is
 * expected, and a database that applied the old statements is refused. */
static const struct {
    int number;
    const char *applied, *statements;
} reworded[] = {
    /* 9 to 12: comments that named a work item or quoted a measurement */
    {9, "a72852b93d58f4b0bdcde883a81a67cf5b44cd2719b6be398af57527659ac1c7",
     "d139ce58035b56c3f193fe7ec9ce55e078a9460438d6f1fb7bc34913aad8882b"},
    {10, "b227e061c6daad105bd26bbcedae0aa63d6153378801641910bc77f8dee6d9e7",
     "47a741eb75f0d4ad5698a2d23f9a4da4b6ef33e097f4cc84367238a561299e18"},
    {11, "4994b0c093cca1c474a4ce2c777e6076473028c8bbeef3d9ae94edaf2c5ff7b9",
     "d286375a868c2657e6d5b9c3ce11bd0a71d444165dbaa6aa89394c56b0e46445"},
    {12, "0c03b4ddbdf90f4ce350c2a52a0cb6363081d81373b2d8bfbdb5e406ad912d5d",
     "cf8a12da0486bae8218804936d374376545f7e28003961cb87106f6d785ab884"},
};

/* Rows of rowlock.migrations read at most; more is a database this build cannot judge. */
#define MAX_ROWS 1024

enum db_kind { KIND_EMPTY, KIND_PARTIAL, KIND_LEGACY, KIND_MIGRATED };

struct applied {
    int number;
    int serves_from;
    char name[64];
    char checksum[65];
};

struct db_state {
    enum db_kind kind;
    int legacy;  /* the rowlock.schema_version row (0: none) */
    int version; /* the last migration applied (the legacy row before migrations) */
    int serves_from;
    int nrows;
    struct applied rows[MAX_ROWS];
};

/* The same key as the transaction lock of the release before migrations: a process of that
 * release starting at the same moment takes its turn too. */
static const struct db_stmt stmt_try_lock = {"schema_try_lock",
                                             "SELECT pg_try_advisory_lock(7255186934271200)", 0};
static const struct db_stmt stmt_unlock = {"schema_unlock",
                                           "SELECT pg_advisory_unlock(7255186934271200)", 0};
static const struct db_stmt stmt_inspect = {
    "schema_inspect",
    "SELECT to_regclass('rowlock.schema_version') IS NOT NULL,"
    "       to_regclass('rowlock.migrations') IS NOT NULL,"
    "       EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'rowlock')",
    0};
static const struct db_stmt stmt_version = {"schema_version",
                                            "SELECT version FROM rowlock.schema_version", 0};
static const struct db_stmt stmt_rows = {
    "schema_rows",
    "SELECT number, name, checksum, serves_from FROM rowlock.migrations ORDER BY number", 0};
static const struct db_stmt stmt_legacy_record = {
    "schema_legacy_record", "INSERT INTO rowlock.schema_version (version) VALUES ($1::integer)", 1};
static const struct db_stmt stmt_record = {
    "schema_record",
    "INSERT INTO rowlock.migrations (number, name, checksum, applied_by, serves_from) "
    "VALUES ($1::integer, $2, $3, $4, $5::integer)",
    5};
static const struct db_stmt stmt_serves = {
    "schema_serves",
    "UPDATE rowlock.schema_version SET version = $1::integer WHERE version <> $1::integer", 1};

int db_schema_refused(enum db_schema_verdict verdict)
{
    return verdict != DB_SCHEMA_CREATED && verdict != DB_SCHEMA_CURRENT &&
           verdict != DB_SCHEMA_MIGRATED && verdict != DB_SCHEMA_NEWER;
}

int db_schema_serves(int version, int serves_from)
{
    return version >= DB_SCHEMA_VERSION && serves_from <= DB_SCHEMA_VERSION;
}

/* SHA-256 of sql as 64 lowercase hex digits. */
static void checksum(const char *sql, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    out[0] = '\0';
    if (EVP_Digest(sql, strlen(sql), md, &n, EVP_sha256(), NULL) != 1)
        return;
    for (unsigned int i = 0; i < n && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The checksum of sql without its comment lines (those whose first non-blank text is "--"). */
static void statements_checksum(const char *sql, char out[65])
{
    size_t n = strlen(sql), len = 0;
    char *text = malloc(n + 1);
    out[0] = '\0';
    if (text == NULL)
        return;
    for (const char *line = sql; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t linelen = end ? (size_t)(end - line) + 1 : strlen(line);
        const char *p = line;
        while (p < line + linelen && (*p == ' ' || *p == '\t'))
            p++;
        if (!(p[0] == '-' && p[1] == '-')) {
            memcpy(text + len, line, linelen);
            len += linelen;
        }
        line += linelen;
    }
    text[len] = '\0';
    checksum(text, out);
    free(text);
}

/* The checksum this build records for m and expects a database to hold: its file's, or, for a
 * migration whose comments were reworded since it was first recorded (reworded[]) and whose
 * statements are the same, the one first recorded, so that every build, older or newer, records
 * and expects the same. */
static void expected_checksum(const struct migration *m, char out[65])
{
    for (size_t k = 0; k < sizeof(reworded) / sizeof(reworded[0]); k++) {
        if (reworded[k].number != m->number)
            continue;
        char st[65];
        statements_checksum(m->sql, st);
        if (strcmp(st, reworded[k].statements) == 0) {
            snprintf(out, 65, "%s", reworded[k].applied);
            return;
        }
    }
    checksum(m->sql, out);
}

/* Migration number of this build in *m: 1, or 0 when this build has no such migration. */
static int find_migration(int number, struct migration *m);

int db_schema_migration_record(int number, int *serves_from, char checksum_out[65])
{
    struct migration m;
    if (!find_migration(number, &m))
        return 0;
    *serves_from = m.serves_from;
    expected_checksum(&m, checksum_out);
    return 1;
}

/* Migration number of this build in *m: 1, or 0 when this build has no such migration. */
static int find_migration(int number, struct migration *m)
{
    if (number == DB_SCHEMA_BASELINE) {
        *m = (struct migration){DB_SCHEMA_BASELINE, "baseline", DB_SCHEMA_BASELINE, db_schema_sql};
        return 1;
    }
    if (number <= DB_SCHEMA_BASELINE || number > DB_SCHEMA_VERSION)
        return 0;
    const struct db_migration_file *f = &db_migration_files[number - DB_SCHEMA_BASELINE - 1];
    int serves = DB_SCHEMA_BASELINE;
    for (size_t k = 0; k < sizeof(contracts) / sizeof(contracts[0]); k++)
        if (contracts[k].number <= number && contracts[k].serves_from > serves)
            serves = contracts[k].serves_from;
    *m = (struct migration){f->number, f->name, serves, f->sql};
    return 1;
}

/* Reads rowlock.migrations into s. */
static enum db_status read_rows(struct db_conn *c, struct db_state *s, struct db_error *err)
{
    PGresult *res = NULL;
    enum db_status st = db_query(c, &stmt_rows, NULL, &res, err);
    if (st != DB_OK)
        return st;
    int n = PQntuples(res);
    if (n > MAX_ROWS) {
        PQclear(res);
        db_error_set(err, "", "rowlock.migrations holds %d rows; this build reads %d at most", n,
                     MAX_ROWS);
        return DB_ERR_HARD;
    }
    s->nrows = n;
    for (int i = 0; i < n; i++) {
        struct applied *a = &s->rows[i];
        a->number = atoi(PQgetvalue(res, i, 0));
        db_copy(a->name, sizeof(a->name), PQgetvalue(res, i, 1));
        db_copy(a->checksum, sizeof(a->checksum), PQgetvalue(res, i, 2));
        a->serves_from = atoi(PQgetvalue(res, i, 3));
        s->version = a->number;
        if (a->serves_from > s->serves_from)
            s->serves_from = a->serves_from;
    }
    PQclear(res);
    return DB_OK;
}

/* What the database holds now (outside any transaction: each migration commits whole). */
static enum db_status read_state(struct db_conn *c, struct db_state *s, struct db_error *err)
{
    PGresult *res = NULL;
    memset(s, 0, offsetof(struct db_state, rows));
    enum db_status st = db_query(c, &stmt_inspect, NULL, &res, err);
    if (st != DB_OK)
        return st;
    int has_version = PQgetvalue(res, 0, 0)[0] == 't';
    int has_migrations = PQgetvalue(res, 0, 1)[0] == 't';
    int has_schema = PQgetvalue(res, 0, 2)[0] == 't';
    PQclear(res);
    s->kind = !has_schema ? KIND_EMPTY : !has_version ? KIND_PARTIAL : KIND_LEGACY;
    if (s->kind != KIND_LEGACY)
        return DB_OK;
    st = db_query(c, &stmt_version, NULL, &res, err);
    if (st != DB_OK)
        return st;
    s->legacy = PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;
    PQclear(res);
    s->version = s->serves_from = s->legacy;
    if (s->legacy == 0)
        s->kind = KIND_PARTIAL;
    if (!has_migrations || s->kind == KIND_PARTIAL)
        return DB_OK;
    s->kind = KIND_MIGRATED;
    s->version = 0;
    return read_rows(c, s, err);
}

#define REFUSE(rep, v, ...)                                                                        \
    do {                                                                                           \
        (rep)->verdict = (v);                                                                      \
        snprintf((rep)->detail, sizeof((rep)->detail), __VA_ARGS__);                               \
    } while (0)

/* Checks the recorded migrations of a migrated database against this build's: every number this
 * build knows up to the database's version present once, with this build's checksum. */
static int judge_rows(const struct db_state *s, struct db_schema_report *rep)
{
    int expect = DB_SCHEMA_BASELINE;
    for (int i = 0; i < s->nrows; i++) {
        const struct applied *a = &s->rows[i];
        if (a->number > DB_SCHEMA_VERSION)
            break; /* newer than this build: judged by serves_from */
        struct migration m;
        if (!find_migration(a->number, &m) || a->number != expect) {
            REFUSE(rep, DB_SCHEMA_INCOMPATIBLE,
                   "the database records migration %d (%s) but not migration %d: a migration was "
                   "skipped or the table was edited; restore the database from a backup",
                   a->number, a->name, expect);
            return 0;
        }
        char sum[65];
        expected_checksum(&m, sum);
        if (strcmp(sum, a->checksum) != 0) {
            REFUSE(rep, DB_SCHEMA_CHANGED,
                   "migration %d (%s) was applied with checksum %.16s but this build's migration "
                   "%d (%s) has checksum %.16s: an applied migration must never change; build "
                   "the released file again and put the change in a new migration",
                   a->number, a->name, a->checksum, m.number, m.name, sum);
            return 0;
        }
        expect++;
    }
    return 1;
}

/* The verdict on s without applying anything; *pending is the first migration to apply. */
static void judge(const struct db_state *s, struct db_schema_report *rep, int *pending)
{
    rep->verdict = DB_SCHEMA_CURRENT;
    rep->detail[0] = '\0';
    *pending = s->kind == KIND_EMPTY ? DB_SCHEMA_BASELINE : s->version + 1;
    if (s->kind == KIND_PARTIAL) {
        REFUSE(rep, DB_SCHEMA_INCOMPATIBLE,
               "the database holds a rowlock schema without its version row (a partial or "
               "foreign schema): recreate the database (drop it and create it empty), then start "
               "rowlock again");
        return;
    }
    if (s->kind == KIND_LEGACY && s->legacy != DB_SCHEMA_BASELINE) {
        REFUSE(rep, DB_SCHEMA_INCOMPATIBLE,
               "the database holds rowlock schema version %d from before migrations; this build "
               "upgrades only the released version %d: recreate the database (drop it and "
               "create it empty), then start rowlock again",
               s->legacy, DB_SCHEMA_BASELINE);
        return;
    }
    if (s->kind == KIND_MIGRATED && !judge_rows(s, rep))
        return;
    if (s->kind != KIND_EMPTY && s->serves_from > DB_SCHEMA_VERSION)
        REFUSE(rep, DB_SCHEMA_TOO_NEW,
               "the database holds rowlock schema version %d, which serves builds of schema "
               "version %d and later; this build has schema version %d: run a newer release",
               s->version, s->serves_from, DB_SCHEMA_VERSION);
    else if (s->kind != KIND_EMPTY && s->version > DB_SCHEMA_VERSION)
        rep->verdict = DB_SCHEMA_NEWER;
}

/* Runs sql and the statements of record in one transaction on c, without a statement timeout
 * (a migration may take long; the session's own timeout returns with COMMIT). */
static enum db_status run_in_tx(struct db_conn *c, const struct migration *m, int record_baseline,
                                const char *applied_by, struct db_error *err)
{
    char num[DB_INT_TEXT], serves[DB_INT_TEXT], sum[65], base_sum[65];
    snprintf(num, sizeof(num), "%d", m->number);
    snprintf(serves, sizeof(serves), "%d", m->serves_from);
    expected_checksum(m, sum);
    checksum(db_schema_sql, base_sum);
    enum db_status st = db_exec(c, "BEGIN; SET LOCAL statement_timeout = 0", err);
    if (st == DB_OK)
        st = db_exec(c, m->sql, err);
    if (st == DB_OK && m->number == DB_SCHEMA_BASELINE) {
        const char *p[] = {num};
        st = db_query(c, &stmt_legacy_record, p, NULL, err);
    }
    if (st == DB_OK && record_baseline) {
        const char *p[] = {"6", "baseline", base_sum, applied_by, "6"};
        st = db_query(c, &stmt_record, p, NULL, err);
    }
    if (st == DB_OK && m->number > DB_SCHEMA_BASELINE) {
        const char *p[] = {num, m->name, sum, applied_by, serves};
        st = db_query(c, &stmt_record, p, NULL, err);
        const char *q[] = {serves};
        if (st == DB_OK)
            st = db_query(c, &stmt_serves, q, NULL, err);
    }
    if (st == DB_OK)
        st = db_exec(c, "COMMIT", err);
    if (st != DB_OK)
        db_conn_mark_broken(c); /* closing the session rolls back and drops the lock */
    return st;
}

/* Applies every pending migration of s on c, each in its own transaction. Holds the lock. */
static enum db_status apply_pending(struct db_conn *c, struct db_state *s, int first,
                                    const char *applied_by, struct db_schema_report *rep,
                                    struct db_error *err)
{
    int had_table = s->kind == KIND_MIGRATED;
    for (int n = first; n <= DB_SCHEMA_VERSION; n++) {
        struct migration m = {0};
        if (!find_migration(n, &m)) { /* every number up to DB_SCHEMA_VERSION is this build's */
            db_error_set(err, "", "schema migration %d is missing from this build", n);
            return DB_ERR_HARD;
        }
        /* the migration that creates rowlock.migrations records the baseline before it */
        int record_baseline = !had_table && n == DB_SCHEMA_BASELINE + 1;
        enum db_status st = run_in_tx(c, &m, record_baseline, applied_by, err);
        if (st != DB_OK)
            return st;
        if (record_baseline && first > DB_SCHEMA_BASELINE)
            rep->adopted = 1;
        if (record_baseline)
            had_table = 1;
        rep->applied++;
    }
    return DB_OK;
}

/* Takes the schema lock on a connection of pool, polling so that no connection is held while
 * waiting (the pool's deadline would cut it). *out holds the lock on DB_OK. */
static enum db_status take_lock(struct db_pool *pool, long wait_ms, struct db_conn **out,
                                struct db_schema_report *rep, struct db_error *err)
{
    double t0 = db_clock_now_ms();
    for (;;) {
        struct db_conn *c = NULL;
        PGresult *res = NULL;
        enum db_status st = db_pool_acquire(pool, &c, err);
        if (st != DB_OK)
            return st;
        st = db_query(c, &stmt_try_lock, NULL, &res, err);
        int got = st == DB_OK && PQgetvalue(res, 0, 0)[0] == 't';
        PQclear(res);
        if (got) {
            db_conn_lift_deadline(c); /* migrations are no client's request: no deadline */
            *out = c;
            return DB_OK;
        }
        db_pool_release(c);
        if (st != DB_OK)
            return st;
        rep->waited_ms = (long)(db_clock_now_ms() - t0);
        if (rep->waited_ms >= wait_ms) {
            db_error_set(err, "55P03",
                         "another process has held the schema lock for %ld ms (applying "
                         "migrations?)",
                         rep->waited_ms);
            return DB_ERR_TIMEOUT;
        }
        struct timespec pause = {0, 100 * 1000000L};
        nanosleep(&pause, NULL);
    }
}

static struct db_state *state_new(struct db_error *err)
{
    struct db_state *s = malloc(sizeof(*s));
    if (s == NULL)
        db_error_set(err, "53200", "out of memory");
    return s;
}

enum db_status db_schema_migrate(struct db_pool *pool, enum db_migrate_mode mode,
                                 const char *applied_by, long lock_wait_ms,
                                 struct db_schema_report *rep, struct db_error *err)
{
    struct db_conn *c = NULL;
    struct db_state *s = state_new(err);
    enum db_status st = s == NULL ? DB_ERR_HARD : DB_OK;
    int pending = 0, locked = 0;
    memset(rep, 0, sizeof(*rep));
    if (st == DB_OK && mode == DB_MIGRATE_AUTO) {
        st = take_lock(pool, lock_wait_ms, &c, rep, err);
        locked = st == DB_OK;
    } else if (st == DB_OK) {
        st = db_pool_acquire(pool, &c, err);
    }
    if (st == DB_OK)
        st = read_state(c, s, err);
    if (st != DB_OK)
        goto done;
    rep->found = s->kind == KIND_EMPTY ? 0 : s->version;
    judge(s, rep, &pending);
    if (db_schema_refused(rep->verdict) || pending > DB_SCHEMA_VERSION)
        goto report;
    if (mode == DB_MIGRATE_CHECK) {
        REFUSE(rep, DB_SCHEMA_PENDING,
               "the database holds rowlock schema version %d; this build needs version %d, and "
               "--migrate=check applies no migrations (%d to %d are pending): run rowlock "
               "--migrate-only first, or start with --migrate=auto",
               rep->found, DB_SCHEMA_VERSION, pending, DB_SCHEMA_VERSION);
        goto report;
    }
    st = apply_pending(c, s, pending, applied_by, rep, err);
#ifdef ROWLOCK_TEST_FANIN_SNAPSHOT
    /* rowlock-unlocked (tests only): the dependency trigger (migration 22) takes a child's count
     * down from the value its statement's snapshot holds instead of the row's latest version,
     * so that the race tests can show they catch the lost decrement of two parents ending at
     * once (the child then waits forever). Its own databases only. */
    if (st == DB_OK)
        st = db_exec(c,
                     "DO $$ BEGIN EXECUTE replace(pg_get_functiondef("
                     "'rowlock.deps_settle_edges(bigint[],bigint[],boolean)'::regprocedure), "
                     "'j.waiting_on', "
                     "'(SELECT s.waiting_on FROM rowlock.jobs s WHERE s.id = j.id)'); END $$",
                     err);
#endif
    if (st == DB_OK)
        st = read_state(c, s, err);
    if (st != DB_OK)
        goto done;
    rep->verdict = pending == DB_SCHEMA_BASELINE ? DB_SCHEMA_CREATED : DB_SCHEMA_MIGRATED;
report:
    rep->version = s->kind == KIND_EMPTY ? 0 : s->version;
    rep->serves_from = s->serves_from;
done:
    if (c != NULL && locked && st == DB_OK) {
        struct db_error ignored;
        if (db_query(c, &stmt_unlock, NULL, NULL, &ignored) != DB_OK)
            db_conn_mark_broken(c);
    } else if (c != NULL && locked) {
        db_conn_mark_broken(c); /* closing the session drops the lock */
    }
    if (c != NULL)
        db_pool_release(c);
    free(s);
    return st;
}

enum db_status db_schema_apply(struct db_pool *pool, enum db_schema_verdict *verdict, int *found,
                               struct db_error *err)
{
    struct db_schema_report rep;
    enum db_status st =
        db_schema_migrate(pool, DB_MIGRATE_AUTO, "rowlock " ROWLOCK_VERSION, 60000, &rep, err);
    *verdict = db_schema_refused(rep.verdict)     ? DB_SCHEMA_INCOMPATIBLE
               : rep.verdict == DB_SCHEMA_CREATED ? DB_SCHEMA_CREATED
                                                  : DB_SCHEMA_CURRENT;
    *found = rep.found;
    return st;
}

struct schema_read {
    int version;
    int serves_from;
};

static enum db_status schema_version_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct schema_read *r = arg;
    PGresult *res = NULL;
    r->version = 0;
    enum db_status st = db_query(c, &stmt_version, NULL, &res, err);
    if (st != DB_OK)
        return st;
    r->version = PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;
    PQclear(res);
    return DB_OK;
}

enum db_status db_schema_version(struct db_pool *pool, int *version, struct db_error *err)
{
    struct schema_read r = {0, 0};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, schema_version_tx, &r, err);
    *version = r.version;
    return st;
}

/* The readiness probe: the last migration and what the database serves, read in a transaction
 * that writes a WAL record (a transactional logical message, which touches no table), so that
 * its COMMIT waits as every write does (for a synchronous standby, say; a transaction id alone
 * would commit without waiting). BEGIN, the read and COMMIT go out in one round
 * trip. */
static const struct db_stmt stmt_ready = {
    "schema_ready",
    "SELECT (SELECT max(number) FROM rowlock.migrations),"
    "       greatest((SELECT version FROM rowlock.schema_version),"
    "                (SELECT max(serves_from) FROM rowlock.migrations)),"
    "       pg_logical_emit_message(true, 'rowlock_ready', '')",
    0};

static enum db_status schema_ready_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct schema_read *r = arg;
    PGresult *res = NULL;
    r->version = r->serves_from = 0;
    db_tx_commit_with_next(c);
    enum db_status st = db_query(c, &stmt_ready, NULL, &res, err);
    if (st != DB_OK)
        return st;
    r->version = PQgetisnull(res, 0, 0) ? 0 : atoi(PQgetvalue(res, 0, 0));
    r->serves_from = PQgetisnull(res, 0, 1) ? 0 : atoi(PQgetvalue(res, 0, 1));
    PQclear(res);
    return DB_OK;
}

enum db_status db_schema_ready(struct db_pool *pool, int *version, int *serves_from,
                               struct db_error *err)
{
    struct schema_read r = {0, 0};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, schema_ready_tx, &r, err);
    *version = r.version;
    *serves_from = r.serves_from;
    return st;
}
