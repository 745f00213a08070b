/* Kubernetes API client: connection settings (kubeconfig YAML or the in-cluster service
 * account), single requests over libcurl, pod binding/get/eviction, an Event poster and a
 * list/watch informer.
 *
 * DESIGN
 * - Threads. kq_kube_t is shared by every thread. A request takes an easy handle from a
 *   small pool (under pool_lock, no I/O inside), uses it alone, resets it and puts it
 *   back: a handle is only ever used by one thread at a time and its live connections
 *   are reused by the next request. Each informer owns one easy handle plus one multi
 *   handle on its own thread; kq_kube_watch_stop sets a stop flag, wakes the multi handle
 *   (curl_multi_wakeup, the one multi call allowed from another thread) and the backoff
 *   condition variable, and joins, so an open watch or a pending backoff ends at once.
 * - Events. kq_kube_event deduplicates (uthash keyed by uid/reason/message, entries kept
 *   in insertion order so expired ones are pruned from the head), applies a token bucket,
 *   and pushes onto a bounded ring; all of it under ev_lock, no I/O. One poster thread,
 *   started on the first event, pops and POSTs outside the lock. kq_kube_pod_annotate's
 *   pod PATCHes (control/requeue.c) share the bucket, the ring and the thread. kq_kube_free stops and
 *   joins it; events still queued then are dropped.
 * - Watch streams are split on '\n' with a partial-line buffer (chunk boundaries mean
 *   nothing); resourceVersion only advances on events that were delivered, so a re-watch
 *   from it never skips one. A line over max_watch_line, an in-band or HTTP 410, or an
 *   expired continue token leads to a full relist (list_begin .. list_end).
 * - Sizes from outside are capped: kubeconfig and token files, response bodies, watch
 *   lines. Secrets (token, key data) are never logged and are wiped before being freed.
 * - curl_global_init is the caller's job (main, once, before threads start).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf, vasprintf, strndup */
#endif
#include "kubequota/kube/jscan.h"
#include "kubequota/kube/kube.h"
#include "kubequota/base/duration.h"
#include "kubequota/base/log.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>
#include <yaml.h>

#define KUBECONFIG_MAX    (16u << 20) /* bytes of a kubeconfig file */
#define SMALL_FILE_MAX    (1u << 20)  /* token, namespace, CA files read here */
#define ERROR_BODY_MAX    (1u << 20)  /* non-200 body of a watch */
#define DOC_KEEP_MAX      (1u << 20)  /* an informer's reused document is dropped above this
                                       * (a typical pod takes about 8 KB of it) */
#define POOL_MAX          64          /* idle curl handles kept, each with its open connection: binds
                                        * run in parallel (kube-scheduler binds in goroutines); a
                                        * handle beyond the pool costs a new TLS handshake per bind */
#define DEDUP_MAX         8192
#define EVENT_MSG_MAX     1024
#define EVENT_REASON_MAX  128
#define DEFAULT_SA_DIR    "/var/run/secrets/kubernetes.io/serviceaccount"
#define USER_AGENT        "kubequota/0.1"

/* ======================================================================================
 * small helpers
 * ====================================================================================== */

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void free_secret(char *s)
{
    if (s != NULL) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

/* strdup that reports failure only when the source existed. */
static bool dup_field(char **dst, const char *src)
{
    *dst = dup_or_null(src);
    return src == NULL || *dst != NULL;
}

static void trim_in_place(char *s)
{
    size_t n = strlen(s), i = 0;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    while (s[i] != '\0' && isspace((unsigned char)s[i]))
        i++;
    if (i > 0)
        memmove(s, s + i, n - i + 1);
}

/* Reads a whole file of at most max bytes as a NUL-terminated string. 0, KQ_ENOENT,
 * KQ_ETOOBIG, KQ_EIO, KQ_ETIMEDOUT or KQ_ENOMEM; *err_no gets errno for the message.
 * Never blocks for long: the file is opened non-blocking (opening a FIFO without a writer
 * would wait forever), a directory is refused (EISDIR), and anything but a regular file
 * (a FIFO, a socket, a terminal: `--kubeconfig <(...)`) is read with poll(2) and must end
 * within PIPE_READ_MS (ETIMEDOUT). */
#define PIPE_READ_MS 2000 /* the messages say "2 s" */
static int read_file(const char *path, size_t max, char **out, size_t *len, int *err_no)
{
    int rc = KQ_EIO;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    *err_no = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *err_no = errno;
        return errno == ENOENT ? KQ_ENOENT : KQ_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *err_no = errno;
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        *err_no = EISDIR;
        goto out;
    }
    bool regular = S_ISREG(st.st_mode), waited = false;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (n + 4096 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *p = realloc(buf, ncap);
            if (p == NULL) {
                rc = KQ_ENOMEM;
                goto out;
            }
            buf = p;
            cap = ncap;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        /* a FIFO no writer has opened yet reads as empty: wait (bounded) for one, once */
        bool no_writer_yet = got == 0 && n == 0 && S_ISFIFO(st.st_mode) && !waited;
        if (no_writer_yet || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !regular)) {
            waited = no_writer_yet || waited;
            struct timespec t1;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            long left = PIPE_READ_MS - (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
                rc = KQ_ETIMEDOUT;
                goto out;
            }
            continue;
        }
        if (got < 0) {
            *err_no = errno;
            goto out;
        }
        n += (size_t)got;
        if (n > max) {
            rc = KQ_ETOOBIG;
            goto out;
        }
        if (got == 0)
            break;
    }
    buf[n] = '\0';
    *out = buf;
    if (len != NULL)
        *len = n;
    buf = NULL;
    rc = 0;
out:
    if (buf != NULL) {
        OPENSSL_cleanse(buf, n);
        free(buf);
    }
    close(fd);
    return rc;
}

/* p resolved against base_dir unless it is absolute (or base_dir is empty). */
static char *path_join(const char *base_dir, const char *p)
{
    if (p[0] == '/' || base_dir == NULL || base_dir[0] == '\0')
        return strdup(p);
    size_t bl = strlen(base_dir);
    char *out = NULL;
    if (asprintf(&out, "%s%s%s", base_dir, base_dir[bl - 1] == '/' ? "" : "/", p) < 0)
        return NULL;
    return out;
}

/* Percent-encodes everything but RFC 3986 unreserved characters (curl's own escaper). A new
 * string for free(), or NULL. */
static char *url_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);
    char *out = e != NULL ? strdup(e) : NULL;
    curl_free(e);
    return out;
}

/* Growable byte buffer, always NUL-terminated when non-empty. */
typedef struct buf {
    char *p;
    size_t n, cap;
} buf_t;

static int buf_add(buf_t *b, const void *data, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL)
            return KQ_ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

static void buf_free(buf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The "message" of a Status body, else the start of the body, else "HTTP <status>". */
static void status_message(long status, const char *body, size_t len, char *err, size_t errlen)
{
    if (err == NULL || errlen == 0)
        return;
    json_t *j = body != NULL && len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
    const char *msg = jstr(j, "message");
    if (msg != NULL && msg[0] != '\0') {
        snprintf(err, errlen, "%s", msg);
    } else if (body != NULL && len > 0 && j == NULL) {
        size_t i = 0, m = len < 200 ? len : 200;
        int w = snprintf(err, errlen, "HTTP %ld: ", status);
        for (size_t o = w > 0 ? (size_t)w : 0; i < m && o + 1 < errlen; i++, o++) {
            err[o] = isprint((unsigned char)body[i]) ? body[i] : ' ';
            err[o + 1] = '\0';
        }
    } else {
        snprintf(err, errlen, "HTTP %ld", status);
    }
    json_decref(j);
}

/* ======================================================================================
 * base64 (kubeconfig *-data fields)
 * ====================================================================================== */

/* Standard base64 with whitespace ignored and padding optional. Returns a new
 * NUL-terminated buffer, or NULL with *why set (*why NULL means out of memory). */
static unsigned char *b64_decode(const char *in, size_t inlen, size_t *outlen, const char **why)
{
    *why = NULL;
    if (inlen > (size_t)INT_MAX / 2) {
        *why = "data too large";
        return NULL;
    }
    unsigned char *clean = malloc(inlen + 4), *out = NULL;
    if (clean == NULL)
        return NULL;
    size_t n = 0, pad = 0;
    for (size_t i = 0; i < inlen; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            continue;
        if (c == '=') {
            pad++;
        } else if (isalnum(c) || c == '+' || c == '/') {
            if (pad > 0) {
                *why = "'=' padding in the middle of the data";
                goto out;
            }
        } else {
            *why = "invalid base64 character";
            goto out;
        }
        clean[n++] = c;
    }
    if (pad > 2 || (pad > 0 && n % 4 != 0)) {
        *why = "bad '=' padding";
        goto out;
    }
    if (n % 4 == 1) {
        *why = "truncated base64 data (length is not valid)";
        goto out;
    }
    while (n % 4 != 0) { /* unpadded input: complete it */
        clean[n++] = '=';
        pad++;
    }
    out = malloc(n / 4 * 3 + 1);
    if (out == NULL)
        goto out;
    int got = n > 0 ? EVP_DecodeBlock(out, clean, (int)n) : 0;
    if (got < 0 || (size_t)got < pad) {
        free(out);
        out = NULL;
        *why = "invalid base64 data";
        goto out;
    }
    *outlen = (size_t)got - pad;
    out[*outlen] = '\0';
out:
    free(clean);
    return out;
}

/* ======================================================================================
 * configuration
 * ====================================================================================== */

void kq_kube_conf_free(kq_kube_conf_t *c)
{
    if (c == NULL)
        return;
    free(c->server);
    free(c->ca_file);
    free(c->ca_pem);
    free(c->cert_file);
    free(c->cert_pem);
    free(c->key_file);
    free_secret(c->key_pem);
    free_secret(c->token);
    free(c->token_file);
    free(c->namespace);
    memset(c, 0, sizeof(*c));
}

static int conf_copy(kq_kube_conf_t *dst, const kq_kube_conf_t *src)
{
    memset(dst, 0, sizeof(*dst));
    bool ok = dup_field(&dst->server, src->server) && dup_field(&dst->ca_file, src->ca_file) &&
              dup_field(&dst->ca_pem, src->ca_pem) && dup_field(&dst->cert_file, src->cert_file) &&
              dup_field(&dst->cert_pem, src->cert_pem) &&
              dup_field(&dst->key_file, src->key_file) && dup_field(&dst->key_pem, src->key_pem) &&
              dup_field(&dst->token, src->token) && dup_field(&dst->token_file, src->token_file) &&
              dup_field(&dst->namespace, src->namespace);
    dst->insecure = src->insecure;
    if (!ok) {
        kq_kube_conf_free(dst);
        return KQ_ENOMEM;
    }
    return 0;
}

/* ---- kubeconfig (YAML) ---------------------------------------------------------------- */

typedef struct kc {
    yaml_document_t doc;
    const char *file;
    const char *base_dir;
    kq_diags_t *diags;
    int errors;
    bool oom;
} kc_t;

static void kc_err(kc_t *c, const yaml_node_t *n, const char *where, const char *fmt, ...)
    KQ_PRINTF(4, 5);
static void kc_err(kc_t *c, const yaml_node_t *n, const char *where, const char *fmt, ...)
{
    c->errors++;
    if (c->diags == NULL)
        return;
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (rc < 0) {
        c->oom = true;
        return;
    }
    int line = n ? (int)n->start_mark.line + 1 : 0, col = n ? (int)n->start_mark.column + 1 : 0;
    if (kq_diags_add(c->diags, c->file, line, col, where, "%s", text) != 0)
        c->oom = true;
    free(text);
}

static yaml_node_t *kc_node(kc_t *c, int idx)
{
    return yaml_document_get_node(&c->doc, idx);
}

static bool scalar_is(const yaml_node_t *n, const char *s)
{
    size_t l = strlen(s);
    return n != NULL && n->type == YAML_SCALAR_NODE && n->data.scalar.length == l &&
           memcmp(n->data.scalar.value, s, l) == 0;
}

static bool scalar_is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    return n->data.scalar.length == 0 || scalar_is(n, "~") || scalar_is(n, "null") ||
           scalar_is(n, "Null") || scalar_is(n, "NULL");
}

static const char *node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

/* Value of key in a mapping; NULL when absent or null. The first occurrence wins. */
static yaml_node_t *map_get(kc_t *c, yaml_node_t *map, const char *key)
{
    if (map == NULL || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        if (scalar_is(kc_node(c, p->key), key)) {
            yaml_node_t *v = kc_node(c, p->value);
            return v != NULL && !scalar_is_null(v) ? v : NULL;
        }
    }
    return NULL;
}

/* A string field: *out is borrowed (NULL when absent). -1 after reporting a bad value. */
static int get_str(kc_t *c, yaml_node_t *map, const char *key, const char *where,
                   const char **out, yaml_node_t **at)
{
    yaml_node_t *v = map_get(c, map, key);
    *out = NULL;
    if (at != NULL)
        *at = v;
    if (v == NULL)
        return 0;
    if (v->type != YAML_SCALAR_NODE) {
        kc_err(c, v, where, "%s must be a string, not %s", key, node_kind(v));
        return -1;
    }
    if (memchr(v->data.scalar.value, '\0', v->data.scalar.length) != NULL) {
        kc_err(c, v, where, "%s contains a NUL character", key);
        return -1;
    }
    *out = (const char *)v->data.scalar.value;
    return 0;
}

static int get_bool(kc_t *c, yaml_node_t *map, const char *key, const char *where, bool *out)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
    yaml_node_t *v = map_get(c, map, key);
    *out = false;
    if (v == NULL)
        return 0;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (scalar_is(v, yes[i])) {
            *out = true;
            return 0;
        }
        if (scalar_is(v, no[i]))
            return 0;
    }
    kc_err(c, v, where, "%s must be true or false", key);
    return -1;
}

/* A file path field resolved against the kubeconfig's folder; *out new or NULL. */
static int get_path(kc_t *c, yaml_node_t *map, const char *key, const char *where, char **out)
{
    const char *s;
    *out = NULL;
    if (get_str(c, map, key, where, &s, NULL) != 0)
        return -1;
    if (s == NULL || s[0] == '\0')
        return 0;
    *out = path_join(c->base_dir, s);
    if (*out == NULL) {
        c->oom = true;
        return -1;
    }
    /* curl and OpenSSL open these themselves, blocking: a FIFO would hang every request */
    struct stat st;
    if (stat(*out, &st) == 0 && !S_ISREG(st.st_mode)) {
        kc_err(c, map, where, "%s %s is not a regular file (%s): give a file", key, *out,
               S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* A base64 PEM field; *out new or NULL. */
static int get_pem(kc_t *c, yaml_node_t *map, const char *key, const char *where, char **out)
{
    const char *s, *why;
    yaml_node_t *at;
    size_t n = 0;
    *out = NULL;
    if (get_str(c, map, key, where, &s, &at) != 0)
        return -1;
    if (s == NULL || s[0] == '\0')
        return 0;
    unsigned char *pem = b64_decode(s, at->data.scalar.length, &n, &why);
    if (pem == NULL) {
        if (why == NULL)
            c->oom = true;
        else
            kc_err(c, at, where, "%s is not valid base64: %s", key, why);
        return -1;
    }
    if (memchr(pem, '\0', n) != NULL || strstr((char *)pem, "-----BEGIN ") == NULL) {
        kc_err(c, at, where, "%s does not decode to PEM data (no \"-----BEGIN\" line)", key);
        OPENSSL_cleanse(pem, n);
        free(pem);
        return -1;
    }
    *out = (char *)pem;
    return 0;
}

/* The `inner` mapping of the entry named `name` in the list `list` of the root. NULL
 * (with *err set when something was reported) when missing. */
static yaml_node_t *find_named(kc_t *c, yaml_node_t *root, const char *list, const char *name,
                               const char *inner, yaml_node_t *ref, bool *err)
{
    yaml_node_t *seq = map_get(c, root, list);
    *err = true;
    if (seq != NULL && seq->type != YAML_SEQUENCE_NODE) {
        kc_err(c, seq, list, "must be a list, not %s", node_kind(seq));
        return NULL;
    }
    if (seq != NULL) {
        for (yaml_node_item_t *it = seq->data.sequence.items.start;
             it < seq->data.sequence.items.top; it++) {
            yaml_node_t *e = kc_node(c, *it);
            if (e == NULL)
                continue;
            if (e->type != YAML_MAPPING_NODE) {
                kc_err(c, e, list, "entries must be mappings with name and %s, not %s", inner,
                       node_kind(e));
                return NULL;
            }
            if (!scalar_is(map_get(c, e, "name"), name))
                continue;
            yaml_node_t *v = map_get(c, e, inner);
            if (v == NULL || v->type != YAML_MAPPING_NODE) {
                kc_err(c, v ? v : e, list, "entry \"%s\" has no %s mapping", name, inner);
                return NULL;
            }
            *err = false;
            return v;
        }
    }
    kc_err(c, ref, list, "no entry named \"%s\" in %s", name, list);
    return NULL;
}

static int kc_cluster(kc_t *c, yaml_node_t *cl, const char *where, kq_kube_conf_t *t)
{
    const char *server, *tsn;
    yaml_node_t *at;
    int bad = 0;
    if (get_str(c, cl, "server", where, &server, &at) != 0)
        return -1;
    if (server == NULL || server[0] == '\0') {
        kc_err(c, cl, where, "no server address");
        return -1;
    }
    const char *scheme = strstr(server, "://");
    if (scheme != NULL && !(strncmp(server, "https://", 8) == 0 || strncmp(server, "http://", 7) == 0)) {
        kc_err(c, at, where, "server \"%s\": only http:// and https:// are supported", server);
        return -1;
    }
    if (asprintf(&t->server, "%s%s", scheme ? "" : "https://", server) < 0) {
        t->server = NULL;
        c->oom = true;
        return -1;
    }
    size_t l = strlen(t->server);
    while (l > 0 && t->server[l - 1] == '/')
        t->server[--l] = '\0';
    bad |= get_path(c, cl, "certificate-authority", where, &t->ca_file);
    bad |= get_pem(c, cl, "certificate-authority-data", where, &t->ca_pem);
    bad |= get_bool(c, cl, "insecure-skip-tls-verify", where, &t->insecure);
    if (get_str(c, cl, "tls-server-name", where, &tsn, NULL) == 0 && tsn != NULL)
        kq_warn("kube: kubeconfig tls-server-name is not supported, ignored file=%s", c->file);
    if (bad)
        return -1;
    if (t->ca_file != NULL && t->ca_pem != NULL) {
        kc_err(c, cl, where, "certificate-authority and certificate-authority-data are both set");
        return -1;
    }
    if (t->insecure && (t->ca_file != NULL || t->ca_pem != NULL)) {
        kc_err(c, cl, where,
               "insecure-skip-tls-verify cannot be combined with a certificate authority");
        return -1;
    }
    return 0;
}

static int kc_user(kc_t *c, yaml_node_t *u, const char *where, kq_kube_conf_t *t)
{
    static const struct {
        const char *key, *what;
    } unsupported[] = {
        {"exec", "exec credential plugins"},
        {"auth-provider", "auth-provider plugins"},
        {"username", "basic authentication (username/password)"},
        {"password", "basic authentication (username/password)"},
        {"as", "impersonation (as)"},
    };
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++) {
        yaml_node_t *v = map_get(c, u, unsupported[i].key);
        if (v != NULL) {
            kc_err(c, v, where,
                   "%s: %s are not supported by kubequota; use a token, tokenFile or a client "
                   "certificate",
                   unsupported[i].key, unsupported[i].what);
            return -1;
        }
    }
    const char *tok;
    int bad = 0;
    bad |= get_path(c, u, "client-certificate", where, &t->cert_file);
    bad |= get_pem(c, u, "client-certificate-data", where, &t->cert_pem);
    bad |= get_path(c, u, "client-key", where, &t->key_file);
    bad |= get_pem(c, u, "client-key-data", where, &t->key_pem);
    bad |= get_str(c, u, "token", where, &tok, NULL);
    bad |= get_path(c, u, "tokenFile", where, &t->token_file);
    if (bad)
        return -1;
    if (tok != NULL && tok[0] != '\0') { /* token wins over tokenFile, as in kubectl */
        free(t->token_file);
        t->token_file = NULL;
        if ((t->token = strdup(tok)) == NULL) {
            c->oom = true;
            return -1;
        }
    }
    if (t->cert_file != NULL && t->cert_pem != NULL) {
        kc_err(c, u, where, "client-certificate and client-certificate-data are both set");
        return -1;
    }
    if (t->key_file != NULL && t->key_pem != NULL) {
        kc_err(c, u, where, "client-key and client-key-data are both set");
        return -1;
    }
    bool has_cert = t->cert_file || t->cert_pem, has_key = t->key_file || t->key_pem;
    if (has_cert != has_key) {
        kc_err(c, u, where, "%s is set without %s", has_cert ? "a client certificate" : "a client key",
               has_cert ? "a client key" : "a client certificate");
        return -1;
    }
    return 0;
}

static int kc_build(kc_t *c, kq_kube_conf_t *t)
{
    yaml_node_t *root = yaml_document_get_root_node(&c->doc), *at;
    if (root == NULL) {
        kc_err(c, NULL, NULL, "empty kubeconfig");
        return -1;
    }
    if (root->type != YAML_MAPPING_NODE) {
        kc_err(c, root, NULL, "a kubeconfig must be a mapping, not %s", node_kind(root));
        return -1;
    }
    const char *cur, *cluster, *user, *ns;
    if (get_str(c, root, "current-context", "current-context", &cur, &at) != 0)
        return -1;
    if (cur == NULL || cur[0] == '\0') {
        kc_err(c, root, "current-context", "current-context is not set");
        return -1;
    }
    bool err;
    yaml_node_t *ctx = find_named(c, root, "contexts", cur, "context", at, &err);
    if (ctx == NULL)
        return -1;

    char where[300];
    snprintf(where, sizeof(where), "contexts[%s]", cur);
    yaml_node_t *cl_at, *u_at;
    if (get_str(c, ctx, "cluster", where, &cluster, &cl_at) != 0 ||
        get_str(c, ctx, "user", where, &user, &u_at) != 0 ||
        get_str(c, ctx, "namespace", where, &ns, NULL) != 0)
        return -1;
    if (cluster == NULL || cluster[0] == '\0') {
        kc_err(c, ctx, where, "context \"%s\" names no cluster", cur);
        return -1;
    }
    if (ns != NULL && ns[0] != '\0' && (t->namespace = strdup(ns)) == NULL) {
        c->oom = true;
        return -1;
    }

    int bad = 0;
    yaml_node_t *cl = find_named(c, root, "clusters", cluster, "cluster", cl_at, &err);
    if (cl == NULL) {
        bad = -1;
    } else {
        snprintf(where, sizeof(where), "clusters[%s]", cluster);
        bad |= kc_cluster(c, cl, where, t);
    }
    if (user != NULL && user[0] != '\0') { /* no user: anonymous */
        yaml_node_t *u = find_named(c, root, "users", user, "user", u_at, &err);
        if (u == NULL && err) {
            bad = -1;
        } else {
            snprintf(where, sizeof(where), "users[%s]", user);
            bad |= kc_user(c, u, where, t);
        }
    }
    return bad ? -1 : 0;
}

int kq_kubeconfig_parse(const char *buf, size_t len, const char *name, const char *base_dir,
                        kq_kube_conf_t *out, kq_diags_t *diags)
{
    kq_kube_conf_t t;
    memset(&t, 0, sizeof(t));
    kc_t c = {.file = name ? name : "kubeconfig", .base_dir = base_dir, .diags = diags};
    yaml_parser_t parser;
    bool have_doc = false;
    int rc = KQ_EPARSE;

    if (buf == NULL || out == NULL)
        return KQ_EINVAL;
    if (len > KUBECONFIG_MAX) {
        kc_err(&c, NULL, NULL, "kubeconfig larger than %u bytes", KUBECONFIG_MAX);
        return KQ_ETOOBIG;
    }
    if (!yaml_parser_initialize(&parser))
        return KQ_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &c.doc)) {
        if (parser.error == YAML_MEMORY_ERROR) {
            rc = KQ_ENOMEM;
        } else {
            yaml_node_t fake;
            memset(&fake, 0, sizeof(fake));
            fake.start_mark = parser.problem_mark;
            kc_err(&c, &fake, NULL, "malformed YAML: %s%s%s",
                   parser.problem ? parser.problem : "syntax error",
                   parser.context ? " " : "", parser.context ? parser.context : "");
        }
        goto out;
    }
    have_doc = true;
    if (kc_build(&c, &t) != 0 || c.errors > 0 || c.oom) {
        if (c.oom)
            rc = KQ_ENOMEM;
        goto out;
    }
    *out = t;
    memset(&t, 0, sizeof(t));
    rc = 0;
out:
    if (have_doc)
        yaml_document_delete(&c.doc);
    yaml_parser_delete(&parser);
    kq_kube_conf_free(&t);
    return rc;
}

int kq_kubeconfig_load(const char *path, kq_kube_conf_t *out, kq_diags_t *diags)
{
    char *buf = NULL, *dir = NULL;
    size_t len = 0;
    int err_no = 0;
    int rc = read_file(path, KUBECONFIG_MAX, &buf, &len, &err_no);
    if (rc != 0) {
        if (diags != NULL)
            (void)kq_diags_add(diags, path, 0, 0, NULL, "cannot read kubeconfig: %s",
                               rc == KQ_ETOOBIG     ? "file too large"
                               : rc == KQ_ETIMEDOUT ? "not a regular file, and nothing came out of it within 2 s "
                                                      "(a FIFO nobody writes to?)"
                               : err_no             ? strerror(err_no)
                                                    : kq_strerror(rc));
        return rc;
    }
    const char *slash = strrchr(path, '/');
    dir = slash == NULL ? strdup(".") : slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
    if (dir == NULL) {
        rc = KQ_ENOMEM;
        goto out;
    }
    rc = kq_kubeconfig_parse(buf, len, path, dir, out, diags);
out:
    OPENSSL_cleanse(buf, len);
    free(buf);
    free(dir);
    return rc;
}

/* ---- in-cluster ------------------------------------------------------------------------ */

int kq_kube_conf_in_cluster(const char *sa_dir, kq_kube_conf_t *out, kq_diags_t *diags)
{
    kq_kube_conf_t t;
    memset(&t, 0, sizeof(t));
    char *ca = NULL, *ns = NULL, *tok = NULL, *nsbuf = NULL;
    int rc = KQ_EINVAL, err_no = 0;
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (sa_dir == NULL)
        sa_dir = DEFAULT_SA_DIR;

    if (host == NULL || host[0] == '\0' || port == NULL || port[0] == '\0') {
        if (diags != NULL)
            (void)kq_diags_add(diags, NULL, 0, 0, "in-cluster",
                               "not running in a cluster: KUBERNETES_SERVICE_HOST and "
                               "KUBERNETES_SERVICE_PORT must both be set");
        goto out;
    }
    bool v6 = strchr(host, ':') != NULL && host[0] != '[';
    if (asprintf(&t.server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0) {
        t.server = NULL;
        rc = KQ_ENOMEM;
        goto out;
    }
    if ((t.token_file = path_join(sa_dir, "token")) == NULL ||
        (ca = path_join(sa_dir, "ca.crt")) == NULL || (ns = path_join(sa_dir, "namespace")) == NULL) {
        rc = KQ_ENOMEM;
        goto out;
    }
    rc = read_file(t.token_file, SMALL_FILE_MAX, &tok, NULL, &err_no);
    if (rc != 0) {
        if (diags != NULL)
            (void)kq_diags_add(diags, t.token_file, 0, 0, "in-cluster",
                               "cannot read the service account token: %s",
                               err_no ? strerror(err_no) : kq_strerror(rc));
        goto out;
    }
    if (access(ca, R_OK) == 0) {
        t.ca_file = ca;
        ca = NULL;
    } else {
        kq_warn("kube: in-cluster CA file unreadable, using system CAs path=%s", ca);
    }
    if (read_file(ns, SMALL_FILE_MAX, &nsbuf, NULL, &err_no) == 0) {
        trim_in_place(nsbuf);
        if (nsbuf[0] != '\0') {
            t.namespace = nsbuf;
            nsbuf = NULL;
        }
    }
    *out = t;
    memset(&t, 0, sizeof(t));
    rc = 0;
out:
    free_secret(tok);
    free(ca);
    free(ns);
    free(nsbuf);
    kq_kube_conf_free(&t);
    return rc;
}

/* ======================================================================================
 * client and requests
 * ====================================================================================== */

/* One write of an Event series: create it, or PATCH its count (events section). */
typedef struct ev_item {
    char *ns, *pod, *uid, *type, *reason, *message, *key, *name;
    time_t first, when;
    unsigned long count;
    bool patch;
    bool confirm; /* GET the pod first; create only if the API server has it with this uid */
    /* Not an Event: a merge PATCH of one annotation on the pod (kq_kube_pod_annotate); the
     * series fields above are unused then, except ns, pod and uid. */
    char *akey, *aval;
} ev_item_t;

/* An Event series: one Event object per (pod uid, reason, message), its count rising. */
typedef struct dedup {
    UT_hash_handle hh;
    double at;             /* monotonic time of the last write queued */
    double seen;           /* monotonic time of the last occurrence */
    time_t first;          /* wall time of the first occurrence (firstTimestamp) */
    unsigned long count;   /* occurrences */
    unsigned long written; /* count the API server has (0: not created yet) */
    bool queued;           /* a write of this series is in the ring or in flight */
    char name[320];        /* the Event's metadata.name */
    char *ns, *pod, *uid, *type, *reason, *message;
    char key[]; /* uid \x1f reason \x1f message */
} dedup_t;

/* A pod that got a Warning event: when it is admitted later, a Normal event says so. */
typedef struct warned {
    UT_hash_handle hh;
    double at;
    char uid[];
} warned_t;

static void *event_main(void *arg);
static void warned_note(kq_kube_t *k, const char *uid, double now);

struct kq_kube {
    kq_kube_conf_t conf;
    kq_kube_opts_t opts;

    pthread_mutex_t pool_lock;
    CURL *pool[POOL_MAX];
    int npool;

    pthread_mutex_t ev_lock; /* everything below */
    pthread_cond_t ev_cond;
    ev_item_t **ring;
    size_t ring_head, ring_count;
    dedup_t *dedup;
    size_t ndedup;
    warned_t *warned; /* pods with a Warning event, insertion order */
    size_t nwarned;
    double tokens, refill_at;
    bool ev_started, ev_stop;
    pthread_t ev_thread;
    atomic_bool ev_abort; /* aborts the poster's transfer in progress */
    CURLM *ev_multi;      /* the poster's own handles (created with the thread) */
    CURL *ev_easy;
    unsigned long posted, suppressed, failed, seq;
    unsigned long annotated, annotate_failed; /* kq_kube_pod_annotate writes done / failed */
};

void kq_kube_opts_default(kq_kube_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->max_response = (size_t)256 << 20;
    o->max_watch_line = (size_t)16 << 20;
    o->connect_timeout_ms = 5000;
    o->request_timeout_ms = 30000;
    o->watch_timeout_s = 300;
    o->watch_progress_ms = 150000;
    o->list_page_size = 500;
    o->backoff_min_ms = 200;
    o->backoff_max_ms = 10000;
    o->event_rate = 10;
    o->event_burst = 50;
    o->event_dedup_s = 60;
    o->event_queue = 1024;
}

kq_kube_t *kq_kube_new_opts(const kq_kube_conf_t *conf, const kq_kube_opts_t *opts)
{
    if (conf == NULL || conf->server == NULL || conf->server[0] == '\0') {
        kq_error("kube: client configuration has no server");
        return NULL;
    }
    kq_kube_t *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return NULL;
    if (opts != NULL)
        k->opts = *opts;
    else
        kq_kube_opts_default(&k->opts);
    if (k->opts.event_queue == 0)
        k->opts.event_queue = 1;
    if (k->opts.list_page_size <= 0)
        k->opts.list_page_size = 500;
    if (k->opts.backoff_max_ms < k->opts.backoff_min_ms)
        k->opts.backoff_max_ms = k->opts.backoff_min_ms;
    k->ring = calloc(k->opts.event_queue, sizeof(*k->ring));
    k->ev_multi = curl_multi_init();
    k->ev_easy = curl_easy_init();
    atomic_init(&k->ev_abort, false);
    if (k->ring == NULL || k->ev_multi == NULL || k->ev_easy == NULL ||
        conf_copy(&k->conf, conf) != 0) {
        if (k->ev_easy != NULL)
            curl_easy_cleanup(k->ev_easy);
        if (k->ev_multi != NULL)
            curl_multi_cleanup(k->ev_multi);
        free(k->ring);
        free(k);
        return NULL;
    }
    size_t l = strlen(k->conf.server);
    while (l > 0 && k->conf.server[l - 1] == '/')
        k->conf.server[--l] = '\0';
    pthread_mutex_init(&k->pool_lock, NULL);
    pthread_mutex_init(&k->ev_lock, NULL);
    pthread_cond_init(&k->ev_cond, NULL);
    k->tokens = k->opts.event_burst;
    k->refill_at = mono_now();
    return k;
}

kq_kube_t *kq_kube_new(const kq_kube_conf_t *conf)
{
    return kq_kube_new_opts(conf, NULL);
}

void kq_kube_resp_free(kq_kube_resp_t *r)
{
    if (r == NULL)
        return;
    free(r->body);
    r->body = NULL;
    r->len = 0;
    r->status = 0;
}

static CURL *pool_get(kq_kube_t *k)
{
    CURL *h = NULL;
    pthread_mutex_lock(&k->pool_lock);
    if (k->npool > 0)
        h = k->pool[--k->npool];
    pthread_mutex_unlock(&k->pool_lock);
    return h != NULL ? h : curl_easy_init();
}

static void pool_put(kq_kube_t *k, CURL *h)
{
    pthread_mutex_lock(&k->pool_lock);
    if (k->npool < POOL_MAX) {
        k->pool[k->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&k->pool_lock);
    if (h != NULL)
        curl_easy_cleanup(h);
}

/* What one transfer does with the bytes it receives. */
typedef struct xfer {
    CURL *h;
    buf_t body;
    size_t max;
    bool too_big, oom;
    /* streaming (watch) mode: complete lines go to line_fn while the status is 200 */
    int (*line_fn)(void *ud, const char *line, size_t len); /* nonzero aborts */
    void *line_ud;
    buf_t partial;
    size_t max_line;
    bool line_too_long, line_abort;
    int mode; /* 0 unknown, 1 stream lines, 2 collect body */
    const atomic_bool *stop;
    bool bulk; /* a LIST page: large body, read in large pieces */
    long idle_max_ms;  /* > 0: a transfer that receives nothing for this long is stalled */
    double last_data;  /* mono_now() of the last bytes received (or of the start) */
    bool stalled;      /* ended because of idle_max_ms */
} xfer_t;

static int feed_line(xfer_t *x, const char *p, size_t n)
{
    if (n > 0 && p[n - 1] == '\r')
        n--;
    if (n == 0)
        return 0;
    return x->line_fn(x->line_ud, p, n);
}

/* Splits stream bytes on '\n'; a line may span calls and a call may hold many lines. */
static int feed_stream(xfer_t *x, const char *p, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t seg = nl ? (size_t)(nl - p) : n;
        if (x->partial.n + seg > x->max_line) {
            x->line_too_long = true;
            return -1;
        }
        if (nl == NULL) {
            if (buf_add(&x->partial, p, seg) != 0) {
                x->oom = true;
                return -1;
            }
            return 0;
        }
        int r;
        if (x->partial.n == 0) {
            r = feed_line(x, p, seg);
        } else {
            if (buf_add(&x->partial, p, seg) != 0) {
                x->oom = true;
                return -1;
            }
            r = feed_line(x, x->partial.p, x->partial.n);
            x->partial.n = 0;
        }
        if (r != 0) {
            x->line_abort = true;
            return -1;
        }
        p += seg + 1;
        n -= seg + 1;
    }
    return 0;
}

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    xfer_t *x = ud;
    size_t n = sz * nm;
    if (x->stop != NULL && atomic_load(x->stop))
        return 0;
    if (x->idle_max_ms > 0)
        x->last_data = mono_now();
    if (x->mode == 0) {
        long status = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
        x->mode = x->line_fn != NULL && status == 200 ? 1 : 2;
    }
    if (x->mode == 1)
        return feed_stream(x, p, n) == 0 ? n : 0;
    if (x->body.n + n > x->max) {
        x->too_big = true;
        return 0;
    }
    if (buf_add(&x->body, p, n) != 0) {
        x->oom = true;
        return 0;
    }
    return n;
}

/* Bearer token for this request: the token file is re-read each time (rotation). */
static char *bearer_token(kq_kube_t *k)
{
    if (k->conf.token_file != NULL) {
        char *t = NULL;
        int err_no = 0;
        int rc = read_file(k->conf.token_file, SMALL_FILE_MAX, &t, NULL, &err_no);
        if (rc == 0) {
            trim_in_place(t);
            if (t[0] != '\0')
                return t;
            free(t);
            kq_warn("kube: token file is empty path=%s", k->conf.token_file);
        } else {
            kq_warn("kube: cannot read token file path=%s error=\"%s\"", k->conf.token_file,
                    err_no ? strerror(err_no) : kq_strerror(rc));
        }
    }
    return k->conf.token != NULL ? strdup(k->conf.token) : NULL;
}

static void slist_free_secret(struct curl_slist *l)
{
    for (struct curl_slist *s = l; s != NULL; s = s->next)
        if (s->data != NULL)
            OPENSSL_cleanse(s->data, strlen(s->data));
    curl_slist_free_all(l);
}

/* One transfer on handle h (reset first). With multi != NULL it runs on that multi handle
 * and ends early when *stop becomes true (KQ_ESTATE). Returns 0 when a response arrived
 * (status in *status), else KQ_ETOOBIG, KQ_ETIMEDOUT, KQ_EIO, KQ_ENOMEM; errbuf gets
 * libcurl's text. A transfer aborted by the line callback returns 0. */
#define INFORMER_READ_BUFFER (256L * 1024)

static int perform(kq_kube_t *k, CURL *h, CURLM *multi, const char *method, const char *path,
                   const char *ctype, const char *body, long timeout_ms, xfer_t *x, long *status,
                   char errbuf[CURL_ERROR_SIZE])
{
    struct curl_slist *hdrs = NULL, *tmp;
    char *url = NULL, *tok = NULL, *auth = NULL, *auth2 = NULL, *ct = NULL;
    int rc = KQ_ENOMEM;
    CURLcode res = CURLE_OK;
    bool stopped = false;

    *status = 0;
    errbuf[0] = '\0';
    curl_easy_reset(h);
    x->h = h;
    if (asprintf(&url, "%s%s", k->conf.server, path) < 0) {
        url = NULL;
        goto out;
    }
#define HDR(s)                                  \
    do {                                        \
        if ((tmp = curl_slist_append(hdrs, (s))) == NULL) \
            goto out;                           \
        hdrs = tmp;                             \
    } while (0)
    HDR("Accept: application/json");
    HDR("Expect:");
    if (ctype != NULL) {
        if (asprintf(&ct, "Content-Type: %s", ctype) < 0) {
            ct = NULL;
            goto out;
        }
        HDR(ct);
    }
    tok = bearer_token(k);
    if (tok != NULL) {
        if (asprintf(&auth, "Authorization: Bearer %s", tok) < 0) {
            auth = NULL;
            goto out;
        }
        HDR(auth);
        if (k->opts.token_header != NULL) {
            if (asprintf(&auth2, "%s: Bearer %s", k->opts.token_header, tok) < 0) {
                auth2 = NULL;
                goto out;
            }
            HDR(auth2);
        }
    }
#undef HDR

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, USER_AGENT);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, k->opts.connect_timeout_ms);
    if (timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    if (x->line_fn == NULL)
        curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->max);
    /* A watch stream or a LIST page: fewer, larger reads (curl's default is 16 KiB; the
     * buffer belongs to the informer's own handle). Reads still return what has arrived:
     * an event is not held back to fill the buffer. */
    if (x->line_fn != NULL || x->bulk)
        curl_easy_setopt(h, CURLOPT_BUFFERSIZE, INFORMER_READ_BUFFER);
    if (k->conf.insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (k->conf.ca_pem != NULL || k->conf.ca_file != NULL) /* that CA only, like kubectl */
        curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    if (k->conf.ca_pem != NULL) {
        struct curl_blob b = {k->conf.ca_pem, strlen(k->conf.ca_pem), CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    } else if (k->conf.ca_file != NULL) {
        curl_easy_setopt(h, CURLOPT_CAINFO, k->conf.ca_file);
    }
    if (k->conf.cert_pem != NULL) {
        struct curl_blob b = {k->conf.cert_pem, strlen(k->conf.cert_pem), CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    } else if (k->conf.cert_file != NULL) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, k->conf.cert_file);
    }
    if (k->conf.key_pem != NULL) {
        struct curl_blob b = {k->conf.key_pem, strlen(k->conf.key_pem), CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (k->conf.key_file != NULL) {
        curl_easy_setopt(h, CURLOPT_SSLKEY, k->conf.key_file);
    }
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
        if (strcmp(method, "POST") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (body != NULL) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        } else if (strcmp(method, "POST") == 0) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        }
    }

    if (multi == NULL) {
        res = curl_easy_perform(h);
    } else {
        if (curl_multi_add_handle(multi, h) != CURLM_OK) {
            rc = KQ_EIO;
            goto out;
        }
        int running = 1;
        x->last_data = mono_now();
        for (;;) {
            if (curl_multi_perform(multi, &running) != CURLM_OK) {
                res = CURLE_FAILED_INIT;
                break;
            }
            if (running == 0)
                break;
            if (x->stop != NULL && atomic_load(x->stop)) {
                stopped = true;
                break;
            }
            if (x->idle_max_ms > 0 && (mono_now() - x->last_data) * 1000.0 >= (double)x->idle_max_ms) {
                x->stalled = true;
                break;
            }
            if (curl_multi_poll(multi, NULL, 0, 1000, NULL) != CURLM_OK) {
                res = CURLE_FAILED_INIT;
                break;
            }
        }
        CURLMsg *m;
        int q;
        while ((m = curl_multi_info_read(multi, &q)) != NULL)
            if (m->msg == CURLMSG_DONE && m->easy_handle == h)
                res = m->data.result;
        curl_multi_remove_handle(multi, h);
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    if (stopped || (x->stop != NULL && atomic_load(x->stop)))
        rc = KQ_ESTATE;
    else if (x->stalled)
        rc = KQ_ETIMEDOUT;
    else if (x->oom)
        rc = KQ_ENOMEM;
    else if (x->too_big || res == CURLE_FILESIZE_EXCEEDED)
        rc = KQ_ETOOBIG;
    else if (res == CURLE_OK || x->line_too_long || x->line_abort)
        rc = 0;
    else if (res == CURLE_OPERATION_TIMEDOUT)
        rc = KQ_ETIMEDOUT;
    else
        rc = KQ_EIO;
    if (rc != 0 && errbuf[0] == '\0')
        snprintf(errbuf, CURL_ERROR_SIZE, "%s", curl_easy_strerror(res));
out:
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    slist_free_secret(hdrs);
    free_secret(auth);
    free_secret(auth2);
    free_secret(tok);
    free(ct);
    free(url);
    return rc;
}

/* Where a request runs: a pooled easy handle (NULL channel), or a thread's own easy and
 * multi handles that another thread can interrupt through stop + curl_multi_wakeup. */
typedef struct chan {
    CURL *easy;
    CURLM *multi;
    const atomic_bool *stop;
} chan_t;

static int request_on(kq_kube_t *k, const chan_t *ch, const char *method, const char *path,
                      const char *content_type, const char *body, kq_kube_resp_t *resp,
                      char *err, size_t errlen)
{
    char errbuf[CURL_ERROR_SIZE];
    long status = 0;
    if (k == NULL || method == NULL || path == NULL || path[0] != '/' || resp == NULL)
        return KQ_EINVAL;
    CURL *h = ch != NULL ? ch->easy : pool_get(k);
    if (h == NULL)
        return KQ_ENOMEM;
    xfer_t x = {.max = k->opts.max_response, .stop = ch != NULL ? ch->stop : NULL};
    int rc = perform(k, h, ch != NULL ? ch->multi : NULL, method, path, content_type, body,
                     k->opts.request_timeout_ms, &x, &status, errbuf);
    if (ch == NULL)
        pool_put(k, h);
    if (rc == KQ_ESTATE) {
        buf_free(&x.body);
        return rc;
    }
    if (rc != 0) {
        kq_errf(err, errlen, "%s (%s)", kq_strerror(rc), errbuf);
        KQ_LOG(ch == NULL ? KQ_LOG_WARN : KQ_LOG_DEBUG,
               "kube: request failed method=%s path=%s error=\"%s\" detail=\"%s\"", method, path,
               kq_strerror(rc), errbuf);
        buf_free(&x.body);
        return rc;
    }
    if (x.body.p == NULL && (x.body.p = strdup("")) == NULL)
        return KQ_ENOMEM;
    resp->status = status;
    resp->body = x.body.p;
    resp->len = x.body.n;
    return 0;
}

int kq_kube_request(kq_kube_t *k, const char *method, const char *path, const char *content_type,
                    const char *body, kq_kube_resp_t *resp)
{
    return request_on(k, NULL, method, path, content_type, body, resp, NULL, 0);
}

/* ======================================================================================
 * pods: bind, get, evict
 * ====================================================================================== */

static char *pod_path(const char *ns, const char *name, const char *sub)
{
    char *ens = url_escape(ns), *ename = url_escape(name), *out = NULL;
    if (ens != NULL && ename != NULL &&
        asprintf(&out, "/api/v1/namespaces/%s/pods/%s%s%s", ens, ename, sub ? "/" : "",
                 sub ? sub : "") < 0)
        out = NULL;
    free(ens);
    free(ename);
    return out;
}

/* Sends body (method, content type) to path and maps the answer: 2xx -> 0, 404 -> ENOENT,
 * conflict_status -> ECONFLICT, others -> EHTTP; err gets the Status message. */
static int send_mapped(kq_kube_t *k, const chan_t *ch, const char *method, const char *path,
                       const char *content_type, json_t *body, long conflict_status, const char *what,
                       char *err, size_t errlen)
{
    kq_kube_resp_t r = {0};
    char *text = json_dumps(body, JSON_COMPACT);
    if (text == NULL) {
        kq_errf(err, errlen, "out of memory");
        return KQ_ENOMEM;
    }
    char detail[CURL_ERROR_SIZE + 64] = "";
    int rc = request_on(k, ch, method, path, content_type, text, &r, detail, sizeof(detail));
    free(text);
    if (rc != 0) {
        kq_errf(err, errlen, "%s: %s", what, detail[0] ? detail : kq_strerror(rc));
        return rc == KQ_ENOMEM || rc == KQ_ETIMEDOUT || rc == KQ_ESTATE ? rc : KQ_EIO;
    }
    if (r.status >= 200 && r.status < 300) {
        rc = 0;
    } else {
        rc = r.status == 404 ? KQ_ENOENT : r.status == conflict_status ? KQ_ECONFLICT : KQ_EHTTP;
        status_message(r.status, r.body, r.len, err, errlen);
    }
    kq_kube_resp_free(&r);
    return rc;
}

static int post_mapped(kq_kube_t *k, const chan_t *ch, const char *path, json_t *body,
                       long conflict_status, const char *what, char *err, size_t errlen)
{
    return send_mapped(k, ch, "POST", path, "application/json", body, conflict_status, what, err, errlen);
}

int kq_kube_bind(kq_kube_t *k, const char *ns, const char *name, const char *uid, const char *node,
                 char *err, size_t errlen)
{
    if (k == NULL || ns == NULL || name == NULL || node == NULL) {
        kq_errf(err, errlen, "bind: missing namespace, name or node");
        return KQ_EINVAL;
    }
    char *path = pod_path(ns, name, "binding");
    json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s, s:s*}, s:{s:s, s:s, s:s}}", "kind", "Binding",
                             "apiVersion", "v1", "metadata", "name", name, "namespace", ns, "uid",
                             uid, "target", "kind", "Node", "apiVersion", "v1", "name", node);
    int rc = KQ_ENOMEM;
    if (path == NULL || body == NULL)
        kq_errf(err, errlen, "out of memory");
    else
        rc = post_mapped(k, NULL, path, body, 409, "bind", err, errlen);
    if (rc != 0 && rc != KQ_ENOMEM)
        kq_info("kube: bind failed pod=%s/%s node=%s error=%s", ns, name, node, kq_strerror(rc));
    json_decref(body);
    free(path);
    return rc;
}

int kq_kube_evict(kq_kube_t *k, const char *ns, const char *name, char *err, size_t errlen)
{
    if (k == NULL || ns == NULL || name == NULL) {
        kq_errf(err, errlen, "evict: missing namespace or name");
        return KQ_EINVAL;
    }
    char *path = pod_path(ns, name, "eviction");
    json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1", "kind",
                             "Eviction", "metadata", "name", name, "namespace", ns);
    int rc = KQ_ENOMEM;
    if (path == NULL || body == NULL)
        kq_errf(err, errlen, "out of memory");
    else
        rc = post_mapped(k, NULL, path, body, 429, "evict", err, errlen);
    json_decref(body);
    free(path);
    return rc;
}

int kq_kube_get_pod(kq_kube_t *k, const char *ns, const char *name, json_t **out)
{
    if (k == NULL || ns == NULL || name == NULL || out == NULL)
        return KQ_EINVAL;
    char *path = pod_path(ns, name, NULL);
    if (path == NULL)
        return KQ_ENOMEM;
    kq_kube_resp_t r = {0};
    int rc = kq_kube_request(k, "GET", path, NULL, NULL, &r);
    free(path);
    if (rc != 0)
        return rc;
    if (r.status == 200) {
        json_error_t je;
        json_t *j = json_loadb(r.body, r.len, 0, &je);
        if (json_is_object(j)) {
            *out = j;
            rc = 0;
        } else {
            json_decref(j);
            kq_warn("kube: pod response is not a JSON object pod=%s/%s", ns, name);
            rc = KQ_EPARSE;
        }
    } else {
        rc = r.status == 404 ? KQ_ENOENT : KQ_EHTTP;
    }
    kq_kube_resp_free(&r);
    return rc;
}

/* ======================================================================================
 * events
 *
 * Aggregated like client-go's recorder (k8s.io/client-go tools/record/events_cache.go):
 * one Event object per series, i.e. per (pod uid, reason, message); a repeat raises the
 * series' count and is written as a PATCH of count and lastTimestamp on the same object,
 * at most once per event_dedup_s per series (repeats in between are counted and written
 * with the next write, or by the poster thread's periodic flush). A PATCH answered 404
 * (the Event expired, its TTL is an hour) creates the object again with the count so far.
 * Series unseen for SERIES_TTL_S are forgotten (oldest first: a repeat moves its series to
 * the tail of the insertion-ordered hash).
 * ====================================================================================== */

#define SERIES_TTL_S 600

static void ev_item_free(ev_item_t *e)
{
    if (e == NULL)
        return;
    free(e->ns);
    free(e->pod);
    free(e->uid);
    free(e->type);
    free(e->reason);
    free(e->message);
    free(e->key);
    free(e->name);
    free(e->akey);
    free(e->aval);
    free(e);
}

/* Copy of s cut to at most max bytes, not inside a UTF-8 sequence. */
static char *dup_cut(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    return strndup(s, n);
}

static void series_free(dedup_t *d)
{
    if (d == NULL)
        return;
    free(d->ns);
    free(d->pod);
    free(d->uid);
    free(d->type);
    free(d->reason);
    free(d->message);
    free(d);
}

/* Least time between two writes of one series, in seconds. */
static double series_window(const kq_kube_t *k)
{
    return k->opts.event_update_ms > 0 ? (double)k->opts.event_update_ms / 1000.0 : (double)k->opts.event_dedup_s;
}

static void fmt_ts(time_t t, char *ts, size_t len)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* PATCH (merge) of count and lastTimestamp; 0, KQ_ENOENT when the Event is gone. */
static int event_patch(kq_kube_t *k, const chan_t *ch, const ev_item_t *e, char *err, size_t errlen)
{
    char last[32];
    fmt_ts(e->when, last, sizeof(last));
    json_t *body = json_pack("{s:I, s:s}", "count", (json_int_t)e->count, "lastTimestamp", last);
    char *path = NULL, *ens = url_escape(e->ns), *ename = url_escape(e->name);
    if (ens != NULL && ename != NULL && asprintf(&path, "/api/v1/namespaces/%s/events/%s", ens, ename) < 0)
        path = NULL;
    int rc = KQ_ENOMEM;
    if (body != NULL && path != NULL)
        rc = send_mapped(k, ch, "PATCH", path, "application/merge-patch+json", body, 409, "event", err, errlen);
    json_decref(body);
    free(path);
    free(ens);
    free(ename);
    return rc;
}

static int event_create(kq_kube_t *k, const chan_t *ch, const ev_item_t *e, char *err, size_t errlen)
{
    char first[32], last[32];
    fmt_ts(e->first, first, sizeof(first));
    fmt_ts(e->when, last, sizeof(last));
    bool use_name = strlen(e->name) <= 253;
    json_t *body = json_pack(
        "{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s*}, s:s, s:s, s:s, s:{s:s}, s:s, s:s,"
        " s:I, s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", use_name ? "name" : "generateName",
        use_name ? e->name : "kubequota-", "namespace", e->ns, "involvedObject", "kind", "Pod",
        "apiVersion", "v1", "name", e->pod, "namespace", e->ns, "uid", e->uid, "reason", e->reason,
        "message", e->message, "type", e->type, "source", "component", "kubequota",
        "firstTimestamp", first, "lastTimestamp", last, "count", (json_int_t)e->count, "reportingComponent",
        "kubequota");
    char *path = NULL, *ens = url_escape(e->ns);
    if (ens != NULL && asprintf(&path, "/api/v1/namespaces/%s/events", ens) < 0)
        path = NULL;
    int rc = KQ_ENOMEM;
    if (body != NULL && path != NULL)
        rc = send_mapped(k, ch, "POST", path, "application/json", body, 409, "event", err, errlen);
    if (rc == KQ_ECONFLICT) /* already there (a retried create): the series exists */
        rc = 0;
    json_decref(body);
    free(path);
    free(ens);
    return rc;
}

/* True when the API server has the pod e names, with e's uid. */
static bool event_pod_exists(kq_kube_t *k, const chan_t *ch, const ev_item_t *e)
{
    char *path = pod_path(e->ns, e->pod, NULL);
    kq_kube_resp_t r = {0};
    bool ok = false;
    if (path != NULL && request_on(k, ch, "GET", path, NULL, NULL, &r, NULL, 0) == 0 && r.status == 200) {
        json_t *j = json_loadb(r.body, r.len, 0, NULL);
        const char *uid = json_string_value(json_object_get(json_object_get(j, "metadata"), "uid"));
        ok = uid != NULL && (e->uid == NULL || strcmp(uid, e->uid) == 0);
        json_decref(j);
    }
    kq_kube_resp_free(&r);
    free(path);
    return ok;
}

/* The merge PATCH of kq_kube_pod_annotate: metadata.uid is sent too, so that the API
 * server refuses it (409) for another pod of the same name. */
static void annotate_post(kq_kube_t *k, const chan_t *ch, const ev_item_t *e)
{
    char err[256] = "";
    json_t *body = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "uid", e->uid, "annotations", e->akey, e->aval);
    char *path = pod_path(e->ns, e->pod, NULL);
    int rc = KQ_ENOMEM;
    if (body != NULL && path != NULL)
        rc = send_mapped(k, ch, "PATCH", path, "application/merge-patch+json", body, 409, "pod annotation", err,
                         sizeof(err));
    json_decref(body);
    free(path);
    pthread_mutex_lock(&k->ev_lock);
    if (rc == 0)
        k->annotated++;
    else if (rc != KQ_ESTATE)
        k->annotate_failed++;
    unsigned long failed = k->annotate_failed;
    pthread_mutex_unlock(&k->ev_lock);
    if (rc == 0)
        kq_debug("kube: pod annotated pod=%s/%s uid=%s key=%s value=%s", e->ns, e->pod, e->uid, e->akey, e->aval);
    else if (rc == KQ_ENOENT || rc == KQ_ECONFLICT) /* gone, or another pod of that name now */
        kq_debug("kube: pod not annotated pod=%s/%s uid=%s key=%s error=\"%s\"", e->ns, e->pod, e->uid, e->akey,
                 err[0] ? err : kq_strerror(rc));
    else if (rc != KQ_ESTATE && (failed < 10 || failed % 100 == 0))
        kq_warn("kube: pod not annotated pod=%s/%s key=%s error=\"%s\" failures=%lu", e->ns, e->pod, e->akey,
                err[0] ? err : kq_strerror(rc), failed);
}

static void event_post(kq_kube_t *k, const chan_t *ch, const ev_item_t *e)
{
    char err[256] = "";
    if (e->akey != NULL) {
        annotate_post(k, ch, e);
        return;
    }
    if (e->confirm && !e->patch && !event_pod_exists(k, ch, e)) {
        /* not about a real pod: counted as dropped, and its series goes so that it cannot
         * hide a real pod's event */
        kq_debug("kube: event not posted pod=%s/%s reason=%s msg=\"the API server has no such pod\"", e->ns,
                 e->pod, e->reason);
        pthread_mutex_lock(&k->ev_lock);
        k->suppressed++;
        dedup_t *d = NULL;
        HASH_FIND_STR(k->dedup, e->key, d);
        if (d != NULL) {
            HASH_DEL(k->dedup, d);
            k->ndedup--;
            series_free(d);
        }
        pthread_mutex_unlock(&k->ev_lock);
        return;
    }
    int rc = e->patch ? event_patch(k, ch, e, err, sizeof(err)) : event_create(k, ch, e, err, sizeof(err));
    if (rc == KQ_ENOENT && e->patch)
        rc = event_create(k, ch, e, err, sizeof(err));
    pthread_mutex_lock(&k->ev_lock);
    if (rc == 0)
        k->posted++;
    else if (rc != KQ_ESTATE)
        k->failed++;
    unsigned long failed = k->failed;
    dedup_t *d = NULL;
    HASH_FIND_STR(k->dedup, e->key, d);
    if (d != NULL) {
        d->queued = false;
        if (rc == 0 && e->count > d->written)
            d->written = e->count;
    }
    pthread_mutex_unlock(&k->ev_lock);
    if (rc != 0 && rc != KQ_ESTATE && (failed < 10 || failed % 100 == 0)) /* a failing API server: don't flood */
        kq_warn("kube: event not posted pod=%s/%s reason=%s error=\"%s\" failures=%lu", e->ns,
                e->pod, e->reason, err[0] ? err : kq_strerror(rc), failed);
}

/* An item for series d (ev_lock held). NULL on ENOMEM. */
static ev_item_t *series_item(const dedup_t *d, bool patch, bool confirm, time_t when)
{
    ev_item_t *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->patch = patch;
    e->confirm = confirm;
    e->count = d->count;
    e->first = d->first;
    e->when = when;
    if ((e->ns = strdup(d->ns)) == NULL || (e->pod = strdup(d->pod)) == NULL ||
        (d->uid != NULL && (e->uid = strdup(d->uid)) == NULL) || (e->type = strdup(d->type)) == NULL ||
        (e->reason = strdup(d->reason)) == NULL || (e->message = strdup(d->message)) == NULL ||
        (e->key = strdup(d->key)) == NULL || (e->name = strdup(d->name)) == NULL) {
        ev_item_free(e);
        return NULL;
    }
    return e;
}

/* Refills the token bucket; true when a write may be queued now: a token, room in the
 * ring, and the poster thread running (started here on first use). ev_lock held. */
static bool ring_room(kq_kube_t *k, double now)
{
    k->tokens += (now - k->refill_at) * k->opts.event_rate;
    if (k->tokens > k->opts.event_burst)
        k->tokens = k->opts.event_burst;
    k->refill_at = now;
    if (k->tokens < 1.0 || k->ring_count >= k->opts.event_queue || k->ev_stop)
        return false;
    if (!k->ev_started && k->ev_easy != NULL && k->ev_multi != NULL &&
        pthread_create(&k->ev_thread, NULL, event_main, k) == 0)
        k->ev_started = true;
    return k->ev_started;
}

/* Spends a token and queues e (ring_room said yes; ev_lock held). */
static void ring_push(kq_kube_t *k, ev_item_t *e)
{
    k->tokens -= 1.0;
    k->ring[(k->ring_head + k->ring_count) % k->opts.event_queue] = e;
    k->ring_count++;
    pthread_cond_signal(&k->ev_cond);
}

/* Queues a write of series d if the bucket and the ring allow (ev_lock held). */
static bool series_queue(kq_kube_t *k, dedup_t *d, bool patch, bool confirm, double now)
{
    if (!ring_room(k, now))
        return false;
    /* The same clock as the series' firstTimestamp: time() reads the coarse clock, which can
     * still show the previous second and would write lastTimestamp before firstTimestamp. */
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    ev_item_t *e = series_item(d, patch, confirm, rt.tv_sec < d->first ? d->first : rt.tv_sec);
    if (e == NULL)
        return false;
    ring_push(k, e);
    d->queued = true;
    d->at = now;
    return true;
}

/* Writes the counts of series that rose since their last write and whose window has passed
 * (ev_lock held; poster thread, about once a second). */
static void series_flush(kq_kube_t *k, double now)
{
    dedup_t *d, *tmp;
    HASH_ITER(hh, k->dedup, d, tmp) {
        if (d->count > d->written && !d->queued && d->written > 0 && now - d->at >= series_window(k))
            (void)series_queue(k, d, true, false, now);
    }
}

static void *event_main(void *arg)
{
    kq_kube_t *k = arg;
    chan_t ch = {k->ev_easy, k->ev_multi, &k->ev_abort};
    pthread_mutex_lock(&k->ev_lock);
    while (!k->ev_stop) {
        if (k->ring_count == 0) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            if (pthread_cond_timedwait(&k->ev_cond, &k->ev_lock, &until) == ETIMEDOUT)
                series_flush(k, mono_now());
            continue;
        }
        ev_item_t *e = k->ring[k->ring_head];
        k->ring[k->ring_head] = NULL;
        k->ring_head = (k->ring_head + 1) % k->opts.event_queue;
        k->ring_count--;
        pthread_mutex_unlock(&k->ev_lock);
        event_post(k, &ch, e);
        ev_item_free(e);
        pthread_mutex_lock(&k->ev_lock);
    }
    pthread_mutex_unlock(&k->ev_lock);
    return NULL;
}

/* Forgets series unseen for SERIES_TTL_S (the least recently seen sit at the head), and
 * the oldest beyond DEDUP_MAX. */
static void dedup_prune(kq_kube_t *k, double now)
{
    dedup_t *d, *tmp;
    HASH_ITER(hh, k->dedup, d, tmp) {
        if ((now - d->seen < SERIES_TTL_S && k->ndedup <= DEDUP_MAX) || d->queued)
            break;
        HASH_DEL(k->dedup, d);
        k->ndedup--;
        series_free(d);
    }
}

#define EVQ_CONFIRM 1u /* kq_kube_event_confirmed */
#define EVQ_NOTICE 2u  /* kq_kube_event_notice: a Warning that is no denial */
static void event_queue(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid,
                        const char *type, const char *reason, const char *message, unsigned flags);

void kq_kube_event(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid,
                   const char *type, const char *reason, const char *message)
{
    event_queue(k, ns, pod_name, pod_uid, type, reason, message, 0);
}

void kq_kube_event_confirmed(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid,
                             const char *type, const char *reason, const char *message)
{
    event_queue(k, ns, pod_name, pod_uid, type, reason, message, EVQ_CONFIRM);
}

void kq_kube_event_notice(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid, const char *reason,
                          const char *message)
{
    event_queue(k, ns, pod_name, pod_uid, "Warning", reason, message, EVQ_NOTICE);
}

static void event_queue(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid,
                        const char *type, const char *reason, const char *message, unsigned flags)
{
    bool confirm = (flags & EVQ_CONFIRM) != 0;
    if (k == NULL || pod_name == NULL || reason == NULL)
        return;
    if (ns == NULL || ns[0] == '\0')
        ns = "default";
    if (type == NULL)
        type = "Normal";
    if (message == NULL)
        message = "";
    const char *id = pod_uid != NULL ? pod_uid : pod_name;
    size_t klen = strlen(id) + strlen(reason) + strlen(message) + 3;
    char *key = malloc(klen);
    if (key == NULL)
        goto fail;
    snprintf(key, klen, "%s\x1f%s\x1f%s", id, reason, message);

    pthread_mutex_lock(&k->ev_lock);
    double now = mono_now();
    dedup_prune(k, now);
    dedup_t *d = NULL;
    HASH_FIND_STR(k->dedup, key, d);
    if (d != NULL) { /* a repeat: count it, move it to the tail, write when the window allows */
        d->count++;
        d->seen = now;
        HASH_DEL(k->dedup, d);
        HASH_ADD_STR(k->dedup, key, d);
        bool queued = !d->queued && d->written > 0 && now - d->at >= series_window(k) &&
                      series_queue(k, d, true, false, now);
        if (!queued)
            k->suppressed++;
        pthread_mutex_unlock(&k->ev_lock);
        free(key);
        return;
    }
    pthread_mutex_unlock(&k->ev_lock);

    /* a new series: built outside the lock */
    d = calloc(1, sizeof(*d) + klen);
    if (d == NULL)
        goto fail;
    memcpy(d->key, key, klen);
    free(key);
    key = NULL;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    d->first = rt.tv_sec;
    d->count = 1;
    snprintf(d->name, sizeof(d->name), "%.235s.%llx", pod_name,
             (unsigned long long)rt.tv_sec * 1000000000ull + (unsigned long long)rt.tv_nsec);
    if ((d->ns = strdup(ns)) == NULL || (d->pod = strdup(pod_name)) == NULL || !dup_field(&d->uid, pod_uid) ||
        (d->type = strdup(type)) == NULL || (d->reason = dup_cut(reason, EVENT_REASON_MAX)) == NULL ||
        (d->message = dup_cut(message, EVENT_MSG_MAX)) == NULL) {
        series_free(d);
        goto fail;
    }
    pthread_mutex_lock(&k->ev_lock);
    now = mono_now();
    dedup_t *raced = NULL;
    HASH_FIND_STR(k->dedup, d->key, raced);
    bool queued = false;
    if (raced == NULL && series_queue(k, d, false, confirm, now)) {
        if (pod_uid != NULL && strcmp(type, "Warning") == 0 && !(flags & EVQ_NOTICE))
            warned_note(k, pod_uid, now);
        d->seen = now;
        d->written = 0; /* set by the poster once created */
        HASH_ADD_STR(k->dedup, key, d);
        k->ndedup++;
        queued = true;
    } else if (raced != NULL) {
        raced->count++;
        raced->seen = now;
    }
    if (!queued)
        k->suppressed++;
    pthread_mutex_unlock(&k->ev_lock);
    if (!queued)
        series_free(d);
    return;
fail:
    free(key);
    pthread_mutex_lock(&k->ev_lock);
    k->suppressed++;
    pthread_mutex_unlock(&k->ev_lock);
}

/* Remembers that pod uid got a Warning (ev_lock held); the oldest beyond DEDUP_MAX or
 * older than SERIES_TTL_S are forgotten. */
static void warned_note(kq_kube_t *k, const char *uid, double now)
{
    warned_t *w, *tmp;
    HASH_ITER(hh, k->warned, w, tmp) {
        if (now - w->at < SERIES_TTL_S && k->nwarned < DEDUP_MAX)
            break;
        HASH_DEL(k->warned, w);
        k->nwarned--;
        free(w);
    }
    HASH_FIND_STR(k->warned, uid, w);
    if (w != NULL) {
        HASH_DEL(k->warned, w);
        w->at = now;
        HASH_ADD_STR(k->warned, uid, w);
        return;
    }
    size_t n = strlen(uid) + 1;
    if ((w = malloc(sizeof(*w) + n)) == NULL)
        return;
    memcpy(w->uid, uid, n);
    w->at = now;
    HASH_ADD_STR(k->warned, uid, w);
    k->nwarned++;
}

void kq_kube_event_admitted(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid,
                            const char *reason, const char *message)
{
    if (k == NULL || pod_uid == NULL)
        return;
    pthread_mutex_lock(&k->ev_lock);
    warned_t *w = NULL;
    HASH_FIND_STR(k->warned, pod_uid, w);
    if (w != NULL) {
        HASH_DEL(k->warned, w);
        k->nwarned--;
    }
    pthread_mutex_unlock(&k->ev_lock);
    if (w == NULL)
        return;
    free(w);
    event_queue(k, ns, pod_name, pod_uid, "Normal", reason, message, 0);
}

bool kq_kube_pod_annotate(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid, const char *key,
                          const char *value)
{
    if (k == NULL || ns == NULL || pod_name == NULL || pod_uid == NULL || key == NULL || value == NULL)
        return false;
    ev_item_t *e = calloc(1, sizeof(*e)); /* built outside the lock */
    if (e == NULL || (e->ns = strdup(ns)) == NULL || (e->pod = strdup(pod_name)) == NULL ||
        (e->uid = strdup(pod_uid)) == NULL || (e->akey = strdup(key)) == NULL || (e->aval = strdup(value)) == NULL) {
        ev_item_free(e);
        return false;
    }
    pthread_mutex_lock(&k->ev_lock);
    bool ok = ring_room(k, mono_now());
    if (ok)
        ring_push(k, e);
    pthread_mutex_unlock(&k->ev_lock);
    if (!ok)
        ev_item_free(e);
    return ok;
}

void kq_kube_annotate_stats(kq_kube_t *k, unsigned long *done, unsigned long *failed)
{
    pthread_mutex_lock(&k->ev_lock);
    if (done != NULL)
        *done = k->annotated;
    if (failed != NULL)
        *failed = k->annotate_failed;
    pthread_mutex_unlock(&k->ev_lock);
}

void kq_kube_event_stats(kq_kube_t *k, unsigned long *posted, unsigned long *suppressed)
{
    pthread_mutex_lock(&k->ev_lock);
    if (posted != NULL)
        *posted = k->posted;
    if (suppressed != NULL)
        *suppressed = k->suppressed;
    pthread_mutex_unlock(&k->ev_lock);
}

void kq_kube_free(kq_kube_t *k)
{
    if (k == NULL)
        return;
    pthread_mutex_lock(&k->ev_lock);
    k->ev_stop = true;
    bool started = k->ev_started;
    pthread_cond_signal(&k->ev_cond);
    pthread_mutex_unlock(&k->ev_lock);
    atomic_store(&k->ev_abort, true);
    if (k->ev_multi != NULL)
        curl_multi_wakeup(k->ev_multi);
    if (started)
        pthread_join(k->ev_thread, NULL);
    if (k->ev_easy != NULL)
        curl_easy_cleanup(k->ev_easy);
    if (k->ev_multi != NULL)
        curl_multi_cleanup(k->ev_multi);
    for (size_t i = 0; i < k->ring_count; i++)
        ev_item_free(k->ring[(k->ring_head + i) % k->opts.event_queue]);
    if (k->ring_count > 0)
        kq_info("kube: events dropped at shutdown count=%zu", k->ring_count);
    free(k->ring);
    dedup_t *d, *tmp;
    HASH_ITER(hh, k->dedup, d, tmp) {
        HASH_DEL(k->dedup, d);
        series_free(d);
    }
    warned_t *w, *wtmp;
    HASH_ITER(hh, k->warned, w, wtmp) {
        HASH_DEL(k->warned, w);
        free(w);
    }
    for (int i = 0; i < k->npool; i++)
        curl_easy_cleanup(k->pool[i]);
    pthread_mutex_destroy(&k->pool_lock);
    pthread_mutex_destroy(&k->ev_lock);
    pthread_cond_destroy(&k->ev_cond);
    kq_kube_conf_free(&k->conf);
    free(k);
}

/* ======================================================================================
 * informer: list + watch
 * ====================================================================================== */

struct kq_watch {
    kq_kube_t *k;
    char *path, *query;
    kq_watch_handler_t h;
    pthread_t thread;
    CURLM *multi;
    CURL *easy;
    atomic_bool stop, synced;
    atomic_ulong restarts;
    pthread_mutex_t lock; /* with cond: only for interruptible sleeps */
    pthread_cond_t cond;
    /* watch thread only */
    char *rv;
    kq_jfilter_t env[3];    /* what a watch line is built of: type, and object with h.keep */
    kq_jdoc_t doc;          /* h.doc handlers: the current line or list item, decoded */
    unsigned long events;   /* events (incl. bookmarks) in the current stream */
    int outcome;            /* what a stream line asked for */
    uint64_t rnd;
};

enum { W_STOP = 1, W_EOF, W_RELIST, W_ERROR };

/* Sleeps ms unless stopped first; false when stopped. */
static bool watch_sleep(kq_watch_t *w, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    kq_timespec_add_ms(&ts, ms);
    pthread_mutex_lock(&w->lock);
    while (!atomic_load(&w->stop))
        if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&w->lock);
    return !atomic_load(&w->stop);
}

/* Capped exponential backoff with jitter: a delay in [d/2, d], d = min * 2^fails. */
static bool watch_backoff(kq_watch_t *w, unsigned *fails)
{
    long d = w->k->opts.backoff_min_ms;
    for (unsigned i = 0; i < *fails && d < w->k->opts.backoff_max_ms; i++)
        d *= 2;
    if (d > w->k->opts.backoff_max_ms)
        d = w->k->opts.backoff_max_ms;
    if (*fails < 64)
        (*fails)++;
    w->rnd ^= w->rnd << 13;
    w->rnd ^= w->rnd >> 7;
    w->rnd ^= w->rnd << 17;
    long half = d / 2;
    long ms = half + (half > 0 ? (long)(w->rnd % (uint64_t)(half + 1)) : 0);
    kq_debug("kube: watch backoff path=%s delay_ms=%ld", w->path, ms);
    return watch_sleep(w, ms);
}

static void set_rv(kq_watch_t *w, const char *rv)
{
    if (rv == NULL || rv[0] == '\0')
        return;
    char *c = strdup(rv);
    if (c == NULL)
        return; /* keep the older one: a re-watch from it is still correct */
    free(w->rv);
    w->rv = c;
}

/* "path?query&extra" */
static char *build_url(const kq_watch_t *w, const char *extra)
{
    char *out = NULL;
    bool has_q = strchr(w->path, '?') != NULL;
    bool q = w->query != NULL && w->query[0] != '\0';
    if (asprintf(&out, "%s%s%s%s%s", w->path, has_q ? "&" : "?", q ? w->query : "", q ? "&" : "",
                 extra) < 0)
        return NULL;
    return out;
}

/* One paginated list. 0 listed; KQ_EGONE continue token expired after progress; KQ_ESTATE
 * stopped; other negative: failed. */
static int do_list(kq_watch_t *w)
{
    kq_kube_t *k = w->k;
    char *cont = NULL, *rv = NULL, *url = NULL, *extra = NULL;
    char errbuf[CURL_ERROR_SIZE];
    bool begun = false;
    int rc = 0;
    /* A page larger than max_response (pods of ~1.4 MB each are allowed by etcd: 190 of
     * them overflow 256 MiB) is asked for again with half the limit, down to one object,
     * and the limit grows back by doubling after each page that fit: the memory of a page
     * stays bounded and the list always completes. */
    int limit = k->opts.list_page_size > 0 ? k->opts.list_page_size : 500;
    for (;;) {
        char *econt = cont ? url_escape(cont) : NULL;
        if ((cont && !econt) || asprintf(&extra, "limit=%d%s%s", limit,
                                         cont ? "&continue=" : "", cont ? econt : "") < 0) {
            extra = NULL;
            free(econt);
            rc = KQ_ENOMEM;
            goto out;
        }
        free(econt);
        url = build_url(w, extra);
        free(extra);
        extra = NULL;
        if (url == NULL) {
            rc = KQ_ENOMEM;
            goto out;
        }
        xfer_t x = {.max = k->opts.max_response, .stop = &w->stop, .bulk = true};
        long status = 0;
        rc = perform(k, w->easy, w->multi, "GET", url, NULL, NULL, k->opts.request_timeout_ms, &x,
                     &status, errbuf);
        if (rc == KQ_ETOOBIG && limit > 1) {
            buf_free(&x.body);
            free(url);
            url = NULL;
            limit = limit / 2;
            kq_warn("kube: list page larger than %zu bytes, asking again for %d objects path=%s",
                    k->opts.max_response, limit, w->path);
            continue;
        }
        if (rc != 0) {
            if (rc != KQ_ESTATE)
                kq_warn("kube: list failed path=%s error=\"%s\" detail=\"%s\"", w->path,
                        kq_strerror(rc), errbuf);
            buf_free(&x.body);
            goto out;
        }
        if (status != 200) {
            char msg[256];
            status_message(status, x.body.p, x.body.n, msg, sizeof(msg));
            kq_warn("kube: list failed path=%s status=%ld message=\"%s\"", w->path, status, msg);
            buf_free(&x.body);
            rc = status == 410 && begun ? KQ_EGONE : KQ_EHTTP;
            goto out;
        }
        /* One pass validates the page and finds items and metadata; each item is then
         * built alone, with only what the handler keeps (a 500-pod page as one jansson
         * tree is ~75,000 allocations, most of them fields nobody reads). */
        static const char *const list_keys[] = {"items", "metadata"};
        kq_jvalue_t lv[2];
        kq_jscan_error_t je;
        int jrc = kq_jscan_object_find(x.body.p, x.body.n, KQ_JSCAN_JANSSON, list_keys, 2, lv, &je);
        if (jrc != 0 || (lv[0].type != KQ_JNONE && lv[0].type != KQ_JARRAY && lv[0].type != KQ_JNULL)) {
            if (jrc == KQ_EPARSE)
                kq_warn("kube: list response is not JSON path=%s line=%d column=%d error=\"%s\"", w->path,
                        je.line, je.column, je.text);
            else
                kq_warn("kube: list response is not a list path=%s error=\"%s\"", w->path,
                        jrc != 0 ? "not an object" : "no items array");
            buf_free(&x.body);
            rc = KQ_EPARSE;
            goto out;
        }
        json_t *meta = NULL;
        if (lv[1].type == KQ_JOBJECT && kq_jscan_json(lv[1].ptr, lv[1].len, &meta, NULL) != 0) {
            buf_free(&x.body);
            rc = KQ_ENOMEM;
            goto out;
        }
        if (!begun) {
            begun = true;
            if (w->h.list_begin != NULL)
                w->h.list_begin(w->h.ud);
        }
        if (lv[0].type == KQ_JARRAY && (w->h.object != NULL || w->h.doc != NULL)) {
            kq_jscan_iter_t it;
            kq_jvalue_t item;
            int more_items;
            if (kq_jscan_iter_begin(&it, lv[0].ptr, lv[0].len, KQ_JSCAN_JANSSON, NULL) != 0)
                more_items = -1;
            else if (w->h.doc != NULL)
                while ((more_items = kq_jscan_iter_next_doc(&it, w->h.keep, &item, &w->doc, NULL)) == 1) {
                    if (item.type == KQ_JOBJECT)
                        w->h.doc(w->h.ud, KQ_WATCH_ADDED, kq_jdoc_root(&w->doc));
                    kq_jdoc_trim(&w->doc, DOC_KEEP_MAX);
                }
            else
                for (json_t *obj = NULL; (more_items = kq_jscan_iter_next_json(&it, w->h.keep, &item, &obj, NULL)) == 1;
                     obj = NULL) {
                    if (item.type == KQ_JOBJECT)
                        w->h.object(w->h.ud, KQ_WATCH_ADDED, obj);
                    json_decref(obj);
                }
            if (more_items != 0) { /* the page was validated: only memory can fail here */
                json_decref(meta);
                buf_free(&x.body);
                rc = KQ_ENOMEM;
                goto out;
            }
        }
        buf_free(&x.body);
        const char *r = jstr(meta, "resourceVersion"), *c = jstr(meta, "continue");
        free(rv);
        free(cont);
        rv = dup_or_null(r);
        cont = c != NULL && c[0] != '\0' ? strdup(c) : NULL;
        bool more = c != NULL && c[0] != '\0';
        json_decref(meta);
        free(url);
        url = NULL;
        if ((r != NULL && rv == NULL) || (more && cont == NULL)) {
            rc = KQ_ENOMEM;
            goto out;
        }
        if (!more)
            break;
        if (limit < k->opts.list_page_size) /* it fit: grow back towards the configured size */
            limit = limit * 2 < k->opts.list_page_size ? limit * 2 : k->opts.list_page_size;
        if (atomic_load(&w->stop)) {
            rc = KQ_ESTATE;
            goto out;
        }
    }
    if (rv == NULL || rv[0] == '\0')
        kq_warn("kube: list has no resourceVersion path=%s", w->path);
    free(w->rv);
    w->rv = rv;
    rv = NULL;
    if (w->h.list_end != NULL)
        w->h.list_end(w->h.ud);
    atomic_store(&w->synced, true);
    rc = 0;
out:
    free(url);
    free(rv);
    free(cont);
    return rc;
}

/* One watch event line. Nonzero ends the stream (w->outcome says why). The line is
 * validated and decoded in one pass (into w->doc for a doc handler, else as a jansson
 * tree), of the object only what the handler keeps; an ERROR event's Status is rebuilt
 * whole (rare). */
static int watch_line(void *ud, const char *line, size_t len)
{
    kq_watch_t *w = ud;
    json_t *ev = NULL, *obj = NULL;
    const kq_jnode_t *node = NULL;
    const char *type, *rv = NULL;
    bool is_object;
    kq_jscan_error_t je;
    int jrc;
    if (w->h.doc != NULL) {
        jrc = kq_jdoc_parse(&w->doc, line, len, w->env, &je);
        const kq_jnode_t *root = kq_jdoc_root(&w->doc);
        type = kq_jnode_string(kq_jnode_get(root, "type"));
        node = kq_jnode_get(root, "object");
        is_object = node != NULL && node->type == KQ_JOBJECT;
        if (is_object)
            rv = kq_jnode_string(kq_jnode_get(kq_jnode_get(node, "metadata"), "resourceVersion"));
    } else {
        jrc = kq_jscan_json_filtered(line, len, w->env, &ev, &je);
        type = jstr(ev, "type");
        obj = json_object_get(ev, "object");
        is_object = json_is_object(obj);
        if (is_object)
            rv = jstr(json_object_get(obj, "metadata"), "resourceVersion");
    }
    if (jrc != 0 || type == NULL || !is_object) {
        if (jrc == KQ_EPARSE)
            kq_warn("kube: bad watch event path=%s column=%d error=\"%s\"", w->path, je.column, je.text);
        else if (jrc != 0)
            kq_warn("kube: out of memory decoding a watch event path=%s", w->path);
        else
            kq_warn("kube: bad watch event path=%s error=\"no type or object\"", w->path);
        json_decref(ev);
        w->outcome = W_ERROR;
        return -1;
    }
    int t = !strcmp(type, "ADDED")      ? KQ_WATCH_ADDED
            : !strcmp(type, "MODIFIED") ? KQ_WATCH_MODIFIED
            : !strcmp(type, "DELETED")  ? KQ_WATCH_DELETED
                                        : 0;
    int rc = 0;
    if (t != 0) {
        set_rv(w, rv);
        w->events++;
        if (node != NULL)
            w->h.doc(w->h.ud, t, node);
        else if (w->h.object != NULL)
            w->h.object(w->h.ud, t, obj);
    } else if (strcmp(type, "BOOKMARK") == 0) {
        set_rv(w, rv);
        w->events++;
    } else if (strcmp(type, "ERROR") == 0) {
        /* A Status, not the watched kind: rebuild it whole (the filter is the handler's). */
        static const kq_jfilter_t status_only[] = {{"object", NULL}, {NULL, NULL}};
        json_t *st = NULL;
        if ((w->h.keep != NULL || obj == NULL) && kq_jscan_json_filtered(line, len, status_only, &st, NULL) == 0)
            obj = json_object_get(st, "object");
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        const char *reason = jstr(obj, "reason"), *msg = jstr(obj, "message");
        bool gone = code == 410 || (reason && (!strcmp(reason, "Expired") || !strcmp(reason, "Gone")));
        kq_info("kube: watch error event path=%s code=%lld reason=%s message=\"%s\" action=%s",
                w->path, (long long)code, reason ? reason : "", msg ? msg : "",
                gone ? "relist" : "rewatch");
        w->outcome = gone ? W_RELIST : W_ERROR;
        json_decref(st);
        rc = -1;
    } else {
        kq_debug("kube: unknown watch event type ignored path=%s type=%s", w->path, type);
    }
    json_decref(ev);
    kq_jdoc_trim(&w->doc, DOC_KEEP_MAX);
    return rc;
}

/* The envelope filter of a watch line, from the handler's object filter. */
static void set_env(kq_watch_t *w)
{
    w->env[0] = (kq_jfilter_t){"type", NULL};
    w->env[1] = (kq_jfilter_t){"object", w->h.keep};
    w->env[2] = (kq_jfilter_t){NULL, NULL};
}

int kq_kube_watch_feed(const kq_watch_handler_t *h, const char *data, size_t len, const size_t *cuts,
                       size_t ncuts, size_t max_line)
{
    if (h == NULL || (data == NULL && len > 0) || (cuts == NULL && ncuts > 0))
        return KQ_EINVAL;
    kq_watch_t w = {.path = "(feed)", .h = *h};
    set_env(&w);
    xfer_t x = {.line_fn = watch_line, .line_ud = &w, .max_line = max_line};
    size_t at = 0;
    int r = 0;
    for (size_t i = 0; i <= ncuts && r == 0; i++) {
        size_t to = len; /* after the last cut: the rest */
        if (i < ncuts)
            to = cuts[i] > at && cuts[i] < len ? cuts[i] : at; /* an ignored cut: an empty chunk */
        r = feed_stream(&x, data + at, to - at);
        at = to;
    }
    int rc = 0;
    if (x.oom)
        rc = KQ_ENOMEM;
    else if (x.line_too_long || w.outcome == W_RELIST)
        rc = KQ_EGONE;
    else if (r != 0)
        rc = KQ_EPARSE;
    buf_free(&x.partial);
    free(w.rv);
    kq_jdoc_free(&w.doc);
    return rc;
}

static int do_watch(kq_watch_t *w)
{
    kq_kube_t *k = w->k;
    char *erv = url_escape(w->rv ? w->rv : ""), *extra = NULL, *url = NULL;
    char errbuf[CURL_ERROR_SIZE];
    int outcome = W_ERROR;
    if (erv == NULL ||
        asprintf(&extra, "watch=1&resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=%d",
                 erv, k->opts.watch_timeout_s) < 0) {
        extra = NULL;
        goto out;
    }
    if ((url = build_url(w, extra)) == NULL)
        goto out;
    xfer_t x = {.max = ERROR_BODY_MAX, .stop = &w->stop, .line_fn = watch_line, .line_ud = w,
                .max_line = k->opts.max_watch_line, .idle_max_ms = k->opts.watch_progress_ms};
    long status = 0;
    w->events = 0;
    w->outcome = 0;
    /* A stalled stream still ends: the server's timeout plus a margin. */
    long timeout_ms = ((long)k->opts.watch_timeout_s + 30) * 1000L;
    int rc = perform(k, w->easy, w->multi, "GET", url, NULL, NULL, timeout_ms, &x, &status, errbuf);
    if (rc == KQ_ESTATE) {
        outcome = W_STOP;
    } else if (x.stalled) {
        /* Silent: no event and no bookmark (the API server sends one about every minute)
         * while the connection stays open. Events may have been lost: relist. */
        kq_warn("kube: watch stalled: nothing received for %ld ms, relisting path=%s", k->opts.watch_progress_ms,
                w->path);
        outcome = W_RELIST;
    } else if (x.line_too_long) {
        kq_warn("kube: watch event line longer than %zu bytes, relisting path=%s",
                k->opts.max_watch_line, w->path);
        outcome = W_RELIST;
    } else if (w->outcome != 0) {
        outcome = w->outcome;
    } else if (rc != 0) {
        kq_warn("kube: watch failed path=%s error=\"%s\" detail=\"%s\"", w->path, kq_strerror(rc),
                errbuf);
        outcome = W_ERROR;
    } else if (status == 410) {
        kq_info("kube: watch answered 410 Gone, relisting path=%s", w->path);
        outcome = W_RELIST;
    } else if (status != 200) {
        char msg[256];
        status_message(status, x.body.p, x.body.n, msg, sizeof(msg));
        kq_warn("kube: watch failed path=%s status=%ld message=\"%s\"", w->path, status, msg);
        outcome = W_ERROR;
    } else {
        if (x.partial.n > 0)
            kq_debug("kube: watch stream ended inside a line path=%s bytes=%zu", w->path, x.partial.n);
        outcome = W_EOF;
    }
    buf_free(&x.body);
    buf_free(&x.partial);
out:
    free(erv);
    free(extra);
    free(url);
    return outcome;
}

static void *watch_main(void *arg)
{
    kq_watch_t *w = arg;
    bool need_list = true;
    unsigned fails = 0;
    while (!atomic_load(&w->stop)) {
        if (need_list) {
            int rc = do_list(w);
            if (rc == KQ_ESTATE || atomic_load(&w->stop))
                break;
            if (rc == 0) {
                need_list = false;
                continue;
            }
            atomic_fetch_add(&w->restarts, 1);
            if (rc == KQ_EGONE) {
                kq_info("kube: continue token expired, restarting the list path=%s", w->path);
                if (fails == 0) { /* made progress: retry at once, then back off */
                    fails++;
                    continue;
                }
            }
            if (!watch_backoff(w, &fails))
                break;
            continue;
        }
        int outcome = do_watch(w);
        bool progress = w->events > 0;
        if (progress)
            fails = 0;
        switch (outcome) {
        case W_STOP:
            break;
        case W_EOF: /* server timeout: resume from the last resourceVersion */
            kq_debug("kube: watch ended, resuming path=%s rv=%s", w->path, w->rv ? w->rv : "");
            if (!progress)
                (void)watch_sleep(w, w->k->opts.backoff_min_ms);
            break;
        case W_RELIST:
            atomic_fetch_add(&w->restarts, 1);
            need_list = true;
            if (!progress)
                (void)watch_backoff(w, &fails);
            break;
        default:
            atomic_fetch_add(&w->restarts, 1);
            (void)watch_backoff(w, &fails);
            break;
        }
    }
    return NULL;
}

/* An informer resumes its watch from the last object's metadata.resourceVersion: a filter
 * that drops it would make every reconnect replay history. */
static bool keeps_resource_version(const kq_jfilter_t *keep)
{
    if (keep == NULL)
        return true;
    for (const kq_jfilter_t *f = keep; f->key != NULL; f++) {
        if (strcmp(f->key, "metadata") != 0)
            continue;
        if (f->sub == NULL)
            return true;
        for (const kq_jfilter_t *g = f->sub; g->key != NULL; g++)
            if (strcmp(g->key, "resourceVersion") == 0)
                return true;
        return false;
    }
    return false;
}

kq_watch_t *kq_kube_watch_start(kq_kube_t *k, const char *path, const char *query,
                                const kq_watch_handler_t *h)
{
    if (k == NULL || path == NULL || path[0] != '/' || h == NULL)
        return NULL;
    if (!keeps_resource_version(h->keep)) {
        kq_error("kube: informer filter drops metadata.resourceVersion path=%s", path);
        return NULL;
    }
    kq_watch_t *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->lock, NULL);
    w->k = k;
    w->h = *h;
    set_env(w);
    w->path = strdup(path);
    w->query = dup_or_null(query);
    w->multi = curl_multi_init();
    w->easy = curl_easy_init();
    w->rnd = (uint64_t)(uintptr_t)w ^ (uint64_t)time(NULL) ^ 0x9E3779B97F4A7C15ull;
    atomic_init(&w->stop, false);
    atomic_init(&w->synced, false);
    atomic_init(&w->restarts, 0);
    if (w->path == NULL || (query != NULL && w->query == NULL) || w->multi == NULL || w->easy == NULL)
        goto fail;
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0)
        goto fail;
    kq_info("kube: informer started path=%s", path);
    return w;
fail:
    if (w->easy != NULL)
        curl_easy_cleanup(w->easy);
    if (w->multi != NULL)
        curl_multi_cleanup(w->multi);
    free(w->path);
    free(w->query);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w);
    return NULL;
}

void kq_kube_watch_stop(kq_watch_t *w)
{
    if (w == NULL)
        return;
    atomic_store(&w->stop, true);
    pthread_mutex_lock(&w->lock);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    curl_multi_wakeup(w->multi);
    pthread_join(w->thread, NULL);
    curl_easy_cleanup(w->easy);
    curl_multi_cleanup(w->multi);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    kq_info("kube: informer stopped path=%s restarts=%lu", w->path, atomic_load(&w->restarts));
    kq_jdoc_free(&w->doc);
    free(w->rv);
    free(w->path);
    free(w->query);
    free(w);
}

bool kq_watch_synced(kq_watch_t *w)
{
    return w != NULL && atomic_load(&w->synced);
}

unsigned long kq_watch_restarts(kq_watch_t *w)
{
    return w != NULL ? atomic_load(&w->restarts) : 0;
}
