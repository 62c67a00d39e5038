/* Request ids: the client's X-Request-Id when it is fit to echo in a header and a log line,
 * else one generated here (32 random hex digits). Pure string work; where the id is kept and
 * sent is the request's (request.c, reply.c). */
#ifndef SVC_REQUEST_ID_H
#define SVC_REQUEST_ID_H

/* The longest id taken from a client, in bytes (without the NUL). */
#define SVC_REQUEST_ID_MAX 128
/* The length of a generated id (without the NUL). */
#define SVC_REQUEST_ID_GENERATED 32

/* 1 when id may be used as given: 1 to SVC_REQUEST_ID_MAX printable ASCII characters, no space,
 * quote or backslash; else 0. */
int svc_request_id_valid(const char *id);
/* Writes a new id (a per-thread xorshift128+, seeded from getrandom) and its NUL into out. */
void svc_request_id_generate(char out[SVC_REQUEST_ID_GENERATED + 1]);
/* The request's id into out: given (may be NULL) when valid, else a generated one. */
void svc_request_id_take(char out[SVC_REQUEST_ID_MAX + 1], const char *given);

#endif
