/* The HTTP server's open connections: their count against the global limit, and the deadline a
 * request has to arrive whole (a client sending a byte now and then never meets the idle
 * timeout). Thread-safe bookkeeping on plain sockets; libmicrohttpd's callbacks and everything
 * about requests stay in http.c. */
#ifndef SVC_CONN_H
#define SVC_CONN_H

struct svc_conns;
struct svc_conn;

/* A set for at most limit connections, whose requests must arrive whole within request_s of
 * their first line, and whose first line within first_line_s of the connection opening or of
 * the previous response. NULL when out of memory. */
struct svc_conns *svc_conns_new(long limit, double request_s, double first_line_s);
/* Frees the set; every connection must have been closed. NULL-safe. */
void svc_conns_free(struct svc_conns *c);
/* May one more connection be accepted, with waiting others accepted but not counted yet (the
 * intake's)? (Under the limit; a racing accept may pass it by one per accepting thread.) */
int svc_conns_admit(struct svc_conns *c, long waiting);
/* The deadline of a request line, in seconds (first_line_s of svc_conns_new). */
double svc_conns_first_line_s(const struct svc_conns *c);
/* Counts an accepted connection on socket fd, its clock started at now. Returns its entry
 * (owned by the set until svc_conns_closed), or NULL when out of memory: it is then counted but
 * has no deadline. */
struct svc_conn *svc_conns_opened(struct svc_conns *c, int fd, double now);
/* Uncounts a connection, before its socket is closed; conn (may be NULL) is freed. */
void svc_conns_closed(struct svc_conns *c, struct svc_conn *conn);
/* A step of the connection's request: its first line arrived (in_request 1, receiving 1), it
 * arrived whole (1, 0), or its response ended and the next one may come (0, 1). The deadline
 * clock restarts at now on every step. conn may be NULL. */
void svc_conns_mark(struct svc_conns *c, struct svc_conn *conn, int in_request, int receiving,
                    double now);
/* The request in progress on conn (opaque here; NULL: none), kept so that whoever closes the
 * connection can end a request the HTTP library forgot. Only the connection's own thread may set
 * or read it. Both are no-ops (NULL) when conn is NULL. */
void svc_conns_set_request(struct svc_conn *conn, void *request);
void *svc_conns_request(const struct svc_conn *conn);
/* Something else the HTTP layer keeps with conn, on the same terms (opaque here, not freed). */
void svc_conns_set_note(struct svc_conn *conn, void *note);
void *svc_conns_note(const struct svc_conn *conn);
/* Ends the reading side (shutdown(2), SHUT_RD) of the sockets whose request missed its deadline
 * at now: the HTTP library then reads their end and closes them, and may first answer (the
 * sending side is left open for that). Returns how many were cut. */
int svc_conns_cut_late(struct svc_conns *c, double now);
/* Did svc_conns_cut_late cut conn? (0 for NULL.) */
int svc_conns_was_cut(const struct svc_conn *conn);

#endif
