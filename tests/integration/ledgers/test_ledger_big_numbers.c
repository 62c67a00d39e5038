/* Numbers too large for a 64-bit integer survive a ledger round trip: an object, a display and
 * an event whose data holds 1e19, -1e19, 1.5e300, 1.2345...e29 or 1e-300 read back through
 * objects/{id}, displays/{type} and events with those numbers, never as "data": null.
 * PostgreSQL's jsonb writes them back as long runs of digits (1e19 -> 10000000000000000000),
 * which jansson refuses as an integer, so an answer that re-parses the stored text loses them.
 * The answers are parsed with JSON_DECODE_INT_AS_REAL and each number compared as a double with
 * the double the request was parsed into: the service reads request numbers as IEEE doubles, so
 * that, not the digits the client typed, is what it stores. Ordinary data (a 64-bit integer, a
 * deep tree) must come back equal as JSON, integers still integers. A bare integer literal past
 * 64 bits is refused at the door (400 invalid_json) and stores nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_numbers.h"

/* The data written, as the request carries it (the last a real: see the header comment). */
#define BIG_DATA   TH_BIG_NUMBERS
#define PLAIN_DATA TH_PLAIN_VALUES

static int setup(void **state)
{
    if (th_svc_start("ledger_big_numbers", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/ledgers/n", "{}", 201));
    json_decref(th_svc_call(
        "POST", "/ledgers/n/transactions",
        "{\"digest\":\"t1\",\"writes\":[{\"object_id\":\"big\",\"version\":1,\"type\":\"B\","
        "\"data\":" BIG_DATA
        "},{\"object_id\":\"plain\",\"version\":1,\"type\":\"P\",\"data\":" PLAIN_DATA
        "}],\"displays\":[{\"type\":\"B\",\"version\":1,\"data\":" BIG_DATA "},"
        "{\"type\":\"P\",\"version\":1,\"data\":" PLAIN_DATA "}],\"events\":[{\"type\":\"B\","
        "\"data\":" BIG_DATA "},{\"type\":\"P\",\"data\":" PLAIN_DATA "}]}",
        201));
    return 0;
}

/* GET path (200 asserted); its body parsed with flags (the caller's). */
static json_t *get(const char *path, size_t flags)
{
    return th_svc_call_flags("GET", path, NULL, NULL, NULL, 200, flags);
}

static void objects_and_displays_keep_big_numbers(void **state)
{
    static const char *const paths[] = {"/ledgers/n/objects/big", "/ledgers/n/displays/B"};
    for (int i = 0; i < 2; i++) {
        json_t *j = get(paths[i], JSON_DECODE_INT_AS_REAL);
        th_assert_big_numbers(json_object_get(j, "data"), paths[i]);
        assert_true(json_number_value(json_object_get(j, "version")) == 1.0);
        assert_non_null(json_object_get(j, "updated_at"));
        json_decref(j);
    }
    json_t *o = get("/ledgers/n/objects/big", JSON_DECODE_INT_AS_REAL);
    assert_string_equal(json_string_value(json_object_get(o, "object_id")), "big");
    assert_string_equal(json_string_value(json_object_get(o, "type")), "B");
    json_decref(o);
    json_t *d = get("/ledgers/n/displays/B", JSON_DECODE_INT_AS_REAL);
    assert_string_equal(json_string_value(json_object_get(d, "type")), "B");
    json_decref(d);
}

static void ordinary_data_reads_back_unchanged(void **state)
{
    static const char *const paths[] = {"/ledgers/n/objects/plain", "/ledgers/n/displays/P"};
    for (int i = 0; i < 2; i++) {
        json_t *j = get(paths[i], 0);
        th_assert_plain_values(json_object_get(j, "data"), paths[i]);
        assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
        json_decref(j);
    }
}

/* The event log, which always copied the stored text, says the same. */
static void events_keep_big_numbers(void **state)
{
    json_t *j = get("/ledgers/n/events", JSON_DECODE_INT_AS_REAL);
    json_t *events = json_object_get(j, "events");
    assert_int_equal(json_array_size(events), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(events, 0), "type")), "B");
    th_assert_big_numbers(json_object_get(json_array_get(events, 0), "data"), "event 0");
    json_decref(j);
    j = get("/ledgers/n/events?after=1", 0);
    events = json_object_get(j, "events");
    assert_int_equal(json_array_size(events), 1);
    th_assert_plain_values(json_object_get(json_array_get(events, 0), "data"), "event 1");
    json_decref(j);
}

/* An integer literal jansson cannot hold is a 400 invalid_json that writes nothing. */
static void a_bare_integer_past_64_bits_is_refused(void **state)
{
    json_t *p = th_svc_call("POST", "/ledgers/n/transactions",
                            "{\"digest\":\"t2\",\"writes\":[{\"object_id\":\"long\",\"version\":1,"
                            "\"type\":\"L\",\"data\":123456789012345678901234567890}]}",
                            400);
    assert_string_equal(json_string_value(json_object_get(p, "code")), "invalid_json");
    json_decref(p);
    th_svc_get_problem("/ledgers/n/objects/long", 404, "object_not_found");
    th_svc_get_problem("/ledgers/n/transactions/t2", 404, "transaction_not_found");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(objects_and_displays_keep_big_numbers),
        cmocka_unit_test(ordinary_data_reads_back_unchanged),
        cmocka_unit_test(events_keep_big_numbers),
        cmocka_unit_test(a_bare_integer_past_64_bits_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
