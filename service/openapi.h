/* The OpenAPI document from openapi/openapi.json, embedded at build time (service/embed.cmake). */
#ifndef SVC_OPENAPI_H
#define SVC_OPENAPI_H

#include <stddef.h>

extern const char svc_openapi_json[];
extern const size_t svc_openapi_json_len;

#endif
