/* What the files of the HTTP server share, and nothing outside them sees (handlers see http.h):
 * the server's and a request's state, each part owned by one file, and what each file offers
 * the others (http.c the daemon, intake.c and intake_judge.c, request.c, reply.c, wait.c,
 * wake.c, worker.c, ticker.c, http_check.c). */
#ifndef SVC_HTTP_INTERNAL_H
#define SVC_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "service/auth.h"
#include "service/buf.h"
#include "service/http.h"
#include "service/limits.h"
#include "service/problem.h"
#include "service/request_id.h"

/* Headers a handler may add to its reply (svc_req_add_header). */
#define SVC_REQ_EXTRA_HEADERS 8

struct svc_waiter;
struct svc_intake;

/* The long-poll waiters (wait.c). */
struct svc_waiters {
    pthread_mutex_t mu;
    struct svc_waiter *head; /* oldest first: the order svc_server_wake wakes in */
    long n;
    unsigned generation;   /* counts wakes: a run that saw it change looks again (svc_poll) */
    int stopping;          /* no request suspends any more (svc_waiters_stop) */
    atomic_ulong rechecks; /* waiters resumed by their periodic re-check */
    atomic_ulong woken;    /* waiters resumed by a wake (svc_server_wake) */
};

/* The worker threads and their queue (worker.c): handlers of SVC_RUN_WORKER routes run there,
 * their connections suspended meanwhile. */
struct svc_workers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct svc_request *head, *tail;
    struct svc_request *resumed; /* the last resumed long-poll queued (they come first) */
    int stop;
    pthread_t *threads;
    int n; /* threads started */
};

/* The ticker thread (ticker.c). */
struct svc_ticker {
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    double next_deadline_scan;
};

/* What announces this process's wakes to the other processes (wake.c; set by main). */
struct svc_publisher {
    _Atomic(svc_publish_fn) fn;
    _Atomic(svc_publish_inline_fn) inline_fn;
    _Atomic(svc_publish_inline_done_fn) inline_done;
    void *_Atomic ctx;
};

/* The server (http.c makes and frees it). */
struct svc_server {
    struct MHD_Daemon *daemon;
    _Atomic int draining; /* no new connection: each is closed as soon as it is accepted */
    uint16_t port;        /* bound (the configured one, or the one picked for port 0) */
    const struct svc_config *cfg;
    const struct svc_route *routes;
    size_t nroutes;
    const struct svc_auth *auth;
    struct svc_limits *limits; /* each token's buckets and long-polls (limits.h) */
    void *app;
    atomic_long in_flight;
    struct svc_conns *conns; /* the connection limit and request deadlines */
    /* plain HTTP: the accept in front of libmicrohttpd (intake.c); set after the intake's thread
     * starts, while libmicrohttpd's threads may already read it */
    struct svc_intake *_Atomic intake;
    struct svc_waiters waiters;
    struct svc_workers workers;
    struct svc_ticker ticker;
    struct svc_publisher publisher;
};

/* What the checks before the body need of the request's headers, gathered in one pass over them
 * (each first occurrence, as MHD_lookup_connection_value finds it): a lookup each walked the
 * list again, seven times a request. */
struct req_headers {
    size_t total; /* bytes of names and values, 4 a header more */
    const char *request_id, *content_type, *authorization, *content_length;
    const char *transfer_coding; /* the first Transfer-Encoding header's value */
    int host, transfer_encoding; /* how many of each */
    int lengths, lengths_differ; /* Content-Length headers, and whether their values differ */
    const char *repeated; /* the first of Host, Content-Type and Authorization to come twice */
    const char *bad_name; /* the first header name that is not a token, like "X-A " of "X-A : 1" */
    const char *bad_value, *bad_value_why; /* the first header whose value holds a NUL or a CR */
};

/* NEW: first call; BODY: reading the body; WORKER: suspended, with a worker or waiting;
 * READY: a worker prepared the response (or gave up), to queue on resume; DONE: queued. */
enum req_phase { PHASE_NEW, PHASE_BODY, PHASE_WORKER, PHASE_READY, PHASE_DONE };

/* A request's context (request.c makes and frees it). */
struct svc_request {
    struct svc_server *server;
    struct MHD_Connection *conn;
    enum req_phase phase;
    char *target; /* raw request target, as received */
    char method[16];
    struct svc_match match;
    int matched;
    char request_id[SVC_REQUEST_ID_MAX + 1];
    struct svc_buf body;
    int checked; /* request_check ran (before the body) */
    int http11;  /* HTTP/1.1, which must carry Host */
    json_t *json;
    double start; /* svc_now() at the first callback */
    int status;   /* 0 until a response is queued */
    const char *problem_code;
    char token[SVC_AUTH_NAME_MAX + 1]; /* the bearer token's name, or an SVC_AUDIT_* word */
    int limited;                       /* token's limits apply (after its authentication) */
    struct svc_limit limit;            /* those limits, the settings' filled in */
    struct svc_limit_entry *poll_held; /* the long-poll place it holds (svc_poll_admit) */
    int resumes;                       /* times a long-poll was resumed */
    int in_worker;
    struct MHD_Response *pending; /* prepared by a worker, queued on resume */
    int pending_status;
    struct svc_request *work_next;
    struct svc_conn *slot; /* may be NULL (out of memory when the connection opened) */
    struct req_headers seen;
    size_t nheaders;
    char *headers[SVC_REQ_EXTRA_HEADERS][2];
};

/* ---- request.c ---- */
/* A new context for a request to uri on conn (its clock started), or NULL when out of memory.
 * Free it with svc_request_free. */
struct svc_request *svc_request_new(struct svc_server *s, struct MHD_Connection *conn,
                                    const char *uri);
/* Frees req and all it owns (kept as the thread's spare when there is none). */
void svc_request_free(struct svc_request *req);

/* ---- reply.c ---- */
/* Queues what a worker prepared for req (PHASE_READY): MHD_YES, or MHD_NO (drop the connection)
 * when it prepared nothing or the queueing failed. */
enum MHD_Result svc_reply_prepared(struct svc_request *req);
/* Writes a problem (info's status, the status line's reason, detail) straight to the socket,
 * with Connection: close, and ends the connection's sending side: for a request libmicrohttpd
 * cannot be asked to answer (yet). req's status and code say so; nothing else may be written
 * for it, and the connection must be closed next (MHD_NO, or no context for the request). */
void svc_reply_early(struct svc_request *req, const struct svc_problem_info *info,
                     const char *reason, const char *detail);
/* The bytes svc_reply_early writes: the status line (status and reason), Connection: close,
 * problem+json, the request id and its length, then the problem document of info and detail.
 * Returns them malloc'd (the caller frees), their length in *len; NULL when out of memory. */
char *svc_reply_early_text(const struct svc_problem_info *info, const char *reason,
                           const char *detail, const char *request_id, size_t *len);
/* svc_reply_early's 413, while the body is still arriving; the caller then returns MHD_NO. */
void svc_reply_early_413(struct svc_request *req);

/* ---- wait.c ---- */
void svc_waiters_init(struct svc_waiters *w);
void svc_waiters_destroy(struct svc_waiters *w);
/* From now on no request suspends: long-polls answer with what they have. */
void svc_waiters_stop(struct svc_server *s);
/* Resumes the waiters at their deadline at now, and at most rechecks of those at their
 * re-check time (each re-check borrows a pool connection). */
void svc_waiters_resume_due(struct svc_server *s, double now, int rechecks);
/* Resumes every waiter. */
void svc_waiters_resume_all(struct svc_server *s);

/* ---- worker.c ---- */
/* Makes the queue, which takes requests from then on (before the daemon starts). */
void svc_workers_init(struct svc_workers *q);
/* Starts n worker threads; returns how many started. */
int svc_workers_start(struct svc_server *s, long n);
/* Stops the workers once their queue is empty, joins them and frees the queue. */
void svc_workers_stop(struct svc_server *s);
/* Suspends req's connection and queues it for a worker: SVC_SUSPENDED. */
enum svc_outcome svc_workers_run(struct svc_request *req);
/* Hands a suspended request to the workers: behind those queued, or (front) a resumed
 * long-poll ahead of them. */
void svc_workers_push(struct svc_server *s, struct svc_request *req, int front);

/* ---- ticker.c ---- */
/* Starts the ticker (after the workers: it reads their count). 0, or -1 when it cannot. */
int svc_ticker_start(struct svc_server *s);
/* Stops and joins it (a no-op when it never started). */
void svc_ticker_stop(struct svc_server *s);

/* ---- intake.c, intake_judge.c ---- */
/* What the first bytes of a connection call for (svc_intake_judge). */
enum svc_intake_outcome {
    SVC_INTAKE_WAIT,   /* no whole request line yet */
    SVC_INTAKE_PASS,   /* a request line libmicrohttpd takes: the connection is its */
    SVC_INTAKE_REFUSE, /* answered with the problem, then closed */
    SVC_INTAKE_CLOSE,  /* ended with nothing asked (empty lines at most): closed */
};
struct svc_intake_verdict {
    size_t blank; /* bytes of empty lines before the request line, to read away */
    const struct svc_problem_info *problem; /* REFUSE: the answer, its reason phrase, detail */
    const char *reason;
    char detail[192];
    char method[16];    /* for the access line: the line's method, "" when not known */
    const char *target; /* and its target, inside the bytes judged (NULL when not known) */
    size_t target_len;
};
/* Judges the first n bytes of a connection (full: as many as the intake reads at once; ended: the
 * client has ended its sending side), whose request target may be url_limit bytes long. The
 * verdict's pointers point into buf. */
enum svc_intake_outcome svc_intake_judge(const char *buf, size_t n, int full, int ended,
                                         long url_limit, struct svc_intake_verdict *v);
/* The requests after the first in the first n bytes of a connection (whose first request line,
 * at first, passed): how many whole requests come before a request line svc_intake_judge
 * refuses (at least 1; the verdict in v), or 0 when none is refused among those whose end can
 * be told without reading a body (HTTP/1.1 requests without Content-Length, Transfer-Encoding,
 * Connection, Expect or Upgrade, whose answer leaves the connection open). */
int svc_intake_judge_pipeline(const char *buf, size_t n, size_t first, long url_limit,
                              struct svc_intake_verdict *v);
/* A refused request line inside a pipeline that the intake saw, to answer once the requests
 * before it have been (http.c): taken by the connection when libmicrohttpd starts it. */
struct svc_intake_note;
/* The note left for the connection on socket fd, now the caller's (free it with free()), or
 * NULL. Any thread. */
struct svc_intake_note *svc_intake_note_take(struct svc_server *s, int fd);
/* One more request before the refused line has been answered: 1 when it was the last, and the
 * refused line is to be answered now (svc_intake_note_answer), else 0. */
int svc_intake_note_count(struct svc_intake_note *note);
/* Answers the refused line on socket fd (problem+json, Connection: close), logs its access line
 * and ends the socket's sending side: libmicrohttpd then closes the connection, whatever it
 * makes of the line. */
void svc_intake_note_answer(struct svc_intake_note *note, int fd);
/* The verdict of a request line not whole limit_s after the connection opened: 408. */
void svc_intake_late(struct svc_intake_verdict *v, double limit_s);
/* Starts the intake on the listening socket listen_fd (which it then owns and closes), handing
 * the connections to s->daemon, started with no listening socket of its own. 0, or -1 when it
 * cannot start (listen_fd is still the caller's then). */
int svc_intake_start(struct svc_server *s, int listen_fd);
/* Stops the intake (before the daemon stops): the connections waiting in it and the listening
 * socket are closed. A no-op without an intake. */
void svc_intake_stop(struct svc_server *s);

/* ---- http_check.c ---- */
/* The name of the empty Cookie header on_uri adds to every request (known by its address). */
extern const char svc_http_cookie_stand_in[];
/* Gathers conn's headers into h in one pass; method is the one libmicrohttpd handed over (it
 * marks where the request's header block starts). */
void svc_http_scan_headers(struct req_headers *h, struct MHD_Connection *conn, const char *method);
/* Validates the request before its body: limits, framing, route, auth, media type. Returns 1
 * when a problem reply was queued (the outcome in *out), 0 to go on. */
int svc_http_request_check(struct svc_request *req, enum svc_outcome *out);
/* Depth of the deepest array/object nesting in JSON text, stopping once past limit. */
long svc_http_json_depth(const char *p, size_t len, long limit);
/* What a JSON body's numbers cost once stored. PostgreSQL's jsonb keeps a number as a numeric
 * and writes it back in plain notation (1e300 comes back as 301 digits), and jansson reads a
 * number beyond a double's range as an error (1e400) or as 0 (1e-400). So:
 *  - a number is out of range when its written exponent is past +-SVC_JSON_EXPONENT_MAX
 *    (PostgreSQL's numeric refuses it), or when it is not 0 and its magnitude is at least
 *    1e308 or below 1e-307 (a double's normal range, so that what was read is what is stored);
 *  - the body's numbers, written out in plain notation, may be at most the body's length plus
 *    SVC_JSON_EXPANSION_SLACK bytes longer than as written, so that what is stored, paged and
 *    claimed stays within about twice what was sent. */
#define SVC_JSON_EXPONENT_MAX    1000
#define SVC_JSON_EXPANSION_SLACK 4096
enum svc_json_numbers {
    SVC_JSON_NUMBERS_OK,
    SVC_JSON_NUMBER_RANGE,   /* *at, *n: the first number out of range */
    SVC_JSON_NUMBERS_EXPAND, /* *grow: how many bytes longer they would be stored */
};
enum svc_json_numbers svc_http_json_numbers(const char *p, size_t len, size_t *at, size_t *n,
                                            size_t *grow);

#endif
