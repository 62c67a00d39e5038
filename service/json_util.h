/* TRANSITIONAL (issue 16; removed once routes/queues.c and routes/ledgers.c are converted): the
 * former names of routes/json_util.h and service/utf8.h. */
#ifndef SVC_JSON_UTIL_H
#define SVC_JSON_UTIL_H

#include "routes/json_util.h"
#include "service/utf8.h"

#define svc_merge_patch   route_merge_patch
#define svc_valid_name    route_name_ok
#define svc_valid_key     route_key_ok
#define svc_rfc3339_valid route_rfc3339_ok

#endif
