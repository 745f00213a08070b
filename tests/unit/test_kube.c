/* Tests of the Kubernetes client: kubeconfig and in-cluster settings, and (against a tiny
 * HTTP server on 127.0.0.1 run by the test) bind/get/evict status mapping, token files,
 * the response cap, the informer's line splitting, relists, re-watches and pagination,
 * and event deduplication and rate limiting.
 *
 * The test server answers each request from a per-test route function, keeps a log of
 * every request (method, target, Authorization, body) and can send a body as several
 * HTTP chunks with a pause between them, then either end the stream or hold it open
 * until the client goes away. Liveness waits poll with a generous deadline; nothing
 * asserts on time.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "kubequota/kube/kube.h"

#include "../jdoc_check.h"
#include "kubequota/base/log.h"

/* ======================================================================================
 * helpers
 * ====================================================================================== */

#define CA_PEM "-----BEGIN CERTIFICATE-----\nMIIBcaTESTca\n-----END CERTIFICATE-----\n"
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJjYVRFU1RjYQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="
#define CA_B64_NOPAD "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJjYVRFU1RjYQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg"
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nMIIBclientCERT\n-----END CERTIFICATE-----\n"
#define CERT_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJjbGllbnRDRVJUCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
/* Not a key: a placeholder with PEM markers (split so that secret scanners do not mistake
 * this file for one holding a private key). */
#define PEM_KEY_WORDS "PRIVATE" " KEY"
#define KEY_PEM "-----BEGIN " PEM_KEY_WORDS "-----\nMIIEkeyDATA\n-----END " PEM_KEY_WORDS "-----\n"
#define KEY_B64 "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUVrZXlEQVRBCi0tLS0tRU5EIFBSSVZBVEUgS0VZLS0tLS0K"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls pred every 10 ms for up to 20 s (a liveness bound, not a timing assertion). */
static bool wait_until(bool (*pred)(void *), void *arg)
{
    for (int i = 0; i < 2000; i++) {
        if (pred(arg))
            return true;
        sleep_ms(10);
    }
    return pred(arg);
}

static int parse(const char *yaml, const char *base, kq_kube_conf_t *out, kq_diags_t *d)
{
    kq_diags_init(d);
    return kq_kubeconfig_parse(yaml, strlen(yaml), "test.kubeconfig", base, out, d);
}

static bool diags_have(const kq_diags_t *d, const char *text)
{
    for (size_t i = 0; i < d->n; i++)
        if (strstr(d->v[i].text, text) != NULL)
            return true;
    return false;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ======================================================================================
 * kubeconfig
 * ====================================================================================== */

static const char *const full_kubeconfig =
    "apiVersion: v1\n"
    "kind: Config\n"
    "current-context: dev\n"
    "contexts:\n"
    "- name: other\n"
    "  context: {cluster: nowhere, user: nobody}\n"
    "- name: dev\n"
    "  context:\n"
    "    cluster: dev-cluster\n"
    "    user: dev-user\n"
    "    namespace: team-a\n"
    "clusters:\n"
    "- name: nowhere\n"
    "  cluster: {server: 'https://nowhere:1'}\n"
    "- name: dev-cluster\n"
    "  cluster:\n"
    "    server: https://10.0.0.1:6443/\n"
    "    certificate-authority-data: " CA_B64 "\n"
    "users:\n"
    "- name: dev-user\n"
    "  user:\n"
    "    token: abc.def\n"
    "    client-certificate-data: " CERT_B64 "\n"
    "    client-key-data: " KEY_B64 "\n"
    "preferences: {}\n";

static void test_kubeconfig_data_fields(void **state)
{
    kq_kube_conf_t c = {0};
    kq_diags_t d;
    assert_int_equal(parse(full_kubeconfig, "/etc/kq", &c, &d), 0);
    assert_int_equal(d.n, 0);
    assert_string_equal(c.server, "https://10.0.0.1:6443");
    assert_string_equal(c.ca_pem, CA_PEM);
    assert_string_equal(c.cert_pem, CERT_PEM);
    assert_string_equal(c.key_pem, KEY_PEM);
    assert_string_equal(c.token, "abc.def");
    assert_string_equal(c.namespace, "team-a");
    assert_null(c.ca_file);
    assert_null(c.cert_file);
    assert_null(c.key_file);
    assert_null(c.token_file);
    assert_false(c.insecure);
    kq_kube_conf_free(&c);
    kq_diags_free(&d);
}

static void test_kubeconfig_relative_paths(void **state)
{
    const char *y = "current-context: c\n"
                    "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                    "clusters:\n"
                    "- name: k\n"
                    "  cluster:\n"
                    "    server: https://api.example.com\n"
                    "    certificate-authority: certs/ca.pem\n"
                    "users:\n"
                    "- name: u\n"
                    "  user:\n"
                    "    client-certificate: /abs/client.pem\n"
                    "    client-key: keys/client.key\n"
                    "    tokenFile: tok\n";
    kq_kube_conf_t c = {0};
    kq_diags_t d;
    assert_int_equal(parse(y, "/etc/kq", &c, &d), 0);
    assert_string_equal(c.server, "https://api.example.com");
    assert_string_equal(c.ca_file, "/etc/kq/certs/ca.pem");
    assert_string_equal(c.cert_file, "/abs/client.pem");
    assert_string_equal(c.key_file, "/etc/kq/keys/client.key");
    assert_string_equal(c.token_file, "/etc/kq/tok");
    assert_null(c.token);
    assert_null(c.namespace);
    assert_null(c.ca_pem);
    kq_kube_conf_free(&c);
    kq_diags_free(&d);
}

static void test_kubeconfig_insecure_and_scheme(void **state)
{
    const char *y = "current-context: c\n"
                    "contexts: [{name: c, context: {cluster: k}}]\n"
                    "clusters: [{name: k, cluster: {server: 'example.com:6443', "
                    "insecure-skip-tls-verify: true}}]\n";
    kq_kube_conf_t c = {0};
    kq_diags_t d;
    assert_int_equal(parse(y, NULL, &c, &d), 0);
    assert_string_equal(c.server, "https://example.com:6443");
    assert_true(c.insecure);
    assert_null(c.token);
    assert_null(c.cert_pem);
    kq_kube_conf_free(&c);
    kq_diags_free(&d);
}

static void test_kubeconfig_token_wins_over_token_file(void **state)
{
    const char *y = "current-context: c\n"
                    "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                    "clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                    "users: [{name: u, user: {token: t0k, tokenFile: /t}}]\n";
    kq_kube_conf_t c = {0};
    kq_diags_t d;
    assert_int_equal(parse(y, NULL, &c, &d), 0);
    assert_string_equal(c.token, "t0k");
    assert_null(c.token_file);
    kq_kube_conf_free(&c);
    kq_diags_free(&d);
}

static void test_kubeconfig_base64_forms(void **state)
{
    /* unpadded data, and data split over lines in a block scalar */
    const char *y1 = "current-context: c\n"
                     "contexts: [{name: c, context: {cluster: k}}]\n"
                     "clusters: [{name: k, cluster: {server: 'https://k', "
                     "certificate-authority-data: " CA_B64_NOPAD "}}]\n";
    const char *y2 = "current-context: c\n"
                     "contexts: [{name: c, context: {cluster: k}}]\n"
                     "clusters:\n"
                     "- name: k\n"
                     "  cluster:\n"
                     "    server: https://k\n"
                     "    certificate-authority-data: |\n"
                     "      LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJjYVRF\n"
                     "      U1RjYQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==\n";
    const char *ys[] = {y1, y2};
    for (int i = 0; i < 2; i++) {
        kq_kube_conf_t c = {0};
        kq_diags_t d;
        assert_int_equal(parse(ys[i], NULL, &c, &d), 0);
        assert_string_equal(c.ca_pem, CA_PEM);
        kq_kube_conf_free(&c);
        kq_diags_free(&d);
    }
}

typedef struct bad_case {
    const char *yaml;
    int line, column;
    const char *text;
} bad_case_t;

static void check_bad(const bad_case_t *b)
{
    char keep[] = "untouched";
    kq_kube_conf_t c = {.server = keep};
    kq_diags_t d;
    int rc = parse(b->yaml, "/base", &c, &d);
    if (rc != KQ_EPARSE || !diags_have(&d, b->text)) {
        char *all = kq_diags_join(&d, "\n");
        print_error("case %s\n  rc=%d diags:\n%s\n", b->text, rc, all);
        free(all);
    }
    assert_int_equal(rc, KQ_EPARSE);
    assert_true(d.n >= 1);
    assert_true(diags_have(&d, b->text));
    assert_string_equal(d.v[0].file, "test.kubeconfig");
    if (b->line > 0) {
        assert_int_equal(d.v[0].line, b->line);
        assert_int_equal(d.v[0].column, b->column);
    }
    assert_ptr_equal(c.server, keep); /* output untouched */
    assert_null(c.token);
    kq_diags_free(&d);
}

#define GOOD_CLUSTERS "clusters: [{name: k, cluster: {server: 'https://k'}}]\n"

static void test_kubeconfig_errors(void **state)
{
    const bad_case_t cases[] = {
        {"apiVersion: v1\nkind: Config\n", 1, 1, "current-context is not set"},
        {"apiVersion: v1\ncurrent-context: ''\n", 1, 1, "current-context is not set"},
        /* unknown context: reported at the current-context value */
        {"apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
         "contexts: [{name: dev, context: {cluster: k}}]\n" GOOD_CLUSTERS,
         3, 18, "no entry named \"prod\" in contexts"},
        /* no contexts at all */
        {"current-context: prod\n", 1, 18, "no entry named \"prod\" in contexts"},
        /* unknown cluster: reported at the context's cluster value */
        {"current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: missing\n" GOOD_CLUSTERS,
         5, 14, "no entry named \"missing\" in clusters"},
        /* unknown user */
        {"current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: ghost\n"
         GOOD_CLUSTERS "users: [{name: u, user: {token: x}}]\n",
         6, 11, "no entry named \"ghost\" in users"},
        /* a context without a cluster */
        {"current-context: c\ncontexts:\n- name: c\n  context:\n    user: u\n" GOOD_CLUSTERS,
         5, 5, "names no cluster"},
        /* contexts is not a list */
        {"current-context: c\ncontexts: {c: 1}\n", 2, 11, "must be a list"},
        /* exec auth is a deliberate gap */
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n" GOOD_CLUSTERS
         "users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
         "      command: aws\n",
         8, 7, "exec credential plugins are not supported"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n" GOOD_CLUSTERS
         "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n",
         0, 0, "auth-provider plugins are not supported"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n" GOOD_CLUSTERS
         "users: [{name: u, user: {username: admin, password: secret}}]\n",
         0, 0, "basic authentication (username/password) are not supported"},
        /* bad base64, reported at the value */
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters:\n- name: k\n"
         "  cluster:\n    server: https://k\n    certificate-authority-data: 'LS0t!!'\n",
         7, 33, "certificate-authority-data is not valid base64: invalid base64 character"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters:\n- name: k\n"
         "  cluster:\n    server: https://k\n    certificate-authority-data: LS0=tLS0\n",
         7, 33, "'=' padding in the middle"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters:\n- name: k\n"
         "  cluster:\n    server: https://k\n    certificate-authority-data: LS0tL\n",
         7, 33, "truncated base64 data"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters:\n- name: k\n"
         "  cluster:\n    server: https://k\n    certificate-authority-data: aGVsbG8gd29ybGQ=\n",
         7, 33, "does not decode to PEM"},
        /* conflicting or incomplete settings */
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority: /ca, "
         "certificate-authority-data: " CA_B64 "}}]\n",
         0, 0, "certificate-authority and certificate-authority-data are both set"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority: /ca, "
         "insecure-skip-tls-verify: true}}]\n",
         0, 0, "cannot be combined with a certificate authority"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n" GOOD_CLUSTERS
         "users: [{name: u, user: {client-certificate-data: " CERT_B64 "}}]\n",
         0, 0, "a client certificate is set without a client key"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
         "clusters: [{name: k, cluster: {insecure-skip-tls-verify: true}}]\n",
         0, 0, "no server address"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
         "clusters: [{name: k, cluster: {server: 'ftp://k'}}]\n",
         0, 0, "only http:// and https:// are supported"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
         "clusters: [{name: k, cluster: {server: 'https://k', insecure-skip-tls-verify: maybe}}]\n",
         0, 0, "insecure-skip-tls-verify must be true or false"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n" GOOD_CLUSTERS
         "users: [{name: u, user: {token: [a, b]}}]\n",
         0, 0, "token must be a string, not a list"},
        {"current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n" GOOD_CLUSTERS
         "users: [{name: u, user: {token: \"a\\0b\"}}]\n",
         0, 0, "token contains a NUL character"},
        /* not a mapping at all, empty document */
        {"- a\n- b\n", 1, 1, "must be a mapping"},
        {"", 0, 0, "empty kubeconfig"},
        /* malformed YAML: the unclosed flow sequence is reported where the parser gave up */
        {"current-context: c\ncontexts: [\n", 3, 1, "malformed YAML"},
        {"current-context: c\n\tcontexts: x\n", 2, 1, "malformed YAML"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_bad(&cases[i]);
}

static void test_kubeconfig_load_file(void **state)
{
    char dir[] = "/tmp/kq-kube-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], expect[300];
    snprintf(path, sizeof(path), "%s/config", dir);
    write_file(path, "current-context: c\n"
                     "contexts: [{name: c, context: {cluster: k}}]\n"
                     "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority: ca.pem}}]\n");
    kq_kube_conf_t c = {0};
    kq_diags_t d;
    kq_diags_init(&d);
    assert_int_equal(kq_kubeconfig_load(path, &c, &d), 0);
    snprintf(expect, sizeof(expect), "%s/ca.pem", dir);
    assert_string_equal(c.ca_file, expect);
    kq_kube_conf_free(&c);

    /* errors name the file */
    write_file(path, "current-context: c\n");
    assert_int_equal(kq_kubeconfig_load(path, &c, &d), KQ_EPARSE);
    assert_string_equal(d.v[0].file, path);
    assert_int_equal(d.v[0].line, 1);
    kq_diags_free(&d);

    unlink(path);
    assert_int_equal(kq_kubeconfig_load(path, &c, &d), KQ_ENOENT);
    assert_true(diags_have(&d, "cannot read kubeconfig"));
    kq_diags_free(&d);
    rmdir(dir);
}

/* Files named by a kubeconfig that are FIFOs: refused by name when loading (curl and
 * OpenSSL would open them blocking, forever), and a kubeconfig that is a FIFO nobody
 * writes to ends with an error instead of hanging (issue 29). */
static void test_kubeconfig_fifo_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/kq-kube-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], fifo[256];
    snprintf(path, sizeof(path), "%s/config", dir);
    snprintf(fifo, sizeof(fifo), "%s/pipe", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    static const char *configs[] = {
        "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority: pipe}}]\n"
        "users: [{name: u, user: {token: t}}]\n",
        "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
        "users: [{name: u, user: {tokenFile: pipe}}]\n",
    };
    static const char *keys[] = {"certificate-authority", "tokenFile"};
    for (size_t i = 0; i < 2; i++) {
        write_file(path, configs[i]);
        kq_kube_conf_t c = {0};
        kq_diags_t d;
        kq_diags_init(&d);
        assert_int_not_equal(kq_kubeconfig_load(path, &c, &d), 0);
        assert_true(diags_have(&d, keys[i]));
        assert_true(diags_have(&d, "is not a regular file (a FIFO)"));
        kq_diags_free(&d);
        kq_kube_conf_free(&c);
    }
    /* the kubeconfig itself a FIFO without a writer */
    kq_kube_conf_t c = {0};
    kq_diags_t d;
    kq_diags_init(&d);
    assert_int_equal(kq_kubeconfig_load(fifo, &c, &d), KQ_ETIMEDOUT);
    assert_true(diags_have(&d, "a FIFO nobody writes to"));
    kq_diags_free(&d);
    /* a directory is refused too */
    assert_int_not_equal(kq_kubeconfig_load(dir, &c, &d), 0);
    assert_true(diags_have(&d, "Is a directory"));
    kq_diags_free(&d);
    unlink(fifo);
    unlink(path);
    rmdir(dir);
}

/* ======================================================================================
 * in-cluster
 * ====================================================================================== */

static void test_in_cluster(void **state)
{
    char dir[] = "/tmp/kq-sa-XXXXXX", p[300];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof(p), "%s/token", dir);
    write_file(p, "tok-1\n");
    snprintf(p, sizeof(p), "%s/ca.crt", dir);
    write_file(p, CA_PEM);
    snprintf(p, sizeof(p), "%s/namespace", dir);
    write_file(p, "team-a\n");

    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    kq_kube_conf_t c = {0};
    kq_diags_t d;
    kq_diags_init(&d);
    assert_int_equal(kq_kube_conf_in_cluster(dir, &c, &d), 0);
    assert_string_equal(c.server, "https://10.96.0.1:443");
    snprintf(p, sizeof(p), "%s/token", dir);
    assert_string_equal(c.token_file, p);
    assert_null(c.token); /* re-read per request, never cached */
    snprintf(p, sizeof(p), "%s/ca.crt", dir);
    assert_string_equal(c.ca_file, p);
    assert_string_equal(c.namespace, "team-a");
    kq_kube_conf_free(&c);

    /* IPv6 service host is bracketed; missing CA and namespace are fine */
    setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
    unlink(p);
    snprintf(p, sizeof(p), "%s/namespace", dir);
    unlink(p);
    assert_int_equal(kq_kube_conf_in_cluster(dir, &c, &d), 0);
    assert_string_equal(c.server, "https://[fd00:10:96::1]:443");
    assert_null(c.ca_file);
    assert_null(c.namespace);
    kq_kube_conf_free(&c);

    /* no token: an error naming the file */
    snprintf(p, sizeof(p), "%s/token", dir);
    unlink(p);
    char keep[] = "untouched";
    c.server = keep;
    assert_int_equal(kq_kube_conf_in_cluster(dir, &c, &d), KQ_ENOENT);
    assert_ptr_equal(c.server, keep);
    assert_string_equal(d.v[0].file, p);
    assert_true(diags_have(&d, "service account token"));
    kq_diags_free(&d);

    /* not in a cluster */
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(kq_kube_conf_in_cluster(dir, &c, &d), KQ_EINVAL);
    assert_true(diags_have(&d, "KUBERNETES_SERVICE_HOST"));
    kq_diags_free(&d);
    unsetenv("KUBERNETES_SERVICE_PORT");
    rmdir(dir);
}

/* ======================================================================================
 * test HTTP server
 * ====================================================================================== */

#define MAX_LOG 512
#define MAX_PIECES 16

typedef struct rq {
    char method[16];
    char *target; /* path and query */
    char *auth;   /* Authorization header or NULL */
    char *body;
    int nth;      /* index in the log */
} rq_t;

typedef struct resp {
    int status;
    char *pieces[MAX_PIECES]; /* owned */
    int npieces;
    bool chunked; /* one HTTP chunk per piece, with a pause between pieces */
    bool hold;    /* chunked: leave the stream open until the client goes away */
} resp_t;

typedef struct srv srv_t;
typedef void (*route_fn)(srv_t *s, const rq_t *rq, resp_t *out);

struct srv {
    int fd, port;
    pthread_t acceptor;
    pthread_mutex_t lock;
    rq_t log[MAX_LOG];
    int nlog;
    route_fn route;
    int state[8]; /* per-test counters, under lock */
    atomic_bool stopping;
    pthread_t conns[MAX_LOG];
    int nconns;
};

typedef struct conn_arg {
    srv_t *s;
    int fd;
} conn_arg_t;

static void resp_body(resp_t *r, int status, const char *body)
{
    r->status = status;
    r->pieces[r->npieces++] = strdup(body);
}

static void resp_piece(resp_t *r, const char *p, size_t n)
{
    r->pieces[r->npieces++] = strndup(p, n);
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 429: return "Too Many Requests";
    default: return "Status";
    }
}

static void *conn_main(void *arg)
{
    conn_arg_t *ca = arg;
    srv_t *s = ca->s;
    int fd = ca->fd;
    free(ca);
    char *buf = calloc(1, 1 << 20);
    size_t n = 0;
    char *hdr_end = NULL;
    while (n < (1 << 20) - 1 && (hdr_end = strstr(buf, "\r\n\r\n")) == NULL) {
        ssize_t r = recv(fd, buf + n, (1 << 20) - 1 - n, 0);
        if (r <= 0)
            goto out;
        n += (size_t)r;
        buf[n] = '\0';
    }
    if (hdr_end == NULL)
        goto out;
    size_t hlen = (size_t)(hdr_end - buf) + 4, clen = 0;
    rq_t rq = {0};
    char target[8192] = "";
    sscanf(buf, "%15s %8191s", rq.method, target);
    for (char *line = strstr(buf, "\r\n") + 2; line < hdr_end; line = strstr(line, "\r\n") + 2) {
        char *eol = strstr(line, "\r\n");
        if (strncasecmp(line, "Content-Length:", 15) == 0)
            clen = strtoul(line + 15, NULL, 10);
        if (strncasecmp(line, "Authorization:", 14) == 0) {
            char *v = line + 14;
            while (*v == ' ')
                v++;
            rq.auth = strndup(v, (size_t)(eol - v));
        }
    }
    while (n < hlen + clen && n < (1 << 20) - 1) {
        ssize_t r = recv(fd, buf + n, (1 << 20) - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    rq.body = strndup(buf + hlen, clen);
    rq.target = strdup(target);

    resp_t resp = {.status = 500};
    pthread_mutex_lock(&s->lock);
    rq.nth = s->nlog;
    if (s->nlog < MAX_LOG)
        s->log[s->nlog++] = rq;
    s->route(s, &rq, &resp);
    pthread_mutex_unlock(&s->lock);

    char head[512];
    size_t total = 0;
    for (int i = 0; i < resp.npieces; i++)
        total += strlen(resp.pieces[i]);
    if (resp.chunked)
        snprintf(head, sizeof(head),
                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                 "Connection: close\r\n\r\n",
                 resp.status, reason_phrase(resp.status));
    else
        snprintf(head, sizeof(head),
                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n\r\n",
                 resp.status, reason_phrase(resp.status), total);
    bool ok = send_all(fd, head, strlen(head));
    for (int i = 0; ok && i < resp.npieces; i++) {
        size_t l = strlen(resp.pieces[i]);
        if (resp.chunked) {
            char sz[32];
            snprintf(sz, sizeof(sz), "%zx\r\n", l);
            ok = send_all(fd, sz, strlen(sz)) && send_all(fd, resp.pieces[i], l) &&
                 send_all(fd, "\r\n", 2);
            sleep_ms(30); /* let the client read each piece on its own */
        } else {
            ok = send_all(fd, resp.pieces[i], l);
        }
    }
    if (ok && resp.chunked && !resp.hold)
        ok = send_all(fd, "0\r\n\r\n", 5);
    if (ok && resp.hold) {
        while (!atomic_load(&s->stopping)) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 20) > 0) {
                char tmp[256];
                if (recv(fd, tmp, sizeof(tmp), 0) <= 0)
                    break;
            }
        }
    }
    for (int i = 0; i < resp.npieces; i++)
        free(resp.pieces[i]);
    if (rq.nth >= MAX_LOG) {
        free(rq.target);
        free(rq.auth);
        free(rq.body);
    }
out:
    free(buf);
    close(fd);
    return NULL;
}

static void *accept_main(void *arg)
{
    srv_t *s = arg;
    for (;;) {
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0) {
            if (atomic_load(&s->stopping))
                break;
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break;
        }
        conn_arg_t *ca = malloc(sizeof(*ca));
        ca->s = s;
        ca->fd = fd;
        pthread_mutex_lock(&s->lock);
        if (s->nconns < MAX_LOG && pthread_create(&s->conns[s->nconns], NULL, conn_main, ca) == 0) {
            s->nconns++;
        } else {
            close(fd);
            free(ca);
        }
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

static srv_t *srv_start(route_fn route)
{
    srv_t *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->route = route;
    pthread_mutex_init(&s->lock, NULL);
    atomic_init(&s->stopping, false);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->fd, 64), 0);
    assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &al), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->acceptor, NULL, accept_main, s), 0);
    return s;
}

static void srv_stop(srv_t *s)
{
    atomic_store(&s->stopping, true);
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->acceptor, NULL);
    close(s->fd);
    for (int i = 0; i < s->nconns; i++)
        pthread_join(s->conns[i], NULL);
    for (int i = 0; i < s->nlog; i++) {
        free(s->log[i].target);
        free(s->log[i].auth);
        free(s->log[i].body);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int srv_count(srv_t *s, const char *needle)
{
    int n = 0;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->nlog; i++)
        if (strstr(s->log[i].target, needle) != NULL)
            n++;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* Copy of the target of the k-th request whose target contains needle (NULL if none). */
static char *srv_target(srv_t *s, const char *needle, int k)
{
    char *out = NULL;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->nlog && out == NULL; i++)
        if (strstr(s->log[i].target, needle) != NULL && k-- == 0)
            out = strdup(s->log[i].target);
    pthread_mutex_unlock(&s->lock);
    return out;
}

static kq_kube_t *client_for(srv_t *s, const kq_kube_opts_t *opts)
{
    char server[64];
    snprintf(server, sizeof(server), "http://127.0.0.1:%d", s->port);
    kq_kube_conf_t c = {.server = server, .token = "sekret"};
    kq_kube_t *k = kq_kube_new_opts(&c, opts);
    assert_non_null(k);
    return k;
}

static const char *const conflict_body =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Operation cannot be fulfilled on pods/binding \\\"train-1\\\": pod train-1 is "
    "already assigned to node \\\"gpu-node-2\\\"\",\"reason\":\"Conflict\",\"details\":{\"name\":"
    "\"train-1\",\"kind\":\"pods/binding\"},\"code\":409}";

/* ======================================================================================
 * bind / get / evict / request
 * ====================================================================================== */

static void route_pods(srv_t *s, const rq_t *rq, resp_t *out)
{
    const char *t = rq->target;
    if (strcmp(t, "/api/v1/namespaces/team-a/pods/train-1/binding") == 0)
        resp_body(out, 201, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                            "\"status\":\"Success\",\"code\":201}");
    else if (strcmp(t, "/api/v1/namespaces/team-a/pods/bound-1/binding") == 0)
        resp_body(out, 409, conflict_body);
    else if (strcmp(t, "/api/v1/namespaces/team-a/pods/broken/binding") == 0)
        resp_body(out, 500, "backend exploded");
    else if (strcmp(t, "/api/v1/namespaces/team-a/pods/train-1") == 0)
        resp_body(out, 200, "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"train-1\",\"uid\":\"u-1\"}}");
    else if (strcmp(t, "/api/v1/namespaces/team-a/pods/train-1/eviction") == 0)
        resp_body(out, 429,
                  "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                  "\"message\":\"Cannot evict pod as it would violate the pod's disruption budget.\","
                  "\"reason\":\"TooManyRequests\",\"code\":429}");
    else if (strcmp(t, "/api/v1/namespaces/team-a/pods/train-2/eviction") == 0)
        resp_body(out, 201, "{\"kind\":\"Status\",\"status\":\"Success\",\"code\":201}");
    else if (strcmp(t, "/big") == 0) {
        char big[1001];
        memset(big, 'x', 1000);
        big[1000] = '\0';
        resp_body(out, 200, big);
    } else if (strcmp(t, "/echo") == 0)
        resp_body(out, 200, "{}");
    else
        resp_body(out, 404, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods \\\"x\\\" "
                            "not found\",\"reason\":\"NotFound\",\"code\":404}");
}

static void test_bind(void **state)
{
    srv_t *s = srv_start(route_pods);
    kq_kube_t *k = client_for(s, NULL);
    char err[512] = "";

    assert_int_equal(kq_kube_bind(k, "team-a", "train-1", "uid-1", "gpu-node-1", err, sizeof(err)), 0);
    pthread_mutex_lock(&s->lock);
    assert_int_equal(s->nlog, 1);
    assert_string_equal(s->log[0].method, "POST");
    assert_string_equal(s->log[0].auth, "Bearer sekret");
    json_t *b = json_loads(s->log[0].body, 0, NULL);
    pthread_mutex_unlock(&s->lock);
    assert_non_null(b);
    json_t *want = json_loads("{\"kind\":\"Binding\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
                              "\"train-1\",\"namespace\":\"team-a\",\"uid\":\"uid-1\"},\"target\":"
                              "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"name\":\"gpu-node-1\"}}",
                              0, NULL);
    assert_true(json_equal(b, want));
    json_decref(b);
    json_decref(want);

    /* 409: the API server's message comes back */
    assert_int_equal(kq_kube_bind(k, "team-a", "bound-1", "uid-2", "gpu-node-1", err, sizeof(err)),
                     KQ_ECONFLICT);
    assert_non_null(strstr(err, "already assigned to node \"gpu-node-2\""));
    /* 404 and other statuses */
    assert_int_equal(kq_kube_bind(k, "team-a", "gone", "uid-3", "n", err, sizeof(err)), KQ_ENOENT);
    assert_non_null(strstr(err, "not found"));
    assert_int_equal(kq_kube_bind(k, "team-a", "broken", "uid-4", "n", err, sizeof(err)), KQ_EHTTP);
    assert_non_null(strstr(err, "HTTP 500"));
    assert_non_null(strstr(err, "backend exploded"));
    /* path segments are escaped */
    assert_int_equal(kq_kube_bind(k, "team a", "x/y", "uid-5", "n", err, sizeof(err)), KQ_ENOENT);
    char *t = srv_target(s, "/binding", 4);
    assert_string_equal(t, "/api/v1/namespaces/team%20a/pods/x%2Fy/binding");
    free(t);

    kq_kube_free(k);
    srv_stop(s);
}

static void test_get_and_evict(void **state)
{
    srv_t *s = srv_start(route_pods);
    kq_kube_t *k = client_for(s, NULL);
    char err[512] = "";
    json_t *pod = NULL;

    assert_int_equal(kq_kube_get_pod(k, "team-a", "train-1", &pod), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid")), "u-1");
    json_decref(pod);
    pod = NULL;
    assert_int_equal(kq_kube_get_pod(k, "team-a", "nope", &pod), KQ_ENOENT);
    assert_null(pod);

    assert_int_equal(kq_kube_evict(k, "team-a", "train-1", err, sizeof(err)), KQ_ECONFLICT);
    assert_non_null(strstr(err, "disruption budget"));
    assert_int_equal(kq_kube_evict(k, "team-a", "train-2", err, sizeof(err)), 0);
    pthread_mutex_lock(&s->lock);
    json_t *b = json_loads(s->log[3].body, 0, NULL);
    assert_string_equal(s->log[3].target, "/api/v1/namespaces/team-a/pods/train-2/eviction");
    pthread_mutex_unlock(&s->lock);
    json_t *want = json_loads("{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":"
                              "{\"name\":\"train-2\",\"namespace\":\"team-a\"}}", 0, NULL);
    assert_true(json_equal(b, want));
    json_decref(b);
    json_decref(want);
    assert_int_equal(kq_kube_evict(k, "team-a", "nope", err, sizeof(err)), KQ_ENOENT);

    kq_kube_free(k);
    srv_stop(s);
}

static void test_request_limits_and_token_file(void **state)
{
    srv_t *s = srv_start(route_pods);
    kq_kube_opts_t o;
    kq_kube_opts_default(&o);
    o.max_response = 100;
    char dir[] = "/tmp/kq-tok-XXXXXX", tok[300], server[64];
    assert_non_null(mkdtemp(dir));
    snprintf(tok, sizeof(tok), "%s/token", dir);
    write_file(tok, "first-token\n");
    snprintf(server, sizeof(server), "http://127.0.0.1:%d/", s->port);
    kq_kube_conf_t c = {.server = server, .token_file = tok, .token = "fallback"};
    kq_kube_t *k = kq_kube_new_opts(&c, &o);
    assert_non_null(k);

    kq_kube_resp_t r = {0};
    assert_int_equal(kq_kube_request(k, "GET", "/echo", NULL, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{}");
    kq_kube_resp_free(&r);
    write_file(tok, "second-token");
    assert_int_equal(kq_kube_request(k, "PUT", "/echo", "application/json", "{\"a\":1}", &r), 0);
    kq_kube_resp_free(&r);
    /* a response over the limit */
    assert_int_equal(kq_kube_request(k, "GET", "/big", NULL, NULL, &r), KQ_ETOOBIG);
    assert_null(r.body);

    pthread_mutex_lock(&s->lock);
    assert_string_equal(s->log[0].target, "/echo"); /* trailing slash of the server dropped */
    assert_string_equal(s->log[0].auth, "Bearer first-token");
    assert_string_equal(s->log[1].method, "PUT");
    assert_string_equal(s->log[1].body, "{\"a\":1}");
    assert_string_equal(s->log[1].auth, "Bearer second-token");
    pthread_mutex_unlock(&s->lock);
    kq_kube_free(k);
    unlink(tok);
    rmdir(dir);

    /* nothing listening: a transport error, no response */
    int port = s->port;
    srv_stop(s);
    snprintf(server, sizeof(server), "http://127.0.0.1:%d", port);
    kq_kube_conf_t c2 = {.server = server};
    k = kq_kube_new(&c2);
    char err[256];
    assert_int_equal(kq_kube_bind(k, "a", "b", "c", "d", err, sizeof(err)), KQ_EIO);
    assert_non_null(strstr(err, "bind: input/output error (")); /* with libcurl's detail */
    kq_kube_free(k);
}

/* ======================================================================================
 * informer
 * ====================================================================================== */

typedef struct rec {
    pthread_mutex_t lock;
    int begins, ends;
    char *seq[128];
    int n;
} rec_t;

static void rec_begin(void *ud)
{
    rec_t *r = ud;
    pthread_mutex_lock(&r->lock);
    r->begins++;
    pthread_mutex_unlock(&r->lock);
}

static void rec_end(void *ud)
{
    rec_t *r = ud;
    pthread_mutex_lock(&r->lock);
    r->ends++;
    pthread_mutex_unlock(&r->lock);
}

/* Records s (taken over) as the next callback seen, up to 128. */
static void rec_push(rec_t *r, char *s)
{
    pthread_mutex_lock(&r->lock);
    if (r->n < 128)
        r->seq[r->n++] = s;
    else
        free(s);
    pthread_mutex_unlock(&r->lock);
}

static void rec_object(void *ud, int type, json_t *obj)
{
    rec_t *r = ud;
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    const char *t = type == KQ_WATCH_ADDED ? "ADDED" : type == KQ_WATCH_MODIFIED ? "MODIFIED"
                  : type == KQ_WATCH_DELETED ? "DELETED" : "?";
    char *s = NULL;
    assert_true(asprintf(&s, "%s:%s", t, name ? name : "(none)") > 0);
    rec_push(r, s);
}

/* The same record from a doc handler: what it receives must read the same. */
static void rec_doc(void *ud, int type, const kq_jnode_t *obj)
{
    json_t *j = jdoc_to_json(obj);
    assert_non_null(j);
    rec_object(ud, type, j);
    json_decref(j);
}

static void rec_init(rec_t *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
}

static void rec_free(rec_t *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->seq[i]);
    pthread_mutex_destroy(&r->lock);
}

/* Asserts the recorded objects, in order, equal the NULL-terminated list. */
static void rec_expect(rec_t *r, const char *const *want)
{
    pthread_mutex_lock(&r->lock);
    int i = 0;
    for (; want[i] != NULL; i++) {
        assert_true(i < r->n);
        assert_string_equal(r->seq[i], want[i]);
    }
    assert_int_equal(r->n, i);
    pthread_mutex_unlock(&r->lock);
}

static int rec_get(rec_t *r, const int *field)
{
    pthread_mutex_lock(&r->lock);
    int v = *field;
    pthread_mutex_unlock(&r->lock);
    return v;
}

typedef struct waitn {
    rec_t *r;
    const int *field;
    int at_least;
    srv_t *s;
    const char *needle;
} waitn_t;

static bool rec_reached(void *arg)
{
    waitn_t *w = arg;
    return rec_get(w->r, w->field) >= w->at_least;
}

static bool srv_reached(void *arg)
{
    waitn_t *w = arg;
    return srv_count(w->s, w->needle) >= w->at_least;
}

static void wait_rec(rec_t *r, const int *field, int n)
{
    waitn_t w = {.r = r, .field = field, .at_least = n};
    assert_true(wait_until(rec_reached, &w));
}

static void wait_srv(srv_t *s, const char *needle, int n)
{
    waitn_t w = {.s = s, .needle = needle, .at_least = n};
    assert_true(wait_until(srv_reached, &w));
}

static kq_watch_t *start_watch(kq_kube_t *k, rec_t *r, const char *query)
{
    kq_watch_handler_t h = {.list_begin = rec_begin, .object = rec_object, .list_end = rec_end, .ud = r};
    kq_watch_t *w = kq_kube_watch_start(k, "/api/v1/pods", query, &h);
    assert_non_null(w);
    return w;
}

static kq_kube_opts_t fast_opts(void)
{
    kq_kube_opts_t o;
    kq_kube_opts_default(&o);
    o.backoff_min_ms = 10;
    o.backoff_max_ms = 50;
    return o;
}

#define EV(type, name, rv)                                                                  \
    "{\"type\":\"" type "\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":" \
    "{\"name\":\"" name "\",\"namespace\":\"ns\",\"resourceVersion\":\"" rv "\"}}}\n"
#define BOOKMARK(rv)                                                                        \
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":" \
    "{\"resourceVersion\":\"" rv "\"},\"spec\":{\"containers\":null},\"status\":{}}}\n"
#define ERROR_410                                                                           \
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{}," \
    "\"status\":\"Failure\",\"message\":\"too old resource version: 10 (15)\",\"reason\":"     \
    "\"Expired\",\"code\":410}}\n"
#define LIST(rv, cont, items)                                                              \
    "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"" rv     \
    "\"" cont "},\"items\":[" items "]}"
#define ITEM(name) "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ns\"}}"

static bool is_watch(const rq_t *rq)
{
    return strstr(rq->target, "watch=1") != NULL;
}

/* Sends full as chunked pieces cut at the given offsets (ascending, 0-terminated). */
static void resp_split(resp_t *out, const char *full, const size_t *cuts, bool hold)
{
    size_t at = 0, len = strlen(full);
    out->status = 200;
    out->chunked = true;
    out->hold = hold;
    for (int i = 0; cuts[i] != 0; i++) {
        resp_piece(out, full + at, cuts[i] - at);
        at = cuts[i];
    }
    resp_piece(out, full + at, len - at);
}

static void resp_hold(resp_t *out)
{
    out->status = 200;
    out->chunked = true;
    out->hold = true;
}

/* --- one event split over chunks, several events in one chunk ------------------------ */

static void route_chunks(srv_t *s, const rq_t *rq, resp_t *out)
{
    if (!is_watch(rq)) {
        resp_body(out, 200, LIST("10", "", ITEM("a")));
    } else if (s->state[0]++ == 0) {
        const char *full = EV("ADDED", "w1", "11") EV("MODIFIED", "w1", "12") EV("DELETED", "w1", "13");
        size_t a = strlen(EV("ADDED", "w1", "11")), b = strlen(EV("MODIFIED", "w1", "12"));
        /* piece 1: the start of A; piece 2: the rest of A, all of B and the start of C;
         * piece 3: the rest of C except its newline; piece 4: the newline */
        size_t cuts[] = {20, a + b + 15, strlen(full) - 1, 0};
        resp_split(out, full, cuts, true);
    } else {
        resp_hold(out);
    }
}

static void test_watch_line_splitting(void **state)
{
    srv_t *s = srv_start(route_chunks);
    kq_kube_opts_t o = fast_opts();
    kq_kube_t *k = client_for(s, &o);
    rec_t r;
    rec_init(&r);
    kq_watch_t *w = start_watch(k, &r, NULL);
    wait_rec(&r, &r.n, 4);
    const char *want[] = {"ADDED:a", "ADDED:w1", "MODIFIED:w1", "DELETED:w1", NULL};
    rec_expect(&r, want);
    assert_int_equal(rec_get(&r, &r.begins), 1);
    assert_int_equal(rec_get(&r, &r.ends), 1);
    assert_true(kq_watch_synced(w));
    assert_int_equal(kq_watch_restarts(w), 0);
    char *t = srv_target(s, "watch=1", 0);
    assert_non_null(strstr(t, "resourceVersion=10&"));
    assert_non_null(strstr(t, "allowWatchBookmarks=true"));
    assert_non_null(strstr(t, "timeoutSeconds=300"));
    free(t);
    kq_kube_watch_stop(w); /* aborts the held stream */
    kq_kube_free(k);
    srv_stop(s);
    rec_free(&r);
}

/* --- in-band 410 -> relist ----------------------------------------------------------- */

static void route_410(srv_t *s, const rq_t *rq, resp_t *out)
{
    if (!is_watch(rq)) {
        if (s->state[1]++ == 0)
            resp_body(out, 200, LIST("10", "", ITEM("a")));
        else
            resp_body(out, 200, LIST("20", "", ITEM("a") "," ITEM("b")));
    } else if (s->state[0]++ == 0) {
        size_t cuts[] = {0};
        resp_split(out, EV("ADDED", "b", "11") ERROR_410, cuts, true);
    } else {
        resp_hold(out);
    }
}

static void test_watch_inband_410_relists(void **state)
{
    srv_t *s = srv_start(route_410);
    kq_kube_opts_t o = fast_opts();
    kq_kube_t *k = client_for(s, &o);
    rec_t r;
    rec_init(&r);
    kq_watch_t *w = start_watch(k, &r, NULL);
    wait_rec(&r, &r.ends, 2);
    wait_srv(s, "watch=1", 2);
    assert_int_equal(rec_get(&r, &r.begins), 2);
    const char *want[] = {"ADDED:a", "ADDED:b", "ADDED:a", "ADDED:b", NULL};
    rec_expect(&r, want);
    assert_true(kq_watch_restarts(w) >= 1);
    assert_int_equal(srv_count(s, "limit=500"), 2);
    char *t = srv_target(s, "watch=1", 1);
    assert_non_null(strstr(t, "resourceVersion=20&"));
    free(t);
    kq_kube_watch_stop(w);
    kq_kube_free(k);
    srv_stop(s);
    rec_free(&r);
}

/* --- HTTP 410 on the watch request -> relist; HTTP 500 and ERROR 500 -> re-watch ------- */

static void route_http_errors(srv_t *s, const rq_t *rq, resp_t *out)
{
    if (!is_watch(rq)) {
        resp_body(out, 200, LIST("10", "", ITEM("a")));
        return;
    }
    switch (s->state[0]++) {
    case 0:
        resp_body(out, 500, "{\"kind\":\"Status\",\"message\":\"etcd unavailable\",\"code\":500}");
        break;
    case 1: {
        size_t cuts[] = {0};
        resp_split(out, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":\"internal\","
                        "\"reason\":\"InternalError\",\"code\":500}}\n", cuts, true);
        break;
    }
    case 2:
        resp_body(out, 410, "{\"kind\":\"Status\",\"message\":\"gone\",\"reason\":\"Expired\",\"code\":410}");
        break;
    default:
        resp_hold(out);
    }
}

static void test_watch_http_errors(void **state)
{
    srv_t *s = srv_start(route_http_errors);
    kq_kube_opts_t o = fast_opts();
    kq_kube_t *k = client_for(s, &o);
    rec_t r;
    rec_init(&r);
    kq_watch_t *w = start_watch(k, &r, NULL);
    wait_srv(s, "watch=1", 4);
    /* 500 and ERROR(500) re-watch from the same version; 410 relists once */
    assert_int_equal(srv_count(s, "limit=500"), 2);
    assert_int_equal(srv_count(s, "resourceVersion=10&"), 4);
    wait_rec(&r, &r.ends, 2);
    assert_int_equal(rec_get(&r, &r.begins), 2);
    assert_int_equal(kq_watch_restarts(w), 3);
    kq_kube_watch_stop(w);
    kq_kube_free(k);
    srv_stop(s);
    rec_free(&r);
}

/* --- clean end of stream -> re-watch from the last resourceVersion (bookmarks too) ------ */

static void route_eof(srv_t *s, const rq_t *rq, resp_t *out)
{
    if (!is_watch(rq)) {
        resp_body(out, 200, LIST("10", "", ITEM("a")));
    } else if (s->state[0]++ == 0) {
        size_t cuts[] = {0};
        resp_split(out, EV("ADDED", "x", "15") BOOKMARK("20"), cuts, false);
    } else {
        resp_hold(out);
    }
}

static void test_watch_eof_rewatches_from_last_rv(void **state)
{
    srv_t *s = srv_start(route_eof);
    kq_kube_opts_t o = fast_opts();
    o.watch_timeout_s = 7;
    kq_kube_t *k = client_for(s, &o);
    rec_t r;
    rec_init(&r);
    kq_watch_t *w = start_watch(k, &r, NULL);
    wait_srv(s, "watch=1", 2);
    char *t1 = srv_target(s, "watch=1", 0), *t2 = srv_target(s, "watch=1", 1);
    assert_non_null(strstr(t1, "resourceVersion=10&"));
    assert_non_null(strstr(t1, "timeoutSeconds=7"));
    assert_non_null(strstr(t2, "resourceVersion=20&")); /* from the bookmark */
    free(t1);
    free(t2);
    const char *want[] = {"ADDED:a", "ADDED:x", NULL}; /* the bookmark is not an object */
    rec_expect(&r, want);
    assert_int_equal(rec_get(&r, &r.begins), 1);
    assert_int_equal(srv_count(s, "limit=500"), 1);
    assert_int_equal(kq_watch_restarts(w), 0);
    kq_kube_watch_stop(w);
    kq_kube_free(k);
    srv_stop(s);
    rec_free(&r);
}

/* --- pagination ------------------------------------------------------------------------ */

static void route_pages(srv_t *s, const rq_t *rq, resp_t *out)
{
    const char *t = rq->target;
    if (is_watch(rq)) {
        resp_hold(out);
    } else if (strstr(t, "continue=") == NULL) {
        resp_body(out, 200, LIST("30", ",\"continue\":\"c1+/=\"", ITEM("a") "," ITEM("b")));
    } else if (strstr(t, "continue=c1%2B%2F%3D") != NULL) {
        if (s->state[2] && s->state[0]++ == 0) /* the token expires once */
            resp_body(out, 410, "{\"kind\":\"Status\",\"message\":\"The provided continue parameter "
                                "is too old\",\"reason\":\"Expired\",\"code\":410}");
        else
            resp_body(out, 200, LIST("30", ",\"continue\":\"c2\"", ITEM("c") "," ITEM("d")));
    } else if (strstr(t, "continue=c2") != NULL) {
        resp_body(out, 200, LIST("30", "", ITEM("e")));
    } else {
        resp_body(out, 400, "{}");
    }
}

static void run_pages(bool expire)
{
    srv_t *s = srv_start(route_pages);
    s->state[2] = expire;
    kq_kube_opts_t o = fast_opts();
    kq_kube_t *k = client_for(s, &o);
    rec_t r;
    rec_init(&r);
    kq_watch_t *w = start_watch(k, &r, "labelSelector=app%3Dx");
    wait_srv(s, "watch=1", 1);
    assert_true(kq_watch_synced(w));
    assert_int_equal(rec_get(&r, &r.ends), 1);
    if (!expire) {
        const char *want[] = {"ADDED:a", "ADDED:b", "ADDED:c", "ADDED:d", "ADDED:e", NULL};
        rec_expect(&r, want);
        assert_int_equal(rec_get(&r, &r.begins), 1);
        assert_int_equal(srv_count(s, "limit=500"), 3);
        assert_int_equal(kq_watch_restarts(w), 0);
    } else {
        /* page 2 got 410: the list starts over from the first page */
        const char *want[] = {"ADDED:a", "ADDED:b", "ADDED:a", "ADDED:b",
                              "ADDED:c", "ADDED:d", "ADDED:e", NULL};
        rec_expect(&r, want);
        assert_int_equal(rec_get(&r, &r.begins), 2);
        assert_int_equal(srv_count(s, "limit=500"), 5);
        assert_int_equal(kq_watch_restarts(w), 1);
    }
    assert_int_equal(srv_count(s, "labelSelector=app%3Dx&limit=500"), srv_count(s, "limit=500"));
    char *t = srv_target(s, "watch=1", 0);
    assert_non_null(strstr(t, "/api/v1/pods?labelSelector=app%3Dx&watch=1&resourceVersion=30&"));
    free(t);
    kq_kube_watch_stop(w);
    kq_kube_free(k);
    srv_stop(s);
    rec_free(&r);
}

static void test_watch_pagination(void **state)
{
    run_pages(false);
}

static void test_watch_continue_expired(void **state)
{
    run_pages(true);
}

/* Pages too large for max_response (issue 20: 190 pods of 1.4 MB overflow 256 MiB in one
 * page of 500) are asked for again with half the limit; the list completes. The server
 * serves `limit` of 8 fat items from the offset in the continue token. */
#define FAT_PAD 900
static void route_sized(srv_t *s, const rq_t *rq, resp_t *out)
{
    (void)s;
    if (is_watch(rq)) {
        resp_hold(out);
        return;
    }
    const char *l = strstr(rq->target, "limit="), *c = strstr(rq->target, "continue=o");
    int limit = l ? atoi(l + 6) : 500, off = c ? atoi(c + 10) : 0;
    static char pad[FAT_PAD + 1];
    memset(pad, 'x', FAT_PAD);
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    fprintf(f, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"40\"");
    if (off + limit < 8)
        fprintf(f, ",\"continue\":\"o%d\"", off + limit);
    fprintf(f, "},\"items\":[");
    for (int i = off; i < off + limit && i < 8; i++)
        fprintf(f, "%s{\"metadata\":{\"name\":\"p%d\",\"namespace\":\"ns\",\"annotations\":{\"pad\":\"%s\"}}}",
                i > off ? "," : "", i, pad);
    fprintf(f, "]}");
    fclose(f);
    resp_body(out, 200, body);
    free(body);
}

static void test_list_page_too_large_is_halved(void **state)
{
    srv_t *s = srv_start(route_sized);
    kq_kube_opts_t o = fast_opts();
    o.max_response = 3 * (FAT_PAD + 100); /* about two items */
    kq_kube_t *k = client_for(s, &o);
    rec_t r;
    rec_init(&r);
    kq_watch_t *w = start_watch(k, &r, NULL);
    wait_srv(s, "watch=1", 1);
    assert_true(kq_watch_synced(w));
    const char *want[] = {"ADDED:p0", "ADDED:p1", "ADDED:p2", "ADDED:p3",
                          "ADDED:p4", "ADDED:p5", "ADDED:p6", "ADDED:p7", NULL};
    rec_expect(&r, want);
    assert_int_equal(rec_get(&r, &r.begins), 1);
    assert_int_equal(kq_watch_restarts(w), 0);
    assert_true(srv_count(s, "limit=500") >= 1); /* tried whole first */
    assert_true(srv_count(s, "limit=2") >= 1);   /* then halved down to what fits */
    kq_kube_watch_stop(w);
    kq_kube_free(k);
    srv_stop(s);
    rec_free(&r);
}

/* --- a filter builds only what the handler keeps ---------------------------------------- */

static void rec_dump(void *ud, int type, json_t *obj)
{
    rec_t *r = ud;
    char *s = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(s);
    (void)type;
    rec_push(r, s);
}

static void route_fat(srv_t *s, const rq_t *rq, resp_t *out)
{
    if (!is_watch(rq)) {
        resp_body(out, 200,
                  LIST("10", "", "{\"metadata\":{\"name\":\"a\",\"managedFields\":[{\"x\":{\"y\":[1]}}]},"
                                 "\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[]}]}},7,"
                                 "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"b\"}}"));
    } else if (s->state[0]++ == 0) {
        size_t cuts[] = {0};
        resp_split(out,
                   "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"11\","
                   "\"labels\":{\"l\":\"v\"}},\"status\":{\"phase\":\"Running\"}}}\n"
                   "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"12\"}}}\n",
                   cuts, true);
    } else {
        resp_hold(out);
    }
}

static void rec_doc_dump(void *ud, int type, const kq_jnode_t *obj)
{
    json_t *j = jdoc_to_json(obj);
    assert_non_null(j);
    rec_dump(ud, type, j);
    json_decref(j);
}

/* With a jansson handler (doc false) or a document handler. */
static void watch_filter(bool doc)
{
    static const kq_jfilter_t meta[] = {{"name", NULL}, {"resourceVersion", NULL}, {NULL, NULL}};
    static const kq_jfilter_t ctr[] = {{"name", NULL}, {NULL, NULL}};
    static const kq_jfilter_t spec[] = {{"containers", ctr}, {NULL, NULL}};
    static const kq_jfilter_t keep[] = {{"metadata", meta}, {"spec", spec}, {NULL, NULL}};
    srv_t *s = srv_start(route_fat);
    kq_kube_opts_t o = fast_opts();
    kq_kube_t *k = client_for(s, &o);
    rec_t r;
    rec_init(&r);
    kq_watch_handler_t h = {.list_begin = rec_begin, .list_end = rec_end, .ud = &r, .keep = keep};
    if (doc)
        h.doc = rec_doc_dump;
    else
        h.object = rec_dump;
    kq_watch_t *w = kq_kube_watch_start(k, "/api/v1/pods", NULL, &h);
    assert_non_null(w);
    wait_rec(&r, &r.n, 3);
    wait_srv(s, "watch=1", 1);
    /* list items and watch objects: only the named members; the item that is not an
     * object is skipped; the bookmark moved the resume point (checked on the next watch) */
    const char *want[] = {"{\"metadata\":{\"name\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
                          "{\"metadata\":{\"name\":\"b\"}}",
                          "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"11\"}}", NULL};
    rec_expect(&r, want);
    kq_kube_watch_stop(w);

    /* a filter that drops metadata.resourceVersion would replay history on every resume */
    static const kq_jfilter_t bad_meta[] = {{"name", NULL}, {NULL, NULL}};
    static const kq_jfilter_t bad[] = {{"metadata", bad_meta}, {NULL, NULL}};
    static const kq_jfilter_t no_meta[] = {{"spec", NULL}, {NULL, NULL}};
    h.keep = bad;
    assert_null(kq_kube_watch_start(k, "/api/v1/pods", NULL, &h));
    h.keep = no_meta;
    assert_null(kq_kube_watch_start(k, "/api/v1/pods", NULL, &h));
    kq_kube_free(k);
    srv_stop(s);
    rec_free(&r);
}

static void test_watch_filter(void **state)
{
    (void)state;
    watch_filter(false);
    watch_filter(true);
}

/* --- the stream decoder without a connection (kq_kube_watch_feed) ----------------------- */

/* With a jansson handler (doc false) or a document handler. */
static void watch_feed(bool doc)
{
    const char *stream = EV("ADDED", "f1", "11") "\r\n" EV("MODIFIED", "f1", "12")
        "{\"type\":\"SOMETHING\",\"object\":{}}\n" BOOKMARK("13") EV("DELETED", "f1", "14") "{\"type\":\"ADD";
    size_t len = strlen(stream);
    const char *want[] = {"ADDED:f1", "MODIFIED:f1", "DELETED:f1", NULL};
    kq_watch_handler_t h = {.object = doc ? NULL : rec_object, .doc = doc ? rec_doc : NULL};
    /* every single split point, and every byte its own chunk: the same three events */
    for (size_t cut = 0; cut <= len; cut++) {
        rec_t r;
        rec_init(&r);
        h.ud = &r;
        assert_int_equal(kq_kube_watch_feed(&h, stream, len, &cut, 1, 1 << 20), 0);
        rec_expect(&r, want);
        rec_free(&r);
    }
    size_t *all = malloc(len * sizeof(*all));
    assert_non_null(all);
    for (size_t i = 0; i < len; i++)
        all[i] = i + 1;
    rec_t r;
    rec_init(&r);
    h.ud = &r;
    assert_int_equal(kq_kube_watch_feed(&h, stream, len, all, len, 1 << 20), 0);
    rec_expect(&r, want);
    rec_free(&r);
    free(all);

    /* what ends a stream, and what comes through before it */
    struct {
        const char *text;
        size_t max_line;
        int rc;
        int events;
    } cases[] = {
        {EV("ADDED", "a", "1") ERROR_410 EV("ADDED", "b", "2"), 1 << 20, KQ_EGONE, 1},
        {"{\"type\":\"ERROR\",\"object\":{\"code\":500,\"reason\":\"InternalError\"}}\n", 1 << 20, KQ_EPARSE, 0},
        {EV("ADDED", "a", "1") "{\"type\":\"ADDED\",\"object\":[]}\n", 1 << 20, KQ_EPARSE, 1},
        {"{\"type\":7,\"object\":{}}\n", 1 << 20, KQ_EPARSE, 0},
        {"{\"type\":\"ADDED\",\"object\":{}\n", 1 << 20, KQ_EPARSE, 0},
        {"[1]\n", 1 << 20, KQ_EPARSE, 0},
        {"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"\\u0000\"}}}\n", 1 << 20, KQ_EPARSE, 0},
        {EV("ADDED", "a", "1") EV("ADDED", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "2"), 140, KQ_EGONE, 1},
        {"\n\r\n\n", 1 << 20, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rec_init(&r);
        h.ud = &r;
        assert_int_equal(kq_kube_watch_feed(&h, cases[i].text, strlen(cases[i].text), NULL, 0, cases[i].max_line),
                         cases[i].rc);
        assert_int_equal(r.n, cases[i].events);
        rec_free(&r);
    }
    assert_int_equal(kq_kube_watch_feed(NULL, "", 0, NULL, 0, 10), KQ_EINVAL);
}

static void test_watch_feed(void **state)
{
    (void)state;
    watch_feed(false);
    watch_feed(true);
}

/* --- a line over the limit relists ----------------------------------------------------- */

static void route_long_line(srv_t *s, const rq_t *rq, resp_t *out)
{
    if (!is_watch(rq)) {
        resp_body(out, 200, LIST("10", "", ITEM("a")));
    } else if (s->state[0]++ == 0) {
        char name[601];
        memset(name, 'n', 600);
        name[600] = '\0';
        char *full = NULL;
        assert_true(asprintf(&full, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"%s\","
                                    "\"resourceVersion\":\"11\"}}}\n", name) > 0);
        size_t cuts[] = {100, 300, 500, 0};
        resp_split(out, full, cuts, true);
        free(full);
    } else {
        resp_hold(out);
    }
}

static void test_watch_line_too_long(void **state)
{
    srv_t *s = srv_start(route_long_line);
    kq_kube_opts_t o = fast_opts();
    o.max_watch_line = 256;
    kq_kube_t *k = client_for(s, &o);
    rec_t r;
    rec_init(&r);
    kq_watch_t *w = start_watch(k, &r, NULL);
    wait_rec(&r, &r.ends, 2);
    wait_srv(s, "watch=1", 2);
    const char *want[] = {"ADDED:a", "ADDED:a", NULL};
    rec_expect(&r, want);
    assert_true(kq_watch_restarts(w) >= 1);
    kq_kube_watch_stop(w);
    kq_kube_free(k);
    srv_stop(s);
    rec_free(&r);
}

static void test_watch_stop_during_backoff(void **state)
{
    /* nothing listens: the informer keeps backing off; stop still returns */
    srv_t *s = srv_start(route_pods);
    int port = s->port;
    srv_stop(s);
    char server[64];
    snprintf(server, sizeof(server), "http://127.0.0.1:%d", port);
    kq_kube_conf_t c = {.server = server};
    kq_kube_opts_t o;
    kq_kube_opts_default(&o);
    o.backoff_min_ms = 60000;
    o.backoff_max_ms = 60000;
    kq_kube_t *k = kq_kube_new_opts(&c, &o);
    rec_t r;
    rec_init(&r);
    kq_watch_t *w = start_watch(k, &r, NULL);
    for (int i = 0; i < 2000 && kq_watch_restarts(w) == 0; i++)
        sleep_ms(10);
    assert_true(kq_watch_restarts(w) >= 1);
    assert_false(kq_watch_synced(w));
    kq_kube_watch_stop(w);
    assert_int_equal(rec_get(&r, &r.begins), 0);
    kq_kube_free(k);
    rec_free(&r);
}

/* ======================================================================================
 * events
 * ====================================================================================== */

static void route_events(srv_t *s, const rq_t *rq, resp_t *out)
{
    resp_body(out, 201, "{\"kind\":\"Event\"}");
}

typedef struct posted_wait {
    kq_kube_t *k;
    unsigned long n;
} posted_wait_t;

static bool posted_reached(void *arg)
{
    posted_wait_t *p = arg;
    unsigned long posted = 0;
    kq_kube_event_stats(p->k, &posted, NULL);
    return posted >= p->n;
}

static void test_events_dedup(void **state)
{
    srv_t *s = srv_start(route_events);
    kq_kube_t *k = client_for(s, NULL);
    kq_kube_event(k, "team-a", "p1", "uid-1", "Warning", "QuotaExceeded", "user alice over cpu");
    kq_kube_event(k, "team-a", "p1", "uid-1", "Warning", "QuotaExceeded", "user alice over cpu");
    kq_kube_event(k, "team-a", "p1", "uid-1", "Warning", "QuotaExceeded", "user alice over memory");
    posted_wait_t pw = {k, 2};
    assert_true(wait_until(posted_reached, &pw));
    unsigned long posted, suppressed;
    kq_kube_event_stats(k, &posted, &suppressed);
    assert_int_equal(posted, 2);
    assert_int_equal(suppressed, 1);
    /* events are posted in order, so the duplicate would have come before the third */
    assert_int_equal(srv_count(s, "/api/v1/namespaces/team-a/events"), 2);

    pthread_mutex_lock(&s->lock);
    json_t *e1 = json_loads(s->log[0].body, 0, NULL), *e2 = json_loads(s->log[1].body, 0, NULL);
    assert_string_equal(s->log[0].method, "POST");
    pthread_mutex_unlock(&s->lock);
    assert_non_null(e1);
    json_t *io = json_object_get(e1, "involvedObject");
    json_t *want_io = json_loads("{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"name\":\"p1\","
                                 "\"namespace\":\"team-a\",\"uid\":\"uid-1\"}", 0, NULL);
    assert_true(json_equal(io, want_io));
    json_decref(want_io);
    assert_string_equal(json_string_value(json_object_get(e1, "kind")), "Event");
    assert_string_equal(json_string_value(json_object_get(e1, "reason")), "QuotaExceeded");
    assert_string_equal(json_string_value(json_object_get(e1, "type")), "Warning");
    assert_string_equal(json_string_value(json_object_get(e1, "message")), "user alice over cpu");
    assert_string_equal(json_string_value(json_object_get(e2, "message")), "user alice over memory");
    assert_string_equal(json_string_value(json_object_get(json_object_get(e1, "source"), "component")),
                        "kubequota");
    assert_int_equal(json_integer_value(json_object_get(e1, "count")), 1);
    json_t *meta = json_object_get(e1, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "namespace")), "team-a");
    const char *name1 = json_string_value(json_object_get(meta, "name"));
    const char *name2 = json_string_value(json_object_get(json_object_get(e2, "metadata"), "name"));
    assert_non_null(name1);
    assert_memory_equal(name1, "p1.", 3);
    assert_string_not_equal(name1, name2);
    const char *ts = json_string_value(json_object_get(e1, "firstTimestamp"));
    assert_non_null(ts);
    assert_int_equal(strlen(ts), 20); /* 2026-11-21T10:15:02Z */
    assert_int_equal(ts[19], 'Z');
    /* the duplicate merged into it may fall in the next second: last is never before first */
    const char *last = json_string_value(json_object_get(e1, "lastTimestamp"));
    assert_non_null(last);
    assert_int_equal(strlen(last), 20);
    assert_true(strcmp(ts, last) <= 0);
    json_decref(e1);
    json_decref(e2);
    kq_kube_free(k);
    srv_stop(s);
}

/* Aggregation as client-go's recorder does it (k8s.io/client-go tools/record/events_cache.go,
 * EventCorrelator: a repeat of the same event updates the existing object's count and
 * lastTimestamp with a PATCH instead of creating another object). The first PATCH gets a
 * 404 here (the Event expired): the series is created again, with the count so far. */
static int agg_patches;

static void route_events_agg(srv_t *s, const rq_t *rq, resp_t *out)
{
    if (strcmp(rq->method, "PATCH") == 0 && agg_patches++ == 0) {
        resp_body(out, 404, "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\"}");
        return;
    }
    resp_body(out, strcmp(rq->method, "POST") == 0 ? 201 : 200, "{\"kind\":\"Event\"}");
}

typedef struct nreq_wait {
    srv_t *s;
    int n;
} nreq_wait_t;

static bool nreq_reached(void *arg)
{
    nreq_wait_t *w = arg;
    pthread_mutex_lock(&w->s->lock);
    int n = w->s->nlog;
    pthread_mutex_unlock(&w->s->lock);
    return n >= w->n;
}

static void test_events_aggregate_into_one_series(void **state)
{
    agg_patches = 0;
    srv_t *s = srv_start(route_events_agg);
    kq_kube_opts_t o;
    kq_kube_opts_default(&o);
    o.event_dedup_s = 0; /* every repeat may be written at once */
    kq_kube_t *k = client_for(s, &o);
    kq_kube_event(k, "team-a", "p1", "uid-1", "Warning", "QuotaExceeded", "over cpu");
    posted_wait_t pw = {k, 1};
    assert_true(wait_until(posted_reached, &pw)); /* created */
    kq_kube_event(k, "team-a", "p1", "uid-1", "Warning", "QuotaExceeded", "over cpu"); /* PATCH -> 404 -> POST */
    nreq_wait_t nw = {s, 3};
    assert_true(wait_until(nreq_reached, &nw));
    pw.n = 2;
    assert_true(wait_until(posted_reached, &pw));
    kq_kube_event(k, "team-a", "p1", "uid-1", "Warning", "QuotaExceeded", "over cpu"); /* PATCH count 3 */
    nw.n = 4;
    assert_true(wait_until(nreq_reached, &nw));
    pw.n = 3;
    assert_true(wait_until(posted_reached, &pw));

    pthread_mutex_lock(&s->lock);
    assert_int_equal(s->nlog, 4);
    assert_string_equal(s->log[0].method, "POST");
    json_t *create = json_loads(s->log[0].body, 0, NULL);
    const char *name = json_string_value(json_object_get(json_object_get(create, "metadata"), "name"));
    assert_non_null(name);
    assert_int_equal(json_integer_value(json_object_get(create, "count")), 1);
    char path[400];
    snprintf(path, sizeof(path), "/api/v1/namespaces/team-a/events/%s", name);
    assert_string_equal(s->log[1].method, "PATCH");
    assert_string_equal(s->log[1].target, path);
    json_t *p1 = json_loads(s->log[1].body, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(p1, "count")), 2);
    assert_non_null(json_object_get(p1, "lastTimestamp"));
    /* after the 404: created again under the same name with the count so far */
    assert_string_equal(s->log[2].method, "POST");
    json_t *again = json_loads(s->log[2].body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(json_object_get(again, "metadata"), "name")), name);
    assert_int_equal(json_integer_value(json_object_get(again, "count")), 2);
    assert_string_equal(json_string_value(json_object_get(again, "firstTimestamp")),
                        json_string_value(json_object_get(create, "firstTimestamp")));
    assert_string_equal(s->log[3].method, "PATCH");
    assert_string_equal(s->log[3].target, path);
    json_t *p2 = json_loads(s->log[3].body, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(p2, "count")), 3);
    pthread_mutex_unlock(&s->lock);
    json_decref(create);
    json_decref(p1);
    json_decref(again);
    json_decref(p2);
    kq_kube_free(k);
    srv_stop(s);
}

static void test_events_rate_limit(void **state)
{
    srv_t *s = srv_start(route_events);
    kq_kube_opts_t o;
    kq_kube_opts_default(&o);
    o.event_burst = 2;
    o.event_rate = 0.0001; /* effectively no refill during the test */
    kq_kube_t *k = client_for(s, &o);
    for (int i = 0; i < 5; i++) {
        char msg[32];
        snprintf(msg, sizeof(msg), "message %d", i);
        kq_kube_event(k, NULL, "p", NULL, "Normal", "Scheduled", msg);
    }
    posted_wait_t pw = {k, 2};
    assert_true(wait_until(posted_reached, &pw));
    unsigned long posted, suppressed;
    kq_kube_event_stats(k, &posted, &suppressed);
    assert_int_equal(posted, 2);
    assert_int_equal(suppressed, 3);
    assert_int_equal(srv_count(s, "/api/v1/namespaces/default/events"), 2);
    kq_kube_free(k);
    srv_stop(s);
}

static void route_pod_patch(srv_t *s, const rq_t *rq, resp_t *out)
{
    resp_body(out, strstr(rq->target, "/pods/gone") != NULL ? 404 : 200, "{\"kind\":\"Pod\"}");
}

typedef struct annotated_wait {
    kq_kube_t *k;
    unsigned long done, failed;
} annotated_wait_t;

static bool annotated_reached(void *arg)
{
    annotated_wait_t *w = arg;
    unsigned long done = 0, failed = 0;
    kq_kube_annotate_stats(w->k, &done, &failed);
    return done >= w->done && failed >= w->failed;
}

/* kq_kube_pod_annotate (requeue pokes): a merge PATCH of the pod with its uid and one
 * annotation; through the events' bucket, so an empty bucket refuses it. */
static void test_pod_annotate(void **state)
{
    srv_t *s = srv_start(route_pod_patch);
    kq_kube_opts_t o;
    kq_kube_opts_default(&o);
    o.event_burst = 2;
    o.event_rate = 0.0001;
    kq_kube_t *k = client_for(s, &o);
    assert_true(kq_kube_pod_annotate(k, "team-a", "p1", "uid-1", "kubequota.io/requeue", "t1"));
    assert_true(kq_kube_pod_annotate(k, "team-a", "gone", "uid-2", "kubequota.io/requeue", "t1"));
    assert_false(kq_kube_pod_annotate(k, "team-a", "p3", "uid-3", "kubequota.io/requeue", "t1")); /* no token */
    kq_kube_event(k, "team-a", "p1", "uid-1", "Warning", "QuotaExceeded", "over"); /* shares the bucket */
    annotated_wait_t w = {k, 1, 1};
    assert_true(wait_until(annotated_reached, &w));
    unsigned long posted, suppressed;
    kq_kube_event_stats(k, &posted, &suppressed);
    assert_int_equal(posted, 0);
    assert_int_equal(suppressed, 1);
    pthread_mutex_lock(&s->lock);
    assert_int_equal(s->nlog, 2);
    assert_string_equal(s->log[0].method, "PATCH");
    assert_string_equal(s->log[0].target, "/api/v1/namespaces/team-a/pods/p1");
    json_t *b = json_loads(s->log[0].body, 0, NULL);
    pthread_mutex_unlock(&s->lock);
    json_t *want = json_loads("{\"metadata\":{\"uid\":\"uid-1\",\"annotations\":{\"kubequota.io/requeue\":\"t1\"}}}",
                              0, NULL);
    assert_true(json_equal(b, want));
    json_decref(b);
    json_decref(want);
    assert_false(kq_kube_pod_annotate(k, NULL, "p", "u", "k", "v"));
    assert_false(kq_kube_pod_annotate(NULL, "n", "p", "u", "k", "v"));
    kq_kube_free(k);
    srv_stop(s);
}

static void test_events_queue_bound(void **state)
{
    /* The poster blocks on a server that accepts connections (in the kernel's backlog) but
     * never answers, so at most one event is in flight and the queue of 2 fills up. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 64), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    char server[64];
    snprintf(server, sizeof(server), "http://127.0.0.1:%d", ntohs(a.sin_port));
    kq_kube_conf_t c = {.server = server};
    kq_kube_opts_t o;
    kq_kube_opts_default(&o);
    o.event_queue = 2;
    kq_kube_t *k = kq_kube_new_opts(&c, &o);
    assert_non_null(k);
    for (int i = 0; i < 40; i++) {
        char msg[32];
        snprintf(msg, sizeof(msg), "m%d", i);
        kq_kube_event(k, "ns", "p", "u", "Normal", "R", msg);
    }
    unsigned long posted, suppressed;
    kq_kube_event_stats(k, &posted, &suppressed);
    assert_int_equal(posted, 0);
    /* at most the queue plus the one being posted got through */
    assert_true(suppressed >= 40 - 3);
    kq_kube_free(k); /* aborts the post in flight, drops what is queued, joins the poster */
    close(fd);
}


/* ======================================================================================
 * TLS: CA / client certificate from PEM data and from files, insecure mode
 * ====================================================================================== */

typedef struct pem_pair {
    char *cert, *key;
} pem_pair_t;

static char *bio_string(BIO *b)
{
    char *p = NULL;
    long n = BIO_get_mem_data(b, &p);
    char *out = strndup(p, (size_t)n);
    BIO_free(b);
    return out;
}

/* A self-signed P-256 certificate for 127.0.0.1 (IP SAN), as PEM text. */
static pem_pair_t make_cert(const char *cn)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    assert_non_null(key);
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    const char *exts[][2] = {{"subjectAltName", "IP:127.0.0.1"},
                             {"basicConstraints", "critical,CA:TRUE"},
                             {"keyUsage", "digitalSignature,keyCertSign"}};
    for (size_t i = 0; i < 3; i++) {
        X509_EXTENSION *e = X509V3_EXT_conf(NULL, &ctx, exts[i][0], exts[i][1]);
        assert_non_null(e);
        X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
    }
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    BIO *bc = BIO_new(BIO_s_mem()), *bk = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bc, x);
    PEM_write_bio_PrivateKey(bk, key, NULL, NULL, 0, NULL, NULL);
    pem_pair_t p = {bio_string(bc), bio_string(bk)};
    X509_free(x);
    EVP_PKEY_free(key);
    return p;
}

typedef struct tls_srv {
    int fd, port;
    SSL_CTX *ctx;
    pthread_t thr;
    atomic_bool stopping;
    atomic_int served, with_client_cert;
} tls_srv_t;

static void *tls_main(void *arg)
{
    tls_srv_t *t = arg;
    for (;;) {
        int fd = accept(t->fd, NULL, NULL);
        if (fd < 0) {
            if (atomic_load(&t->stopping))
                break;
            continue;
        }
        SSL *ssl = SSL_new(t->ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) == 1) {
            char buf[4096];
            size_t n = 0;
            while (n < sizeof(buf) - 1) {
                int r = SSL_read(ssl, buf + n, (int)(sizeof(buf) - 1 - n));
                if (r <= 0)
                    break;
                n += (size_t)r;
                buf[n] = '\0';
                if (strstr(buf, "\r\n\r\n") != NULL)
                    break;
            }
            X509 *peer = SSL_get1_peer_certificate(ssl);
            if (peer != NULL)
                atomic_fetch_add(&t->with_client_cert, 1);
            X509_free(peer);
            const char *resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
            SSL_write(ssl, resp, (int)strlen(resp));
            atomic_fetch_add(&t->served, 1);
            SSL_shutdown(ssl);
        }
        ERR_clear_error();
        SSL_free(ssl);
        close(fd);
    }
    return NULL;
}

static int accept_any_client(int ok, X509_STORE_CTX *ctx)
{
    return 1; /* the test checks that a certificate was presented, not who issued it */
}

static void tls_start(tls_srv_t *t, const pem_pair_t *server)
{
    memset(t, 0, sizeof(*t));
    t->ctx = SSL_CTX_new(TLS_server_method());
    BIO *bc = BIO_new_mem_buf(server->cert, -1), *bk = BIO_new_mem_buf(server->key, -1);
    X509 *x = PEM_read_bio_X509(bc, NULL, NULL, NULL);
    EVP_PKEY *k = PEM_read_bio_PrivateKey(bk, NULL, NULL, NULL);
    assert_int_equal(SSL_CTX_use_certificate(t->ctx, x), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(t->ctx, k), 1);
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(bc);
    BIO_free(bk);
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, accept_any_client);
    t->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    assert_int_equal(bind(t->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(t->fd, 16), 0);
    assert_int_equal(getsockname(t->fd, (struct sockaddr *)&a, &al), 0);
    t->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&t->thr, NULL, tls_main, t), 0);
}

static void tls_stop(tls_srv_t *t)
{
    atomic_store(&t->stopping, true);
    shutdown(t->fd, SHUT_RDWR);
    pthread_join(t->thr, NULL);
    close(t->fd);
    SSL_CTX_free(t->ctx);
}

static int tls_get(const kq_kube_conf_t *c)
{
    kq_kube_t *k = kq_kube_new(c);
    assert_non_null(k);
    kq_kube_resp_t r = {0};
    int rc = kq_kube_request(k, "GET", "/api", NULL, NULL, &r);
    if (rc == 0) {
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "{}");
    }
    kq_kube_resp_free(&r);
    kq_kube_free(k);
    return rc;
}

static void test_tls(void **state)
{
    pem_pair_t server = make_cert("kq-test-server"), client = make_cert("kq-test-client");
    tls_srv_t t;
    tls_start(&t, &server);
    char url[64], dir[] = "/tmp/kq-tls-XXXXXX", ca[300], crt[300], key[300];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", t.port);

    /* CA and client certificate as PEM data (the *-data kubeconfig fields) */
    kq_kube_conf_t c = {.server = url, .ca_pem = server.cert, .cert_pem = client.cert,
                        .key_pem = client.key};
    assert_int_equal(tls_get(&c), 0);
    assert_int_equal(atomic_load(&t.with_client_cert), 1);

    /* the same from files */
    assert_non_null(mkdtemp(dir));
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(crt, sizeof(crt), "%s/client.pem", dir);
    snprintf(key, sizeof(key), "%s/client.key", dir);
    write_file(ca, server.cert);
    write_file(crt, client.cert);
    write_file(key, client.key);
    kq_kube_conf_t f = {.server = url, .ca_file = ca, .cert_file = crt, .key_file = key};
    assert_int_equal(tls_get(&f), 0);
    assert_int_equal(atomic_load(&t.with_client_cert), 2);

    /* the wrong CA: the server is not trusted */
    kq_kube_conf_t wrong = {.server = url, .ca_pem = client.cert};
    assert_int_equal(tls_get(&wrong), KQ_EIO);
    /* insecure-skip-tls-verify: trusted anyway; no client certificate sent */
    kq_kube_conf_t ins = {.server = url, .insecure = true};
    assert_int_equal(tls_get(&ins), 0);
    assert_int_equal(atomic_load(&t.with_client_cert), 2);
    assert_int_equal(atomic_load(&t.served), 3);

    tls_stop(&t);
    unlink(ca);
    unlink(crt);
    unlink(key);
    rmdir(dir);
    free(server.cert);
    free(server.key);
    free(client.cert);
    free(client.key);
}

static int group_setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    (void)kq_log_set_level(getenv("KQ_TEST_VERBOSE") ? "debug" : "error");
    return 0;
}

static int group_teardown(void **state)
{
    curl_global_cleanup();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kubeconfig_data_fields),
        cmocka_unit_test(test_kubeconfig_relative_paths),
        cmocka_unit_test(test_kubeconfig_insecure_and_scheme),
        cmocka_unit_test(test_kubeconfig_token_wins_over_token_file),
        cmocka_unit_test(test_kubeconfig_base64_forms),
        cmocka_unit_test(test_kubeconfig_errors),
        cmocka_unit_test(test_kubeconfig_load_file),
        cmocka_unit_test(test_kubeconfig_fifo_files),
        cmocka_unit_test(test_in_cluster),
        cmocka_unit_test(test_bind),
        cmocka_unit_test(test_get_and_evict),
        cmocka_unit_test(test_request_limits_and_token_file),
        cmocka_unit_test(test_watch_line_splitting),
        cmocka_unit_test(test_watch_inband_410_relists),
        cmocka_unit_test(test_watch_http_errors),
        cmocka_unit_test(test_watch_eof_rewatches_from_last_rv),
        cmocka_unit_test(test_watch_pagination),
        cmocka_unit_test(test_watch_continue_expired),
        cmocka_unit_test(test_list_page_too_large_is_halved),
        cmocka_unit_test(test_watch_line_too_long),
        cmocka_unit_test(test_watch_filter),
        cmocka_unit_test(test_watch_feed),
        cmocka_unit_test(test_watch_stop_during_backoff),
        cmocka_unit_test(test_events_dedup),
        cmocka_unit_test(test_events_aggregate_into_one_series),
        cmocka_unit_test(test_events_rate_limit),
        cmocka_unit_test(test_pod_annotate),
        cmocka_unit_test(test_events_queue_bound),
        cmocka_unit_test(test_tls),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
