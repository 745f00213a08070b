/* Unit tests for the pod model: identity, queue and application resolution, the effective
 * request (Kubernetes' rules), and errors that name the field. Expected values are worked
 * out by hand in the comments next to them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kubequota/engine/config.h"
#include "kubequota/kube/pod.h"
#include "kubequota/kube/podkeys.h"

#include "testutil.h"

#define GI (1024LL * 1024 * 1024)
#define MI (1024LL * 1024)

static const char QUEUES_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: default\n"
    "          - name: team-a\n"
    "          - name: dev\n"
    "            queues:\n"
    "              - name: alice\n"
    "              - name: shared\n"
    "          - name: prod\n"
    "            queues:\n"
    "              - name: shared\n"
    "          - name: empty\n"
    "            parent: true\n";

/* No root.default. */
static const char NODEFAULT_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: x\n";

typedef struct fx {
    kq_config_t *cfg, *cfg_nodefault;
    kq_pod_opts_t opts;
} fx_t;

static kq_config_t *load(const char *yaml)
{
    return test_config(yaml);
}

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    f->cfg = load(QUEUES_YAML);
    f->cfg_nodefault = load(NODEFAULT_YAML);
    if (f->cfg == NULL || f->cfg_nodefault == NULL)
        return -1;
    f->opts.partition = kq_config_partition(f->cfg, "default");
    f->opts.default_user = NULL;
    *state = f;
    return f->opts.partition ? 0 : -1;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    kq_config_unref(f->cfg);
    kq_config_unref(f->cfg_nodefault);
    free(f);
    return 0;
}

/* Parses JSON text and the pod; returns kq_pod_parse's code. */
static void assert_same_str(const char *a, const char *b, const char *what)
{
    if ((a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0))
        fail_msg("filtered pod differs in %s: %s vs %s", what, a ? a : "(null)", b ? b : "(null)");
}

/* Every pod a test parses is also decoded the way the informer decodes it (only
 * kq_pod_fields built, by jscan) and must parse to the very same result: a field that
 * kq_pod_parse reads and the filter drops fails here. */
static void assert_same_pod(const kq_pod_t *a, const kq_pod_t *b)
{
    assert_same_str(a->uid, b->uid, "uid");
    assert_same_str(a->ns, b->ns, "namespace");
    assert_same_str(a->name, b->name, "name");
    assert_same_str(a->node, b->node, "node");
    assert_same_str(a->scheduler_name, b->scheduler_name, "schedulerName");
    assert_same_str(a->user, b->user, "user");
    assert_same_str(a->queue, b->queue, "queue");
    assert_same_str(a->queue_error, b->queue_error, "queue_error");
    assert_int_equal(a->queue_denial, b->queue_denial);
    assert_int_equal(a->queue_named, b->queue_named);
    assert_same_str(a->queue_value, b->queue_value, "queue_value");
    assert_same_str(a->queue_source, b->queue_source, "queue_source");
    assert_same_str(a->app_id, b->app_id, "app_id");
    assert_same_str(a->quota_name, b->quota_name, "quota_name");
    assert_int_equal(a->n_groups, b->n_groups);
    for (size_t i = 0; i < a->n_groups; i++)
        assert_same_str(a->groups[i], b->groups[i], "groups");
    assert_int_equal(a->phase, b->phase);
    assert_int_equal(a->deleting, b->deleting);
    assert_int_equal(a->priority, b->priority);
    assert_int_equal(a->preemptible, b->preemptible);
    assert_int_equal(a->created, b->created);
    assert_int_equal(a->n_gates, b->n_gates);
    assert_int_equal(a->gate_pos, b->gate_pos);
    assert_same_str(a->gang, b->gang, "gang");
    assert_int_equal(a->gang_min, b->gang_min);
    assert_int_equal(a->n_claims, b->n_claims);
    for (size_t i = 0; i < a->n_claims; i++)
        assert_same_str(a->claims[i], b->claims[i], "claims");
    assert_true(kq_resource_equal(&a->request, &b->request));
}

/* Parses the pod as the whole document (keep NULL); then checks that the informer's view
 * (only kq_pod_fields decoded) and the jansson entry point give the same result. */
static int parse_with(const kq_pod_opts_t *opts, const char *text, kq_pod_t *p, char *err, size_t errlen)
{
    kq_jdoc_t whole = {0};
    kq_jscan_error_t je;
    if (kq_jdoc_parse(&whole, text, strlen(text), NULL, &je) != 0)
        fail_msg("test JSON invalid: %s: %s", je.text, text);
    err[0] = '\0';
    int rc = kq_pod_parse(kq_jdoc_root(&whole), opts, p, err, errlen);
    kq_jdoc_free(&whole);

    for (int way = 0; way < 2; way++) {
        kq_pod_t q;
        char ferr[512] = "";
        size_t flen = errlen < sizeof(ferr) ? errlen : sizeof(ferr);
        int frc;
        if (way == 0) {
            frc = kq_pod_parse_text(text, strlen(text), opts, &q, ferr, flen);
        } else {
            json_t *j = json_loads(text, 0, NULL);
            assert_non_null(j);
            frc = kq_pod_parse_json(j, opts, &q, ferr, flen);
            json_decref(j);
        }
        assert_int_equal(frc, rc);
        if (rc == 0) {
            assert_same_pod(p, &q);
            kq_pod_clear(&q);
        } else {
            assert_string_equal(ferr, err); /* the same reason, naming the same field */
        }
    }
    return rc;
}

/* A pod with the given metadata.labels / annotations / spec / status fragments. */
static char *pod_json(const char *ns, const char *labels, const char *anns, const char *spec, const char *status)
{
    char *s = NULL;
    int n = asprintf(&s,
                     "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"%s\",\"uid\":\"uid-1\","
                     "\"labels\":%s,\"annotations\":%s},"
                     "\"spec\":%s,\"status\":%s}",
                     ns, labels ? labels : "{}", anns ? anns : "{}",
                     spec ? spec : "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]}",
                     status ? status : "{\"phase\":\"Pending\"}");
    assert_true(n > 0);
    return s;
}

static int parse_parts(void **state, const char *ns, const char *labels, const char *anns, const char *spec,
                       const char *status, kq_pod_t *p, char *err, size_t errlen)
{
    fx_t *f = *state;
    char *s = pod_json(ns, labels, anns, spec, status);
    int rc = parse_with(&f->opts, s, p, err, errlen);
    free(s);
    return rc;
}

static void assert_res(const kq_resource_t *r, const char *name, int64_t want)
{
    bool present = false;
    int64_t v = kq_resource_get(r, name, &present);
    if (!present || v != want)
        fail_msg("%s: want %lld, got %lld (present=%d)", name, (long long)want, (long long)v, present);
}

static void assert_contains(const char *hay, const char *needle)
{
    if (strstr(hay, needle) == NULL)
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

/* ------------------------------------------------------------------ reference pod -- */

static char *read_ref(const char *file)
{
    const char *dir = getenv("KQ_SHARED_REF");
    if (dir == NULL)
        dir = "../shared/reference/k8s";
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return NULL;
    char *buf = malloc(1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return buf;
}

/* The DRA extended-resource path (issue 39): a registered mapper adds to the computed
 * request (here as control/slices.c does: example.com/gpu backed by class xgpu), on every
 * entry point; unregistered, nothing is added. */
static int map_gpu(void *ud, kq_resource_t *req)
{
    int64_t n = kq_resource_get(req, "example.com/gpu", NULL);
    (*(int *)ud)++;
    return n > 0 ? kq_resource_set(req, "xgpu.deviceclass.resource.k8s.io/devices", n) : 0;
}

static void test_extended_resource_mapper(void **state)
{
    int calls = 0;
    kq_pod_t p;
    char err[256];
    const char *spec = "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\","
                       "\"example.com/gpu\":\"2\"},\"limits\":{\"example.com/gpu\":\"2\"}}}]}";
    kq_pod_set_extended_mapper(map_gpu, &calls);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), 0);
    kq_pod_set_extended_mapper(NULL, NULL);
    assert_true(calls >= 3); /* the document, the text and the jansson entry points */
    assert_res(&p.request, "example.com/gpu", 2);
    assert_res(&p.request, "xgpu.deviceclass.resource.k8s.io/devices", 2);
    assert_res(&p.request, "cpu", 1000);
    kq_pod_clear(&p);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), 0);
    assert_int_equal(kq_resource_get(&p.request, "xgpu.deviceclass.resource.k8s.io/devices", NULL), 0);
    kq_pod_clear(&p);
}

static void test_reference_pod(void **state)
{
    fx_t *f = *state;
    char *text = read_ref("pod.json");
    if (text == NULL) {
        print_message("skipped: reference pod.json not found (set KQ_SHARED_REF)\n");
        skip();
    }
    kq_pod_t p;
    char err[512];
    assert_int_equal(parse_with(&f->opts, text, &p, err, sizeof(err)), 0);
    free(text);
    assert_string_equal(p.uid, "3f6c2a1e-8b9d-4e2f-a1c3-5d7e9f0b1a2c");
    assert_string_equal(p.ns, "team-a");
    assert_string_equal(p.name, "train-7c9d8-x2kqp");
    assert_null(p.node);
    assert_string_equal(p.scheduler_name, "quota-scheduler");
    assert_int_equal(p.phase, KQ_POD_PENDING);
    assert_false(p.deleting);
    assert_string_equal(p.user, "nobody");
    assert_int_equal(p.n_groups, 0);
    assert_string_equal(p.queue, "root.team-a"); /* default: root.<namespace> is a leaf */
    assert_null(p.queue_error);
    assert_string_equal(p.app_id, "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"); /* the ReplicaSet */
    /* max(container 2 cpu / 8Gi, init 500m / 256Mi) */
    assert_int_equal(p.request.n, 3);
    assert_res(&p.request, "cpu", 2000);
    assert_res(&p.request, "memory", 8 * GI);
    assert_res(&p.request, "nvidia.com/gpu", 1);
    assert_int_equal(p.priority, 0);
    assert_true(p.preemptible);
    assert_int_equal(p.created, 1795256102); /* date -u -d 2026-11-21T10:15:02Z +%s */
    kq_pod_clear(&p);
}

static void test_extender_args_pod(void **state)
{
    fx_t *f = *state;
    char *text = read_ref("extender-filter-args.nodecachecapable-true.json");
    if (text == NULL) {
        print_message("skipped: reference extender args not found (set KQ_SHARED_REF)\n");
        skip();
    }
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(j);
    kq_pod_t p;
    char err[512];
    assert_int_equal(kq_pod_parse_json(json_object_get(j, "Pod"), &f->opts, &p, err, sizeof(err)), 0);
    assert_string_equal(p.queue, "root.team-a");
    assert_res(&p.request, "cpu", 2000);
    kq_pod_clear(&p);
    json_decref(j);
}

/* ------------------------------------------------------------------------ identity -- */

static void test_identity_kubequota(void **state)
{
    kq_pod_t p;
    char err[512];
    assert_int_equal(parse_parts(state, "team-a", NULL,
                                 "{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"alice\\\",\\\"groups\\\":"
                                 "[\\\"dev\\\",\\\"ml\\\",\\\"dev\\\"]}\"}",
                                 NULL, NULL, &p, err, sizeof(err)),
                     0);
    assert_string_equal(p.user, "alice");
    assert_int_equal(p.n_groups, 2); /* duplicate "dev" dropped, order kept */
    assert_string_equal(p.groups[0], "dev");
    assert_string_equal(p.groups[1], "ml");
    kq_pod_clear(&p);
}

/* spec.schedulingGates: counted, kubequota's gate found by name at its index (the
 * informer's filtered view must see it too: parse_with compares). */
static void test_scheduling_gates(void **state)
{
    kq_pod_t p;
    char err[512];
    static const char *const C = "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]";
    char spec[512];
    snprintf(spec, sizeof spec, "{%s}", C);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n_gates, 0);
    assert_false(kq_pod_is_gated(&p));
    kq_pod_clear(&p);
    snprintf(spec, sizeof spec, "{%s,\"schedulingGates\":[{\"name\":\"example.com/a\"},"
             "{\"name\":\"kubequota.io/admission\"}]}", C);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n_gates, 2);
    assert_true(kq_pod_is_gated(&p));
    assert_int_equal(p.gate_pos, 2);
    kq_pod_clear(&p);
    snprintf(spec, sizeof spec, "{%s,\"schedulingGates\":[{\"name\":\"kubequota.io/admissionX\"}]}", C);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), 0);
    assert_false(kq_pod_is_gated(&p));
    kq_pod_clear(&p);
    snprintf(spec, sizeof spec, "{%s,\"schedulingGates\":[\"kubequota.io/admission\"]}", C);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), KQ_EPARSE);
    assert_non_null(strstr(err, "spec.schedulingGates[0]"));
    snprintf(spec, sizeof spec, "{%s,\"schedulingGates\":{}}", C);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), KQ_EPARSE);
}

/* Gangs: Kueue's pod group (label + total count) and YuniKorn's task group (name + the
 * task-groups JSON's minMember); malformed descriptions leave the pod without a gang. Keys:
 * kubernetes-sigs/kueue pkg/controller/jobs/pod (GroupNameLabel, GroupTotalCountAnnotation),
 * apache/yunikorn-k8shim pkg/common/constants (AnnotationTaskGroupName, AnnotationTaskGroups). */
static void test_gangs(void **state)
{
    kq_pod_t p;
    char err[512];
    assert_int_equal(parse_parts(state, "ns", "{\"kueue.x-k8s.io/pod-group-name\":\"job\"}",
                                 "{\"kueue.x-k8s.io/pod-group-total-count\":\"4\"}", NULL, NULL, &p, err,
                                 sizeof(err)), 0);
    assert_string_equal(p.gang, "kueue:ns/job");
    assert_int_equal(p.gang_min, 4);
    kq_pod_clear(&p);
    assert_int_equal(parse_parts(state, "ns", "{\"kueue.x-k8s.io/pod-group-name\":\"job\"}",
                                 "{\"kueue.x-k8s.io/pod-group-total-count\":\"4x\"}", NULL, NULL, &p, err,
                                 sizeof(err)), 0);
    assert_null(p.gang);
    kq_pod_clear(&p);
    assert_int_equal(parse_parts(state, "ns", "{\"applicationId\":\"spark-1\"}",
                                 "{\"yunikorn.apache.org/task-group-name\":\"exec\","
                                 "\"yunikorn.apache.org/task-groups\":\"[{\\\"name\\\":\\\"driver\\\","
                                 "\\\"minMember\\\":1},{\\\"name\\\":\\\"exec\\\",\\\"minMember\\\":8}]\"}",
                                 NULL, NULL, &p, err, sizeof(err)), 0);
    assert_string_equal(p.gang, "yunikorn:spark-1/exec");
    assert_int_equal(p.gang_min, 8);
    kq_pod_clear(&p);
    assert_int_equal(parse_parts(state, "ns", NULL,
                                 "{\"yunikorn.apache.org/task-group-name\":\"exec\","
                                 "\"yunikorn.apache.org/task-groups\":\"[{\\\"name\\\":\\\"exec\\\"\"}",
                                 NULL, NULL, &p, err, sizeof(err)), 0);
    assert_null(p.gang);
    kq_pod_clear(&p);
}

static void test_identity_yunikorn(void **state)
{
    kq_pod_t p;
    char err[512];
    assert_int_equal(parse_parts(state, "team-a", NULL,
                                 "{\"yunikorn.apache.org/user.info\":\"{\\\"user\\\":\\\"bob\\\",\\\"groups\\\":"
                                 "[\\\"ops\\\"]}\"}",
                                 NULL, NULL, &p, err, sizeof(err)),
                     0);
    assert_string_equal(p.user, "bob");
    assert_int_equal(p.n_groups, 1);
    assert_string_equal(p.groups[0], "ops");
    kq_pod_clear(&p);

    /* Both: ours wins. Groups may be absent. */
    assert_int_equal(parse_parts(state, "team-a", NULL,
                                 "{\"yunikorn.apache.org/user.info\":\"{\\\"user\\\":\\\"bob\\\"}\","
                                 "\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"carol\\\"}\"}",
                                 NULL, NULL, &p, err, sizeof(err)),
                     0);
    assert_string_equal(p.user, "carol");
    assert_int_equal(p.n_groups, 0);
    assert_null(p.groups);
    kq_pod_clear(&p);
}

static void test_identity_default(void **state)
{
    fx_t *f = *state;
    kq_pod_t p;
    char err[512];
    assert_int_equal(parse_parts(state, "team-a", NULL, NULL, NULL, NULL, &p, err, sizeof(err)), 0);
    assert_string_equal(p.user, "nobody");
    kq_pod_clear(&p);

    kq_pod_opts_t o = f->opts;
    o.default_user = "anonymous";
    char *s = pod_json("team-a", NULL, NULL, NULL, NULL);
    assert_int_equal(parse_with(&o, s, &p, err, sizeof(err)), 0);
    free(s);
    assert_string_equal(p.user, "anonymous");
    assert_int_equal(p.n_groups, 0);
    kq_pod_clear(&p);
}

/* An identity annotation is read as YuniKorn's shim reads it (apache/yunikorn-k8shim
 * pkg/common/utils/utils.go GetUserFromPod, utils_test.go TestGetUserFromPodAnnotation:
 * "Empty username" -> nobody with the groups, "Invalid JSON" -> nobody without groups;
 * json.Unmarshal ignores unknown members, matches names case-insensitively, keeps the last
 * of repeated ones and fails on a wrong type): never a refused pod; the reason is noted. */
static void test_identity_garbage(void **state)
{
    fx_t *f = *state;
    static const struct {
        const char *anns, *user, *groups, *why; /* groups: comma-joined; why: NULL = no note */
    } cases[] = {
        /* TestGetUserFromPodAnnotation's cases */
        {"{\"yunikorn.apache.org/user.info\":\"{\\\"user\\\":\\\"test\\\",\\\"groups\\\":[\\\"devops\\\",\\\"test\\\"]}\"}",
         "test", "devops,test", NULL},
        {"{\"yunikorn.apache.org/user.info\":\"{\\\"user\\\":\\\"\\\",\\\"groups\\\":[\\\"devops\\\",\\\"test\\\"]}\"}",
         "nobody", "devops,test", "has no user"},
        {"{\"yunikorn.apache.org/user.info\":\"xyzxyz\"}", "nobody", "",
         "annotation yunikorn.apache.org/user.info: not valid JSON"},
        /* an empty annotation is none (GetUserFromPod: != "") */
        {"{\"yunikorn.apache.org/user.info\":\"\"}", "nobody", "", NULL},
        {"{\"kubequota.io/user-info\":\"\",\"yunikorn.apache.org/user.info\":\"{\\\"user\\\":\\\"b\\\"}\"}", "b", "",
         NULL},
        /* json.Unmarshal into si.UserGroupInformation */
        {"{\"kubequota.io/user-info\":\"alice\"}", "nobody", "", "not valid JSON"},
        {"{\"kubequota.io/user-info\":\"{\\\"user\\\":\"}", "nobody", "", "not valid JSON"},
        {"{\"kubequota.io/user-info\":\"[\\\"alice\\\"]\"}", "nobody", "", "not a JSON object"},
        {"{\"kubequota.io/user-info\":\"null\"}", "nobody", "", "has no user"},
        {"{\"kubequota.io/user-info\":\"{}\"}", "nobody", "", "has no user"},
        {"{\"kubequota.io/user-info\":\"{\\\"user\\\":7,\\\"groups\\\":[\\\"g\\\"]}\"}", "nobody", "", "is not a string"},
        {"{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"a\\\",\\\"groups\\\":\\\"admin\\\"}\"}", "nobody", "",
         "is not an array"},
        {"{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"a\\\",\\\"groups\\\":[1]}\"}", "nobody", "", "groups[0]"},
        {"{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"a\\\",\\\"admin\\\":true}\"}", "a", "", NULL},
        {"{\"kubequota.io/user-info\":\"{\\\"User\\\":\\\"a\\\",\\\"GROUPS\\\":[\\\"g\\\",null,\\\"g\\\"]}\"}", "a", "g",
         NULL},
        {"{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"a\\\",\\\"user\\\":\\\"root\\\"}\"}", "root", "", NULL},
        {"{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"a\\\",\\\"groups\\\":null}\"}", "a", "", NULL},
        /* kubequota's own bound on names: control characters */
        {"{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"a\\\\nb\\\"}\"}", "nobody", "", "control characters"},
        /* the first annotation present decides: a valid YuniKorn one does not rescue a broken one */
        {"{\"kubequota.io/user-info\":\"x\",\"yunikorn.apache.org/user.info\":\"{\\\"user\\\":\\\"b\\\"}\"}", "nobody",
         "", "kubequota.io/user-info: not valid JSON"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kq_pod_t p;
        char err[512], why[512];
        kq_pod_opts_t o = f->opts;
        o.identity_note = why;
        o.identity_note_len = sizeof(why);
        strcpy(why, "stale");
        char *s = pod_json("team-a", NULL, cases[i].anns, NULL, NULL);
        int rc = parse_with(&o, s, &p, err, sizeof(err));
        free(s);
        if (rc != 0)
            fail_msg("case %zu: rc %d: %s", i, rc, err);
        char got[256] = "";
        for (size_t g = 0; g < p.n_groups; g++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", g ? "," : "", p.groups[g]);
        if (strcmp(p.user, cases[i].user) != 0 || strcmp(got, cases[i].groups) != 0)
            fail_msg("case %zu: want %s [%s], got %s [%s]", i, cases[i].user, cases[i].groups, p.user, got);
        if (cases[i].why == NULL ? why[0] != '\0' : strstr(why, cases[i].why) == NULL)
            fail_msg("case %zu: want a note with \"%s\", got \"%s\"", i, cases[i].why ? cases[i].why : "", why);
        kq_pod_clear(&p);
    }
    /* the default user stands in, whatever it is named */
    kq_pod_t p;
    char err[512];
    kq_pod_opts_t o = f->opts;
    o.default_user = "anonymous";
    char *s = pod_json("team-a", NULL, "{\"yunikorn.apache.org/user.info\":\"xyzxyz\"}", NULL, NULL);
    assert_int_equal(parse_with(&o, s, &p, err, sizeof(err)), 0);
    free(s);
    assert_string_equal(p.user, "anonymous");
    kq_pod_clear(&p);
    /* not a string at all is not a pod the API server would store */
    assert_int_equal(parse_parts(state, "team-a", NULL, "{\"kubequota.io/user-info\":{\"user\":\"alice\"}}", NULL, NULL,
                                 &p, err, sizeof(err)),
                     KQ_EPARSE);
    assert_contains(err, "annotation kubequota.io/user-info: not a string");
}

/* --------------------------------------------------------------------------- queue -- */

static kq_denial_t last_qdenial; /* the queue_denial of expect_queue's last pod */
static bool last_qnamed;         /* and whether it named a queue */

static void expect_queue(void **state, const char *ns, const char *labels, const char *anns, const char *queue,
                         const char *qerr)
{
    kq_pod_t p;
    char err[512];
    int rc = parse_parts(state, ns, labels, anns, NULL, NULL, &p, err, sizeof(err));
    if (rc != 0)
        fail_msg("parse failed: %s", err);
    if (queue != NULL) {
        if (p.queue == NULL || strcmp(p.queue, queue) != 0)
            fail_msg("labels %s anns %s: want queue %s, got %s (%s)", labels, anns, queue, p.queue,
                     p.queue_error);
        assert_null(p.queue_error);
        assert_int_equal(p.queue_denial, KQ_DENIAL_NONE);
    } else {
        if (p.queue != NULL)
            fail_msg("labels %s anns %s: want no queue, got %s", labels, anns, p.queue);
        assert_non_null(p.queue_error);
        if (strcmp(p.queue_error, qerr) != 0)
            fail_msg("want queue_error \"%s\", got \"%s\"", qerr, p.queue_error);
    }
    last_qdenial = p.queue_denial;
    last_qnamed = p.queue_named;
    kq_pod_clear(&p);
}

/* Issue 29: every label and annotation the parser can read (kq_pod_fields lets nothing else
 * through, and a filtered parse equals a whole one: test_fields) is in kq_pod_keys, the
 * list the webhook guards and the chart's matchConditions name, or is one of the gang keys
 * below, which place nothing (they only group pods for the admission gate's release). */
static const kq_jfilter_t *sub_of(const kq_jfilter_t *f, const char *key)
{
    for (; f != NULL && f->key != NULL; f++)
        if (strcmp(f->key, key) == 0)
            return f->sub;
    return NULL;
}

static bool in_pod_keys(bool annotation, const char *key)
{
    for (size_t i = 0; i < KQ_POD_N_KEYS; i++)
        if (kq_pod_keys[i].annotation == annotation && strcmp(kq_pod_keys[i].key, key) == 0)
            return true;
    return false;
}

static void test_read_keys_are_guarded(void **state)
{
    (void)state;
    static const char *const unguarded[] = {
        "kueue.x-k8s.io/pod-group-name", "kueue.x-k8s.io/pod-group-total-count",
        "yunikorn.apache.org/task-group-name", "yunikorn.apache.org/task-groups",
    };
    const kq_jfilter_t *meta = sub_of(kq_pod_fields, "metadata");
    assert_non_null(meta);
    for (int a = 0; a < 2; a++) {
        const kq_jfilter_t *f = sub_of(meta, a ? "annotations" : "labels");
        assert_non_null(f);
        for (; f->key != NULL; f++) {
            bool ok = in_pod_keys(a == 1, f->key);
            for (size_t i = 0; !ok && i < sizeof(unguarded) / sizeof(unguarded[0]); i++)
                ok = strcmp(unguarded[i], f->key) == 0;
            if (!ok)
                fail_msg("%s %s is read by the pod parser but is not in KQ_POD_KEYS (podkeys.h)",
                         a ? "annotation" : "label", f->key);
        }
    }
    /* and every key of the list reaches the parser */
    for (size_t i = 0; i < KQ_POD_N_KEYS; i++) {
        const kq_jfilter_t *f = sub_of(meta, kq_pod_keys[i].annotation ? "annotations" : "labels");
        bool found = false;
        for (; f != NULL && f->key != NULL && !found; f++)
            found = strcmp(f->key, kq_pod_keys[i].key) == 0;
        if (!found)
            fail_msg("%s is in KQ_POD_KEYS but the informer's field filter drops it", kq_pod_keys[i].key);
    }
}

static void test_queue_named(void **state)
{
    /* YuniKorn's canonical queue label (issue 29: read, so guarded) */
    expect_queue(state, "x", "{\"yunikorn.apache.org/queue\":\"root.team-a\"}", NULL, "root.team-a", NULL);
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"root.dev.alice\"}", NULL, "root.dev.alice", NULL);
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"alice\"}", NULL, "root.dev.alice", NULL); /* leaf name */
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"team-a\"}", NULL, "root.team-a", NULL);
    expect_queue(state, "x", NULL, "{\"kubequota.io/queue\":\"root.team-a\"}", "root.team-a", NULL);
    /* label beats annotation, ours beats YuniKorn's */
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"root.team-a\"}", "{\"kubequota.io/queue\":\"alice\"}",
                 "root.team-a", NULL);
    expect_queue(state, "x", "{\"queue\":\"root.default\",\"kubequota.io/queue\":\"alice\"}", NULL,
                 "root.dev.alice", NULL);
    /* YuniKorn's label: full path, leaf name, path relative to root */
    expect_queue(state, "x", "{\"queue\":\"root.team-a\"}", NULL, "root.team-a", NULL);
    expect_queue(state, "x", "{\"queue\":\"alice\"}", NULL, "root.dev.alice", NULL);
    expect_queue(state, "x", "{\"queue\":\"dev.shared\"}", NULL, "root.dev.shared", NULL);
    expect_queue(state, "x", NULL, "{\"yunikorn.apache.org/queue\":\"prod.shared\"}", "root.prod.shared", NULL);
    /* queue names are case-insensitive; the resolved path is the configured one */
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"Root.Dev.Alice\"}", NULL, "root.dev.alice", NULL);
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"ALICE\"}", NULL, "root.dev.alice", NULL);
    expect_queue(state, "x", "{\"queue\":\"Dev.Shared\"}", NULL, "root.dev.shared", NULL);
    /* an empty value counts as absent: default for namespace team-a */
    expect_queue(state, "team-a", "{\"kubequota.io/queue\":\"\"}", NULL, "root.team-a", NULL);
}

/* Issue 38: a parsed pod placed again by another config (a reload) gets the queue that
 * config gives it, from the key it named (kept in queue_value) or from its namespace. */
static void test_place_again(void **state)
{
    fx_t *f = *state;
    kq_pod_t p;
    char err[512];
    kq_pod_opts_t other = {.partition = kq_config_partition(f->cfg_nodefault, "default")};
    /* namespace team-a, no queue named: root.team-a; by a config without it nor root.default: none */
    assert_int_equal(parse_parts(state, "team-a", NULL, NULL, NULL, NULL, &p, err, sizeof(err)), 0);
    assert_string_equal(p.queue, "root.team-a");
    assert_null(p.queue_value);
    assert_int_equal(kq_pod_place(&other, &p), 0);
    assert_null(p.queue);
    assert_non_null(p.queue_error);
    assert_int_equal(p.queue_denial, KQ_DENIAL_QUEUE_NOT_LEAF);
    assert_int_equal(kq_pod_place(&f->opts, &p), 0);
    assert_string_equal(p.queue, "root.team-a");
    assert_null(p.queue_error);
    assert_int_equal(p.queue_denial, KQ_DENIAL_NONE);
    kq_pod_clear(&p);
    /* a named leaf: found again by its name, or missing, with the key in the reason */
    assert_int_equal(parse_parts(state, "x", "{\"queue\":\"alice\"}", NULL, NULL, NULL, &p, err, sizeof(err)), 0);
    assert_string_equal(p.queue, "root.dev.alice");
    assert_string_equal(p.queue_value, "alice");
    assert_string_equal(p.queue_source, "queue");
    assert_int_equal(kq_pod_place(&other, &p), 0);
    assert_null(p.queue);
    assert_string_equal(p.queue_error, "queue \"alice\" does not exist");
    assert_int_equal(kq_pod_place(&f->opts, &p), 0);
    assert_string_equal(p.queue, "root.dev.alice");
    kq_pod_clear(&p);
}

static void test_queue_errors(void **state)
{
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"root.x\"}", NULL, NULL, "queue \"root.x\" does not exist");
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"nope\"}", NULL, NULL, "queue \"nope\" does not exist");
    expect_queue(state, "x", "{\"queue\":\"dev.nope\"}", NULL, NULL, "queue \"root.dev.nope\" does not exist");
    assert_int_equal(last_qdenial, KQ_DENIAL_QUEUE_MISSING);
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"root.dev\"}", NULL, NULL,
                 "queue \"root.dev\" is a parent queue; pods run only in leaf queues");
    assert_int_equal(last_qdenial, KQ_DENIAL_QUEUE_NOT_LEAF);
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"dev\"}", NULL, NULL,
                 "queue \"root.dev\" is a parent queue; pods run only in leaf queues");
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"root.empty\"}", NULL, NULL,
                 "queue \"root.empty\" is a parent queue; pods run only in leaf queues");
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"root\"}", NULL, NULL,
                 "queue \"root\" is a parent queue; pods run only in leaf queues");
    expect_queue(state, "x", "{\"kubequota.io/queue\":\"shared\"}", NULL, NULL,
                 "queue name \"shared\" is ambiguous (root.dev.shared, root.prod.shared, ...); use the full path");
    assert_int_equal(last_qdenial, KQ_DENIAL_QUEUE_MISSING); /* no one queue by that name */
    assert_true(last_qnamed); /* named: the pod ledger never admits it without a queue */

    /* a label that is not a string is a parse error naming it */
    kq_pod_t p;
    char err[512];
    assert_int_equal(parse_parts(state, "x", "{\"kubequota.io/queue\":5}", NULL, NULL, NULL, &p, err, sizeof(err)),
                     KQ_EPARSE);
    assert_string_equal(err, "pod x/web-1: label kubequota.io/queue: not a string");
}

static void test_queue_default(void **state)
{
    fx_t *f = *state;
    expect_queue(state, "team-a", NULL, NULL, "root.team-a", NULL); /* root.<ns> is a leaf */
    expect_queue(state, "dev", NULL, NULL, "root.default", NULL);   /* root.dev is a parent */
    expect_queue(state, "other", NULL, NULL, "root.default", NULL); /* no root.other */

    kq_pod_t p;
    char err[512];
    kq_pod_opts_t o = {.partition = kq_config_partition(f->cfg_nodefault, "default")};
    assert_non_null(o.partition);
    char *s = pod_json("other", NULL, NULL, NULL, NULL);
    assert_int_equal(parse_with(&o, s, &p, err, sizeof(err)), 0);
    assert_null(p.queue);
    assert_string_equal(p.queue_error,
                        "no queue named for the pod, and neither root.other nor root.default is a leaf queue");
    assert_false(p.queue_named); /* an ElasticQuota group may still govern it (ledger.c) */
    kq_pod_clear(&p);
    /* root.<ns> exists there */
    free(s);
    s = pod_json("x", NULL, NULL, NULL, NULL);
    assert_int_equal(parse_with(&o, s, &p, err, sizeof(err)), 0);
    assert_string_equal(p.queue, "root.x");
    kq_pod_clear(&p);

    /* no configuration at all */
    o.partition = NULL;
    assert_int_equal(parse_with(&o, s, &p, err, sizeof(err)), 0);
    assert_null(p.queue);
    assert_string_equal(p.queue_error, "no queue configuration loaded");
    kq_pod_clear(&p);
    free(s);
}

/* ----------------------------------------------------------------------------- app -- */

static void expect_app(void **state, const char *json, const char *want)
{
    fx_t *f = *state;
    kq_pod_t p;
    char err[512];
    int rc = parse_with(&f->opts, json, &p, err, sizeof(err));
    if (rc != 0)
        fail_msg("%s", err);
    assert_string_equal(p.app_id, want);
    kq_pod_clear(&p);
}

static void test_app_id(void **state)
{
    const char *owners = "\"ownerReferences\":[{\"kind\":\"Foo\",\"uid\":\"not-controller\"},"
                         "{\"kind\":\"Job\",\"uid\":\"job-uid\",\"controller\":true}]";
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"metadata\":{\"uid\":\"u1\",\"labels\":{\"kubequota.io/app-id\":\"app-a\","
             "\"applicationId\":\"yk-app\"},%s}}", owners);
    expect_app(state, buf, "app-a");
    snprintf(buf, sizeof(buf), "{\"metadata\":{\"uid\":\"u1\",\"labels\":{\"applicationId\":\"yk-app\"},%s}}",
             owners);
    expect_app(state, buf, "yk-app");
    snprintf(buf, sizeof(buf), "{\"metadata\":{\"uid\":\"u1\",%s}}", owners);
    expect_app(state, buf, "job-uid");
    expect_app(state, "{\"metadata\":{\"uid\":\"u1\",\"ownerReferences\":[{\"kind\":\"Foo\",\"uid\":\"x\"}]}}",
               "u1");
    expect_app(state, "{\"metadata\":{\"uid\":\"u1\",\"ownerReferences\":[{\"uid\":\"x\",\"controller\":false}]}}",
               "u1");
    expect_app(state, "{\"metadata\":{\"uid\":\"u1\"}}", "u1");
}

/* YuniKorn's application id keys and generated ids (apache/yunikorn-k8shim
 * pkg/common/utils/utils.go GetApplicationIDFromPod, GenerateApplicationID; constants.go
 * AutoGenAppPrefix "yunikorn", AutoGenAppSuffix "autogen"). */
static void test_app_id_yunikorn(void **state)
{
    fx_t *f = *state;
    /* the shim's order: canonical label, annotation, applicationId, spark-app-selector */
    expect_app(state, "{\"metadata\":{\"uid\":\"u1\",\"labels\":{\"yunikorn.apache.org/app-id\":\"c\","
               "\"applicationId\":\"l\",\"spark-app-selector\":\"s\"},"
               "\"annotations\":{\"yunikorn.apache.org/app-id\":\"a\"}}}", "c");
    expect_app(state, "{\"metadata\":{\"uid\":\"u1\",\"labels\":{\"applicationId\":\"l\","
               "\"spark-app-selector\":\"s\"},\"annotations\":{\"yunikorn.apache.org/app-id\":\"a\"}}}", "a");
    expect_app(state, "{\"metadata\":{\"uid\":\"u1\",\"labels\":{\"applicationId\":\"l\","
               "\"spark-app-selector\":\"s\"}}}", "l");
    expect_app(state, "{\"metadata\":{\"uid\":\"u1\",\"labels\":{\"spark-app-selector\":\"s\"}}}", "s");
    /* kubequota's own label first */
    expect_app(state, "{\"metadata\":{\"uid\":\"u1\",\"labels\":{\"kubequota.io/app-id\":\"k\","
               "\"yunikorn.apache.org/app-id\":\"c\"}}}", "k");
    /* the admission controller's placeholder for a unique id: "<ns>-uniqueautogen" */
    expect_app(state, "{\"metadata\":{\"uid\":\"u1\",\"labels\":{\"applicationId\":"
               "\"team-uniqueautogen\"}}}", "team-u1");

    /* generated ids for pods without one */
    kq_pod_opts_t o = f->opts;
    kq_pod_t p;
    char err[512];
    o.app_id_fallback = KQ_APPID_YUNIKORN;
    assert_int_equal(parse_with(&o, "{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"team-a\"}}", &p, err,
                                sizeof(err)), 0);
    assert_string_equal(p.app_id, "yunikorn-team-a-autogen");
    kq_pod_clear(&p);
    /* cut at 63 bytes: "yunikorn-" (9) + 54 bytes of a 60-byte namespace */
    char ns[61], text[256], want[64];
    memset(ns, 'n', 60);
    ns[60] = '\0';
    snprintf(text, sizeof(text), "{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"%s\"}}", ns);
    assert_int_equal(parse_with(&o, text, &p, err, sizeof(err)), 0);
    snprintf(want, sizeof(want), "yunikorn-%.54s", ns);
    assert_string_equal(p.app_id, want);
    kq_pod_clear(&p);
    /* generateUniqueAppId: the namespace cut at 26 bytes, then the pod's UID */
    o.app_id_fallback = KQ_APPID_YUNIKORN_UNIQUE;
    assert_int_equal(parse_with(&o, text, &p, err, sizeof(err)), 0);
    snprintf(want, sizeof(want), "%.26s-u1", ns);
    assert_string_equal(p.app_id, want);
    kq_pod_clear(&p);
    /* an owner does not matter then */
    assert_int_equal(parse_with(&o, "{\"metadata\":{\"uid\":\"u2\",\"namespace\":\"x\",\"ownerReferences\":"
                                "[{\"uid\":\"job\",\"controller\":true}]}}", &p, err, sizeof(err)), 0);
    assert_string_equal(p.app_id, "x-u2");
    kq_pod_clear(&p);
}

/* ------------------------------------------------------------------------- request -- */

static kq_resource_t request_of(void **state, const char *spec, const char *status)
{
    kq_pod_t p;
    char err[512];
    int rc = parse_parts(state, "team-a", NULL, NULL, spec, status, &p, err, sizeof(err));
    if (rc != 0)
        fail_msg("parse failed: %s", err);
    kq_resource_t r = p.request;
    kq_pod_clear(&p);
    return r;
}

static void test_request_containers_sum(void **state)
{
    kq_resource_t r = request_of(state,
                                 "{\"containers\":["
                                 "{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"250m\",\"memory\":\"64Mi\"}}},"
                                 "{\"name\":\"b\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"nvidia.com/gpu\":2}}},"
                                 "{\"name\":\"c\"}]}",
                                 NULL);
    assert_int_equal(r.n, 3);
    assert_res(&r, "cpu", 1250);
    assert_res(&r, "memory", 64 * MI);
    assert_res(&r, "nvidia.com/gpu", 2);
}

static void test_request_init_wins(void **state)
{
    /* containers 500m + 100Mi; init containers 2 cpu, then 1 cpu + 1Gi:
     * cpu max(500, 2000, 1000) = 2000, memory max(100Mi, 0, 1Gi) = 1Gi */
    kq_resource_t r = request_of(state,
                                 "{\"containers\":[{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"500m\","
                                 "\"memory\":\"100Mi\"}}}],"
                                 "\"initContainers\":["
                                 "{\"name\":\"i1\",\"resources\":{\"requests\":{\"cpu\":\"2\"}}},"
                                 "{\"name\":\"i2\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}]}",
                                 NULL);
    assert_res(&r, "cpu", 2000);
    assert_res(&r, "memory", GI);

    /* a smaller init container does not add anything */
    r = request_of(state,
                   "{\"containers\":[{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}],"
                   "\"initContainers\":[{\"name\":\"i1\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}]}",
                   NULL);
    assert_int_equal(r.n, 1);
    assert_res(&r, "cpu", 500);
}

static void test_request_sidecars(void **state)
{
    /* init: s1 (sidecar 100m, 64Mi), i1 (1 cpu), s2 (sidecar 200m), i2 (50m); app 500m + 128Mi.
     * sum = 500 + 100 + 200 = 800; init uses: s1 100, i1 1000+100 = 1100, s2 300, i2 50+300 = 350
     * cpu = max(800, 1100) = 1100; memory: sum 128Mi + 64Mi = 192Mi, init max 64Mi -> 192Mi */
    kq_resource_t r = request_of(state,
                                 "{\"containers\":[{\"name\":\"app\",\"resources\":{\"requests\":{\"cpu\":\"500m\","
                                 "\"memory\":\"128Mi\"}}}],"
                                 "\"initContainers\":["
                                 "{\"name\":\"s1\",\"restartPolicy\":\"Always\",\"resources\":{\"requests\":"
                                 "{\"cpu\":\"100m\",\"memory\":\"64Mi\"}}},"
                                 "{\"name\":\"i1\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}},"
                                 "{\"name\":\"s2\",\"restartPolicy\":\"Always\",\"resources\":{\"requests\":"
                                 "{\"cpu\":\"200m\"}}},"
                                 "{\"name\":\"i2\",\"resources\":{\"requests\":{\"cpu\":\"50m\"}}}]}",
                                 NULL);
    assert_res(&r, "cpu", 1100);
    assert_res(&r, "memory", 192 * MI);

    /* order matters: sidecar 300m before init 600m -> 900; after it -> sum 800 */
    r = request_of(state,
                   "{\"containers\":[{\"name\":\"app\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}],"
                   "\"initContainers\":["
                   "{\"name\":\"s\",\"restartPolicy\":\"Always\",\"resources\":{\"requests\":{\"cpu\":\"300m\"}}},"
                   "{\"name\":\"i\",\"resources\":{\"requests\":{\"cpu\":\"600m\"}}}]}",
                   NULL);
    assert_res(&r, "cpu", 900);
    r = request_of(state,
                   "{\"containers\":[{\"name\":\"app\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}],"
                   "\"initContainers\":["
                   "{\"name\":\"i\",\"resources\":{\"requests\":{\"cpu\":\"600m\"}}},"
                   "{\"name\":\"s\",\"restartPolicy\":\"Always\",\"resources\":{\"requests\":{\"cpu\":\"300m\"}}}]}",
                   NULL);
    assert_res(&r, "cpu", 800);
    /* restartPolicy other than Always on an init container: a regular init container */
    r = request_of(state,
                   "{\"containers\":[{\"name\":\"app\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}],"
                   "\"initContainers\":[{\"name\":\"s\",\"restartPolicy\":\"OnFailure\",\"resources\":"
                   "{\"requests\":{\"cpu\":\"300m\"}}}]}",
                   NULL);
    assert_res(&r, "cpu", 500);
}

static void test_request_overhead_and_limits(void **state)
{
    /* 1 cpu + overhead 250m / 120Mi */
    kq_resource_t r = request_of(state,
                                 "{\"containers\":[{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],"
                                 "\"overhead\":{\"cpu\":\"250m\",\"memory\":\"120Mi\"}}",
                                 NULL);
    assert_res(&r, "cpu", 1250);
    assert_res(&r, "memory", 120 * MI);

    /* limits only: limits are the requests */
    r = request_of(state,
                   "{\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":{\"cpu\":\"2\",\"memory\":\"1Gi\"}}}]}",
                   NULL);
    assert_res(&r, "cpu", 2000);
    assert_res(&r, "memory", GI);

    /* mixed: cpu requested, memory only limited; an explicit request is kept below its limit */
    r = request_of(state,
                   "{\"containers\":[{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"100m\"},"
                   "\"limits\":{\"cpu\":\"4\",\"memory\":\"512Mi\"}}}]}",
                   NULL);
    assert_res(&r, "cpu", 100);
    assert_res(&r, "memory", 512 * MI);

    /* pod-level requests replace cpu/memory; extended resources stay from containers */
    r = request_of(state,
                   "{\"resources\":{\"requests\":{\"cpu\":\"3\"}},"
                   "\"containers\":[{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\","
                   "\"example.com/foo\":\"2\"}}}]}",
                   NULL);
    assert_res(&r, "cpu", 3000);
    assert_res(&r, "memory", GI);
    assert_res(&r, "example.com/foo", 2);

    /* empty spec: nothing requested */
    r = request_of(state, "{}", NULL);
    assert_true(kq_resource_is_zero(&r));
}

static void test_request_resize(void **state)
{
    const char *spec1 = "{\"containers\":[{\"name\":\"app\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]}";
    const char *spec4 = "{\"containers\":[{\"name\":\"app\",\"resources\":{\"requests\":{\"cpu\":\"4\"}}}]}";
    /* shrinking: spec 1, kubelet still has 2 allocated -> 2 */
    kq_resource_t r = request_of(state, spec1,
                                 "{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"app\","
                                 "\"allocatedResources\":{\"cpu\":\"2\"},\"resources\":{\"requests\":{\"cpu\":\"2\"}}}]}");
    assert_res(&r, "cpu", 2000);
    /* growing: spec 4, allocated 1 -> 4 */
    r = request_of(state, spec4,
                   "{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"app\","
                   "\"allocatedResources\":{\"cpu\":\"1\"}}]}");
    assert_res(&r, "cpu", 4000);
    /* actuated larger than allocated and spec -> actuated */
    r = request_of(state, spec1,
                   "{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"app\","
                   "\"allocatedResources\":{\"cpu\":\"1\"},\"resources\":{\"requests\":{\"cpu\":\"3\"}}}]}");
    assert_res(&r, "cpu", 3000);
    /* infeasible: the spec is left out -> allocated 1 */
    r = request_of(state, spec4,
                   "{\"phase\":\"Running\",\"conditions\":[{\"type\":\"PodResizePending\",\"reason\":\"Infeasible\"}],"
                   "\"containerStatuses\":[{\"name\":\"app\",\"allocatedResources\":{\"cpu\":\"1\"}}]}");
    assert_res(&r, "cpu", 1000);
    /* deferred: spec counts -> 4 */
    r = request_of(state, spec4,
                   "{\"phase\":\"Running\",\"conditions\":[{\"type\":\"PodResizePending\",\"reason\":\"Deferred\"}],"
                   "\"containerStatuses\":[{\"name\":\"app\",\"allocatedResources\":{\"cpu\":\"1\"}}]}");
    assert_res(&r, "cpu", 4000);
}

static void test_request_direct(void **state)
{
    (void)state;
    kq_jdoc_t spec = {0};
    static const char ok[] = "{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],"
                             "\"overhead\":{\"cpu\":\"100m\"}}";
    assert_int_equal(kq_jdoc_parse(&spec, ok, strlen(ok), NULL, NULL), 0);
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    char err[256];
    assert_int_equal(kq_pod_request(kq_jdoc_root(&spec), &r, err, sizeof(err)), 0);
    assert_res(&r, "cpu", 1100);

    static const char bad[] = "{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"x\"}}}]}";
    assert_int_equal(kq_jdoc_parse(&spec, bad, strlen(bad), NULL, NULL), 0);
    assert_int_equal(kq_resource_set(&r, "memory", 5), 0);
    kq_resource_t before = r;
    assert_int_equal(kq_pod_request(kq_jdoc_root(&spec), &r, err, sizeof(err)), KQ_EPARSE);
    assert_true(kq_resource_equal(&r, &before)); /* untouched */
    assert_contains(err, "spec.containers[0].resources.requests.cpu: invalid quantity \"x\"");
    kq_jdoc_free(&spec);
}

/* Issue 15: requests naming more resources than a set holds inline (24 here), through
 * containers, an init container and the overhead; a parsed pod with them copies and
 * clears (ASan checks the spilled sets), and an error after them leaks nothing. */
static void test_request_many_names(void **state)
{
    (void)state;
    char a[1024] = "", b[1024] = "", spec[4096];
    for (int i = 0; i < 12; i++) {
        size_t al = strlen(a), bl = strlen(b);
        snprintf(a + al, sizeof(a) - al, "%s\"example.com/dev-%02d\":\"1\"", i ? "," : "", i);
        snprintf(b + bl, sizeof(b) - bl, "%s\"example.com/dev-%02d\":\"2\"", i ? "," : "", i + 12);
    }
    snprintf(spec, sizeof(spec),
             "{\"containers\":[{\"name\":\"a\",\"resources\":{\"requests\":{%s}}},"
             "{\"name\":\"b\",\"resources\":{\"limits\":{%s}}}],"
             "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"requests\":{\"example.com/dev-00\":\"5\"}}}],"
             "\"overhead\":{\"cpu\":\"100m\"}}", a, b);
    kq_jdoc_t doc = {0};
    assert_int_equal(kq_jdoc_parse(&doc, spec, strlen(spec), NULL, NULL), 0);
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    char err[256] = "";
    assert_int_equal(kq_pod_request(kq_jdoc_root(&doc), &r, err, sizeof(err)), 0);
    kq_jdoc_free(&doc);
    assert_int_equal(r.n, 25);
    assert_res(&r, "example.com/dev-00", 5); /* the init container's 5 > the containers' 1 */
    assert_res(&r, "example.com/dev-11", 1);
    assert_res(&r, "example.com/dev-12", 2); /* a limit without a request is the request */
    assert_res(&r, "example.com/dev-23", 2);
    assert_res(&r, "cpu", 100);

    char *text = NULL;
    assert_true(asprintf(&text, "{\"metadata\":{\"name\":\"w\",\"namespace\":\"d\",\"uid\":\"u-1\"},\"spec\":%s,"
                                "\"status\":{\"phase\":\"Pending\"}}", spec) > 0);
    kq_pod_t p, q;
    assert_int_equal(kq_pod_parse_text(text, strlen(text), NULL, &p, err, sizeof(err)), 0);
    free(text);
    assert_true(kq_resource_equal(&p.request, &r));
    assert_int_equal(kq_pod_copy(&q, &p), 0);
    assert_true(kq_resource_equal(&q.request, &r));
    assert_true(KQ_RES_E(&q.request) != KQ_RES_E(&p.request)); /* its own entries */
    kq_pod_clear(&p);
    assert_res(&q.request, "example.com/dev-23", 2);
    kq_pod_clear(&q);

    /* a bad quantity after 24 good names: an error, nothing leaked */
    snprintf(spec, sizeof(spec), "{\"containers\":[{\"name\":\"a\",\"resources\":{\"requests\":{%s,%s}}},"
             "{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"x\"}}}]}", a, b);
    assert_int_equal(kq_jdoc_parse(&doc, spec, strlen(spec), NULL, NULL), 0);
    assert_int_equal(kq_pod_request(kq_jdoc_root(&doc), &r, err, sizeof(err)), KQ_EPARSE);
    assert_int_equal(r.n, 25); /* untouched */
    kq_jdoc_free(&doc);
    kq_resource_free(&r);
}

/* Quantities that are not whole canonical units, as the API server stores them, are
 * rounded up as Kubernetes rounds them (Value() for bytes, MilliValue() for cpu): memory
 * 1.1Gi is stored as 1181116006400m (1181116006.4 bytes, so 1181116007), cpu 100500u is
 * 100.5m (so 101m), in containers, init containers and overhead alike. */
static void test_request_rounds_up(void **state)
{
    (void)state;
    kq_jdoc_t spec = {0};
    static const char s[] =
        "{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"100500u\",\"memory\":\"1181116006400m\","
        "\"example.com/dev\":\"0.5\"}}}],"
        "\"initContainers\":[{\"resources\":{\"requests\":{\"cpu\":\"0.2505\"}}}],"
        "\"overhead\":{\"memory\":\"0.5Ki\",\"cpu\":\"1n\"}}";
    assert_int_equal(kq_jdoc_parse(&spec, s, strlen(s), NULL, NULL), 0);
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    char err[256] = "";
    assert_int_equal(kq_pod_request(kq_jdoc_root(&spec), &r, err, sizeof(err)), 0);
    assert_res(&r, "cpu", 252);              /* max(101, ceil(250.5)) + ceil(0.000001) */
    assert_res(&r, "memory", 1181116007 + 512);
    assert_res(&r, "example.com/dev", 1);
    kq_jdoc_free(&spec);
}

static void test_request_errors(void **state)
{
    static const struct {
        const char *spec, *want;
    } cases[] = {
        {"{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\",\"resources\":{\"requests\":{\"cpu\":\"abc\"}}}]}",
         "pod team-a/web-1: spec.containers[1].resources.requests.cpu: invalid quantity \"abc\""},
        {"{\"containers\":[{\"resources\":{\"limits\":{\"memory\":\"-1Gi\"}}}]}",
         "pod team-a/web-1: spec.containers[0].resources.limits.memory: invalid quantity \"-1Gi\""},
        {"{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":true}}}]}",
         "spec.containers[0].resources.requests.cpu: quantity is not a string"},
        {"{\"containers\":[{\"resources\":{\"requests\":[]}}]}", "spec.containers[0].resources.requests: not an object"},
        {"{\"containers\":[{\"resources\":{\"requests\":{\"bad name!\":\"1\"}}}]}",
         "spec.containers[0].resources.requests: invalid resource name \"bad name!\""},
        {"{\"containers\":{}}", "spec.containers: not an array"},
        {"{\"containers\":[5]}", "spec.containers[0]: not an object"},
        {"{\"initContainers\":[{\"resources\":{\"requests\":{\"cpu\":\"0.1mi\"}}}]}",
         "spec.initContainers[0].resources.requests.cpu: invalid quantity"},
        {"{\"overhead\":{\"memory\":\"lots\"}}", "spec.overhead.memory: invalid quantity \"lots\""},
        {"{\"priority\":\"high\"}", "spec.priority: not a 32-bit integer"},
        {"{\"priority\":4294967296}", "spec.priority: not a 32-bit integer"},
        {"{\"nodeName\":7}", "spec.nodeName: not a string"},
        {"[]", "spec: not an object"},
        /* several bad entries: the smallest name is reported, whatever the order (a repeated
         * name puts members in a different order in jansson, which parse_with compares) */
        {"{\"containers\":[{\"resources\":{\"requests\":{\"memory\":\"x\",\"cpu\":\"y\"}}}]}",
         "requests.cpu: invalid quantity \"y\""},
        {"{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"bad\",\"cpu\":\"bad2\"}}}]}",
         "requests.cpu: invalid quantity \"bad2\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kq_pod_t p;
        char err[512];
        int rc = parse_parts(state, "team-a", NULL, NULL, cases[i].spec, NULL, &p, err, sizeof(err));
        if (rc != KQ_EPARSE)
            fail_msg("case %zu: rc %d", i, rc);
        assert_contains(err, cases[i].want);
    }
    /* the index of a container past the ninth (paths are written by hand) */
    char spec[2048] = "{\"initContainers\":[";
    for (int i = 0; i < 130; i++)
        strcat(spec, i < 129 ? "{}," : "{\"resources\":{\"limits\":{\"cpu\":\"-1\"}}}]}");
    kq_pod_t p;
    char err[512];
    assert_int_equal(parse_parts(state, "team-a", NULL, NULL, spec, NULL, &p, err, sizeof(err)), KQ_EPARSE);
    assert_contains(err, "spec.initContainers[129].resources.limits.cpu: invalid quantity \"-1\"");
}

/* ------------------------------------------------------------------- other fields -- */

/* creationTimestamp in seconds agrees with libc's timegm, rollover included (a day past
 * the month's end, a leap second), across leap years, centuries and before 1970. */
static void test_created_dates(void **state)
{
    fx_t *f = *state;
    static const int dates[][6] = {
        {2026, 11, 21, 10, 15, 2}, {2024, 2, 29, 23, 59, 59}, {2023, 2, 29, 0, 0, 0}, {2023, 2, 31, 12, 0, 0},
        {2000, 2, 29, 1, 2, 3},    {1900, 3, 1, 0, 0, 0},     {1970, 1, 1, 0, 0, 0},  {1969, 12, 31, 23, 59, 60},
        {1600, 1, 1, 0, 0, 0},     {9999, 12, 31, 23, 59, 59}, {2100, 2, 28, 6, 30, 0}, {2016, 12, 31, 23, 59, 60},
        {1, 1, 1, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(dates) / sizeof(dates[0]); i++) {
        const int *d = dates[i];
        for (int zone = 0; zone < 2; zone++) {
            char text[512];
            snprintf(text, sizeof(text),
                     "{\"metadata\":{\"name\":\"n\",\"uid\":\"u\",\"creationTimestamp\":\"%04d-%02d-%02dT%02d:%02d:%02d%s\"}}",
                     d[0], d[1], d[2], d[3], d[4], d[5], zone ? ".25-05:30" : "Z");
            kq_pod_t p;
            char err[512];
            assert_int_equal(parse_with(&f->opts, text, &p, err, sizeof(err)), 0);
            struct tm tm = {.tm_year = d[0] - 1900, .tm_mon = d[1] - 1, .tm_mday = d[2], .tm_hour = d[3],
                            .tm_min = d[4], .tm_sec = d[5]};
            int64_t want = (int64_t)timegm(&tm) + (zone ? 5 * 3600 + 30 * 60 : 0);
            if (p.created != want)
                fail_msg("%s: %lld, timegm says %lld", text, (long long)p.created, (long long)want);
            kq_pod_clear(&p);
        }
    }
}

static void test_fields(void **state)
{
    fx_t *f = *state;
    kq_pod_t p;
    char err[512];
    assert_int_equal(parse_with(&f->opts,
                                "{\"metadata\":{\"name\":\"n\",\"uid\":\"u\","
                                "\"creationTimestamp\":\"2026-11-21T12:15:02.5+02:00\","
                                "\"deletionTimestamp\":\"2026-11-21T12:20:00Z\","
                                "\"labels\":{\"quota.scheduling.koordinator.sh/preemptible\":\"false\","
                                "\"quota.scheduling.koordinator.sh/name\":\"team-ml\"}},"
                                "\"spec\":{\"nodeName\":\"node-1\",\"priority\":-5,\"containers\":[]},"
                                "\"status\":{\"phase\":\"Running\"}}",
                                &p, err, sizeof(err)),
                     0);
    assert_string_equal(p.ns, "default");
    assert_string_equal(p.node, "node-1");
    assert_string_equal(p.scheduler_name, "default-scheduler");
    assert_int_equal(p.priority, -5);
    assert_false(p.preemptible);
    assert_true(p.deleting);
    assert_int_equal(p.phase, KQ_POD_RUNNING);
    assert_int_equal(p.created, 1795256102); /* same instant as the reference pod */
    assert_string_equal(p.quota_name, "team-ml");
    assert_null(p.quota_group); /* resolved by the ledger, not by the parser */
    p.quota_group = strdup("team-ml");

    kq_pod_t q;
    assert_int_equal(kq_pod_copy(&q, &p), 0);
    kq_pod_clear(&p);
    assert_null(p.uid);
    assert_string_equal(q.node, "node-1");
    assert_string_equal(q.queue, "root.default");
    assert_string_equal(q.quota_name, "team-ml");
    assert_string_equal(q.quota_group, "team-ml");
    kq_pod_clear(&q);
    kq_pod_clear(NULL);

    static const struct {
        const char *phase;
        kq_pod_phase_t want;
        bool terminal;
    } phases[] = {{"Succeeded", KQ_POD_SUCCEEDED, true}, {"Failed", KQ_POD_FAILED, true},
                  {"Unknown", KQ_POD_UNKNOWN, false}, {"Pending", KQ_POD_PENDING, false},
                  {"Weird", KQ_POD_UNKNOWN, false}};
    for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
        char buf[256];
        snprintf(buf, sizeof(buf), "{\"metadata\":{\"uid\":\"u\",\"name\":\"n\"},\"status\":{\"phase\":\"%s\"}}",
                 phases[i].phase);
        assert_int_equal(parse_with(&f->opts, buf, &p, err, sizeof(err)), 0);
        assert_int_equal(p.phase, phases[i].want);
        assert_int_equal(kq_pod_is_terminal(&p), phases[i].terminal);
        assert_true(p.preemptible);
        kq_pod_clear(&p);
    }
}

static void test_bad_documents(void **state)
{
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"[]", "pod: not a JSON object"},
        {"{}", "pod: metadata: missing"},
        {"{\"metadata\":[]}", "pod: metadata: not an object"},
        {"{\"metadata\":{\"name\":\"n\"}}", "pod default/n: metadata.uid: missing"},
        {"{\"metadata\":{\"name\":\"n\",\"uid\":5}}", "pod: metadata.uid: not a string"},
        {"{\"metadata\":{\"name\":\"n\",\"uid\":\"u\",\"labels\":\"x\"}}", "pod default/n: metadata.labels: not an object"},
        {"{\"metadata\":{\"name\":\"n\",\"uid\":\"u\",\"creationTimestamp\":\"yesterday\"}}",
         "pod default/n: metadata.creationTimestamp: not an RFC 3339 time: \"yesterday\""},
        {"{\"metadata\":{\"name\":\"n\",\"uid\":\"u\",\"creationTimestamp\":\"2026-13-01T00:00:00Z\"}}",
         "metadata.creationTimestamp: not an RFC 3339 time"},
        {"{\"metadata\":{\"name\":\"n\",\"uid\":\"u\"},\"status\":{\"phase\":1}}", "status.phase: not a string"},
        {"{\"metadata\":{\"name\":\"n\",\"uid\":\"u\"},\"status\":{\"containerStatuses\":{}}}",
         "status.containerStatuses: not an array"},
        {"{\"metadata\":{\"name\":\"n\",\"uid\":\"u\"},\"spec\":{\"containers\":[{\"name\":\"a\"}]},"
         "\"status\":{\"containerStatuses\":[{\"name\":\"a\",\"allocatedResources\":{\"cpu\":\"q\"}}]}}",
         "status of container \"a\".allocatedResources.cpu: invalid quantity \"q\""},
        {"{\"metadata\":{\"name\":\"n\",\"uid\":\"u\",\"labels\":{\"kubequota.io/app-id\":[]}}}",
         "label kubequota.io/app-id: not a string"},
    };
    fx_t *f = *state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kq_pod_t p;
        char err[512];
        int rc = parse_with(&f->opts, cases[i].json, &p, err, sizeof(err));
        if (rc != KQ_EPARSE)
            fail_msg("case %zu: rc %d", i, rc);
        assert_contains(err, cases[i].want);
        assert_null(p.uid);
    }
    /* NULL document */
    kq_pod_t p;
    char err[64];
    assert_int_equal(kq_pod_parse(NULL, &f->opts, &p, err, sizeof(err)), KQ_EPARSE);
    /* a tiny error buffer is truncated, not overrun */
    char tiny[8];
    assert_int_equal(parse_with(&f->opts, "{}", &p, tiny, sizeof(tiny)), KQ_EPARSE);
    assert_int_equal(strlen(tiny), 7);
}

/* DRA (issue 39): spec.resourceClaims resolved to claim names: a named claim as is, a
 * template's through status.resourceClaimStatuses (NULL until kube-controller-manager made
 * it; left out when it found no claim necessary). The informer's filtered view must see
 * them too (parse_with compares). */
static void test_resource_claims(void **state)
{
    kq_pod_t p;
    char err[512];
    static const char *const C = "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"},"
                                 "\"claims\":[{\"name\":\"gpu\"}]}}]";
    char spec[1024], status[512];
    snprintf(spec, sizeof spec, "{%s,\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"},"
             "{\"name\":\"shared\",\"resourceClaimName\":\"team-gpus\"},"
             "{\"name\":\"opt\",\"resourceClaimTemplateName\":\"u\"}]}", C);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n_claims, 3);
    assert_null(p.claims[0]);
    assert_string_equal(p.claims[1], "team-gpus");
    assert_null(p.claims[2]);
    assert_res(&p.request, "cpu", 1000);
    kq_pod_clear(&p);
    snprintf(status, sizeof status, "{\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":"
             "\"pod-gpu-x7k2p\"},{\"name\":\"opt\"}]}");
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, status, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n_claims, 2); /* opt: no claim was necessary */
    assert_string_equal(p.claims[0], "pod-gpu-x7k2p");
    assert_string_equal(p.claims[1], "team-gpus");
    kq_pod_t copy;
    assert_int_equal(kq_pod_copy(&copy, &p), 0);
    assert_int_equal(copy.n_claims, 2);
    assert_string_equal(copy.claims[0], "pod-gpu-x7k2p");
    kq_pod_clear(&copy);
    kq_pod_clear(&p);
    snprintf(spec, sizeof spec, "{%s,\"resourceClaims\":{}}", C);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), KQ_EPARSE);
    assert_contains(err, "spec.resourceClaims");
    snprintf(spec, sizeof spec, "{%s,\"resourceClaims\":[\"x\"]}", C);
    assert_int_equal(parse_parts(state, "ns", NULL, NULL, spec, NULL, &p, err, sizeof(err)), KQ_EPARSE);
    assert_contains(err, "spec.resourceClaims[0]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extended_resource_mapper),
        cmocka_unit_test(test_reference_pod),
        cmocka_unit_test(test_extender_args_pod),
        cmocka_unit_test(test_identity_kubequota),
        cmocka_unit_test(test_scheduling_gates),
        cmocka_unit_test(test_resource_claims),
        cmocka_unit_test(test_gangs),
        cmocka_unit_test(test_identity_yunikorn),
        cmocka_unit_test(test_identity_default),
        cmocka_unit_test(test_identity_garbage),
        cmocka_unit_test(test_queue_named),
        cmocka_unit_test(test_place_again),
        cmocka_unit_test(test_read_keys_are_guarded),
        cmocka_unit_test(test_queue_errors),
        cmocka_unit_test(test_queue_default),
        cmocka_unit_test(test_app_id),
        cmocka_unit_test(test_app_id_yunikorn),
        cmocka_unit_test(test_request_containers_sum),
        cmocka_unit_test(test_request_init_wins),
        cmocka_unit_test(test_request_sidecars),
        cmocka_unit_test(test_request_overhead_and_limits),
        cmocka_unit_test(test_request_resize),
        cmocka_unit_test(test_request_direct),
        cmocka_unit_test(test_request_rounds_up),
        cmocka_unit_test(test_request_many_names),
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_created_dates),
        cmocka_unit_test(test_bad_documents),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
