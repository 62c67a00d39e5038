/* The route table main hands to the HTTP server, and helpers every route file shares: mapping a
 * db/ status to its problem response. Each resource's handlers live in their own file. */
#ifndef ROUTES_ROUTES_H
#define ROUTES_ROUTES_H

#include "db/db.h"
#include "service/http.h"

extern const struct svc_route routes_table[];
extern const size_t routes_count;

/* Replies with the problem matching a failed db/ status (503 family, or 500 for hard errors,
 * which are logged with their SQLSTATE). */
enum svc_outcome route_db_problem(struct svc_request *req, enum db_status st,
                                  const struct db_error *err);

/* Handlers of routes/ops.c. */
enum svc_outcome route_healthz(struct svc_request *req);
enum svc_outcome route_readyz(struct svc_request *req);
enum svc_outcome route_metrics(struct svc_request *req);
enum svc_outcome route_openapi(struct svc_request *req);

#endif
