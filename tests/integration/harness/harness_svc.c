/* The program's database and its service (harness_svc.h): the setup, teardown and calls every
 * test program would otherwise write for itself. Nothing here knows a resource family. */
#include "harness_svc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

struct th_service th_svc;
char th_svc_dburl[1024];

int th_svc_db(const char *name)
{
    return th_db_create(name, th_svc_dburl, sizeof(th_svc_dburl));
}

int th_svc_run(const char *const *env)
{
    return th_service_start(&th_svc, th_svc_dburl, env);
}

int th_svc_start(const char *name, const char *const *env)
{
    return th_svc_db(name) == 0 ? th_svc_run(env) : -1;
}

static PGconn *pg;

PGconn *th_svc_pg(void)
{
    if (pg == NULL)
        pg = th_pg(th_svc_dburl);
    return pg;
}

int64_t th_svc_sql_int(const char *sql)
{
    PGresult *r = th_sql(th_svc_pg(), sql);
    int64_t v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

int64_t th_svc_sql_intf(const char *fmt, ...)
{
    char sql[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof(sql));
    return th_svc_sql_int(sql);
}

int th_svc_teardown(void **state)
{
    (void)state;
    PQfinish(pg);
    pg = NULL;
    if (th_svc.pid <= 0)
        return 0;
    return th_service_stop(&th_svc) == 0 ? 0 : -1;
}

json_t *th_svc_call(const char *method, const char *path, const char *body, long want)
{
    return th_call(th_svc.port, method, path, body, want);
}

json_t *th_svc_get(const char *path)
{
    return th_get_json(th_svc.port, path);
}

void th_svc_get_problem(const char *path, long status, const char *code)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, status, code);
    th_response_free(&r);
}

void th_client_init(struct th_client *c)
{
    memset(c, 0, sizeof(*c));
    c->curl = curl_easy_init();
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, th_buf_write);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &c->buf);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
}

void th_client_free(struct th_client *c)
{
    curl_easy_cleanup(c->curl);
    free(c->buf.data);
}

long th_client_call(struct th_client *c, const char *method, const char *path, const char *body,
                    json_t **out)
{
    return th_client_call_port(c, th_svc.port, method, path, body, out);
}

long th_client_call_port(struct th_client *c, int port, const char *method, const char *path,
                         const char *body, json_t **out)
{
    char url[256];
    struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Expect:");
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    c->buf.len = 0;
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body ? body : "");
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? strlen(body) : 0));
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hl);
    CURLcode rc = curl_easy_perform(c->curl);
    long status = -1;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hl);
    *out = rc == CURLE_OK && c->buf.data ? json_loadb(c->buf.data, c->buf.len, 0, NULL) : NULL;
    return status;
}
