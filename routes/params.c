/* Validation helpers every route file shares: JSON body members (allowed names, bounded
 * integers and numbers) and query parameters (bounded integers, UTF-8 cursors). Each returns
 * success, or says why in a sentence for the problem's detail. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routes/json_util.h"
#include "routes/routes.h"
#include "service/utf8.h"

int route_only_members(json_t *obj, const char *const *allowed, char *why, size_t size)
{
    const char *name;
    json_t *v;
    json_object_foreach(obj, name, v)
    {
        size_t i = 0;
        while (allowed[i] && strcmp(allowed[i], name) != 0)
            i++;
        if (allowed[i] == NULL) {
            snprintf(why, size, "unknown member \"%s\"", name);
            return 0;
        }
    }
    return 1;
}

int route_int_member(json_t *obj, const char *name, long long min, long long max, long long def,
                     int nullable, long long *value, char *why, size_t size)
{
    json_t *v = json_object_get(obj, name);
    *value = def;
    if (v == NULL || (nullable && json_is_null(v))) {
        if (v != NULL)
            *value = 0;
        return 1;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        snprintf(why, size, "\"%s\" must be an integer from %lld to %lld%s", name, min, max,
                 nullable ? " (or null)" : "");
        return 0;
    }
    *value = json_integer_value(v);
    return 1;
}

int route_num_member(json_t *obj, const char *name, double min, double max, double def,
                     double *value, char *why, size_t size)
{
    json_t *v = json_object_get(obj, name);
    *value = def;
    if (v == NULL)
        return 1;
    if (!json_is_number(v) || json_number_value(v) < min || json_number_value(v) > max) {
        snprintf(why, size, "\"%s\" must be a number from %g to %g", name, min, max);
        return 0;
    }
    *value = json_number_value(v);
    return 1;
}

int route_int_query(struct svc_request *req, const char *name, long long min, long long max,
                    long long def, long long *value, enum svc_outcome *out)
{
    const char *v = svc_req_query(req, name);
    *value = def;
    if (v == NULL)
        return 0;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    /* strtoll would skip leading white space and take a '+': the text must be the number */
    const char *digit = v[0] == '-' ? v + 1 : v;
    if (*digit < '0' || *digit > '9' || *end != '\0' || errno == ERANGE || n < min || n > max) {
        *out = svc_reply_problem(req, SVC_P(INVALID_PARAMETER),
                                 "%s must be an integer from %lld to %lld", name, min, max);
        return -1;
    }
    *value = n;
    return 0;
}

int route_cursor_query(struct svc_request *req, const char **after, enum svc_outcome *out)
{
    *after = svc_req_query(req, "after");
    if (*after != NULL && !svc_utf8_valid(*after, strlen(*after))) {
        *out = svc_reply_problem(req, SVC_P(INVALID_PARAMETER), "after must be valid UTF-8");
        return -1;
    }
    return 0;
}

int route_valid_name(struct svc_request *req, const char *value, const char *what,
                     enum svc_outcome *out)
{
    char why[160];
    if (route_name_ok(value, why, sizeof(why)))
        return 0;
    *out = svc_reply_problem(req, ROUTE_P(INVALID_NAME), "%s name: %s", what, why);
    return -1;
}

const char *route_name_param(struct svc_request *req, const char *param, enum svc_outcome *out)
{
    const char *v = svc_req_param(req, param);
    return route_valid_name(req, v, param, out) == 0 ? v : NULL;
}
