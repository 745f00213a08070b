/* Unit tests for the kubectl plugin's input decoding: YAML and JSON documents with scalars
 * typed as Kubernetes' YAML decoding types them (sigs.k8s.io/yaml: plain true/false/null and
 * numbers are not strings; quoted scalars are), bad input refused with a line number, alias
 * expansion bounded, and the pods a Pod, a List or a workload stands for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kubequota/serve/kubectl.h"

static json_t *docs_of(const char *text, char *err, size_t errlen)
{
    return kq_kubectl_yaml_docs(text, strlen(text), 0, err, errlen);
}

static void expect_escaped(const char *in, const char *want)
{
    char *got = kq_kubectl_escape_terminal(in);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

/* Server-supplied names and messages cannot drive the caller's terminal (issue 29): ESC and
 * CR as kubectl escapes them, the other controls visibly, UTF-8 text kept. */
static void test_escape_terminal(void **state)
{
    (void)state;
    expect_escaped("alice", "alice");
    expect_escaped("\x1b]0;owned\x07x", "^[]0;owned^Gx");       /* OSC retitle + BEL */
    expect_escaped("\x1b[2J\x1b[H", "^[[2J^[[H");               /* clear screen */
    expect_escaped("ok\rEVIL", "ok\\rEVIL");                     /* CR rewrites the line */
    expect_escaped("a\nb\tc", "a\nb\tc");                         /* kept */
    expect_escaped("\x01\x08\x7f", "^A^H^?");
    expect_escaped("\xc2\x9b" "31m", "\\u009b31m");             /* C1 CSI as UTF-8 */
    expect_escaped("\x9b" "31m\xff", "\\x9b31m\\xff");          /* not UTF-8 */
    expect_escaped("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
    expect_escaped("\xc2\xa0", "\xc2\xa0");                       /* NBSP is not C1 */
    expect_escaped("", "");
}

static void test_scalars_are_typed_like_kubernetes(void **state)
{
    (void)state;
    char err[200];
    json_t *d = docs_of("a: 1\nb: '1'\nc: 1.5\nd: true\ne: \"true\"\nf: ~\ng: 500m\nh: 1e3\ni: -7\nj: 1Gi\nk:\n", err,
                        sizeof(err));
    assert_non_null(d);
    assert_int_equal(json_array_size(d), 1);
    json_t *o = json_array_get(d, 0);
    assert_true(json_is_integer(json_object_get(o, "a")));
    assert_int_equal(json_integer_value(json_object_get(o, "a")), 1);
    assert_string_equal(json_string_value(json_object_get(o, "b")), "1");
    assert_true(json_is_real(json_object_get(o, "c")));
    assert_true(json_is_true(json_object_get(o, "d")));
    assert_string_equal(json_string_value(json_object_get(o, "e")), "true");
    assert_true(json_is_null(json_object_get(o, "f")));
    assert_string_equal(json_string_value(json_object_get(o, "g")), "500m");
    assert_true(json_is_real(json_object_get(o, "h")));
    assert_int_equal(json_integer_value(json_object_get(o, "i")), -7);
    assert_string_equal(json_string_value(json_object_get(o, "j")), "1Gi");
    assert_true(json_is_null(json_object_get(o, "k")));
    json_decref(d);
}

static void test_documents_json_and_errors(void **state)
{
    (void)state;
    char err[200];
    json_t *d = docs_of("kind: A\n---\nkind: B\n---\n", err, sizeof(err));
    assert_non_null(d);
    assert_int_equal(json_array_size(d), 3); /* the last, empty document is null */
    assert_true(json_is_null(json_array_get(d, 2)));
    json_decref(d);
    /* JSON with tabs (libyaml refuses tab indentation; JSON allows it) */
    d = docs_of("{\n\t\"kind\": \"Pod\",\n\t\"n\": 2\n}", err, sizeof(err));
    assert_non_null(d);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(d, 0), "n")), 2);
    json_decref(d);
    assert_null(docs_of("a: [1, 2\nb: 3\n", err, sizeof(err)));
    assert_non_null(strstr(err, "line "));
    assert_null(docs_of("? [a, b]\n: c\n", err, sizeof(err)));
    assert_non_null(strstr(err, "key"));
    /* a billion laughs: bounded by the node budget, refused */
    const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n";
    assert_null(kq_kubectl_yaml_docs(bomb, strlen(bomb), 5000, err, sizeof(err)));
    assert_non_null(strstr(err, "too large"));
}

static json_t *pods(const char *yaml, char *err, size_t errlen)
{
    json_t *d = docs_of(yaml, err, errlen);
    assert_non_null(d);
    json_t *p = kq_kubectl_pods_of(json_array_get(d, 0), err, errlen);
    json_decref(d);
    return p;
}

static void test_pods_of_workloads(void **state)
{
    (void)state;
    char err[200];
    json_t *p = pods("kind: Pod\nmetadata: {name: x}\nspec: {}\n", err, sizeof(err));
    assert_int_equal(json_array_size(p), 1);
    json_decref(p);
    /* a Deployment: replicas copies, named after it, in its namespace, owned by it */
    p = pods("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ns1}\n"
             "spec:\n  replicas: 3\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: []}\n",
             err, sizeof(err));
    assert_non_null(p);
    assert_int_equal(json_array_size(p), 3);
    json_t *md = json_object_get(json_array_get(p, 2), "metadata");
    assert_string_equal(json_string_value(json_object_get(md, "name")), "web-2");
    assert_string_equal(json_string_value(json_object_get(md, "namespace")), "ns1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(md, "labels"), "app")), "web");
    json_t *own = json_array_get(json_object_get(md, "ownerReferences"), 0);
    assert_string_equal(json_string_value(json_object_get(own, "kind")), "Deployment");
    assert_true(json_is_true(json_object_get(own, "controller")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(p, 0), "kind")), "Pod");
    json_decref(p);
    /* a Job without parallelism: one pod; a CronJob: its job template's */
    p = pods("kind: Job\nmetadata: {name: j}\nspec: {template: {spec: {}}}\n", err, sizeof(err));
    assert_int_equal(json_array_size(p), 1);
    json_decref(p);
    p = pods("kind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {spec: {parallelism: 2, template: {spec: {}}}}}\n",
             err, sizeof(err));
    assert_int_equal(json_array_size(p), 2);
    json_decref(p);
    /* a List, flattened */
    p = pods("kind: List\nitems:\n- {kind: Pod, spec: {}}\n- {kind: Job, metadata: {name: j}, spec: {parallelism: 2, "
             "template: {spec: {}}}}\n",
             err, sizeof(err));
    assert_int_equal(json_array_size(p), 3);
    json_decref(p);
    /* refused, with a reason */
    assert_null(pods("kind: ConfigMap\ndata: {}\n", err, sizeof(err)));
    assert_non_null(strstr(err, "pod template"));
    assert_null(pods("kind: Job\nspec: {parallelism: 100000, template: {spec: {}}}\n", err, sizeof(err)));
    assert_non_null(strstr(err, "replicas"));
    assert_null(pods("kind: Job\nspec: {parallelism: '2', template: {spec: {}}}\n", err, sizeof(err)));
    assert_null(pods("[1, 2]\n", err, sizeof(err)));
    assert_non_null(strstr(err, "kind"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_terminal),
        cmocka_unit_test(test_scalars_are_typed_like_kubernetes),
        cmocka_unit_test(test_documents_json_and_errors),
        cmocka_unit_test(test_pods_of_workloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
