/* Cross-process wake-ups: one PostgreSQL connection per process, outside the pool, that LISTENs
 * on DB_LISTENER_CHANNEL and sends the NOTIFYs of this process's writes after they committed
 * (never inside a writer's transaction: a NOTIFY there serialises committing writers). Its own
 * thread reconnects with backoff. Payloads are resource names only; which waiters they wake is
 * the caller's (on_notify). Knows nothing of HTTP. */
#ifndef DB_LISTENER_H
#define DB_LISTENER_H

#include <stdint.h>

#include "db/pool.h"

#define DB_LISTENER_CHANNEL "rowlock_wake"
/* Wake-ups the database sends itself, from a statement or trigger that made work claimable (a
 * parent's end releasing its children: the trigger of migration 22): delivered to every process,
 * this one included, as no process's code knows of the work to wake for it. */
#define DB_LISTENER_CHANNEL_ALL "rowlock_wake_all"
/* application_name of the listening connection (operators can tell it from the pool's) */
#define DB_LISTENER_APP_NAME "rowlock-listener"
/* longest resource name a notification carries (PostgreSQL's payload limit is 8000 bytes) */
#define DB_LISTENER_MAX_PAYLOAD 1024

/* Called on the listener's thread for each notification from another process: the resource
 * name (borrowed) and how many of its waiters the writes behind it may wake (-1: every one). */
typedef void (*db_listener_notify_fn)(void *ctx, const char *name, long count);

struct db_listener_config {
    const char *conninfo; /* libpq URI or key=value string */
    int connect_timeout_s;
    /* least time between two batches of NOTIFYs (the first after a quiet spell goes at once) */
    int coalesce_ms;
    db_listener_notify_fn on_notify;
    void *ctx;
    /* this process's pool (may be NULL): notifications its connections sent inside their
     * writes' transactions (db_listener_inline) are this process's own, not delivered */
    struct db_pool *own_pool;
    db_log_fn log; /* NULL: lines go to stderr as plain text */
    void *log_ctx;
};

struct db_listener_stats {
    int up;            /* LISTEN is in place now */
    uint64_t received; /* names announced by other processes (a NOTIFY's lines) */
    uint64_t sent;     /* names announced (one per distinct pending resource; many a NOTIFY) */
    uint64_t dropped;  /* resources not announced: the listener was down or the set full */
    uint64_t connects; /* LISTEN connections made, the first and every reconnect */
    uint64_t failures; /* connection attempts or sends that failed */
    uint64_t inlined;  /* NOTIFYs sent by a write's own transaction (db_listener_inline) */
};

struct db_listener;

/* Starts the thread (it connects in the background: a database that cannot be reached delays
 * nothing). Returns NULL when out of memory or the thread cannot start. */
struct db_listener *db_listener_start(const struct db_listener_config *cfg);
/* Stops the thread and closes the connection: no on_notify after it returns; publish stays safe
 * (and does nothing). NULL-safe, idempotent. */
void db_listener_stop(struct db_listener *l);
/* Stops it if needed and frees it: nothing may publish any more. NULL-safe. */
void db_listener_free(struct db_listener *l);
/* Queues payload (a resource name, copied) to be announced to the other processes with count
 * (how many waiters it may wake, -1: every one), coalesced with the same name queued before it
 * was sent (the counts add up). Sent as the line "<count> <name>" ("*" for -1), packed with the
 * batch's other lines into as few NOTIFYs as fit; a name holding a newline is not sent. Never
 * blocks on the database; a name that cannot be queued is counted as dropped (the other
 * processes' re-check still finds the write). NULL-safe. */
void db_listener_publish(struct db_listener *l, const char *payload, long count);
/* For a write about to run in a quiet spell: when the listener is up, nothing is queued and no
 * batch went out in the last coalesce_ms, writes the NOTIFY payload for name and count
 * ("<count> <name>") into out (size bytes) and returns 1: the write's own transaction sends it
 * (SELECT pg_notify(DB_LISTENER_CHANNEL, out)), which saves the hand-off to the listener and a
 * statement of its own on the way to another process's waiters. The spell counts as ended: what
 * is published in the next coalesce_ms waits for the batch after it, so that under load every
 * NOTIFY still goes out through the listener, coalesced, and committing writers never queue
 * behind one another's NOTIFY (the lock it takes at COMMIT). Returns 0 otherwise: publish after
 * the commit as usual. After a 1, call db_listener_inline_done once the write has ended. */
int db_listener_inline(struct db_listener *l, const char *name, long count, char *out, size_t size);
/* Ends what db_listener_inline started: sent 1 when the write's transaction committed with the
 * NOTIFY (counted in inlined); 0 when it did not send it (the database declined, or the write
 * failed): then the spell is open again, so that a name published now goes out at once, as if
 * it had never been asked. NULL-safe. */
void db_listener_inline_done(struct db_listener *l, int sent);
void db_listener_get_stats(struct db_listener *l, struct db_listener_stats *out);

#endif
