/* Unit tests of service/log.c's access line (svc_log_access_format): whatever bytes the request
 * held in its method, target and request id, the line is one well-formed UTF-8 JSON object with
 * the same fields; a long path is cut at a character boundary. Log lines (svc_log, svc_log_format)
 * are written at their level and above only, the access line at info, and any bytes in their
 * message, keys and values still make well-formed UTF-8 JSON. Buffered (svc_log_buffer_start),
 * access lines are all written, whole and in order, within the flush interval even when the
 * process is killed with SIGKILL, and every other line at once, after them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "service/utf8.h"
#include "service/log.h"

/* Formats a and returns the parsed line (json_decref it), after checking it is UTF-8 JSON. */
static json_t *format_ok(const struct svc_access *a)
{
    size_t len = 0;
    char *line = svc_log_access_format(a, &len);
    assert_non_null(line);
    assert_int_equal(len, strlen(line));
    assert_true(len > 0 && line[len - 1] == '\n');
    assert_true(svc_utf8_valid(line, len));
    json_error_t err;
    json_t *doc = json_loadb(line, len - 1, 0, &err);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", err.text, line);
    free(line);
    return doc;
}

static const char *field(json_t *doc, const char *name)
{
    const char *v = json_string_value(json_object_get(doc, name));
    assert_non_null(v);
    return v;
}

static void test_plain_line(void **state)
{
    const char *path = "/topics/t1?limit=1";
    struct svc_access a = {"rid", "GET", "/topics/{topic}", path, 10, 200, 1.5, NULL};
    json_t *doc = format_ok(&a);
    assert_string_equal(field(doc, "msg"), "request");
    assert_string_equal(field(doc, "request_id"), "rid");
    assert_string_equal(field(doc, "method"), "GET");
    assert_string_equal(field(doc, "route"), "/topics/{topic}");
    assert_string_equal(field(doc, "path"), "/topics/t1");
    assert_int_equal(json_integer_value(json_object_get(doc, "status")), 200);
    assert_null(json_object_get(doc, "code"));
    json_decref(doc);
}

static void test_bytes_that_are_not_utf8(void **state)
{
    const char *path = "/nope\xff\"\\\x01";
    struct svc_access a = {"r\xc3",      "G\xffT", "unmatched", path,
                           strlen(path), 404,      0.1,         "route_not_found"};
    json_t *doc = format_ok(&a);
    assert_string_equal(field(doc, "method"), "G\xef\xbf\xbdT");
    assert_string_equal(field(doc, "path"), "/nope\xef\xbf\xbd\"\\\x01");
    assert_string_equal(field(doc, "request_id"), "r\xef\xbf\xbd");
    assert_string_equal(field(doc, "code"), "route_not_found");
    json_decref(doc);
}

/* "/nop/" then 600 é: cut at 512 bytes, which falls inside an é; the é is left out whole. */
static void test_long_path_cut_at_character(void **state)
{
    char path[2000] = "/nop/";
    size_t n = strlen(path);
    for (int i = 0; i < 600; i++, n += 2)
        memcpy(path + n, "\xc3\xa9", 2);
    struct svc_access a = {"r", "GET", "unmatched", path, n, 404, 0, NULL};
    json_t *doc = format_ok(&a);
    const char *p = field(doc, "path");
    assert_int_equal(strlen(p), 511);
    assert_memory_equal(p, path, 511);
    json_decref(doc);
    /* the worst escaping of every field still fits: 512 control bytes */
    memset(path, 1, 600);
    a.path_len = 600;
    a.method = "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01";
    doc = format_ok(&a);
    assert_int_equal(strlen(field(doc, "path")), 512);
    json_decref(doc);
}

static void test_absent_fields(void **state)
{
    struct svc_access a = {NULL, NULL, NULL, NULL, 0, -1, -5, NULL};
    json_t *doc = format_ok(&a);
    assert_string_equal(field(doc, "path"), "");
    assert_int_equal(json_integer_value(json_object_get(doc, "status")), 0);
    json_decref(doc);
}

/* SVC_NUM keys carry JSON numbers; a value that is no JSON number stays a string, so a caller's
 * mistake never breaks the line; plain keys stay strings even when they look numeric. */
static void test_numbers_are_json_numbers(void **state)
{
    char *line = svc_log_format(SVC_LOG_INFO, "listening", "address", "::", SVC_NUM("port"), "8080",
                                SVC_NUM("ratio"), "-1.5e3", SVC_NUM("bad"), "12abc",
                                SVC_NUM("lead"), "012", SVC_NUM("none"), NULL, "text", "42", NULL);
    assert_non_null(line);
    json_error_t err;
    json_t *doc = json_loads(line, 0, &err);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", err.text, line);
    assert_true(json_is_integer(json_object_get(doc, "port")));
    assert_int_equal(json_integer_value(json_object_get(doc, "port")), 8080);
    assert_true(json_is_real(json_object_get(doc, "ratio")));
    assert_string_equal(field(doc, "bad"), "12abc");
    assert_string_equal(field(doc, "lead"), "012");
    assert_string_equal(field(doc, "none"), "");
    assert_string_equal(field(doc, "text"), "42");
    assert_string_equal(field(doc, "address"), "::");
    assert_null(json_object_get(doc, "#port"));
    json_decref(doc);
    free(line);
}

/* Runs fn with stderr on a pipe; returns what it wrote (static, NUL-terminated). */
static const char *captured(void (*fn)(void))
{
    static char out[65536];
    int fds[2], saved = dup(STDERR_FILENO);
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
    assert_true(dup2(fds[1], STDERR_FILENO) >= 0);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fds[1]);
    ssize_t n = read(fds[0], out, sizeof(out) - 1);
    close(fds[0]);
    out[n > 0 ? n : 0] = '\0';
    return out;
}

static void log_each_level(void)
{
    svc_log(SVC_LOG_DEBUG, "d", NULL);
    svc_log(SVC_LOG_INFO, "i", NULL);
    svc_log(SVC_LOG_WARN, "w", NULL);
    svc_log(SVC_LOG_ERROR, "e", NULL);
    struct svc_access a = {"rid", "GET", "/x", "/x", 2, 200, 1, NULL};
    svc_log_access(&a);
}

/* At each level, lines at it and above are written and the others are not; the access line is
 * an info line. */
static void test_level_filtering(void **state)
{
    static const char *const msgs[] = {"\"msg\":\"d\"", "\"msg\":\"i\"", "\"msg\":\"w\"",
                                       "\"msg\":\"e\""};
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (int level = SVC_LOG_DEBUG; level <= SVC_LOG_ERROR; level++) {
        svc_log_set_level((enum svc_log_level)level);
        assert_int_equal(svc_log_get_level(), level);
        const char *out = captured(log_each_level);
        for (int l = SVC_LOG_DEBUG; l <= SVC_LOG_ERROR; l++) {
            assert_int_equal(svc_log_enabled((enum svc_log_level)l), l >= level);
            if ((strstr(out, msgs[l]) != NULL) != (l >= level))
                fail_msg("at level %s, a %s line is %s:\n%s", names[level], names[l],
                         l >= level ? "missing" : "written", out);
        }
        assert_int_equal(strstr(out, "\"msg\":\"request\"") != NULL, level <= SVC_LOG_INFO);
        /* one JSON object a line */
        for (const char *line = out; *line;) {
            const char *end = strchr(line, '\n');
            assert_non_null(end);
            json_t *doc = json_loadb(line, (size_t)(end - line), 0, NULL);
            if (doc == NULL)
                fail_msg("not a JSON line: %.*s", (int)(end - line), line);
            json_decref(doc);
            line = end + 1;
        }
    }
    svc_log_set_level(SVC_LOG_INFO);
}

/* The message, keys and values may hold any bytes: the line stays well-formed UTF-8 JSON, each
 * byte that begins no character written as U+FFFD, quotes, backslashes and controls escaped. */
static void test_format_escapes_any_bytes(void **state)
{
    char *line = svc_log_format(SVC_LOG_WARN, "bad \xff msg", "key\xc3", "v\"\\\n\x01\xe2\x82",
                                "ok", "caf\xc3\xa9", NULL);
    assert_non_null(line);
    size_t len = strlen(line);
    assert_true(len > 0 && line[len - 1] == '\n');
    assert_null(memchr(line, '\n', len - 1));
    assert_true(svc_utf8_valid(line, len));
    json_error_t err;
    json_t *doc = json_loadb(line, len - 1, 0, &err);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", err.text, line);
    assert_string_equal(field(doc, "level"), "warn");
    assert_string_equal(field(doc, "msg"), "bad \xef\xbf\xbd msg");
    assert_string_equal(field(doc, "key\xef\xbf\xbd"), "v\"\\\n\x01\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(field(doc, "ok"), "caf\xc3\xa9");
    /* "ts":"YYYY-MM-DDTHH:MM:SS.mmmZ" */
    const char *ts = field(doc, "ts");
    assert_int_equal(strlen(ts), 24);
    assert_true(ts[10] == 'T' && ts[19] == '.' && ts[23] == 'Z');
    json_decref(doc);
    free(line);
}

/* ---- buffered access lines ---- */

/* stderr on a new temporary file; returns the file's descriptor (read it with file_text). */
static int stderr_to_file(int *saved)
{
    char name[] = "/tmp/test_log.XXXXXX";
    int fd = mkstemp(name);
    assert_true(fd >= 0);
    unlink(name);
    *saved = dup(STDERR_FILENO);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    return fd;
}

static void stderr_back(int saved)
{
    dup2(saved, STDERR_FILENO);
    close(saved);
}

/* What the file holds now (malloc'd, NUL-terminated). */
static char *file_text(int fd)
{
    off_t size = lseek(fd, 0, SEEK_END);
    assert_true(size >= 0);
    char *text = malloc((size_t)size + 1);
    assert_non_null(text);
    ssize_t n = pread(fd, text, (size_t)size, 0);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void access_line_of(const char *request_id)
{
    struct svc_access a = {request_id, "GET", "/healthz", "/healthz", 8, 200, 0.2, NULL};
    svc_log_access(&a);
}

/* Access lines reach the file within the interval with nothing else happening; a warn line is
 * written at once, after them; svc_log_buffer_stop writes what is left. */
static void test_buffered_lines_in_time_and_order(void **state)
{
    int saved, fd = stderr_to_file(&saved);
    assert_int_equal(svc_log_buffer_start(5), 0);
    access_line_of("buf-1");
    access_line_of("buf-2");
    sleep_ms(200); /* forty intervals */
    char *text = file_text(fd);
    const char *one = strstr(text, "\"buf-1\""), *two = strstr(text, "\"buf-2\"");
    if (one == NULL || two == NULL || two < one)
        fail_msg("access lines not written within the interval, in order:\n%s", text);
    free(text);
    access_line_of("buf-3");
    svc_log(SVC_LOG_WARN, "warned", NULL);
    text = file_text(fd); /* no wait: a warn line is written before svc_log returns */
    const char *three = strstr(text, "\"buf-3\""), *warned = strstr(text, "\"warned\"");
    if (three == NULL || warned == NULL || warned < three)
        fail_msg("the warn line is not written at once after the access line:\n%s", text);
    free(text);
    access_line_of("buf-4");
    svc_log_buffer_stop();
    text = file_text(fd);
    assert_non_null(strstr(text, "\"buf-4\""));
    free(text);
    access_line_of("buf-5"); /* unbuffered again: written at once */
    text = file_text(fd);
    assert_non_null(strstr(text, "\"buf-5\""));
    free(text);
    stderr_back(saved);
    close(fd);
}

#define LINES_PER_THREAD 3000

static void *log_many(void *arg)
{
    char id[32];
    for (int i = 0; i < LINES_PER_THREAD; i++) {
        snprintf(id, sizeof(id), "t%d-%d", *(int *)arg, i);
        access_line_of(id);
    }
    return NULL;
}

/* Two threads write many times the buffer's size: every line is there once, whole (one JSON
 * object a line), each thread's lines in the order it wrote them. */
static void test_buffered_lines_whole_and_complete(void **state)
{
    int saved, fd = stderr_to_file(&saved);
    assert_int_equal(svc_log_buffer_start(5), 0);
    pthread_t th[2];
    int ids[2] = {0, 1};
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_create(&th[t], NULL, log_many, &ids[t]), 0);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    svc_log_buffer_stop();
    stderr_back(saved);
    char *text = file_text(fd);
    close(fd);
    int next[2] = {0, 0};
    for (char *line = text, *end; *line != '\0'; line = end + 1) {
        end = strchr(line, '\n');
        assert_non_null(end);
        json_t *doc = json_loadb(line, (size_t)(end - line), 0, NULL);
        if (doc == NULL)
            fail_msg("not a JSON line: %.*s", (int)(end - line), line);
        int t = -1, i = -1;
        assert_int_equal(sscanf(field(doc, "request_id"), "t%d-%d", &t, &i), 2);
        assert_true(t == 0 || t == 1);
        if (i != next[t])
            fail_msg("thread %d: line %d where %d was due", t, i, next[t]);
        next[t]++;
        json_decref(doc);
    }
    free(text);
    assert_int_equal(next[0], LINES_PER_THREAD);
    assert_int_equal(next[1], LINES_PER_THREAD);
}

/* A process killed with SIGKILL (no exit path runs) has written its access lines all the same,
 * once the interval has passed: a kill -9 loses the last interval's lines at most. */
static void test_kill_9_keeps_lines_past_the_interval(void **state)
{
    int saved, fd = stderr_to_file(&saved);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        if (svc_log_buffer_start(5) != 0)
            _exit(2);
        for (int i = 0; i < 100; i++) {
            char id[16];
            snprintf(id, sizeof(id), "k-%d", i);
            access_line_of(id);
        }
        if (write(ready[1], "x", 1) != 1)
            _exit(2);
        for (;;)
            pause();
    }
    stderr_back(saved);
    close(ready[1]);
    char x;
    assert_int_equal(read(ready[0], &x, 1), 1);
    close(ready[0]);
    sleep_ms(300); /* sixty intervals */
    kill(child, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    char *text = file_text(fd);
    close(fd);
    for (int i = 0; i < 100; i++) {
        char id[24];
        snprintf(id, sizeof(id), "\"k-%d\"", i);
        if (strstr(text, id) == NULL)
            fail_msg("line %s lost at kill -9", id);
    }
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_line),
        cmocka_unit_test(test_bytes_that_are_not_utf8),
        cmocka_unit_test(test_long_path_cut_at_character),
        cmocka_unit_test(test_absent_fields),
        cmocka_unit_test(test_numbers_are_json_numbers),
        cmocka_unit_test(test_level_filtering),
        cmocka_unit_test(test_format_escapes_any_bytes),
        cmocka_unit_test(test_buffered_lines_in_time_and_order),
        cmocka_unit_test(test_buffered_lines_whole_and_complete),
        cmocka_unit_test(test_kill_9_keeps_lines_past_the_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
