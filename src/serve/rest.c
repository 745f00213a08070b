/* REST usage view: YuniKorn's /ws/v1 usage and queue endpoints over the ugm's JSON views,
 * and /ws/v1/validate-conf over the config loader. Transport-free: the server module
 * routes the request, these functions only produce status and body.
 *
 * Wire compatibility with YuniKorn's webservice (apache/yunikorn-core pkg/webservice/
 * handlers.go and dao/): the same paths, the DAO field names and omitempty rules (the ugm
 * renders them), errors as dao.YAPIError {"status_code","message","description"} with
 * YuniKorn's messages ("Partition not found", "User not found", "Invalid user name", "Queue
 * not found", "Application not found", "Node not found", ...), description = message, and
 * status codes, checked in the order of YuniKorn's handlers, and the views YuniKorn clients
 * and its web UI read: partitions, clusters, queues (with a parent's template), applications
 * (by state and status, one by id), nodes (capacity, allocated, available; one by id), node
 * utilisation, scheduler health, the configuration, and YuniKorn's metric families
 * (kq_rest_metrics, /ws/v1/metrics).
 *
 * Elastic quota: with app->elastic set, every queue of the queues view that is a quota
 * group (root and the queue paths) gains the group's minResource, scaledMinResource,
 * maxResource (the group's; {} = unlimited), requestResource, quotaAllocatedResource (the
 * group's used; allocatedResource stays the queue's usage as the ugm counts it, which is
 * the same unless pods of the queue were placed in another group), runtimeResource,
 * sharedWeight and allowLent; the root object also carries "quotaTree" (kq_qtree_json:
 * every group, ElasticQuota groups included).
 *
 * DESIGN: no state of its own. The views are built by the ugm under its own locks and
 * handed over as new references; serialisation happens after the locks are released. The
 * node views copy the nodes (elastic's node lock), then sum the counted pods per node in one
 * scan of the ledger under its lock (kq_ledger_nodes_used); no lock is held across I/O.
 */
#include "kubequota/serve/rest.h"
#include "kubequota/control/gating.h"

#include <ctype.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "kubequota/engine/config.h"
#include "kubequota/control/elastic.h"
#include "kubequota/base/error.h"
#include "kubequota/engine/placement.h"
#include "kubequota/control/ledger.h"
#include "kubequota/control/sync.h"
#include "kubequota/engine/ugm.h"

/* ------------------------------------------------------------------ helpers */

char *kq_rest_error_body(int status, const char *message, const char *description, size_t *len)
{
    (void)description; /* YuniKorn's handlers pass no cause: description == message */
    json_t *o = json_pack("{s:i,s:s,s:s}", "status_code", status, "message", message ? message : "",
                          "description", message ? message : "");
    if (o == NULL)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s != NULL && len != NULL)
        *len = strlen(s);
    return s;
}

/* Serialises `view` (stolen) into *body with `status`; 500 on ENOMEM. */
static int reply_json(json_t *view, int status, char **body, size_t *len)
{
    char *s = view ? json_dumps(view, JSON_COMPACT) : NULL;
    json_decref(view);
    if (s == NULL) {
        *body = NULL;
        *len = 0;
        return 500;
    }
    *body = s;
    *len = strlen(s);
    return status;
}

/* message: YuniKorn's fixed text (clients compare it), also the description, as YuniKorn's
 * buildJSONErrorResponse gives it (dao.NewYAPIError with no cause). */
static int reply_error(int status, const char *message, char **body, size_t *len)
{
    *body = kq_rest_error_body(status, message, NULL, len);
    if (*body == NULL) {
        *len = 0;
        return 500;
    }
    return status;
}

/* 0 when the partition is the one this process serves; else a 404 reply. */
static int check_partition(kq_app_t *app, const char *partition, char **body, size_t *len)
{
    if (app->ugm == NULL)
        return reply_error(503, "usage tracking is not initialised", body, len);
    if (partition == NULL || app->partition == NULL || strcmp(partition, app->partition) != 0)
        return reply_error(404, "Partition not found", body, len);
    return 0;
}

/* ------------------------------------------------------------------ public API */

int kq_rest_users(kq_app_t *app, const char *partition, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    return reply_json(kq_ugm_users_json(app->ugm), 200, body, len);
}

int kq_rest_groups(kq_app_t *app, const char *partition, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    return reply_json(kq_ugm_groups_json(app->ugm), 200, body, len);
}

typedef struct stream {
    kq_rest_write_fn write;
    void *ctx;
    bool first;
} stream_t;

static int stream_dump(const char *p, size_t n, void *data)
{
    stream_t *st = data;
    return st->write(st->ctx, p, n) == 0 ? 0 : -1;
}

/* One element: "," between elements, then its compact text, as json_dumps(JSON_COMPACT)
 * writes an array's items. */
static int stream_elem(void *data, json_t *e)
{
    stream_t *st = data;
    if (!st->first && st->write(st->ctx, ",", 1) != 0)
        return -1;
    st->first = false;
    return json_dump_callback(e, stream_dump, st, JSON_COMPACT) == 0 ? 0 : -1;
}

int kq_rest_stream(kq_app_t *app, kq_rest_view_t view, const char *partition, const char *arg, kq_rest_write_fn write,
                   void *ctx, char **body, size_t *len)
{
    *body = NULL;
    *len = 0;
    if (view == KQ_REST_VIEW_APPS && arg != NULL && strcasecmp(arg, "active") != 0)
        return kq_rest_apps(app, partition, arg, body, len); /* [] or 400: small, buffered */
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    stream_t s = {.write = write, .ctx = ctx, .first = true};
    if (write(ctx, "[", 1) != 0)
        return -1;
    int rc = view == KQ_REST_VIEW_APPS     ? kq_ugm_apps_each(app->ugm, NULL, stream_elem, &s)
             : view == KQ_REST_VIEW_GROUPS ? kq_ugm_groups_each(app->ugm, stream_elem, &s)
                                           : kq_ugm_users_each(app->ugm, stream_elem, &s);
    if (rc != 0 || write(ctx, "]", 1) != 0)
        return -1;
    return 200;
}

/* configs.UserRegExp: ^[_a-zA-Z][a-zA-Z0-9:#/_.@-]*[$]?$ */
bool kq_rest_user_name_valid(const char *name)
{
    if (name == NULL || !(name[0] == '_' || isalpha((unsigned char)name[0])))
        return false;
    for (const char *p = name + 1; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '$' && p[1] == '\0')
            return true;
        if (!(c < 0x80 && (isalnum(c) || strchr(":#/_.@-", c) != NULL)))
            return false;
    }
    return true;
}

/* configs.GroupRegExp: ^[_a-zA-Z][a-zA-Z0-9:_.-]*$ */
bool kq_rest_group_name_valid(const char *name)
{
    if (name == NULL || !(name[0] == '_' || isalpha((unsigned char)name[0])))
        return false;
    for (const char *p = name + 1; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (!(c < 0x80 && (isalnum(c) || strchr(":_.-", c) != NULL)))
            return false;
    }
    return true;
}

/* A copy of a resource map with cpu named "vcore" (as YuniKorn's shim names it); other
 * values as they are. New reference; NULL on ENOMEM. */
static json_t *dao_names(json_t *v)
{
    if (!json_is_object(v))
        return json_incref(v);
    json_t *o = json_object();
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
        if (o != NULL && json_object_set(o, strcmp(k, "cpu") == 0 ? "vcore" : k, x) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* Copies the quota group's fields into each queue object of the tree (recursively). */
static bool merge_groups(json_t *q, const json_t *by_name)
{
    static const struct { const char *from, *to; } fields[] = {
        {"minResource", "minResource"},
        {"scaledMinResource", "scaledMinResource"},
        {"maxResource", "maxResource"},
        {"requestResource", "requestResource"},
        {"allocatedResource", "quotaAllocatedResource"},
        {"runtimeResource", "runtimeResource"},
        {"sharedWeight", "sharedWeight"},
        {"allowLent", "allowLent"},
    };
    const json_t *g = json_object_get(by_name, json_string_value(json_object_get(q, "queuename")));
    for (size_t i = 0; g != NULL && i < sizeof(fields) / sizeof(fields[0]); i++) {
        json_t *v = json_object_get(g, fields[i].from);
        if (v == NULL || (json_is_object(v) && json_object_size(v) == 0))
            continue; /* omitempty, as the DAO */
        if (json_object_set_new(q, fields[i].to, dao_names(v)) != 0)
            return false;
    }
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(q, "children"), i, k) {
        if (!merge_groups(k, by_name))
            return false;
    }
    return true;
}

/* Each queue's absUsedCapacity: resources.CalculateAbsUsedCapacity(maxResource,
 * allocatedResource) as yunikorn-core's queue DAO sets it (pkg/scheduler/objects/queue.go):
 * per resource of max that the queue uses, the whole percentage used (0 when nothing is
 * used, 100 for a max of 0, at most MaxInt32); resources it does not use are left out. The
 * web UI draws its queue usage bars from it. false on ENOMEM. */
static bool abs_used(json_t *q)
{
    json_t *max = json_object_get(q, "maxResource"), *used = json_object_get(q, "allocatedResource");
    json_t *abs = json_object_size(max) > 0 && json_object_size(used) > 0 ? json_object() : NULL;
    const char *res;
    json_t *cap;
    bool ok = true;
    json_object_foreach(abs != NULL ? max : NULL, res, cap) {
        json_t *u = json_object_get(used, res);
        if (u == NULL)
            continue;
        json_int_t c = json_integer_value(cap), v = json_integer_value(u), pct;
        if (v <= 0)
            pct = 0;
        else if (c <= 0)
            pct = 100;
        else {
            double d = (double)v / (double)c * 100;
            pct = d > 2147483647.0 ? 2147483647 : (json_int_t)d;
        }
        ok = ok && json_object_set_new(abs, res, json_integer(pct)) == 0;
    }
    if (abs != NULL) {
        ok = ok && (json_object_size(abs) == 0 || json_object_set(q, "absUsedCapacity", abs) == 0);
        json_decref(abs);
    }
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(q, "children"), i, c) {
        ok = ok && abs_used(c);
    }
    return ok;
}

/* The queues view: the ugm's, with the quota groups' fields merged in. New reference; NULL
 * on ENOMEM. */
static json_t *queues_view(kq_app_t *app)
{
    json_t *view = kq_ugm_queues_json(app->ugm);
    if (view != NULL && !abs_used(view)) {
        json_decref(view);
        view = NULL;
    }
    if (view == NULL || app->elastic == NULL)
        return view;
    json_t *tree = kq_qtree_json(kq_elastic_qtree(app->elastic));
    json_t *by_name = json_object();
    bool ok = tree != NULL && by_name != NULL && kq_elastic_tree_of_groups(app->elastic, tree) == 0 &&
              json_object_set_new(tree, "trees", kq_elastic_trees_json(app->elastic)) == 0;
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(tree, "groups"), i, g) {
        const char *n = json_string_value(json_object_get(g, "name"));
        if (ok && n != NULL)
            ok = json_object_set(by_name, n, g) == 0;
    }
    ok = ok && merge_groups(view, by_name) && json_object_set(view, "quotaTree", tree) == 0;
    json_decref(by_name);
    json_decref(tree);
    if (!ok) {
        json_decref(view);
        view = NULL;
    }
    return view;
}

int kq_rest_queues(kq_app_t *app, const char *partition, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    return reply_json(queues_view(app), 200, body, len);
}

/* The view of one user or group (kind "user"/"group", view from kq_ugm_user_json or
 * kq_ugm_group_json), or 404 naming it when nothing is tracked for it. */
static int reply_identity(kq_app_t *app, const char *partition, const char *kind, const char *title,
                          json_t *(*view)(kq_ugm_t *, const char *), const char *name, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    json_t *v = view(app->ugm, name);
    if (v != NULL)
        return reply_json(v, 200, body, len);
    /* YuniKorn checks the name against configs.UserRegExp / GroupRegExp first (400); a name
     * kubequota tracks stays reachable even when the regexp refuses it (Kubernetes allows
     * such names, and the wildcard group "*"): README, "Coming from YuniKorn". */
    bool user = strcmp(kind, "user") == 0;
    if (!(user ? kq_rest_user_name_valid(name) : kq_rest_group_name_valid(name)))
        return reply_error(400, user ? "Invalid user name" : "Invalid group name", body, len);
    return reply_error(404, title, body, len);
}

int kq_rest_user(kq_app_t *app, const char *partition, const char *user, char **body, size_t *len)
{
    return reply_identity(app, partition, "user", "User not found", kq_ugm_user_json, user, body, len);
}

int kq_rest_group(kq_app_t *app, const char *partition, const char *group, char **body, size_t *len)
{
    return reply_identity(app, partition, "group", "Group not found", kq_ugm_group_json, group, body, len);
}

int kq_rest_validate_conf(kq_app_t *app, const char *yaml, size_t yaml_len, char **body, size_t *len)
{
    kq_diags_t diags;
    kq_diags_init(&diags);
    kq_config_t *cfg = NULL;
    int rc = kq_config_load_buffer(yaml ? yaml : "", yaml ? yaml_len : 0, "queues.yaml", &cfg, &diags);
    if (rc == 0 && app != NULL) /* what the running serve would refuse at reload */
        rc = kq_app_check_config(app, cfg, "queues.yaml", &diags);
    kq_config_unref(cfg);
    json_t *o;
    if (rc == 0) {
        o = json_pack("{s:b,s:s}", "allowed", 1, "reason", "");
    } else {
        char *joined = diags.n > 0 ? kq_diags_join(&diags, "; ") : NULL;
        o = json_pack("{s:b,s:s}", "allowed", 0, "reason", joined ? joined : kq_strerror(rc));
        if (o == NULL && joined != NULL) {
            /* Not valid UTF-8 (a diagnostic quoting raw input): keep the ASCII. */
            for (unsigned char *p = (unsigned char *)joined; *p; p++)
                if (*p >= 0x80 || (*p < 0x20 && *p != '\n'))
                    *p = '?';
            o = json_pack("{s:b,s:s}", "allowed", 0, "reason", joined);
        }
        free(joined);
    }
    kq_diags_free(&diags);
    return reply_json(o, 200, body, len);
}

/* ------------------------------------------------------------------ more of YuniKorn's views */

/* The queue object with queuename == path (lowercase compare) in the queues view. */
static json_t *find_queue(json_t *q, const char *path)
{
    const char *name = json_string_value(json_object_get(q, "queuename"));
    if (name != NULL && strcasecmp(name, path) == 0)
        return q;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(q, "children"), i, c) {
        json_t *hit = find_queue(c, path);
        if (hit != NULL)
            return hit;
    }
    return NULL;
}

/* common.ErrorInvalidQueueName (apache/yunikorn-core pkg/common/errors.go), the 400 of an
 * invalid queue path. */
#define QUEUE_NAME_INVALID                                                                                    \
    "invalid queue name, max 64 characters consisting of alphanumeric characters and '-', '_', '#', '@', '/', " \
    "':' allowed"

/* YuniKorn's validateQueue: every part of the path a valid queue name (QueueNameRegExp
 * ^[a-zA-Z0-9_:#/@-]{1,64}$). An empty path is valid there (it never reaches a handler). */
static bool queue_path_valid(const char *path)
{
    if (path == NULL || path[0] == '\0' || strlen(path) > KQ_UGM_PATH_MAX)
        return false;
    size_t part = 0;
    for (const char *p = path;; p++) {
        if (*p == '.' || *p == '\0') {
            if (part == 0 || part > 64)
                return false;
            if (*p == '\0')
                return true;
            part = 0;
            continue;
        }
        unsigned char c = (unsigned char)*p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '#' || c == '@' || c == '/' || c == ':'))
            return false;
        part++;
    }
}

/* The queue's object from the full queues view (a new reference), or an error reply. */
static int queue_object(kq_app_t *app, const char *partition, const char *queue, json_t **out, char **body,
                        size_t *len)
{
    *out = NULL;
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    if (!queue_path_valid(queue))
        return reply_error(400, QUEUE_NAME_INVALID, body, len);
    char *view_body = NULL;
    size_t view_len = 0;
    st = kq_rest_queues(app, partition, &view_body, &view_len);
    if (st != 200) {
        *body = view_body;
        *len = view_len;
        return st;
    }
    json_t *view = json_loadb(view_body, view_len, 0, NULL);
    free(view_body);
    if (view == NULL)
        return reply_error(500, "out of memory", body, len);
    json_t *q = find_queue(view, queue);
    if (q == NULL) {
        json_decref(view);
        return reply_error(404, "Queue not found", body, len);
    }
    *out = json_incref(q);
    json_decref(view);
    return 0;
}

int kq_rest_queue(kq_app_t *app, const char *partition, const char *queue, bool subtree, char **body, size_t *len)
{
    json_t *q;
    int st = queue_object(app, partition, queue, &q, body, len);
    if (st != 0)
        return st;
    if (!subtree)
        json_object_del(q, "children"); /* childNames stay, as YuniKorn answers */
    return reply_json(q, 200, body, len);
}

int kq_rest_queue_apps(kq_app_t *app, const char *partition, const char *queue, char **body, size_t *len)
{
    json_t *q;
    int st = queue_object(app, partition, queue, &q, body, len);
    if (st != 0)
        return st;
    char path[KQ_UGM_PATH_MAX + 1];
    snprintf(path, sizeof(path), "%s", json_string_value(json_object_get(q, "queuename")));
    json_decref(q);
    return reply_json(kq_ugm_apps_json(app->ugm, path), 200, body, len);
}

int kq_rest_apps(kq_app_t *app, const char *partition, const char *state, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    if (state == NULL || strcasecmp(state, "active") == 0)
        return reply_json(kq_ugm_apps_json(app->ugm, NULL), 200, body, len);
    if (strcasecmp(state, "rejected") == 0 || strcasecmp(state, "completed") == 0)
        return reply_json(json_array(), 200, body, len); /* kubequota keeps no history */
    return reply_error(400, "Only following application states are allowed: active, rejected, completed", body, len);
}

/* A canonical resource map as the DAOs name it. New reference; NULL on ENOMEM. */
static json_t *dao_res(const kq_resource_t *r)
{
    json_t *canon = kq_resource_to_json(r);
    json_t *o = canon != NULL ? dao_names(canon) : NULL;
    json_decref(canon);
    return o;
}

/* A canonical resource map without its zero values (resources.Prune), as the DAOs name it.
 * New reference; NULL on ENOMEM. */
static json_t *dao_res_pruned(const kq_resource_t *r)
{
    json_t *o = json_object();
    for (uint32_t i = 0; o != NULL && i < r->n; i++) {
        if (KQ_RES_E(r)[i].value == 0)
            continue;
        const char *name = strcmp(KQ_RES_E(r)[i].name, "cpu") == 0 ? "vcore" : KQ_RES_E(r)[i].name;
        if (json_object_set_new(o, name, json_integer((json_int_t)KQ_RES_E(r)[i].value)) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* dao.NodeDAOInfo of every node the nodes informer shows (only: the one named so), sorted by
 * name: capacity (allocatable), allocated (what the counted pods bound to it request: the
 * ledger's, so pods of other schedulers are not in it) and available (capacity - allocated,
 * zero values pruned as YuniKorn's refreshAvailableResource prunes them). New reference;
 * NULL on ENOMEM. The ledger's lock is taken once, for one scan, after the nodes are copied. */
static json_t *nodes_view(kq_app_t *app, const char *only)
{
    json_t *nodes = app->elastic != NULL ? kq_elastic_nodes_json(app->elastic) : json_array();
    size_t n = json_array_size(nodes), k = 0;
    const char **names = n > 0 ? calloc(n, sizeof(*names)) : NULL;
    kq_resource_t *used = n > 0 ? calloc(n, sizeof(*used)) : NULL;
    const json_t **objs = n > 0 ? calloc(n, sizeof(*objs)) : NULL;
    json_t *out = nodes != NULL && (n == 0 || (names != NULL && used != NULL && objs != NULL)) ? json_array() : NULL;
    size_t i;
    json_t *x;
    json_array_foreach(nodes, i, x) {
        const char *name = json_string_value(json_object_get(x, "name"));
        if (name != NULL && (only == NULL || strcmp(name, only) == 0) && names != NULL && objs != NULL) {
            objs[k] = x;
            names[k++] = name; /* sorted: kq_elastic_nodes_json sorts by name */
        }
    }
    if (out != NULL && app->ledger != NULL && kq_ledger_nodes_used(app->ledger, names, k, used) != 0) {
        json_decref(out);
        out = NULL;
    }
    for (i = 0; out != NULL && i < k; i++) {
        kq_resource_t cap = KQ_RESOURCE_EMPTY, avail = KQ_RESOURCE_EMPTY;
        char err[128];
        json_t *alloc = json_object_get(objs[i], "allocatable");
        bool ok = kq_resource_from_json(alloc, &cap, err, sizeof(err)) == 0 && kq_resource_copy(&avail, &cap) == 0;
        for (uint32_t r = 0; ok && r < avail.n; r++) {
            const char *res = KQ_RES_E(&avail)[r].name;
            ok = kq_resource_set(&avail, res, KQ_RES_E(&avail)[r].value - kq_resource_get(&used[i], res, NULL)) == 0;
        }
        json_t *o = ok ? json_pack("{s:s,s:s,s:b,s:b}", "nodeID", names[i], "hostName", names[i], "schedulable",
                                   cap.n > 0, "isReserved", 0)
                       : NULL;
        json_t *c = o != NULL ? dao_res_pruned(&cap) : NULL, *u = c != NULL ? dao_res_pruned(&used[i]) : NULL,
               *a = u != NULL ? dao_res_pruned(&avail) : NULL;
        ok = a != NULL;
        if (ok && json_object_size(c) > 0)
            ok = json_object_set(o, "capacity", c) == 0;
        if (ok && json_object_size(u) > 0)
            ok = json_object_set(o, "allocated", u) == 0;
        if (ok && cap.n > 0 && json_object_size(a) > 0)
            ok = json_object_set(o, "available", a) == 0;
        json_decref(c);
        json_decref(u);
        json_decref(a);
        kq_resource_free(&cap);
        kq_resource_free(&avail);
        if (!ok || json_array_append_new(out, o) != 0) {
            if (!ok)
                json_decref(o);
            json_decref(out);
            out = NULL;
        }
    }
    for (i = 0; used != NULL && i < n; i++)
        kq_resource_free(&used[i]);
    free(used);
    free(names);
    free(objs);
    json_decref(nodes);
    return out;
}

int kq_rest_nodes(kq_app_t *app, const char *partition, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    return reply_json(nodes_view(app, NULL), 200, body, len);
}

static int cmp_victim(const void *a, const void *b)
{
    const kq_ledger_victim_t *x = a, *y = b;
    int c = strcmp(x->ns, y->ns);
    return c != 0 ? c : strcmp(x->name, y->name);
}

/* dao.AllocationDAOInfo of each counted pod bound to the node, by namespace and name: the
 * shim's allocation key (the pod UID) and tags (yunikorn-k8shim pkg/common/si_helper.go
 * CreateTagsForTask: kubernetes.io/meta/namespace and .../podName, which the web UI shows),
 * resource (the request, pods: 1), priority, node and application. A node holds at most
 * its kubelet's max-pods, so the list is bounded. 0 or KQ_ENOMEM. */
static int node_allocations(kq_app_t *app, const char *node, json_t *o)
{
    kq_ledger_victim_t *v = NULL;
    size_t n = 0;
    if (app->ledger == NULL)
        return 0;
    int rc = kq_ledger_node_pods(app->ledger, node, &v, &n);
    if (rc != 0 || n == 0)
        return rc;
    qsort(v, n, sizeof(*v), cmp_victim);
    json_t *list = json_array();
    bool ok = list != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        kq_resource_t r = KQ_RESOURCE_EMPTY;
        char prio[16];
        snprintf(prio, sizeof(prio), "%d", (int)v[i].priority);
        ok = kq_resource_copy(&r, &v[i].req) == 0 && kq_resource_set(&r, "pods", 1) == 0;
        json_t *res = ok ? dao_res_pruned(&r) : NULL;
        kq_resource_free(&r);
        json_t *a = res != NULL ? json_pack("{s:s,s:{s:s,s:s},s:o,s:s,s:s}", "allocationKey", v[i].uid,
                                            "allocationTags", "kubernetes.io/meta/namespace", v[i].ns,
                                            "kubernetes.io/meta/podName", v[i].name, "resource", res,
                                            "priority", prio, "nodeId", node)
                                : NULL;
        if (a != NULL && v[i].app != NULL && json_object_set_new(a, "applicationId", json_string(v[i].app)) != 0) {
            json_decref(a);
            a = NULL;
        }
        ok = a != NULL && json_array_append_new(list, a) == 0;
    }
    ok = ok && json_object_set(o, "allocations", list) == 0;
    json_decref(list);
    kq_ledger_victims_free(v, n);
    return ok ? 0 : KQ_ENOMEM;
}

int kq_rest_node(kq_app_t *app, const char *partition, const char *node, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    json_t *v = nodes_view(app, node != NULL ? node : "");
    if (v == NULL)
        return reply_json(NULL, 500, body, len);
    json_t *one = json_incref(json_array_get(v, 0));
    json_decref(v);
    if (one == NULL)
        return reply_error(404, "Node not found", body, len);
    if (node_allocations(app, node, one) != 0) {
        json_decref(one);
        one = NULL;
    }
    return reply_json(one, 200, body, len);
}

/* YuniKorn's allowedAppActiveStatuses (handlers.go init): the states of an active
 * application. kubequota's applications are all Running (each has a running pod). */
static const char *const active_statuses[] = {"new", "accepted", "running", "completing", "failing", "resuming"};
#define ACTIVE_STATUS_MSG "Only following active statuses are allowed: new,accepted,running,completing,failing,resuming"

/* 0: the answer is every active application; 1: a state or status no kubequota
 * application is in ([]); else an error reply (*body set). */
static int status_select(const char *status, char **body, size_t *len)
{
    if (status == NULL || status[0] == '\0' || strcasecmp(status, "running") == 0)
        return 0;
    for (size_t i = 0; i < sizeof(active_statuses) / sizeof(active_statuses[0]); i++)
        if (strcasecmp(status, active_statuses[i]) == 0)
            return 1;
    return reply_error(400, ACTIVE_STATUS_MSG, body, len);
}

int kq_rest_apps_select(kq_app_t *app, const char *partition, const char *queue, const char *state,
                        const char *status, char **body, size_t *len)
{
    *body = NULL;
    *len = 0;
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    if (queue != NULL) { /* getQueueApplicationsByState: the queue, then the state, then the status */
        json_t *q;
        st = queue_object(app, partition, queue, &q, body, len);
        if (st != 0)
            return st;
        json_decref(q);
        if (state == NULL || strcasecmp(state, "active") != 0)
            return reply_error(400, "Only following application states are allowed: active", body, len);
    } else if (state != NULL && strcasecmp(state, "active") != 0) {
        return kq_rest_apps(app, partition, state, body, len); /* [] or 400 */
    }
    st = status_select(status, body, len);
    return st == 1 ? reply_json(json_array(), 200, body, len) : st;
}

typedef struct app_find {
    const char *id;
    json_t *hit;
} app_find_t;

static int find_app(void *data, json_t *a)
{
    app_find_t *f = data;
    if (f->hit == NULL && strcmp(json_string_value(json_object_get(a, "applicationID")), f->id) == 0)
        f->hit = json_incref(a);
    return 0;
}

int kq_rest_application(kq_app_t *app, const char *partition, const char *queue, const char *id, char **body,
                        size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    char path[KQ_UGM_PATH_MAX + 1] = "";
    if (queue != NULL) {
        json_t *q;
        st = queue_object(app, partition, queue, &q, body, len);
        if (st != 0)
            return st;
        snprintf(path, sizeof(path), "%s", json_string_value(json_object_get(q, "queuename")));
        json_decref(q);
    }
    app_find_t f = {.id = id != NULL ? id : "", .hit = NULL};
    if (kq_ugm_apps_each(app->ugm, queue != NULL ? path : NULL, find_app, &f) != 0) {
        json_decref(f.hit);
        return reply_json(NULL, 500, body, len);
    }
    if (f.hit == NULL)
        return reply_error(404, "Application not found", body, len);
    return reply_json(f.hit, 200, body, len);
}

/* Process start in nanoseconds since the epoch (the first call). */
static long long start_ns(void)
{
    static _Atomic long long t0;
    long long v = t0;
    if (v == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        long long zero = 0;
        if (!atomic_compare_exchange_strong(&t0, &zero, now))
            now = zero; /* another thread was first: its time */
        v = now;
    }
    return v;
}

void kq_rest_init(void)
{
    (void)start_ns();
}

int kq_rest_partitions(kq_app_t *app, char **body, size_t *len)
{
    if (app->ugm == NULL)
        return reply_error(503, "usage tracking is not initialised", body, len);
    kq_resource_t used = KQ_RESOURCE_EMPTY, cap = KQ_RESOURCE_EMPTY;
    size_t apps = 0, pods = 0;
    if (kq_ugm_totals(app->ugm, &used, &apps, &pods) != 0) {
        kq_resource_free(&used);
        return reply_error(500, "usage totals unavailable", body, len);
    }
    json_t *nodes = app->elastic != NULL ? kq_elastic_nodes_json(app->elastic) : json_array();
    size_t i;
    json_t *n;
    bool ok = nodes != NULL;
    json_array_foreach(nodes, i, n) {
        kq_resource_t r = KQ_RESOURCE_EMPTY; /* initialised: kq_resource_from_json writes into it */
        char err[128];
        if (ok && kq_resource_from_json(json_object_get(n, "allocatable"), &r, err, sizeof(err)) == 0)
            ok = kq_resource_add(&cap, &r) == 0;
        kq_resource_free(&r);
    }
    size_t total_nodes = json_array_size(nodes);
    json_decref(nodes);
    json_t *capacity = ok ? json_object() : NULL;
    ok = capacity != NULL;
    if (ok && cap.n > 0)
        ok = json_object_set_new(capacity, "capacity", dao_res(&cap)) == 0;
    if (ok && used.n > 0)
        ok = json_object_set_new(capacity, "usedCapacity", dao_res(&used)) == 0;
    if (ok && cap.n > 0 && used.n > 0) {
        /* percent used per resource, as YuniKorn's CalculateAbsUsedCapacity: only the
         * resources something uses (a missing one is left out, not 0) */
        json_t *util = json_object();
        ok = util != NULL && json_object_set_new(capacity, "utilization", util) == 0;
        for (uint32_t k = 0; ok && k < cap.n; k++) {
            bool present = false;
            int64_t u = kq_resource_get(&used, KQ_RES_E(&cap)[k].name, &present);
            if (!present)
                continue;
            int64_t c = KQ_RES_E(&cap)[k].value;
            double d = c > 0 ? (double)u / (double)c * 100 : 100;
            json_int_t pct = u <= 0 ? 0 : d > 2147483647.0 ? 2147483647 : (json_int_t)d;
            const char *name = strcmp(KQ_RES_E(&cap)[k].name, "cpu") == 0 ? "vcore" : KQ_RES_E(&cap)[k].name;
            ok = json_object_set_new(util, name, json_integer(pct)) == 0;
        }
        if (ok && json_object_size(util) == 0)
            json_object_del(capacity, "utilization"); /* omitempty */
    }
    kq_resource_free(&cap);
    kq_resource_free(&used);
    json_t *o = ok ? json_pack("{s:s,s:s,s:o,s:{s:s},s:b,s:b,s:s,s:I}", "clusterId", "kubernetes", "name",
                               app->partition, "capacity", capacity, "nodeSortingPolicy", "type", "fair",
                               "preemptionEnabled", 0, "quotaPreemptionEnabled", 0, "state", "Active",
                               "lastStateTransitionTime", (json_int_t)start_ns())
                   : NULL;
    if (o == NULL && !ok)
        json_decref(capacity);
    if (o != NULL && total_nodes > 0 && json_object_set_new(o, "totalNodes", json_integer((json_int_t)total_nodes)) != 0)
        ok = false;
    if (o != NULL && ok &&
        json_object_set_new(o, "applications", json_pack("{s:I,s:I}", "total", (json_int_t)apps, "Running", (json_int_t)apps)) != 0)
        ok = false;
    if (o != NULL && ok && pods > 0 && json_object_set_new(o, "totalContainers", json_integer((json_int_t)pods)) != 0)
        ok = false;
    json_t *arr = o != NULL && ok ? json_array() : NULL;
    if (arr != NULL && json_array_append_new(arr, o) != 0) {
        json_decref(arr);
        arr = NULL;
    } else if (arr == NULL) {
        json_decref(o);
    }
    return reply_json(arr, 200, body, len);
}

int kq_rest_clusters(kq_app_t *app, char **body, size_t *len)
{
    json_t *o = json_pack("[{s:I,s:[{s:s,s:s}],s:s,s:s}]", "startTime", (json_int_t)start_ns(),
                          "rmBuildInformation", "rmId", "kubequota", "isPluginVersion", "false", "partition", app->partition != NULL ? app->partition : "default", "clusterName",
                          "kubernetes");
    return reply_json(o, 200, body, len);
}

int kq_rest_healthcheck(kq_app_t *app, char **body, size_t *len)
{
    bool ready = atomic_load(&app->ready);
    json_t *o = json_pack("{s:b,s:[{s:s,s:b,s:s}]}", "Healthy", ready, "HealthChecks", "Name", "Pod list loaded",
                          "Succeeded", ready, "Description",
                          "The first full pod list is applied, so usage counts what already runs");
    json_t *check = json_array_get(json_object_get(o, "HealthChecks"), 0);
    if (check != NULL && !ready && /* omitempty, as the DAO */
        json_object_set_new(check, "DiagnosisMessage",
                            json_string("waiting for the first pod list from the API server")) != 0) {
        json_decref(o);
        o = NULL;
    }
    return reply_json(o, 200, body, len);
}

/* The configuration in queues.yaml's own key names (JSON is YAML too). */
static json_t *res_quantities(const kq_resource_t *r)
{
    json_t *o = json_object();
    for (uint32_t i = 0; o != NULL && i < r->n; i++) {
        char q[64];
        kq_quantity_format(KQ_RES_E(r)[i].name, KQ_RES_E(r)[i].value, q, sizeof(q));
        if (json_object_set_new(o, strcmp(KQ_RES_E(r)[i].name, "cpu") == 0 ? "vcore" : KQ_RES_E(r)[i].name, json_string(q)) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

static bool set_new(json_t *o, const char *k, json_t *v)
{
    return v != NULL && json_object_set_new(o, k, v) == 0;
}

static json_t *limits_conf_json(const kq_limit_conf_t *l, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        json_t *o = json_object(), *users = json_array(), *groups = json_array();
        bool ok = o != NULL && users != NULL && groups != NULL;
        for (size_t j = 0; ok && j < l[i].n_users; j++)
            ok = json_array_append_new(users, json_string(l[i].users[j])) == 0;
        for (size_t j = 0; ok && j < l[i].n_groups; j++)
            ok = json_array_append_new(groups, json_string(l[i].groups[j])) == 0;
        if (ok && l[i].description != NULL)
            ok = set_new(o, "limit", json_string(l[i].description));
        if (ok && l[i].n_users > 0)
            ok = set_new(o, "users", json_incref(users));
        if (ok && l[i].n_groups > 0)
            ok = set_new(o, "groups", json_incref(groups));
        if (ok && l[i].has_max_resources)
            ok = set_new(o, "maxresources", res_quantities(&l[i].max_resources));
        if (ok && l[i].max_applications != 0)
            ok = set_new(o, "maxapplications", json_integer((json_int_t)l[i].max_applications));
        json_decref(users);
        json_decref(groups);
        if (!ok || json_array_append_new(arr, o) != 0) {
            if (!ok)
                json_decref(o);
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr;
}

static json_t *queue_conf_json(const kq_queue_conf_t *q)
{
    json_t *o = json_object();
    bool ok = o != NULL && set_new(o, "name", json_string(q->name));
    if (ok && q->is_parent && q->n_children == 0)
        ok = set_new(o, "parent", json_true());
    if (ok && (q->has_max || q->has_guaranteed)) {
        json_t *r = json_object();
        ok = set_new(o, "resources", r);
        if (ok && q->has_guaranteed)
            ok = set_new(r, "guaranteed", res_quantities(&q->guaranteed));
        if (ok && q->has_max)
            ok = set_new(r, "max", res_quantities(&q->max));
    }
    if (ok && q->max_applications != 0)
        ok = set_new(o, "maxapplications", json_integer((json_int_t)q->max_applications));
    if (ok && q->n_properties > 0) {
        json_t *p = json_object();
        ok = set_new(o, "properties", p);
        for (size_t i = 0; ok && i < q->n_properties; i++)
            ok = set_new(p, q->properties[i].key, json_string(q->properties[i].value));
    }
    if (ok && q->submit_acl != NULL)
        ok = set_new(o, "submitacl", json_string(q->submit_acl));
    if (ok && q->admin_acl != NULL)
        ok = set_new(o, "adminacl", json_string(q->admin_acl));
    if (ok && q->n_limits > 0)
        ok = set_new(o, "limits", limits_conf_json(q->limits, q->n_limits));
    if (ok && q->n_children > 0) {
        json_t *c = json_array();
        ok = set_new(o, "queues", c);
        for (size_t i = 0; ok && i < q->n_children; i++)
            ok = json_array_append_new(c, queue_conf_json(q->children[i])) == 0;
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int kq_rest_config(kq_app_t *app, char **body, size_t *len)
{
    kq_config_t *cfg = app->config != NULL ? kq_config_holder_get(app->config) : NULL;
    if (cfg == NULL)
        return reply_error(404, "Configuration not found", body, len);
    json_t *parts = json_array();
    bool ok = parts != NULL;
    for (size_t i = 0; ok && i < kq_config_partition_count(cfg); i++) {
        const kq_partition_conf_t *p = kq_config_partition_at(cfg, i);
        json_t *o = json_object(), *queues = json_array();
        ok = o != NULL && queues != NULL && set_new(o, "name", json_string(p->name)) &&
             json_array_append_new(queues, queue_conf_json(p->root)) == 0 && set_new(o, "queues", json_incref(queues));
        if (ok && p->n_limits > 0)
            ok = set_new(o, "limits", limits_conf_json(p->limits, p->n_limits));
        json_decref(queues);
        if (!ok || json_array_append_new(parts, o) != 0) {
            if (!ok)
                json_decref(o);
            ok = false;
        }
    }
    kq_config_unref(cfg);
    json_t *doc = ok ? json_pack("{s:o}", "partitions", parts) : NULL;
    if (doc == NULL && !ok)
        json_decref(parts);
    return reply_json(doc, 200, body, len);
}

int kq_rest_placement_rules(kq_app_t *app, const char *partition, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    kq_config_t *cfg = app->config ? kq_config_holder_get(app->config) : NULL;
    json_t *view = kq_placement_rules_json(cfg ? kq_config_partition(cfg, app->partition) : NULL);
    kq_config_unref(cfg); /* the view holds copies */
    return reply_json(view, 200, body, len);
}

int kq_rest_gating_waiting(kq_app_t *app, const char *partition, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    return reply_json(app->gating ? kq_gating_waiting_json(app->gating, NULL) : json_array(), 200, body, len);
}

/* ------------------------------------------------------------------ YuniKorn's metrics */

/* A label value as the text format escapes it. */
static void prom_label(FILE *f, const char *v)
{
    for (; v != NULL && *v != '\0'; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

static void prom_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* yunikorn-core pkg/metrics/init.go formatMetricName: bytes outside [a-zA-Z0-9_:] become
 * '_', and a leading digit gets a '_' before it. */
static void metric_name(const char *in, char *out, size_t n)
{
    size_t k = 0;
    if (in[0] >= '0' && in[0] <= '9' && k + 1 < n)
        out[k++] = '_';
    for (; *in != '\0' && k + 1 < n; in++) {
        unsigned char c = (unsigned char)*in;
        out[k++] = (isalnum(c) && c < 0x80) || c == '_' || c == ':' ? (char)c : '_';
    }
    out[k] = '\0';
}

#define HELP_QUEUE_APP                                                                                        \
    "Queue application metrics. State of the application includes `new`, `accepted`, `rejected`, `running`, " \
    "`failing`, `failed`, `resuming`, `completing`, `completed`."
#define HELP_QUEUE_RESOURCE                                                                                   \
    "Queue resource metrics. State of the resource includes `guaranteed`, `max`, `allocated`, `pending`, "     \
    "`preempting`, `maxRunningApps`."

/* The queue states of queue_resource and the queue view's field each comes from. */
static const struct { const char *state, *field; } queue_states[] = {
    {"guaranteed", "guaranteedResource"},
    {"max", "maxResource"},
    {"allocated", "allocatedResource"},
    {"pending", "pendingResource"},
};

/* The samples of one queue: queue_app (leaves: running applications) when app is set, else
 * queue_resource. label: the queue label (yunikorn_queue_*), or NULL for the per-queue
 * families of YuniKorn before 1.7 (yunikorn_<queue>_queue_*), named `family`. */
static void queue_samples(FILE *f, const json_t *q, bool app, const char *family, const char *label)
{
    const char *lbl = label != NULL ? "queue=\"" : "";
    if (app) {
        if (!json_is_true(json_object_get(q, "isLeaf")))
            return;
        fprintf(f, "%s{%s", family, lbl);
        if (label != NULL) {
            prom_label(f, label);
            fputs("\",", f);
        }
        fprintf(f, "state=\"running\"} %" JSON_INTEGER_FORMAT "\n",
                json_integer_value(json_object_get(q, "runningApps")));
        return;
    }
    for (size_t s = 0; s < sizeof(queue_states) / sizeof(queue_states[0]); s++) {
        const char *res;
        json_t *v;
        json_object_foreach((json_t *)json_object_get(q, queue_states[s].field), res, v) {
            fprintf(f, "%s{%s", family, lbl);
            if (label != NULL) {
                prom_label(f, label);
                fputs("\",", f);
            }
            fputs("resource=\"", f);
            prom_label(f, res);
            fprintf(f, "\",state=\"%s\"} %" JSON_INTEGER_FORMAT "\n", queue_states[s].state, json_integer_value(v));
        }
    }
    json_t *max_apps = json_object_get(q, "maxRunningApps");
    if (max_apps != NULL) {
        fprintf(f, "%s{%s", family, lbl);
        if (label != NULL) {
            prom_label(f, label);
            fputs("\",", f);
        }
        fprintf(f, "resource=\"apps\",state=\"maxRunningApps\"} %" JSON_INTEGER_FORMAT "\n",
                json_integer_value(max_apps));
    }
}

/* Every queue of the view, depth first: the labelled families (legacy false) or each
 * queue's own pre-1.7 families (legacy true). seen: the legacy family names written; two
 * queue paths that format alike ("root.a-b", "root.a_b") get one family, the first, as
 * YuniKorn's registry refuses the second. */
static void queue_walk(FILE *f, const json_t *q, bool app, bool legacy, json_t *seen)
{
    const char *name = json_string_value(json_object_get(q, "queuename"));
    if (name != NULL && !legacy) {
        queue_samples(f, q, app, app ? "yunikorn_queue_app" : "yunikorn_queue_resource", name);
    } else if (name != NULL) {
        char fmt[KQ_UGM_PATH_MAX + 2], family[KQ_UGM_PATH_MAX + 64];
        metric_name(name, fmt, sizeof(fmt));
        snprintf(family, sizeof(family), "yunikorn_%s_queue_%s", fmt, app ? "app" : "resource");
        bool any = app ? json_is_true(json_object_get(q, "isLeaf")) : json_object_get(q, "maxRunningApps") != NULL;
        for (size_t s = 0; !app && !any && s < sizeof(queue_states) / sizeof(queue_states[0]); s++)
            any = json_object_size(json_object_get(q, queue_states[s].field)) > 0;
        if (any && json_object_get(seen, family) == NULL && json_object_set_new(seen, family, json_true()) == 0) {
            /* a family without samples is not written, as client_golang writes none */
            prom_family(f, family, "gauge", app ? HELP_QUEUE_APP : HELP_QUEUE_RESOURCE);
            queue_samples(f, q, app, family, NULL);
        }
    }
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(q, "children"), i, c) {
        queue_walk(f, c, app, legacy, seen);
    }
}

/* yunikorn-core pkg/metrics/scheduler.go resourceUsageRangeBuckets */
static const char *const usage_ranges[10] = {"[0,10%]",   "(10%,20%]", "(20%,30%]", "(30%,40%]", "(40%,50%]",
                                             "(50%,60%]", "(60%,70%]", "(70%,80%]", "(80%,90%]", "(90%,100%]"};

/* yunikorn_scheduler_<resource>_node_usage_total{range}: how many nodes use each tenth of
 * their capacity of a resource, as partition.go calculateNodesResourceUsage counts them. */
static bool node_usage(FILE *f, const json_t *nodes)
{
    json_t *hist = json_object(); /* resource -> [10 counts] */
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n) {
        const char *res;
        json_t *total;
        json_object_foreach(json_object_get(n, "capacity"), res, total) {
            json_int_t t = json_integer_value(total);
            if (t <= 0 || hist == NULL)
                continue;
            double v = (double)json_integer_value(json_object_get(json_object_get(n, "allocated"), res)) / (double)t;
            v = v > 1 ? 1 : v; /* over-allocated: 100% */
            int idx = (int)ceil(v * 10) - 1;
            idx = idx < 0 ? 0 : idx;
            json_t *h = json_object_get(hist, res);
            if (h == NULL) {
                h = json_pack("[iiiiiiiiii]", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
                if (h == NULL || json_object_set_new(hist, res, h) != 0) {
                    json_decref(hist);
                    hist = NULL;
                    continue;
                }
            }
            json_t *c = json_array_get(h, (size_t)idx);
            json_integer_set(c, json_integer_value(c) + 1);
        }
    }
    const char *res;
    json_t *h;
    json_object_foreach(hist, res, h) {
        char fmt[128], family[192];
        metric_name(res, fmt, sizeof(fmt));
        snprintf(family, sizeof(family), "yunikorn_scheduler_%s_node_usage_total", fmt);
        prom_family(f, family, "gauge", "Total resource usage of node, by resource name.");
        for (size_t k = 0; k < 10; k++)
            fprintf(f, "%s{range=\"%s\"} %" JSON_INTEGER_FORMAT "\n", family, usage_ranges[k],
                    json_integer_value(json_array_get(h, k)));
    }
    bool ok = hist != NULL;
    json_decref(hist);
    return ok;
}

char *kq_rest_metrics(kq_app_t *app, size_t *len)
{
    *len = 0;
    if (app->ugm == NULL)
        return NULL;
    json_t *queues = queues_view(app);
    json_t *nodes = queues != NULL ? nodes_view(app, NULL) : NULL;
    kq_resource_t used = KQ_RESOURCE_EMPTY;
    size_t apps = 0, pods = 0;
    bool ok = nodes != NULL && kq_ugm_totals(app->ugm, &used, &apps, &pods) == 0;
    kq_resource_free(&used);
    char *text = NULL;
    size_t n = 0;
    FILE *f = ok ? open_memstream(&text, &n) : NULL;
    if (f != NULL) {
        prom_family(f, "yunikorn_queue_app", "gauge", HELP_QUEUE_APP);
        queue_walk(f, queues, true, false, NULL);
        prom_family(f, "yunikorn_queue_resource", "gauge", HELP_QUEUE_RESOURCE);
        queue_walk(f, queues, false, false, NULL);
        json_t *seen = json_object();
        queue_walk(f, queues, true, true, seen);
        queue_walk(f, queues, false, true, seen);
        json_decref(seen);
        prom_family(f, "yunikorn_scheduler_application_total", "gauge",
                    "Total number of applications. State of the application includes `running`, `resuming`, "
                    "`failing`, `completing`, `completed` and `failed`.");
        fprintf(f, "yunikorn_scheduler_application_total{state=\"running\"} %zu\n", apps);
        prom_family(f, "yunikorn_scheduler_node", "gauge",
                    "Total number of nodes. State of the node includes `active` and `failed`.");
        fprintf(f, "yunikorn_scheduler_node{state=\"active\"} %zu\n", json_array_size(nodes));
        ok = node_usage(f, nodes);
        ok = fclose(f) == 0 && ok;
    }
    json_decref(queues);
    json_decref(nodes);
    if (!ok || text == NULL) {
        free(text);
        return NULL;
    }
    *len = n;
    return text;
}

/* ------------------------------------------------------------------ the web UI's other reads */

int kq_rest_node_utilizations(kq_app_t *app, char **body, size_t *len)
{
    if (app->ugm == NULL)
        return reply_error(503, "usage tracking is not initialised", body, len);
    json_t *nodes = nodes_view(app, NULL);
    json_t *by_type = nodes != NULL ? json_object() : NULL; /* resource -> [10 arrays of names] */
    size_t i;
    json_t *n;
    bool ok = by_type != NULL;
    json_array_foreach(nodes, i, n) {
        const char *res;
        json_t *cap;
        json_object_foreach(json_object_get(n, "capacity"), res, cap) {
            /* resources.CalculateAbsUsedCapacity: a whole percentage; then the bucket
             * Dim(Ceil(v/10), 1) of getPartitionNodesUtilJSON */
            json_int_t c = json_integer_value(cap);
            json_int_t u = json_integer_value(json_object_get(json_object_get(n, "allocated"), res));
            json_int_t pct = u <= 0 ? 0 : c <= 0 ? 100 : (json_int_t)((double)u / (double)c * 100);
            int idx = (int)ceil((double)pct / 10) - 1;
            idx = idx < 0 ? 0 : idx > 9 ? 9 : idx;
            json_t *b = json_object_get(by_type, res);
            if (ok && b == NULL) {
                b = json_pack("[[],[],[],[],[],[],[],[],[],[]]");
                ok = b != NULL && json_object_set_new(by_type, res, b) == 0;
            }
            if (ok)
                ok = json_array_append(json_array_get(b, (size_t)idx), json_object_get(n, "nodeID")) == 0;
        }
    }
    json_t *list = ok ? json_array() : NULL;
    const char *res;
    json_t *b;
    json_object_foreach(by_type, res, b) {
        json_t *util = json_array();
        for (int k = 0; util != NULL && k < 10; k++) {
            char name[16];
            snprintf(name, sizeof(name), "%d-%d%%", k * 10, (k + 1) * 10);
            json_t *names = json_array_get(b, (size_t)k);
            json_t *o = json_pack("{s:s}", "bucketName", name);
            if (o != NULL && json_array_size(names) > 0 && /* omitempty */
                (json_object_set_new(o, "numOfNodes", json_integer((json_int_t)json_array_size(names))) != 0 ||
                 json_object_set(o, "nodeNames", names) != 0)) {
                json_decref(o);
                o = NULL;
            }
            if (o == NULL || json_array_append_new(util, o) != 0) {
                json_decref(util);
                util = NULL;
            }
        }
        json_t *t = util != NULL ? json_pack("{s:s,s:o}", "type", res, "utilization", util) : NULL;
        if (list != NULL && (t == NULL || json_array_append_new(list, t) != 0)) {
            json_decref(list);
            list = NULL;
        }
    }
    json_decref(by_type);
    json_decref(nodes);
    json_t *part = list != NULL ? json_pack("{s:s,s:s}", "clusterId", "kubernetes", "partition", app->partition) : NULL;
    if (part != NULL && json_array_size(list) > 0 && json_object_set(part, "utilizations", list) != 0) {
        json_decref(part);
        part = NULL;
    }
    json_decref(list);
    json_t *out = part != NULL ? json_pack("[o]", part) : NULL;
    return reply_json(out, 200, body, len);
}

int kq_rest_history(kq_app_t *app, char **body, size_t *len)
{
    (void)app;
    /* what YuniKorn answers with its internal metrics collection off (getApplicationHistory,
     * getContainerHistory): kubequota keeps no history */
    return reply_error(500, "Internal metrics collection is not enabled.", body, len);
}
