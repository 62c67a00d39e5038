/* A fault for the service under test, loaded with LD_PRELOAD: json_dumps fails (returns NULL, as
 * jansson does out of memory) for any value whose text holds DUMPS_FAIL_MARKER, and behaves as
 * jansson's own otherwise. It lets a test reach the "cannot encode" paths of a route, which no
 * request can reach on a healthy machine. Nothing else belongs here. */
#include <dlfcn.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "dumps_fail.h"

char *json_dumps(const json_t *json, size_t flags)
{
    char *(*real)(const json_t *, size_t) =
        (char *(*)(const json_t *, size_t))dlsym(RTLD_NEXT, "json_dumps");
    char *text = real != NULL ? real(json, flags) : NULL;
    if (text != NULL && strstr(text, DUMPS_FAIL_MARKER) != NULL) {
        free(text);
        return NULL;
    }
    return text;
}
