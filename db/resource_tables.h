/* Statements on a resource's generated tables (a ledger's objects, events...):
 * SQL templates in which {x} names one of the resource's tables, named by its id and quoted with
 * PQescapeIdentifier, prepared once per connection. Also the gap-safe read of a log table, shared
 * by ledger event logs (generated tables) and topic logs (the shared rowlock.topic_messages).
 * What the tables hold belongs to their owner. */
#ifndef DB_RESOURCE_TABLES_H
#define DB_RESOURCE_TABLES_H

#include <stdint.h>

#include "db/db.h"

struct db_pool;

/* One placeholder: {letter} becomes rowlock."<prefix><id><suffix>". */
struct db_gen_table {
    char letter;
    const char *prefix;
    const char *suffix;
};

/* A resource with generated tables: kind ('l', a ledger) and id name its statements. */
struct db_gen {
    char kind;
    int64_t id;
    const struct db_gen_table *tables; /* ends with letter 0 */
};

/* Runs template sql, known on each connection as "<kind><id>_<tag>". */
enum db_status db_gen_query(struct db_conn *c, const struct db_gen *g, const char *tag,
                            const char *sql, int nparams, const char *const *params, PGresult **out,
                            struct db_error *err);

/* One statement of db_gen_pipeline: template sql known as tag, with db_gen_query's arguments. */
struct db_gen_call {
    const char *tag, *sql;
    int nparams;
    const char *const *params;
    PGresult **out;
};
#define DB_GEN_PIPELINE_MAX 4
/* What a template statement needs while it runs as a struct db_call (db_gen_call_make). */
struct db_gen_tpl {
    const char *sql;
    const struct db_gen *g;
    PGconn *pg;
};
struct db_gen_slot {
    char name[64];
    struct db_gen_tpl tpl;
};
/* Makes *out, a db_query_pipeline call of template statement in, using *slot (which must live
 * until the pipeline has run): for pipelines that mix generated-table and other statements. */
void db_gen_call_make(struct db_conn *c, const struct db_gen *g, const struct db_gen_call *in,
                      struct db_gen_slot *slot, struct db_call *out);
/* Runs up to DB_GEN_PIPELINE_MAX template statements in order in one round trip (see
 * db_query_pipeline). */
enum db_status db_gen_pipeline(struct db_conn *c, const struct db_gen *g,
                               const struct db_gen_call *calls, size_t n, struct db_error *err);

/* True when err says a table is missing (its resource was deleted meanwhile). */
int db_gen_missing(const struct db_error *err);

/* Gap-safe read of a log table whose rows have a dense "offset" from a sequence and a hole
 * flag. read_sql ($1 after, $2 limit) returns rows in offset order with "offset" in column 0;
 * fill_sql ($1 from, $2 to) records offsets without a visible row as holes. A gap between visible
 * offsets was drawn by a transaction still running (the read stops before it: it may commit
 * later) or by one that rolled back (recorded as a hole without waiting, then read again).
 * *rows holds the last read (PQclear it); its first *usable rows are safe to show. */
enum db_status db_gen_read_log(struct db_conn *c, const struct db_gen *g, const char *read_sql,
                               const char *fill_sql, int64_t after, int limit, PGresult **rows,
                               int *usable, struct db_error *err);
/* The same read of a log in a shared table, several resources' logs in one: read ($1 the
 * resource's id, $2 after, $3 limit) and fill ($1 the id, $2 from, $3 to) are prepared statements
 * (the same for every resource) that db_gen_read_log's read_sql and fill_sql would be with the id
 * as $1. */
enum db_status db_read_log(struct db_conn *c, const struct db_stmt *read,
                           const struct db_stmt *fill, const char *id, int64_t after, int limit,
                           PGresult **rows, int *usable, struct db_error *err);

#endif
