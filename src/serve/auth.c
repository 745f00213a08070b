/* Access control for the usage view: client certificates, a static bearer token from a
 * file, or Kubernetes TokenReview + SubjectAccessReview (see auth.h).
 *
 * DESIGN: one mutex guards the loaded token (with the file identity it came from), the
 * review cache and the rejection budgets (by source and global). kq_auth_check copies what it needs under the lock, releases it, and only
 * then talks to the API server; the answer is stored under the lock again. Two requests
 * with the same new token may both ask the API server once; that is harmless and keeps
 * the lock off the network path.
 */
#include "kubequota/serve/auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <uthash.h>

#include "kubequota/base/log.h"

#define TOKEN_MAX 16384     /* longest token accepted in a file or a header */
#define CACHE_MAX 4096      /* cached reviews; the cache is emptied when full */
#define DENY_CACHE_SECONDS 10
/* Rejected tokens, by source (issue 29): a flood of random tokens must not turn into a
 * flood of reviews against the API server, nor hold every worker waiting for one, but it
 * must not lock out anyone else either. So only failures cost, and they cost their own
 * source: each client address may have FAIL_BURST tokens rejected at once, then FAIL_RATE
 * per second; beyond that its unknown tokens are answered 429 without a review. A review
 * that succeeds costs nothing. On top, sources that have had a rejection share a global
 * budget (GLOBAL_FAIL_BURST, GLOBAL_FAIL_RATE per second), so many addresses together are
 * bounded too; a source with no rejection on record is always reviewed, so the first
 * request of a valid token from it is never refused. */
#define FAIL_RATE 10.0
#define FAIL_BURST 20.0
#define GLOBAL_FAIL_RATE 50.0
#define GLOBAL_FAIL_BURST 100.0
#define SOURCES_MAX 4096 /* sources with a rejection on record; forgiven ones are dropped first */
#define SOURCE_KEY_MAX 64

/* A client address with rejected tokens on record. */
typedef struct source {
    char key[SOURCE_KEY_MAX]; /* the peer address as civetweb prints it */
    double tokens;            /* failure budget left (FAIL_BURST when forgiven) */
    double refill;            /* monotonic seconds of the last refill */
    UT_hash_handle hh;
} source_t;

typedef struct review {
    unsigned char key[SHA256_DIGEST_LENGTH];
    int status;           /* 200 or 403 (401 answers are cached as 401) */
    time_t expires;
    char why[160];
    kq_auth_who_t who;    /* the token's user and groups (self-service) */
    UT_hash_handle hh;
} review_t;

struct kq_auth {
    kq_auth_mode_t mode;
    bool client_certs;
    kq_kube_t *kube;
    int cache_seconds;
    char *token_file;

    pthread_mutex_t mu;   /* guards token, token_len, token_st, cache, sources, fail_tokens,
                           * fail_refill */
    char *token;
    size_t token_len;
    struct stat token_st;
    review_t *cache;
    source_t *sources;    /* rejection budgets by client address (FAIL_*) */
    double fail_tokens;   /* the global rejection budget of sources with a record */
    double fail_refill;   /* monotonic seconds of its last refill */
};

static double mono_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int kq_auth_mode_parse(const char *s, kq_auth_mode_t *out)
{
    if (strcmp(s, "default") == 0)
        *out = KQ_AUTH_DEFAULT;
    else if (strcmp(s, "none") == 0)
        *out = KQ_AUTH_NONE;
    else if (strcmp(s, "kubernetes") == 0)
        *out = KQ_AUTH_KUBERNETES;
    else
        return KQ_EINVAL;
    return 0;
}

/* Reads a token file: trimmed of surrounding white space, non-empty, bounded. */
static int read_token(const char *path, char **out, size_t *len, struct stat *st, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot read the REST token file %s", path);
        return KQ_EIO;
    }
    char *buf = malloc(TOKEN_MAX + 2);
    size_t n = buf ? fread(buf, 1, TOKEN_MAX + 1, f) : 0;
    int rc = 0;
    if (buf == NULL) {
        rc = KQ_ENOMEM;
    } else if (fstat(fileno(f), st) != 0 || ferror(f)) {
        snprintf(err, errlen, "cannot read the REST token file %s", path);
        rc = KQ_EIO;
    } else if (n > TOKEN_MAX) {
        snprintf(err, errlen, "the REST token file %s is larger than %d bytes", path, TOKEN_MAX);
        rc = KQ_ETOOBIG;
    }
    fclose(f);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    size_t b = 0;
    while (b < n && (buf[b] == ' ' || buf[b] == '\t' || buf[b] == '\r' || buf[b] == '\n'))
        b++;
    while (n > b && (buf[n - 1] == ' ' || buf[n - 1] == '\t' || buf[n - 1] == '\r' || buf[n - 1] == '\n'))
        n--;
    if (n == b) {
        free(buf);
        snprintf(err, errlen, "the REST token file %s is empty", path);
        return KQ_EINVAL;
    }
    memmove(buf, buf + b, n - b);
    buf[n - b] = '\0';
    *out = buf;
    *len = n - b;
    return 0;
}

kq_auth_t *kq_auth_new(const kq_auth_opts_t *o, char *err, size_t errlen)
{
    kq_auth_t *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->mode = o->mode;
    a->client_certs = o->client_certs;
    a->kube = o->kube;
    a->cache_seconds = o->cache_seconds > 0 ? o->cache_seconds : 60;
    a->fail_tokens = GLOBAL_FAIL_BURST;
    a->fail_refill = mono_seconds();
    pthread_mutex_init(&a->mu, NULL);
    if (o->mode == KQ_AUTH_KUBERNETES && o->kube == NULL) {
        snprintf(err, errlen, "--rest-auth=kubernetes needs an API server client");
        goto fail;
    }
    if (o->token_file != NULL) {
        a->token_file = strdup(o->token_file);
        if (a->token_file == NULL ||
            read_token(o->token_file, &a->token, &a->token_len, &a->token_st, err, errlen) != 0)
            goto fail;
    }
    return a;
fail:
    kq_auth_free(a);
    return NULL;
}

void kq_auth_free(kq_auth_t *a)
{
    if (a == NULL)
        return;
    review_t *r, *tmp;
    HASH_ITER(hh, a->cache, r, tmp)
    {
        HASH_DEL(a->cache, r);
        free(r);
    }
    source_t *src, *stmp;
    HASH_ITER(hh, a->sources, src, stmp)
    {
        HASH_DEL(a->sources, src);
        free(src);
    }
    if (a->token != NULL)
        OPENSSL_cleanse(a->token, a->token_len);
    free(a->token);
    free(a->token_file);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

bool kq_auth_closed(const kq_auth_t *a)
{
    return a->mode == KQ_AUTH_DEFAULT && !a->client_certs && a->token_file == NULL;
}

/* Under a->mu: re-reads the token file when its identity or mtime changed. A file that
 * became unreadable keeps the last good token (and says so once per change). */
static void refresh_token(kq_auth_t *a)
{
    struct stat st;
    if (stat(a->token_file, &st) != 0) {
        /* Deleted: the token it held no longer opens anything (a file that comes back is
         * read again: token_st no longer matches). Other errors keep the last token. */
        if (errno == ENOENT && a->token != NULL) {
            OPENSSL_cleanse(a->token, a->token_len);
            free(a->token);
            a->token = NULL;
            a->token_len = 0;
            memset(&a->token_st, 0, sizeof(a->token_st));
            kq_warn("event=rest_token_revoked file=%s msg=\"the token file was deleted: its token is no longer "
                    "accepted\"", a->token_file);
        }
        return;
    }
    if (st.st_ino == a->token_st.st_ino && st.st_dev == a->token_st.st_dev &&
        st.st_mtim.tv_sec == a->token_st.st_mtim.tv_sec && st.st_mtim.tv_nsec == a->token_st.st_mtim.tv_nsec &&
        st.st_size == a->token_st.st_size)
        return;
    char *tok = NULL, err[256];
    size_t len = 0;
    struct stat nst;
    if (read_token(a->token_file, &tok, &len, &nst, err, sizeof(err)) != 0) {
        a->token_st = st; /* do not retry the same broken file on every request */
        kq_warn("event=rest_token_reload_failed msg=\"keeping the previous token\" reason=\"%s\"", err);
        return;
    }
    OPENSSL_cleanse(a->token, a->token_len);
    free(a->token);
    a->token = tok;
    a->token_len = len;
    a->token_st = nst;
    kq_info("event=rest_token_reloaded file=%s", a->token_file);
}

/* The bearer token of an Authorization header, or NULL. */
static const char *bearer(const char *authorization, size_t *len)
{
    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *t = authorization + 7;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    while (n > 0 && t[n - 1] == ' ')
        n--;
    if (n == 0 || n > TOKEN_MAX)
        return NULL;
    *len = n;
    return t;
}

static json_t *post_json(kq_kube_t *kube, const char *path, json_t *req, long *status)
{
    char *body = json_dumps(req, JSON_COMPACT);
    json_t *out = NULL;
    kq_kube_resp_t resp = {0};
    *status = 0;
    if (body != NULL && kq_kube_request(kube, "POST", path, "application/json", body, &resp) == 0) {
        *status = resp.status;
        if (resp.status == 201 || resp.status == 200)
            out = json_loadb(resp.body, resp.len, 0, NULL);
    }
    if (body != NULL) {
        OPENSSL_cleanse(body, strlen(body)); /* it held the token */
        free(body);
    }
    kq_kube_resp_free(&resp);
    return out;
}

static void who_set(kq_auth_who_t *who, const char *name, json_t *groups)
{
    memset(who, 0, sizeof(*who));
    if (strlen(name) >= sizeof(who->user))
        return; /* a name too long to compare is no one */
    snprintf(who->user, sizeof(who->user), "%s", name);
    size_t used = 0, i;
    json_t *g;
    json_array_foreach(groups, i, g)
    {
        const char *s = json_string_value(g);
        size_t n = s ? strlen(s) : 0;
        if (s == NULL || used + n + 1 > sizeof(who->groups))
            continue;
        memcpy(who->groups + used, s, n + 1);
        used += n + 1;
        who->n_groups++;
    }
}

bool kq_auth_who_in_group(const kq_auth_who_t *who, const char *group)
{
    const char *g = who->groups;
    for (size_t i = 0; i < who->n_groups; i++, g += strlen(g) + 1)
        if (strcmp(g, group) == 0)
            return true;
    return false;
}

/* TokenReview, then SubjectAccessReview for get kubequota.io/usage. */
static int kube_review(kq_auth_t *a, const char *tok, size_t len, kq_auth_who_t *who, char *why, size_t whylen)
{
    long st;
    json_t *tr = json_pack("{s:s, s:s, s:{s:s%}}", "apiVersion", "authentication.k8s.io/v1", "kind", "TokenReview",
                           "spec", "token", tok, len);
    json_t *tres = tr ? post_json(a->kube, "/apis/authentication.k8s.io/v1/tokenreviews", tr, &st) : NULL;
    json_decref(tr);
    if (tres == NULL) {
        snprintf(why, whylen, "cannot review the token with the API server (HTTP %ld)", st);
        return 503;
    }
    json_t *status = json_object_get(tres, "status");
    json_t *user = json_object_get(status, "user");
    const char *name = json_string_value(json_object_get(user, "username"));
    if (!json_is_true(json_object_get(status, "authenticated")) || name == NULL) {
        json_decref(tres);
        snprintf(why, whylen, "the token was not accepted by the API server");
        return 401;
    }
    who_set(who, name, json_object_get(user, "groups"));
    json_t *spec = json_pack("{s:s, s:{s:s, s:s, s:s}}", "user", name, "resourceAttributes", "group", "kubequota.io",
                             "resource", "usage", "verb", "get");
    json_t *groups = json_object_get(user, "groups");
    const char *uid = json_string_value(json_object_get(user, "uid"));
    if (spec != NULL && json_is_array(groups))
        json_object_set(spec, "groups", groups);
    if (spec != NULL && uid != NULL)
        json_object_set_new(spec, "uid", json_string(uid));
    json_t *sar = spec ? json_pack("{s:s, s:s, s:o}", "apiVersion", "authorization.k8s.io/v1", "kind",
                                   "SubjectAccessReview", "spec", spec)
                       : NULL;
    json_t *sres = sar ? post_json(a->kube, "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar, &st) : NULL;
    json_decref(sar);
    int rc;
    if (sres == NULL) {
        snprintf(why, whylen, "cannot ask the API server whether %s may read the usage view (HTTP %ld)", name, st);
        rc = 503;
    } else if (json_is_true(json_object_get(json_object_get(sres, "status"), "allowed"))) {
        snprintf(why, whylen, "%s", name);
        rc = 200;
    } else {
        snprintf(why, whylen, "user %s may not get usage.kubequota.io", name);
        rc = 403;
    }
    json_decref(sres);
    json_decref(tres);
    return rc;
}

int kq_auth_check(kq_auth_t *a, bool has_client_cert, const char *authorization, char *why, size_t whylen)
{
    kq_auth_who_t who;
    return kq_auth_check_from(a, NULL, has_client_cert, authorization, &who, why, whylen);
}

int kq_auth_check_who(kq_auth_t *a, bool has_client_cert, const char *authorization, kq_auth_who_t *who,
                      char *why, size_t whylen)
{
    return kq_auth_check_from(a, NULL, has_client_cert, authorization, who, why, whylen);
}

static void refill(double *tokens, double *last, double now, double rate, double burst)
{
    *tokens += (now - *last) * rate;
    if (*tokens > burst)
        *tokens = burst;
    *last = now;
}

/* Under a->mu: may an unknown token from src be reviewed now? Sources without a rejection
 * on record always may; the others need their own budget and the global one. */
static bool may_review(kq_auth_t *a, const char *src, double now)
{
    source_t *s;
    HASH_FIND_STR(a->sources, src, s);
    if (s == NULL)
        return true;
    refill(&s->tokens, &s->refill, now, FAIL_RATE, FAIL_BURST);
    refill(&a->fail_tokens, &a->fail_refill, now, GLOBAL_FAIL_RATE, GLOBAL_FAIL_BURST);
    return s->tokens >= 1.0 && a->fail_tokens >= 1.0;
}

/* Under a->mu: charges one rejected token to src (and, once src has a record, to the
 * global budget). When the table is full, forgiven sources (full budget) are dropped; if
 * none is, the table is emptied (each address then gets a fresh budget: bounded by how
 * many addresses a client has). */
static void charge_rejection(kq_auth_t *a, const char *src, double now)
{
    source_t *s;
    HASH_FIND_STR(a->sources, src, s);
    if (s == NULL) {
        if (HASH_COUNT(a->sources) >= SOURCES_MAX) {
            source_t *x, *tmp;
            HASH_ITER(hh, a->sources, x, tmp)
            {
                refill(&x->tokens, &x->refill, now, FAIL_RATE, FAIL_BURST);
                if (x->tokens >= FAIL_BURST) {
                    HASH_DEL(a->sources, x);
                    free(x);
                }
            }
            if (HASH_COUNT(a->sources) >= SOURCES_MAX) {
                HASH_ITER(hh, a->sources, x, tmp)
                {
                    HASH_DEL(a->sources, x);
                    free(x);
                }
            }
        }
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return;
        snprintf(s->key, sizeof(s->key), "%s", src);
        s->tokens = FAIL_BURST;
        s->refill = now;
        HASH_ADD_STR(a->sources, key, s);
    } else {
        refill(&a->fail_tokens, &a->fail_refill, now, GLOBAL_FAIL_RATE, GLOBAL_FAIL_BURST);
        a->fail_tokens -= 1.0;
    }
    refill(&s->tokens, &s->refill, now, FAIL_RATE, FAIL_BURST);
    s->tokens -= 1.0;
}

int kq_auth_check_from(kq_auth_t *a, const char *source, bool has_client_cert, const char *authorization,
                       kq_auth_who_t *who, char *why, size_t whylen)
{
    char src[SOURCE_KEY_MAX];
    snprintf(src, sizeof(src), "%s", source != NULL ? source : "");
    memset(who, 0, sizeof(*who));
    if (a->mode == KQ_AUTH_NONE || (a->client_certs && has_client_cert)) {
        snprintf(why, whylen, "ok");
        return 200;
    }
    size_t len = 0;
    const char *tok = bearer(authorization, &len);
    if (a->token_file != NULL && tok != NULL) {
        pthread_mutex_lock(&a->mu);
        refresh_token(a);
        bool ok = a->token != NULL && len == a->token_len && CRYPTO_memcmp(tok, a->token, len) == 0;
        pthread_mutex_unlock(&a->mu);
        if (ok) {
            snprintf(why, whylen, "ok");
            return 200;
        }
    }
    if (a->mode == KQ_AUTH_KUBERNETES && tok != NULL) {
        review_t key_only;
        SHA256((const unsigned char *)tok, len, key_only.key);
        time_t now = time(NULL);
        pthread_mutex_lock(&a->mu);
        review_t *r;
        HASH_FIND(hh, a->cache, key_only.key, sizeof(key_only.key), r);
        if (r != NULL && r->expires > now) {
            int st = r->status;
            snprintf(why, whylen, "%s", r->why);
            *who = r->who;
            pthread_mutex_unlock(&a->mu);
            return st;
        }
        bool ok = may_review(a, src, mono_seconds());
        pthread_mutex_unlock(&a->mu);
        if (!ok) {
            snprintf(why, whylen, "too many rejected bearer tokens from this address; retry in a second");
            return 429;
        }

        int st = kube_review(a, tok, len, who, why, whylen);
        if (st == 503)
            return st; /* not cached: the next request asks again */
        if (st == 401) {
            pthread_mutex_lock(&a->mu);
            charge_rejection(a, src, mono_seconds());
            pthread_mutex_unlock(&a->mu);
        }
        review_t *n = calloc(1, sizeof(*n));
        if (n != NULL) {
            memcpy(n->key, key_only.key, sizeof(n->key));
            n->status = st;
            n->expires = now + (st == 200 ? a->cache_seconds : DENY_CACHE_SECONDS);
            snprintf(n->why, sizeof(n->why), "%s", why);
            n->who = *who;
            pthread_mutex_lock(&a->mu);
            HASH_FIND(hh, a->cache, n->key, sizeof(n->key), r);
            if (r != NULL) {
                HASH_DEL(a->cache, r);
                free(r);
            }
            if (HASH_COUNT(a->cache) >= CACHE_MAX) {
                review_t *x, *tmp;
                HASH_ITER(hh, a->cache, x, tmp)
                {
                    HASH_DEL(a->cache, x);
                    free(x);
                }
            }
            HASH_ADD(hh, a->cache, key, sizeof(n->key), n);
            pthread_mutex_unlock(&a->mu);
        }
        return st;
    }
    if (kq_auth_closed(a))
        snprintf(why, whylen, "the usage view requires authentication; start kubequota with --client-ca, "
                              "--rest-token-file or --rest-auth=kubernetes (or --rest-auth=none for local tests)");
    else if (tok != NULL)
        snprintf(why, whylen, "the bearer token is not accepted");
    else
        snprintf(why, whylen, "authentication required: present a client certificate or a bearer token");
    return 401;
}
