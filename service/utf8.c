/* UTF-8 validation and cleaning of untrusted bytes (see utf8.h). */
#include "service/utf8.h"

#include <string.h>

size_t svc_utf8_char_len(const char *s, size_t avail)
{
    const unsigned char *p = (const unsigned char *)s;
    if (avail == 0 || p[0] == 0)
        return 0;
    unsigned c = p[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        n = 1, min = 0x80, c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 2, min = 0x800, c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 3, min = 0x10000, c &= 0x07;
    } else {
        return 0;
    }
    if (avail <= n)
        return 0;
    for (size_t i = 1; i <= n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n + 1;
}

int svc_utf8_valid(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t n = svc_utf8_char_len(s + i, len - i);
        if (n == 0)
            return 0;
        i += n;
    }
    return 1;
}

size_t svc_utf8_clean(const char *s, size_t len, char *out, size_t max, int *cut)
{
    static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
    size_t i = 0, o = 0;
    while (i < len) {
        size_t n = svc_utf8_char_len(s + i, len - i);
        const char *from = n > 0 ? s + i : replacement;
        size_t w = n > 0 ? n : 3;
        if (w > max - o)
            break;
        memcpy(out + o, from, w);
        o += w;
        i += n > 0 ? n : 1;
    }
    out[o] = '\0';
    if (cut != NULL)
        *cut = i < len;
    return o;
}
