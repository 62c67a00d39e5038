/* Fuzz target: svc_buf_json_string, the JSON string escaping of hand-written JSON (logs,
 * metrics). Input: one byte choosing the buffer's maximum, then the string (up to a NUL). Valid
 * UTF-8 comes out as a JSON string that parses back to the same text, with no raw control
 * character; an append past the maximum fails and leaves the buffer as it was. */
#include <stdlib.h>
#include <string.h>

#include "service/buf.h"
#include "service/json_util.h"
#include "tests/fuzz/fuzz.h"

/* The text appended for s, out[0..outlen). */
static void check_escaped(const char *s, const char *out, size_t outlen)
{
    FUZZ_ASSERT(outlen >= 2 && out[0] == '"' && out[outlen - 1] == '"');
    for (size_t i = 0; i < outlen; i++)
        FUZZ_ASSERT((unsigned char)out[i] >= 0x20);
    if (svc_utf8_valid(s, strlen(s))) {
        json_error_t err;
        json_t *back = json_loadb(out, outlen, JSON_DECODE_ANY, &err);
        FUZZ_ASSERT(json_is_string(back) && strcmp(json_string_value(back), s) == 0);
        json_decref(back);
    }
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
