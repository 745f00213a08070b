/* Minimal civetweb TLS servers for the benchmarks: the null extender endpoint, the API
 * server's binding responder and the LIST/WATCH responder. TLS is set up exactly as
 * src/serve/server.c sets up kubequota's (TLS 1.2 minimum, the same TLS 1.2 suites, no
 * compression, server preference, no renegotiation), so a kubequota/null ratio compares
 * handlers, not TLS settings. */
#ifndef KQBENCH_TLSSERV_H
#define KQBENCH_TLSSERV_H

#include <stddef.h>

#include <civetweb.h>

typedef int (*tls_handler_fn)(struct mg_connection *conn, void *ud);

/* Starts on 127.0.0.1 with a free port (*port set), `threads` workers; cert/key PEM files.
 * NULL on failure (message on stderr). */
struct mg_context *tls_server_start(const char *cert, const char *key, int threads, tls_handler_fn fn, void *ud,
                                    int *port);

/* Reads the whole request body (Content-Length) like kubequota's server does: one malloc
 * of Content-Length + 1, mg_read until complete. NULL on error. */
char *tls_read_body(struct mg_connection *conn, size_t *len);

/* Writes a response with the same headers kubequota's server writes. */
void tls_reply(struct mg_connection *conn, int status, const char *ctype, const char *body, size_t len);

#endif
