/* Bad-input tests as tables: each case is one request (method, path, Content-Type, body) with the
 * problem it must answer (status and code), and the family's "changes nothing" check is a
 * snapshot of everything its writes could change, taken before the cases and compared after. */
#ifndef TESTS_HARNESS_BAD_H
#define TESTS_HARNESS_BAD_H

#include <stddef.h>

#include "harness.h"

/* One refused request. ct: its Content-Type (NULL: no such header); body may be NULL. */
struct th_bad {
    const char *method, *path, *ct, *body;
    long status;
    const char *code;
};

/* Everything a family's writes could change, as text (malloc'd; free it). */
typedef char *(*th_snapshot_fn)(void);

/* th_http with Content-Type ct (NULL: none) and body (NULL: none). 0, or -1 (transport). */
int th_send(int port, const char *method, const char *path, const char *ct, const char *body,
            struct th_response *r);
/* cmocka-asserts that snapshot() still gives before (printing both when it does not). */
void th_assert_unchanged(th_snapshot_fn snapshot, const char *before);
/* Takes a snapshot, sends every case to port and asserts its problem (printing the request when
 * the answer differs), then asserts the snapshot is unchanged. */
void th_expect_problems(int port, th_snapshot_fn snapshot, const struct th_bad *cases, size_t n);

#endif
