/* Unit tests for the HTTP(S) server, driven with libcurl over loopback.
 *
 * A throwaway CA, a server certificate (127.0.0.1/localhost), a client certificate signed
 * by the CA and a self-signed "rogue" client certificate are generated with the openssl
 * command into a mkdtemp() folder at start and deleted at the end (no key is ever
 * committed). Checked: TLS 1.0/1.1 refused and TLS 1.2/1.3 accepted, weak TLS 1.2 ciphers
 * refused, client certificates required when a client CA is set, routing and status
 * mapping (404, 405 + Allow, 400, 413 with Content-Length and chunked bodies), /readyz,
 * percent-decoded path parameters, JSON error bodies, per-endpoint latency metrics, and
 * start-up errors (missing files, mismatched key, address in use).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "kubequota/serve/admission.h"
#include "kubequota/app.h"
#include "kubequota/engine/config.h"
#include "kubequota/control/ledger.h"
#include "kubequota/base/log.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/serve/server.h"
#include "kubequota/engine/ugm.h"

#define MAX_BODY 4096

/* civetweb 1.15 signals shutdown through a plain volatile int (mg_stop writes it, its
 * threads poll it), so ThreadSanitizer reports mg_stop and the frees that flag orders.
 * Only those civetweb shutdown paths are suppressed (read by TSan builds only). */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "race:mg_stop\nrace:close_all_listening_sockets\nrace:STOP_FLAG_ASSIGN\n";
}

static const char QUEUES_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: default\n"
    "          - name: team-a\n";

static char dir[256];
static char ca_crt[300], srv_crt[300], srv_key[300], cli_crt[300], cli_key[300], rogue_crt[300], rogue_key[300];

/* ------------------------------------------------------------------ certificates */

static int make_certs(void)
{
    snprintf(dir, sizeof(dir), "%s/kq-server-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL)
        return -1;
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && {"
             " openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=kq-test-ca &&"
             " openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=localhost &&"
             " printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' > srv.ext &&"
             " openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2"
             "   -extfile srv.ext &&"
             " openssl req -newkey rsa:2048 -nodes -keyout cli.key -out cli.csr -subj /CN=kube-scheduler &&"
             " printf 'extendedKeyUsage=clientAuth\\n' > cli.ext &&"
             " openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cli.crt -days 2"
             "   -extfile cli.ext &&"
             " openssl req -x509 -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.crt -days 2 -subj /CN=rogue;"
             " } >/dev/null 2>&1",
             dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot generate test certificates with openssl in %s\n", dir);
        return -1;
    }
    snprintf(ca_crt, sizeof(ca_crt), "%s/ca.crt", dir);
    snprintf(srv_crt, sizeof(srv_crt), "%s/srv.crt", dir);
    snprintf(srv_key, sizeof(srv_key), "%s/srv.key", dir);
    snprintf(cli_crt, sizeof(cli_crt), "%s/cli.crt", dir);
    snprintf(cli_key, sizeof(cli_key), "%s/cli.key", dir);
    snprintf(rogue_crt, sizeof(rogue_crt), "%s/rogue.crt", dir);
    snprintf(rogue_key, sizeof(rogue_key), "%s/rogue.key", dir);
    return 0;
}

static void remove_certs(void)
{
    if (dir[0] == '\0')
        return;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* ------------------------------------------------------------------ app + server */

typedef struct fx {
    kq_config_t *cfg;
    kq_app_t app;
    kq_server_t *srv;
    int port;
    bool tls;
} fx_t;

static int app_init(fx_t *f)
{
    kq_diags_t d;
    kq_diags_init(&d);
    int rc = kq_config_load_buffer(QUEUES_YAML, strlen(QUEUES_YAML), "t.yaml", &f->cfg, &d);
    kq_diags_free(&d);
    if (rc != 0)
        return -1;
    f->app.partition = "default";
    f->app.scheduler_name = "quota-scheduler";
    f->app.default_user = "nobody";
    f->app.config = kq_config_holder_new(f->cfg);
    f->app.ugm = kq_ugm_new("default");
    if (f->app.ugm == NULL || kq_ugm_set_config(f->app.ugm, f->cfg) != 0)
        return -1;
    f->app.ledger = kq_ledger_new(f->app.ugm, "quota-scheduler");
    f->app.metrics = kq_metrics_new();
    atomic_init(&f->app.ready, false);
    return 0;
}

static fx_t *start(bool tls, const char *client_ca, const kq_admission_opts_t *adm, size_t max_body)
{
    fx_t *f = calloc(1, sizeof(*f));
    if (f == NULL || app_init(f) != 0)
        return NULL;
    kq_server_opts_t o = {
        .listen = "127.0.0.1:0",
        .tls_cert = tls ? srv_crt : NULL,
        .tls_key = tls ? srv_key : NULL,
        .client_ca = client_ca,
        .plain_http = !tls,
        .max_body = max_body,
        .threads = 4,
        /* the tests' one client may hold more than half of 4 workers' connections for a
         * moment: a closed connection frees its slot when its worker sees the close, which
         * on a loaded host came after the next test's connect ("SSL connect error" in
         * test_readyz after test_body_limit). The limit itself is tested end to end in
         * tests/e2e (test_hostile). */
        .max_client_conns = 16,
        .admission = adm,
    };
    char err[512] = "";
    f->srv = kq_server_start(&o, &f->app, err, sizeof(err));
    if (f->srv == NULL) {
        fprintf(stderr, "server: %s\n", err);
        return NULL;
    }
    f->port = kq_server_port(f->srv);
    f->tls = tls;
    return f->port > 0 ? f : NULL;
}

static void stop(fx_t *f)
{
    if (f == NULL)
        return;
    kq_server_stop(f->srv);
    kq_ledger_free(f->app.ledger);
    kq_ugm_free(f->app.ugm);
    kq_metrics_free(f->app.metrics);
    kq_config_holder_free(f->app.config);
    kq_config_unref(f->cfg);
    free(f);
}

/* Three servers shared by the tests (civetweb needs up to 2 s to stop, so they are
 * started once): TLS, TLS with client certificates, plain HTTP. */
static fx_t *srv_tls, *srv_mtls, *srv_plain;

static int use(void **state, fx_t *f)
{
    if (f == NULL)
        return -1;
    atomic_store(&f->app.ready, true); /* tests of readiness set it back themselves */
    f->tls = f != srv_plain;
    *state = f;
    return 0;
}

static int setup_tls(void **state)
{
    return use(state, srv_tls);
}

static int setup_mtls(void **state)
{
    return use(state, srv_mtls);
}

static int setup_plain(void **state)
{
    return use(state, srv_plain);
}

/* ------------------------------------------------------------------ client */

typedef struct http {
    /* request */
    const char *method;       /* "GET" (default) or "POST" */
    const char *body;
    size_t body_len;
    bool chunked;             /* send the body with Transfer-Encoding: chunked */
    bool no_expect;           /* suppress curl's "Expect: 100-continue" */
    long tls_min, tls_max;    /* CURL_SSLVERSION_* (0 = curl's default) */
    const char *ciphers;
    const char *cert, *key;   /* client certificate */
    /* response */
    CURLcode rc;
    long status;
    char body_out[65536];
    size_t out_len;
    char allow[128];
    char ctype[128];
    size_t sent;              /* read callback position */
} http_t;

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    http_t *h = ud;
    size_t len = sz * n;
    size_t room = sizeof(h->body_out) - 1 - h->out_len;
    size_t take = len < room ? len : room;
    memcpy(h->body_out + h->out_len, p, take);
    h->out_len += take;
    h->body_out[h->out_len] = '\0';
    return len;
}

static void header_value(const char *line, size_t len, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(line, name, nl) != 0)
        return;
    const char *v = line + nl;
    size_t vl = len - nl;
    while (vl > 0 && (*v == ' '))
        v++, vl--;
    while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
        vl--;
    snprintf(out, outlen, "%.*s", (int)vl, v);
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    http_t *h = ud;
    header_value(p, sz * n, "Allow:", h->allow, sizeof(h->allow));
    header_value(p, sz * n, "Content-Type:", h->ctype, sizeof(h->ctype));
    return sz * n;
}

static size_t on_read(char *p, size_t sz, size_t n, void *ud)
{
    http_t *h = ud;
    size_t left = h->body_len - h->sent;
    size_t take = sz * n < left ? sz * n : left;
    if (take > 700)
        take = 700; /* several chunks */
    memcpy(p, h->body + h->sent, take);
    h->sent += take;
    return take;
}

static void do_http(fx_t *f, const char *path, http_t *h)
{
    char url[512];
    snprintf(url, sizeof(url), "%s://127.0.0.1:%d%s", f->tls ? "https" : "http", f->port, path);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    struct curl_slist *hdrs = NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca_crt);
    if (h->tls_min || h->tls_max)
        curl_easy_setopt(c, CURLOPT_SSLVERSION, h->tls_min | h->tls_max);
    if (h->ciphers != NULL) {
        curl_easy_setopt(c, CURLOPT_SSL_CIPHER_LIST, h->ciphers);
        curl_easy_setopt(c, CURLOPT_TLS13_CIPHERS, "TLS_AES_128_GCM_SHA256");
    }
    if (h->cert != NULL) {
        curl_easy_setopt(c, CURLOPT_SSLCERT, h->cert);
        curl_easy_setopt(c, CURLOPT_SSLKEY, h->key);
    }
    if (h->method != NULL && strcmp(h->method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        if (h->chunked) {
            hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
            curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(c, CURLOPT_READDATA, h);
        } else {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, h->body ? h->body : "");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)h->body_len);
        }
    } else if (h->method != NULL && strcmp(h->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (h->method != NULL) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, h->method);
    }
    if (h->no_expect)
        hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    h->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
}

static long get(fx_t *f, const char *path, http_t *h)
{
    do_http(f, path, h);
    if (h->rc != CURLE_OK)
        fail_msg("GET %s: %s", path, curl_easy_strerror(h->rc));
    return h->status;
}

static long post(fx_t *f, const char *path, const char *body, size_t len, http_t *h)
{
    h->method = "POST";
    h->body = body;
    h->body_len = len;
    do_http(f, path, h);
    if (h->rc != CURLE_OK)
        fail_msg("POST %s: %s", path, curl_easy_strerror(h->rc));
    return h->status;
}

static json_t *json_body(const http_t *h)
{
    json_error_t e;
    json_t *j = json_loads(h->body_out, 0, &e);
    if (j == NULL)
        fail_msg("response is not JSON (%s): %s", e.text, h->body_out);
    assert_non_null(strstr(h->ctype, "application/json"));
    return j;
}

static void assert_json_error(const http_t *h, const char *needle)
{
    json_t *j = json_body(h);
    const char *msg = json_string_value(json_object_get(j, "error"));
    if (json_object_get(j, "status_code") != NULL) {
        /* /ws/v1: YuniKorn's YAPIError body {"status_code","message","description"} */
        assert_int_equal(json_integer_value(json_object_get(j, "status_code")), h->status);
        assert_non_null(json_string_value(json_object_get(j, "message")));
        msg = json_string_value(json_object_get(j, "description"));
    }
    assert_non_null(msg);
    if (needle != NULL && strstr(msg, needle) == NULL)
        fail_msg("error \"%s\" does not mention \"%s\"", msg, needle);
    json_decref(j);
}

/* ------------------------------------------------------------------ TLS */

static void test_tls12_and_13_accepted(void **state)
{
    fx_t *f = *state;
    http_t h = {.tls_min = CURL_SSLVERSION_TLSv1_2, .tls_max = CURL_SSLVERSION_MAX_TLSv1_2};
    assert_int_equal(get(f, "/healthz", &h), 200);
    assert_string_equal(h.body_out, "ok");
    http_t h13 = {.tls_min = CURL_SSLVERSION_TLSv1_3, .tls_max = CURL_SSLVERSION_MAX_TLSv1_3};
    assert_int_equal(get(f, "/healthz", &h13), 200);
}

static void test_old_tls_refused(void **state)
{
    fx_t *f = *state;
    /* the client is willing (security level 0 allows the old protocols and SHA-1) */
    http_t h11 = {.tls_min = CURL_SSLVERSION_TLSv1_1, .tls_max = CURL_SSLVERSION_MAX_TLSv1_1,
                  .ciphers = "DEFAULT:@SECLEVEL=0"};
    do_http(f, "/healthz", &h11);
    assert_int_not_equal(h11.rc, CURLE_OK);
    assert_int_equal(h11.status, 0);
    http_t h10 = {.tls_min = CURL_SSLVERSION_TLSv1_0, .tls_max = CURL_SSLVERSION_MAX_TLSv1_0,
                  .ciphers = "DEFAULT:@SECLEVEL=0"};
    do_http(f, "/healthz", &h10);
    assert_int_not_equal(h10.rc, CURLE_OK);
    /* the same client settings up to TLS 1.2 work: the refusal was the protocol version */
    http_t h12 = {.tls_min = CURL_SSLVERSION_TLSv1_1, .tls_max = CURL_SSLVERSION_MAX_TLSv1_2,
                  .ciphers = "DEFAULT:@SECLEVEL=0"};
    assert_int_equal(get(f, "/healthz", &h12), 200);
}

static void test_weak_ciphers_refused(void **state)
{
    fx_t *f = *state;
    static const char *const weak[] = {"AES128-SHA", "AES256-GCM-SHA384", "ECDHE-RSA-AES128-SHA",
                                       "ECDHE-RSA-AES256-SHA384", "DES-CBC3-SHA:@SECLEVEL=0"};
    for (size_t i = 0; i < sizeof(weak) / sizeof(weak[0]); i++) {
        http_t h = {.tls_min = CURL_SSLVERSION_TLSv1_2, .tls_max = CURL_SSLVERSION_MAX_TLSv1_2, .ciphers = weak[i]};
        do_http(f, "/healthz", &h);
        if (h.rc == CURLE_OK)
            fail_msg("cipher %s was accepted", weak[i]);
    }
    http_t ok = {.tls_min = CURL_SSLVERSION_TLSv1_2, .tls_max = CURL_SSLVERSION_MAX_TLSv1_2,
                 .ciphers = "ECDHE-RSA-AES128-GCM-SHA256"};
    assert_int_equal(get(f, "/healthz", &ok), 200);
}

static void test_client_cert_required(void **state)
{
    fx_t *f = *state;
    http_t none = {0};
    do_http(f, "/healthz", &none);
    assert_int_not_equal(none.rc, CURLE_OK);
    assert_int_equal(none.status, 0);

    http_t rogue = {.cert = rogue_crt, .key = rogue_key};
    do_http(f, "/healthz", &rogue);
    assert_int_not_equal(rogue.rc, CURLE_OK);
    assert_int_equal(rogue.status, 0);

    http_t good = {.cert = cli_crt, .key = cli_key};
    assert_int_equal(get(f, "/healthz", &good), 200);
    /* TLS 1.2 too */
    http_t good12 = {.cert = cli_crt, .key = cli_key, .tls_min = CURL_SSLVERSION_TLSv1_2,
                     .tls_max = CURL_SSLVERSION_MAX_TLSv1_2};
    assert_int_equal(get(f, "/healthz", &good12), 200);
}

static void test_plain_http(void **state)
{
    fx_t *f = *state;
    http_t h = {0};
    assert_int_equal(get(f, "/healthz", &h), 200);
    assert_string_equal(h.body_out, "ok");
    /* TLS to a plain port fails */
    f->tls = true;
    http_t t = {0};
    do_http(f, "/healthz", &t);
    assert_int_not_equal(t.rc, CURLE_OK);
    f->tls = false;
}

/* ------------------------------------------------------------------ routing and errors */

static void test_status_mapping(void **state)
{
    fx_t *f = *state;
    size_t users_before = kq_ugm_user_count(f->app.ugm);
    http_t h = {0};
    assert_int_equal(get(f, "/nope", &h), 404);
    assert_json_error(&h, "/nope");

    http_t h2 = {0};
    assert_int_equal(get(f, "/healthz/", &h2), 404);

    http_t m1 = {0};
    assert_int_equal(get(f, "/scheduler/filter", &m1), 405);
    assert_string_equal(m1.allow, "POST");
    assert_json_error(&m1, "GET");

    http_t m2 = {0};
    assert_int_equal(post(f, "/healthz", "{}", 2, &m2), 405);
    assert_string_equal(m2.allow, "GET");

    http_t m3 = {.method = "DELETE"};
    assert_int_equal(get(f, "/ws/v1/partition/default/usage/users", &m3), 405);
    assert_string_equal(m3.allow, "GET");

    http_t head = {.method = "HEAD"};
    assert_int_equal(get(f, "/healthz", &head), 405);
    assert_string_equal(head.allow, "GET");

    http_t bad = {0};
    assert_int_equal(post(f, "/scheduler/filter", "{\"Pod\":", 7, &bad), 400);
    assert_json_error(&bad, "JSON");
    http_t bad2 = {0};
    assert_int_equal(post(f, "/scheduler/bind", "", 0, &bad2), 400);
    assert_json_error(&bad2, NULL);

    /* nothing was counted by the bad requests, and the server still answers */
    assert_int_equal(kq_ugm_user_count(f->app.ugm), users_before);
    http_t again = {0};
    assert_int_equal(get(f, "/healthz", &again), 200);
}

static void test_body_limit(void **state)
{
    fx_t *f = *state;
    char *big = malloc(3 * MAX_BODY);
    memset(big, ' ', 3 * MAX_BODY);
    big[0] = '{';
    big[3 * MAX_BODY - 1] = '}';

    /* with Content-Length: refused without reading, whether curl waits for 100 Continue or not */
    http_t h1 = {0};
    assert_int_equal(post(f, "/scheduler/filter", big, 3 * MAX_BODY, &h1), 413);
    assert_json_error(&h1, "4096");
    http_t h2 = {.no_expect = true};
    assert_int_equal(post(f, "/scheduler/filter", big, MAX_BODY + 1, &h2), 413);

    /* exactly the limit is fine (then it is a JSON question: an object of spaces is valid) */
    big[MAX_BODY - 1] = '}';
    http_t h3 = {.no_expect = true};
    assert_int_equal(post(f, "/scheduler/filter", big, MAX_BODY, &h3), 200);
    big[MAX_BODY - 1] = ' ';

    /* chunked: read up to the limit, then refused */
    http_t h4 = {.chunked = true, .no_expect = true};
    assert_int_equal(post(f, "/scheduler/filter", big, 2 * MAX_BODY, &h4), 413);
    assert_json_error(&h4, NULL);

    /* a chunked body within the limit is read whole */
    static const char yaml[] = "partitions:\n  - name: default\n    queues:\n      - name: root\n";
    http_t h5 = {.chunked = true, .no_expect = true};
    assert_int_equal(post(f, "/ws/v1/validate-conf", yaml, strlen(yaml), &h5), 200);
    json_t *j = json_body(&h5);
    assert_true(json_is_true(json_object_get(j, "allowed")));
    json_decref(j);

    http_t h6 = {.chunked = true, .no_expect = true};
    assert_int_equal(post(f, "/ws/v1/validate-conf", "queues: [", 9, &h6), 200);
    j = json_body(&h6);
    assert_true(json_is_false(json_object_get(j, "allowed")));
    json_decref(j);
    free(big);

    /* the server is still healthy */
    http_t h7 = {0};
    assert_int_equal(get(f, "/healthz", &h7), 200);
}

static void test_readyz(void **state)
{
    fx_t *f = *state;
    atomic_store(&f->app.ready, false);
    http_t h = {0};
    assert_int_equal(get(f, "/readyz", &h), 503);
    /* before the first pod list, no quota decision: the scheduler verbs answer 503 */
    static const char args[] = "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":\"u\"},"
                               "\"spec\":{\"schedulerName\":\"quota-scheduler\"}},\"Nodes\":null,\"NodeNames\":[\"n1\"]}";
    http_t f1 = {0}, b1 = {0};
    assert_int_equal(post(f, "/scheduler/filter", args, strlen(args), &f1), 503);
    static const char bargs[] = "{\"PodName\":\"p\",\"PodNamespace\":\"default\",\"PodUID\":\"u\",\"Node\":\"n1\"}";
    assert_int_equal(post(f, "/scheduler/bind", bargs, strlen(bargs), &b1), 503);
    size_t counted = 1;
    kq_ledger_size(f->app.ledger, &counted);
    assert_int_equal(counted, 0);
    atomic_store(&f->app.ready, true);
    http_t h2 = {0};
    assert_int_equal(get(f, "/readyz", &h2), 200);
    http_t f2 = {0};
    assert_int_equal(post(f, "/scheduler/filter", args, strlen(args), &f2), 200);
}

static void test_rest_routes(void **state)
{
    fx_t *f = *state;
    http_t h = {0};
    assert_int_equal(get(f, "/ws/v1/partition/default/usage/users", &h), 200);
    json_t *j = json_body(&h);
    assert_true(json_is_array(j));
    json_decref(j);

    http_t np = {0};
    assert_int_equal(get(f, "/ws/v1/partition/nope/usage/users", &np), 404);
    assert_json_error(&np, "Partition not found"); /* YuniKorn's text, no name (handlers.go) */

    /* usage for "a b/c" (a name with a space and a slash), addressed percent-encoded */
    const char *groups[] = {"dev"};
    kq_user_t u = {.name = "a b/c", .groups = groups, .n_groups = 1};
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&r, "cpu", 100), 0);
    char reason[256];
    assert_int_equal(kq_ugm_increase(f->app.ugm, "root.team-a", "app", &u, &r, reason, sizeof(reason), NULL), 0);
    http_t uh = {0};
    assert_int_equal(get(f, "/ws/v1/partition/default/usage/user/a%20b%2Fc", &uh), 200);
    j = json_body(&uh);
    assert_string_equal(json_string_value(json_object_get(j, "userName")), "a b/c");
    json_decref(j);

    http_t unknown = {0};
    assert_int_equal(get(f, "/ws/v1/partition/default/usage/user/bob", &unknown), 404);
    assert_json_error(&unknown, "User not found");

    http_t badesc = {0};
    assert_int_equal(get(f, "/ws/v1/partition/default/usage/user/a%zz", &badesc), 400);
    assert_json_error(&badesc, NULL);
    http_t nul = {0};
    assert_int_equal(get(f, "/ws/v1/partition/default/usage/user/a%00b", &nul), 400);
    http_t cut = {0}; /* an escape cut short at the end of the segment */
    assert_int_equal(get(f, "/ws/v1/partition/default/usage/user/a%2", &cut), 400);

    http_t groups_h = {0};
    assert_int_equal(get(f, "/ws/v1/partition/default/usage/groups", &groups_h), 200);
    http_t group_h = {0};
    assert_int_equal(get(f, "/ws/v1/partition/default/usage/group/nogroup", &group_h), 404);
    http_t queues = {0};
    assert_int_equal(get(f, "/ws/v1/partition/default/queues", &queues), 200);
    j = json_body(&queues);
    assert_string_equal(json_string_value(json_object_get(j, "queuename")), "root");
    json_decref(j);
}

static char *read_file(const char *name)
{
    const char *d = getenv("KQ_TEST_DATA");
    char path[512];
    snprintf(path, sizeof(path), "%s/k8s/%s", d && *d ? d : "tests/data", name);
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        fail_msg("cannot open %s", path);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return strdup(buf);
}

static void test_extender_and_metrics(void **state)
{
    fx_t *f = *state;
    unsigned long filters0 = kq_metrics_latency_count(f->app.metrics, KQ_EP_FILTER);
    unsigned long preempts0 = kq_metrics_latency_count(f->app.metrics, KQ_EP_PREEMPT);
    unsigned long allowed0 = kq_metrics_decision_count(f->app.metrics, KQ_VERB_FILTER, KQ_RESULT_ALLOWED);
    char *args = read_file("extender-filter-args.nodecachecapable-true.json");
    http_t h = {0};
    /* MAX_BODY is 4096 and the fixture is smaller */
    assert_true(strlen(args) < MAX_BODY);
    assert_int_equal(post(f, "/scheduler/filter", args, strlen(args), &h), 200);
    json_t *res = json_body(&h);
    json_t *in = json_loads(args, 0, NULL);
    assert_true(json_equal(json_object_get(res, "NodeNames"), json_object_get(in, "NodeNames")));
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(in);
    json_decref(res);
    free(args);

    args = read_file("extender-preempt-args.nodecachecapable-true.json");
    http_t p = {0};
    assert_int_equal(post(f, "/scheduler/preempt", args, strlen(args), &p), 200);
    free(args);

    http_t nf = {0};
    assert_int_equal(get(f, "/not-a-route-xyz", &nf), 404);

    http_t m = {0};
    assert_int_equal(get(f, "/metrics", &m), 200);
    assert_non_null(strstr(m.ctype, "text/plain"));
    assert_non_null(strstr(m.ctype, "version=0.0.4"));
    char want[256];
    snprintf(want, sizeof(want), "kubequota_request_duration_seconds_count{endpoint=\"/scheduler/filter\"} %lu\n",
             filters0 + 1);
    assert_non_null(strstr(m.body_out, want));
    snprintf(want, sizeof(want), "kubequota_request_duration_seconds_count{endpoint=\"/scheduler/preempt\"} %lu\n",
             preempts0 + 1);
    assert_non_null(strstr(m.body_out, want));
    snprintf(want, sizeof(want), "kubequota_decisions_total{verb=\"filter\",result=\"allowed\"} %lu\n", allowed0 + 1);
    assert_non_null(strstr(m.body_out, want));
    /* unknown paths never become label values */
    assert_null(strstr(m.body_out, "not-a-route-xyz"));
}

/* The decoded JSON Patch of an AdmissionReview response (static buffer). */
static const char *patch_of(const json_t *review)
{
    static unsigned char out[8192];
    const char *b64 = json_string_value(json_object_get(json_object_get(review, "response"), "patch"));
    assert_non_null(b64);
    assert_true(strlen(b64) < sizeof(out));
    int n = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)strlen(b64));
    assert_true(n > 0);
    out[n] = '\0';
    return (const char *)out;
}

static void test_admission_routes(void **state)
{
    fx_t *f = *state;
    char *fixture_text = read_file("admissionreview-v1-request.pod-create.json");
    json_t *req = json_loads(fixture_text, 0, NULL);
    free(fixture_text);
    /* created by a person (the fixture's requester is a trusted kube-system controller) */
    json_object_set_new(json_object_get(req, "request"), "userInfo",
                        json_pack("{s:s,s:[s]}", "username", "alice", "groups", "dev"));
    char *review = json_dumps(req, JSON_COMPACT);
    const char *uid = json_string_value(json_object_get(json_object_get(req, "request"), "uid"));
    assert_non_null(uid);

    http_t m = {0};
    assert_int_equal(post(f, "/admission/mutate", review, strlen(review), &m), 200);
    json_t *res = json_body(&m);
    assert_string_equal(json_string_value(json_object_get(res, "apiVersion")), "admission.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(res, "response"), "uid")), uid);
    assert_non_null(strstr(patch_of(res), "user-info"));
    assert_null(strstr(patch_of(res), "schedulerName"));
    json_decref(res);

    http_t ms = {0};
    assert_int_equal(post(f, "/admission/mutate-scheduler", review, strlen(review), &ms), 200);
    res = json_body(&ms);
    assert_non_null(strstr(patch_of(res), "/spec/schedulerName"));
    assert_non_null(strstr(patch_of(res), "quota-scheduler"));
    json_decref(res);

    /* issue 37: the namespace filter (here bypassing ^bypassed-) applies to mutate-scheduler
     * only; mutate-scheduler-opt-in and mutate govern the namespace whatever it says */
    json_object_set_new(json_object_get(req, "request"), "namespace", json_string("bypassed-ns"));
    char *bypassed = json_dumps(req, JSON_COMPACT);
    http_t mb = {0}, mo = {0}, mm = {0};
    assert_int_equal(post(f, "/admission/mutate-scheduler", bypassed, strlen(bypassed), &mb), 200);
    res = json_body(&mb);
    assert_true(json_is_true(json_object_get(json_object_get(res, "response"), "allowed")));
    assert_null(json_object_get(json_object_get(res, "response"), "patch"));
    json_decref(res);
    assert_int_equal(post(f, "/admission/mutate-scheduler-opt-in", bypassed, strlen(bypassed), &mo), 200);
    res = json_body(&mo);
    assert_non_null(strstr(patch_of(res), "quota-scheduler"));
    json_decref(res);
    assert_int_equal(post(f, "/admission/mutate", bypassed, strlen(bypassed), &mm), 200);
    res = json_body(&mm);
    assert_non_null(strstr(patch_of(res), "user-info"));
    json_decref(res);
    free(bypassed);

    http_t bad = {0};
    assert_int_equal(post(f, "/admission/validate", "nope", 4, &bad), 400);
    json_decref(req);
    free(review);

    /* a server without the webhook does not have the routes */
    http_t none = {0};
    assert_int_equal(post(srv_tls, "/admission/mutate", "{}", 2, &none), 404);
}

/* ------------------------------------------------------------------ start-up errors */

static void test_start_errors(void **state)
{
    (void)state;
    fx_t f;
    memset(&f, 0, sizeof(f));
    assert_int_equal(app_init(&f), 0);
    char err[512];
    char missing[400];
    snprintf(missing, sizeof(missing), "%s/no-such.crt", dir);

    kq_server_opts_t o = {.listen = "127.0.0.1:0", .tls_cert = missing, .tls_key = srv_key};
    err[0] = '\0';
    assert_null(kq_server_start(&o, &f.app, err, sizeof(err)));
    assert_non_null(strstr(err, "no-such.crt"));

    kq_server_opts_t mismatch = {.listen = "127.0.0.1:0", .tls_cert = srv_crt, .tls_key = cli_key};
    err[0] = '\0';
    assert_null(kq_server_start(&mismatch, &f.app, err, sizeof(err)));
    assert_non_null(strstr(err, "does not match"));

    kq_server_opts_t noca = {.listen = "127.0.0.1:0", .tls_cert = srv_crt, .tls_key = srv_key, .client_ca = missing};
    err[0] = '\0';
    assert_null(kq_server_start(&noca, &f.app, err, sizeof(err)));
    assert_non_null(strstr(err, "client CA"));

    kq_server_opts_t nokey = {.listen = "127.0.0.1:0", .tls_cert = srv_crt};
    err[0] = '\0';
    assert_null(kq_server_start(&nokey, &f.app, err, sizeof(err)));
    assert_true(strlen(err) > 0);

    kq_server_opts_t plain_ca = {.listen = "127.0.0.1:0", .plain_http = true, .client_ca = ca_crt};
    err[0] = '\0';
    assert_null(kq_server_start(&plain_ca, &f.app, err, sizeof(err)));
    assert_true(strlen(err) > 0);

    kq_server_opts_t badlisten = {.listen = "localhost:http", .plain_http = true};
    err[0] = '\0';
    assert_null(kq_server_start(&badlisten, &f.app, err, sizeof(err)));
    assert_non_null(strstr(err, "localhost:http"));

    /* the same port twice */
    kq_server_opts_t first = {.listen = "127.0.0.1:0", .plain_http = true, .threads = 2};
    kq_server_t *s1 = kq_server_start(&first, &f.app, err, sizeof(err));
    assert_non_null(s1);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", kq_server_port(s1));
    kq_server_opts_t second = {.listen = addr, .plain_http = true, .threads = 2};
    err[0] = '\0';
    assert_null(kq_server_start(&second, &f.app, err, sizeof(err)));
    assert_true(strlen(err) > 0);
    kq_server_stop(s1);
    kq_server_stop(NULL);
    assert_int_equal(kq_server_port(NULL), -1);

    kq_ledger_free(f.app.ledger);
    kq_ugm_free(f.app.ugm);
    kq_metrics_free(f.app.metrics);
    kq_config_holder_free(f.app.config);
    kq_config_unref(f.cfg);
}

static void *stop_thread(void *p)
{
    stop(p);
    return NULL;
}

static kq_admission_ns_filter_t *ns_filter; /* the webhook server's, freed at teardown */

static int group_setup(void **state)
{
    (void)state;
    if (make_certs() != 0)
        return -1;
    static kq_admission_opts_t adm;
    adm = kq_admission_opts_default();
    adm.scheduler_name = "quota-scheduler";
    char ferr[128];
    if (kq_admission_ns_filter_new(NULL, "^kube-system$,^bypassed-", &ns_filter, ferr, sizeof ferr) != 0)
        return -1;
    adm.ns_filter = ns_filter;
    srv_tls = start(true, NULL, NULL, MAX_BODY);
    srv_mtls = start(true, ca_crt, NULL, MAX_BODY);
    srv_plain = start(false, NULL, &adm, 1 << 20); /* with the admission webhook */
    return srv_tls && srv_mtls && srv_plain ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    pthread_t th[3];
    fx_t *all[3] = {srv_tls, srv_mtls, srv_plain};
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, stop_thread, all[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    kq_admission_ns_filter_free(ns_filter);
    remove_certs();
    return 0;
}

int main(void)
{
    kq_log_set_level("error");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kq_server_global_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_tls12_and_13_accepted, setup_tls),
        cmocka_unit_test_setup(test_old_tls_refused, setup_tls),
        cmocka_unit_test_setup(test_weak_ciphers_refused, setup_tls),
        cmocka_unit_test_setup(test_client_cert_required, setup_mtls),
        cmocka_unit_test_setup(test_plain_http, setup_plain),
        cmocka_unit_test_setup(test_status_mapping, setup_tls),
        cmocka_unit_test_setup(test_body_limit, setup_tls),
        cmocka_unit_test_setup(test_readyz, setup_tls),
        cmocka_unit_test_setup(test_rest_routes, setup_plain),
        cmocka_unit_test_setup(test_extender_and_metrics, setup_tls),
        cmocka_unit_test_setup(test_admission_routes, setup_plain),
        cmocka_unit_test(test_start_errors),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    curl_global_cleanup();
    return rc;
}
