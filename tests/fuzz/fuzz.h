/* Shared pieces of the libFuzzer targets: the entry point's prototype, an assertion that names
 * the broken property and aborts (libFuzzer then saves the input), and small reference
 * implementations the targets compare the service's code against. No service code here. */
#ifndef TESTS_FUZZ_H
#define TESTS_FUZZ_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with the property's text and place when cond is false. */
#define FUZZ_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fuzz_fail(#cond, __FILE__, __LINE__);                                                  \
    } while (0)
void fuzz_fail(const char *what, const char *file, int line) __attribute__((noreturn));

/* A NUL-terminated copy of size bytes (malloc; the caller frees it). Embedded NULs are kept, so
 * strlen may be shorter than size. Never NULL (aborts when out of memory). */
char *fuzz_cstr(const uint8_t *data, size_t size);
/* Splits data at its first NUL byte: *a gets the part before it, *b the part after (both NUL-
 * terminated copies, free them). Without a NUL, *a is all of it and *b is "". */
void fuzz_split(const uint8_t *data, size_t size, char **a, char **b);
/* Reference UTF-8 check, written independently of the service's: well-formed (no overlong
 * form, no surrogate, at most U+10FFFF) and without NUL. */
int fuzz_utf8_ref(const char *s, size_t len);
/* Length of the well-formed character at s (avail bytes), 1 to 4, or 0 when none starts there:
 * the shortest prefix the reference check accepts. */
size_t fuzz_utf8_char_ref(const char *s, size_t avail);
/* s (len bytes) with every byte that starts no well-formed character replaced by U+FFFD
 * (malloc'd, NUL-terminated, its length in *outlen). */
char *fuzz_utf8_clean_ref(const char *s, size_t len, size_t *outlen);
/* Parses s as any JSON value (jansson, duplicates rejected); NULL when it is not JSON. */
json_t *fuzz_json(const char *s);

#endif
