/* Unit tests for the admission webhooks. Every mutating case applies the returned JSON
 * Patch with the small RFC 6902 applier below (add/replace/remove on objects; it fails
 * the test when a parent is missing, as the API server's applier would) and asserts on
 * the resulting object, not on the patch text. Expected identities are written by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "kubequota/serve/admission.h"
#include "kubequota/base/log.h"

#define UID "3c1f0e2a-uid-under-test"
#define ANN KQ_ADMISSION_ANN_USER_INFO
#define YK KQ_ADMISSION_ANN_YK_USER_INFO
#define ALICE "{\"user\":\"alice\",\"groups\":[\"dev\",\"system:authenticated\"]}"
#define BOB "{\"user\":\"bob\",\"groups\":[\"ops\"]}"

static const char *const ALICE_GROUPS[] = {"dev", "system:authenticated"};

static const char VALID_QUEUES[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: team-a\n";

/* ------------------------------------------------------------------ helpers */

static void assert_contains(const char *hay, const char *needle)
{
    if (hay == NULL || strstr(hay, needle) == NULL)
        fail_msg("\"%s\" does not contain \"%s\"", hay ? hay : "(null)", needle);
}

/* JSON from text with ' for " (readability). New reference. */
static json_t *J(const char *text)
{
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t e;
    json_t *j = json_loads(s, JSON_DECODE_ANY, &e);
    if (j == NULL)
        fail_msg("bad test JSON: %s: %s", e.text, s);
    free(s);
    return j;
}

/* An AdmissionReview v1 request; obj and old are stolen (NULL: absent/null). */
static json_t *review(const char *op, const char *group, const char *kind, const char *user,
                      const char *const *groups, size_t ng, json_t *obj, json_t *old)
{
    json_t *g = json_array();
    for (size_t i = 0; i < ng; i++)
        json_array_append_new(g, json_string(groups[i]));
    json_t *req = json_pack("{s:s, s:{s:s, s:s, s:s}, s:s, s:s, s:o, s:o}", "uid", UID, "kind", "group",
                            group, "version", "v1", "kind", kind, "namespace", "team-a", "operation", op,
                            "object", obj ? obj : json_null(), "oldObject", old ? old : json_null());
    assert_non_null(req);
    if (user != NULL)
        json_object_set_new(req, "userInfo", json_pack("{s:s, s:o}", "username", user, "groups", g));
    else
        json_decref(g);
    return json_pack("{s:s, s:s, s:o}", "apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview",
                     "request", req);
}

static json_t *alice_review(const char *op, const char *group, const char *kind, json_t *obj, json_t *old)
{
    return review(op, group, kind, "alice", ALICE_GROUPS, 2, obj, old);
}

typedef struct result {
    int status;
    json_t *body;     /* the whole answer */
    json_t *resp;     /* body.response, borrowed */
    json_t *ops;      /* decoded patch, or NULL */
    json_t *patched;  /* request.object with the patch applied (a copy) */
} result_t;

static void result_free(result_t *r)
{
    json_decref(r->body);
    json_decref(r->ops);
    json_decref(r->patched);
    memset(r, 0, sizeof(*r));
}

static json_t *b64_json(const char *b64)
{
    size_t n = strlen(b64);
    unsigned char *buf = malloc(n + 1);
    int len = EVP_DecodeBlock(buf, (const unsigned char *)b64, (int)n);
    assert_true(len >= 0);
    for (size_t i = n; i > 0 && b64[i - 1] == '='; i--)
        len--;
    json_error_t e;
    json_t *j = json_loadb((const char *)buf, (size_t)len, 0, &e);
    if (j == NULL)
        fail_msg("patch is not JSON: %s", e.text);
    free(buf);
    return j;
}

/* Splits a JSON pointer into unescaped segments (at most 16). */
static size_t split_pointer(const char *p, char segs[16][256])
{
    assert_int_equal(p[0], '/');
    size_t n = 0;
    const char *s = p + 1;
    for (;;) {
        assert_true(n < 16);
        size_t o = 0;
        for (; *s && *s != '/'; s++) {
            char ch = *s;
            if (ch == '~') {
                s++;
                assert_true(*s == '0' || *s == '1');
                ch = *s == '0' ? '~' : '/';
            }
            assert_true(o < 255);
            segs[n][o++] = ch;
        }
        segs[n++][o] = '\0';
        if (*s == '\0')
            return n;
        s++;
    }
}

/* Applies RFC 6902 add/replace/remove on object members, strictly. */
static void apply_patch(json_t *doc, const json_t *ops)
{
    assert_true(json_is_array(ops));
    size_t i;
    json_t *op;
    json_array_foreach(ops, i, op) {
        const char *kind = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        json_t *value = json_object_get(op, "value");
        assert_non_null(kind);
        assert_non_null(path);
        char segs[16][256];
        size_t n = split_pointer(path, segs);
        json_t *parent = doc;
        for (size_t k = 0; k + 1 < n; k++) {
            parent = json_object_get(parent, segs[k]);
            if (!json_is_object(parent) && !(k + 2 == n && json_is_array(parent)))
                fail_msg("patch op %zu (%s %s): parent \"%s\" does not exist", i, kind, path, segs[k]);
        }
        if (json_is_array(parent)) { /* only appends ("-") are emitted on arrays */
            assert_string_equal(kind, "add");
            assert_string_equal(segs[n - 1], "-");
            assert_non_null(value);
            json_array_append(parent, value);
            continue;
        }
        json_t *cur = json_object_get(parent, segs[n - 1]);
        if (strcmp(kind, "add") == 0) {
            assert_non_null(value);
            json_object_set(parent, segs[n - 1], value);
        } else if (strcmp(kind, "replace") == 0) {
            if (cur == NULL)
                fail_msg("patch op %zu: replace of missing %s", i, path);
            assert_non_null(value);
            json_object_set(parent, segs[n - 1], value);
        } else if (strcmp(kind, "remove") == 0) {
            if (cur == NULL)
                fail_msg("patch op %zu: remove of missing %s", i, path);
            json_object_del(parent, segs[n - 1]);
        } else {
            fail_msg("unexpected patch op %s", kind);
        }
    }
}

typedef int (*webhook_fn)(const kq_admission_opts_t *, const char *, size_t, char **, size_t *);

/* Runs a webhook on a body and checks the answer's envelope. */
static void run_text(webhook_fn fn, const kq_admission_opts_t *o, const char *text, size_t len,
                     const json_t *request_obj, result_t *r)
{
    memset(r, 0, sizeof(*r));
    char *out = NULL;
    size_t out_len = 0;
    r->status = fn(o, text, len, &out, &out_len);
    assert_true(r->status >= 200);
    assert_non_null(out);
    assert_int_equal(out_len, strlen(out));
    json_error_t e;
    r->body = json_loads(out, 0, &e);
    if (r->body == NULL)
        fail_msg("answer is not JSON: %s: %s", e.text, out);
    free(out);
    if (r->status != 200)
        return;
    assert_string_equal(json_string_value(json_object_get(r->body, "apiVersion")), "admission.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(r->body, "kind")), "AdmissionReview");
    r->resp = json_object_get(r->body, "response");
    assert_true(json_is_object(r->resp));
    assert_true(json_is_boolean(json_object_get(r->resp, "allowed")));
    r->patched = json_deep_copy(request_obj ? request_obj : json_null());
    const char *patch = json_string_value(json_object_get(r->resp, "patch"));
    if (patch != NULL) {
        assert_string_equal(json_string_value(json_object_get(r->resp, "patchType")), "JSONPatch");
        r->ops = b64_json(patch);
        apply_patch(r->patched, r->ops);
    } else {
        assert_null(json_object_get(r->resp, "patchType"));
    }
}

/* Runs a webhook on a review (stolen). */
static void run(webhook_fn fn, const kq_admission_opts_t *o, json_t *rev, result_t *r)
{
    char *text = json_dumps(rev, JSON_COMPACT);
    run_text(fn, o, text, strlen(text), json_object_get(json_object_get(rev, "request"), "object"), r);
    free(text);
    json_decref(rev);
}

static bool allowed(const result_t *r)
{
    return json_is_true(json_object_get(r->resp, "allowed"));
}

static const char *message(const result_t *r)
{
    return json_string_value(json_object_get(json_object_get(r->resp, "status"), "message"));
}

static json_int_t status_code(const result_t *r)
{
    return json_integer_value(json_object_get(json_object_get(r->resp, "status"), "code"));
}

static const char *resp_uid(const result_t *r)
{
    return json_string_value(json_object_get(r->resp, "uid"));
}

/* String at a dotted path in the patched object; keys containing '.' are given as one
 * argument each (NULL-terminated list). */
static const char *at(const json_t *root, ...)
{
    va_list ap;
    va_start(ap, root);
    const json_t *cur = root;
    for (const char *k = va_arg(ap, const char *); k != NULL && cur != NULL; k = va_arg(ap, const char *))
        cur = json_object_get(cur, k);
    va_end(ap);
    return json_string_value(cur);
}

/* The identity annotation value must be exactly {"user":user,"groups":[groups...]}. */
static void assert_identity(const char *value, const char *user, const char *const *groups, size_t ng)
{
    assert_non_null(value);
    json_t *j = json_loads(value, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_object_size(j), 2);
    assert_string_equal(json_string_value(json_object_get(j, "user")), user);
    const json_t *g = json_object_get(j, "groups");
    assert_true(json_is_array(g));
    assert_int_equal(json_array_size(g), ng);
    for (size_t i = 0; i < ng; i++)
        assert_string_equal(json_string_value(json_array_get(g, i)), groups[i]);
    json_decref(j);
}

static void assert_pod_identity(const result_t *r, const char *user, const char *const *groups, size_t ng)
{
    assert_identity(at(r->patched, "metadata", "annotations", ANN, NULL), user, groups, ng);
    assert_identity(at(r->patched, "metadata", "annotations", YK, NULL), user, groups, ng);
}

static char *read_fixture(void)
{
    const char *dir = getenv("KQ_SHARED_REF");
    const char *paths[2] = {NULL, "fuzz/corpus/admission/pod-create.json"};
    char first[1024];
    snprintf(first, sizeof(first), "%s/admissionreview-v1-request.pod-create.json",
             dir ? dir : "../shared/reference/k8s");
    paths[0] = first;
    for (int i = 0; i < 2; i++) {
        FILE *fp = fopen(paths[i], "rb");
        if (fp == NULL)
            continue;
        char *buf = malloc(1 << 20);
        size_t n = fread(buf, 1, (1 << 20) - 1, fp);
        fclose(fp);
        buf[n] = '\0';
        return buf;
    }
    return NULL;
}

static json_t *fixture(void)
{
    char *text = read_fixture();
    if (text == NULL) {
        print_message("skipped: admissionreview-v1-request.pod-create.json not found (set KQ_SHARED_REF)\n");
        skip();
    }
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(j);
    return j;
}

/* ------------------------------------------------------------------ pods */

static void test_fixture_trusted_controller_no_patch(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    run(kq_admission_mutate, &o, fixture(), &r);
    assert_int_equal(r.status, 200);
    assert_true(allowed(&r));
    assert_string_equal(resp_uid(&r), "705ab4f5-6393-11e8-b7cc-42010a800002");
    /* replicaset-controller is a kube-system service account: nothing to change */
    assert_null(r.ops);
    assert_null(at(r.patched, "metadata", "annotations", ANN, NULL));
    result_free(&r);
}

static void test_fixture_user_stamped(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    json_t *rev = fixture();
    json_object_set_new(json_object_get(rev, "request"), "userInfo",
                        J("{'username':'alice','uid':'u-1','groups':['dev','system:authenticated']}"));
    result_t r;
    run(kq_admission_mutate, &o, rev, &r);
    assert_int_equal(r.status, 200);
    assert_true(allowed(&r));
    assert_string_equal(resp_uid(&r), "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_pod_identity(&r, "alice", ALICE_GROUPS, 2);
    /* the annotation already there is kept, and so is the rest of the pod */
    assert_string_equal(at(r.patched, "metadata", "annotations", "example.com/priority-class", NULL), "batch");
    assert_string_equal(at(r.patched, "spec", "schedulerName", NULL), "default-scheduler");
    /* the exact wire form other readers (pod model, YuniKorn) parse */
    assert_string_equal(at(r.patched, "metadata", "annotations", ANN, NULL), ALICE);
    /* the annotations map exists, so the keys are added with "/" escaped as ~1 */
    const char *p0 = json_string_value(json_object_get(json_array_get(r.ops, 0), "path"));
    assert_string_equal(p0, "/metadata/annotations/kubequota.io~1user-info");
    result_free(&r);
}

static void test_spoofed_annotations_replaced(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    json_t *pod = J("{'metadata':{'name':'p','annotations':{'other':'x'}},'spec':{'containers':[]}}");
    json_t *anns = json_object_get(json_object_get(pod, "metadata"), "annotations");
    json_object_set_new(anns, ANN, json_string(BOB));
    json_object_set_new(anns, YK, json_string(BOB));
    result_t r;
    run(kq_admission_mutate, &o, alice_review("CREATE", "", "Pod", pod, NULL), &r);
    assert_true(allowed(&r));
    assert_pod_identity(&r, "alice", ALICE_GROUPS, 2);
    assert_string_equal(at(r.patched, "metadata", "annotations", "other", NULL), "x");
    result_free(&r);
}

static void test_only_yunikorn_spoofed(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    json_t *pod = J("{'metadata':{'annotations':{}},'spec':{}}");
    json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "annotations"), YK,
                        json_string("{\"user\":\"root\"}"));
    result_t r;
    run(kq_admission_mutate, &o, alice_review("CREATE", "", "Pod", pod, NULL), &r);
    assert_pod_identity(&r, "alice", ALICE_GROUPS, 2);
    result_free(&r);
}

static void test_groups_kept_in_request_order(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    static const char *const groups[] = {"zeta", "alpha", "system:authenticated", "mid"};
    result_t r;
    run(kq_admission_mutate, &o, review("CREATE", "", "Pod", "carol", groups, 4, J("{'metadata':{},'spec':{}}"), NULL),
        &r);
    assert_pod_identity(&r, "carol", groups, 4);
    result_free(&r);
}

static void test_user_without_groups(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    json_t *rev = alice_review("CREATE", "", "Pod", J("{'metadata':{},'spec':{}}"), NULL);
    json_object_del(json_object_get(json_object_get(rev, "request"), "userInfo"), "groups");
    result_t r;
    run(kq_admission_mutate, &o, rev, &r);
    assert_true(allowed(&r));
    assert_string_equal(at(r.patched, "metadata", "annotations", ANN, NULL), "{\"user\":\"alice\",\"groups\":[]}");
    result_free(&r);
}

static void test_pod_without_annotations_map(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{'generateName':'p-','labels':{'a':'b'}},'spec':{}}"), NULL),
        &r);
    assert_true(allowed(&r));
    assert_pod_identity(&r, "alice", ALICE_GROUPS, 2);
    assert_int_equal(json_object_size(json_object_get(json_object_get(r.patched, "metadata"), "annotations")), 2);
    assert_string_equal(at(r.patched, "metadata", "labels", "a", NULL), "b");
    assert_string_equal(at(r.patched, "metadata", "generateName", NULL), "p-");
    result_free(&r);

    /* no metadata at all, and annotations: null */
    run(kq_admission_mutate, &o, alice_review("CREATE", "", "Pod", J("{'spec':{}}"), NULL), &r);
    assert_pod_identity(&r, "alice", ALICE_GROUPS, 2);
    result_free(&r);
    run(kq_admission_mutate, &o, alice_review("CREATE", "", "Pod", J("{'metadata':{'annotations':null}}"), NULL), &r);
    assert_pod_identity(&r, "alice", ALICE_GROUPS, 2);
    result_free(&r);
}

static void test_trusted_keeps_identity(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    static const char *const sa_groups[] = {"system:serviceaccounts", "system:serviceaccounts:kube-system",
                                            "system:authenticated"};
    static const char *const only_group[] = {"system:serviceaccounts:kube-system"};
    struct {
        const char *user;
        const char *const *groups;
        size_t ng;
    } trusted[] = {
        {"system:serviceaccount:kube-system:job-controller", sa_groups, 3},
        {"system:kube-controller-manager", NULL, 0},
        {"system:serviceaccount:other:ctrl", only_group, 1}, /* trusted by group */
    };
    for (size_t i = 0; i < sizeof(trusted) / sizeof(trusted[0]); i++) {
        json_t *pod = J("{'metadata':{'annotations':{}},'spec':{}}");
        json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "annotations"), ANN, json_string(BOB));
        result_t r;
        run(kq_admission_mutate, &o, review("CREATE", "", "Pod", trusted[i].user, trusted[i].groups, trusted[i].ng, pod, NULL),
            &r);
        assert_true(allowed(&r));
        assert_null(r.ops);
        assert_string_equal(at(r.patched, "metadata", "annotations", ANN, NULL), BOB);
        result_free(&r);

        /* a workload a trusted controller creates (a Job from a CronJob) keeps its template's identity */
        json_t *job = J("{'spec':{'template':{'metadata':{'annotations':{}}}}}");
        json_object_set_new(json_object_get(json_object_get(json_object_get(json_object_get(job, "spec"), "template"),
                                                            "metadata"), "annotations"), ANN, json_string(BOB));
        run(kq_admission_mutate, &o, review("CREATE", "batch", "Job", trusted[i].user, trusted[i].groups, trusted[i].ng, job, NULL),
            &r);
        assert_true(allowed(&r));
        assert_null(r.ops);
        result_free(&r);
    }
}

static void test_untrusted_lookalikes_are_stamped(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    static const char *const groups[] = {"system:serviceaccounts:kube-system-evil", "system:serviceaccounts"};
    const char *users[] = {"system:serviceaccount:kube-system-evil:x", "system:serviceaccount:kube-syste",
                           "system:kube-controller-manager2"};
    for (size_t i = 0; i < 3; i++) {
        result_t r;
        run(kq_admission_mutate, &o, review("CREATE", "", "Pod", users[i], groups, 2, J("{'metadata':{}}"), NULL), &r);
        assert_true(allowed(&r));
        assert_pod_identity(&r, users[i], groups, 2);
        result_free(&r);
    }
}

static void test_no_trusted_list_stamps_controllers(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    o.n_trusted_users = o.n_trusted_groups = 0;
    result_t r;
    run(kq_admission_mutate, &o, fixture(), &r);
    static const char *const groups[] = {"system:serviceaccounts", "system:serviceaccounts:kube-system",
                                         "system:authenticated"};
    assert_pod_identity(&r, "system:serviceaccount:kube-system:replicaset-controller", groups, 3);
    result_free(&r);
}

static void test_pod_update_restores_identity(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    /* old pod has bob; alice's update writes herself into both keys */
    json_t *old = J("{'metadata':{'annotations':{'x':'1'}}}");
    json_object_set_new(json_object_get(json_object_get(old, "metadata"), "annotations"), ANN, json_string(BOB));
    json_t *now = json_deep_copy(old);
    json_t *anns = json_object_get(json_object_get(now, "metadata"), "annotations");
    json_object_set_new(anns, ANN, json_string(ALICE));
    json_object_set_new(anns, YK, json_string(ALICE));
    json_object_set_new(anns, "x", json_string("2"));
    result_t r;
    run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", now, old), &r);
    assert_true(allowed(&r));
    assert_string_equal(at(r.patched, "metadata", "annotations", ANN, NULL), BOB);
    /* bob's pod had no yunikorn key: the one alice added is removed */
    assert_null(json_object_get(json_object_get(json_object_get(r.patched, "metadata"), "annotations"), YK));
    assert_string_equal(at(r.patched, "metadata", "annotations", "x", NULL), "2");
    result_free(&r);

    /* an update that leaves the identity alone changes nothing */
    old = J("{'metadata':{'labels':{'a':'1'}}}");
    run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", J("{'metadata':{'labels':{'a':'2'}}}"), old), &r);
    assert_true(allowed(&r));
    assert_null(r.ops);
    result_free(&r);
}

/* A pod's placement labels and annotations cannot change (issue 20): every requester,
 * trusted or not, is refused with 403 naming the key; other labels may change. */
static void test_pod_placement_immutable(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    static const char *const cases[][2] = {
        {"labels", "kubequota.io/queue"},       {"annotations", "kubequota.io/queue"},
        {"labels", "queue"},                    {"annotations", "yunikorn.apache.org/queue"},
        {"labels", "kubequota.io/app-id"},      {"labels", "applicationId"},
        {"labels", "quota.scheduling.koordinator.sh/name"},
        {"labels", "quota.scheduling.koordinator.sh/preemptible"},
        /* issue 29: read by the pod parser but not guarded before */
        {"labels", "yunikorn.apache.org/queue"}, {"labels", "yunikorn.apache.org/app-id"},
        {"annotations", "yunikorn.apache.org/app-id"}, {"labels", "spark-app-selector"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (int how = 0; how < 3; how++) { /* changed, added, removed */
            json_t *old = J("{'metadata':{'labels':{'a':'1'},'annotations':{'b':'1'}}}");
            json_t *now = J("{'metadata':{'labels':{'a':'1'},'annotations':{'b':'1'}}}");
            json_t *om = json_object_get(json_object_get(old, "metadata"), cases[i][0]);
            json_t *nm = json_object_get(json_object_get(now, "metadata"), cases[i][0]);
            if (how != 1)
                json_object_set_new(om, cases[i][1], json_string("old"));
            if (how != 2)
                json_object_set_new(nm, cases[i][1], json_string("new"));
            result_t r;
            run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", now, old), &r);
            assert_false(allowed(&r));
            assert_int_equal(status_code(&r), 403);
            assert_contains(message(&r), cases[i][1]);
            result_free(&r);
        }
    }
    /* unchanged placement, other labels changed: allowed */
    json_t *old = J("{'metadata':{'labels':{'kubequota.io/queue':'root.a','x':'1'}}}");
    json_t *now = J("{'metadata':{'labels':{'kubequota.io/queue':'root.a','x':'2'}}}");
    result_t r;
    run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", now, old), &r);
    assert_true(allowed(&r));
    result_free(&r);
}

/* The pod-limits hook (issue 20): called for a managed pod created on a node by any
 * requester (after stamping: it sees the requester's identity; issue 37: a trusted
 * controller's pod too, with the identity its template carries) and for every pods/resize
 * of a managed pod; its refusal is a 403; a failed check a 500. */
static int hook_calls, hook_rc;
static char hook_user[64];
static bool hook_had_old;
static int pod_hook(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len)
{
    (void)ud;
    hook_calls++;
    hook_had_old = old != NULL;
    const char *ident = json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), ANN));
    snprintf(hook_user, sizeof(hook_user), "%s", ident != NULL && strstr(ident, "alice") ? "alice" : "?");
    if (hook_rc != 0)
        snprintf(msg, len, "over the limit");
    return hook_rc;
}

static void test_pod_limits_hook(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    o.check_pod = pod_hook;
    const char *on_node = "{'metadata':{'name':'p'},'spec':{'schedulerName':'kubequota-scheduler','nodeName':'n1'}}";
    result_t r;
    hook_calls = 0;
    hook_rc = KQ_EDENIED;
    run(kq_admission_mutate, &o, alice_review("CREATE", "", "Pod", J(on_node), NULL), &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 403);
    assert_contains(message(&r), "over the limit");
    assert_int_equal(hook_calls, 1);
    assert_false(hook_had_old);
    assert_string_equal(hook_user, "alice");
    result_free(&r);
    /* a failed check fails closed */
    hook_rc = KQ_ESTATE;
    run(kq_admission_mutate, &o, alice_review("CREATE", "", "Pod", J(on_node), NULL), &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 500);
    result_free(&r);
    /* not called: no node, another scheduler */
    hook_calls = 0;
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{'name':'p'},'spec':{'schedulerName':'kubequota-scheduler'}}"),
                     NULL), &r);
    assert_true(allowed(&r));
    result_free(&r);
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{'name':'p'},'spec':{'schedulerName':'x','nodeName':'n'}}"), NULL),
        &r);
    assert_true(allowed(&r));
    result_free(&r);
    assert_int_equal(hook_calls, 0);
    /* issue 37: a trusted controller creating a tenant's pod on a node is checked too (it
     * is not stamped: the hook sees the identity the pod's template gave it) */
    static const char *const ks[] = {"system:serviceaccounts:kube-system"};
    const char *rs_pod = "{'metadata':{'generateName':'web-','annotations':{'" ANN "':'{\\\"user\\\":\\\"alice\\\"}'}},"
                         "'spec':{'schedulerName':'kubequota-scheduler','nodeName':'n1'}}";
    hook_rc = KQ_EDENIED;
    run(kq_admission_mutate, &o,
        review("CREATE", "", "Pod", "system:serviceaccount:kube-system:replicaset-controller", ks, 1, J(rs_pod), NULL),
        &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 403);
    assert_int_equal(hook_calls, 1);
    assert_string_equal(hook_user, "alice");
    assert_null(json_object_get(r.resp, "patch"));
    result_free(&r);
    hook_calls = 0;
    /* pods/resize: called with the old pod, for trusted requesters too */
    hook_rc = KQ_EDENIED;
    json_t *rev = review("UPDATE", "", "Pod", "system:serviceaccount:kube-system:vpa", ks, 1, J(on_node), J(on_node));
    json_object_set_new(json_object_get(rev, "request"), "subResource", json_string("resize"));
    run(kq_admission_mutate, &o, rev, &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 403);
    assert_int_equal(hook_calls, 1);
    assert_true(hook_had_old);
    result_free(&r);
    hook_rc = 0;
}

/* A dry run (request.dryRun, kubectl --dry-run=server) stores nothing, so it must hold
 * nothing: its pods/resize goes to check_pod_dry, the real one to check_pod (which reserves
 * the growth: kq_ledger_check_resize). Stand-ins: "held" is what a hook left counted. */
static int held_m, dry_calls;
static int resize_reserve_hook(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len)
{
    (void)ud, (void)pod, (void)old, (void)msg, (void)len;
    held_m += 500;
    return 0;
}
static int resize_dry_hook(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len)
{
    (void)ud, (void)pod, (void)old;
    dry_calls++;
    if (hook_rc != 0)
        snprintf(msg, len, "over the limit");
    return hook_rc;
}

static void test_dry_run_resize_holds_nothing(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    o.check_pod = resize_reserve_hook;
    o.check_pod_dry = resize_dry_hook;
    const char *pod = "{'metadata':{'name':'p','uid':'u-1'},'spec':{'schedulerName':'kubequota-scheduler','nodeName':'n1'}}";
    result_t r;
    held_m = dry_calls = 0;
    hook_rc = 0;
    json_t *rev = alice_review("UPDATE", "", "Pod", J(pod), J(pod));
    json_object_set_new(json_object_get(rev, "request"), "subResource", json_string("resize"));
    json_object_set_new(json_object_get(rev, "request"), "dryRun", json_true());
    run(kq_admission_mutate, &o, json_deep_copy(rev), &r);
    assert_true(allowed(&r));
    assert_int_equal(dry_calls, 1);
    assert_int_equal(held_m, 0); /* checked, nothing held */
    result_free(&r);
    /* a dry run's refusal is the real one's */
    hook_rc = KQ_EDENIED;
    run(kq_admission_mutate, &o, json_deep_copy(rev), &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 403);
    assert_contains(message(&r), "over the limit");
    assert_int_equal(held_m, 0);
    result_free(&r);
    hook_rc = 0;
    /* the real resize (dryRun false or absent) reserves */
    json_object_set_new(json_object_get(rev, "request"), "dryRun", json_false());
    run(kq_admission_mutate, &o, rev, &r);
    assert_true(allowed(&r));
    assert_int_equal(held_m, 500);
    assert_int_equal(dry_calls, 2);
    result_free(&r);
    /* a dry run's pod created on a node: check_pod_dry too */
    json_t *cr = alice_review("CREATE", "", "Pod", J(pod), NULL);
    json_object_set_new(json_object_get(cr, "request"), "dryRun", json_true());
    run(kq_admission_mutate, &o, cr, &r);
    assert_true(allowed(&r));
    assert_int_equal(dry_calls, 3);
    assert_int_equal(held_m, 500);
    result_free(&r);
}

/* ------------------------------------------------------------------ workloads */

static void test_workload_kinds_stamped(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    static const struct {
        const char *group, *kind;
    } kinds[] = {{"apps", "Deployment"}, {"apps", "ReplicaSet"}, {"apps", "StatefulSet"},
                 {"apps", "DaemonSet"},  {"batch", "Job"},       {"", "ReplicationController"}};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        for (int update = 0; update < 2; update++) {
            json_t *obj = J("{'metadata':{'name':'w'},'spec':{'replicas':2,'template':{'metadata':{'labels':"
                            "{'app':'w'}},'spec':{'containers':[{'name':'c','image':'i:2'}]}}}}");
            json_t *old = update ? J("{'metadata':{'name':'w'},'spec':{'template':{'spec':{'containers':"
                                     "[{'name':'c','image':'i:1'}]}}}}")
                                 : NULL;
            result_t r;
            run(kq_admission_mutate, &o, alice_review(update ? "UPDATE" : "CREATE", kinds[i].group, kinds[i].kind, obj, old),
                &r);
            assert_true(allowed(&r));
            assert_identity(at(r.patched, "spec", "template", "metadata", "annotations", ANN, NULL), "alice",
                            ALICE_GROUPS, 2);
            assert_identity(at(r.patched, "spec", "template", "metadata", "annotations", YK, NULL), "alice",
                            ALICE_GROUPS, 2);
            assert_string_equal(at(r.patched, "spec", "template", "metadata", "labels", "app", NULL), "w");
            /* the workload's own metadata is not the pod template */
            assert_null(json_object_get(json_object_get(r.patched, "metadata"), "annotations"));
            result_free(&r);
        }
    }
}

static void test_cronjob_path(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "batch", "CronJob",
                     J("{'spec':{'schedule':'* * * * *','jobTemplate':{'spec':{'template':{'spec':{}}}}}}"), NULL),
        &r);
    assert_true(allowed(&r));
    assert_identity(at(r.patched, "spec", "jobTemplate", "spec", "template", "metadata", "annotations", ANN, NULL),
                    "alice", ALICE_GROUPS, 2);
    assert_identity(at(r.patched, "spec", "jobTemplate", "spec", "template", "metadata", "annotations", YK, NULL),
                    "alice", ALICE_GROUPS, 2);
    assert_null(json_object_get(json_object_get(r.patched, "spec"), "template"));
    result_free(&r);
}

static void test_template_without_metadata(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "apps", "Deployment", J("{'spec':{'template':{'spec':{'containers':[]}}}}"), NULL), &r);
    assert_identity(at(r.patched, "spec", "template", "metadata", "annotations", ANN, NULL), "alice", ALICE_GROUPS, 2);
    assert_true(json_is_array(json_object_get(json_object_get(json_object_get(json_object_get(r.patched, "spec"),
                                                                              "template"), "spec"), "containers")));
    result_free(&r);

    /* no template at all (invalid, but the API server validates after us): created */
    run(kq_admission_mutate, &o, alice_review("CREATE", "batch", "CronJob", J("{'spec':{}}"), NULL), &r);
    assert_identity(at(r.patched, "spec", "jobTemplate", "spec", "template", "metadata", "annotations", ANN, NULL),
                    "alice", ALICE_GROUPS, 2);
    result_free(&r);
}

static void test_malformed_template_denied(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    run(kq_admission_mutate, &o, alice_review("CREATE", "apps", "Deployment", J("{'spec':{'template':'x'}}"), NULL),
        &r);
    assert_false(allowed(&r));
    assert_null(json_object_get(r.resp, "patch"));
    assert_contains(message(&r), "/spec/template");
    assert_string_equal(resp_uid(&r), UID);
    result_free(&r);
}

static void test_workload_update_template_changed(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    json_t *old = J("{'spec':{'template':{'metadata':{'annotations':{}},'spec':{'image':'v1'}}}}");
    json_t *anns = json_object_get(json_object_get(json_object_get(json_object_get(old, "spec"), "template"),
                                                   "metadata"), "annotations");
    json_object_set_new(anns, ANN, json_string(BOB));
    json_object_set_new(anns, YK, json_string(BOB));
    json_t *now = json_deep_copy(old);
    json_object_set_new(json_object_get(json_object_get(json_object_get(now, "spec"), "template"), "spec"), "image",
                        json_string("v2"));
    result_t r;
    run(kq_admission_mutate, &o, alice_review("UPDATE", "apps", "Deployment", now, old), &r);
    assert_true(allowed(&r));
    /* alice changed the template: her pods are hers */
    assert_string_equal(at(r.patched, "spec", "template", "metadata", "annotations", ANN, NULL), ALICE);
    assert_string_equal(at(r.patched, "spec", "template", "metadata", "annotations", YK, NULL), ALICE);
    result_free(&r);
}

static void test_workload_update_template_unchanged(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    const char *old_text = "{'spec':{'replicas':1,'template':{'metadata':{'labels':{'a':'b'},'annotations':{}},"
                           "'spec':{'image':'v1'}}}}";
    result_t r;

    /* 1. alice scales bob's deployment and writes her own name into the template: bob's
     *    identity comes back (nothing else in the template changed) */
    json_t *old = J(old_text);
    json_t *oanns = json_object_get(json_object_get(json_object_get(json_object_get(old, "spec"), "template"),
                                                    "metadata"), "annotations");
    json_object_set_new(oanns, ANN, json_string(BOB));
    json_object_set_new(oanns, YK, json_string(BOB));
    json_t *now = json_deep_copy(old);
    json_object_set_new(json_object_get(now, "spec"), "replicas", json_integer(3));
    json_t *nanns = json_object_get(json_object_get(json_object_get(json_object_get(now, "spec"), "template"),
                                                    "metadata"), "annotations");
    json_object_set_new(nanns, ANN, json_string("{\"user\":\"carol\",\"groups\":[]}"));
    run(kq_admission_mutate, &o, alice_review("UPDATE", "apps", "Deployment", now, json_deep_copy(old)), &r);
    assert_true(allowed(&r));
    assert_string_equal(at(r.patched, "spec", "template", "metadata", "annotations", ANN, NULL), BOB);
    assert_string_equal(at(r.patched, "spec", "template", "metadata", "annotations", YK, NULL), BOB);
    result_free(&r);

    /* 2. a full replace without the annotations: restored */
    now = json_deep_copy(old);
    json_object_del(json_object_get(json_object_get(json_object_get(now, "spec"), "template"), "metadata"),
                    "annotations");
    run(kq_admission_mutate, &o, alice_review("UPDATE", "apps", "Deployment", now, json_deep_copy(old)), &r);
    assert_string_equal(at(r.patched, "spec", "template", "metadata", "annotations", ANN, NULL), BOB);
    assert_string_equal(at(r.patched, "spec", "template", "metadata", "annotations", YK, NULL), BOB);
    result_free(&r);

    /* 3. identity untouched: no patch at all (no rollout) */
    now = json_deep_copy(old);
    json_object_set_new(json_object_get(now, "spec"), "replicas", json_integer(5));
    run(kq_admission_mutate, &o, alice_review("UPDATE", "apps", "Deployment", now, old), &r);
    assert_true(allowed(&r));
    assert_null(r.ops);
    result_free(&r);

    /* 4. a workload from before kubequota (no identity) scaled: left alone; a spoofed
     *    identity added without other template changes is removed */
    run(kq_admission_mutate, &o,
        alice_review("UPDATE", "apps", "StatefulSet", J("{'spec':{'replicas':4,'template':{'spec':{}}}}"),
                     J("{'spec':{'replicas':1,'template':{'spec':{}}}}")),
        &r);
    assert_null(r.ops);
    result_free(&r);
    now = J("{'spec':{'replicas':4,'template':{'metadata':{'annotations':{}},'spec':{}}}}");
    json_object_set_new(json_object_get(json_object_get(json_object_get(json_object_get(now, "spec"), "template"),
                                                        "metadata"), "annotations"), ANN, json_string(BOB));
    run(kq_admission_mutate, &o,
        alice_review("UPDATE", "apps", "StatefulSet", now, J("{'spec':{'replicas':1,'template':{'spec':{}}}}")), &r);
    assert_true(allowed(&r));
    assert_null(at(r.patched, "spec", "template", "metadata", "annotations", ANN, NULL));
    result_free(&r);
}

static void test_other_kinds_and_operations(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    struct {
        const char *op, *group, *kind, *sub;
    } cases[] = {
        {"DELETE", "", "Pod", NULL},
        {"UPDATE", "apps", "Deployment", "scale"},
        {"UPDATE", "", "Pod", "status"},
        {"CREATE", "example.com", "Deployment", NULL}, /* same kind, other group */
        {"CREATE", "", "ConfigMap", NULL},
        {"CONNECT", "", "Pod", NULL},
        {"DELETE", "batch", "CronJob", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *rev = alice_review(cases[i].op, cases[i].group, cases[i].kind,
                                   J("{'metadata':{},'spec':{'template':{}}}"), J("{'metadata':{}}"));
        if (cases[i].sub)
            json_object_set_new(json_object_get(rev, "request"), "subResource", json_string(cases[i].sub));
        run(kq_admission_mutate, &o, rev, &r);
        assert_int_equal(r.status, 200);
        assert_true(allowed(&r));
        assert_null(r.ops);
        assert_string_equal(resp_uid(&r), UID);
        result_free(&r);
    }
}

static void test_scheduler_name(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{},'spec':{'schedulerName':'default-scheduler'}}"), NULL), &r);
    assert_string_equal(at(r.patched, "spec", "schedulerName", NULL), "default-scheduler");
    result_free(&r);

    o.set_scheduler_name = true;
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{},'spec':{'schedulerName':'default-scheduler'}}"), NULL), &r);
    assert_string_equal(at(r.patched, "spec", "schedulerName", NULL), "kubequota-scheduler");
    assert_pod_identity(&r, "alice", ALICE_GROUPS, 2);
    result_free(&r);

    /* absent field, custom name */
    o.scheduler_name = "quota-sched";
    run(kq_admission_mutate, &o, alice_review("CREATE", "", "Pod", J("{'metadata':{},'spec':{}}"), NULL), &r);
    assert_string_equal(at(r.patched, "spec", "schedulerName", NULL), "quota-sched");
    result_free(&r);

    /* pods from trusted controllers are routed too, without an identity */
    o.scheduler_name = "kubequota-scheduler";
    run(kq_admission_mutate, &o, fixture(), &r);
    assert_string_equal(at(r.patched, "spec", "schedulerName", NULL), "kubequota-scheduler");
    assert_null(at(r.patched, "metadata", "annotations", ANN, NULL));
    assert_int_equal(json_array_size(r.ops), 1);
    result_free(&r);

    /* workloads' templates are not given a scheduler name (their pods are, on creation) */
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "apps", "Deployment", J("{'spec':{'template':{'spec':{}}}}"), NULL), &r);
    assert_null(at(r.patched, "spec", "template", "spec", "schedulerName", NULL));
    result_free(&r);
}

/* ------------------------------------------------------------------ namespace filters (issue 37) */

/* rev's request.<key> set to value (a string). Returns rev. */
static json_t *with_req(json_t *rev, const char *key, const char *value)
{
    json_object_set_new(json_object_get(rev, "request"), key, json_string(value));
    return rev;
}

static kq_admission_ns_filter_t *filter(const char *process, const char *bypass)
{
    kq_admission_ns_filter_t *f = NULL;
    char err[256] = "";
    if (kq_admission_ns_filter_new(process, bypass, &f, err, sizeof err) != 0)
        fail_msg("filter(%s, %s): %s", process ? process : "NULL", bypass ? bypass : "NULL", err);
    return f;
}

/* YuniKorn's semantics, case for case: pkg/admission/admission_controller_test.go
 * TestShouldProcessNamespace (bypass "^kube-system$,^pre-,-post$"; process "^allow-" with
 * bypass "^allow-except-"), TestMutate ("pod with empty namespace" is in "default"), and
 * pkg/admission/conf/am_conf_test.go TestConfigMapVars (the default bypass list is
 * "^kube-system$", processNamespaces empty; "?" is not an expression). Unanchored as Go's
 * MatchString: "x-kube-system" and "kube-system-x" are processed. */
static void test_ns_filter_yunikorn_semantics(void **state)
{
    kq_admission_ns_filter_t *f = filter("", "^kube-system$,^pre-,-post$");
    assert_true(kq_admission_ns_processed(f, "test"));
    assert_false(kq_admission_ns_processed(f, "kube-system"));
    assert_true(kq_admission_ns_processed(f, "x-kube-system"));
    assert_true(kq_admission_ns_processed(f, "kube-system-x"));
    assert_false(kq_admission_ns_processed(f, "pre-ns"));
    assert_false(kq_admission_ns_processed(f, "ns-post"));
    kq_admission_ns_filter_free(f);

    f = filter("^allow-", "^allow-except-");
    assert_false(kq_admission_ns_processed(f, "test"));
    assert_true(kq_admission_ns_processed(f, "allow-this"));
    assert_false(kq_admission_ns_processed(f, "allow-except-this"));
    kq_admission_ns_filter_free(f);

    /* kubequota's defaults are YuniKorn's; an empty namespace is "default" */
    f = filter(NULL, KQ_ADMISSION_DEFAULT_BYPASS);
    assert_false(kq_admission_ns_processed(f, "kube-system"));
    assert_true(kq_admission_ns_processed(f, "team-a"));
    assert_true(kq_admission_ns_processed(f, ""));
    assert_true(kq_admission_ns_processed(f, NULL));
    kq_admission_ns_filter_free(f);
    f = filter("^default$", "");
    assert_true(kq_admission_ns_processed(f, ""));
    assert_false(kq_admission_ns_processed(f, "team-a"));
    kq_admission_ns_filter_free(f);

    /* parseRegexes: blanks around entries trimmed, empty entries skipped; unanchored
     * substrings; nothing configured processes everything, as a NULL filter does */
    f = filter(" ^team-[a-z]+$ , ,batch", "  ");
    assert_true(kq_admission_ns_processed(f, "team-ml"));
    assert_true(kq_admission_ns_processed(f, "nightly-batch-1"));
    assert_false(kq_admission_ns_processed(f, "team-1"));
    kq_admission_ns_filter_free(f);
    f = filter("", "");
    assert_true(kq_admission_ns_processed(f, "kube-system"));
    kq_admission_ns_filter_free(f);
    assert_true(kq_admission_ns_processed(NULL, "kube-system"));

    /* not an expression: refused with the entry named (YuniKorn logs it and keeps its
     * default; kubequota refuses to start, so a typo is not a silent change of scope) */
    kq_admission_ns_filter_t *bad = NULL;
    char err[256] = "";
    assert_int_equal(kq_admission_ns_filter_new("^ok$", "^a$,b(", &bad, err, sizeof err), KQ_EINVAL);
    assert_null(bad);
    assert_contains(err, "b(");
    assert_contains(err, "bypassNamespaces");
    assert_int_equal(kq_admission_ns_filter_new("?", NULL, &bad, err, sizeof err), KQ_EINVAL);
    assert_contains(err, "processNamespaces");
    kq_admission_ns_filter_free(NULL);
}

/* The filter in the webhook (TestMutate's "pod in bypassed namespace": allowed, empty
 * patch): /admission/mutate-scheduler answers a bypassed namespace allowed and unchanged,
 * pods and workloads alike, and governs the others (scheduler name and identity). */
static void test_ns_filter_in_mutate_scheduler(void **state)
{
    kq_admission_ns_filter_t *f = filter(NULL, "^kube-system$,^bypass$");
    kq_admission_opts_t o = kq_admission_opts_default();
    o.set_scheduler_name = true;
    o.admission_gate = true;
    o.ns_filter = f;
    result_t r;
    const char *pod = "{'metadata':{},'spec':{'schedulerName':'default-scheduler'}}";

    run(kq_admission_mutate, &o, with_req(alice_review("CREATE", "", "Pod", J(pod), NULL), "namespace", "bypass"), &r);
    assert_true(allowed(&r));
    assert_null(r.ops);
    result_free(&r);
    run(kq_admission_mutate, &o,
        with_req(alice_review("CREATE", "apps", "Deployment", J("{'spec':{'template':{'spec':{}}}}"), NULL),
                 "namespace", "bypass"), &r);
    assert_true(allowed(&r));
    assert_null(r.ops);
    result_free(&r);

    run(kq_admission_mutate, &o, with_req(alice_review("CREATE", "", "Pod", J(pod), NULL), "namespace", "test-ns"), &r);
    assert_true(allowed(&r));
    assert_string_equal(at(r.patched, "spec", "schedulerName", NULL), "kubequota-scheduler");
    assert_pod_identity(&r, "alice", ALICE_GROUPS, 2);
    result_free(&r);

    /* without the filter (the opt-in path), the bypassed name is governed too */
    o.ns_filter = NULL;
    run(kq_admission_mutate, &o, with_req(alice_review("CREATE", "", "Pod", J(pod), NULL), "namespace", "bypass"), &r);
    assert_string_equal(at(r.patched, "spec", "schedulerName", NULL), "kubequota-scheduler");
    result_free(&r);
    kq_admission_ns_filter_free(f);
}

/* pods/status (issue 37 route 7): a status update that rewrites the identity annotation
 * gets it back; one that changes a placement key is refused, as a pod UPDATE would be
 * (test_pod_update_restores_identity, test_pod_placement_immutable); a status update that
 * changes neither is allowed untouched. */
static void test_pod_status_fixed_keys(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    json_t *old = J("{'metadata':{'labels':{'kubequota.io/queue':'root.a'},'annotations':{}},"
                    "'spec':{'schedulerName':'kubequota-scheduler'},'status':{'phase':'Pending'}}");
    json_object_set_new(json_object_get(json_object_get(old, "metadata"), "annotations"), ANN, json_string(BOB));
    json_t *now = json_deep_copy(old);
    json_object_set_new(json_object_get(json_object_get(now, "metadata"), "annotations"), ANN, json_string(ALICE));
    json_object_set_new(json_object_get(now, "status"), "phase", json_string("Running"));
    run(kq_admission_mutate, &o,
        with_req(alice_review("UPDATE", "", "Pod", now, json_deep_copy(old)), "subResource", "status"), &r);
    assert_true(allowed(&r));
    assert_string_equal(at(r.patched, "metadata", "annotations", ANN, NULL), BOB);
    assert_string_equal(at(r.patched, "status", "phase", NULL), "Running");
    result_free(&r);

    now = json_deep_copy(old);
    json_object_set_new(json_object_get(json_object_get(now, "metadata"), "labels"), "kubequota.io/queue",
                        json_string("root.b"));
    run(kq_admission_mutate, &o,
        with_req(alice_review("UPDATE", "", "Pod", now, json_deep_copy(old)), "subResource", "status"), &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 403);
    assert_contains(message(&r), "kubequota.io/queue");
    result_free(&r);

    /* the kubelet's kind of update: status only */
    now = json_deep_copy(old);
    json_object_set_new(json_object_get(now, "status"), "phase", json_string("Running"));
    run(kq_admission_mutate, &o,
        with_req(review("UPDATE", "", "Pod", "system:node:n1", NULL, 0, now, json_deep_copy(old)), "subResource",
                 "status"), &r);
    assert_true(allowed(&r));
    assert_null(r.ops);
    result_free(&r);

    /* no oldObject: refused, not guessed */
    run(kq_admission_mutate, &o,
        with_req(alice_review("UPDATE", "", "Pod", json_deep_copy(old), NULL), "subResource", "status"), &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 400);
    result_free(&r);
    json_decref(old);

    /* other subresources stay unlooked-at */
    old = J("{'metadata':{'annotations':{}}}");
    now = J("{'metadata':{'annotations':{'kubequota.io/user-info':'x'}}}");
    run(kq_admission_mutate, &o, with_req(alice_review("UPDATE", "", "Pod", now, old), "subResource", "ephemeralcontainers"), &r);
    assert_true(allowed(&r));
    assert_null(r.ops);
    result_free(&r);
}

/* The admission gate (issue 18): managed pods without a node get kubequota.io/admission
 * at creation, appended to gates they already carry, trusted requesters' pods too; other
 * schedulers' pods, pods with a node, updates and the option off are untouched. */
static const char *gate_at(const json_t *pod, size_t i)
{
    json_t *g = json_array_get(json_object_get(json_object_get(pod, "spec"), "schedulingGates"), i);
    return json_string_value(json_object_get(g, "name"));
}

static void test_admission_gate(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    /* off (the binary's default): no gate */
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler'}}"), NULL),
        &r);
    assert_null(gate_at(r.patched, 0));
    result_free(&r);

    o.admission_gate = true;
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler'}}"), NULL),
        &r);
    assert_string_equal(gate_at(r.patched, 0), "kubequota.io/admission");
    assert_null(gate_at(r.patched, 1));
    assert_pod_identity(&r, "alice", ALICE_GROUPS, 2);
    result_free(&r);

    /* appended after another controller's gate */
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod",
                     J("{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler',"
                       "'schedulingGates':[{'name':'example.com/a'}]}}"), NULL), &r);
    assert_string_equal(gate_at(r.patched, 0), "example.com/a");
    assert_string_equal(gate_at(r.patched, 1), "kubequota.io/admission");
    result_free(&r);

    /* already there: not added twice */
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod",
                     J("{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler',"
                       "'schedulingGates':[{'name':'kubequota.io/admission'}]}}"), NULL), &r);
    assert_string_equal(gate_at(r.patched, 0), "kubequota.io/admission");
    assert_null(gate_at(r.patched, 1));
    result_free(&r);

    /* a pod routed to kubequota's scheduler by the same webhook is gated too */
    o.set_scheduler_name = true;
    run(kq_admission_mutate, &o, fixture(), &r); /* a trusted controller's pod */
    assert_string_equal(at(r.patched, "spec", "schedulerName", NULL), "kubequota-scheduler");
    assert_string_equal(gate_at(r.patched, 0), "kubequota.io/admission");
    result_free(&r);
    o.set_scheduler_name = false;

    /* another scheduler's pod, a pod with a node, an update: untouched */
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{},'spec':{'schedulerName':'default-scheduler'}}"), NULL), &r);
    assert_null(gate_at(r.patched, 0));
    result_free(&r);
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod",
                     J("{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler','nodeName':'n1'}}"), NULL), &r);
    assert_null(gate_at(r.patched, 0));
    result_free(&r);
    json_t *pod = J("{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler'}}");
    run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", pod, json_deep_copy(pod)), &r);
    assert_null(gate_at(r.patched, 0));
    result_free(&r);

    /* a malformed gate list is refused, not patched */
    run(kq_admission_mutate, &o,
        alice_review("CREATE", "", "Pod",
                     J("{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler','schedulingGates':'x'}}"), NULL),
        &r);
    assert_false(allowed(&r));
    result_free(&r);
}

/* Removing the admission gate by hand would skip the fair order: with gate removers
 * configured, only they may (the gating controller's own PATCH); everyone else gets a 403
 * naming the gate. Other gates, other changes, and no removers configured: allowed. */
static void test_gate_removal_guarded(void **state)
{
    static const char *const removers[] = {"system:serviceaccount:kubequota:*"};
    static const char *const sa_groups[] = {"system:serviceaccounts"};
    kq_admission_opts_t o = kq_admission_opts_default();
    o.admission_gate = true;
    const char *gated = "{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler',"
                        "'schedulingGates':[{'name':'example.com/a'},{'name':'kubequota.io/admission'}]}}";
    const char *other_removed = "{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler',"
                                "'schedulingGates':[{'name':'kubequota.io/admission'}]}}";
    const char *ours_removed = "{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler',"
                               "'schedulingGates':[{'name':'example.com/a'}]}}";
    result_t r;

    /* no removers configured: anyone (today's behaviour, warned at start) */
    run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", J(ours_removed), J(gated)), &r);
    assert_true(allowed(&r));
    result_free(&r);

    o.gate_removers = removers;
    o.n_gate_removers = 1;
    /* the pod's owner removes kubequota's gate: refused, naming the gate */
    run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", J(ours_removed), J(gated)), &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 403);
    assert_contains(message(&r), "kubequota.io/admission");
    result_free(&r);
    /* ... every gate at once: refused too */
    run(kq_admission_mutate, &o,
        alice_review("UPDATE", "", "Pod", J("{'metadata':{},'spec':{'schedulerName':'kubequota-scheduler'}}"),
                     J(gated)), &r);
    assert_false(allowed(&r));
    result_free(&r);
    /* ... another controller's gate only: allowed */
    run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", J(other_removed), J(gated)), &r);
    assert_true(allowed(&r));
    result_free(&r);
    /* kubequota's service account removes it: allowed */
    run(kq_admission_mutate, &o,
        review("UPDATE", "", "Pod", "system:serviceaccount:kubequota:kubequota", sa_groups, 1, J(ours_removed),
               J(gated)), &r);
    assert_true(allowed(&r));
    result_free(&r);
    /* a look-alike outside the prefix: refused */
    run(kq_admission_mutate, &o,
        review("UPDATE", "", "Pod", "system:serviceaccount:kubequota-evil:x", sa_groups, 1, J(ours_removed),
               J(gated)), &r);
    assert_false(allowed(&r));
    result_free(&r);
    /* a pod that never had the gate: other updates allowed */
    run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", J(ours_removed), J(ours_removed)), &r);
    assert_true(allowed(&r));
    result_free(&r);
}

/* ------------------------------------------------------------------ bad requests */

static void test_not_an_admission_review(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    const char *bodies[] = {"garbage", "", "[1,2]", "{}", "{\"request\":1}", "{\"a\":1,\"a\":2}",
                            "{\"request\":{\"uid\":\"x\"", "\"str\""};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        for (int v = 0; v < 2; v++) {
            result_t r;
            run_text(v ? kq_admission_validate : kq_admission_mutate, &o, bodies[i], strlen(bodies[i]), NULL, &r);
            assert_int_equal(r.status, 400);
            assert_contains(json_string_value(json_object_get(r.body, "error")), "not an AdmissionReview");
            result_free(&r);
        }
    }
}

static void test_body_too_large(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    size_t n = KQ_ADMISSION_MAX_BODY + 1;
    char *big = malloc(n);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    result_t r;
    run_text(kq_admission_mutate, &o, big, n, NULL, &r);
    assert_int_equal(r.status, 413);
    assert_contains(json_string_value(json_object_get(r.body, "error")), "larger");
    result_free(&r);
    free(big);
}

static void test_bad_arguments(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    char *out = (char *)"untouched";
    size_t len = 7;
    assert_int_equal(kq_admission_mutate(NULL, "{}", 2, &out, &len), KQ_EINVAL);
    assert_int_equal(kq_admission_validate(&o, NULL, 2, &out, &len), KQ_EINVAL);
    assert_int_equal(kq_admission_mutate(&o, "{}", 2, NULL, &len), KQ_EINVAL);
    assert_string_equal(out, "untouched");
    assert_int_equal(len, 7);
}

static void test_unusable_reviews_denied(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;

    /* no uid: denied, uid "" */
    json_t *rev = alice_review("CREATE", "", "Pod", J("{'metadata':{}}"), NULL);
    json_object_del(json_object_get(rev, "request"), "uid");
    run(kq_admission_mutate, &o, rev, &r);
    assert_int_equal(r.status, 200);
    assert_false(allowed(&r));
    assert_string_equal(resp_uid(&r), "");
    assert_contains(message(&r), "uid");
    assert_null(json_object_get(r.resp, "patch"));
    result_free(&r);

    /* wrong apiVersion, wrong kind: denied, uid echoed */
    const char *fields[2][2] = {{"apiVersion", "admission.k8s.io/v1beta1"}, {"kind", "Pod"}};
    for (int i = 0; i < 2; i++) {
        for (int v = 0; v < 2; v++) {
            rev = alice_review("CREATE", "", "Pod", J("{'metadata':{}}"), NULL);
            json_object_set_new(rev, fields[i][0], json_string(fields[i][1]));
            run(v ? kq_admission_validate : kq_admission_mutate, &o, rev, &r);
            assert_false(allowed(&r));
            assert_string_equal(resp_uid(&r), UID);
            assert_contains(message(&r), "admission.k8s.io/v1");
            assert_int_equal(status_code(&r), 400);
            result_free(&r);
        }
    }

    /* pod create without userInfo / username */
    run(kq_admission_mutate, &o, review("CREATE", "", "Pod", NULL, NULL, 0, J("{'metadata':{}}"), NULL), &r);
    assert_false(allowed(&r));
    assert_contains(message(&r), "userInfo.username");
    assert_string_equal(resp_uid(&r), UID);
    result_free(&r);

    /* bad groups */
    rev = alice_review("CREATE", "apps", "Deployment", J("{'spec':{}}"), NULL);
    json_object_set_new(json_object_get(json_object_get(rev, "request"), "userInfo"), "groups", J("['ok', 3]"));
    run(kq_admission_mutate, &o, rev, &r);
    assert_false(allowed(&r));
    assert_contains(message(&r), "groups[1]");
    result_free(&r);

    /* no object in a create; no oldObject in a pod update */
    run(kq_admission_mutate, &o, alice_review("CREATE", "", "Pod", NULL, NULL), &r);
    assert_false(allowed(&r));
    assert_contains(message(&r), "request.object");
    result_free(&r);
    run(kq_admission_mutate, &o, alice_review("UPDATE", "", "Pod", J("{}"), NULL), &r);
    assert_false(allowed(&r));
    assert_contains(message(&r), "oldObject");
    result_free(&r);

    /* no operation, no kind */
    rev = alice_review("CREATE", "", "Pod", J("{}"), NULL);
    json_object_del(json_object_get(rev, "request"), "operation");
    run(kq_admission_mutate, &o, rev, &r);
    assert_false(allowed(&r));
    assert_contains(message(&r), "operation");
    result_free(&r);
    rev = alice_review("CREATE", "", "Pod", J("{}"), NULL);
    json_object_del(json_object_get(rev, "request"), "kind");
    run(kq_admission_validate, &o, rev, &r);
    assert_false(allowed(&r));
    assert_contains(message(&r), "kind");
    result_free(&r);
}

/* ------------------------------------------------------------------ validating */

static json_t *config_map_review(const char *op, const char *ns, const char *name, const char *key, const char *yaml)
{
    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{}}", "apiVersion", "v1", "kind", "ConfigMap", "metadata",
                           "name", name, "namespace", ns, "data");
    if (key != NULL)
        json_object_set_new(json_object_get(cm, "data"), key, json_string(yaml));
    json_t *rev = alice_review(op, "", "ConfigMap", cm, NULL);
    json_t *req = json_object_get(rev, "request");
    json_object_set_new(req, "namespace", json_string(ns));
    json_object_set_new(req, "name", json_string(name));
    return rev;
}

static void test_config_map_invalid_rejected(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    const char *ops[] = {"CREATE", "UPDATE"};
    for (int i = 0; i < 2; i++) {
        result_t r;
        run(kq_admission_validate, &o,
            config_map_review(ops[i], "kube-system", "kubequota-config", "queues.yaml", "partition:\n  - name: default\n"),
            &r);
        assert_int_equal(r.status, 200);
        assert_false(allowed(&r));
        assert_int_equal(status_code(&r), 422);
        /* the validator's own words, with the key as the file name */
        assert_contains(message(&r), "unknown key 'partition'");
        assert_contains(message(&r), "queues.yaml:");
        assert_contains(message(&r), "kube-system/kubequota-config");
        assert_string_equal(resp_uid(&r), UID);
        result_free(&r);
    }
}

static void test_config_map_several_errors_joined(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    /* two independent mistakes: an unknown top-level key and a malformed quantity */
    run(kq_admission_validate, &o,
        config_map_review("UPDATE", "kube-system", "kubequota-config", "queues.yaml",
                          "partition: x\n"
                          "partitions:\n"
                          "  - name: default\n"
                          "    queues:\n"
                          "      - name: root\n"
                          "        resources:\n"
                          "          max: {memory: lots}\n"),
        &r);
    assert_false(allowed(&r));
    const char *m = message(&r);
    assert_contains(m, "unknown key 'partition'");
    assert_contains(m, "; ");
    result_free(&r);
}

static void test_config_map_valid_allowed(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    run(kq_admission_validate, &o,
        config_map_review("UPDATE", "kube-system", "kubequota-config", "queues.yaml", VALID_QUEUES), &r);
    assert_true(allowed(&r));
    assert_null(json_object_get(r.resp, "status"));
    assert_null(json_object_get(r.resp, "patch"));
    assert_string_equal(resp_uid(&r), UID);
    result_free(&r);
}

static void test_config_map_others_allowed(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    const char *bad = "partition: [\n";
    const char *where[][2] = {{"kube-system", "other"}, {"team-a", "kubequota-config"}};
    for (int i = 0; i < 2; i++) {
        result_t r;
        run(kq_admission_validate, &o, config_map_review("UPDATE", where[i][0], where[i][1], "queues.yaml", bad), &r);
        assert_true(allowed(&r));
        result_free(&r);
    }
    /* deleting it is not a bad edit */
    result_t r;
    run(kq_admission_validate, &o, config_map_review("DELETE", "kube-system", "kubequota-config", "queues.yaml", bad),
        &r);
    assert_true(allowed(&r));
    result_free(&r);
    /* the mutating webhook does not look at it */
    run(kq_admission_mutate, &o, config_map_review("UPDATE", "kube-system", "kubequota-config", "queues.yaml", bad),
        &r);
    assert_true(allowed(&r));
    assert_null(r.ops);
    result_free(&r);
}

static void test_config_map_missing_key_rejected(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    run(kq_admission_validate, &o, config_map_review("CREATE", "kube-system", "kubequota-config", "other.yaml", "x"),
        &r);
    assert_false(allowed(&r));
    assert_contains(message(&r), "data[\"queues.yaml\"] is missing");
    result_free(&r);
}

static void test_config_map_custom_location(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    o.config_map_namespace = "kq";
    o.config_map_name = "cfg";
    o.config_map_key = "q.yaml";
    result_t r;
    run(kq_admission_validate, &o, config_map_review("CREATE", "kq", "cfg", "q.yaml", "partition: 1\n"), &r);
    assert_false(allowed(&r));
    assert_contains(message(&r), "q.yaml:");
    result_free(&r);
    run(kq_admission_validate, &o, config_map_review("CREATE", "kq", "cfg", "q.yaml", VALID_QUEUES), &r);
    assert_true(allowed(&r));
    result_free(&r);
    /* the default location is no longer special */
    run(kq_admission_validate, &o,
        config_map_review("CREATE", "kube-system", "kubequota-config", "queues.yaml", "partition: 1\n"), &r);
    assert_true(allowed(&r));
    result_free(&r);
}

static json_t *eq_review(const char *op, const char *group)
{
    json_t *rev = alice_review(op, group, "ElasticQuota",
                               J("{'metadata':{'name':'team-a'},'spec':{'max':{'cpu':'8'},'min':{'cpu':'4'}}}"), NULL);
    json_object_set_new(json_object_get(rev, "request"), "name", json_string("team-a"));
    return rev;
}

static void test_elastic_quota_unhooked_warns(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    const char *groups[] = {"scheduling.x-k8s.io", "scheduling.sigs.k8s.io"};
    for (int i = 0; i < 2; i++) {
        result_t r;
        run(kq_admission_validate, &o, eq_review("CREATE", groups[i]), &r);
        assert_true(allowed(&r));
        const json_t *w = json_object_get(r.resp, "warnings");
        assert_int_equal(json_array_size(w), 1);
        assert_contains(json_string_value(json_array_get(w, 0)), "not checked");
        assert_contains(json_string_value(json_array_get(w, 0)), "team-a/team-a");
        result_free(&r);
    }
    /* another group's ElasticQuota is not ours */
    result_t r;
    run(kq_admission_validate, &o, eq_review("CREATE", "example.com"), &r);
    assert_true(allowed(&r));
    assert_null(json_object_get(r.resp, "warnings"));
    result_free(&r);
}

typedef struct hook_state {
    int rc;
    const char *msg;
    int calls;
    char seen_kind[32];
} hook_state_t;

static int eq_hook(void *ud, const json_t *request, char *msg, size_t len)
{
    hook_state_t *h = ud;
    h->calls++;
    const char *k = json_string_value(json_object_get(json_object_get(request, "kind"), "kind"));
    snprintf(h->seen_kind, sizeof(h->seen_kind), "%s", k ? k : "");
    snprintf(msg, len, "%s", h->msg);
    return h->rc;
}

static void test_elastic_quota_hook(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    hook_state_t h = {.rc = KQ_EDENIED, .msg = "min cpu 4 exceeds the parent's remaining 2"};
    o.validate_elasticquota = eq_hook;
    o.elasticquota_ud = &h;
    result_t r;
    run(kq_admission_validate, &o, eq_review("UPDATE", "scheduling.x-k8s.io"), &r);
    assert_int_equal(h.calls, 1);
    assert_string_equal(h.seen_kind, "ElasticQuota");
    assert_false(allowed(&r));
    assert_string_equal(message(&r), "min cpu 4 exceeds the parent's remaining 2");
    assert_int_equal(status_code(&r), 403);
    result_free(&r);

    h.rc = KQ_EINVAL;
    run(kq_admission_validate, &o, eq_review("UPDATE", "scheduling.x-k8s.io"), &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 422);
    result_free(&r);

    h.rc = 0;
    h.msg = "max is unbounded";
    run(kq_admission_validate, &o, eq_review("CREATE", "scheduling.sigs.k8s.io"), &r);
    assert_true(allowed(&r));
    assert_string_equal(json_string_value(json_array_get(json_object_get(r.resp, "warnings"), 0)), "max is unbounded");
    result_free(&r);

    h.msg = "";
    run(kq_admission_validate, &o, eq_review("CREATE", "scheduling.sigs.k8s.io"), &r);
    assert_true(allowed(&r));
    assert_null(json_object_get(r.resp, "warnings"));
    result_free(&r);
    assert_int_equal(h.calls, 4);
}

/* The validating webhook reserves a managed pod created on a node (any requester), once per
 * call, with the uid the API server gave it; a dry run is only checked; other pods are not
 * seen by either hook. */
static int reserve_calls;
static int reserve_hook(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len)
{
    (void)ud;
    (void)old;
    reserve_calls++;
    const char *uid = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
    if (uid == NULL || strcmp(uid, "u-1") != 0 || hook_rc != 0) {
        snprintf(msg, len, "no room");
        return KQ_EDENIED;
    }
    return 0;
}

static void test_validate_reserves_pods_on_nodes(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    o.check_pod = pod_hook;
    o.reserve_pod = reserve_hook;
    const char *on_node = "{'metadata':{'name':'web-x1','uid':'u-1'},'spec':{'schedulerName':'kubequota-scheduler',"
                          "'nodeName':'n1'}}";
    static const char *const ks[] = {"system:serviceaccounts:kube-system"};
    result_t r;
    hook_calls = reserve_calls = 0;
    hook_rc = 0;
    run(kq_admission_validate, &o,
        review("CREATE", "", "Pod", "system:serviceaccount:kube-system:replicaset-controller", ks, 1, J(on_node), NULL),
        &r);
    assert_true(allowed(&r));
    assert_int_equal(reserve_calls, 1);
    assert_int_equal(hook_calls, 0);
    result_free(&r);
    hook_rc = KQ_EDENIED;
    run(kq_admission_validate, &o, alice_review("CREATE", "", "Pod", J(on_node), NULL), &r);
    assert_false(allowed(&r));
    assert_int_equal(status_code(&r), 403);
    assert_contains(message(&r), "no room");
    result_free(&r);
    /* a dry run: checked, not reserved */
    reserve_calls = hook_calls = 0;
    json_t *dry = alice_review("CREATE", "", "Pod", J(on_node), NULL);
    json_object_set_new(json_object_get(dry, "request"), "dryRun", json_true());
    run(kq_admission_validate, &o, dry, &r);
    assert_false(allowed(&r));
    assert_int_equal(reserve_calls, 0);
    assert_int_equal(hook_calls, 1);
    result_free(&r);
    /* no node, another scheduler, an UPDATE: neither hook */
    reserve_calls = hook_calls = 0;
    run(kq_admission_validate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{'uid':'u-1'},'spec':{'schedulerName':'kubequota-scheduler'}}"),
                     NULL), &r);
    assert_true(allowed(&r));
    result_free(&r);
    run(kq_admission_validate, &o,
        alice_review("CREATE", "", "Pod", J("{'metadata':{'uid':'u-1'},'spec':{'schedulerName':'x','nodeName':'n1'}}"),
                     NULL), &r);
    assert_true(allowed(&r));
    result_free(&r);
    run(kq_admission_validate, &o, alice_review("UPDATE", "", "Pod", J(on_node), J(on_node)), &r);
    assert_true(allowed(&r));
    result_free(&r);
    assert_int_equal(reserve_calls + hook_calls, 0);
    hook_rc = 0;
}

static void test_validate_ignores_pods(void **state)
{
    kq_admission_opts_t o = kq_admission_opts_default();
    result_t r;
    run(kq_admission_validate, &o, alice_review("CREATE", "", "Pod", J("{'metadata':{}}"), NULL), &r);
    assert_true(allowed(&r));
    assert_null(json_object_get(r.resp, "patch"));
    result_free(&r);
}

int main(void)
{
    kq_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_trusted_controller_no_patch),
        cmocka_unit_test(test_pod_placement_immutable),
        cmocka_unit_test(test_pod_limits_hook),
        cmocka_unit_test(test_dry_run_resize_holds_nothing),
        cmocka_unit_test(test_fixture_user_stamped),
        cmocka_unit_test(test_spoofed_annotations_replaced),
        cmocka_unit_test(test_only_yunikorn_spoofed),
        cmocka_unit_test(test_groups_kept_in_request_order),
        cmocka_unit_test(test_user_without_groups),
        cmocka_unit_test(test_pod_without_annotations_map),
        cmocka_unit_test(test_trusted_keeps_identity),
        cmocka_unit_test(test_untrusted_lookalikes_are_stamped),
        cmocka_unit_test(test_no_trusted_list_stamps_controllers),
        cmocka_unit_test(test_pod_update_restores_identity),
        cmocka_unit_test(test_workload_kinds_stamped),
        cmocka_unit_test(test_cronjob_path),
        cmocka_unit_test(test_template_without_metadata),
        cmocka_unit_test(test_malformed_template_denied),
        cmocka_unit_test(test_workload_update_template_changed),
        cmocka_unit_test(test_workload_update_template_unchanged),
        cmocka_unit_test(test_other_kinds_and_operations),
        cmocka_unit_test(test_admission_gate),
        cmocka_unit_test(test_gate_removal_guarded),
        cmocka_unit_test(test_scheduler_name),
        cmocka_unit_test(test_ns_filter_yunikorn_semantics),
        cmocka_unit_test(test_ns_filter_in_mutate_scheduler),
        cmocka_unit_test(test_pod_status_fixed_keys),
        cmocka_unit_test(test_not_an_admission_review),
        cmocka_unit_test(test_body_too_large),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_unusable_reviews_denied),
        cmocka_unit_test(test_config_map_invalid_rejected),
        cmocka_unit_test(test_config_map_several_errors_joined),
        cmocka_unit_test(test_config_map_valid_allowed),
        cmocka_unit_test(test_config_map_others_allowed),
        cmocka_unit_test(test_config_map_missing_key_rejected),
        cmocka_unit_test(test_config_map_custom_location),
        cmocka_unit_test(test_elastic_quota_unhooked_warns),
        cmocka_unit_test(test_elastic_quota_hook),
        cmocka_unit_test(test_validate_ignores_pods),
        cmocka_unit_test(test_validate_reserves_pods_on_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
