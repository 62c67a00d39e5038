/* Bad-input tests as tables, on the program's one service (harness_svc.h): each case is one
 * request (method, path, Content-Type, body) with the problem it must answer (status and code),
 * and the family's "changes nothing" check is a snapshot of everything its writes could change,
 * taken before the cases and compared after. A family's test holds its table of bad requests
 * and its snapshot's list of reads; the sending, the snapshot and the comparison live here. */
#ifndef TESTS_HARNESS_BAD_H
#define TESTS_HARNESS_BAD_H

#include <stddef.h>

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
/* The cases of one request sent with each of n bodies: out[i] is {method, path, ct, bodies[i],
 * status, code}. Returns n. */
size_t th_bad_bodies(struct th_bad *out, const char *method, const char *path, const char *ct,
                     const char *const *bodies, size_t n, long status, const char *code);

/* The same for a program whose service is not th_svc: the port is named, the snapshot is
 * snapshot(). */
int th_send(int port, const char *method, const char *path, const char *ct, const char *body,
            struct th_response *r);
void th_assert_unchanged(th_snapshot_fn snapshot, const char *before);
void th_expect_problems(int port, th_snapshot_fn snapshot, const struct th_bad *cases, size_t n);

#endif
