/* Request ids (see request_id.h): validation of the client's and generation of our own. */
#include "service/request_id.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>

_Static_assert(SVC_REQUEST_ID_GENERATED <= SVC_REQUEST_ID_MAX,
               "a generated id fits where a taken one does");

int svc_request_id_valid(const char *id)
{
    size_t n = 0;
    for (; id[n] != '\0'; n++) {
        unsigned char c = (unsigned char)id[n];
        if (n >= SVC_REQUEST_ID_MAX || c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return 0;
    }
    return n > 0;
}

void svc_request_id_generate(char out[SVC_REQUEST_ID_GENERATED + 1])
{
    static _Thread_local uint64_t state[2];
    if (state[0] == 0 && state[1] == 0) {
        if (getrandom(state, sizeof(state), 0) != sizeof(state) || (state[0] | state[1]) == 0) {
            state[0] = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&state;
            state[1] = 0x9e3779b97f4a7c15ull;
        }
    }
    static const char hex[] = "0123456789abcdef";
    for (int half = 0; half < 2; half++) {
        /* xorshift128+ */
        uint64_t s1 = state[0];
        const uint64_t s0 = state[1];
        state[0] = s0;
        s1 ^= s1 << 23;
        state[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
        uint64_t v = state[1] + s0;
        /* a byte at a time, low nibble first, as the ids always were */
        for (int i = 0; i < 8; i++, v >>= 8) {
            out[half * 16 + 2 * i] = hex[v & 15];
            out[half * 16 + 2 * i + 1] = hex[(v >> 4) & 15];
        }
    }
    out[SVC_REQUEST_ID_GENERATED] = '\0';
}

void svc_request_id_take(char out[SVC_REQUEST_ID_MAX + 1], const char *given)
{
    if (given != NULL && svc_request_id_valid(given))
        snprintf(out, SVC_REQUEST_ID_MAX + 1, "%s", given);
    else
        svc_request_id_generate(out);
}
