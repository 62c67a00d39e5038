/* What every route file shares: the problem codes several families answer, mapping a db/ status
 * to its problem response, and the request validators of routes/params.c. Each family's
 * handlers, route table and own codes live in its own file (see service/family.h). */
#ifndef ROUTES_ROUTES_H
#define ROUTES_ROUTES_H

#include "db/db.h"
#include "service/family.h"
#include "service/http.h"

/* The codes several families answer (the "common" family registers them). */
enum route_problem {
    ROUTE_PC_INVALID_NAME,
    ROUTE_PC_INVALID_KEY,
    ROUTE_PC_INVALID_CONFIG,
    ROUTE_PC_BATCH_TOO_LARGE,
    ROUTE_PC_DATABASE_UNAVAILABLE,
    ROUTE_PC_POOL_EXHAUSTED,
    ROUTE_PC_DATABASE_TIMEOUT,
    ROUTE_PC_DATABASE_BUSY,
    ROUTE_PC_OUTCOME_UNKNOWN,
    ROUTE_PC_COUNT
};
extern const struct svc_problem_info route_problems[ROUTE_PC_COUNT];
#define ROUTE_P(name) (&route_problems[ROUTE_PC_##name])

/* Replies with the problem matching a failed db/ status (503 family, or 500 for hard errors):
 * its detail is a sentence written for people, never the database's text, which is logged with
 * the request id; the SQLSTATE, when there is one, is the problem's "sqlstate" member. */
enum svc_outcome route_db_problem(struct svc_request *req, enum db_status st,
                                  const struct db_error *err);
/* {"sqlstate": err's SQLSTATE} for a problem's extra members (the caller's), or NULL when err
 * has none. */
json_t *route_sqlstate_ext(const struct db_error *err);

struct svc_app;
struct svc_buf;

/* Validation helpers of routes/params.c. Body members: 1 when valid (absent: def), else 0 with a
 * sentence in why. Query parameters: 0 when valid, else -1 after replying 400 (in *out). */
int route_only_members(json_t *obj, const char *const *allowed, char *why, size_t size);
int route_int_member(json_t *obj, const char *name, long long min, long long max, long long def,
                     int nullable, long long *value, char *why, size_t size);
int route_num_member(json_t *obj, const char *name, double min, double max, double def,
                     double *value, char *why, size_t size);
int route_int_query(struct svc_request *req, const char *name, long long min, long long max,
                    long long def, long long *value, enum svc_outcome *out);
int route_cursor_query(struct svc_request *req, const char **after, enum svc_outcome *out);
/* A resource name (queue, topic, ledger, producer, consumer): 0 when value is a valid name, else
 * -1 after replying 400 invalid_name (in *out) with "<what> name: <why>". */
int route_valid_name(struct svc_request *req, const char *value, const char *what,
                     enum svc_outcome *out);
/* The path parameter param as a valid name (see route_valid_name), or NULL after replying 400. */
const char *route_name_param(struct svc_request *req, const char *param, enum svc_outcome *out);

#endif
