/* The audit trail of a running rowlock with a tokens file: each operator action (a topic's and a
 * queue's create and delete, a job's cancel and retry, a SIGHUP reload of the tokens) writes
 * exactly one "audit" line naming the token's name, the action, the resource and the outcome;
 * admin actions refused (a read token's 403, no token's and an unknown token's 401) are audited
 * with their outcome; reads and writes of data are not; the lines stay while the log level is
 * error; no token's secret is ever logged. With no tokens file the token is _anonymous, and a
 * path parameter too long for any rule is written cut. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define SECRET "-secret-0123456789"
#define ADMIN  "admin" SECRET
#define READER "reader" SECRET
#define WRITER "writer" SECRET

static char tokens[] = "/tmp/rowlock-test-audit-tokens-XXXXXX";
static char level[] = "/tmp/rowlock-test-audit-level-XXXXXX";

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    int a = mkstemp(tokens), b = mkstemp(level);
    if (a < 0 || b < 0)
        return -1;
    close(a);
    close(b);
    return th_svc_db("audit_log");
}

static int teardown(void **state)
{
    unlink(tokens);
    unlink(level);
    return 0;
}

static void nap_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000 * 1000};
    nanosleep(&t, NULL);
}

/* The audit lines logged so far whose text holds needle: how many, and the last (parsed, the
 * caller's) in *last when last is not NULL. */
static int audit_lines(struct th_service *svc, const char *needle, json_t **last)
{
    int n = 0;
    if (last != NULL)
        *last = NULL;
    pthread_mutex_lock(&svc->proc->mu);
    for (const char *p = svc->proc->log_notes; *p != '\0';) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *line = strndup(p, len);
        if (strstr(line, "\"msg\":\"audit\"") != NULL && strstr(line, needle) != NULL) {
            n++;
            if (last != NULL) {
                json_decref(*last);
                *last = json_loads(line, 0, NULL);
            }
        }
        free(line);
        p += len + (end != NULL);
    }
    pthread_mutex_unlock(&svc->proc->mu);
    return n;
}

/* Sends method path (body: JSON text or NULL) with the token (NULL: no Authorization) under
 * request id rid; asserts the status. */
static void call(struct th_service *svc, const char *token, const char *rid, const char *method,
                 const char *path, const char *body, long want, json_t **answer)
{
    char auth[128], id[128];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token ? token : "");
    snprintf(id, sizeof(id), "X-Request-Id: %s", rid);
    const char *headers[] = {id, "Content-Type: application/json", token ? auth : NULL, NULL};
    struct th_response r;
    assert_int_equal(th_http(svc->port, method, path, headers, body, body ? strlen(body) : 0, &r),
                     0);
    if (r.status != want)
        fail_msg("%s %s answered %ld, expected %ld: %s", method, path, r.status, want, r.body);
    if (answer != NULL)
        *answer = json_incref(r.json);
    th_response_free(&r);
}

/* The audit line of request rid: exactly one, once the request completed (waits up to 5 s for
 * it, then a little longer for a second that must not come). Returns it (the caller's). */
static json_t *audited(struct th_service *svc, const char *rid)
{
    char needle[160];
    snprintf(needle, sizeof(needle), "\"request_id\":\"%s\"", rid);
    for (int i = 0; i < 500 && audit_lines(svc, needle, NULL) == 0; i++)
        nap_ms(10);
    nap_ms(50);
    json_t *line = NULL;
    int n = audit_lines(svc, needle, &line);
    if (n != 1)
        fail_msg("request %s has %d audit lines, expected exactly 1", rid, n);
    assert_non_null(line);
    return line;
}

/* Asserts a string member of an audit line (want NULL: the member is absent). */
static void member_is(const json_t *line, const char *key, const char *want)
{
    const json_t *v = json_object_get(line, key);
    if (want == NULL) {
        if (v != NULL)
            fail_msg("audit line has %s, expected none: %s", key, json_dumps(line, 0));
        return;
    }
    if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0)
        fail_msg("audit line's %s is not \"%s\": %s", key, want, json_dumps(line, 0));
}

/* The audited request rid: one line with these members, its status and outcome. */
static void expect_audit(struct th_service *svc, const char *rid, const char *token,
                         const char *action, const char *family, const char *resource, long status,
                         const char *code)
{
    json_t *line = audited(svc, rid);
    member_is(line, "level", "info");
    member_is(line, "token", token);
    member_is(line, "action", action);
    member_is(line, "family", family);
    member_is(line, "resource", resource);
    assert_int_equal(json_integer_value(json_object_get(line, "status")), status);
    member_is(line, "outcome", status < 400 ? "done" : "refused");
    member_is(line, "code", code);
    json_decref(line);
}

/* Request rid completed (its access line is written) without an audit line. */
static void expect_no_audit(struct th_service *svc, const char *rid)
{
    char needle[160];
    snprintf(needle, sizeof(needle), "\"request_id\":\"%s\"", rid);
    for (int i = 0; i < 500 && !th_service_logged(svc, needle); i++)
        nap_ms(10);
    assert_true(th_service_logged(svc, needle));
    nap_ms(50);
    if (audit_lines(svc, needle, NULL) != 0)
        fail_msg("request %s was audited", rid);
}

/* SIGHUP, and the reload's audit line: exactly one, with this outcome. */
static json_t *hup_audited(struct th_service *svc, int before, const char *outcome)
{
    th_service_signal(svc, SIGHUP);
    const char *needle = "\"action\":\"reload\"";
    for (int i = 0; i < 500 && audit_lines(svc, needle, NULL) == before; i++)
        nap_ms(10);
    nap_ms(50);
    json_t *line = NULL;
    assert_int_equal(audit_lines(svc, needle, &line), before + 1);
    member_is(line, "token", "_signal");
    member_is(line, "family", "tokens");
    member_is(line, "outcome", outcome);
    return line;
}

static void no_secret_logged(struct th_service *svc)
{
    assert_false(th_service_logged(svc, SECRET));
    assert_false(th_service_logged(svc, "unknown-token"));
}

/* A job of queue q cancelled, then retried, each by the admin token. */
static void job_cancel_and_retry(struct th_service *svc)
{
    json_t *job = NULL;
    call(svc, WRITER, "enqueue", "POST", "/queues/audit-q/jobs", "{\"payload\":{}}", 201, &job);
    char path[128], id[32];
    snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(json_object_get(job, "id")));
    json_decref(job);
    expect_no_audit(svc, "enqueue");
    snprintf(path, sizeof(path), "/queues/audit-q/jobs/%s", id);
    call(svc, ADMIN, "cancel", "DELETE", path, NULL, 200, NULL);
    json_t *line = audited(svc, "cancel");
    member_is(line, "token", "deployer");
    member_is(line, "action", "DELETE /queues/{queue}/jobs/{id}");
    member_is(line, "resource", "audit-q");
    member_is(line, "job", id);
    json_decref(line);
    snprintf(path, sizeof(path), "/queues/audit-q/jobs/%s/retry", id);
    call(svc, ADMIN, "retry", "POST", path, NULL, 200, NULL);
    line = audited(svc, "retry");
    member_is(line, "action", "POST /queues/{queue}/jobs/{id}/retry");
    member_is(line, "outcome", "done");
    member_is(line, "job", id);
    json_decref(line);
}

static void operator_actions_are_audited_once_by_token_name(void **state)
{
    put(tokens,
        ADMIN " admin name=deployer\n" READER " read name=dashboard\n" WRITER " write,read\n");
    put(level, "info\n");
    char env_tokens[128], env_level[128];
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens);
    snprintf(env_level, sizeof(env_level), "ROWLOCK_LOG_LEVEL_FILE=%s", level);
    const char *env[] = {env_tokens, env_level, NULL};
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);

    call(&svc, ADMIN, "topic-put", "PUT", "/topics/audit-t", "{}", 201, NULL);
    expect_audit(&svc, "topic-put", "deployer", "PUT /topics/{topic}", "topics", "audit-t", 201,
                 NULL);
    call(&svc, READER, "topic-read", "GET", "/topics/audit-t", NULL, 200, NULL);
    expect_no_audit(&svc, "topic-read");
    call(&svc, READER, "topic-forbidden", "DELETE", "/topics/audit-t", NULL, 403, NULL);
    expect_audit(&svc, "topic-forbidden", "dashboard", "DELETE /topics/{topic}", "topics",
                 "audit-t", 403, "forbidden");
    call(&svc, NULL, "topic-no-token", "PUT", "/topics/audit-x", "{}", 401, NULL);
    expect_audit(&svc, "topic-no-token", "_none", "PUT /topics/{topic}", "topics", "audit-x", 401,
                 "unauthorized");
    call(&svc, "unknown-token-0123456789", "topic-bad-token", "PUT", "/topics/audit-x", "{}", 401,
         NULL);
    expect_audit(&svc, "topic-bad-token", "_invalid", "PUT /topics/{topic}", "topics", "audit-x",
                 401, "unauthorized");
    call(&svc, ADMIN, "topic-delete", "DELETE", "/topics/audit-t", NULL, 200, NULL);
    expect_audit(&svc, "topic-delete", "deployer", "DELETE /topics/{topic}", "topics", "audit-t",
                 200, NULL);
    call(&svc, ADMIN, "topic-gone", "DELETE", "/topics/audit-t", NULL, 404, NULL);
    expect_audit(&svc, "topic-gone", "deployer", "DELETE /topics/{topic}", "topics", "audit-t", 404,
                 "topic_not_found");

    /* the log level file says error: audit lines stay, access lines stop */
    put(level, "error\n");
    put(tokens, ADMIN " admin name=deployer\n" READER " read name=dashboard\n" WRITER
                      " write,read name=backend\n");
    json_t *line = hup_audited(&svc, 0, "done");
    assert_int_equal(json_integer_value(json_object_get(line, "tokens")), 3);
    member_is(line, "resource", tokens);
    json_decref(line);

    call(&svc, ADMIN, "queue-put", "PUT", "/queues/audit-q", "{\"retention_seconds\":60}", 201,
         NULL);
    expect_audit(&svc, "queue-put", "deployer", "PUT /queues/{queue}", "queues", "audit-q", 201,
                 NULL);
    put(level, "info\n"); /* the access lines that expect_no_audit waits for */
    json_decref(hup_audited(&svc, 1, "done"));
    job_cancel_and_retry(&svc);
    call(&svc, ADMIN, "queue-delete", "DELETE", "/queues/audit-q", NULL, 200, NULL);
    expect_audit(&svc, "queue-delete", "deployer", "DELETE /queues/{queue}", "queues", "audit-q",
                 200, NULL);

    put(tokens, "short admin\n");
    line = hup_audited(&svc, 2, "failed");
    assert_non_null(json_string_value(json_object_get(line, "detail")));
    json_decref(line);
    no_secret_logged(&svc);
    assert_int_equal(th_service_stop(&svc), 0);
}

static void an_open_service_audits_anonymous(void **state)
{
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, NULL), 0);
    call(&svc, NULL, "open-put", "PUT", "/topics/audit-open", "{}", 201, NULL);
    expect_audit(&svc, "open-put", "_anonymous", "PUT /topics/{topic}", "topics", "audit-open", 201,
                 NULL);
    call(&svc, NULL, "open-producer", "PUT", "/topics/audit-open/producers/p1", "{}", 201, NULL);
    json_t *line = audited(&svc, "open-producer");
    member_is(line, "resource", "audit-open");
    member_is(line, "producer", "p1");
    json_decref(line);
    /* a name past any rule is refused, and audited cut to 512 bytes (the line always fits) */
    char path[1024] = "/topics/";
    memset(path + 8, 'n', 900);
    call(&svc, NULL, "open-long", "PUT", path, "{}", 400, NULL);
    line = audited(&svc, "open-long");
    assert_int_equal(strlen(json_string_value(json_object_get(line, "resource"))), 512);
    member_is(line, "code", "invalid_name");
    json_decref(line);
    json_decref(hup_audited(&svc, 0, "skipped"));
    assert_int_equal(th_service_stop(&svc), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(operator_actions_are_audited_once_by_token_name),
        cmocka_unit_test(an_open_service_audits_anonymous),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
