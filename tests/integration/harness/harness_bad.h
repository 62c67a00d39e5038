/* Bad-input tests as tables, on the program's one service (harness_svc.h): each case is one
 * request (method, path, Content-Type, body) with the problem it must answer (status and code),
 * and the family's "changes nothing" check is a snapshot of everything its writes could change,
 * taken before the cases and compared after. A family's test holds its table of bad requests
 * and its snapshot's list of reads; the sending, the snapshot and the comparison live here. */
#ifndef TESTS_HARNESS_BAD_H
#define TESTS_HARNESS_BAD_H

#include <stddef.h>
#include <stdint.h>

#include "harness_svc.h"

/* One refused request. ct: its Content-Type (NULL: no such header); body may be NULL. */
struct th_bad {
    const char *method, *path, *ct, *body;
    long status;
    const char *code;
};

/* One read of a snapshot, stored under name: GET get on th_svc (200 asserted) when get is set,
 * else the rows of sql on th_svc's database. aged: a member of "counts" that grows with time
 * (an age in seconds), dropped from each item of the GET answer's array named name; NULL: none. */
struct th_read {
    const char *name, *get, *sql, *aged;
};

/* Everything a family's writes could change, as text (malloc'd; free it). */
typedef char *(*th_snapshot_fn)(void);

/* Everything a family's writes could change: the reads of its snapshot, or (fn set) a function
 * that takes it. */
struct th_state {
    const struct th_read *reads;
    size_t n;
    th_snapshot_fn fn;
};

/* The snapshot of s, as one JSON text (malloc'd; free it). */
char *th_bad_snapshot(const struct th_state *s);
/* th_http on th_svc with Content-Type ct (NULL: none) and body (NULL: none). 0, or -1. */
int th_bad_send(const char *method, const char *path, const char *ct, const char *body,
                struct th_response *r);
/* cmocka-asserts that th_bad_snapshot(s) still gives before (printing both when it does not). */
void th_bad_unchanged(const struct th_state *s, const char *before);
/* Takes a snapshot of s, sends every case to th_svc and asserts its problem (printing the
 * request when the answer differs), then asserts the snapshot is unchanged. */
void th_bad_expect(const struct th_state *s, const struct th_bad *cases, size_t n);
/* One request of a table whose requests all answer one problem. ct: its Content-Type (NULL: no
 * such header); body may be NULL. */
struct th_req {
    const char *method, *path, *ct, *body;
};
/* th_bad_expect with every request answering status and code. */
void th_bad_expect_all(const struct th_state *s, const struct th_req *reqs, size_t n, long status,
                       const char *code);
/* th_bad_expect_all of one request sent with each of n bodies. */
void th_bad_expect_bodies(const struct th_state *s, const char *method, const char *path,
                          const char *ct, const char *const *bodies, size_t n, long status,
                          const char *code);
/* th_bad_expect_all of routes whose paths are printf formats taking (name, id): a %s for name (a
 * resource's name or an id's text, path-encoded), then a PRId64 conversion for id, if any. */
void th_bad_expect_named(const struct th_state *s, const struct th_req *routes, size_t n,
                         const char *name, int64_t id, long status, const char *code);
/* Names every family refuses (invalid_name), path-encoded: starting with '.', '-' or '_', 129
 * characters long, holding '/', ' ', '+', a letter past ASCII, ';' or '*'. */
#define TH_BAD_NAMES 10
void th_bad_names(const char *out[TH_BAD_NAMES]);
/* th_bad_expect_all of a GET of prefix followed by each of n suffixes (query strings, say). */
void th_bad_expect_gets(const struct th_state *s, const char *prefix, const char *const *suffixes,
                        size_t n, long status, const char *code);
/* How a family's batch is written: POSTed as JSON to path as {"member":[...]}, each good item
 * printed from item_fmt with (i, i), and a refusal naming its bad item as "<word> <i>". */
struct th_batch_shape {
    const char *path, *member, *item_fmt, *word;
};
/* A batch of n items with item at replaced by item; named: its refusal's detail names it. */
struct th_batch_case {
    int n, at;
    const char *item;
    int named;
};
/* Sends every batch case (each must be a 400 code) and a batch of 1001 good items (a 400
 * batch_too_large whose detail names the limit, 1000), each group with th_bad_expect's
 * unchanged check; a named case's detail names its bad item. */
void th_bad_expect_batches(const struct th_state *s, const struct th_batch_shape *shape,
                           const struct th_batch_case *cases, size_t n, const char *code);
/* A body of the shape {"member":[...]} holding n items made by printf of item_fmt with (i, i),
 * but for item bad_at (none when -1), which is bad: a batch with one bad item, or too many
 * (malloc'd; free it). */
char *th_bad_batch(const char *member, const char *item_fmt, int n, int bad_at, const char *bad);

/* The same for a program whose service is not th_svc: the port is named, the snapshot is
 * snapshot(). */
int th_send(int port, const char *method, const char *path, const char *ct, const char *body,
            struct th_response *r);
void th_assert_unchanged(th_snapshot_fn snapshot, const char *before);
void th_expect_problems(int port, th_snapshot_fn snapshot, const struct th_bad *cases, size_t n);

#endif
