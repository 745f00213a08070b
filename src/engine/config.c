/* Queue configuration: reads YuniKorn's queues.yaml format with libyaml and validates it
 * with the rules of YuniKorn's config validator, producing an immutable snapshot.
 *
 * Pipeline: bytes -> libyaml document (one pass, marks on every node) -> decode into
 * arena-allocated build nodes (strict: unknown keys, duplicate keys and wrong types are
 * errors) -> validate (names, duplicates, resources, maxapplications, limits, placement
 * rules, node sort policy) -> finalize the public kq_*_conf_t views. Every problem is
 * collected into the caller's kq_diags_t with file:line:column, the queue path and the
 * limit; a single problem rejects the whole file and nothing is returned.
 *
 * Compatibility notes (kept in step with YuniKorn's validator):
 * - a partition with several top-level queues, or one not called root, gets a root
 *   queue inserted above them; root must not set resources;
 * - queue names are case-insensitive and stored lowercase (YuniKorn lowercases them
 *   when it builds queues); paths are "root.a.b";
 * - partition limits and root limits must be equivalent when both are given; the root
 *   queue's effective limits are its own, or the partition's when it has none;
 * - a users/groups list may end in "*" after named entries (YuniKorn accepts it). The
 *   snapshot splits such a limit into a named entry and a wildcard entry so that every
 *   kq_limit_conf_t lists names only or exactly {"*"};
 * - quantities use YuniKorn's grammar (digits, optional SI/binary suffix, "m" only for
 *   vcore/cpu); "cpu" is kubequota's alias of YuniKorn's "vcore".
 * Placement rules, node sort policy, preemption and user group resolver settings are
 * parsed and validated so real files load; the engine does not use them yet.
 *
 * DESIGN: a kq_config_t is immutable after load and owns everything reachable from it
 * through one arena (freed at once) plus the per-partition path hash (uthash, keys in
 * the arena). The reference count is a C11 atomic: ref/unref are safe from any thread.
 * The holder guards only its pointer with a mutex; parsing and I/O never happen under
 * it, and the old snapshot is unreferenced after the lock is released. YAML aliases are
 * followed, but every node visit is counted against a budget and nesting is bounded,
 * so alias bombs and cycles fail cleanly instead of blowing up.
 */
#include "kubequota/engine/config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <uthash.h>
#include <yaml.h>

#include "kubequota/base/duration.h"
#include "kubequota/base/log.h"

#define CONFIG_MAX_BYTES (8u << 20)   /* largest accepted file */
#define CONFIG_MAX_VISITS 1000000u    /* node visits, counting alias re-visits */
#define CONFIG_MAX_QUEUES 50000u      /* queues per file */
#define CONFIG_MAX_QUEUE_DEPTH 64     /* queue nesting below root */
#define CONFIG_MAX_YAML_DEPTH 256     /* YAML collection nesting */
#define CONFIG_MAX_RULE_DEPTH 16      /* placement rule parent chain */
#define QUEUE_NAME_MAX 64
#define PATH_MAX_LEN (CONFIG_MAX_QUEUE_DEPTH + 2) * (QUEUE_NAME_MAX + 1)

/* ------------------------------------------------------------------------------------
 * Arena: every string and array of a snapshot lives here and dies with it.
 * ---------------------------------------------------------------------------------- */

struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

struct arena {
    struct chunk *head;
};

static void *arena_alloc(struct arena *a, size_t n)
{
    n = (n + 15u) & ~(size_t)15u;
    if (n == 0)
        n = 16;
    struct chunk *c = a->head;
    if (c == NULL || c->cap - c->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        c = malloc(sizeof(*c) + cap);
        if (c == NULL)
            return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

static char *arena_strndup(struct arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static char *arena_strdup(struct arena *a, const char *s)
{
    return arena_strndup(a, s, strlen(s));
}

static void arena_free(struct arena *a)
{
    struct chunk *c = a->head;
    while (c != NULL) {
        struct chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
}

/* ------------------------------------------------------------------------------------
 * Build nodes
 * ---------------------------------------------------------------------------------- */

struct mark {
    int line, col;
};

struct strlist {
    const char **v;
    struct mark *m;
    size_t n;
};

/* A resources map as written, and its parsed value. */
struct rawres {
    bool present;        /* key given with a non-null value */
    size_t n;            /* entries written */
    const char **keys, **vals;
    kq_resource_t res;   /* parsed (valid only when ok) */
    bool ok;
};

struct lnode {
    const char *desc;
    struct strlist users, groups;
    struct rawres maxres;
    uint64_t maxapps;
    struct mark at;
    const char *where;   /* "root.a: limit 'x'" */
};

struct llist {
    struct lnode *v;
    size_t n;
};

struct tnode {
    bool present;
    struct rawres g, m;
    kq_child_template_t pub;
};

struct qnode {
    kq_queue_conf_t pub; /* first: public pointers point here */
    bool parent_flag;    /* "parent: true" as written (root: true) */
    struct rawres g, m;
    struct tnode tmpl;   /* childtemplate as written */
    struct llist limits;
    const struct llist *eff_limits;
    struct qnode **kids;
    size_t nkids;
    struct mark name_at;
    UT_hash_handle hh;
};

struct rule {
    const char *name, *value, *ftype;
    bool create;
    struct strlist fusers, fgroups;
    struct rule *parent;
    struct mark at;
    kq_rule_conf_t pub;
};

struct pnode {
    kq_partition_conf_t pub; /* first */
    struct qnode *root;
    struct qnode *by_path;   /* uthash head, keyed by pub.path */
    struct llist limits;
    struct rule **rules;
    size_t nrules;
    struct mark at;
    const char *label;       /* "partition 'default'" */
};

struct kq_config {
    atomic_int refs;
    struct arena arena;
    struct pnode **parts;
    size_t nparts;
    size_t n_queues, n_limits;
    const char *checksum;
    char **warns;            /* arena strings; the array is malloc'ed */
    size_t nwarns;
    regex_t **regexes;       /* placement filters (arena structs, regfree'd here) */
    size_t nregexes;
};

struct ctx {
    yaml_document_t *doc;
    const char *file;
    kq_diags_t *diags;
    struct arena *ar;
    size_t visits, queues;
    size_t nerr;
    bool oom, budget_hit;
    char **warns;            /* settings accepted but not acted on (see warn_at) */
    size_t nwarns, capwarns;
    /* unknown_key: where the last search in uk_map ended (keys are reported in map order,
     * so resuming there keeps 40,000 unknown keys linear, not quadratic) */
    yaml_node_t *uk_map;
    yaml_node_pair_t *uk_next;
};

static const char *const kq_wildcard = "*";

/* ------------------------------------------------------------------------------------
 * Diagnostics
 * ---------------------------------------------------------------------------------- */

/* Errors reported one by one; beyond this a file with 200,000 unknown keys gets one line
 * saying how many more there are (the validate endpoints answer with every message). */
#define CONFIG_MAX_ERRORS 200

KQ_PRINTF(4, 5)
static void err_at(struct ctx *c, struct mark at, const char *where, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    c->nerr++;
    if (c->nerr > CONFIG_MAX_ERRORS) /* counted; reported as one line at the end */
        return;
    if (kq_diags_add(c->diags, c->file, at.line, at.col, where, "%s", buf) != 0)
        c->oom = true;
}

#define CONFIG_MAX_WARNINGS 256

/* A setting that YuniKorn accepts and kubequota does not act on: never dropped silently. */
KQ_PRINTF(4, 5)
static void warn_at(struct ctx *c, struct mark at, const char *where, const char *fmt, ...)
{
    if (c->nwarns >= CONFIG_MAX_WARNINGS)
        return;
    if (c->nwarns == c->capwarns) {
        size_t cap = c->capwarns ? c->capwarns * 2 : 8;
        char **v = realloc(c->warns, cap * sizeof(*v));
        if (v == NULL) {
            c->oom = true;
            return;
        }
        c->warns = v;
        c->capwarns = cap;
    }
    char text[1024], line[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    snprintf(line, sizeof(line), "%s:%d:%d: %s%s%s", c->file ? c->file : "config", at.line, at.col,
             where ? where : "", where ? ": " : "", text);
    char *w = arena_strdup(c->ar, line);
    if (w == NULL) {
        c->oom = true;
        return;
    }
    c->warns[c->nwarns++] = w;
}

static struct mark mark_of(const yaml_node_t *n)
{
    struct mark m = {0, 0};
    if (n != NULL) {
        m.line = (int)n->start_mark.line + 1;
        m.col = (int)n->start_mark.column + 1;
    }
    return m;
}

static void *xalloc(struct ctx *c, size_t n)
{
    void *p = arena_alloc(c->ar, n);
    if (p == NULL)
        c->oom = true;
    return p;
}

/* Resource sets of a configuration live in its arena: a set that spilled to the heap gets
 * its entries moved there, so it lives and dies with the configuration and the sets built
 * from it may share it by assignment. A pinned set is read only from then on (never grown,
 * written in place or freed). */
static void arena_pin(struct ctx *c, kq_resource_t *r)
{
    if (r->cap == 0)
        return;
    kq_res_entry_t *e = r->n > 0 ? xalloc(c, r->n * sizeof(*e)) : NULL;
    if (e != NULL)
        memcpy(e, r->heap, r->n * sizeof(*e));
    uint32_t n = r->n;
    kq_resource_free(r);
    if (e != NULL) {
        r->heap = e;
        r->cap = n;
        r->n = n;
    }
}

static const char *xstrdup(struct ctx *c, const char *s)
{
    char *p = arena_strdup(c->ar, s);
    if (p == NULL) {
        c->oom = true;
        return "";
    }
    return p;
}

KQ_PRINTF(2, 3)
static const char *xprintf(struct ctx *c, const char *fmt, ...)
{
    char buf[PATH_MAX_LEN + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return xstrdup(c, buf);
}

/* ------------------------------------------------------------------------------------
 * YAML access helpers (strict decoding, like YuniKorn's known-fields decoder)
 * ---------------------------------------------------------------------------------- */

static yaml_node_t *node_get(struct ctx *c, int idx)
{
    if (++c->visits > CONFIG_MAX_VISITS) {
        if (!c->budget_hit) {
            c->budget_hit = true;
            err_at(c, (struct mark){0, 0}, NULL,
                   "document too complex: more than %u nodes after alias expansion",
                   CONFIG_MAX_VISITS);
        }
        return NULL;
    }
    return yaml_document_get_node(c->doc, idx);
}

static const char *sval(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static bool is_plain(const yaml_node_t *n)
{
    return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ||
           n->data.scalar.style == YAML_ANY_SCALAR_STYLE;
}

static bool has_tag(const yaml_node_t *n, const char *tag)
{
    return n->tag != NULL && strcmp((const char *)n->tag, tag) == 0;
}

static bool is_null(const yaml_node_t *n)
{
    if (n == NULL)
        return true;
    if (n->type != YAML_SCALAR_NODE)
        return false;
    if (has_tag(n, YAML_NULL_TAG))
        return true;
    if (!is_plain(n))
        return false;
    const char *s = sval(n);
    return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

static const char *kind_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a scalar";
    }
}

/* A string field: any scalar; null gives NULL. */
static bool get_str(struct ctx *c, yaml_node_t *n, const char *where, const char *key,
                    const char **out)
{
    if (is_null(n)) {
        *out = NULL;
        return true;
    }
    if (n->type != YAML_SCALAR_NODE) {
        err_at(c, mark_of(n), where, "'%s' must be a string, not %s", key, kind_name(n));
        return false;
    }
    *out = xstrdup(c, sval(n));
    return true;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    const char *p = s;
    if (*p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return false;
    uint64_t v = 0;
    for (; *p; p++) {
        if (*p == '_')
            continue;
        if (!isdigit((unsigned char)*p))
            return false;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* An unsigned integer field (maxapplications): a plain integer >= 0; null gives 0. */
static bool get_u64(struct ctx *c, yaml_node_t *n, const char *where, const char *key,
                    uint64_t *out)
{
    if (is_null(n)) {
        *out = 0;
        return true;
    }
    if (n->type != YAML_SCALAR_NODE || !is_plain(n) ||
        !parse_u64(sval(n), out)) {
        if (n->type == YAML_SCALAR_NODE)
            err_at(c, mark_of(n), where, "'%s' must be a non-negative integer, not '%s'", key,
                   sval(n));
        else
            err_at(c, mark_of(n), where, "'%s' must be a non-negative integer, not %s", key,
                   kind_name(n));
        return false;
    }
    return true;
}

static bool get_bool(struct ctx *c, yaml_node_t *n, const char *where, const char *key,
                     bool *out)
{
    static const char *const yes[] = {"true", "True", "TRUE", "y", "Y", "yes", "Yes",
                                      "YES", "on", "On", "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "n", "N", "no", "No",
                                     "NO", "off", "Off", "OFF"};
    if (is_null(n)) {
        *out = false;
        return true;
    }
    if (n->type == YAML_SCALAR_NODE && is_plain(n)) {
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
            if (strcmp(sval(n), yes[i]) == 0) {
                *out = true;
                return true;
            }
            if (strcmp(sval(n), no[i]) == 0) {
                *out = false;
                return true;
            }
        }
    }
    err_at(c, mark_of(n), where, "'%s' must be true or false", key);
    return false;
}

static bool get_double(struct ctx *c, yaml_node_t *n, const char *where, const char *key,
                       double *out)
{
    if (is_null(n)) {
        *out = 0;
        return true;
    }
    if (n->type == YAML_SCALAR_NODE && is_plain(n)) {
        const char *s = sval(n);
        char *end = NULL;
        errno = 0;
        double d = strtod(s, &end);
        if (*s != '\0' && end != NULL && *end == '\0' && errno == 0 &&
            strpbrk(s, "xXnNiI") == NULL) {
            *out = d;
            return true;
        }
    }
    err_at(c, mark_of(n), where, "'%s' must be a number", key);
    return false;
}

struct keyref {
    const char *key;
    size_t pos;
    yaml_node_t *node;
};

static int keyref_cmp(const void *a, const void *b)
{
    const struct keyref *x = a, *y = b;
    int r = strcmp(x->key, y->key);
    if (r != 0)
        return r;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Checks that `n` is a mapping with scalar keys and no duplicate keys. Reports and
 * returns false otherwise. A null node is an empty mapping. */
static bool check_map(struct ctx *c, yaml_node_t *n, const char *where, const char *what)
{
    if (is_null(n))
        return true;
    if (n->type != YAML_MAPPING_NODE) {
        err_at(c, mark_of(n), where, "%s must be a mapping, not %s", what, kind_name(n));
        return false;
    }
    size_t cnt = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    if (cnt == 0)
        return true;
    struct keyref *ks = malloc(cnt * sizeof(*ks));
    if (ks == NULL) {
        c->oom = true;
        return false;
    }
    bool ok = true;
    size_t nk = 0;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_pair_t *p = &n->data.mapping.pairs.start[i];
        yaml_node_t *k = node_get(c, p->key);
        if (k == NULL) {
            ok = false;
            break;
        }
        if (k->type != YAML_SCALAR_NODE) {
            err_at(c, mark_of(k), where, "keys of %s must be strings, not %s", what,
                   kind_name(k));
            ok = false;
            continue;
        }
        if (strcmp(sval(k), "<<") == 0 && is_plain(k)) {
            err_at(c, mark_of(k), where, "YAML merge keys ('<<') are not supported");
            ok = false;
            continue;
        }
        ks[nk++] = (struct keyref){sval(k), i, k};
    }
    if (nk > 1) {
        qsort(ks, nk, sizeof(*ks), keyref_cmp);
        for (size_t i = 1; i < nk; i++) {
            if (strcmp(ks[i].key, ks[i - 1].key) == 0) {
                err_at(c, mark_of(ks[i].node), where,
                       "duplicate key '%s' in %s (first defined at line %d)", ks[i].key, what,
                       mark_of(ks[i - 1].node).line);
                ok = false;
            }
        }
    }
    free(ks);
    return ok;
}

/* Iterates over a mapping already checked with check_map. */
#define MAP_FOREACH(c, n, kname, vnode)                                                      \
    for (yaml_node_pair_t *p_##kname = (n) != NULL && (n)->type == YAML_MAPPING_NODE         \
                                           ? (n)->data.mapping.pairs.start                   \
                                           : NULL;                                           \
         p_##kname != NULL && p_##kname < (n)->data.mapping.pairs.top; p_##kname++)          \
        for (yaml_node_t *k_##kname = node_get((c), p_##kname->key),                         \
                         *vnode = node_get((c), p_##kname->value);                           \
             k_##kname != NULL && vnode != NULL && k_##kname->type == YAML_SCALAR_NODE;      \
             k_##kname = NULL)                                                               \
            for (const char *kname = sval(k_##kname); kname != NULL; kname = NULL)

static void unknown_key(struct ctx *c, yaml_node_t *map, const char *key, const char *where,
                        const char *what, const char *known)
{
    struct mark at = mark_of(map);
    /* point at the key itself: search on from where the last search in this map ended
     * (callers report keys in map order), then from the start */
    yaml_node_pair_t *start = map->data.mapping.pairs.start, *top = map->data.mapping.pairs.top;
    yaml_node_pair_t *from = c->uk_map == map && c->uk_next >= start && c->uk_next <= top ? c->uk_next : start;
    for (int pass = 0; pass < 2; pass++) {
        yaml_node_pair_t *p = pass == 0 ? from : start, *end = pass == 0 ? top : from;
        for (; p < end; p++) {
            yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
            if (k != NULL && k->type == YAML_SCALAR_NODE && strcmp(sval(k), key) == 0) {
                at = mark_of(k);
                c->uk_map = map;
                c->uk_next = p + 1;
                pass = 2;
                break;
            }
        }
    }
    err_at(c, at, where, "unknown key '%s' in %s (known keys: %s)", key, what, known);
}

/* A list of strings; null is empty. */
static bool get_strlist(struct ctx *c, yaml_node_t *n, const char *where, const char *key,
                        struct strlist *out)
{
    memset(out, 0, sizeof(*out));
    if (is_null(n))
        return true;
    if (n->type != YAML_SEQUENCE_NODE) {
        err_at(c, mark_of(n), where, "'%s' must be a list of strings, not %s", key,
               kind_name(n));
        return false;
    }
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    out->v = xalloc(c, (cnt + 1) * sizeof(*out->v));
    out->m = xalloc(c, (cnt + 1) * sizeof(*out->m));
    if (out->v == NULL || out->m == NULL)
        return false;
    bool ok = true;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *it = node_get(c, n->data.sequence.items.start[i]);
        if (it == NULL)
            return false;
        const char *s = NULL;
        if (!get_str(c, it, where, key, &s)) {
            ok = false;
            continue;
        }
        out->v[out->n] = s ? s : "";
        out->m[out->n] = mark_of(it);
        out->n++;
    }
    return ok;
}

/* ------------------------------------------------------------------------------------
 * Names and quantities
 * ---------------------------------------------------------------------------------- */

static bool queue_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > QUEUE_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (!isalnum(ch) && strchr("_:#/@-", ch) == NULL)
            return false;
    }
    return true;
}

/* first char [_a-zA-Z], then [a-zA-Z0-9] plus `extra`; optional trailing '$' if allowed */
static bool ident_ok(const char *s, const char *extra, bool dollar_end)
{
    unsigned char ch = (unsigned char)s[0];
    if (!(ch == '_' || (ch < 128 && isalpha(ch))))
        return false;
    size_t n = strlen(s);
    if (dollar_end && n > 1 && s[n - 1] == '$')
        n--;
    for (size_t i = 1; i < n; i++) {
        ch = (unsigned char)s[i];
        if (!(ch < 128 && isalnum(ch)) && strchr(extra, ch) == NULL)
            return false;
    }
    return true;
}

static bool user_name_ok(const char *s)
{
    return ident_ok(s, ":#/_.@-", true);
}

static bool group_name_ok(const char *s)
{
    return ident_ok(s, ":_.-", false);
}

static bool is_cpu(const char *name)
{
    const char *canon = kq_resource_name(name);
    return canon != NULL && canon == kq_resource_name("cpu");
}

static bool is_go_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* YuniKorn's quantity grammar: digits, optional blanks, optional suffix from
 * k M G T P E Ki Mi Gi Ti Pi Ei ("m" for cpu only). Then the resource module
 * converts to canonical units (and catches overflow). */
static int parse_conf_quantity(const char *name, const char *raw, int64_t *out, char *why,
                               size_t whylen)
{
    static const char *const suffixes[] = {"", "k", "M", "G", "T", "P", "E",
                                           "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    const char *s = raw, *e = raw + strlen(raw);
    while (s < e && is_go_space(*s))
        s++;
    while (e > s && is_go_space(e[-1]))
        e--;
    const char *d = s;
    while (d < e && isdigit((unsigned char)*d))
        d++;
    if (d == s) {
        snprintf(why, whylen, "not a whole number with an optional unit suffix");
        return KQ_EPARSE;
    }
    const char *sfx = d;
    while (sfx < e && is_go_space(*sfx))
        sfx++;
    size_t sl = (size_t)(e - sfx);
    bool known = false;
    if (sl == 1 && *sfx == 'm') {
        if (!is_cpu(name)) {
            snprintf(why, whylen, "suffix 'm' is only valid for vcore/cpu");
            return KQ_EPARSE;
        }
        known = true;
    }
    for (size_t i = 0; !known && i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
        known = strlen(suffixes[i]) == sl && strncmp(suffixes[i], sfx, sl) == 0;
    if (!known || (size_t)(d - s) > 40) {
        snprintf(why, whylen, known ? "too many digits" : "unknown unit suffix '%.*s'",
                 (int)(sl > 8 ? 8 : sl), sfx);
        return known ? KQ_ERANGE : KQ_EPARSE;
    }
    char norm[64];
    snprintf(norm, sizeof(norm), "%.*s%.*s", (int)(d - s), s, (int)sl, sfx);
    char rwhy[128] = "";
    int rc = kq_quantity_parse_whole(name, norm, out, rwhy, sizeof(rwhy));
    if (rc != 0)
        snprintf(why, whylen, "%s", rwhy[0] ? rwhy : kq_strerror(rc));
    return rc;
}

/* A resources map (name -> quantity). */
static bool get_res(struct ctx *c, yaml_node_t *n, const char *where, const char *key,
                    struct rawres *out)
{
    memset(out, 0, sizeof(*out));
    out->ok = true;
    if (is_null(n))
        return true;
    if (!check_map(c, n, where, key)) {
        out->ok = false;
        return false;
    }
    out->present = true;
    size_t cnt = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    out->keys = xalloc(c, (cnt + 1) * sizeof(char *));
    out->vals = xalloc(c, (cnt + 1) * sizeof(char *));
    if (out->keys == NULL || out->vals == NULL) {
        out->ok = false;
        return false;
    }
    MAP_FOREACH(c, n, rname, v)
    {
        const char *q = NULL;
        if (!get_str(c, v, where, rname, &q)) {
            out->ok = false;
            continue;
        }
        out->keys[out->n] = xstrdup(c, rname);
        out->vals[out->n] = q ? q : "";
        out->n++;
        char why[160];
        int64_t val = 0;
        if (kq_resource_name(rname) == NULL) {
            err_at(c, mark_of(v), where, "%s: invalid resource name '%s'", key, rname);
            out->ok = false;
            continue;
        }
        if (parse_conf_quantity(rname, q ? q : "", &val, why, sizeof(why)) != 0) {
            err_at(c, mark_of(v), where, "%s: invalid quantity '%s' for %s: %s", key,
                   q ? q : "", rname, why);
            out->ok = false;
            continue;
        }
        bool present = false;
        (void)kq_resource_get(&out->res, rname, &present);
        if (present) {
            err_at(c, mark_of(v), where, "%s: resource '%s' is given twice (under two names)",
                   key, rname);
            out->ok = false;
            continue;
        }
        if (kq_resource_set(&out->res, rname, val) != 0) {
            c->oom = true;
            out->ok = false;
        }
    }
    arena_pin(c, &out->res);
    return out->ok;
}

/* Properties map: string -> string. */
static bool get_props(struct ctx *c, yaml_node_t *n, const char *where, kq_property_t **out,
                      size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (is_null(n))
        return true;
    if (!check_map(c, n, where, "properties"))
        return false;
    size_t cnt = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    kq_property_t *v = xalloc(c, (cnt + 1) * sizeof(*v));
    if (v == NULL)
        return false;
    bool ok = true;
    MAP_FOREACH(c, n, key, val)
    {
        const char *s = NULL;
        if (!get_str(c, val, where, key, &s)) {
            ok = false;
            continue;
        }
        v[*nout].key = xstrdup(c, key);
        v[*nout].value = s ? s : "";
        (*nout)++;
    }
    *out = v;
    return ok;
}

/* Formats "memory 20Gi" for the first entry of `a` over `max`; false when a fits. */
static bool first_over(const kq_resource_t *a, const kq_resource_t *max, char *abuf,
                       size_t alen, char *mbuf, size_t mlen)
{
    for (uint32_t i = 0; i < a->n; i++) {
        bool present = false;
        int64_t m = kq_resource_get(max, KQ_RES_E(a)[i].name, &present);
        if (present && KQ_RES_E(a)[i].value > m) {
            char q[64];
            kq_quantity_format(KQ_RES_E(a)[i].name, KQ_RES_E(a)[i].value, q, sizeof(q));
            snprintf(abuf, alen, "%s %s", KQ_RES_E(a)[i].name, q);
            kq_quantity_format(KQ_RES_E(a)[i].name, m, mbuf, mlen);
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------------------------
 * Decoding
 * ---------------------------------------------------------------------------------- */

static void decode_limit(struct ctx *c, yaml_node_t *n, const char *owner, size_t idx,
                         struct lnode *l)
{
    memset(l, 0, sizeof(*l));
    l->at = mark_of(n);
    l->maxres.ok = true;
    l->where = xprintf(c, "%s: limit #%zu", owner, idx + 1);
    if (!check_map(c, n, l->where, "a limit"))
        return;
    /* the description first, so every later message names the limit */
    MAP_FOREACH(c, n, key, v)
    {
        if (strcmp(key, "limit") == 0 && get_str(c, v, l->where, key, &l->desc) && l->desc)
            l->where = xprintf(c, "%s: limit '%s'", owner, l->desc);
    }
    MAP_FOREACH(c, n, key, v)
    {
        if (strcmp(key, "limit") == 0)
            continue;
        else if (strcmp(key, "users") == 0)
            (void)get_strlist(c, v, l->where, key, &l->users);
        else if (strcmp(key, "groups") == 0)
            (void)get_strlist(c, v, l->where, key, &l->groups);
        else if (strcmp(key, "maxresources") == 0)
            (void)get_res(c, v, l->where, "maxresources", &l->maxres);
        else if (strcmp(key, "maxapplications") == 0)
            (void)get_u64(c, v, l->where, key, &l->maxapps);
        else
            unknown_key(c, n, key, l->where, "limit",
                        "limit, users, groups, maxresources, maxapplications");
    }
}

static void decode_limits(struct ctx *c, yaml_node_t *n, const char *owner, struct llist *out)
{
    memset(out, 0, sizeof(*out));
    if (is_null(n))
        return;
    if (n->type != YAML_SEQUENCE_NODE) {
        err_at(c, mark_of(n), owner, "'limits' must be a list, not %s", kind_name(n));
        return;
    }
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    out->v = xalloc(c, (cnt + 1) * sizeof(*out->v));
    if (out->v == NULL)
        return;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *it = node_get(c, n->data.sequence.items.start[i]);
        if (it == NULL)
            return;
        decode_limit(c, it, owner, i, &out->v[out->n++]);
    }
}

static void lower(char *s)
{
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

static void decode_resources(struct ctx *c, yaml_node_t *n, const char *where,
                             struct rawres *g, struct rawres *m)
{
    if (!check_map(c, n, where, "resources"))
        return;
    MAP_FOREACH(c, n, key, v)
    {
        if (strcmp(key, "guaranteed") == 0)
            (void)get_res(c, v, where, "guaranteed", g);
        else if (strcmp(key, "max") == 0)
            (void)get_res(c, v, where, "max", m);
        else
            unknown_key(c, n, key, where, "resources", "guaranteed, max");
    }
}

/* childtemplate: YuniKorn checks the quantities only when a dynamic queue is created
 * from it; kubequota checks them at load, so a bad template is reported where it is
 * written instead of failing placements later. */
static void decode_child_template(struct ctx *c, yaml_node_t *n, const char *where, struct tnode *t)
{
    if (is_null(n))
        return;
    if (!check_map(c, n, where, "childtemplate"))
        return;
    t->present = true;
    t->g.ok = t->m.ok = true;
    t->pub.line = mark_of(n).line;
    t->pub.column = mark_of(n).col;
    MAP_FOREACH(c, n, key, v)
    {
        if (strcmp(key, "maxapplications") == 0) {
            (void)get_u64(c, v, where, "childtemplate.maxapplications", &t->pub.max_applications);
        } else if (strcmp(key, "properties") == 0) {
            kq_property_t *p = NULL;
            (void)get_props(c, v, where, &p, &t->pub.n_properties);
            t->pub.properties = p;
        } else if (strcmp(key, "resources") == 0) {
            if (is_null(v) || !check_map(c, v, where, "childtemplate.resources"))
                continue;
            MAP_FOREACH(c, v, rk, rv)
            {
                if (strcmp(rk, "guaranteed") == 0)
                    (void)get_res(c, rv, where, "childtemplate.resources.guaranteed", &t->g);
                else if (strcmp(rk, "max") == 0)
                    (void)get_res(c, rv, where, "childtemplate.resources.max", &t->m);
                else
                    unknown_key(c, v, rk, where, "childtemplate.resources", "guaranteed, max");
            }
        } else {
            unknown_key(c, n, key, where, "childtemplate",
                        "maxapplications, properties, resources");
        }
    }
    t->pub.has_guaranteed = t->g.ok && t->g.present && t->g.n > 0;
    t->pub.guaranteed = t->g.res;
    t->pub.has_max = t->m.ok && t->m.present && t->m.n > 0;
    t->pub.max = t->m.res;
    if (t->pub.has_guaranteed)
        warn_at(c, mark_of(n), where,
                "childtemplate.resources.guaranteed is not used by kubequota: dynamic queues get "
                "the template's max and maxapplications only");
    for (size_t i = 0; i < t->pub.n_properties; i++)
        warn_at(c, mark_of(n), where, "childtemplate.properties.%s is not used by kubequota",
                t->pub.properties[i].key);
}

static struct qnode *decode_queue(struct ctx *c, yaml_node_t *n, struct qnode *up,
                                  const char *ppath, unsigned depth);

static void decode_queue_list(struct ctx *c, yaml_node_t *n, struct qnode *q, unsigned depth)
{
    if (is_null(n))
        return;
    if (n->type != YAML_SEQUENCE_NODE) {
        err_at(c, mark_of(n), q->pub.path, "'queues' must be a list, not %s", kind_name(n));
        return;
    }
    if (depth > CONFIG_MAX_QUEUE_DEPTH) {
        err_at(c, mark_of(n), q->pub.path, "queues are nested more than %d levels deep",
               CONFIG_MAX_QUEUE_DEPTH);
        return;
    }
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    q->kids = xalloc(c, (cnt + 1) * sizeof(*q->kids));
    if (q->kids == NULL)
        return;
    for (size_t i = 0; i < cnt && !c->oom && !c->budget_hit; i++) {
        yaml_node_t *it = node_get(c, n->data.sequence.items.start[i]);
        if (it == NULL)
            return;
        struct qnode *k = decode_queue(c, it, q, q->pub.path, depth);
        if (k != NULL)
            q->kids[q->nkids++] = k;
    }
}

/* Decodes one queue mapping. `ppath` is the parent's path (NULL for a top queue). */
static struct qnode *decode_queue(struct ctx *c, yaml_node_t *n, struct qnode *up,
                                  const char *ppath, unsigned depth)
{
    if (++c->queues > CONFIG_MAX_QUEUES) {
        if (!c->budget_hit) {
            c->budget_hit = true;
            err_at(c, mark_of(n), ppath, "document too complex: more than %u queues",
                   CONFIG_MAX_QUEUES);
        }
        return NULL;
    }
    struct qnode *q = xalloc(c, sizeof(*q));
    if (q == NULL)
        return NULL;
    q->pub.line = mark_of(n).line;
    q->pub.column = mark_of(n).col;
    q->name_at = mark_of(n);
    q->pub.parent = up ? &up->pub : NULL;
    q->pub.depth = depth;
    q->g.ok = q->m.ok = true;
    const char *where = ppath ? ppath : "queues";
    if (!check_map(c, n, where, "a queue"))
        return NULL;
    const char *name = NULL;
    MAP_FOREACH(c, n, key, v)
    {
        if (strcmp(key, "name") == 0) {
            (void)get_str(c, v, where, key, &name);
            q->name_at = mark_of(v);
        }
    }
    char *lname = arena_strdup(c->ar, name ? name : "");
    if (lname == NULL) {
        c->oom = true;
        return NULL;
    }
    lower(lname);
    q->pub.name = lname;
    q->pub.path = ppath ? xprintf(c, "%s.%s", ppath, lname) : lname;
    where = q->pub.path;
    yaml_node_t *queues = NULL, *limits = NULL;
    MAP_FOREACH(c, n, key, v)
    {
        if (strcmp(key, "name") == 0) {
            continue;
        } else if (strcmp(key, "parent") == 0) {
            (void)get_bool(c, v, where, key, &q->parent_flag);
        } else if (strcmp(key, "resources") == 0) {
            decode_resources(c, v, where, &q->g, &q->m);
        } else if (strcmp(key, "maxapplications") == 0) {
            (void)get_u64(c, v, where, key, &q->pub.max_applications);
        } else if (strcmp(key, "properties") == 0) {
            kq_property_t *p = NULL;
            (void)get_props(c, v, where, &p, &q->pub.n_properties);
            q->pub.properties = p;
        } else if (strcmp(key, "adminacl") == 0) {
            (void)get_str(c, v, where, key, &q->pub.admin_acl);
        } else if (strcmp(key, "submitacl") == 0) {
            (void)get_str(c, v, where, key, &q->pub.submit_acl);
        } else if (strcmp(key, "childtemplate") == 0) {
            decode_child_template(c, v, where, &q->tmpl);
        } else if (strcmp(key, "queues") == 0) {
            queues = v;
        } else if (strcmp(key, "limits") == 0) {
            limits = v;
        } else {
            unknown_key(c, n, key, where, "queue",
                        "name, parent, resources, maxapplications, properties, adminacl, "
                        "submitacl, childtemplate, queues, limits");
        }
    }
    if (limits != NULL)
        decode_limits(c, limits, where, &q->limits);
    if (queues != NULL)
        decode_queue_list(c, queues, q, depth + 1);
    return q;
}

static struct rule *decode_rule(struct ctx *c, yaml_node_t *n, const char *where,
                                unsigned depth)
{
    struct rule *r = xalloc(c, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->at = mark_of(n);
    if (depth > CONFIG_MAX_RULE_DEPTH) {
        err_at(c, r->at, where, "placement rule parents nested more than %d deep",
               CONFIG_MAX_RULE_DEPTH);
        return NULL;
    }
    if (!check_map(c, n, where, "a placement rule"))
        return NULL;
    MAP_FOREACH(c, n, key, v)
    {
        if (strcmp(key, "name") == 0) {
            (void)get_str(c, v, where, key, &r->name);
        } else if (strcmp(key, "create") == 0) {
            (void)get_bool(c, v, where, key, &r->create);
        } else if (strcmp(key, "value") == 0) {
            (void)get_str(c, v, where, key, &r->value);
        } else if (strcmp(key, "parent") == 0) {
            if (!is_null(v))
                r->parent = decode_rule(c, v, where, depth + 1);
        } else if (strcmp(key, "filter") == 0) {
            if (!check_map(c, v, where, "filter"))
                continue;
            MAP_FOREACH(c, v, fk, fv)
            {
                if (strcmp(fk, "type") == 0)
                    (void)get_str(c, fv, where, "filter.type", &r->ftype);
                else if (strcmp(fk, "users") == 0)
                    (void)get_strlist(c, fv, where, "filter.users", &r->fusers);
                else if (strcmp(fk, "groups") == 0)
                    (void)get_strlist(c, fv, where, "filter.groups", &r->fgroups);
                else
                    unknown_key(c, v, fk, where, "filter", "type, users, groups");
            }
        } else {
            unknown_key(c, n, key, where, "placement rule", "name, create, filter, parent, value");
        }
    }
    if (r->name == NULL)
        r->name = "";
    if (r->value == NULL)
        r->value = "";
    if (r->ftype == NULL)
        r->ftype = "";
    return r;
}

static void decode_partition(struct ctx *c, yaml_node_t *n, struct pnode *p, size_t idx,
                             yaml_node_t **queues_out, bool *has_queues)
{
    p->at = mark_of(n);
    const char *where = xprintf(c, "partition #%zu", idx + 1);
    p->label = where;
    *has_queues = false;
    *queues_out = NULL;
    if (!check_map(c, n, where, "a partition"))
        return;
    const char *name = NULL;
    MAP_FOREACH(c, n, key, v)
    {
        if (strcmp(key, "name") == 0)
            (void)get_str(c, v, where, key, &name);
    }
    if (name == NULL || name[0] == '\0' || strcasecmp(name, "default") == 0)
        name = "default";
    p->pub.name = name;
    p->label = where = xprintf(c, "partition '%s'", name);
    MAP_FOREACH(c, n, key, v)
    {
        if (strcmp(key, "name") == 0) {
            continue;
        } else if (strcmp(key, "queues") == 0) {
            if (!is_null(v)) {
                *has_queues = true;
                *queues_out = v;
            }
        } else if (strcmp(key, "limits") == 0) {
            decode_limits(c, v, where, &p->limits);
        } else if (strcmp(key, "placementrules") == 0) {
            if (is_null(v))
                continue;
            if (v->type != YAML_SEQUENCE_NODE) {
                err_at(c, mark_of(v), where, "'placementrules' must be a list, not %s",
                       kind_name(v));
                continue;
            }
            size_t cnt = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
            p->rules = xalloc(c, (cnt + 1) * sizeof(*p->rules));
            if (p->rules == NULL)
                continue;
            for (size_t i = 0; i < cnt; i++) {
                yaml_node_t *it = node_get(c, v->data.sequence.items.start[i]);
                if (it == NULL)
                    break;
                const char *rw = xprintf(c, "%s: placement rule #%zu", name, i + 1);
                struct rule *r = decode_rule(c, it, rw, 0);
                if (r != NULL)
                    p->rules[p->nrules++] = r;
            }
        } else if (strcmp(key, "preemption") == 0) {
            if (!check_map(c, v, where, "preemption"))
                continue;
            MAP_FOREACH(c, v, pk, pv)
            {
                bool b;
                if (strcmp(pk, "enabled") == 0) {
                    (void)get_bool(c, pv, where, pk, &b);
                } else if (strcmp(pk, "quotapreemptionenabled") == 0) {
                    if (get_bool(c, pv, where, pk, &b))
                        p->pub.quota_preemption_enabled = b;
                }
                else
                    unknown_key(c, v, pk, where, "preemption",
                                "enabled, quotapreemptionenabled");
            }
        } else if (strcmp(key, "nodesortpolicy") == 0) {
            if (!check_map(c, v, where, "nodesortpolicy"))
                continue;
            warn_at(c, mark_of(v), where, "nodesortpolicy is not used by kubequota (kube-scheduler "
                    "chooses nodes)");
            MAP_FOREACH(c, v, pk, pv)
            {
                if (strcmp(pk, "type") == 0) {
                    const char *t = NULL;
                    if (get_str(c, pv, where, pk, &t) && t != NULL && t[0] != '\0' &&
                        strcmp(t, "fair") != 0 && strcmp(t, "binpacking") != 0)
                        err_at(c, mark_of(pv), where,
                               "undefined node sort policy '%s' (use fair or binpacking)", t);
                } else if (strcmp(pk, "resourceweights") == 0) {
                    if (!check_map(c, pv, where, "resourceweights"))
                        continue;
                    MAP_FOREACH(c, pv, wk, wv)
                    {
                        double d = 0;
                        if (get_double(c, wv, where, wk, &d) && d < 0)
                            err_at(c, mark_of(wv), where,
                                   "negative resource weight for %s is not allowed", wk);
                    }
                } else {
                    unknown_key(c, v, pk, where, "nodesortpolicy", "type, resourceweights");
                }
            }
        } else if (strcmp(key, "usergroupresolver") == 0) {
            if (!check_map(c, v, where, "usergroupresolver"))
                continue;
            warn_at(c, mark_of(v), where, "usergroupresolver is not used by kubequota (groups come "
                    "from the pod's user-info annotation)");
            MAP_FOREACH(c, v, pk, pv)
            {
                const char *t;
                if (strcmp(pk, "type") == 0)
                    (void)get_str(c, pv, where, pk, &t);
                else
                    unknown_key(c, v, pk, where, "usergroupresolver", "type");
            }
        } else {
            unknown_key(c, n, key, where, "partition",
                        "name, queues, placementrules, limits, preemption, nodesortpolicy, "
                        "usergroupresolver");
        }
    }
}

/* Builds the queue tree of a partition: the top-level list, with root inserted when it
 * is not a single queue called root. */
static void build_tree(struct ctx *c, struct pnode *p, yaml_node_t *queues)
{
    const char *where = p->label;
    if (queues->type != YAML_SEQUENCE_NODE) {
        err_at(c, mark_of(queues), where, "'queues' must be a list, not %s", kind_name(queues));
        return;
    }
    size_t cnt = (size_t)(queues->data.sequence.items.top - queues->data.sequence.items.start);
    if (cnt == 1) {
        yaml_node_t *only = node_get(c, queues->data.sequence.items.start[0]);
        if (only == NULL)
            return;
        /* peek at the name: a single top queue called root (any case) is the root */
        bool is_root = false;
        if (only->type == YAML_MAPPING_NODE) {
            MAP_FOREACH(c, only, key, v)
            {
                if (strcmp(key, "name") == 0 && v->type == YAML_SCALAR_NODE &&
                    strcasecmp(sval(v), "root") == 0)
                    is_root = true;
            }
        }
        if (is_root) {
            p->root = decode_queue(c, only, NULL, NULL, 0);
            if (p->root != NULL)
                p->root->parent_flag = true;
            return;
        }
    }
    struct qnode *r = xalloc(c, sizeof(*r));
    if (r == NULL)
        return;
    r->pub.name = r->pub.path = "root";
    r->pub.line = mark_of(queues).line;
    r->pub.column = mark_of(queues).col;
    r->name_at = mark_of(queues);
    r->parent_flag = true;
    r->g.ok = r->m.ok = true;
    decode_queue_list(c, queues, r, 1);
    p->root = r;
}

/* ------------------------------------------------------------------------------------
 * Validation
 * ---------------------------------------------------------------------------------- */

static void check_acl(struct ctx *c, struct qnode *q, const char *acl, const char *key)
{
    if (acl == NULL)
        return;
    size_t fields = 0;
    const char *s = acl;
    while (*s) {
        while (*s && isspace((unsigned char)*s))
            s++;
        if (*s == '\0')
            break;
        fields++;
        while (*s && !isspace((unsigned char)*s))
            s++;
    }
    if (fields > 2)
        err_at(c, (struct mark){q->pub.line, q->pub.column}, q->pub.path,
               "%s '%s' has more than two space-separated parts (users groups)", key, acl);
}

/* Per-queue limit checks (YuniKorn checkLimit) over the queue's effective limit list. */
static void check_queue_limits(struct ctx *c, struct qnode *q)
{
    const struct llist *ls = q->eff_limits;
    if (ls == NULL || ls->n == 0)
        return;
    /* names seen so far on this queue: sets kept as small arrays (limits lists are
     * short); wildcard flags tracked separately */
    size_t total_u = 0, total_g = 0;
    for (size_t i = 0; i < ls->n; i++) {
        total_u += ls->v[i].users.n;
        total_g += ls->v[i].groups.n;
    }
    struct seen {
        const char *name;
        UT_hash_handle hh;
    } *users = NULL, *groups = NULL;
    struct seen *pool = calloc(total_u + total_g + 1, sizeof(*pool));
    if (pool == NULL) {
        c->oom = true;
        return;
    }
    size_t used = 0, named_groups = 0;
    bool user_wild = false, group_wild = false;
    for (size_t i = 0; i < ls->n; i++) {
        const struct lnode *l = &ls->v[i];
        if (l->users.n == 0 && l->groups.n == 0)
            err_at(c, l->at, l->where, "limit has empty users and groups lists");
        for (size_t j = 0; j < l->users.n; j++) {
            const char *u = l->users.v[j];
            struct seen *s = NULL;
            if (strcmp(u, "*") != 0 && !user_name_ok(u)) {
                err_at(c, l->users.m[j], l->where, "invalid user name '%s'", u);
                continue;
            }
            HASH_FIND_STR(users, u, s);
            if (s != NULL) {
                err_at(c, l->users.m[j], l->where,
                       "duplicate user '%s': already limited on this queue", u);
                continue;
            }
            s = &pool[used++];
            s->name = u;
            HASH_ADD_KEYPTR(hh, users, s->name, strlen(s->name), s);
            if (strcmp(u, "*") == 0)
                user_wild = true;
            else if (user_wild)
                err_at(c, l->users.m[j], l->where,
                       "user '%s' follows the wildcard user limit: '*' must be the last "
                       "user limit of the queue", u);
        }
        for (size_t j = 0; j < l->groups.n; j++) {
            const char *g = l->groups.v[j];
            struct seen *s = NULL;
            if (strcmp(g, "*") != 0 && !group_name_ok(g)) {
                err_at(c, l->groups.m[j], l->where, "invalid group name '%s'", g);
                continue;
            }
            HASH_FIND_STR(groups, g, s);
            if (s != NULL) {
                err_at(c, l->groups.m[j], l->where,
                       "duplicate group '%s': already limited on this queue", g);
                continue;
            }
            s = &pool[used++];
            s->name = g;
            HASH_ADD_KEYPTR(hh, groups, s->name, strlen(s->name), s);
            if (strcmp(g, "*") == 0) {
                group_wild = true;
                if (named_groups == 0)
                    err_at(c, l->groups.m[j], l->where,
                           "a wildcard group limit cannot be the only group limit: limit at "
                           "least one named group on the queue first");
            } else {
                named_groups++;
                if (group_wild)
                    err_at(c, l->groups.m[j], l->where,
                           "group '%s' follows the wildcard group limit: '*' must be the last "
                           "group limit of the queue", g);
            }
        }
        if (l->maxres.present && l->maxres.n > 0 && l->maxres.ok) {
            bool positive = false;
            for (uint32_t k = 0; k < l->maxres.res.n; k++)
                positive |= KQ_RES_E(&l->maxres.res)[k].value > 0;
            if (!positive)
                err_at(c, l->at, l->where, "maxresources must be greater than zero");
        }
        if (l->maxapps == 0 && l->maxres.n == 0)
            err_at(c, l->at, l->where,
                   "limit must set maxapplications or maxresources (both are unset or 0)");
        if (q->pub.max_applications != 0 && q->pub.max_applications < l->maxapps)
            err_at(c, l->at, l->where,
                   "maxapplications %llu exceeds the queue's maxapplications %llu",
                   (unsigned long long)l->maxapps,
                   (unsigned long long)q->pub.max_applications);
        if (q->pub.depth > 0 && l->maxres.ok && q->m.ok && q->m.present) {
            char a[128], m[64];
            if (first_over(&l->maxres.res, &q->m.res, a, sizeof(a), m, sizeof(m)))
                err_at(c, l->at, l->where, "maxresources %s exceeds queue max %s", a, m);
        }
    }
    HASH_CLEAR(hh, users);
    HASH_CLEAR(hh, groups);
    free(pool);
}

/* ---- elastic quota properties (see config.h) ---- */

/* Into r (initialised; the caller frees it on error too). */
static int parse_list(const char *text, kq_resource_t *r, char *err, size_t errlen)
{
    const char *p = text ? text : "";
    while (*p != '\0') {
        while (*p == ',' || *p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        size_t n = strcspn(p, ", \t");
        const char *eq = memchr(p, '=', n);
        if (eq == NULL || eq == p || (size_t)(eq - p) > KQ_RES_NAME_MAX || n - (size_t)(eq - p) - 1 == 0 ||
            n - (size_t)(eq - p) - 1 > KQ_QUANTITY_MAX) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "expected name=quantity, got \"%.*s\"", (int)(n > 64 ? 64 : n), p);
            return KQ_EPARSE;
        }
        char name[KQ_RES_NAME_MAX + 1], qty[KQ_QUANTITY_MAX + 1], why[128] = "";
        memcpy(name, p, (size_t)(eq - p));
        name[eq - p] = '\0';
        size_t ql = n - (size_t)(eq - p) - 1;
        memcpy(qty, eq + 1, ql);
        qty[ql] = '\0';
        const char *iname = kq_resource_name(name);
        int64_t v;
        int rc;
        if (iname == NULL) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "\"%s\" is not a valid resource name", name);
            return KQ_EPARSE;
        }
        if ((rc = kq_quantity_parse(iname, qty, &v, why, sizeof(why))) != 0) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "%s: %s", name, why);
            return rc;
        }
        bool dup = false;
        (void)kq_resource_get(r, iname, &dup);
        if (dup) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "%s is given twice", name);
            return KQ_EPARSE;
        }
        if (kq_resource_set(r, iname, v) != 0) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "out of memory");
            return KQ_ENOMEM;
        }
        p += n;
    }
    return 0;
}

int kq_config_parse_resource_list(const char *text, kq_resource_t *out, char *err, size_t errlen)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    int rc = parse_list(text, &r, err, errlen);
    if (rc == 0)
        kq_resource_move(out, &r);
    kq_resource_free(&r);
    return rc;
}

/* kubequota.io/gating.weight.user.<name> / .group.<name> (docs/gating.md), a name after the dot. */
static bool is_gating_weight(const char *key)
{
    static const char *const pre[] = {KQ_PROP_GATING_WEIGHT_USER, KQ_PROP_GATING_WEIGHT_GROUP};
    for (size_t i = 0; i < 2; i++)
        if (strncmp(key, pre[i], strlen(pre[i])) == 0 && key[strlen(pre[i])] != '\0')
            return true;
    return false;
}

static void check_elastic_props(struct ctx *c, struct qnode *q)
{
    struct mark at = {q->pub.line, q->pub.column};
    for (size_t i = 0; i < q->pub.n_properties; i++) {
        const kq_property_t *pr = &q->pub.properties[i];
        if (strcmp(pr->key, KQ_PROP_SHARED_WEIGHT) == 0) {
            kq_resource_t w = KQ_RESOURCE_EMPTY;
            char why[256];
            if (kq_config_parse_resource_list(pr->value, &w, why, sizeof(why)) != 0)
                err_at(c, at, q->pub.path, "property %s: %s (expected e.g. \"cpu=4,memory=8Gi\")",
                       KQ_PROP_SHARED_WEIGHT, why);
            kq_resource_free(&w);
        } else if (strcmp(pr->key, KQ_PROP_ALLOW_LENT) == 0) {
            if (strcmp(pr->value, "true") != 0 && strcmp(pr->value, "false") != 0)
                err_at(c, at, q->pub.path, "property %s: expected \"true\" or \"false\", got \"%.64s\"",
                       KQ_PROP_ALLOW_LENT, pr->value);
        } else if (strcmp(pr->key, KQ_PROP_GATING_POLICY) == 0) {
            if (strcmp(pr->value, "fair") != 0 && strcmp(pr->value, "usage") != 0)
                err_at(c, at, q->pub.path, "property %s: expected \"fair\" or \"usage\" (the admission gate's "
                       "order), got \"%.64s\"", KQ_PROP_GATING_POLICY, pr->value);
        } else if (strcmp(pr->key, KQ_PROP_GATING_HALFLIFE) == 0) {
            long ms = 0;
            char why[160];
            if (kq_duration_parse(pr->value, 0, &ms, why, sizeof(why)) != 0)
                err_at(c, at, q->pub.path, "property %s: %s (the half-life of the admission gate's usage history: "
                       "up to 168h; \"0\" keeps none)", KQ_PROP_GATING_HALFLIFE, why);
        } else if (is_gating_weight(pr->key)) {
            char *end = NULL;
            double w = strtod(pr->value, &end);
            if (end == pr->value || *end != '\0' || !(w > 0) || w > 1e6)
                err_at(c, at, q->pub.path, "property %.200s: expected a number above 0 and at most 1000000 "
                       "(a weight in the admission gate's fair order), got \"%.64s\"", pr->key, pr->value);
        }
    }
}

static void check_queues(struct ctx *c, struct pnode *p, struct qnode *q)
{
    check_elastic_props(c, q);
    check_acl(c, q, q->pub.admin_acl, "adminacl");
    check_acl(c, q, q->pub.submit_acl, "submitacl");
    check_queue_limits(c, q);
    for (size_t i = 0; i < q->nkids; i++) {
        struct qnode *k = q->kids[i];
        if (!queue_name_ok(k->pub.name)) {
            err_at(c, k->name_at, q->pub.path,
                   "invalid queue name '%s': use 1 to 64 of a-z A-Z 0-9 _ : # / @ -",
                   k->pub.name);
            continue;
        }
        struct qnode *dup = NULL;
        HASH_FIND_STR(p->by_path, k->pub.path, dup);
        if (dup != NULL) {
            err_at(c, k->name_at, q->pub.path,
                   "duplicate queue name '%s' (names are case-insensitive; first defined at "
                   "line %d)", k->pub.name, dup->name_at.line);
            continue;
        }
        HASH_ADD_KEYPTR(hh, p->by_path, k->pub.path, strlen(k->pub.path), k);
    }
    for (size_t i = 0; i < q->nkids; i++)
        check_queues(c, p, q->kids[i]);
}

/* guaranteed <= max, max <= parent max, sum of children's guaranteed within guaranteed and
 * max. Returns the guaranteed this queue accounts for towards its parent. */
static kq_resource_t check_qres(struct ctx *c, struct qnode *q, const kq_resource_t *pmax)
{
    kq_resource_t g = q->g.ok ? q->g.res : KQ_RESOURCE_EMPTY;
    kq_resource_t m = q->m.ok ? q->m.res : KQ_RESOURCE_EMPTY;
    struct mark at = {q->pub.line, q->pub.column};
    char a[128], b[64];
    if (first_over(&g, &m, a, sizeof(a), b, sizeof(b)))
        err_at(c, at, q->pub.path, "guaranteed %s exceeds max %s", a, b);
    if (pmax != NULL && first_over(&m, pmax, a, sizeof(a), b, sizeof(b)))
        err_at(c, at, q->pub.path, "max %s exceeds the parent's max %s", a, b);
    /* g and m share the arena's entries (arena_pin): read only. eff and sum are this
     * function's; the set it returns is pinned. */
    kq_resource_t eff = KQ_RESOURCE_EMPTY;
    if (kq_resource_copy(&eff, &m) != 0 || (pmax != NULL && kq_resource_min(&eff, &m, pmax) != 0))
        c->oom = true;
    kq_resource_t sum = KQ_RESOURCE_EMPTY;
    bool sum_ok = true;
    for (size_t i = 0; i < q->nkids; i++) {
        kq_resource_t kg = check_qres(c, q->kids[i], &eff);
        if (sum_ok && kq_resource_add(&sum, &kg) != 0) {
            err_at(c, at, q->pub.path, "sum of the children's guaranteed resources overflows");
            sum_ok = false;
        }
    }
    if (sum_ok && first_over(&sum, &g, a, sizeof(a), b, sizeof(b)))
        err_at(c, at, q->pub.path,
               "sum of the children's guaranteed %s exceeds the queue's guaranteed %s", a, b);
    if (sum_ok && first_over(&sum, &eff, a, sizeof(a), b, sizeof(b)))
        err_at(c, at, q->pub.path, "sum of the children's guaranteed %s exceeds max %s", a, b);
    kq_resource_free(&eff);
    if (!kq_resource_is_zero(&g)) {
        kq_resource_free(&sum);
        return g;
    }
    arena_pin(c, &sum);
    return sum;
}

static void check_qapps(struct ctx *c, struct qnode *q)
{
    for (size_t i = 0; i < q->nkids; i++) {
        struct qnode *k = q->kids[i];
        if (q->pub.max_applications != 0) {
            if (k->pub.max_applications == 0)
                err_at(c, (struct mark){k->pub.line, k->pub.column}, k->pub.path,
                       "maxapplications must be set: the parent queue sets maxapplications %llu",
                       (unsigned long long)q->pub.max_applications);
            else if (k->pub.max_applications > q->pub.max_applications)
                err_at(c, (struct mark){k->pub.line, k->pub.column}, k->pub.path,
                       "maxapplications %llu exceeds the parent's maxapplications %llu",
                       (unsigned long long)k->pub.max_applications,
                       (unsigned long long)q->pub.max_applications);
        }
        check_qapps(c, k);
    }
}

/* Limits carried down the hierarchy: a binding per (kind, name), with an undo stack. */
struct binding {
    char key[KQ_RES_NAME_MAX + 8]; /* "u:name" / "g:name" */
    kq_resource_t res;
    uint64_t apps;
    UT_hash_handle hh;
};

struct undo {
    struct binding *b;
    bool existed;
    kq_resource_t res;
    uint64_t apps;
};

struct carry {
    struct binding *map;
    struct undo *stack;
    size_t n, cap;
};

static struct binding *carry_find(struct carry *cr, char kind, const char *name)
{
    char key[KQ_RES_NAME_MAX + 8];
    snprintf(key, sizeof(key), "%c:%s", kind, name);
    struct binding *b = NULL;
    HASH_FIND_STR(cr->map, key, b);
    return b;
}

static void check_one_carry(struct ctx *c, struct carry *cr, const struct lnode *l, char kind,
                            const char *name, struct mark at, kq_resource_t *res_out,
                            uint64_t *apps_out)
{
    const char *what = kind == 'u' ? "user" : "group";
    kq_resource_t lim = l->maxres.ok ? l->maxres.res : KQ_RESOURCE_EMPTY; /* pinned: shared */
    *res_out = lim; /* pinned too, or a new set pinned below */
    *apps_out = l->maxapps;
    struct binding *b = carry_find(cr, kind, name);
    bool via_wild = false;
    if (b == NULL && strcmp(name, "*") != 0) {
        b = carry_find(cr, kind, "*");
        via_wild = b != NULL;
    }
    if (b == NULL)
        return;
    char a[128], m[64];
    if (first_over(&lim, &b->res, a, sizeof(a), m, sizeof(m))) {
        if (via_wild)
            err_at(c, at, l->where,
                   "%s '%s' maxresources %s exceeds %s set for all %ss ('*') on a parent "
                   "queue", what, name, a, m, what);
        else
            err_at(c, at, l->where,
                   "%s '%s' maxresources %s exceeds %s set for the same %s on a parent queue",
                   what, name, a, m, what);
    }
    if (!via_wild) {
        kq_resource_t eff = KQ_RESOURCE_EMPTY;
        if (kq_resource_min(&eff, &lim, &b->res) != 0)
            c->oom = true;
        arena_pin(c, &eff);
        *res_out = eff;
    }
    if (b->apps != 0 && (l->maxapps == 0 || l->maxapps > b->apps)) {
        if (l->maxapps == 0)
            err_at(c, at, l->where,
                   "%s '%s' has no maxapplications here but a parent queue limits %s to %llu",
                   what, name, via_wild ? "every one ('*')" : "it",
                   (unsigned long long)b->apps);
        else
            err_at(c, at, l->where,
                   "%s '%s' maxapplications %llu exceeds %llu set for %s on a parent queue",
                   what, name, (unsigned long long)l->maxapps, (unsigned long long)b->apps,
                   via_wild ? "all of them ('*')" : "the same name");
    }
}

static void carry_set(struct ctx *c, struct carry *cr, char kind, const char *name,
                      const kq_resource_t *res, uint64_t apps)
{
    if (cr->n == cr->cap) {
        size_t cap = cr->cap ? cr->cap * 2 : 32;
        struct undo *s = realloc(cr->stack, cap * sizeof(*s));
        if (s == NULL) {
            c->oom = true;
            return;
        }
        cr->stack = s;
        cr->cap = cap;
    }
    struct binding *b = carry_find(cr, kind, name);
    struct undo *u = &cr->stack[cr->n];
    if (b != NULL) {
        u->existed = true;
        u->res = b->res;
        u->apps = b->apps;
    } else {
        b = calloc(1, sizeof(*b));
        if (b == NULL) {
            c->oom = true;
            return;
        }
        snprintf(b->key, sizeof(b->key), "%c:%s", kind, name);
        HASH_ADD_STR(cr->map, key, b);
        u->existed = false;
    }
    u->b = b;
    b->res = *res;
    b->apps = apps;
    cr->n++;
}

static void carry_pop(struct carry *cr, size_t to)
{
    while (cr->n > to) {
        struct undo *u = &cr->stack[--cr->n];
        if (u->existed) {
            u->b->res = u->res;
            u->b->apps = u->apps;
        } else {
            HASH_DEL(cr->map, u->b);
            free(u->b);
        }
    }
}

static void check_carry(struct ctx *c, struct carry *cr, struct qnode *q)
{
    size_t mark = cr->n;
    const struct llist *ls = q->eff_limits;
    size_t cnt = 0;
    for (size_t i = 0; ls != NULL && i < ls->n; i++)
        cnt += ls->v[i].users.n + ls->v[i].groups.n;
    /* check everything against the parents' bindings first, then bind this level */
    struct pending {
        char kind;
        const char *name;
        kq_resource_t res;
        uint64_t apps;
    } *pend = cnt ? calloc(cnt, sizeof(*pend)) : NULL;
    if (cnt && pend == NULL) {
        c->oom = true;
        return;
    }
    size_t np = 0;
    for (size_t i = 0; ls != NULL && i < ls->n; i++) {
        const struct lnode *l = &ls->v[i];
        for (size_t j = 0; j < l->users.n; j++, np++) {
            pend[np].kind = 'u';
            pend[np].name = l->users.v[j];
            check_one_carry(c, cr, l, 'u', l->users.v[j], l->users.m[j], &pend[np].res,
                            &pend[np].apps);
        }
        for (size_t j = 0; j < l->groups.n; j++, np++) {
            pend[np].kind = 'g';
            pend[np].name = l->groups.v[j];
            check_one_carry(c, cr, l, 'g', l->groups.v[j], l->groups.m[j], &pend[np].res,
                            &pend[np].apps);
        }
    }
    for (size_t i = 0; i < np; i++)
        carry_set(c, cr, pend[i].kind, pend[i].name, &pend[i].res, pend[i].apps);
    free(pend);
    for (size_t i = 0; i < q->nkids; i++)
        check_carry(c, cr, q->kids[i]);
    carry_pop(cr, mark);
}

static bool strlist_eq(const struct strlist *a, const struct strlist *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0)
            return false;
    return true;
}

static bool limits_equivalent(const struct llist *a, const struct llist *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        const struct lnode *x = &a->v[i], *y = &b->v[i];
        if (strcmp(x->desc ? x->desc : "", y->desc ? y->desc : "") != 0 ||
            !strlist_eq(&x->users, &y->users) || !strlist_eq(&x->groups, &y->groups) ||
            x->maxapps != y->maxapps || x->maxres.present != y->maxres.present ||
            x->maxres.n != y->maxres.n)
            return false;
        for (size_t k = 0; k < x->maxres.n; k++) {
            bool found = false;
            for (size_t j = 0; j < y->maxres.n && !found; j++)
                found = strcmp(x->maxres.keys[k], y->maxres.keys[j]) == 0 &&
                        strcmp(x->maxres.vals[k], y->maxres.vals[j]) == 0;
            if (!found)
                return false;
        }
    }
    return true;
}

/* --- placement rules -------------------------------------------------------------- */

static bool has_regex_special(const char *s)
{
    return strpbrk(s, "^$*+?()[{}|") != NULL;
}

static bool regex_compiles(const char *s)
{
    regex_t re;
    if (regcomp(&re, s, REG_EXTENDED | REG_NOSUB) != 0)
        return false;
    regfree(&re);
    return true;
}

static void check_rule_syntax(struct ctx *c, const struct rule *r, const char *where)
{
    if (!ident_ok(r->name, "_", false))
        err_at(c, r->at, where, "invalid placement rule name '%s': must be an identifier",
               r->name);
    /* the checks of YuniKorn's rule initialise (pkg/scheduler/placement/rule.go newRule,
     * fixed_rule.go, tag_rule.go): YuniKorn's placement manager refuses such a rule set */
    else if (strcasecmp(r->name, "recovery") == 0)
        err_at(c, r->at, where, "the recovery rule is implicit and cannot be configured");
    else if (strcasecmp(r->name, "provided") != 0 && strcasecmp(r->name, "user") != 0 &&
             strcasecmp(r->name, "fixed") != 0 && strcasecmp(r->name, "tag") != 0)
        err_at(c, r->at, where, "unknown placement rule '%s' (use provided, user, fixed or tag): YuniKorn's "
               "validator passes the name, but its scheduler cannot build the rule and refuses the rule set",
               r->name);
    else if ((strcasecmp(r->name, "fixed") == 0 || strcasecmp(r->name, "tag") == 0) &&
             r->value[0] == '\0')
        err_at(c, r->at, where, "a %s rule needs a value (%s)", r->name,
               strcasecmp(r->name, "fixed") == 0 ? "the queue" : "the tag name");
    else if (strcasecmp(r->name, "fixed") == 0) {
        char v[PATH_MAX_LEN];
        snprintf(v, sizeof(v), "%s", r->value);
        lower(v);
        bool ok = true;
        for (char *sp = v, *tok; ok && (tok = strsep(&sp, ".")) != NULL;)
            ok = queue_name_ok(tok);
        if (!ok)
            err_at(c, r->at, where, "fixed rule value '%s' is not a valid queue path", r->value);
        else if (strncasecmp(r->value, "root", 4) == 0 && r->parent != NULL)
            err_at(c, r->at, where, "a fixed rule with a fully qualified queue ('%s') cannot have a "
                   "parent rule", r->value);
    }
    if (r->parent != NULL)
        check_rule_syntax(c, r->parent, where);
    if (r->ftype[0] != '\0' && strcasecmp(r->ftype, "allow") != 0 &&
        strcasecmp(r->ftype, "deny") != 0)
        err_at(c, r->at, where, "invalid filter type '%s': use allow or deny", r->ftype);
    if (r->fusers.n == 1) {
        const char *u = r->fusers.v[0];
        if (!user_name_ok(u) && (!regex_compiles(u) || !has_regex_special(u)))
            err_at(c, r->fusers.m[0], where,
                   "filter users entry '%s' is neither a user name nor a regular expression", u);
    }
    if (r->fgroups.n == 1) {
        const char *g = r->fgroups.v[0];
        if (!group_name_ok(g) && (!regex_compiles(g) || !has_regex_special(g)))
            err_at(c, r->fgroups.m[0], where,
                   "filter groups entry '%s' is neither a group name nor a regular expression",
                   g);
    }
}

enum { PL_OK, PL_NONEXIST, PL_NOT_LEAF, PL_LAST_LEAF };

static int placement_walk(char **parts, size_t np, bool create, bool dynamic,
                          struct qnode *const *list, size_t nlist, const struct qnode *parent,
                          const char **last)
{
    for (;;) {
        if (nlist == 0) {
            if (parent != NULL && !parent->parent_flag) {
                *last = parent->pub.name;
                return PL_LAST_LEAF;
            }
            return create ? PL_OK : PL_NONEXIST;
        }
        const struct qnode *found = NULL;
        for (size_t i = 0; i < nlist && found == NULL; i++)
            if (strcmp(list[i]->pub.name, parts[0]) == 0)
                found = list[i];
        if (found == NULL)
            return create ? PL_OK : PL_NONEXIST;
        if (np == 1) {
            if (dynamic)
                return found->parent_flag ? PL_OK : PL_NOT_LEAF;
            return found->parent_flag ? PL_NOT_LEAF : PL_OK;
        }
        parts++;
        np--;
        list = found->kids;
        nlist = found->nkids;
        parent = found;
    }
}

static void check_placement(struct ctx *c, struct pnode *p)
{
    for (size_t i = 0; i < p->nrules; i++) {
        const struct rule *r = p->rules[i];
        const char *where = xprintf(c, "%s: placement rule #%zu", p->pub.name, i + 1);
        check_rule_syntax(c, r, where);
        /* the chain from the outermost parent down to this rule */
        const struct rule *chain[CONFIG_MAX_RULE_DEPTH + 2];
        size_t n = 0;
        for (const struct rule *x = r; x != NULL && n < CONFIG_MAX_RULE_DEPTH + 2; x = x->parent)
            chain[n++] = x;
        char path[PATH_MAX_LEN], names[512] = "";
        path[0] = '\0';
        bool dynamic = false, bad = false;
        for (size_t k = n; k-- > 0;) {
            const struct rule *x = chain[k];
            size_t nl = strlen(names);
            snprintf(names + nl, sizeof(names) - nl, "%s%s", nl ? "->" : "", x->name);
            if (dynamic)
                continue;
            if (strcmp(x->name, "fixed") != 0) {
                if (path[0] == '\0')
                    snprintf(path, sizeof(path), "<dynamic>");
                dynamic = true;
                continue;
            }
            if (strncmp(x->value, "root", 4) == 0) {
                if (path[0] != '\0') {
                    err_at(c, x->at, where,
                           "illegal fully qualified 'fixed' rule with value '%s': only the first "
                           "fixed rule of a chain may start at root", x->value);
                    bad = true;
                    break;
                }
                snprintf(path, sizeof(path), "%s", x->value);
                continue;
            }
            size_t pl = strlen(path);
            snprintf(path + pl, sizeof(path) - pl, "%s.%s", pl ? "" : "root", x->value);
        }
        if (bad || strncmp(path, "root", 4) != 0)
            continue;
        char lp[PATH_MAX_LEN];
        snprintf(lp, sizeof(lp), "%s", path);
        lower(lp);
        char *parts[PATH_MAX_LEN / 2];
        size_t np = 0;
        for (char *s = lp, *tok; (tok = strsep(&s, ".")) != NULL && np < PATH_MAX_LEN / 2;)
            parts[np++] = tok;
        const char *last = "";
        struct qnode *top[1] = {p->root};
        int res = placement_walk(parts, np, r->create, dynamic, top, 1, NULL, &last);
        if (res == PL_NOT_LEAF && dynamic)
            err_at(c, r->at, where,
                   "placement rule (%s) places below queue %s, which must then be a parent "
                   "queue (parent: true)", names, path);
        else if (res == PL_NOT_LEAF)
            err_at(c, r->at, where, "placement rule (%s) references queue %s which is not a leaf",
                   names, path);
        else if (res == PL_NONEXIST)
            err_at(c, r->at, where,
                   "placement rule (%s) references non-existing queues (%s) and create is false",
                   names, path);
        else if (res == PL_LAST_LEAF)
            err_at(c, r->at, where,
                   "placement rule (%s) references non-existing queues (%s) that cannot be "
                   "created below the leaf queue '%s'", names, path, last);
    }
}

/* ------------------------------------------------------------------------------------
 * Finalize: public views
 * ---------------------------------------------------------------------------------- */

static void split_kinds(const struct lnode *l, bool *named, bool *wild)
{
    *named = *wild = false;
    for (size_t i = 0; i < l->users.n; i++)
        *(strcmp(l->users.v[i], "*") == 0 ? wild : named) = true;
    for (size_t i = 0; i < l->groups.n; i++)
        *(strcmp(l->groups.v[i], "*") == 0 ? wild : named) = true;
}

static size_t split_count(const struct lnode *l)
{
    bool named, wild;
    split_kinds(l, &named, &wild);
    return (size_t)named + (size_t)wild;
}

static void fill_entry(struct ctx *c, kq_limit_conf_t *e, const struct lnode *l, bool wild)
{
    e->description = l->desc;
    e->max_applications = l->maxapps;
    e->has_max_resources = l->maxres.n > 0;
    e->max_resources = l->maxres.res;
    e->line = l->at.line;
    e->column = l->at.col;
    const char **u = xalloc(c, (l->users.n + 1) * sizeof(char *));
    const char **g = xalloc(c, (l->groups.n + 1) * sizeof(char *));
    if (u == NULL || g == NULL)
        return;
    for (size_t i = 0; i < l->users.n; i++)
        if ((strcmp(l->users.v[i], "*") == 0) == wild)
            u[e->n_users++] = wild ? kq_wildcard : l->users.v[i];
    for (size_t i = 0; i < l->groups.n; i++)
        if ((strcmp(l->groups.v[i], "*") == 0) == wild)
            g[e->n_groups++] = wild ? kq_wildcard : l->groups.v[i];
    e->users = u;
    e->groups = g;
}

static const kq_limit_conf_t *build_limits(struct ctx *c, const struct llist *ls, size_t *n)
{
    *n = 0;
    if (ls == NULL || ls->n == 0)
        return NULL;
    size_t total = 0;
    for (size_t i = 0; i < ls->n; i++)
        total += split_count(&ls->v[i]);
    kq_limit_conf_t *v = xalloc(c, (total + 1) * sizeof(*v));
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < ls->n; i++) {
        const struct lnode *l = &ls->v[i];
        bool named, wild;
        split_kinds(l, &named, &wild);
        if (named)
            fill_entry(c, &v[(*n)++], l, false);
        if (wild)
            fill_entry(c, &v[(*n)++], l, true);
    }
    return v;
}

/* The admission gate's usage policy ranks by the share of the resources.max on a queue's
 * path (parents are finalized first): without any, it falls back to cpu, said at load. */
static void check_gating_caps(struct ctx *c, struct qnode *q, struct mark at)
{
    const char *pol = NULL;
    bool capped = false;
    for (const kq_queue_conf_t *a = &q->pub; a != NULL; a = a->parent) {
        for (size_t i = 0; pol == NULL && i < a->n_properties; i++)
            if (strcmp(a->properties[i].key, KQ_PROP_GATING_POLICY) == 0)
                pol = a->properties[i].value;
        capped = capped || a->has_max;
    }
    if (pol != NULL && strcmp(pol, "usage") == 0 && !capped)
        warn_at(c, at, q->pub.path, "%s: usage, but no resources.max on this queue's path: the admission gate "
                "ranks its users by cpu (memory when no cpu) instead of a dominant share", KQ_PROP_GATING_POLICY);
}

static size_t finalize_queue(struct ctx *c, struct qnode *q, const kq_child_template_t *inherited)
{
    q->pub.is_parent = q->parent_flag || q->nkids > 0;
    struct mark qat = {q->pub.line, q->pub.column};
    if (q->tmpl.present && !q->pub.is_parent)
        warn_at(c, qat, q->pub.path, "childtemplate on a leaf queue has no effect (no dynamic "
                "queue can be created below a leaf)");
    if (q->pub.is_parent)
        q->pub.child_template = q->tmpl.present ? &q->tmpl.pub : inherited;
    for (size_t i = 0; i < q->pub.n_properties; i++) {
        const char *k = q->pub.properties[i].key;
        if (strcmp(k, KQ_PROP_SHARED_WEIGHT) != 0 && strcmp(k, KQ_PROP_ALLOW_LENT) != 0 &&
            !is_gating_weight(k) && strcmp(k, KQ_PROP_GATING_POLICY) != 0 && /* read by gating.c */
            strcmp(k, KQ_PROP_GATING_HALFLIFE) != 0 &&
            strcmp(k, "quota.preemption.delay") != 0) /* read by elastic.c's reclaim */
            warn_at(c, qat, q->pub.path, "properties.%s is not used by kubequota (shown in the "
                    "queue view only)", k);
    }
    q->pub.has_guaranteed = q->g.present && q->g.n > 0;
    q->pub.guaranteed = q->g.res;
    q->pub.has_max = q->m.present && q->m.n > 0;
    q->pub.max = q->m.res;
    q->pub.limits = build_limits(c, q->eff_limits, &q->pub.n_limits);
    if (!q->pub.is_parent)
        check_gating_caps(c, q, qat);
    const kq_queue_conf_t **kids = xalloc(c, (q->nkids + 1) * sizeof(*kids));
    if (kids == NULL)
        return 0;
    size_t count = 1;
    for (size_t i = 0; i < q->nkids; i++) {
        kids[i] = &q->kids[i]->pub;
        count += finalize_queue(c, q->kids[i], q->pub.child_template);
    }
    q->pub.children = kids;
    q->pub.n_children = q->nkids;
    return count;
}

static const regex_t *compile_filter(struct ctx *c, kq_config_t *cfg, const struct strlist *l)
{
    if (l->n != 1 || !has_regex_special(l->v[0]))
        return NULL;
    regex_t *re = xalloc(c, sizeof(*re));
    if (re == NULL)
        return NULL;
    /* YuniKorn ignores an entry that does not compile (the loader already reported it) */
    if (regcomp(re, l->v[0], REG_EXTENDED | REG_NOSUB) != 0)
        return NULL;
    regex_t **v = realloc(cfg->regexes, (cfg->nregexes + 1) * sizeof(*v));
    if (v == NULL) {
        regfree(re);
        c->oom = true;
        return NULL;
    }
    cfg->regexes = v;
    cfg->regexes[cfg->nregexes++] = re;
    return re;
}

static const kq_rule_conf_t *finalize_rule(struct ctx *c, kq_config_t *cfg, struct rule *r)
{
    kq_rule_conf_t *o = &r->pub;
    char *name = (char *)xstrdup(c, r->name), *value = (char *)xstrdup(c, r->value);
    lower(name);
    lower(value);
    o->name = name;
    o->value = value;
    o->create = r->create;
    o->filter_deny = strcasecmp(r->ftype, "deny") == 0;
    o->filter_set = r->fusers.n > 0 || r->fgroups.n > 0;
    o->filter_users = r->fusers.v;
    o->n_filter_users = r->fusers.n;
    o->filter_groups = r->fgroups.v;
    o->n_filter_groups = r->fgroups.n;
    o->filter_user_re = compile_filter(c, cfg, &r->fusers);
    o->filter_group_re = compile_filter(c, cfg, &r->fgroups);
    o->parent = r->parent ? finalize_rule(c, cfg, r->parent) : NULL;
    o->line = r->at.line;
    o->column = r->at.col;
    return o;
}

static void finalize_rules(struct ctx *c, kq_config_t *cfg, struct pnode *p)
{
    const kq_rule_conf_t **v = xalloc(c, (p->nrules + 1) * sizeof(*v));
    if (v == NULL)
        return;
    for (size_t i = 0; i < p->nrules; i++)
        v[i] = finalize_rule(c, cfg, p->rules[i]);
    p->pub.rules = v;
    p->pub.n_rules = p->nrules;
}

static size_t count_written_limits(const struct qnode *q)
{
    size_t n = q->limits.n;
    for (size_t i = 0; i < q->nkids; i++)
        n += count_written_limits(q->kids[i]);
    return n;
}

/* ------------------------------------------------------------------------------------
 * Loading
 * ---------------------------------------------------------------------------------- */

static void config_free(kq_config_t *cfg)
{
    for (size_t i = 0; i < cfg->nparts; i++)
        HASH_CLEAR(hh, cfg->parts[i]->by_path);
    for (size_t i = 0; i < cfg->nregexes; i++)
        regfree(cfg->regexes[i]);
    free(cfg->regexes);
    free(cfg->warns);
    arena_free(&cfg->arena);
    free(cfg);
}

static void decode_top(struct ctx *c, kq_config_t *cfg, yaml_node_t *top)
{
    if (!check_map(c, top, NULL, "the configuration"))
        return;
    yaml_node_t *parts = NULL;
    MAP_FOREACH(c, top, key, v)
    {
        if (strcmp(key, "partitions") == 0)
            parts = v;
        else if (strcmp(key, "checksum") == 0)
            (void)get_str(c, v, NULL, key, &cfg->checksum);
        else
            unknown_key(c, top, key, NULL, "the configuration", "partitions, checksum");
    }
    if (is_null(parts))
        return;
    if (parts->type != YAML_SEQUENCE_NODE) {
        err_at(c, mark_of(parts), NULL, "'partitions' must be a list, not %s", kind_name(parts));
        return;
    }
    size_t cnt = (size_t)(parts->data.sequence.items.top - parts->data.sequence.items.start);
    cfg->parts = xalloc(c, (cnt + 1) * sizeof(*cfg->parts));
    if (cfg->parts == NULL)
        return;
    for (size_t i = 0; i < cnt && !c->oom && !c->budget_hit; i++) {
        yaml_node_t *pn = node_get(c, parts->data.sequence.items.start[i]);
        if (pn == NULL)
            return;
        struct pnode *p = xalloc(c, sizeof(*p));
        if (p == NULL)
            return;
        yaml_node_t *queues = NULL;
        bool has_queues = false;
        decode_partition(c, pn, p, i, &queues, &has_queues);
        if (p->pub.name == NULL)
            continue; /* not a mapping: already reported */
        for (size_t j = 0; j < cfg->nparts; j++) {
            if (strcasecmp(cfg->parts[j]->pub.name, p->pub.name) == 0) {
                err_at(c, p->at, p->label, "duplicate partition name '%s'", p->pub.name);
                break;
            }
        }
        cfg->parts[cfg->nparts++] = p;
        if (!has_queues) {
            err_at(c, p->at, p->label, "partition has no queues (a root queue is required)");
            continue;
        }
        build_tree(c, p, queues);
    }
}

static void set_eff_limits(struct qnode *q)
{
    if (q->eff_limits == NULL)
        q->eff_limits = &q->limits;
    for (size_t i = 0; i < q->nkids; i++)
        set_eff_limits(q->kids[i]);
}

static void validate_partition(struct ctx *c, struct pnode *p)
{
    struct qnode *root = p->root;
    if (root == NULL)
        return;
    if (root->g.present || root->m.present)
        err_at(c, (struct mark){root->pub.line, root->pub.column}, "root",
               "the root queue must not set resources (guaranteed or max)");
    root->eff_limits = &root->limits;
    if (p->limits.n > 0) {
        if (root->limits.n > 0 && !limits_equivalent(&p->limits, &root->limits))
            err_at(c, p->limits.v[0].at, p->label,
                   "partition limits and root queue limits are not equivalent: set them in one "
                   "place");
        if (root->limits.n == 0)
            root->eff_limits = &p->limits;
    }
    /* non-root queues use their own limits */
    set_eff_limits(root);
    HASH_ADD_KEYPTR(hh, p->by_path, root->pub.path, strlen(root->pub.path), root);
    check_queues(c, p, root);
    (void)check_qres(c, root, NULL);
    check_qapps(c, root);
    struct carry cr = {0};
    check_carry(c, &cr, root);
    carry_pop(&cr, 0);
    free(cr.stack);
    check_placement(c, p);
}

/* Pre-pass over the event stream of the first document: bounds collection nesting
 * before the composer runs (libyaml's cost grows quadratically with flow nesting, and
 * nothing legitimate in a queues file nests deeply). Returns false after reporting. */
static bool check_nesting(const char *buf, size_t len, const char *name, kq_diags_t *diags,
                          bool *oom)
{
    yaml_parser_t ps;
    if (!yaml_parser_initialize(&ps)) {
        *oom = true;
        return false;
    }
    yaml_parser_set_input_string(&ps, (const unsigned char *)buf, len);
    bool ok = true;
    int depth = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&ps, &ev))
            break; /* syntax errors are reported by the real load */
        yaml_event_type_t t = ev.type;
        if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
            if (++depth > CONFIG_MAX_YAML_DEPTH) {
                if (kq_diags_add(diags, name, (int)ev.start_mark.line + 1,
                                 (int)ev.start_mark.column + 1, NULL,
                                 "YAML nesting deeper than %d levels", CONFIG_MAX_YAML_DEPTH) != 0)
                    *oom = true;
                ok = false;
            }
        } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        yaml_event_delete(&ev);
        if (!ok || t == YAML_DOCUMENT_END_EVENT || t == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&ps);
    return ok;
}

int kq_config_load_buffer(const char *buf, size_t len, const char *name, kq_config_t **out,
                          kq_diags_t *diags)
{
    int rc = KQ_EPARSE;
    yaml_parser_t parser;
    yaml_document_t doc;
    bool parser_init = false, doc_init = false;
    kq_config_t *cfg = NULL;
    struct ctx c = {.file = name, .diags = diags};

    if (buf == NULL || out == NULL || diags == NULL)
        return KQ_EINVAL;
    if (len > CONFIG_MAX_BYTES) {
        (void)kq_diags_add(diags, name, 0, 0, NULL, "file is too large (%zu bytes, at most %u)",
                           len, CONFIG_MAX_BYTES);
        return KQ_EPARSE;
    }
    cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL)
        return KQ_ENOMEM;
    atomic_init(&cfg->refs, 1);
    c.ar = &cfg->arena;

    if (!check_nesting(buf, len, name, diags, &c.oom)) {
        rc = c.oom ? KQ_ENOMEM : KQ_EPARSE;
        goto out;
    }
    if (!yaml_parser_initialize(&parser)) {
        rc = KQ_ENOMEM;
        goto out;
    }
    parser_init = true;
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &doc)) {
        const yaml_mark_t *m = parser.problem ? &parser.problem_mark : &parser.context_mark;
        (void)kq_diags_add(diags, name, (int)m->line + 1, (int)m->column + 1, NULL,
                           "YAML syntax error: %s%s%s",
                           parser.problem ? parser.problem : "unknown problem",
                           parser.context ? " " : "", parser.context ? parser.context : "");
        goto out;
    }
    doc_init = true;
    c.doc = &doc;
    yaml_node_t *top = yaml_document_get_root_node(&doc);
    if (top != NULL && !is_null(top)) {
        c.visits++;
        decode_top(&c, cfg, top);
    }
    if (c.oom) {
        rc = KQ_ENOMEM;
        goto out;
    }
    if (!c.budget_hit) {
        for (size_t i = 0; i < cfg->nparts; i++) {
            struct pnode *p = cfg->parts[i];
            validate_partition(&c, p);
        }
    }
    if (c.oom) {
        rc = KQ_ENOMEM;
        goto out;
    }
    if (c.nerr > CONFIG_MAX_ERRORS &&
        kq_diags_add(diags, name, 0, 0, NULL, "%zu more errors not shown (only the first %d are listed)",
                     c.nerr - CONFIG_MAX_ERRORS, CONFIG_MAX_ERRORS) != 0) {
        rc = KQ_ENOMEM;
        goto out;
    }
    if (c.nerr > 0)
        goto out;

    for (size_t i = 0; i < cfg->nparts; i++) {
        struct pnode *p = cfg->parts[i];
        p->pub.root = &p->root->pub;
        p->pub.n_queues = finalize_queue(&c, p->root, NULL);
        finalize_rules(&c, cfg, p);
        p->pub.limits = build_limits(&c, &p->limits, &p->pub.n_limits);
        cfg->n_queues += p->pub.n_queues;
        cfg->n_limits += p->limits.n + count_written_limits(p->root);
    }
    if (c.oom) {
        rc = KQ_ENOMEM;
        goto out;
    }
    cfg->warns = c.warns;
    cfg->nwarns = c.nwarns;
    c.warns = NULL;
    *out = cfg;
    cfg = NULL;
    rc = 0;
out:
    free(c.warns);
    if (doc_init)
        yaml_document_delete(&doc);
    if (parser_init)
        yaml_parser_delete(&parser);
    if (cfg != NULL)
        config_free(cfg);
    return rc;
}

int kq_config_load_file(const char *path, kq_config_t **out, kq_diags_t *diags)
{
    int rc = KQ_EIO;
    char *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        (void)kq_diags_add(diags, path, 0, 0, NULL, "cannot open: %s", strerror(errno));
        return KQ_EIO;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode) && S_ISDIR(st.st_mode)) {
        (void)kq_diags_add(diags, path, 0, 0, NULL, "cannot read: is a directory");
        goto out;
    }
    buf = malloc(CONFIG_MAX_BYTES + 1);
    if (buf == NULL) {
        rc = KQ_ENOMEM;
        goto out;
    }
    size_t len = fread(buf, 1, CONFIG_MAX_BYTES + 1, f);
    if (ferror(f)) {
        (void)kq_diags_add(diags, path, 0, 0, NULL, "cannot read: %s", strerror(errno));
        goto out;
    }
    if (len > CONFIG_MAX_BYTES) {
        (void)kq_diags_add(diags, path, 0, 0, NULL, "file is too large (more than %u bytes)",
                           CONFIG_MAX_BYTES);
        rc = KQ_EPARSE;
        goto out;
    }
    rc = kq_config_load_buffer(buf, len, path, out, diags);
out:
    free(buf);
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------------------------------
 * Snapshot access
 * ---------------------------------------------------------------------------------- */

kq_config_t *kq_config_ref(kq_config_t *cfg)
{
    if (cfg != NULL)
        atomic_fetch_add_explicit(&cfg->refs, 1, memory_order_relaxed);
    return cfg;
}

void kq_config_unref(kq_config_t *cfg)
{
    if (cfg == NULL)
        return;
    if (atomic_fetch_sub_explicit(&cfg->refs, 1, memory_order_acq_rel) == 1)
        config_free(cfg);
}

size_t kq_config_partition_count(const kq_config_t *cfg)
{
    return cfg ? cfg->nparts : 0;
}

const kq_partition_conf_t *kq_config_partition_at(const kq_config_t *cfg, size_t i)
{
    if (cfg == NULL || i >= cfg->nparts)
        return NULL;
    return &cfg->parts[i]->pub;
}

const kq_partition_conf_t *kq_config_partition(const kq_config_t *cfg, const char *name)
{
    if (cfg == NULL || name == NULL)
        return NULL;
    if (name[0] == '\0')
        name = "default";
    for (size_t i = 0; i < cfg->nparts; i++)
        if (strcasecmp(cfg->parts[i]->pub.name, name) == 0)
            return &cfg->parts[i]->pub;
    return NULL;
}

int kq_config_check_partition(const kq_config_t *cfg, const char *partition, const char *file,
                              kq_diags_t *diags)
{
    if (partition == NULL || *partition == '\0')
        partition = "default";
    if (kq_config_partition(cfg, partition) != NULL)
        return 0;
    int rc;
    if (cfg == NULL || cfg->nparts == 0)
        rc = kq_diags_add(diags, file, 0, 0, NULL,
                          "no partition is defined (the file is empty or holds only comments); "
                          "kubequota enforces partition \"%s\"", partition);
    else
        rc = kq_diags_add(diags, file, 0, 0, NULL,
                          "partition \"%s\" is not defined (kubequota enforces it: --partition)",
                          partition);
    return rc != 0 ? KQ_ENOMEM : KQ_EPARSE;
}

const kq_queue_conf_t *kq_config_queue(const kq_partition_conf_t *p, const char *path)
{
    if (p == NULL || path == NULL)
        return NULL;
    const struct pnode *pn = (const struct pnode *)p;
    char key[PATH_MAX_LEN];
    size_t n = strlen(path);
    if (n >= sizeof(key))
        return NULL;
    for (size_t i = 0; i <= n; i++)
        key[i] = (char)tolower((unsigned char)path[i]);
    struct qnode *q = NULL;
    HASH_FIND(hh, pn->by_path, key, n, q);
    return q ? &q->pub : NULL;
}

size_t kq_config_warning_count(const kq_config_t *cfg)
{
    return cfg ? cfg->nwarns : 0;
}

const char *kq_config_warning_at(const kq_config_t *cfg, size_t i)
{
    return cfg && i < cfg->nwarns ? cfg->warns[i] : NULL;
}

size_t kq_config_summary(const kq_config_t *cfg, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%zu partition(s), %zu queue(s), %zu limit(s)",
                     cfg ? cfg->nparts : 0, cfg ? cfg->n_queues : 0, cfg ? cfg->n_limits : 0);
    return n < 0 ? 0 : (size_t)n;
}

/* ------------------------------------------------------------------------------------
 * Holder
 * ---------------------------------------------------------------------------------- */

struct kq_config_holder {
    pthread_mutex_t lock;
    kq_config_t *cur;
};

kq_config_holder_t *kq_config_holder_new(kq_config_t *initial)
{
    kq_config_holder_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    if (pthread_mutex_init(&h->lock, NULL) != 0) {
        free(h);
        return NULL;
    }
    h->cur = kq_config_ref(initial);
    return h;
}

void kq_config_holder_free(kq_config_holder_t *h)
{
    if (h == NULL)
        return;
    kq_config_unref(h->cur);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

kq_config_t *kq_config_holder_get(kq_config_holder_t *h)
{
    pthread_mutex_lock(&h->lock);
    kq_config_t *cfg = kq_config_ref(h->cur);
    pthread_mutex_unlock(&h->lock);
    return cfg;
}

void kq_config_holder_swap(kq_config_holder_t *h, kq_config_t *next)
{
    kq_config_ref(next);
    pthread_mutex_lock(&h->lock);
    kq_config_t *old = h->cur;
    h->cur = next;
    pthread_mutex_unlock(&h->lock);
    kq_config_unref(old);
}

/* ------------------------------------------------------------------------------------
 * check-config
 * ---------------------------------------------------------------------------------- */

int kq_config_check_main(int argc, char **argv)
{
    /* FILE and --partition NAME / --partition=NAME in any order: the partition serve enforces */
    const char *partition = "default", *file = NULL;
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i] != NULL && strcmp(argv[i], "--partition") == 0 && i + 1 < argc)
            partition = argv[++i];
        else if (argv[i] != NULL && strncmp(argv[i], "--partition=", 12) == 0)
            partition = argv[i] + 12;
        else {
            file = argv[i];
            nfiles++;
        }
    }
    if (nfiles != 1 || file == NULL || *file == '\0' || partition == NULL || *partition == '\0') {
        fprintf(stderr, "usage: kubequota check-config [--partition NAME] FILE\n");
        return 2;
    }
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    int rc = kq_config_load_file(file, &cfg, &d);
    if (rc == 0 && (rc = kq_config_check_partition(cfg, partition, file, &d)) != 0) {
        kq_config_unref(cfg);
        cfg = NULL;
    }
    int status;
    if (rc == 0) {
        char sum[256];
        kq_config_summary(cfg, sum, sizeof(sum));
        for (size_t i = 0; i < kq_config_warning_count(cfg); i++)
            fprintf(stderr, "warning: %s\n", kq_config_warning_at(cfg, i));
        fflush(stderr);
        printf("%s: valid: %s\n", file, sum);
        fflush(stdout);
        kq_config_unref(cfg);
        status = 0;
    } else {
        for (size_t i = 0; i < d.n; i++) {
            size_t need = kq_diag_format(&d.v[i], NULL, 0) + 1;
            char *line = malloc(need);
            if (line != NULL) {
                kq_diag_format(&d.v[i], line, need);
                /* one error per line: fold any newline inside a message */
                for (char *s = line; *s; s++)
                    if (*s == '\n' || *s == '\r')
                        *s = ' ';
                fprintf(stderr, "%s\n", line);
                free(line);
            }
        }
        if (d.n == 0)
            fprintf(stderr, "%s: %s\n", file, kq_strerror(rc));
        fflush(stderr);
        status = rc == KQ_EPARSE ? 1 : 2;
    }
    kq_diags_free(&d);
    return status;
}
