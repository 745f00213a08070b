/* Admission webhooks: the mutating webhook that stamps pods and workload pod templates
 * with the identity the API server authenticated, and the validating webhook that keeps
 * a bad queues.yaml ConfigMap from being stored (and, later, checks ElasticQuota objects).
 * The rules are in include/kubequota/admission.h.
 *
 * DESIGN: each call parses the body into its own jansson tree, decides, and builds the
 * response from it; nothing is shared between calls and there are no locks, so civetweb
 * workers call these concurrently. A patch operation is applied to the parsed object as
 * it is recorded, so later operations see the maps earlier ones created (two annotations
 * into a missing map: one "add" of the map, then one "add" of the second key), and the
 * operations always apply in order to the object the API server sent. The first denial
 * wins; once a request is denied no patch is sent. Every text that goes out (messages,
 * warnings, error bodies) is cleaned to valid UTF-8 and capped at
 * KQ_ADMISSION_MAX_MESSAGE bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* vasprintf */
#endif
#include "kubequota/serve/admission.h"

#include <ctype.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/log.h"
#include "kubequota/kube/podkeys.h"

#define IDENT_MAX 512  /* bytes of one user or group name (as the pod model accepts) */
#define GROUPS_MAX 256 /* groups in one identity (as the pod model accepts) */

static const char *const ann_keys[2] = {KQ_ADMISSION_ANN_USER_INFO, KQ_ADMISSION_ANN_YK_USER_INFO};

/* ------------------------------------------------------------------ defaults */

static const char *const default_trusted_users[] = {
    "system:serviceaccount:kube-system:*",
    "system:kube-controller-manager",
};
static const char *const default_trusted_groups[] = {
    "system:serviceaccounts:kube-system",
};

kq_admission_opts_t kq_admission_opts_default(void)
{
    return (kq_admission_opts_t){
        .scheduler_name = "kubequota-scheduler",
        .set_scheduler_name = false,
        .trusted_users = default_trusted_users,
        .n_trusted_users = sizeof(default_trusted_users) / sizeof(default_trusted_users[0]),
        .trusted_groups = default_trusted_groups,
        .n_trusted_groups = sizeof(default_trusted_groups) / sizeof(default_trusted_groups[0]),
        .config_map_namespace = "kube-system",
        .config_map_name = "kubequota-config",
        .config_map_key = "queues.yaml",
        .validate_elasticquota = NULL,
        .elasticquota_ud = NULL,
        .check_config = NULL,
        .check_config_ud = NULL,
    };
}

/* ------------------------------------------------------------------ namespace filter */

struct kq_admission_ns_filter {
    regex_t *process, *bypass; /* compiled lists, or NULL when empty */
    size_t n_process, n_bypass;
};

static void free_list(regex_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        regfree(&v[i]);
    free(v);
}

/* Compiles a comma-separated list as parseRegexes does (blanks trimmed, empties skipped). */
static int compile_list(const char *what, const char *list, regex_t **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (list == NULL || *list == '\0')
        return 0;
    size_t cap = 1;
    for (const char *p = list; *p != '\0'; p++)
        cap += *p == ',';
    regex_t *v = calloc(cap, sizeof(*v));
    char *copy = strdup(list);
    int rc = KQ_ENOMEM;
    size_t k = 0;
    if (v == NULL || copy == NULL)
        goto out;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok))
            tok++;
        size_t len = strlen(tok);
        while (len > 0 && isspace((unsigned char)tok[len - 1]))
            tok[--len] = '\0';
        if (len == 0)
            continue;
        int e = regcomp(&v[k], tok, REG_EXTENDED | REG_NOSUB);
        if (e != 0) {
            char why[256];
            regerror(e, &v[k], why, sizeof why);
            snprintf(err, errlen, "%s: \"%s\" is not a regular expression: %s", what, tok, why);
            rc = e == REG_ESPACE ? KQ_ENOMEM : KQ_EINVAL;
            goto out;
        }
        k++;
    }
    rc = 0;
out:
    free(copy);
    if (rc != 0 || k == 0) {
        free_list(v, k);
        v = NULL;
        k = 0;
    }
    *out = v;
    *n = k;
    return rc;
}

int kq_admission_ns_filter_new(const char *process, const char *bypass, kq_admission_ns_filter_t **out, char *err,
                               size_t errlen)
{
    kq_admission_ns_filter_t *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        snprintf(err, errlen, "out of memory");
        return KQ_ENOMEM;
    }
    int rc = compile_list("--process-namespaces (processNamespaces)", process, &f->process, &f->n_process, err, errlen);
    if (rc == 0)
        rc = compile_list("--bypass-namespaces (bypassNamespaces)", bypass, &f->bypass, &f->n_bypass, err, errlen);
    if (rc != 0) {
        if (rc == KQ_ENOMEM && *err == '\0')
            snprintf(err, errlen, "out of memory");
        kq_admission_ns_filter_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

void kq_admission_ns_filter_free(kq_admission_ns_filter_t *f)
{
    if (f == NULL)
        return;
    free_list(f->process, f->n_process);
    free_list(f->bypass, f->n_bypass);
    free(f);
}

static bool any_match(const regex_t *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (regexec(&v[i], s, 0, NULL, 0) == 0)
            return true;
    return false;
}

bool kq_admission_ns_processed(const kq_admission_ns_filter_t *f, const char *ns)
{
    if (f == NULL)
        return true;
    if (ns == NULL || *ns == '\0')
        ns = "default";
    return (f->n_process == 0 || any_match(f->process, f->n_process, ns)) && !any_match(f->bypass, f->n_bypass, ns);
}

/* ------------------------------------------------------------------ text */

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when it is not valid
 * (the same rules jansson applies: no overlongs, no surrogates, at most U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0], cp;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* A new string: s with invalid UTF-8 bytes replaced by '?' and control characters by
 * ' ', cut at a character boundary to at most KQ_ADMISSION_MAX_MESSAGE bytes ending in
 * "..." when too long. NULL on ENOMEM. */
static char *clean_text(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *r = malloc(n + 1);
    if (r == NULL)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0) {
            r[o++] = '?';
            i++;
        } else if (k == 1) {
            unsigned char ch = (unsigned char)s[i++];
            r[o++] = (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch;
        } else {
            memcpy(r + o, s + i, k);
            o += k;
            i += k;
        }
    }
    if (o > KQ_ADMISSION_MAX_MESSAGE) {
        size_t cut = KQ_ADMISSION_MAX_MESSAGE - 3;
        while (cut > 0 && ((unsigned char)r[cut] & 0xC0) == 0x80)
            cut--;
        memcpy(r + cut, "...", 3);
        o = cut + 3;
    }
    r[o] = '\0';
    return r;
}

static const char *or_dash(const char *s)
{
    return s != NULL && *s != '\0' ? s : "-";
}

/* True when s (len bytes) is a usable user or group name: non-empty, at most IDENT_MAX
 * bytes, no control characters. */
static bool ident_ok(const char *s, size_t len)
{
    if (s == NULL || len == 0 || len > IDENT_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

/* ------------------------------------------------------------------ request context */

typedef struct ctx {
    const kq_admission_opts_t *o;
    const char *webhook;        /* "mutate" / "validate", for logs */
    json_t *req;                /* borrowed from the parsed body */
    const json_t *uid;          /* request.uid (string), or NULL */
    const char *op, *group, *kind, *sub, *ns, *name;
    json_t *obj;                /* request.object when an object, else NULL; patched in place */
    const json_t *old;          /* request.oldObject when an object, else NULL */
    const char *user;           /* request.userInfo.username once parsed */
    char *ident;                /* {"user":...,"groups":[...]} once parsed; owned */
    /* the verdict */
    bool allowed;
    int code;                   /* status.code when denied */
    char *message;              /* owned, cleaned */
    json_t *patch;              /* owned array of operations, or NULL */
    json_t *warnings;           /* owned array of strings, or NULL */
    bool nomem;
} ctx_t;

static void deny(ctx_t *c, int code, const char *fmt, ...) KQ_PRINTF(3, 4);
static void deny(ctx_t *c, int code, const char *fmt, ...)
{
    if (!c->allowed)
        return; /* the first reason is the one reported */
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&text, fmt, ap);
    va_end(ap);
    c->allowed = false;
    c->code = code;
    if (rc < 0 || (c->message = clean_text(text)) == NULL)
        c->nomem = true;
    free(text);
}

static void warn(ctx_t *c, const char *fmt, ...) KQ_PRINTF(2, 3);
static void warn(ctx_t *c, const char *fmt, ...)
{
    char *text = NULL, *clean = NULL;
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (rc < 0 || (clean = clean_text(text)) == NULL ||
        (c->warnings == NULL && (c->warnings = json_array()) == NULL) ||
        json_array_append_new(c->warnings, json_string(clean)) != 0)
        c->nomem = true;
    free(text);
    free(clean);
}

/* ------------------------------------------------------------------ JSON pointer and patch */

/* "/seg0/seg1..." with "~" escaped as "~0" and "/" as "~1". New string or NULL. */
static char *pointer(const char *const *segs, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++) {
        len += 1;
        for (const char *s = segs[i]; *s; s++)
            len += (*s == '~' || *s == '/') ? 2 : 1;
    }
    char *p = malloc(len), *w = p;
    if (p == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        *w++ = '/';
        for (const char *s = segs[i]; *s; s++) {
            if (*s == '~' || *s == '/') {
                *w++ = '~';
                *w++ = *s == '~' ? '0' : '1';
            } else {
                *w++ = *s;
            }
        }
    }
    *w = '\0';
    return p;
}

/* Value at segs inside root (objects only), borrowed, or NULL. */
static const json_t *get_path(const json_t *root, const char *const *segs, size_t n)
{
    const json_t *cur = root;
    for (size_t i = 0; i < n && cur != NULL; i++)
        cur = json_object_get(cur, segs[i]);
    return cur;
}

/* Records one operation; value is copied (the object keeps changing afterwards). */
static int emit(ctx_t *c, const char *op, const char *const *segs, size_t n, const json_t *value)
{
    int rc = KQ_ENOMEM;
    json_t *copy = NULL, *e = NULL;
    char *p = pointer(segs, n);
    if (p == NULL)
        goto out;
    if (c->patch == NULL && (c->patch = json_array()) == NULL)
        goto out;
    if (value != NULL && (copy = json_deep_copy(value)) == NULL)
        goto out;
    e = copy != NULL ? json_pack("{s:s, s:s, s:O}", "op", op, "path", p, "value", copy)
                     : json_pack("{s:s, s:s}", "op", op, "path", p);
    if (e == NULL || json_array_append_new(c->patch, e) != 0)
        goto out;
    rc = 0;
out:
    if (rc != 0)
        c->nomem = true;
    json_decref(copy);
    free(p);
    return rc;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER:
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "value";
}

/* Sets segs inside the request object to value (a new reference, stolen even on
 * failure), creating missing (or null) maps on the way with one "add" of the first
 * missing map; a leaf that exists is "replace"d. An intermediate that exists but is not
 * an object denies the request (the object is malformed). Returns 0 or a negative code
 * (the verdict already says why). */
static int put(ctx_t *c, const char *const *segs, size_t n, json_t *value)
{
    int rc = KQ_ENOMEM;
    json_t *cur = c->obj;
    if (value == NULL) {
        c->nomem = true;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *next = json_object_get(cur, segs[i]);
        if (i + 1 < n && json_is_object(next)) {
            cur = next;
            continue;
        }
        if (i + 1 < n && next != NULL && !json_is_null(next)) {
            char *p = pointer(segs, i + 1);
            deny(c, 400, "request.object%s is %s %s, not an object",
                 p != NULL ? p : "", json_is_array(next) || json_is_object(next) ? "an" : "a",
                 type_name(next));
            free(p);
            rc = KQ_EINVAL;
            goto out;
        }
        for (size_t k = n - 1; k > i; k--) { /* wrap value into the missing maps */
            json_t *m = json_object();
            if (m == NULL) {
                c->nomem = true;
                goto out;
            }
            if (json_object_set_new(m, segs[k], value) != 0) {
                value = m;
                c->nomem = true;
                goto out;
            }
            value = m;
        }
        if ((rc = emit(c, next != NULL ? "replace" : "add", segs, i + 1, value)) != 0)
            goto out;
        rc = json_object_set_new(cur, segs[i], value);
        value = NULL; /* stolen */
        if (rc != 0) {
            c->nomem = true;
            rc = KQ_ENOMEM;
        }
        return rc;
    }
    rc = KQ_EINVAL; /* n == 0: not used */
out:
    json_decref(value);
    return rc;
}

/* Removes segs from the request object when present. */
static int del(ctx_t *c, const char *const *segs, size_t n)
{
    json_t *parent = (json_t *)get_path(c->obj, segs, n - 1);
    if (!json_is_object(parent) || json_object_get(parent, segs[n - 1]) == NULL)
        return 0;
    int rc = emit(c, "remove", segs, n, NULL);
    if (rc == 0)
        json_object_del(parent, segs[n - 1]);
    return rc;
}

/* ------------------------------------------------------------------ identity */

/* Parses request.userInfo into c->user and c->ident; denies when it is unusable. */
static int parse_user_info(ctx_t *c)
{
    const json_t *ui = json_object_get(c->req, "userInfo");
    const json_t *user = json_object_get(ui, "username");
    const json_t *groups = json_object_get(ui, "groups");
    json_t *ident = NULL, *garr = NULL;
    int rc = KQ_EINVAL;
    if (!json_is_string(user) || json_string_length(user) == 0) {
        deny(c, 400, "request.userInfo.username is missing: kubequota cannot tell who sent this %s %s",
             c->kind, c->op);
        goto out;
    }
    if (!ident_ok(json_string_value(user), json_string_length(user))) {
        deny(c, 400, "request.userInfo.username is longer than %d bytes or contains control characters",
             IDENT_MAX);
        goto out;
    }
    if (groups != NULL && !json_is_null(groups) && !json_is_array(groups)) {
        deny(c, 400, "request.userInfo.groups is not an array");
        goto out;
    }
    size_t ng = json_array_size(groups);
    if (ng > GROUPS_MAX) {
        deny(c, 400, "request.userInfo.groups has %zu groups; kubequota accepts at most %d", ng,
             GROUPS_MAX);
        goto out;
    }
    rc = KQ_ENOMEM;
    if ((garr = json_array()) == NULL)
        goto nomem;
    for (size_t i = 0; i < ng; i++) {
        const json_t *g = json_array_get(groups, i);
        if (!json_is_string(g) || !ident_ok(json_string_value(g), json_string_length(g))) {
            deny(c, 400, "request.userInfo.groups[%zu] is not a non-empty string of at most %d bytes "
                 "without control characters", i, IDENT_MAX);
            rc = KQ_EINVAL;
            goto out;
        }
        if (json_array_append(garr, (json_t *)g) != 0)
            goto nomem;
    }
    if ((ident = json_pack("{s:O, s:O}", "user", user, "groups", garr)) == NULL ||
        (c->ident = json_dumps(ident, JSON_COMPACT)) == NULL)
        goto nomem;
    c->user = json_string_value(user);
    rc = 0;
    goto out;
nomem:
    c->nomem = true;
out:
    json_decref(garr);
    json_decref(ident);
    return rc;
}

/* Whether user matches an entry of list: exactly, or by prefix for an entry ending in '*'. */
static bool user_listed(const char *user, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *t = list[i];
        size_t tl = t != NULL ? strlen(t) : 0;
        if (tl == 0)
            continue;
        if (t[tl - 1] == '*' ? strncmp(user, t, tl - 1) == 0 : strcmp(user, t) == 0)
            return true;
    }
    return false;
}

static bool is_trusted(const ctx_t *c)
{
    const kq_admission_opts_t *o = c->o;
    if (user_listed(c->user, o->trusted_users, o->n_trusted_users))
        return true;
    const json_t *groups = json_object_get(json_object_get(c->req, "userInfo"), "groups");
    for (size_t g = 0; g < json_array_size(groups); g++) {
        const char *name = json_string_value(json_array_get(groups, g));
        for (size_t i = 0; i < o->n_trusted_groups && name != NULL; i++)
            if (o->trusted_groups[i] != NULL && strcmp(name, o->trusted_groups[i]) == 0)
                return true;
    }
    return false;
}

/* segs = base (nbase segments, the annotations map) + key. */
static size_t ann_path(const char **segs, const char *const *base, size_t nbase, const char *key)
{
    for (size_t i = 0; i < nbase; i++)
        segs[i] = base[i];
    segs[nbase] = key;
    return nbase + 1;
}

/* Sets both identity annotations under base to the requester's identity. */
static int stamp(ctx_t *c, const char *const *base, size_t nbase)
{
    const char *segs[8];
    for (size_t k = 0; k < 2; k++) {
        size_t n = ann_path(segs, base, nbase, ann_keys[k]);
        const json_t *cur = get_path(c->obj, segs, n);
        if (json_is_string(cur) && strcmp(json_string_value(cur), c->ident) == 0)
            continue;
        int rc = put(c, segs, n, json_string(c->ident));
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Puts both identity annotations under base back to their values in oldObject
 * (removing those oldObject did not have). */
static int restore(ctx_t *c, const char *const *base, size_t nbase)
{
    const char *segs[8];
    for (size_t k = 0; k < 2; k++) {
        size_t n = ann_path(segs, base, nbase, ann_keys[k]);
        const json_t *was = get_path(c->old, segs, n), *now = get_path(c->obj, segs, n);
        if (was == NULL && now == NULL)
            continue;
        if (was != NULL && now != NULL && json_equal((json_t *)was, (json_t *)now))
            continue;
        json_t *copy = NULL;
        if (was != NULL && (copy = json_deep_copy(was)) == NULL) {
            c->nomem = true;
            return KQ_ENOMEM;
        }
        int rc = was != NULL ? put(c, segs, n, copy) : del(c, segs, n);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A copy of a pod template (absent: {}) without the identity annotations, and without
 * the annotations and metadata maps when that leaves them empty. NULL on ENOMEM. */
static json_t *strip_identity(const json_t *tmpl)
{
    json_t *t = tmpl != NULL ? json_deep_copy(tmpl) : json_object();
    if (t == NULL || !json_is_object(t))
        return t;
    json_t *meta = json_object_get(t, "metadata");
    json_t *anns = json_object_get(meta, "annotations");
    if (json_is_object(anns)) {
        for (size_t k = 0; k < 2; k++)
            json_object_del(anns, ann_keys[k]);
        if (json_object_size(anns) == 0)
            json_object_del(meta, "annotations");
    }
    if (json_is_object(meta) && json_object_size(meta) == 0)
        json_object_del(t, "metadata");
    return t;
}

/* The pod template of a workload kind (group/kind), or NULL when kind is not one. */
static const char *const *workload_template(const char *group, const char *kind, size_t *n)
{
    static const char *const tmpl[] = {"spec", "template"};
    static const char *const cron[] = {"spec", "jobTemplate", "spec", "template"};
    static const struct {
        const char *group, *kind;
    } kinds[] = {
        {"apps", "Deployment"}, {"apps", "ReplicaSet"}, {"apps", "StatefulSet"},
        {"apps", "DaemonSet"},  {"batch", "Job"},       {"", "ReplicationController"},
    };
    if (strcmp(group, "batch") == 0 && strcmp(kind, "CronJob") == 0) {
        *n = 4;
        return cron;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(group, kinds[i].group) == 0 && strcmp(kind, kinds[i].kind) == 0) {
            *n = 2;
            return tmpl;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ mutate */

/* Pod UPDATE: denies a change of any key that places a pod (its queue, application and
 * quota group: kq_pod_keys in podkeys.h, the list pod.c reads them from) — added, removed
 * or changed. The ledger counts a pod where it was admitted and releases it from there,
 * but a restart counts it where its keys say: a change would move it to a queue or
 * application it was never admitted to. The identity keys of that list are not refused
 * but put back (stamp/restore). */
static bool placement_changed(ctx_t *c)
{
    for (size_t i = 0; i < KQ_POD_N_KEYS; i++) {
        const kq_pod_key_t *k = &kq_pod_keys[i];
        if (k->role == KQ_POD_KEY_IDENTITY)
            continue;
        const char *segs[3] = {"metadata", k->annotation ? "annotations" : "labels", k->key};
        const json_t *was = get_path(c->old, segs, 3), *now = get_path(c->obj, segs, 3);
        if (was == NULL && now == NULL)
            continue;
        if (was != NULL && now != NULL && json_equal((json_t *)was, (json_t *)now))
            continue;
        deny(c, 403,
             "%s %s of a pod cannot change after creation (it decides the queue, application or quota group "
             "the pod is counted in); delete and recreate the pod instead",
             kq_pod_key_kind(k), k->key);
        return true;
    }
    return false;
}

/* Whether pod carries the admission gate in spec.schedulingGates. */
static bool has_gate(const json_t *pod)
{
    static const char *const gates[] = {"spec", "schedulingGates"};
    size_t i;
    json_t *g;
    json_array_foreach(get_path(pod, gates, 2), i, g) {
        const char *n = json_string_value(json_object_get(g, "name"));
        if (n != NULL && strcmp(n, KQ_ADMISSION_GATE) == 0)
            return true;
    }
    return false;
}

/* Pod UPDATE: denies removing the admission gate unless the requester is a gate remover
 * (admission.h). The gate is added back never: the API server allows only removals. */
static bool gate_removal_denied(ctx_t *c)
{
    const kq_admission_opts_t *o = c->o;
    if (o->n_gate_removers == 0 || !has_gate(c->old) || has_gate(c->obj) ||
        user_listed(c->user, o->gate_removers, o->n_gate_removers))
        return false;
    deny(c, 403,
         "the scheduling gate %s is removed by kubequota when the pod fits its quota, in fair order "
         "(docs/gating.md); %s may not remove it",
         KQ_ADMISSION_GATE, c->user);
    return true;
}

/* A pod of kubequota's scheduler? */
static bool managed(const ctx_t *c, const json_t *pod)
{
    static const char *const sched[] = {"spec", "schedulerName"};
    const char *name = json_string_value(get_path(pod, sched, 2));
    return name != NULL && c->o->scheduler_name != NULL && strcmp(name, c->o->scheduler_name) == 0;
}

/* Runs opts->check_pod, or for a dry run (request.dryRun) opts->check_pod_dry, which
 * commits nothing (see admission.h); denies on a refusal or a failed check. */
static void check_limits(ctx_t *c, const json_t *old)
{
    bool dry = json_is_true(json_object_get(c->req, "dryRun"));
    kq_admission_pod_hook_t hook = dry ? c->o->check_pod_dry : c->o->check_pod;
    void *ud = dry ? c->o->check_pod_dry_ud : c->o->check_pod_ud;
    if (hook == NULL)
        return;
    char msg[KQ_ADMISSION_MAX_MESSAGE];
    msg[0] = '\0';
    int rc = hook(ud, c->obj, old, msg, sizeof(msg));
    msg[sizeof(msg) - 1] = '\0';
    if (rc != 0)
        deny(c, rc == KQ_EDENIED ? 403 : 500, "%s", *msg != '\0' ? msg : kq_strerror(rc));
}

/* Appends the admission gate to spec.schedulingGates (created when missing) unless the
 * pod already carries it. Every requester's pods, trusted ones too: a ReplicaSet's pods
 * wait for quota like anyone's. */
static void add_gate(ctx_t *c)
{
    static const char *const gates[] = {"spec", "schedulingGates"};
    static const char *const spec[] = {"spec"};
    json_t *list = (json_t *)get_path(c->obj, gates, 2);
    if (list != NULL && !json_is_null(list) && !json_is_array(list)) {
        deny(c, 400, "request.object/spec/schedulingGates is %s, not an array", type_name(list));
        return;
    }
    if (has_gate(c->obj))
        return;
    json_t *gate = json_pack("{s:s}", "name", KQ_ADMISSION_GATE);
    if (gate == NULL) {
        c->nomem = true;
        return;
    }
    if (list == NULL || json_is_null(list) || json_array_size(list) == 0) {
        json_t *arr = json_array();
        if (arr == NULL || json_array_append_new(arr, gate) != 0) {
            json_decref(arr);
            c->nomem = true;
            return;
        }
        if (!json_is_object(get_path(c->obj, spec, 1))) {
            json_decref(arr);
            deny(c, 400, "request.object/spec is missing or not an object");
            return;
        }
        (void)put(c, gates, 2, arr);
        return;
    }
    static const char *const append[] = {"spec", "schedulingGates", "-"};
    if (emit(c, "add", append, 3, gate) != 0 || json_array_append(list, gate) != 0)
        c->nomem = true;
    json_decref(gate);
}

/* pods/status UPDATE (issue 37: a tenant granted pods/status, e.g. through a pods wildcard, could
 * rewrite the identity annotation and the queue label where no pod UPDATE rule looks):
 * the fixed keys of kq_pod_keys are held as in a pod UPDATE, identity put back, any other
 * key's change refused. The chart sends only updates that change one of them, so the
 * kubelet's status writes never reach kubequota. */
static void status_update(ctx_t *c)
{
    static const char *const pod_base[] = {"metadata", "annotations"};
    if (c->obj == NULL || c->old == NULL) {
        deny(c, 400, "request.object and request.oldObject are required in a pods/status UPDATE");
        return;
    }
    if (parse_user_info(c) != 0 || placement_changed(c))
        return;
    if (!is_trusted(c))
        (void)restore(c, pod_base, 2);
}

static void mutate(ctx_t *c)
{
    static const char *const pod_base[] = {"metadata", "annotations"};
    bool create = strcmp(c->op, "CREATE") == 0, update = strcmp(c->op, "UPDATE") == 0;
    bool pod = strcmp(c->group, "") == 0 && strcmp(c->kind, "Pod") == 0;
    size_t ntmpl = 0;
    const char *const *tmpl = workload_template(c->group, c->kind, &ntmpl);

    /* A namespace the filters bypass is not governed: allowed, unchanged (issue 37). */
    if (!kq_admission_ns_processed(c->o->ns_filter, c->ns))
        return;
    /* pods/status writes metadata too: its fixed keys are guarded like a pod UPDATE's. */
    if (pod && update && strcmp(c->sub, "status") == 0) {
        status_update(c);
        return;
    }

    /* An in-place resize changes what a counted pod uses: checked like a new request. */
    if (pod && update && strcmp(c->sub, "resize") == 0 && c->o->check_pod != NULL) {
        if (c->obj == NULL || c->old == NULL) {
            deny(c, 400, "request.object and request.oldObject are required in a pods/resize UPDATE");
            return;
        }
        if (managed(c, c->obj))
            check_limits(c, c->old);
        return;
    }

    if (*c->sub != '\0' || (!pod && tmpl == NULL) || (!create && !update))
        return;
    if (c->obj == NULL) {
        deny(c, 400, "request.object is missing or not an object in a %s %s", c->kind, c->op);
        return;
    }
    if (update && c->old == NULL && pod) {
        deny(c, 400, "request.oldObject is missing or not an object in a Pod UPDATE");
        return;
    }
    if (parse_user_info(c) != 0)
        return;
    bool trusted = is_trusted(c);

    if (pod && update && (gate_removal_denied(c) || placement_changed(c)))
        return;
    if (pod && c->o->check_pod_quota != NULL) {
        char m[512] = "";
        int rc = c->o->check_pod_quota(c->o->pod_quota_ud, c->obj, update ? c->old : NULL, m, sizeof m);
        if (rc != 0) {
            deny(c, rc == KQ_EDENIED ? 403 : 500, "%s", m[0] ? m : kq_strerror(rc));
            return;
        }
    }
    if (pod) {
        if (!trusted && (create ? stamp(c, pod_base, 2) : restore(c, pod_base, 2)) != 0)
            return;
        if (create && c->o->set_scheduler_name && c->o->scheduler_name != NULL &&
            *c->o->scheduler_name != '\0') {
            static const char *const sched[] = {"spec", "schedulerName"};
            const char *cur = json_string_value(get_path(c->obj, sched, 2));
            if (cur == NULL || strcmp(cur, c->o->scheduler_name) != 0)
                (void)put(c, sched, 2, json_string(c->o->scheduler_name));
        }
        /* another user's application is never joined (issue 29): checked with the stamped
         * identity, before the gate, so that the pod is refused rather than left waiting */
        if (create && c->o->check_pod_app != NULL && !c->nomem && c->allowed && managed(c, c->obj)) {
            char m[KQ_ADMISSION_MAX_MESSAGE] = "";
            if (c->o->check_pod_app(c->o->pod_app_ud, c->obj, NULL, m, sizeof m) == KQ_EDENIED) {
                deny(c, 403, "%s", m[0] ? m : "the pod's application belongs to another user");
                return;
            }
        }
        /* spec.nodeName at creation skips the scheduler, and so filter and bind: checked
         * whoever creates it. A controller creating a pod for a tenant's workload acts for
         * that tenant (the pod carries the template's stamped identity); trusted only
         * spares the requester the stamping above. The validating webhook reserves. */
        static const char *const node[] = {"spec", "nodeName"};
        const char *on = json_string_value(get_path(c->obj, node, 2));
        if (create && c->o->admission_gate && (on == NULL || *on == '\0') && !c->nomem && managed(c, c->obj))
            add_gate(c);
        if (create && on != NULL && *on != '\0' && c->o->check_pod != NULL && !c->nomem && c->allowed &&
            managed(c, c->obj))
            check_limits(c, NULL);
        return;
    }

    if (trusted)
        return;
    const char *base[8];
    for (size_t i = 0; i < ntmpl; i++)
        base[i] = tmpl[i];
    base[ntmpl] = "metadata";
    base[ntmpl + 1] = "annotations";
    size_t nbase = ntmpl + 2;
    bool keep = false;
    if (update && c->old != NULL) {
        json_t *a = strip_identity(get_path(c->obj, tmpl, ntmpl));
        json_t *b = strip_identity(get_path(c->old, tmpl, ntmpl));
        if (a == NULL || b == NULL)
            c->nomem = true;
        else
            keep = json_equal(a, b);
        json_decref(a);
        json_decref(b);
        if (c->nomem)
            return;
    }
    (void)(keep ? restore(c, base, nbase) : stamp(c, base, nbase));
}

/* ------------------------------------------------------------------ validate */

static void validate_config_map(ctx_t *c)
{
    const kq_admission_opts_t *o = c->o;
    const char *name = c->name;
    if (name == NULL || *name == '\0')
        name = json_string_value(get_path(c->obj, (const char *const[]){"metadata", "name"}, 2));
    if (o->config_map_name == NULL || o->config_map_namespace == NULL || name == NULL ||
        c->ns == NULL || strcmp(name, o->config_map_name) != 0 ||
        strcmp(c->ns, o->config_map_namespace) != 0)
        return;
    if (strcmp(c->op, "CREATE") != 0 && strcmp(c->op, "UPDATE") != 0)
        return;
    if (c->obj == NULL) {
        deny(c, 400, "request.object is missing or not an object in a ConfigMap %s", c->op);
        return;
    }
    const char *key = o->config_map_key != NULL ? o->config_map_key : "queues.yaml";
    const json_t *v = json_object_get(json_object_get(c->obj, "data"), key);
    if (v == NULL) {
        bool binary = json_object_get(json_object_get(c->obj, "binaryData"), key) != NULL;
        deny(c, 422, "ConfigMap %s/%s: data[\"%s\"] is missing%s; kubequota reads its queue "
             "configuration from it", c->ns, name, key, binary ? " (it is in binaryData)" : "");
        return;
    }
    if (!json_is_string(v)) {
        deny(c, 422, "ConfigMap %s/%s: data[\"%s\"] is not a string", c->ns, name, key);
        return;
    }
    kq_diags_t diags;
    kq_diags_init(&diags);
    kq_config_t *cfg = NULL;
    int rc = kq_config_load_buffer(json_string_value(v), json_string_length(v), key, &cfg, &diags);
    if (rc == 0)
        rc = o->check_config != NULL ? o->check_config(o->check_config_ud, cfg, key, &diags)
                                     : kq_config_check_partition(cfg, "default", key, &diags);
    if (rc == 0) {
        kq_info("event=config_map_accepted ns=%s name=%s user=%s", c->ns, name,
                or_dash(json_string_value(get_path(c->req, (const char *const[]){"userInfo", "username"}, 2))));
    } else if (rc == KQ_ENOMEM) {
        c->nomem = true;
    } else {
        char *all = kq_diags_join(&diags, "; ");
        if (all == NULL)
            c->nomem = true;
        else
            deny(c, 422, "ConfigMap %s/%s: %s is invalid, the running scheduler keeps its current "
                 "queues: %s", c->ns, name, key, *all != '\0' ? all : kq_strerror(rc));
        free(all);
    }
    kq_config_unref(cfg);
    kq_diags_free(&diags);
}

static void validate_elastic_quota(ctx_t *c)
{
    const kq_admission_opts_t *o = c->o;
    if (o->validate_elasticquota != NULL) {
        char msg[KQ_ADMISSION_MAX_MESSAGE];
        msg[0] = '\0';
        int rc = o->validate_elasticquota(o->elasticquota_ud, c->req, msg, sizeof(msg));
        msg[sizeof(msg) - 1] = '\0';
        if (rc < 0)
            deny(c, rc == KQ_EDENIED ? 403 : 422, "%s", *msg != '\0' ? msg : kq_strerror(rc));
        else if (*msg != '\0')
            warn(c, "%s", msg);
        return;
    }
    if (strcmp(c->op, "CREATE") == 0 || strcmp(c->op, "UPDATE") == 0)
        warn(c, "ElasticQuota %s/%s: quota tree rules not checked (kubequota does not validate "
             "ElasticQuota objects yet)", or_dash(c->ns), or_dash(c->name));
}

/* Pod CREATE of a managed pod with spec.nodeName, every requester: the pod as it will be
 * stored (uid and generated name filled in) is checked and counted (opts->reserve_pod);
 * a dry run is only checked (opts->check_pod). */
static void validate_pod(ctx_t *c)
{
    static const char *const node[] = {"spec", "nodeName"};
    const kq_admission_opts_t *o = c->o;
    if (strcmp(c->op, "CREATE") != 0 || c->obj == NULL || !managed(c, c->obj))
        return;
    const char *on = json_string_value(get_path(c->obj, node, 2));
    if (on == NULL || *on == '\0')
        return;
    bool dry = json_is_true(json_object_get(c->req, "dryRun"));
    kq_admission_pod_hook_t hook = dry ? o->check_pod : o->reserve_pod;
    void *ud = dry ? o->check_pod_ud : o->reserve_pod_ud;
    if (hook == NULL)
        return;
    char msg[KQ_ADMISSION_MAX_MESSAGE];
    msg[0] = '\0';
    int rc = hook(ud, c->obj, NULL, msg, sizeof(msg));
    msg[sizeof(msg) - 1] = '\0';
    if (rc != 0)
        deny(c, rc == KQ_EDENIED ? 403 : 500, "%s", *msg != '\0' ? msg : kq_strerror(rc));
}

static void validate(ctx_t *c)
{
    if (*c->sub != '\0')
        return;
    if (strcmp(c->group, "") == 0 && strcmp(c->kind, "Pod") == 0)
        validate_pod(c);
    else if (strcmp(c->group, "") == 0 && strcmp(c->kind, "ConfigMap") == 0)
        validate_config_map(c);
    else if (strcmp(c->kind, "ElasticQuota") == 0 &&
             (strcmp(c->group, "scheduling.x-k8s.io") == 0 || strcmp(c->group, "scheduling.sigs.k8s.io") == 0))
        validate_elastic_quota(c);
}

/* ------------------------------------------------------------------ responses */

static int error_body(int status, const char *msg, char **out, size_t *out_len)
{
    char *clean = clean_text(msg), *s = NULL;
    json_t *j = clean != NULL ? json_pack("{s:s}", "error", clean) : NULL;
    if (j != NULL)
        s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    free(clean);
    if (s == NULL)
        return KQ_ENOMEM;
    *out = s;
    *out_len = strlen(s);
    return status;
}

static char *base64(const char *s, size_t n)
{
    if (n > (size_t)INT_MAX / 2)
        return NULL;
    unsigned char *r = malloc(4 * ((n + 2) / 3) + 1);
    if (r != NULL)
        EVP_EncodeBlock(r, (const unsigned char *)s, (int)n);
    return (char *)r;
}

static int respond(ctx_t *c, char **out, size_t *out_len)
{
    int rc = KQ_ENOMEM;
    char *patch = NULL, *b64 = NULL, *s = NULL;
    json_t *root = NULL, *resp = json_object();
    if (resp == NULL ||
        json_object_set_new(resp, "uid", c->uid != NULL ? json_deep_copy(c->uid) : json_string("")) != 0 ||
        json_object_set_new(resp, "allowed", json_boolean(c->allowed)) != 0)
        goto out;
    if (c->allowed && json_array_size(c->patch) > 0) {
        if ((patch = json_dumps(c->patch, JSON_COMPACT)) == NULL ||
            (b64 = base64(patch, strlen(patch))) == NULL ||
            json_object_set_new(resp, "patchType", json_string("JSONPatch")) != 0 ||
            json_object_set_new(resp, "patch", json_string(b64)) != 0)
            goto out;
    }
    if (!c->allowed &&
        json_object_set_new(resp, "status", json_pack("{s:i, s:s}", "code", c->code, "message",
                                                      c->message != NULL ? c->message : "denied")) != 0)
        goto out;
    if (json_array_size(c->warnings) > 0 && json_object_set(resp, "warnings", c->warnings) != 0)
        goto out;
    root = json_pack("{s:s, s:s, s:O}", "apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview",
                     "response", resp);
    if (root == NULL || (s = json_dumps(root, JSON_COMPACT)) == NULL)
        goto out;
    *out = s;
    *out_len = strlen(s);
    rc = 200;
out:
    json_decref(root);
    json_decref(resp);
    free(patch);
    free(b64);
    return rc;
}

/* ------------------------------------------------------------------ public API */

static int review(const kq_admission_opts_t *o, bool mutating, const char *body, size_t len, char **out,
                  size_t *out_len)
{
    if (o == NULL || out == NULL || out_len == NULL || (body == NULL && len > 0))
        return KQ_EINVAL;
    if (len > KQ_ADMISSION_MAX_BODY) {
        char msg[128];
        snprintf(msg, sizeof(msg), "request body of %zu bytes is larger than the %u bytes accepted", len,
                 KQ_ADMISSION_MAX_BODY);
        return error_body(413, msg, out, out_len);
    }
    json_error_t je;
    json_t *root = json_loadb(body != NULL ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        char msg[256 + JSON_ERROR_TEXT_LENGTH];
        snprintf(msg, sizeof(msg), "body is not an AdmissionReview: not valid JSON: %s (line %d, column %d)",
                 je.text, je.line, je.column);
        return error_body(400, msg, out, out_len);
    }
    json_t *req = json_object_get(root, "request");
    if (!json_is_object(req)) {
        const char *why = json_is_object(root) ? "body is not an AdmissionReview: no \"request\" object"
                                               : "body is not an AdmissionReview: not a JSON object";
        json_decref(root);
        return error_body(400, why, out, out_len);
    }

    ctx_t c = {.o = o, .webhook = mutating ? "mutate" : "validate", .req = req, .allowed = true};
    const json_t *uid = json_object_get(req, "uid");
    if (json_is_string(uid) && json_string_length(uid) > 0)
        c.uid = uid;
    const json_t *kind = json_object_get(req, "kind");
    c.kind = json_string_value(json_object_get(kind, "kind"));
    c.group = json_string_value(json_object_get(kind, "group"));
    if (c.group == NULL)
        c.group = "";
    c.op = json_string_value(json_object_get(req, "operation"));
    c.sub = json_string_value(json_object_get(req, "subResource"));
    if (c.sub == NULL)
        c.sub = "";
    c.ns = json_string_value(json_object_get(req, "namespace"));
    c.name = json_string_value(json_object_get(req, "name"));
    json_t *obj = json_object_get(req, "object");
    c.obj = json_is_object(obj) ? obj : NULL;
    const json_t *old = json_object_get(req, "oldObject");
    c.old = json_is_object(old) ? old : NULL;

    const char *api = json_string_value(json_object_get(root, "apiVersion"));
    const char *rkind = json_string_value(json_object_get(root, "kind"));
    if (api == NULL || rkind == NULL || strcmp(api, "admission.k8s.io/v1") != 0 ||
        strcmp(rkind, "AdmissionReview") != 0)
        deny(&c, 400, "unsupported review: apiVersion \"%.64s\", kind \"%.64s\"; kubequota answers "
             "AdmissionReview admission.k8s.io/v1", api != NULL ? api : "", rkind != NULL ? rkind : "");
    else if (c.uid == NULL)
        deny(&c, 400, "request.uid is missing or empty");
    else if (c.kind == NULL || *c.kind == '\0')
        deny(&c, 400, "request.kind.kind is missing");
    else if (c.op == NULL || *c.op == '\0')
        deny(&c, 400, "request.operation is missing");
    else if (mutating)
        mutate(&c);
    else
        validate(&c);

    int rc = KQ_ENOMEM;
    if (!c.nomem)
        rc = respond(&c, out, out_len);
    /* who asked: parsed for mutations, read directly for validations (a rejected ConfigMap
     * edit names its author in the log) */
    const char *who = c.user != NULL ? c.user
                      : json_string_value(get_path(c.req, (const char *const[]){"userInfo", "username"}, 2));
    if (rc == 200 && !c.allowed) {
        kq_info("event=admission_denied webhook=%s uid=%s op=%s kind=%s ns=%s name=%s user=\"%s\" code=%d "
                "msg=\"%s\"", c.webhook, or_dash(json_string_value(c.uid)), or_dash(c.op), or_dash(c.kind),
                or_dash(c.ns), or_dash(c.name), or_dash(who), c.code, c.message != NULL ? c.message : "");
    } else if (rc == 200)
        kq_debug("event=admission_allowed webhook=%s uid=%s op=%s kind=%s ns=%s name=%s user=%s patch_ops=%zu "
                 "warnings=%zu", c.webhook, or_dash(json_string_value(c.uid)), or_dash(c.op), or_dash(c.kind),
                 or_dash(c.ns), or_dash(c.name), or_dash(who), json_array_size(c.patch),
                 json_array_size(c.warnings));
    else
        kq_error("event=admission_failed webhook=%s uid=%s msg=\"out of memory\"", c.webhook,
                 or_dash(json_string_value(c.uid)));
    free(c.ident);
    free(c.message);
    json_decref(c.patch);
    json_decref(c.warnings);
    json_decref(root);
    return rc;
}

int kq_admission_mutate(const kq_admission_opts_t *o, const char *body, size_t len, char **out,
                        size_t *out_len)
{
    return review(o, true, body, len, out, out_len);
}

int kq_admission_validate(const kq_admission_opts_t *o, const char *body, size_t len, char **out,
                          size_t *out_len)
{
    return review(o, false, body, len, out, out_len);
}
