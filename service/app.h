/* What every handler can reach through svc_req_app: configuration, the database pool and the
 * authentication set. Built and owned by main; handlers only read it. */
#ifndef SVC_APP_H
#define SVC_APP_H

#include <time.h>

#include "service/auth.h"
#include "service/config.h"

struct db_listener;
struct svc_family;
struct db_pool;
struct svc_server;

struct svc_app {
    const struct svc_config *config;
    struct db_pool *pool;
    const struct svc_auth *auth; /* NULL: running open */
    time_t started_at;
    /* set once listening, by main while the workers already run: atomic */
    struct svc_server *_Atomic server;
    /* the families served (see service/family.h), for /metrics */
    const struct svc_family *const *families;
    size_t nfamilies;
    /* cross-process wake-ups (ROWLOCK_NOTIFY); NULL when off. Set once listening: atomic */
    struct db_listener *_Atomic listener;
};

#endif
