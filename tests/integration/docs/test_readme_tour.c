/* README's tour, run: every ```sh block of README.md that talks to localhost:8080 is run in
 * order, in one shell, against a fresh service, and each answer README shows is compared with
 * the real one. A shown answer is a comment after a command that starts with '{' (on the same
 * line, or on the lines right after it, continued on further comment lines): a JSON object
 * compared as a subset, where "..." as a value matches anything, ... among an object's members
 * stands for members not shown, and ... in an array for elements not shown. An answer that is a
 * problem document must be one README shows. Long-polls run with a one-second wait. The shell
 * starts in a directory that looks like a built checkout (build/cli holds rowlock-cli) with
 * ROWLOCK_URL naming the service, so rowlock-cli commands run as written. Every
 * `rowlock X (commit C, schema version N)` README shows must be the binary's --version. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#ifndef ROWLOCK_CLI_BINARY
#error "ROWLOCK_CLI_BINARY must name the rowlock-cli executable"
#endif

#define MAX_STEPS 256

struct step {
    int line;     /* README line of the command */
    char *cmd;    /* the command, continuation lines joined */
    char *expect; /* the shown answer as JSON text, or NULL */
};

struct tour {
    struct step steps[MAX_STEPS];
    int n;
};

static int setup(void **state)
{
    return th_svc_start("readme_tour", NULL);
}

/* Appends s (n bytes) to a malloc'd string. */
static char *append(char *to, const char *s, size_t n)
{
    size_t have = to ? strlen(to) : 0;
    char *out = realloc(to, have + n + 1);
    assert_non_null(out);
    memcpy(out + have, s, n);
    out[have + n] = '\0';
    return out;
}

/* Does the JSON text so far close every brace it opened? (strings respected) */
static int balanced(const char *s)
{
    int depth = 0, in_str = 0;
    for (; *s; s++) {
        if (in_str) {
            if (*s == '\\' && s[1] != '\0')
                s++;
            else if (*s == '"')
                in_str = 0;
        } else if (*s == '"') {
            in_str = 1;
        } else if (*s == '{' || *s == '[') {
            depth++;
        } else if (*s == '}' || *s == ']') {
            depth--;
        }
    }
    return depth <= 0 && !in_str;
}

/* The text after a line's shell comment mark, or NULL when the line has none. Only " #" or a
 * line-leading '#' outside quotes starts a comment. */
static const char *comment_of(const char *line)
{
    char quote = 0;
    for (const char *p = line; *p; p++) {
        if (quote) {
            if (*p == quote)
                quote = 0;
        } else if (*p == '\'' || *p == '"') {
            quote = *p;
        } else if (*p == '#' && (p == line || p[-1] == ' ')) {
            p++;
            while (*p == ' ')
                p++;
            return p;
        }
    }
    return NULL;
}

/* Does cmd end inside a quoted string (so the command goes on on the next line)? */
static int quote_open(const char *cmd)
{
    char quote = 0;
    for (const char *p = cmd; *p; p++) {
        if (quote == '\'') {
            quote = *p == '\'' ? 0 : quote;
        } else if (*p == '\\' && p[1] != '\0') {
            p++;
        } else if (quote == '"') {
            quote = *p == '"' ? 0 : quote;
        } else if (*p == '\'' || *p == '"') {
            quote = *p;
        }
    }
    return quote != 0;
}

/* A trailing comment's leading JSON object ({...} up to its balanced close), or NULL. */
static char *leading_object(const char *c)
{
    if (c == NULL || *c != '{')
        return NULL;
    char *out = NULL;
    for (size_t n = 1; c[n - 1] != '\0'; n++) {
        out = append(NULL, c, n);
        if (balanced(out) && c[n - 1] == '}')
            return out;
        free(out);
        out = NULL;
    }
    return NULL;
}

/* Parses the ```sh blocks of text that mention localhost:8080 into tour steps. */
static void tour_parse(const char *text, struct tour *t)
{
    memset(t, 0, sizeof(*t));
    const char *p = text;
    int lineno = 0, in_block = 0, tour_block = 0;
    struct step *open = NULL; /* the step whose shown answer may follow */
    while (*p) {
        size_t len = strcspn(p, "\n");
        char *line = append(NULL, p, len);
        lineno++;
        p += len + (p[len] == '\n');
        const char *trim = line + strspn(line, " ");
        if (!in_block) {
            in_block = strcmp(line, "```sh") == 0;
            /* a block is part of the tour when it talks to the service */
            const char *end = in_block ? strstr(p, "\n```\n") : NULL;
            tour_block = end && memmem(p, (size_t)(end - p), "localhost:8080", 14) != NULL;
            open = NULL;
        } else if (strcmp(line, "```") == 0) {
            in_block = 0;
        } else if (!tour_block || *trim == '\0') {
            open = NULL;
        } else if (*trim == '#') {
            const char *c = comment_of(trim);
            if (open != NULL && open->expect == NULL && c[0] == '{')
                open->expect = append(NULL, c, strlen(c));
            else if (open != NULL && open->expect != NULL && !balanced(open->expect))
                open->expect = append(append(open->expect, " ", 1), c, strlen(c));
            else
                open = NULL;
        } else {
            assert_true(t->n < MAX_STEPS);
            struct step *s = &t->steps[t->n++];
            s->line = lineno;
            s->cmd = append(NULL, line, len);
            /* a command goes on after a backslash, or inside an open quote */
            while (((len > 0 && line[len - 1] == '\\') || quote_open(s->cmd)) && *p) {
                free(line);
                len = strcspn(p, "\n");
                line = append(NULL, p, len);
                lineno++;
                p += len + (p[len] == '\n');
                s->cmd = append(append(s->cmd, "\n", 1), line, len);
            }
            s->expect = leading_object(comment_of(s->cmd));
            open = s;
        }
        free(line);
    }
}

static void tour_free(struct tour *t)
{
    for (int i = 0; i < t->n; i++) {
        free(t->steps[i].cmd);
        free(t->steps[i].expect);
    }
}

/* Shown answer text to JSON: ... among members is dropped, ... in an array becomes the
 * string "..." (elements not shown). */
static char *expect_json(const char *s)
{
    char *out = append(NULL, "", 0), stack[64];
    int depth = 0, in_str = 0;
    for (; *s; s++) {
        if (in_str) {
            if (*s == '\\' && s[1] != '\0') {
                out = append(out, s, 2);
                s++;
                continue;
            }
            in_str = *s != '"';
        } else if (*s == '"') {
            in_str = 1;
        } else if ((*s == '{' || *s == '[') && depth < 64) {
            stack[depth++] = *s;
        } else if ((*s == '}' || *s == ']') && depth > 0) {
            depth--;
        } else if (strncmp(s, "...", 3) == 0 && depth > 0) {
            if (stack[depth - 1] == '[') {
                out = append(out, "\"...\"", 5);
                s += 2;
                continue;
            }
            size_t n = strlen(out);
            while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == ','))
                out[--n] = '\0'; /* the comma before it */
            s += 2;
            /* first in its object, the comma after it goes instead */
            while (s[1] == ' ' || (s[1] == ',' && out[n - 1] == '{'))
                s++;
            continue;
        }
        out = append(out, s, 1);
    }
    return out;
}

/* Puts prefix in front of the path in where (left as it is when it would not fit). */
static void prepend(char *where, size_t size, const char *prefix)
{
    size_t p = strlen(prefix), w = strlen(where);
    if (p + w + 1 > size)
        return;
    memmove(where + p, where, w + 1);
    memcpy(where, prefix, p);
}

/* Is want a subset of got? Writes the first difference's JSON path into where. */
static int subset(const json_t *want, const json_t *got, char *where, size_t size)
{
    if (json_is_string(want) && strcmp(json_string_value(want), "...") == 0)
        return 1;
    if (json_is_object(want)) {
        const char *name;
        json_t *v;
        json_object_foreach((json_t *)want, name, v)
        {
            json_t *g = json_is_object(got) ? json_object_get(got, name) : NULL;
            if (g == NULL || !subset(v, g, where, size)) {
                if (g == NULL)
                    where[0] = '\0';
                prepend(where, size, name);
                prepend(where, size, ".");
                return 0;
            }
        }
        return 1;
    }
    if (json_is_array(want)) {
        size_t n = json_array_size(want);
        int open = n > 0 && json_is_string(json_array_get(want, n - 1)) &&
                   strcmp(json_string_value(json_array_get(want, n - 1)), "...") == 0;
        size_t shown = open ? n - 1 : n;
        if (!json_is_array(got) ||
            (open ? json_array_size(got) < shown : json_array_size(got) != shown)) {
            snprintf(where, size, " (array of %zu)", json_array_size(got));
            return 0;
        }
        for (size_t i = 0; i < shown; i++) {
            if (!subset(json_array_get(want, i), json_array_get(got, i), where, size)) {
                char index[32];
                snprintf(index, sizeof(index), "[%zu]", i);
                prepend(where, size, index);
                return 0;
            }
        }
        return 1;
    }
    where[0] = '\0';
    return json_equal(want, got);
}

/* The command as the test runs it: the test's port, and long-polls that wait one second. */
static char *localize(const char *cmd, int port)
{
    char *out = append(NULL, "", 0), host[64];
    snprintf(host, sizeof(host), "127.0.0.1:%d", port);
    for (const char *p = cmd; *p;) {
        if (strncmp(p, "localhost:8080", 14) == 0) {
            out = append(out, host, strlen(host));
            p += 14;
        } else if (strncmp(p, "wait=", 5) == 0 || strncmp(p, "\"wait_seconds\": ", 16) == 0) {
            size_t k = p[0] == 'w' ? 5 : 16;
            out = append(out, p, k);
            out = append(out, "1", 1);
            p += k;
            while (*p >= '0' && *p <= '9')
                p++;
        } else {
            out = append(out, p++, 1);
        }
    }
    return out;
}

/* Makes dir/checkout look like a built checkout for the tour's commands: build/cli is a link to
 * the directory of the rowlock-cli under test. Fills checkout with its path. */
static void checkout_make(const char *dir, char *checkout, size_t size)
{
    char path[600], cli[512];
    snprintf(checkout, size, "%s/checkout", dir);
    snprintf(path, sizeof(path), "%s/build", checkout);
    assert_int_equal(mkdir(checkout, 0700), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(cli, sizeof(cli), "%s", ROWLOCK_CLI_BINARY);
    char *slash = strrchr(cli, '/');
    assert_non_null(slash);
    *slash = '\0';
    snprintf(path, sizeof(path), "%s/build/cli", checkout);
    assert_int_equal(symlink(cli, path), 0);
}

/* Runs the steps in one shell (variables carry over) in dir/checkout, rowlock-cli's default URL
 * being the test's service; step i's output goes to dir/out.i and its exit status to
 * dir/rc.i. */
static void tour_run(const struct tour *t, int port, const char *dir)
{
    char path[512], checkout[512];
    checkout_make(dir, checkout, sizeof(checkout));
    snprintf(path, sizeof(path), "%s/tour.sh", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "cd '%s' || exit 1\nROWLOCK_URL=http://127.0.0.1:%d\nexport ROWLOCK_URL\n", checkout,
            port);
    for (int i = 0; i < t->n; i++) {
        char *cmd = localize(t->steps[i].cmd, port);
        fprintf(f, "{\n%s\n} >'%s/out.%d' 2>&1 </dev/null; echo $? >'%s/rc.%d'\n", cmd, dir, i, dir,
                i);
        free(cmd);
    }
    fclose(f);
    char sh[600];
    snprintf(sh, sizeof(sh), "sh '%s'", path);
    int rc = system(sh);
    assert_true(WIFEXITED(rc));
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *out = append(NULL, "", 0), buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        out = append(out, buf, n);
    fclose(f);
    return out;
}

/* Checks step i's answer; prints and counts what is wrong. */
static int step_check(const struct step *s, int i, const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/rc.%d", dir, i);
    char *rc = slurp(path);
    snprintf(path, sizeof(path), "%s/out.%d", dir, i);
    char *out = slurp(path);
    if (rc == NULL || out == NULL) {
        fprintf(stderr, "README:%d: did not run (the shell stopped before it): %s\n", s->line,
                s->cmd);
        free(rc);
        free(out);
        return 1;
    }
    int bad = 0;
    const char *body = out;
    if (strncmp(body, "HTTP/", 5) == 0 && strstr(body, "\r\n\r\n") != NULL)
        body = strstr(body, "\r\n\r\n") + 4;
    json_t *got = json_loads(body, JSON_DECODE_ANY, NULL);
    if (atoi(rc) != 0) {
        fprintf(stderr, "README:%d: exit status %d: %s\n%s\n", s->line, atoi(rc), s->cmd, out);
        bad = 1;
    } else if (s->expect != NULL) {
        char *text = expect_json(s->expect), where[512] = "";
        json_error_t err;
        json_t *want = json_loads(text, 0, &err);
        if (want == NULL) {
            fprintf(stderr, "README:%d: shown answer is not JSON (%s): %s\n", s->line, err.text,
                    text);
            bad = 1;
        } else if (!subset(want, got, where, sizeof(where))) {
            fprintf(stderr, "README:%d: %s\n  README shows: %s\n  the answer differs at %s: %s\n",
                    s->line, s->cmd, s->expect, where[0] ? where : "(top)", body);
            bad = 1;
        }
        json_decref(want);
        free(text);
    } else if (json_is_object(got) && json_is_string(json_object_get(got, "type")) &&
               strncmp(json_string_value(json_object_get(got, "type")),
                       "urn:rowlock:problem:", 20) == 0) {
        fprintf(stderr, "README:%d: answered a problem README does not show: %s\n  %s\n", s->line,
                s->cmd, body);
        bad = 1;
    }
    json_decref(got);
    free(rc);
    free(out);
    return bad;
}

/* Runs a tour from text; returns the number of steps whose answer is wrong. */
static int tour_check(const char *text, int *nsteps)
{
    struct tour t;
    tour_parse(text, &t);
    char dir[] = "/tmp/rowlock-tour.XXXXXX";
    assert_non_null(mkdtemp(dir));
    tour_run(&t, th_svc.port, dir);
    int bad = 0;
    for (int i = 0; i < t.n; i++)
        bad += step_check(&t.steps[i], i, dir);
    *nsteps = t.n;
    if (bad == 0) {
        char rm[600];
        snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
        assert_int_equal(system(rm), 0);
    } else {
        fprintf(stderr, "the tour's script and outputs: %s\n", dir);
    }
    tour_free(&t);
    return bad;
}

/* The binary's `rowlock --version` line, parsed: release and schema version. */
static void binary_version(char *release, size_t size, int *schema)
{
    char cmd[600], out[256], commit[64], fmt[64];
    snprintf(cmd, sizeof(cmd), "'%s' --version", ROWLOCK_BINARY);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    snprintf(fmt, sizeof(fmt), "rowlock %%%zus (commit %%63[^,], schema version %%d)", size - 1);
    assert_int_equal(sscanf(out, fmt, release, commit, schema), 3);
}

/* Checks every "`rowlock X (commit C, schema version N)`" of text against the binary's release
 * and schema version (the commit differs from build to build). Returns how many differ, and
 * counts the lines in *found. */
static int version_lines_check(const char *text, int *found)
{
    char release[64], shown[64], commit[64];
    int schema = 0, shown_schema = 0, bad = 0;
    binary_version(release, sizeof(release), &schema);
    *found = 0;
    for (const char *p = strstr(text, "`rowlock "); p != NULL; p = strstr(p + 1, "`rowlock ")) {
        if (sscanf(p, "`rowlock %63s (commit %63[^,], schema version %d)`", shown, commit,
                   &shown_schema) != 3)
            continue; /* `rowlock --version` and the like */
        (*found)++;
        if (strcmp(shown, release) != 0 || shown_schema != schema) {
            fprintf(stderr,
                    "shows rowlock %s, schema version %d; the binary is %s, schema version %d\n",
                    shown, shown_schema, release, schema);
            bad++;
        }
    }
    return bad;
}

/* Every curl of README in order, each shown answer right. */
static void readme_tour_answers_as_shown(void **state)
{
    /* ROWLOCK_TEST_README: another file to run instead (to try a change to the tour) */
    const char *file = getenv("ROWLOCK_TEST_README");
    char *text = slurp(file != NULL ? file : ROWLOCK_SOURCE_DIR "/README.md");
    assert_non_null(text);
    int n = 0;
    int bad = tour_check(text, &n);
    fprintf(stderr, "README tour: %d commands, %d wrong\n", n, bad);
    assert_true(n >= 20);
    assert_int_equal(bad, 0);
    free(text);
}

/* Negative control: a tour showing wrong answers (a value, a missing member, an array's length,
 * an unshown problem) fails on each of them, and a right one passes. */
static void wrong_answers_are_caught(void **state)
{
    static const char tour[] =
        "```sh\n"
        "curl -s localhost:8080/healthz   # {\"status\":\"ok\"}: right\n"
        "curl -s localhost:8080/healthz   # {\"status\":\"broken\"}\n"
        "curl -s localhost:8080/readyz\n"
        "# {\"status\":\"ready\",...,\n"
        "#  \"schema_version\":0}\n"
        "curl -s localhost:8080/healthz   # {\"absent\":\"...\"}\n"
        "curl -s localhost:8080/topics    # {\"topics\":[{\"name\":\"x\"}]}\n"
        "curl -s localhost:8080/nope\n"
        "```\n";
    int n = 0;
    fprintf(stderr, "negative control: the five wrong answers below are expected\n");
    assert_int_equal(tour_check(tour, &n), 5);
    assert_int_equal(n, 6);
}

/* README's --version line is the binary's, and a wrong one would be caught. */
static void readme_version_line_is_the_binarys(void **state)
{
    const char *file = getenv("ROWLOCK_TEST_README");
    char *text = slurp(file != NULL ? file : ROWLOCK_SOURCE_DIR "/README.md");
    assert_non_null(text);
    int found = 0;
    assert_int_equal(version_lines_check(text, &found), 0);
    assert_true(found >= 1);
    free(text);
    fprintf(stderr, "negative control: the two wrong versions below are expected\n");
    assert_int_equal(version_lines_check("prints `rowlock 0.1.0 (commit 1a2b3c4, schema version "
                                         "0)` and `rowlock 0.0.0-no (commit x, schema version 0)`",
                                         &found),
                     2);
    assert_int_equal(found, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wrong_answers_are_caught),
        cmocka_unit_test(readme_tour_answers_as_shown),
        cmocka_unit_test(readme_version_line_is_the_binarys),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
