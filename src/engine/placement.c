/* Placement: runs YuniKorn's placement rules (see placement.h for the semantics and the
 * upstream sources they follow).
 *
 * DESIGN: stateless. Every call reads the immutable partition snapshot and the caller's
 * facts (user, groups, provided queue, tags) and asks two hooks for what is not in the
 * snapshot: which dynamic queues exist now, and whether the submit ACL lets the user in.
 * No locks, no allocation except the result; paths are built in fixed-size buffers
 * bounded by KQ_PLACE_PATH_MAX, and anything longer is an error, not a truncation.
 */
#include "kubequota/engine/placement.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KQ_PLACE_PATH_MAX 4352 /* = KQ_UGM_PATH_MAX: longer paths cannot be tracked */
#define QUEUE_NAME_MAX 64
#define DOT_REPLACE "_dot_"

/* ---------------------------------------------------------------------------------- */
/* helpers                                                                             */

typedef struct pctx {
    const kq_partition_conf_t *part;
    const kq_place_in_t *in;
    char err[512];   /* a rule's failure (placement stops) or why it did not match */
    kq_denial_t kind; /* err's kind when it names one (parent queue, missing queue, ACL) */
} pctx_t;

KQ_PRINTF(2, 3)
static void say(pctx_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
}

/* YuniKorn's configs.QueueNameRegExp: ^[a-zA-Z0-9_:#/@-]{1,64}$ */
static bool qname_ok(const char *s, size_t n)
{
    if (n < 1 || n > QUEUE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(ch < 128 && isalnum(ch)) && strchr("_:#/@-", ch) == NULL)
            return false;
    }
    return true;
}

static void lower(char *s)
{
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

/* What `path` is: configured (then *conf is set) or dynamic (hook) or nothing. */
static kq_qkind_t kind_of(const pctx_t *c, const char *path, const kq_queue_conf_t **conf)
{
    const kq_queue_conf_t *q = kq_config_queue(c->part, path);
    if (conf != NULL)
        *conf = q;
    if (q != NULL)
        return q->is_parent ? KQ_QKIND_PARENT : KQ_QKIND_LEAF;
    if (c->in->dynamic_kind != NULL)
        return c->in->dynamic_kind(c->in->arg, path);
    return KQ_QKIND_NONE;
}

/* The nearest configured queue at or above path (root at worst). */
static const kq_queue_conf_t *configured_at_or_above(const pctx_t *c, const char *path)
{
    char buf[KQ_PLACE_PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", path);
    for (;;) {
        const kq_queue_conf_t *q = kq_config_queue(c->part, buf);
        if (q != NULL)
            return q;
        char *dot = strrchr(buf, '.');
        if (dot == NULL)
            return c->part->root;
        *dot = '\0';
    }
}

static bool may_submit(const pctx_t *c, const char *path)
{
    if (c->in->may_submit == NULL)
        return true;
    const kq_queue_conf_t *q = configured_at_or_above(c, path);
    return q == NULL || c->in->may_submit(c->in->arg, q, c->in->user, c->in->groups, c->in->n_groups);
}

static const char *tag_value(const kq_place_in_t *in, const char *key)
{
    for (size_t i = 0; i < in->n_tags; i++)
        if (in->tags[i].key != NULL && strcasecmp(in->tags[i].key, key) == 0)
            return in->tags[i].value != NULL && in->tags[i].value[0] != '\0' ? in->tags[i].value : NULL;
    return NULL;
}

static bool list_has(const char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != NULL && strcmp(v[i], s) == 0)
            return true;
    return false;
}

static bool filter_match(const regex_t *re, const char *const *list, size_t n, const char *who)
{
    if (re != NULL)
        return regexec(re, who, 0, NULL, 0) == 0;
    /* a single entry that is neither a valid name nor a compiling regexp matches nothing;
     * the loader reports such entries */
    return list_has(list, n, who);
}

bool kq_placement_filter_allows(const kq_rule_conf_t *r, const char *user, const char *const *groups,
                                size_t n_groups)
{
    /* apache/yunikorn-core pkg/scheduler/placement/filter.go allowUser */
    bool allow = !r->filter_deny;
    if (!r->filter_set)
        return allow;
    if (r->n_filter_users > 0 && filter_match(r->filter_user_re, r->filter_users, r->n_filter_users, user))
        return allow;
    if (r->n_filter_groups > 0)
        for (size_t i = 0; i < n_groups; i++)
            if (groups[i] != NULL &&
                filter_match(r->filter_group_re, r->filter_groups, r->n_filter_groups, groups[i]))
                return allow;
    return !allow;
}

/* ---------------------------------------------------------------------------------- */
/* one rule                                                                            */

enum { R_ERROR = -1, R_NOMATCH = 0, R_MATCH = 1 };

/* Appends `s` to out with every "." replaced by "_dot_". false when it does not fit. */
static bool append_replaced(char *out, size_t outlen, const char *s)
{
    size_t n = strlen(out);
    for (; *s; s++) {
        const char *piece = *s == '.' ? DOT_REPLACE : (char[2]){*s, '\0'};
        size_t pl = strlen(piece);
        if (n + pl + 1 > outlen)
            return false;
        memcpy(out + n, piece, pl);
        n += pl;
    }
    out[n] = '\0';
    return true;
}

static bool all_parts_ok(const char *path)
{
    const char *s = path;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (!qname_ok(s, n))
            return false;
        if (dot == NULL)
            return true;
        s = dot + 1;
    }
}

static int run_rule(pctx_t *c, const kq_rule_conf_t *r, unsigned depth, char *out, size_t outlen)
{
    const kq_place_in_t *in = c->in;
    const char *raw = NULL;
    bool fixed = strcmp(r->name, "fixed") == 0;
    if (depth > 32) {
        say(c, "placement rule parents nested too deep");
        return R_ERROR;
    }
    if (strcmp(r->name, "provided") == 0) {
        raw = in->provided && in->provided[0] ? in->provided : NULL;
        if (raw == NULL) {
            say(c, "the pod names no queue");
            return R_NOMATCH;
        }
    } else if (strcmp(r->name, "tag") == 0) {
        raw = tag_value(in, r->value);
        if (raw == NULL) {
            say(c, "the pod has no tag '%s'", r->value);
            return R_NOMATCH;
        }
    } else if (strcmp(r->name, "user") == 0) {
        raw = in->user;
    } else if (fixed) {
        raw = r->value;
    } else {
        say(c, "unknown rule '%s'", r->name);
        return R_ERROR;
    }
    if (!kq_placement_filter_allows(r, in->user, in->groups, in->n_groups)) {
        say(c, "user '%s' is filtered out", in->user);
        return R_NOMATCH;
    }
    /* fixed: a value starting with root is qualified (fixed_rule.go); provided and tag: a
     * "root." prefix (provided_rule.go, tag_rule.go); user: never */
    bool user_rule = strcmp(r->name, "user") == 0;
    bool qualified = !user_rule && (fixed ? strncasecmp(raw, "root", 4) == 0 : strncasecmp(raw, "root.", 5) == 0);
    out[0] = '\0';
    if (qualified) {
        if (strlen(raw) >= outlen) {
            say(c, "queue name longer than %zu bytes", outlen - 1);
            return R_ERROR;
        }
        snprintf(out, outlen, "%s", raw);
        if (!all_parts_ok(out)) {
            say(c, "invalid queue name '%s': each level must be 1 to 64 of a-z A-Z 0-9 _ : # / @ -", raw);
            return R_ERROR;
        }
    } else {
        char child[KQ_PLACE_PATH_MAX];
        child[0] = '\0';
        bool fits = fixed ? (snprintf(child, sizeof(child), "%s", raw) < (int)sizeof(child))
                          : append_replaced(child, sizeof(child), raw);
        if (!fits || !(fixed ? all_parts_ok(child) : qname_ok(child, strlen(child)))) {
            say(c, "invalid queue name '%s' (from the %s rule): each level must be 1 to 64 of "
                "a-z A-Z 0-9 _ : # / @ -", child, r->name);
            return R_ERROR;
        }
        char parent[KQ_PLACE_PATH_MAX];
        snprintf(parent, sizeof(parent), "root");
        if (r->parent != NULL) {
            char pq[KQ_PLACE_PATH_MAX];
            int rc = run_rule(c, r->parent, depth + 1, pq, sizeof(pq));
            if (rc == R_ERROR)
                return R_ERROR;
            if (rc == R_NOMATCH) {
                char inner[sizeof(c->err)];
                memcpy(inner, c->err, sizeof(inner));
                say(c, "parent rule %s: %s", r->parent->name, inner);
                return R_NOMATCH;
            }
            if (strncmp(pq, "root.", 5) != 0 && strcmp(pq, "root") != 0) {
                char tmp[KQ_PLACE_PATH_MAX];
                if (snprintf(tmp, sizeof(tmp), "root.%s", pq) >= (int)sizeof(tmp)) {
                    say(c, "queue path too long");
                    return R_ERROR;
                }
                memcpy(pq, tmp, sizeof(pq));
            }
            if (kind_of(c, pq, NULL) == KQ_QKIND_LEAF) {
                say(c, "parent rule returned a leaf queue: %s", pq);
                return R_ERROR;
            }
            memcpy(parent, pq, sizeof(parent));
        }
        if (snprintf(out, outlen, "%s.%s", parent, child) >= (int)outlen) {
            say(c, "queue path too long");
            return R_ERROR;
        }
    }
    lower(out);
    if (!r->create && kind_of(c, out, NULL) == KQ_QKIND_NONE) {
        say(c, "queue %s does not exist and create is false", out);
        c->kind = KQ_DENIAL_QUEUE_MISSING;
        return R_NOMATCH;
    }
    return R_MATCH;
}

/* Can the pod run in `path` (a rule's result)? false with the reason in c->err. */
static bool usable(pctx_t *c, const char *path)
{
    kq_qkind_t k = kind_of(c, path, NULL);
    if (k == KQ_QKIND_PARENT) {
        say(c, "queue %s is a parent queue", path);
        c->kind = KQ_DENIAL_QUEUE_NOT_LEAF;
        return false;
    }
    if (k == KQ_QKIND_NONE) {
        /* to be created: the nearest existing ancestor must be a parent (a leaf cannot get
         * children; placement_rules.md "Handling placement failures") */
        char buf[KQ_PLACE_PATH_MAX];
        snprintf(buf, sizeof(buf), "%s", path);
        for (char *dot = strrchr(buf, '.'); dot != NULL; dot = strrchr(buf, '.')) {
            *dot = '\0';
            kq_qkind_t ak = kind_of(c, buf, NULL);
            if (ak == KQ_QKIND_LEAF) {
                say(c, "queue %s cannot be created below the leaf queue %s", path, buf);
                return false;
            }
            if (ak == KQ_QKIND_PARENT)
                break;
        }
    }
    if (!may_submit(c, path)) {
        say(c, "user '%s' may not submit to queue %s (submitacl/adminacl)", c->in->user, path);
        c->kind = KQ_DENIAL_ACL;
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------------------- */
/* public API                                                                          */

/* The kind a failed placement reports: of the rules' failures, a parent queue before a
 * missing queue before an ACL (the order the Event reasons were always given in); a
 * placement that found no queue for any other reason is a missing queue. */
static int kind_rank(kq_denial_t k)
{
    return k == KQ_DENIAL_QUEUE_NOT_LEAF ? 3 : k == KQ_DENIAL_QUEUE_MISSING ? 2 : k == KQ_DENIAL_ACL ? 1 : 0;
}

int kq_placement_place(const kq_partition_conf_t *part, const kq_place_in_t *in, char **queue, char *reason,
                       size_t reason_len, kq_denial_t *kind)
{
    *queue = NULL;
    if (reason != NULL && reason_len > 0)
        reason[0] = '\0';
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (part == NULL || in == NULL || in->user == NULL) {
        if (reason != NULL && reason_len > 0)
            snprintf(reason, reason_len, "no queue configuration loaded");
        kq_denial_set(kind, KQ_DENIAL_QUEUE_MISSING);
        return KQ_EDENIED;
    }
    pctx_t c = {.part = part, .in = in};
    kq_denial_t worst = KQ_DENIAL_NONE;
    char trace[1024] = "";
    char path[KQ_PLACE_PATH_MAX];
    const char *found = NULL;
    for (size_t i = 0; i < part->n_rules && found == NULL; i++) {
        const kq_rule_conf_t *r = part->rules[i];
        c.kind = KQ_DENIAL_NONE;
        int rc = run_rule(&c, r, 0, path, sizeof(path));
        if (rc == R_ERROR) {
            if (reason != NULL && reason_len > 0)
                snprintf(reason, reason_len, "placement rule #%zu (%s) failed: %s", i + 1, r->name, c.err);
            kq_denial_set(kind, c.kind != KQ_DENIAL_NONE ? c.kind : KQ_DENIAL_QUEUE_MISSING);
            return KQ_EDENIED;
        }
        if (rc == R_MATCH && usable(&c, path)) {
            found = path;
            break;
        }
        if (kind_rank(c.kind) > kind_rank(worst))
            worst = c.kind;
        size_t tl = strlen(trace);
        snprintf(trace + tl, sizeof(trace) - tl, "%s#%zu %s: %s", tl ? "; " : "", i + 1, r->name, c.err);
    }
    if (found == NULL && in->forced) {
        found = KQ_PLACEMENT_RECOVERY_QUEUE;
    } else if (found == NULL) {
        const kq_queue_conf_t *d = kq_config_queue(part, KQ_PLACEMENT_DEFAULT_QUEUE);
        if (d != NULL && !d->is_parent && usable(&c, KQ_PLACEMENT_DEFAULT_QUEUE))
            found = KQ_PLACEMENT_DEFAULT_QUEUE;
    }
    if (found == NULL) {
        if (reason != NULL && reason_len > 0)
            snprintf(reason, reason_len, "application rejected: no placement rule matched (%s; and %s is not "
                     "usable)", trace[0] ? trace : "no rules", KQ_PLACEMENT_DEFAULT_QUEUE);
        kq_denial_set(kind, worst != KQ_DENIAL_NONE ? worst : KQ_DENIAL_QUEUE_MISSING);
        return KQ_EDENIED;
    }
    *queue = strdup(found);
    return *queue ? 0 : KQ_ENOMEM;
}

const kq_child_template_t *kq_placement_template(const kq_partition_conf_t *part, const char *path)
{
    if (part == NULL || path == NULL || kq_config_queue(part, path) != NULL)
        return NULL;
    char buf[KQ_PLACE_PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return NULL;
    for (char *dot = strrchr(buf, '.'); dot != NULL; dot = strrchr(buf, '.')) {
        *dot = '\0';
        const kq_queue_conf_t *q = kq_config_queue(part, buf);
        if (q != NULL)
            return q->is_parent ? q->child_template : NULL;
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------- */
/* REST view (dao.RuleDAO)                                                             */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* YuniKorn keeps only list entries that are valid names (filter.go newFilter); a single
 * entry with a regexp character is the expression instead. */
static json_t *name_list(const char *const *v, size_t n, bool group)
{
    const char **tmp = calloc(n ? n : 1, sizeof(*tmp));
    json_t *arr = json_array();
    if (tmp == NULL || arr == NULL) {
        free(tmp);
        json_decref(arr);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = v[i];
        bool ok = e != NULL && (isalpha((unsigned char)e[0]) || e[0] == '_');
        for (const char *c = e; ok && *c; c++)
            ok = isalnum((unsigned char)*c) || strchr(group ? "_:.-" : "_:#/.@-$", *c) != NULL;
        bool dup = false;
        for (size_t j = 0; ok && j < k && !dup; j++)
            dup = strcmp(tmp[j], e) == 0;
        if (ok && !dup)
            tmp[k++] = e;
    }
    qsort(tmp, k, sizeof(*tmp), cmp_str);
    for (size_t i = 0; i < k; i++)
        json_array_append_new(arr, json_string(tmp[i]));
    free(tmp);
    return arr;
}

static json_t *rule_json(const kq_rule_conf_t *r)
{
    json_t *o = json_object(), *params = json_object();
    if (o == NULL || params == NULL) {
        json_decref(o);
        json_decref(params);
        return NULL;
    }
    json_object_set_new(o, "name", json_string(r->name));
    json_object_set_new(params, "create", json_string(r->create ? "true" : "false"));
    if (strcmp(r->name, "fixed") == 0) {
        json_object_set_new(params, "queue", json_string(r->value));
        json_object_set_new(params, "qualified", json_string(strncmp(r->value, "root", 4) == 0 ? "true" : "false"));
    } else if (strcmp(r->name, "tag") == 0) {
        json_object_set_new(params, "tagName", json_string(r->value));
    }
    json_object_set_new(o, "parameters", params);
    if (r->filter_set) {
        json_t *f = json_object();
        if (f != NULL) {
            json_object_set_new(f, "type", json_string(r->filter_deny ? "deny" : "allow"));
            if (r->filter_user_re != NULL) {
                json_object_set_new(f, "userExp", json_string(r->filter_users[0]));
            } else if (r->n_filter_users > 0) {
                json_t *l = name_list(r->filter_users, r->n_filter_users, false);
                if (l != NULL && json_array_size(l) > 0)
                    json_object_set_new(f, "userList", l);
                else
                    json_decref(l);
            }
            if (r->filter_group_re != NULL) {
                json_object_set_new(f, "groupExp", json_string(r->filter_groups[0]));
            } else if (r->n_filter_groups > 0) {
                json_t *l = name_list(r->filter_groups, r->n_filter_groups, true);
                if (l != NULL && json_array_size(l) > 0)
                    json_object_set_new(f, "groupList", l);
                else
                    json_decref(l);
            }
            json_object_set_new(o, "filter", f);
        }
    }
    if (r->parent != NULL) {
        json_t *p = rule_json(r->parent);
        if (p == NULL) {
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, "parentRule", p);
    }
    return o;
}

json_t *kq_placement_rules_json(const kq_partition_conf_t *part)
{
    json_t *arr = json_array();
    if (arr == NULL)
        return NULL;
    bool ok = true;
    if (part == NULL || part->n_rules == 0) {
        /* placement.go buildRules: no rules configured is one provided rule */
        kq_rule_conf_t implicit = {.name = "provided", .value = ""};
        ok = json_array_append_new(arr, rule_json(&implicit)) == 0;
    }
    for (size_t i = 0; ok && part != NULL && i < part->n_rules; i++)
        ok = json_array_append_new(arr, rule_json(part->rules[i])) == 0;
    json_t *rec = ok ? json_pack("{s:s, s:{s:s}}", "name", "recovery", "parameters", "queue",
                                 KQ_PLACEMENT_RECOVERY_QUEUE) : NULL;
    if (rec == NULL || json_array_append_new(arr, rec) != 0) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}
