/* REST usage view: YuniKorn's /ws/v1 usage and queue endpoints over the ugm's JSON views,
 * and /ws/v1/validate-conf over the config loader. Transport-free: the server module
 * routes the request, these functions only produce status and body.
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
 * handed over as new references; serialisation happens after the locks are released.
 */
#include "kubequota/rest.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/config.h"
#include "kubequota/elastic.h"
#include "kubequota/error.h"
#include "kubequota/sync.h"
#include "kubequota/ugm.h"

/* ------------------------------------------------------------------ helpers */

char *kq_rest_error_body(const char *message, size_t *len)
{
    json_t *o = json_pack("{s:s}", "error", message ? message : "");
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

static int reply_error(int status, const char *message, char **body, size_t *len)
{
    *body = kq_rest_error_body(message, len);
    if (*body == NULL) {
        *len = 0;
        return 500;
    }
    return status;
}

/* A name from the URL, safe to quote in a JSON error message: control characters and
 * non-ASCII bytes (possibly invalid UTF-8) become '?', and it is cut at 200 bytes. */
static const char *printable(const char *in, char *out, size_t outlen)
{
    size_t i = 0;
    for (; in != NULL && in[i] != '\0' && i + 1 < outlen && i < 200; i++) {
        unsigned char c = (unsigned char)in[i];
        out[i] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    out[i] = '\0';
    return out;
}

/* 0 when the partition is the one this process serves; else a 404 reply. */
static int check_partition(kq_app_t *app, const char *partition, char **body, size_t *len)
{
    if (app->ugm == NULL)
        return reply_error(503, "usage tracking is not initialised", body, len);
    if (partition == NULL || app->partition == NULL || strcmp(partition, app->partition) != 0) {
        char msg[512], name[256];
        snprintf(msg, sizeof(msg), "partition \"%s\" not found", printable(partition, name, sizeof(name)));
        return reply_error(404, msg, body, len);
    }
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
        if (v != NULL && json_object_set(q, fields[i].to, v) != 0)
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

int kq_rest_queues(kq_app_t *app, const char *partition, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    json_t *view = kq_ugm_queues_json(app->ugm);
    if (view == NULL || app->elastic == NULL)
        return reply_json(view, 200, body, len);
    json_t *tree = kq_qtree_json(kq_elastic_qtree(app->elastic));
    json_t *by_name = json_object();
    bool ok = tree != NULL && by_name != NULL;
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
    return reply_json(view, 200, body, len);
}

int kq_rest_user(kq_app_t *app, const char *partition, const char *user, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    json_t *v = kq_ugm_user_json(app->ugm, user);
    if (v == NULL) {
        char msg[512], name[256];
        snprintf(msg, sizeof(msg), "user \"%s\" not found (no usage tracked)", printable(user, name, sizeof(name)));
        return reply_error(404, msg, body, len);
    }
    return reply_json(v, 200, body, len);
}

int kq_rest_group(kq_app_t *app, const char *partition, const char *group, char **body, size_t *len)
{
    int st = check_partition(app, partition, body, len);
    if (st != 0)
        return st;
    json_t *v = kq_ugm_group_json(app->ugm, group);
    if (v == NULL) {
        char msg[512], name[256];
        snprintf(msg, sizeof(msg), "group \"%s\" not found (no usage tracked)", printable(group, name, sizeof(name)));
        return reply_error(404, msg, body, len);
    }
    return reply_json(v, 200, body, len);
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
