/* Integration-test harness: fresh PostgreSQL databases per test program, a real rowlock process
 * started on a free port (its log lines copied to the test's stderr), and an HTTP client on
 * libcurl. Environment: ROWLOCK_TEST_ADMIN_URL (superuser URL of database postgres). */
#ifndef TESTS_HARNESS_H
#define TESTS_HARNESS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

/* The name of every test database begins with this: TH_DB_PREFIX "<name>". */
#define TH_DB_PREFIX "rowlock_t_"
/* Creates (dropping any old one) database TH_DB_PREFIX<name>; writes its URL to url. 0 or -1. */
int th_db_create(const char *name, char *url, size_t urlsize);
/* A session on ROWLOCK_TEST_ADMIN_URL (a superuser on database postgres, for settings of the
 * whole server and other sessions' backends), or fails the test; the caller PQfinishes it. */
PGconn *th_admin_pg(void);
/* Connects to a URL, or fails the test. */
PGconn *th_pg(const char *url);
/* Runs SQL that must succeed (fails the test otherwise); returns the result (PQclear it). */
PGresult *th_sql(PGconn *c, const char *sql);
/* Polls (up to 10 s) until a session of observer's database waits on a lock; fails the test
 * with "no request came to wait on <what>" otherwise. */
void th_wait_lock_waiter(PGconn *observer, const char *what);

/* What a process's log reader writes, on the heap: a process a failed test left running (cmocka
 * goes on to the next test) never writes into a later test's stack. Every one is kept until the
 * test program exits, which kills the processes still running, so that none outlives it. */
struct th_proc {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pid_t pid;
    int log_fd;
    pthread_t reader;
    int joined; /* the reader joined, the process reaped */
    int ready;  /* saw the "listening" line */
    int exited; /* stderr closed */
    int port;
    /* the newest lines (when full, the older half is dropped at a line start) */
    char log_tail[16384];
    /* the same for every line that is not an access line ("msg":"request"), which busy tests
     * log thousands of: what th_service_logged looks for stays findable behind them */
    char log_notes[16384];
    struct th_proc *next;
};

struct th_service {
    pid_t pid;
    int port;
    int exit_code;        /* after th_service_wait: exit status, -1 for a signal */
    struct th_proc *proc; /* its log (lock proc->mu to read it) */
};

/* Starts rowlock against dburl with extra "KEY=value" environment entries (NULL-terminated,
 * may be NULL). Waits up to 30 s for it to listen. Returns 0, or -1 (the process is gone). */
int th_service_start(struct th_service *s, const char *dburl, const char *const *env);
/* The same with another executable (ROWLOCK_UNLOCKED_BINARY: the deliberately broken build). */
int th_service_start_binary(struct th_service *s, const char *binary, const char *dburl,
                            const char *const *env);
/* th_service_start in two steps: spawn the process (s is ready for th_service_logged from then
 * on, so another thread may watch its log), then await its "listening" line (0), or its failure
 * (-1, the process is gone). */
int th_service_spawn(struct th_service *s, const char *dburl, const char *const *env);
int th_service_spawn_binary(struct th_service *s, const char *binary, const char *dburl,
                            const char *const *env);
int th_service_await(struct th_service *s);
/* Sends SIGTERM and waits; returns the exit status (0 for a clean stop), -1 on a signal death. */
int th_service_stop(struct th_service *s);
/* Sends a signal without waiting. */
void th_service_signal(struct th_service *s, int sig);
/* Waits for the process to exit (up to timeout_s); returns as th_service_stop, -2 on timeout. */
int th_service_wait(struct th_service *s, int timeout_s);
/* True when a line containing needle has been logged (and is still in proc->log_tail or, for a
 * line that is not an access line, in proc->log_notes). */
int th_service_logged(struct th_service *s, const char *needle);

struct th_response {
    long status;
    char *body;
    size_t len;
    char *headers; /* raw header block */
    json_t *json;  /* parsed body when it is JSON, else NULL */
    double seconds;
};

/* One HTTP request to 127.0.0.1:port. headers: NULL-terminated "Name: value" strings or NULL.
 * body may be NULL. Returns 0 (r filled) or -1 (transport error). */
int th_http(int port, const char *method, const char *path, const char *const *headers,
            const char *body, size_t len, struct th_response *r);
/* Value of a response header (case-insensitive), copied into out; 0 or -1 when absent. */
int th_header(const struct th_response *r, const char *name, char *out, size_t outsize);
/* The problem "code" of a problem+json response, or "" when it is not one. */
const char *th_problem_code(const struct th_response *r);
void th_response_free(struct th_response *r);

/* A growing NUL-terminated buffer (free data), and the libcurl write callback appending to one
 * (its arg is the struct th_buf). */
struct th_buf {
    char *data;
    size_t len;
};
size_t th_buf_write(char *data, size_t size, size_t n, void *arg);

/* A crowd: n concurrent requests to one URL on one libcurl multi handle (long-poll tests). */
struct th_crowd_waiter {
    void *easy; /* CURL * */
    struct th_buf body;
    long status;
    double done_at;
    int result; /* CURLcode */
};
struct th_crowd {
    struct th_crowd_waiter *w;
    int n;
    void *multi;   /* CURLM * */
    void *headers; /* struct curl_slist * */
    int done, failed;
};
/* Prepares n requests to url: GETs, or POSTs of JSON when post_body(i, buf, size) is given. */
void th_crowd_start(struct th_crowd *c, int n, const char *url,
                    void (*post_body)(int i, char *buf, size_t size));
/* Thread body (pthread_create): drives the requests until all are done or 60 s passed. */
void *th_crowd_run(void *crowd);
void th_crowd_free(struct th_crowd *c);

/* A query's rows as a JSON array of arrays of strings (NULL: null), for comparing states. */
json_t *th_sql_rows(PGconn *c, const char *sql);
/* GET path; asserts 200 and returns the body (a new reference). */
json_t *th_get_json(int port, const char *path);
/* th_http with body (borrowed, may be NULL) sent as compact JSON. Asserts nothing, so any thread
 * may call it. */
int th_http_json(int port, const char *method, const char *path, const json_t *body,
                 struct th_response *r);
/* Monotonic seconds. */
double th_now(void);
/* Raises the soft limit on open files to at least want (for tests holding many sockets; the
 * service started afterwards inherits it). 0, or -1 when the hard limit is lower. */
int th_raise_fd_limit(unsigned long want);
/* The value of one series of /metrics ("name" or "name{labels}"), or -1 when absent. */
double th_metric(int port, const char *series);

/* Runs $ROWLOCK_TEST_PGCTL with action (stop, start, status) on the test cluster and asserts it
 * succeeded; its output goes to stderr, or nowhere when quiet (a test reading its own stderr). */
void th_pgctl(const char *action, int quiet);
/* For a group teardown, whatever the test did: runs $ROWLOCK_TEST_PGCTL start (a no-op on a
 * running server), asserting nothing; 0 when it succeeded, else -1. */
int th_pgctl_leave_running(void);

/* Runs cmd through sh (redirections are the caller's: add 2>&1 for stderr too) and reads its
 * standard output into out (NUL-terminated, at most outsize - 1 bytes). Returns its exit
 * status, or -1 when it was killed by a signal or could not be run. */
int th_run(const char *cmd, char *out, size_t outsize);

/* One numeric input of a route for th_bounds_check. */
struct th_bound {
    const char *method;
    const char *path;         /* "{V}" becomes the value, percent-encoded (query parameters) */
    const char *body;         /* JSON with @V@ replaced by the value's JSON text, or NULL */
    const char *content_type; /* NULL: application/json */
    long long max;            /* the documented maximum */
    const char *code;         /* the problem code a refused value answers with (400) */
    const char *alive;        /* GET path that must still answer 200 after each request, or NULL */
};
/* Sends each input 0, -1, max, max + 1, 2^63, 1e400, 1.5, "1", true and null. Each answer must be
 * a 2xx or a 4xx problem+json (a 400 carrying the input's code; in a body, number_out_of_range
 * for 1e400 and invalid_json for 2^63, which jansson cannot read), never a 5xx or no answer. The
 * maximum itself is never a 400 and the maximum + 1 never a 2xx. Prints every violation; returns
 * how many there were. */
int th_bounds_check(int port, const struct th_bound *cases, size_t ncases);

/* Asserts a problem+json response with this status and code (cmocka assertion). */
void th_assert_problem(const struct th_response *r, long status, const char *code);

/* Sends body (JSON text, NULL: none) as application/json; prints the request and the answer
 * when the status is not want, and cmocka-asserts it. Returns the answer's JSON as a new
 * reference (json_decref it), NULL when the body is not JSON. */
json_t *th_call(int port, const char *method, const char *path, const char *body, long want);

/* Raw HTTP over TCP, for bytes libcurl would not send. A connection to 127.0.0.1:port
 * (cmocka-asserts it connects); the caller closes it. */
int th_tcp_connect(int port);
/* Reads one answer into buf (size > 0; always NUL-terminated) until its headers and
 * Content-Length bytes of body have arrived, the peer closes, or timeout_ms pass without data.
 * Returns the bytes read. */
size_t th_raw_read(int fd, char *buf, size_t size, int timeout_ms);
/* Connects, writes len bytes of req whole (asserted), th_raw_read, closes. */
size_t th_raw_exchange(int port, const void *req, size_t len, char *buf, size_t size,
                       int timeout_ms);

#endif
