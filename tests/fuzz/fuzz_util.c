/* The shared helpers of the fuzz targets (see fuzz.h). */
#include "tests/fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fuzz_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "fuzz: property broken at %s:%d: %s\n", file, line, what);
    abort();
}

char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        abort();
    if (size > 0)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

void fuzz_split(const uint8_t *data, size_t size, char **a, char **b)
{
    const uint8_t *nul = size > 0 ? memchr(data, 0, size) : NULL;
    size_t alen = nul ? (size_t)(nul - data) : size;
    *a = fuzz_cstr(data, alen);
    *b = nul ? fuzz_cstr(nul + 1, size - alen - 1) : fuzz_cstr(data, 0);
}

int fuzz_utf8_ref(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        unsigned long cp;
        size_t need;
        if (c == 0)
            return 0;
        if (c <= 0x7f) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            need = 1, cp = c & 0x1fu;
        else if (c >= 0xe0 && c <= 0xef)
            need = 2, cp = c & 0x0fu;
        else if (c >= 0xf0 && c <= 0xf4)
            need = 3, cp = c & 0x07u;
        else
            return 0; /* a continuation byte, C0, C1 or F5..FF cannot start a character */
        if (len - i <= need)
            return 0;
        for (size_t k = 1; k <= need; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i + k] & 0x3fu);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        if (cp >= 0xd800 && cp <= 0xdfff)
            return 0;
        i += need + 1;
    }
    return 1;
}

size_t fuzz_utf8_char_ref(const char *s, size_t avail)
{
    for (size_t k = 1; k <= 4 && k <= avail; k++)
        if (fuzz_utf8_ref(s, k))
            return k;
    return 0;
}

char *fuzz_utf8_clean_ref(const char *s, size_t len, size_t *outlen)
{
    char *out = malloc(3 * len + 1);
    FUZZ_ASSERT(out != NULL);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t k = fuzz_utf8_char_ref(s + i, len - i);
        if (k == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        }
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

json_t *fuzz_json(const char *s)
{
    return json_loads(s, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
}
