/* For the tests that numbers past 64-bit integers survive a round trip (test_queue_big_numbers,
 * test_topic_big_numbers, test_ledger_big_numbers): a request whose answer is parsed with the
 * caller's jansson flags (JSON_DECODE_INT_AS_REAL reads what a strict parse refuses), and the
 * values the queue and ledger tests store and check. */
#ifndef TESTS_HARNESS_NUMBERS_H
#define TESTS_HARNESS_NUMBERS_H

#include <stddef.h>

#include "harness_svc.h"

/* Numbers jsonb writes back as long runs of digits (1e19 -> 10000000000000000000), deep too. */
#define TH_BIG_NUMBERS                                                                             \
    "{\"pos\":1e19,\"neg\":-1e19,\"huge\":1.5e300,\"digits\":123456789012345678901234567890.0,"    \
    "\"tiny\":1e-300,\"deep\":[{\"n\":[1e19]}]}"
/* Ordinary values: the 64-bit integer limits and a tree. */
#define TH_PLAIN_VALUES                                                                            \
    "{\"i\":9223372036854775807,\"m\":-9223372036854775808,\"r\":2.5,\"t\":[1,{\"u\":[null,"       \
    "true,\"s\"]}],\"e\":{}}"

/* method path on th_svc, body (NULL: none) sent as ct (NULL: application/json) with an extra
 * header line (NULL: none); asserts the status is want (printing the answer when not) and
 * returns the answer parsed with jansson flags (the caller's; the test fails when it is not
 * JSON). */
json_t *th_svc_call_flags(const char *method, const char *path, const char *ct, const char *header,
                          const char *body, long want, size_t flags);
/* v, read from where, is the object TH_BIG_NUMBERS wrote: each number equal as a double to the
 * double the text is (cmocka-asserted). */
void th_assert_big_numbers(const json_t *v, const char *where);
/* v, read from where, equals TH_PLAIN_VALUES as JSON (integers still integers). */
void th_assert_plain_values(const json_t *v, const char *where);

#endif
