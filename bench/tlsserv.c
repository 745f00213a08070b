/* Minimal civetweb TLS servers for the benchmarks (see tlsserv.h).
 *
 * DESIGN: civetweb calls the handler on its worker threads; the handler owns nothing but
 * its request. Each server keeps its own small context (handler, user data, key files).
 */
#include "tlsserv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ssl.h>

#define TLS12_CIPHERS                                                                                          \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"                \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

typedef struct srv {
    tls_handler_fn fn;
    void *ud;
    const char *cert, *key;
} srv_t;

static int on_request(struct mg_connection *conn)
{
    srv_t *s = mg_get_user_data(mg_get_context(conn));
    return s->fn(conn, s->ud);
}

static int on_init_ssl(void *ssl_ctx, void *user_data)
{
    srv_t *s = user_data;
    SSL_CTX *ctx = ssl_ctx;
    if (SSL_CTX_use_certificate_chain_file(ctx, s->cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, s->key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1 ||
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 || SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1)
        return -1;
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
    static const unsigned char sid[] = "kqbench";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    return 1;
}

static int on_log(const struct mg_connection *conn, const char *message)
{
    (void)conn;
    (void)message;
    return 1;
}

struct mg_context *tls_server_start(const char *cert, const char *key, int threads, tls_handler_fn fn, void *ud,
                                    int *port)
{
    srv_t *s = calloc(1, sizeof(*s)); /* lives as long as the process */
    if (s == NULL)
        return NULL;
    *s = (srv_t){.fn = fn, .ud = ud, .cert = cert, .key = key};
    char nthreads[16];
    snprintf(nthreads, sizeof(nthreads), "%d", threads);
    const char *options[] = {
        "listening_ports", "127.0.0.1:0s",
        "num_threads", nthreads,
        "enable_keep_alive", "yes",
        "keep_alive_timeout_ms", "30000",
        "request_timeout_ms", "30000",
        "decode_url", "no",
        "ssl_protocol_version", "4",
        "tcp_nodelay", "1",
        NULL,
    };
    struct mg_callbacks cb;
    memset(&cb, 0, sizeof(cb));
    cb.begin_request = on_request;
    cb.init_ssl = on_init_ssl;
    cb.log_message = on_log;
    struct mg_context *ctx = mg_start(&cb, s, options);
    if (ctx == NULL) {
        fprintf(stderr, "kqbench: cannot start a TLS server with %s\n", cert);
        free(s);
        return NULL;
    }
    struct mg_server_port ports[2];
    if (mg_get_server_ports(ctx, 2, ports) < 1) {
        mg_stop(ctx);
        return NULL;
    }
    *port = ports[0].port;
    return ctx;
}

char *tls_read_body(struct mg_connection *conn, size_t *len)
{
    const struct mg_request_info *ri = mg_get_request_info(conn);
    long long cl = ri->content_length;
    if (cl < 0)
        cl = 0;
    char *buf = malloc((size_t)cl + 1);
    if (buf == NULL)
        return NULL;
    size_t n = 0;
    while (n < (size_t)cl) {
        int r = mg_read(conn, buf + n, (size_t)cl - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

void tls_reply(struct mg_connection *conn, int status, const char *ctype, const char *body, size_t len)
{
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n"
                     "X-Content-Type-Options: nosniff\r\n"
                     "\r\n",
                     status, mg_get_response_code_text(conn, status), ctype, len);
    if (mg_write(conn, head, (size_t)n) < 0)
        return;
    if (len > 0)
        mg_write(conn, body, len);
}
