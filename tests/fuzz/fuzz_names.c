/* Fuzz target: the validation helpers of json_util.h (names, keys, UTF-8, RFC 3339 times).
 * svc_utf8_valid is compared with a reference written in fuzz_util.c and with jansson's own
 * check; names and keys must follow their documented rules exactly, and every refusal says why
 * in a sentence that is itself valid UTF-8. svc_utf8_clean copies any bytes as UTF-8, each byte
 * that starts no character as U+FFFD, cut only at a character boundary. */
#include <stdlib.h>
#include <string.h>

#include "routes/json_util.h"
#include "service/utf8.h"
#include "tests/fuzz/fuzz.h"

static int name_char(char c, int first)
{
    int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    return alnum || (!first && (c == '.' || c == '_' || c == '-'));
}

static void check_name(const char *s)
{
    size_t len = strlen(s);
    int want = len >= 1 && len <= 128;
    for (size_t i = 0; want && i < len; i++)
        want = name_char(s[i], i == 0);
    char why[160] = "";
    FUZZ_ASSERT(route_name_ok(s, why, sizeof(why)) == want);
    FUZZ_ASSERT(want || (why[0] != '\0' && svc_utf8_valid(why, strlen(why))));
}

static void check_key(const char *s)
{
    size_t len = strlen(s);
    int want = len >= 1 && len <= 1024 && fuzz_utf8_ref(s, len);
    char why[160] = "";
    FUZZ_ASSERT(route_key_ok(s, why, sizeof(why)) == want);
    FUZZ_ASSERT(want || (why[0] != '\0' && svc_utf8_valid(why, strlen(why))));
}

static int digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* What an accepted timestamp must look like: YYYY-MM-DD, T (or t, or a space), hh:mm:ss, an
 * optional fraction, and Z or a +hh:mm / -hh:mm offset. */
static void check_rfc3339(const char *s)
{
    if (!route_rfc3339_ok(s))
        return;
    size_t len = strlen(s);
    FUZZ_ASSERT(len >= 20);
    FUZZ_ASSERT(digits(s, 4) && s[4] == '-' && digits(s + 5, 2) && s[7] == '-');
    FUZZ_ASSERT(digits(s + 8, 2) && strchr("Tt ", s[10]) != NULL && digits(s + 11, 2));
    FUZZ_ASSERT(s[13] == ':' && digits(s + 14, 2) && s[16] == ':' && digits(s + 17, 2));
    int month = (s[5] - '0') * 10 + s[6] - '0', day = (s[8] - '0') * 10 + s[9] - '0';
    FUZZ_ASSERT(month >= 1 && month <= 12 && day >= 1 && day <= 31);
    const char *zone = s + 19;
    if (*zone == '.') {
        zone++;
        FUZZ_ASSERT(digits(zone, 1));
        while (digits(zone, 1))
            zone++;
    }
    FUZZ_ASSERT(((*zone == 'Z' || *zone == 'z') && zone[1] == '\0') ||
                ((*zone == '+' || *zone == '-') && strlen(zone) == 6 && digits(zone + 1, 2) &&
                 zone[3] == ':' && digits(zone + 4, 2)));
}

/* svc_utf8_char_len and svc_utf8_clean against the references, with a maximum from the input. */
static void check_clean(const char *s, size_t len, size_t max)
{
    for (size_t i = 0; i < len; i++)
        FUZZ_ASSERT(svc_utf8_char_len(s + i, len - i) == fuzz_utf8_char_ref(s + i, len - i));
    size_t want_len;
    char *want = fuzz_utf8_clean_ref(s, len, &want_len);
    char *out = malloc(max + 1);
    FUZZ_ASSERT(out != NULL);
    int cut = -1;
    size_t n = svc_utf8_clean(s, len, out, max, &cut);
    FUZZ_ASSERT(n <= max && out[n] == '\0' && svc_utf8_valid(out, n));
    /* a prefix of the clean text, cut only at a character boundary, and only when needed */
    FUZZ_ASSERT(n <= want_len && memcmp(out, want, n) == 0);
    FUZZ_ASSERT(cut == (n < want_len));
    FUZZ_ASSERT(n == want_len || (fuzz_utf8_char_ref(want + n, want_len - n) > max - n));
    free(out);
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    int valid = svc_utf8_valid((const char *)data, size);
    FUZZ_ASSERT(valid == fuzz_utf8_ref((const char *)data, size));
    /* jansson takes the same strings (it allows NUL, which ours refuses) */
    json_t *j = json_stringn((const char *)data, size);
    FUZZ_ASSERT(valid == (j != NULL && memchr(data, 0, size) == NULL));
    json_decref(j);
    check_name(s);
    check_key(s);
    check_rfc3339(s);
    check_clean((const char *)data, size, size > 0 ? data[0] : 0);
    free(s);
    return 0;
}
