/* Fuzz target: svc_buf_json_string, the JSON string escaping of hand-written JSON (logs,
 * metrics). Input: one byte choosing the buffer's maximum, then the string (up to a NUL). Any
 * bytes come out as a JSON string without raw control characters that parses back to the text,
 * with U+FFFD for each byte that starts no well-formed character (compared with a reference);
 * an append past the maximum fails and leaves the buffer as it was. */
#include <stdlib.h>
#include <string.h>

#include "service/buf.h"
#include "service/utf8.h"
#include "tests/fuzz/fuzz.h"

/* The text appended for s, out[0..outlen): a JSON string of s, each byte that is not UTF-8
 * written as U+FFFD. */
static void check_escaped(const char *s, const char *out, size_t outlen)
{
    FUZZ_ASSERT(outlen >= 2 && out[0] == '"' && out[outlen - 1] == '"');
    for (size_t i = 0; i < outlen; i++)
        FUZZ_ASSERT((unsigned char)out[i] >= 0x20);
    FUZZ_ASSERT(svc_utf8_valid(out, outlen));
    size_t want_len;
    char *want = fuzz_utf8_clean_ref(s, strlen(s), &want_len);
    json_error_t err;
    json_t *back = json_loadb(out, outlen, JSON_DECODE_ANY, &err);
    FUZZ_ASSERT(json_is_string(back) && json_string_length(back) == want_len);
    FUZZ_ASSERT(memcmp(json_string_value(back), want, want_len) == 0);
    json_decref(back);
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    /* 0: a buffer large enough for any escaping; else a small maximum that often runs out */
    size_t max = data[0] == 0 ? 6 * size + 16 : (size_t)data[0] * 4;
    char *s = fuzz_cstr(data + 1, size - 1);
    struct svc_buf b;
    svc_buf_init(&b, max);
    FUZZ_ASSERT(svc_buf_puts(&b, "[") == 0);
    size_t before = b.len;
    if (svc_buf_json_string(&b, s) == 0) {
        FUZZ_ASSERT(b.len <= max && b.data[b.len] == '\0');
        check_escaped(s, b.data + before, b.len - before);
    } else {
        /* only a small maximum can run out, and then nothing was appended */
        FUZZ_ASSERT(data[0] != 0 && b.len == before && b.data[b.len] == '\0');
    }
    svc_buf_free(&b);
    free(s);
    return 0;
}
