/* Schedules: a cron expression in a time zone that enqueues one job into a queue at each of its
 * ticks (rowlock.schedules, migration 14). The firing protocol: a pass locks due schedules
 * (FOR UPDATE SKIP LOCKED), works out each one's ticks (db_schedule_plan), then enqueues the
 * ticks' jobs, records the ticks (rowlock.schedule_fires, primary key schedule and tick: a
 * second attempt at a tick is a duplicate) and moves the schedules on, in one statement of the
 * same transaction. The cron arithmetic is db/cron.h's, the zones db/tzfile.h's. */
#ifndef DB_SCHEDULES_H
#define DB_SCHEDULES_H

#include <stddef.h>
#include <stdint.h>

#include "db/cron.h"
#include "db/db.h"
#include "db/pool.h"
#include "db/tzfile.h"

struct db_upkeep;

#define DB_SCHEDULE_FIRES_MAX    1000 /* ticks one schedule fires in one pass, at most */
#define DB_SCHEDULE_CATCH_UP_MAX 1000 /* the largest catch_up_max */
#define DB_SCHEDULE_GRACE_MAX    86400
#define DB_SCHEDULE_JITTER_MAX   3600
#define DB_SCHEDULE_HISTORY      10  /* fires kept (and shown) per schedule */
#define DB_SCHEDULE_PASS_MAX     100 /* schedules one firing transaction takes */
/* Jobs one firing transaction makes, about (a schedule's fires are never split): after a long
 * outage with catch-up, a few transactions of this size rather than one that outlasts the
 * statement deadline and fails every time. */
#define DB_SCHEDULE_TX_FIRES   2000
#define DB_SCHEDULE_NEXT_SHOWN 5 /* upcoming ticks a read shows */
/* How many ticks one pass may walk through for one schedule (misfires after a long outage):
 * a schedule with more ticks behind it than this goes on from there in the next pass, the ticks
 * walked all skipped (the newest misfires, which catch-up fires, are still ahead). */
#define DB_SCHEDULE_WALK_MAX 10000

enum db_misfire { DB_MISFIRE_SKIP, DB_MISFIRE_CATCH_UP };
const char *db_misfire_name(enum db_misfire m);
/* 0 with *out set when name is "skip" or "catch_up", else -1. */
int db_misfire_parse(const char *name, enum db_misfire *out);

struct db_schedule_config {
    const char *cron;      /* its text, as given (checked by db_cron_parse) */
    const char *time_zone; /* IANA name (checked by db_tz_get) */
    const char *queue;
    const char *payload; /* JSON text */
    int priority;
    int max_attempts; /* 0: the queue's */
    enum db_misfire misfire;
    int catch_up_max;          /* 1 .. DB_SCHEDULE_CATCH_UP_MAX */
    int misfire_grace_seconds; /* 1 .. DB_SCHEDULE_GRACE_MAX */
    int jitter_seconds;        /* 0 .. DB_SCHEDULE_JITTER_MAX */
    int paused;
};

/* A fire: the tick (or the moment of a manual fire), when its job went in, the job. */
struct db_schedule_fire {
    char fire_at[DB_TIME_TEXT], enqueued_at[DB_TIME_TEXT];
    int64_t job_id;
    int manual;
};

/* A schedule as read. payload is owned (db_schedule_clear). */
struct db_schedule {
    int64_t id;
    char name[DB_NAME_SIZE];
    char cron[DB_CRON_TEXT_MAX + 1];
    char time_zone[DB_TZ_NAME_MAX + 1];
    char queue[DB_NAME_SIZE];
    char *payload;
    int priority, max_attempts; /* max_attempts 0: the queue's */
    enum db_misfire misfire;
    int catch_up_max, misfire_grace_seconds, jitter_seconds, paused;
    int64_t next_fire_at, last_fire_at; /* UTC seconds; -1 when none */
    int64_t fired, skipped;
    char created_at[DB_TIME_TEXT], updated_at[DB_TIME_TEXT];
    struct db_schedule_fire fires[DB_SCHEDULE_HISTORY]; /* newest first (db_schedules_get) */
    int nfires;
};
void db_schedule_clear(struct db_schedule *s);

enum db_schedule_verdict {
    DB_S_OK,
    DB_S_CREATED,
    DB_S_NOT_FOUND,
    DB_S_QUEUE_NOT_FOUND, /* put: the queue named does not exist */
};

/* Creates or replaces schedule name; c is cfg->cron parsed, z cfg->time_zone loaded. The next
 * tick is the first after now, except for a replace that keeps the expression and the zone of
 * a running schedule, which keeps its next tick; a paused schedule has none. */
enum db_status db_schedules_put(struct db_pool *pool, const char *name,
                                const struct db_schedule_config *cfg, const struct db_cron *c,
                                const struct db_tz *z, struct db_schedule *out,
                                enum db_schedule_verdict *verdict, struct db_error *err);
/* One schedule, with its newest fires. */
enum db_status db_schedules_get(struct db_pool *pool, const char *name, struct db_schedule *out,
                                enum db_schedule_verdict *verdict, struct db_error *err);
/* Schedules named after `after` (NULL: from the first), in name order, at most limit (no fires). */
typedef void (*db_schedule_each)(const struct db_schedule *s, void *ctx);
enum db_status db_schedules_list(struct db_pool *pool, const char *after, int limit,
                                 db_schedule_each each, void *ctx, struct db_error *err);
enum db_status db_schedules_delete(struct db_pool *pool, const char *name,
                                   enum db_schedule_verdict *verdict, struct db_error *err);
/* Fire now: one job, recorded as a manual fire at this moment; the next tick stays. */
enum db_status db_schedules_fire_now(struct db_pool *pool, const char *name,
                                     struct db_schedule_fire *out, char *queue,
                                     enum db_schedule_verdict *verdict, struct db_error *err);

/* What one schedule's due ticks come to, given the time now: the ticks to fire (oldest first),
 * how many were misfires (handled later than the grace) and how many of those were skipped,
 * and the tick the schedule goes on from (-1: none: the expression fires no more). */
struct db_schedule_plan {
    int64_t fires[DB_SCHEDULE_FIRES_MAX];
    int nfires;
    int64_t misfires, skipped;
    int64_t next;
};
/* Plans the ticks from due (the schedule's next tick, <= now) up to now: a tick within grace
 * seconds of now fires; an older one is a misfire, skipped under DB_MISFIRE_SKIP, and under
 * DB_MISFIRE_CATCH_UP fired when it is one of the catch_up_max newest misfires (the older are
 * skipped). Never more than DB_SCHEDULE_FIRES_MAX fires or DB_SCHEDULE_WALK_MAX ticks walked:
 * next is then the first tick not handled, still due. Pure. */
void db_schedule_plan(const struct db_cron *c, const struct db_tz *z, int64_t due, double now,
                      enum db_misfire misfire, int catch_up_max, int grace_s,
                      struct db_schedule_plan *out);

/* What a firing pass did, for the caller's wakes and metrics. */
struct db_schedules_fired {
    int64_t fires, misfires, skipped;
    /* the lag of each fire (seconds from its tick to the transaction's now), up to
     * DB_SCHEDULE_PASS_MAX of them */
    double lags[DB_SCHEDULE_PASS_MAX];
    int nlags;
    char queues[DB_SCHEDULE_PASS_MAX][DB_NAME_SIZE]; /* the queues that got jobs, each once */
    int nqueues;
    int full; /* the pass took DB_SCHEDULE_PASS_MAX schedules: more may be due */
};
/* One firing transaction over at most DB_SCHEDULE_PASS_MAX due schedules. A schedule whose
 * expression or zone no longer loads (the system's database changed) is paused. */
enum db_status db_schedules_fire_due(struct db_pool *pool, struct db_schedules_fired *out,
                                     struct db_error *err);

/* The schedules' upkeep (db/upkeep.h): trims each fired schedule's history to its newest
 * DB_SCHEDULE_HISTORY fires. */
extern const struct db_upkeep db_schedules_upkeep;

/* Formats UTC seconds t as the API writes times (DB_TS) into buf (DB_TIME_TEXT bytes). */
void db_time_text(int64_t t, char *buf, size_t size);

#endif
