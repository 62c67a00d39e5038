/* The LISTEN/NOTIFY connection of this process (see listener.h): a thread that holds one libpq
 * connection outside the pool, LISTENs on it, hands other processes' notifications to the
 * caller and sends this process's pending ones as one statement per batch. Names queued while
 * a batch is on the wire, or within coalesce_ms of the last one, go out together in the next. */
#include "db/listener.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "db/clock.h"

#define PENDING_MAX    256 /* distinct names waiting to be sent; more are dropped */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define NOTIFY_STMT    "rowlock_notify" /* the prepared batch statement, per connection */
/* bytes of one NOTIFY's payload that a batch fills with lines (PostgreSQL takes under 8000) */
#define PACK_MAX 7000

struct db_listener {
    struct db_listener_config cfg;
    char *conninfo;
    pthread_t thread;
    int efd; /* publish and stop wake the thread through it */
    atomic_int stop;
    pthread_mutex_t mu; /* guards pending */
    char *pending[PENDING_MAX];
    long counts[PENDING_MAX]; /* how many waiters each may wake; -1: every one */
    int npending;
    PGconn *pg; /* the thread's own */
    atomic_int up;
    /* when the last batch went out, or the last NOTIFY was handed to a write
     * (db_listener_inline): monotonic clock, microseconds */
    atomic_llong last_sent_us;
    atomic_uint_least64_t received, sent, dropped, connects, failures, inlined;
};

static void lst_log(struct db_listener *l, enum db_log_level level, const char *msg,
                    const char *detail)
{
    const char *fields[] = {"detail", detail, NULL};
    if (detail == NULL)
        fields[0] = NULL;
    if (l->cfg.log != NULL)
        l->cfg.log(l->cfg.log_ctx, level, msg, fields);
    else
        fprintf(stderr, "rowlock: %s%s%s\n", msg, detail ? ": " : "", detail ? detail : "");
}

static void lst_notice(void *arg, const PGresult *res)
{
    struct db_listener *l = arg;
    db_log_notice(l->cfg.log, l->cfg.log_ctx, res);
}

static void kick(struct db_listener *l)
{
    uint64_t one = 1;
    ssize_t n = write(l->efd, &one, sizeof(one));
    (void)n; /* a full counter already wakes the thread */
}

/* Takes every pending name and its count into names and counts (PENDING_MAX each; the caller
 * frees the names). Returns how many. */
static int take_pending(struct db_listener *l, char **names, long *counts)
{
    pthread_mutex_lock(&l->mu);
    int n = l->npending;
    memcpy(names, l->pending, (size_t)n * sizeof(*names));
    memcpy(counts, l->counts, (size_t)n * sizeof(*counts));
    l->npending = 0;
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* Opens the connection and LISTENs. Returns 0, or -1 with the connection closed. */
static int lst_connect(struct db_listener *l, int quiet)
{
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", l->cfg.connect_timeout_s);
    /* target_session_attrs as the pool's (pool.c): LISTEN and NOTIFY need the primary */
    const char *keys[] = {"application_name",
                          "keepalives",
                          "keepalives_idle",
                          "keepalives_interval",
                          "keepalives_count",
                          "tcp_user_timeout",
                          "target_session_attrs",
                          "dbname",
                          "connect_timeout",
                          "application_name",
                          NULL};
    char idle[16], interval[16], count[16], user_timeout[16];
    snprintf(idle, sizeof(idle), "%d", DB_KEEPALIVES_IDLE_S);
    snprintf(interval, sizeof(interval), "%d", DB_KEEPALIVES_INTERVAL_S);
    snprintf(count, sizeof(count), "%d", DB_KEEPALIVES_COUNT);
    snprintf(user_timeout, sizeof(user_timeout), "%d", DB_TCP_USER_TIMEOUT_MS);
    /* the application name comes last as well: ours wins over the connection string's */
    const char *vals[] = {DB_LISTENER_APP_NAME,
                          "1",
                          idle,
                          interval,
                          count,
                          user_timeout,
                          "read-write",
                          l->conninfo,
                          timeout,
                          DB_LISTENER_APP_NAME,
                          NULL};
    l->pg = PQconnectdbParams(keys, vals, 1);
    PGresult *r = NULL;
    if (l->pg != NULL && PQstatus(l->pg) == CONNECTION_OK) {
        /* the server's notices (a "terminating connection", say) go to the log, not stderr */
        PQsetNoticeReceiver(l->pg, lst_notice, l);
        /* A batch announces writes that are committed already, and a lost one only delays a
         * waiter until its re-check: its commit need not wait for the WAL flush, nor for a
         * synchronous standby. So it holds PostgreSQL's database-wide notify lock for the
         * commit alone, and a stalled standby does not stall the wake-ups (latency.sh) */
        r = PQexec(l->pg, "SET synchronous_commit = off; LISTEN " DB_LISTENER_CHANNEL
                          "; LISTEN " DB_LISTENER_CHANNEL_ALL);
        if (r != NULL && PQresultStatus(r) == PGRES_COMMAND_OK) {
            /* prepared once a connection: a batch is then bound and run, not parsed and planned,
             * which takes that time off every notification's way to the other processes */
            PQclear(r);
            r = PQprepare(l->pg, NOTIFY_STMT,
                          "SELECT pg_notify('" DB_LISTENER_CHANNEL "', c) "
                          "FROM unnest($1::text[]) AS c",
                          1, NULL);
        }
    }
    if (r != NULL && PQresultStatus(r) == PGRES_COMMAND_OK) {
        PQclear(r);
        return 0;
    }
    PQclear(r);
    atomic_fetch_add(&l->failures, 1);
    if (!quiet)
        lst_log(l, DB_LOG_WARN,
                "cross-process wake-ups degraded: cannot LISTEN (long-polls fall back to their "
                "re-check)",
                l->pg ? PQerrorMessage(l->pg) : "out of memory");
    PQfinish(l->pg);
    l->pg = NULL;
    return -1;
}

/* Hands one line of a payload ("<count> <name>", count "*" for every waiter) to on_notify,
 * unless it has any other shape. */
static void deliver_line(struct db_listener *l, char *line)
{
    char *end = NULL;
    char *name = strchr(line, ' ');
    long count = line[0] == '*' ? -1 : strtol(line, &end, 10);
    int valid = name != NULL && name[1] != '\0' &&
                (count == -1 ? line + 1 == name : end == name && count > 0);
    if (valid) {
        atomic_fetch_add(&l->received, 1);
        l->cfg.on_notify(l->cfg.ctx, name + 1, count);
    }
}

/* Hands every notification libpq has read to on_notify, each line of its payload on its own
 * (a batch packs many names into one NOTIFY: send_pending), skipping this process's own but for
 * those on DB_LISTENER_CHANNEL_ALL. */
static void deliver(struct db_listener *l)
{
    int self = PQbackendPID(l->pg);
    PGnotify *n;
    while ((n = PQnotifies(l->pg)) != NULL) {
        if (strcmp(n->relname, DB_LISTENER_CHANNEL_ALL) == 0 ||
            (n->be_pid != self && !db_pool_has_backend(l->cfg.own_pool, n->be_pid)))
            for (char *line = n->extra, *next; line != NULL; line = next) {
                next = strchr(line, '\n');
                if (next != NULL)
                    *next++ = '\0';
                deliver_line(l, line);
            }
        PQfreemem(n);
    }
}

/* Writes the count of a payload, "<count> " ("* " for every waiter), to b (size bytes), as
 * snprintf does. deliver() reads it back. */
static int count_prefix(char *b, size_t size, long count)
{
    return count < 0 ? snprintf(b, size, "* ") : snprintf(b, size, "%ld ", count);
}

/* Packs the lines "<count> <name>" of the n names into payloads of at most PACK_MAX bytes, lines
 * joined by "\n", each NUL-terminated in b (room for every line, its separator and the last NUL)
 * and started at elems[k]. Returns how many payloads (at most n). */
static size_t pack_lines(char *b, const char **elems, char *const *names, const long *counts, int n)
{
    size_t k = 0, len = 0, elem = 0; /* elem: bytes of the payload being filled */
    for (int i = 0; i < n; i++) {
        char prefix[24];
        size_t p = (size_t)count_prefix(prefix, sizeof(prefix), counts[i]);
        size_t line = p + strlen(names[i]);
        if (elem > 0 && elem + 1 + line <= PACK_MAX) {
            b[len++] = '\n';
            elem += 1 + line;
        } else {
            if (elem > 0)
                b[len++] = '\0';
            elems[k++] = b + len;
            elem = line;
        }
        memcpy(b + len, prefix, p);
        memcpy(b + len + p, names[i], line - p);
        len += line;
    }
    b[len] = '\0';
    return k;
}

/* Sends the pending names in one statement (one commit of the notification queue), packed
 * as lines into as few NOTIFYs as PACK_MAX allows: PostgreSQL queues, stores and delivers each
 * NOTIFY to every listener, so writes spread over many resources would otherwise cost one of
 * each per name. The payloads go as one text[] parameter (db_text_array). Returns 0, or -1 when
 * the connection failed. */
static int send_pending(struct db_listener *l)
{
    char *names[PENDING_MAX];
    long counts[PENDING_MAX];
    int n = take_pending(l, names, counts);
    if (n == 0)
        return 0;
    size_t cap = 1;
    for (int i = 0; i < n; i++)
        cap += strlen(names[i]) + 24 + 1; /* the count and a space, then a separator */
    char *lines = malloc(cap), *arr = NULL;
    const char *elems[PENDING_MAX];
    if (lines != NULL) {
        size_t k = pack_lines(lines, elems, names, counts, n);
        arr = db_text_array(elems, k);
    }
    free(lines);
    int rc = 0;
    if (arr == NULL) {
        atomic_fetch_add(&l->dropped, (uint64_t)n);
        goto done;
    }
    const char *params[] = {arr};
    PGresult *r = PQexecPrepared(l->pg, NOTIFY_STMT, 1, params, NULL, NULL, 0);
    if (r != NULL && PQresultStatus(r) == PGRES_TUPLES_OK) {
        atomic_fetch_add(&l->sent, (uint64_t)n);
    } else {
        atomic_fetch_add(&l->dropped, (uint64_t)n);
        atomic_fetch_add(&l->failures, 1);
        rc = PQstatus(l->pg) == CONNECTION_OK ? 0 : -1;
    }
    PQclear(r);
done:
    free(arr);
    for (int i = 0; i < n; i++)
        free(names[i]);
    return rc;
}

/* Waits up to ms for a kick; returns after draining it. */
static void wait_kick(struct db_listener *l, int ms)
{
    struct pollfd p = {l->efd, POLLIN, 0};
    if (poll(&p, 1, ms) > 0) {
        uint64_t v;
        ssize_t n = read(l->efd, &v, sizeof(v));
        (void)n;
    }
}

/* Serves one live connection until it fails or stop is asked. A batch goes out at once when
 * none went out in the last coalesce_ms, else when that much has passed: an idle process
 * announces at once, a busy one at most 1000 / coalesce_ms times a second. */
static void serve(struct db_listener *l)
{
    /* names queued while the connection was down (their kicks were drained by the backoff) go
     * out with the first batch */
    pthread_mutex_lock(&l->mu);
    int pending = l->npending > 0;
    pthread_mutex_unlock(&l->mu);
    while (!atomic_load(&l->stop)) {
        double last_sent = (double)atomic_load(&l->last_sent_us) / 1000.0;
        double wait = pending ? last_sent + l->cfg.coalesce_ms - db_clock_now_ms() : 1000;
        struct pollfd p[2] = {{PQsocket(l->pg), POLLIN, 0}, {l->efd, POLLIN, 0}};
        if (poll(p, 2, wait > 0 ? (int)wait + 1 : 0) < 0 && errno != EINTR)
            return;
        if (p[0].revents != 0) {
            if (!PQconsumeInput(l->pg))
                return;
            deliver(l);
        }
        if (p[1].revents != 0) {
            wait_kick(l, 0);
            pending = 1;
        }
        last_sent = (double)atomic_load(&l->last_sent_us) / 1000.0;
        if (pending && db_clock_now_ms() >= last_sent + l->cfg.coalesce_ms) {
            atomic_store(&l->last_sent_us, (long long)(db_clock_now_ms() * 1000.0));
            pending = 0;
            if (send_pending(l) != 0)
                return;
            deliver(l); /* what arrived while the batch was on the wire */
        }
    }
}

static void *lst_main(void *arg)
{
    struct db_listener *l = arg;
    int backoff = BACKOFF_MIN_MS;
    while (!atomic_load(&l->stop)) {
        if (lst_connect(l, backoff > BACKOFF_MIN_MS) != 0) {
            wait_kick(l, backoff);
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        backoff = BACKOFF_MIN_MS;
        atomic_fetch_add(&l->connects, 1);
        atomic_store(&l->up, 1);
        lst_log(l, DB_LOG_INFO, "cross-process wake-ups: listening", NULL);
        serve(l);
        atomic_store(&l->up, 0);
        if (!atomic_load(&l->stop))
            lst_log(l, DB_LOG_WARN,
                    "cross-process wake-ups degraded: the listening connection was lost "
                    "(reconnecting; long-polls fall back to their re-check)",
                    PQerrorMessage(l->pg));
        PQfinish(l->pg);
        l->pg = NULL;
    }
    return NULL;
}

struct db_listener *db_listener_start(const struct db_listener_config *cfg)
{
    struct db_listener *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->cfg = *cfg;
    l->conninfo = strdup(cfg->conninfo);
    l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&l->mu, NULL);
    if (l->conninfo == NULL || l->efd < 0 || pthread_create(&l->thread, NULL, lst_main, l) != 0) {
        if (l->efd >= 0)
            close(l->efd);
        pthread_mutex_destroy(&l->mu);
        free(l->conninfo);
        free(l);
        return NULL;
    }
    return l;
}

void db_listener_stop(struct db_listener *l)
{
    if (l == NULL || atomic_exchange(&l->stop, 1))
        return;
    kick(l);
    pthread_join(l->thread, NULL);
}

void db_listener_free(struct db_listener *l)
{
    if (l == NULL)
        return;
    db_listener_stop(l);
    for (int i = 0; i < l->npending; i++)
        free(l->pending[i]);
    close(l->efd);
    pthread_mutex_destroy(&l->mu);
    free(l->conninfo);
    free(l);
}

void db_listener_publish(struct db_listener *l, const char *payload, long count)
{
    if (l == NULL)
        return;
    if (!atomic_load(&l->up) || strlen(payload) > DB_LISTENER_MAX_PAYLOAD ||
        strchr(payload, '\n') != NULL) { /* a line of a batch's payload */
        atomic_fetch_add(&l->dropped, 1);
        return;
    }
    pthread_mutex_lock(&l->mu);
    int i = 0, full = l->npending >= PENDING_MAX;
    while (i < l->npending && strcmp(l->pending[i], payload) != 0)
        i++;
    int queued = i < l->npending;
    if (queued) /* coalesced: the waiters both writes may wake */
        l->counts[i] = l->counts[i] < 0 || count < 0 ? -1 : l->counts[i] + count;
    char *copy = queued || full ? NULL : strdup(payload);
    if (copy != NULL) {
        l->pending[l->npending] = copy;
        l->counts[l->npending++] = count < 0 ? -1 : count;
    }
    pthread_mutex_unlock(&l->mu);
    if (copy != NULL)
        kick(l);
    else if (!queued)
        atomic_fetch_add(&l->dropped, 1);
}

int db_listener_inline(struct db_listener *l, const char *name, long count, char *out, size_t size)
{
    if (l == NULL || !atomic_load(&l->up) || strlen(name) > DB_LISTENER_MAX_PAYLOAD ||
        strchr(name, '\n') != NULL)
        return 0;
    int k = count_prefix(out, size, count);
    int n = k < 0 || (size_t)k >= size ? -1 : k + snprintf(out + k, size - (size_t)k, "%s", name);
    if (n < 0 || (size_t)n >= size)
        return 0;
    pthread_mutex_lock(&l->mu);
    long long now = (long long)(db_clock_now_ms() * 1000.0);
    int quiet =
        l->npending == 0 && now >= atomic_load(&l->last_sent_us) + 1000LL * l->cfg.coalesce_ms;
    if (quiet)
        atomic_store(&l->last_sent_us, now);
    pthread_mutex_unlock(&l->mu);
    return quiet;
}

void db_listener_inline_done(struct db_listener *l, int sent)
{
    if (l == NULL)
        return;
    if (sent)
        atomic_fetch_add(&l->inlined, 1);
    else
        atomic_store(&l->last_sent_us, 0);
}

void db_listener_get_stats(struct db_listener *l, struct db_listener_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (l == NULL)
        return;
    out->up = atomic_load(&l->up);
    out->received = atomic_load(&l->received);
    out->sent = atomic_load(&l->sent);
    out->dropped = atomic_load(&l->dropped);
    out->connects = atomic_load(&l->connects);
    out->failures = atomic_load(&l->failures);
    out->inlined = atomic_load(&l->inlined);
}
