/* The ledger tests' requests (ledger_client.h). Knows the ledger REST shapes, no test's
 * expectations. */
#include "ledger_client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

int lc_call(const char *method, const char *path, const json_t *body, struct th_response *r)
{
    return th_http_json(th_svc.port, method, path, body, r);
}

void lc_ledger_create(const char *l)
{
    char path[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/ledgers/%s", l);
    json_t *body = json_object();
    assert_int_equal(lc_call("PUT", path, body, &r), 0);
    json_decref(body);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
}

json_t *lc_ledger_counts(const char *l)
{
    char path[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/ledgers/%s", l);
    assert_int_equal(lc_call("GET", path, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *c = json_deep_copy(json_object_get(r.json, "counts"));
    json_object_set(c, "watermark", json_object_get(r.json, "watermark"));
    th_response_free(&r);
    return c;
}

json_t *lc_tx_new(const char *digest)
{
    return json_pack("{s:s, s:[], s:[], s:[], s:[], s:[]}", "digest", digest, "inputs", "writes",
                     "deletes", "displays", "events");
}

json_t *lc_tx_input(json_t *t, const char *id, json_int_t v)
{
    json_array_append_new(json_object_get(t, "inputs"),
                          json_pack("{s:s, s:I}", "object_id", id, "version", v));
    return t;
}

json_t *lc_tx_events(json_t *t, int n)
{
    const char *digest = json_string_value(json_object_get(t, "digest"));
    for (int k = 0; k < n; k++)
        json_array_append_new(
            json_object_get(t, "events"),
            json_pack("{s:s, s:{s:s, s:i}}", "type", "moved", "data", "digest", digest, "k", k));
    return t;
}

void lc_events_each(const char *l, void (*fn)(void *arg, json_t *e), void *arg)
{
    json_int_t after = 0;
    for (;;) {
        char path[256];
        struct th_response r;
        snprintf(path, sizeof(path), "/ledgers/%s/events?after=%lld&limit=1000", l,
                 (long long)after);
        assert_int_equal(lc_call("GET", path, NULL, &r), 0);
        assert_int_equal(r.status, 200);
        json_t *events = json_object_get(r.json, "events"), *e;
        size_t i, n = json_array_size(events);
        json_array_foreach(events, i, e)
        {
            fn(arg, e);
        }
        after = json_integer_value(json_object_get(r.json, "next"));
        th_response_free(&r);
        if (n == 0)
            break;
    }
}

void lc_events_by_digest(void *by, json_t *e)
{
    const char *d = json_string_value(json_object_get(e, "digest"));
    if (json_object_get(by, d) == NULL)
        json_object_set_new(by, d, json_array());
    json_array_append_new(json_object_get(by, d),
                          json_pack("{s:O, s:O, s:O}", "index", json_object_get(e, "index"), "type",
                                    json_object_get(e, "type"), "data",
                                    json_object_get(e, "data")));
}
