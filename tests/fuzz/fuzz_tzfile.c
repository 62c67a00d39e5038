/* Fuzz target: the TZif reader and its footer's POSIX TZ rule (db/tzfile.h). Input: a file's
 * bytes. A refusal writes a message of printable ASCII that fits its buffer; a zone read gives
 * every instant of years 1 to 9999 a span that holds it, with offsets in RFC 8536's range, and
 * its spans meet: walked from the earliest, each next one starts where the last ended, with
 * the last one's offset as its prev_utoff. */
#include <stdlib.h>
#include <string.h>

#include "db/tzfile.h"
#include "tests/fuzz/fuzz.h"

#define FIRST INT64_C(-62135596800) /* 0001-01-01T00:00:00Z */
#define LAST  INT64_C(253402300799) /* 9999-12-31T23:59:59Z */
#define STEPS 400                   /* spans walked from each starting instant */

static void check_span(const struct db_tz_span *s, int64_t t)
{
    FUZZ_ASSERT(s->start <= t && t < s->end);
    FUZZ_ASSERT(s->utoff >= -89999 && s->utoff <= 93599);
    FUZZ_ASSERT(s->prev_utoff >= -89999 && s->prev_utoff <= 93599);
    FUZZ_ASSERT(s->isdst == 0 || s->isdst == 1);
    FUZZ_ASSERT(s->start != INT64_MIN || s->prev_utoff == s->utoff);
}

/* Walks up to STEPS spans of z from t, checking each and where it meets the next. */
static void walk(const struct db_tz *z, int64_t t)
{
    struct db_tz_span s, next;
    db_tz_span(z, t, &s);
    check_span(&s, t);
    for (int i = 0; i < STEPS && s.end <= LAST; i++) {
        db_tz_span(z, s.end, &next);
        check_span(&next, s.end);
        FUZZ_ASSERT(next.start == s.end && next.prev_utoff == s.utoff);
        int dst;
        FUZZ_ASSERT(db_tz_offset(z, s.end - 1, &dst) == s.utoff && dst == s.isdst);
        s = next;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[DB_TZ_ERROR_SIZE];
    memset(err, 'x', sizeof(err));
    struct db_tz *z = db_tz_parse(data, size, err, sizeof(err));
    if (z == NULL) {
        size_t len = strnlen(err, sizeof(err));
        FUZZ_ASSERT(len > 0 && len < sizeof(err));
        for (size_t i = 0; i < len; i++)
            FUZZ_ASSERT(err[i] >= 0x20 && err[i] <= 0x7e);
        return 0;
    }
    walk(z, FIRST);
    walk(z, 0);
    walk(z, INT64_C(4102444800)); /* 2100 */
    walk(z, LAST - 86400 * 800);
    db_tz_free(z);
    return 0;
}
