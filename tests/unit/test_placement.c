/* Tests for placement rules. Expected queues are taken from YuniKorn's documentation and
 * tests, not from our code:
 *   apache/yunikorn-site docs/user_guide/placement_rules.md (rule examples, "Complex
 *     examples", "Handling placement failures"),
 *   apache/yunikorn-site docs/user_guide/queue_config.md ("Child Template"),
 *   apache/yunikorn-site docs/user_guide/resource_quota_mgmt.md (namespace mapping),
 *   apache/yunikorn-core pkg/scheduler/placement/{placement,filter,tag_rule,user_rule,
 *     provided_rule,fixed_rule}.go and their _test.go files (semantics checked there).
 * Where the documentation and the code disagree, the code wins and the case says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubequota/engine/config.h"
#include "kubequota/engine/placement.h"
#include "kubequota/engine/ugm.h"
#include "testutil.h"

typedef struct world {
    const char *dyn_leaf[4]; /* dynamic queues in use (leaves) */
    const char *acl_queue;   /* the queue with a submit ACL */
    const char *acl_users[4];
} world_t;

static kq_qkind_t dyn_kind(void *arg, const char *path)
{
    world_t *w = arg;
    for (size_t i = 0; i < 4 && w->dyn_leaf[i]; i++)
        if (strcmp(w->dyn_leaf[i], path) == 0)
            return KQ_QKIND_LEAF;
    return KQ_QKIND_NONE;
}

static bool acl(void *arg, const kq_queue_conf_t *q, const char *user, const char *const *groups, size_t ng)
{
    (void)groups;
    (void)ng;
    world_t *w = arg;
    if (w->acl_queue == NULL || strcmp(q->path, w->acl_queue) != 0)
        return true;
    for (size_t i = 0; i < 4 && w->acl_users[i]; i++)
        if (strcmp(w->acl_users[i], user) == 0)
            return true;
    return false;
}

static kq_denial_t last_kind; /* the kind expect()'s placement reported */

/* Places and compares; want NULL means rejected and want_reason (if given) must occur in
 * the reason. */
static void expect(const kq_config_t *cfg, world_t *w, const char *user, const char *const *groups, size_t ng,
                   const char *ns, const char *provided, const char *parentq, bool forced, const char *want,
                   const char *want_reason)
{
    const kq_partition_conf_t *part = kq_config_partition(cfg, "default");
    assert_non_null(part);
    kq_tag_t tags[2] = {{"namespace", ns}, {"namespace.parentqueue", parentq}};
    kq_place_in_t in = {
        .user = user, .groups = groups, .n_groups = ng, .provided = provided,
        .tags = tags, .n_tags = ns ? 2 : 0, .forced = forced,
        .dynamic_kind = w ? dyn_kind : NULL, .may_submit = w ? acl : NULL, .arg = w,
    };
    char *q = NULL;
    char reason[1024];
    last_kind = KQ_DENIAL_COUNT; /* not a kind: the call must set it */
    int rc = kq_placement_place(part, &in, &q, reason, sizeof(reason), &last_kind);
    if (rc == 0)
        assert_int_equal(last_kind, KQ_DENIAL_NONE);
    if (want != NULL) {
        if (rc != 0)
            fail_msg("user %s ns %s provided %s: want %s, got rejected: %s", user, ns ? ns : "-",
                     provided ? provided : "-", want, reason);
        if (strcmp(q, want) != 0)
            fail_msg("user %s ns %s provided %s: want %s, got %s", user, ns ? ns : "-",
                     provided ? provided : "-", want, q);
    } else {
        if (rc == 0)
            fail_msg("user %s ns %s: want rejected, got %s", user, ns ? ns : "-", q);
        assert_int_equal(rc, KQ_EDENIED);
        assert_null(q);
        if (want_reason != NULL && strstr(reason, want_reason) == NULL)
            fail_msg("reason \"%s\" lacks \"%s\"", reason, want_reason);
    }
    free(q);
}

/* resource_quota_mgmt.md "Namespace to queue mapping": YuniKorn's default config; a pod
 * from a fresh namespace runs in root.<namespace>, created on first use. */
static void test_default_config(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    placementrules:\n"
                                   "      - name: tag\n"
                                   "        value: namespace\n"
                                   "        create: true\n"
                                   "    queues:\n"
                                   "      - name: root\n"
                                   "        submitacl: '*'\n");
    assert_non_null(cfg);
    expect(cfg, NULL, "alice", NULL, 0, "team-a", NULL, NULL, false, "root.team-a", NULL);
    /* the provided queue plays no part with these rules */
    expect(cfg, NULL, "alice", NULL, 0, "development", "root.other", NULL, false, "root.development", NULL);
    /* case-insensitive names: the result is lowercase */
    expect(cfg, NULL, "alice", NULL, 0, "Dev", NULL, NULL, false, "root.dev", NULL);
    /* no namespace tag: no rule matches, no root.default: rejected */
    expect(cfg, NULL, "alice", NULL, 0, NULL, NULL, NULL, false, NULL, "no placement rule matched");
    /* ... unless the pod already runs (recovery rule) */
    expect(cfg, NULL, "alice", NULL, 0, NULL, NULL, NULL, true, KQ_PLACEMENT_RECOVERY_QUEUE, NULL);
    kq_config_unref(cfg);
}

/* placement_rules.md "Provided Rule" example */
static void test_provided_with_user_parent(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    placementrules:\n"
                                   "      - name: provided\n"
                                   "        create: true\n"
                                   "        parent:\n"
                                   "          name: user\n"
                                   "          create: true\n"
                                   "    queues:\n"
                                   "      - name: root\n");
    assert_non_null(cfg);
    expect(cfg, NULL, "developer", NULL, 0, "ns", "my_special_queue", NULL, false,
           "root.developer.my_special_queue", NULL);
    /* fully qualified: the parent rule is skipped */
    expect(cfg, NULL, "developer", NULL, 0, "ns", "root.dev_queue", NULL, false, "root.dev_queue", NULL);
    /* a dot in a non-qualified provided name is replaced (rule.go replaceDot) */
    expect(cfg, NULL, "developer", NULL, 0, "ns", "a.b", NULL, false, "root.developer.a_dot_b", NULL);
    /* a level that is not a valid queue name fails the placement (provided_rule.go) */
    expect(cfg, NULL, "developer", NULL, 0, "ns", "root.bad name", NULL, false, NULL, "invalid queue name");
    kq_config_unref(cfg);
}

/* placement_rules.md "User Name Rule" and "Fixed Rule" examples, chained */
static void test_user_and_fixed(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    placementrules:\n"
                                   "      - name: user\n"
                                   "        create: false\n"
                                   "      - name: fixed\n"
                                   "        value: last_resort\n"
                                   "    queues:\n"
                                   "      - name: root\n"
                                   "        queues:\n"
                                   "          - name: finance_dot_test\n"
                                   "          - name: last_resort\n");
    assert_non_null(cfg);
    expect(cfg, NULL, "finance.test", NULL, 0, "ns", NULL, NULL, false, "root.finance_dot_test", NULL);
    /* root.developer does not exist, create is false: the next rule */
    expect(cfg, NULL, "developer", NULL, 0, "ns", "my_special_queue", NULL, false, "root.last_resort", NULL);
    /* a dynamic queue in use exists for create: false (placement.go queueFn) */
    world_t w = {.dyn_leaf = {"root.developer"}};
    expect(cfg, &w, "developer", NULL, 0, "ns", NULL, NULL, false, "root.developer", NULL);
    kq_config_unref(cfg);
}

/* placement_rules.md "Complex examples", first one. The documentation's second case
 * (sarah in namespace newapp -> root.newapp.sarah) needs root.newapp to exist: the parent
 * tag rule has no create flag, and tag_rule.go returns no match for a missing queue then. */
static void test_complex_example(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    placementrules:\n"
                                   "      - name: user\n"
                                   "        create: true\n"
                                   "        filter:\n"
                                   "          type: allow\n"
                                   "          groups:\n"
                                   "            - dev*\n"
                                   "        parent:\n"
                                   "          name: tag\n"
                                   "          value: namespace\n"
                                   "      - name: tag\n"
                                   "        value: namespace\n"
                                   "        create: true\n"
                                   "        parent:\n"
                                   "          name: fixed\n"
                                   "          value: root.namespaces\n"
                                   "          filter:\n"
                                   "            type: allow\n"
                                   "            users:\n"
                                   "              - john\n"
                                   "      - name: fixed\n"
                                   "        value: root.default\n"
                                   "    queues:\n"
                                   "      - name: root\n"
                                   "        queues:\n"
                                   "          - name: namespaces\n"
                                   "            parent: true\n"
                                   "          - name: newapp\n"
                                   "            parent: true\n"
                                   "          - name: default\n");
    assert_non_null(cfg);
    expect(cfg, NULL, "john", NULL, 0, "testing", NULL, NULL, false, "root.namespaces.testing", NULL);
    const char *sarah[] = {"sarah", "test_app", "dev_app"};
    expect(cfg, NULL, "sarah", sarah, 3, "newapp", NULL, NULL, false, "root.newapp.sarah", NULL);
    const char *bob[] = {"bob"};
    expect(cfg, NULL, "bob", bob, 1, "testapp", NULL, NULL, false, "root.default", NULL);
    /* sarah in a namespace without a queue: rule 1's parent does not match, rule 2 filters
     * her out (only john), rule 3 */
    expect(cfg, NULL, "sarah", sarah, 3, "other", NULL, NULL, false, "root.default", NULL);
    kq_config_unref(cfg);
}

/* placement_rules.md "Complex examples", second one: ACLs make a rule not match */
static void test_acl_skips_rule(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    queues:\n"
                                   "      - name: production\n"
                                   "        submitacl: john,bob\n"
                                   "    placementrules:\n"
                                   "      - name: fixed\n"
                                   "        value: root.production\n"
                                   "      - name: user\n"
                                   "        create: true\n");
    assert_non_null(cfg);
    world_t w = {.acl_queue = "root.production", .acl_users = {"john", "bob"}};
    expect(cfg, &w, "john", NULL, 0, "ns", NULL, NULL, false, "root.production", NULL);
    expect(cfg, &w, "alice", NULL, 0, "ns", NULL, NULL, false, "root.alice", NULL);
    kq_config_unref(cfg);
}

/* resource_quota_mgmt.md "Parent queue mapping for namespaces" */
static void test_parent_queue_annotation(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "   - name: default\n"
                                   "     placementrules:\n"
                                   "        - name: tag\n"
                                   "          value: namespace\n"
                                   "          create: true\n"
                                   "          parent:\n"
                                   "             name: tag\n"
                                   "             value: namespace.parentqueue\n"
                                   "     queues:\n"
                                   "        - name: root\n"
                                   "          queues:\n"
                                   "             - name: production\n"
                                   "               parent: true\n"
                                   "             - name: development\n"
                                   "               parent: true\n"
                                   "             - name: leafq\n");
    assert_non_null(cfg);
    expect(cfg, NULL, "u", NULL, 0, "finance", NULL, "root.production", false, "root.production.finance", NULL);
    /* "the rule will fully qualify the name if needed" */
    expect(cfg, NULL, "u", NULL, 0, "dev", NULL, "development", false, "root.development.dev", NULL);
    /* no annotation: the parent rule does not match, nothing else: rejected */
    expect(cfg, NULL, "u", NULL, 0, "dev", NULL, NULL, false, NULL, "parent rule tag");
    /* the parent must exist (no create on the parent rule) */
    expect(cfg, NULL, "u", NULL, 0, "dev", NULL, "root.nope", false, NULL, "does not exist");
    /* a parent rule that yields an existing leaf fails the placement (tag_rule.go) */
    expect(cfg, NULL, "u", NULL, 0, "dev", NULL, "leafq", false, NULL, "parent rule returned a leaf queue");
    kq_config_unref(cfg);
}

/* A rejected placement says what kind of denial it is (the Event reason follows from it),
 * from what the rules found, never from the words: a parent queue before a missing queue
 * before an ACL refusal; no queue for any other reason is a missing queue. */
static void test_denial_kinds(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    placementrules:\n"
                                   "      - name: provided\n"
                                   "      - name: tag\n"
                                   "        value: namespace\n"
                                   "    queues:\n"
                                   "      - name: root\n"
                                   "        queues:\n"
                                   "          - name: p\n"
                                   "            parent: true\n"
                                   "          - name: locked\n");
    assert_non_null(cfg);
    world_t w = {.acl_queue = "root.locked", .acl_users = {"alice"}};
    expect(cfg, &w, "u", NULL, 0, "nons", "root.p", NULL, false, NULL, "is a parent queue");
    assert_int_equal(last_kind, KQ_DENIAL_QUEUE_NOT_LEAF);
    expect(cfg, &w, "u", NULL, 0, "nons", "root.nope", NULL, false, NULL, "does not exist");
    assert_int_equal(last_kind, KQ_DENIAL_QUEUE_MISSING);
    /* a user name that reads like another denial changes nothing */
    expect(cfg, &w, "x is a parent queue", NULL, 0, "locked", "root.locked", NULL, false, NULL, "may not submit");
    assert_int_equal(last_kind, KQ_DENIAL_ACL);
    expect(cfg, &w, "alice", NULL, 0, "nons", "root.locked", NULL, false, "root.locked", NULL);
    /* the provided rule refused by the ACL, the tag rule's queue a parent: the parent wins */
    expect(cfg, &w, "u", NULL, 0, "p", "root.locked", NULL, false, NULL, "may not submit");
    assert_int_equal(last_kind, KQ_DENIAL_QUEUE_NOT_LEAF);
    /* ... and a missing queue wins over the ACL */
    expect(cfg, &w, "u", NULL, 0, "nons", "root.locked", NULL, false, NULL, "does not exist");
    assert_int_equal(last_kind, KQ_DENIAL_QUEUE_MISSING);
    /* no queue named, no such namespace queue: no queue for the pod */
    expect(cfg, &w, "u", NULL, 0, NULL, NULL, NULL, false, NULL, "the pod names no queue");
    assert_int_equal(last_kind, KQ_DENIAL_QUEUE_MISSING);
    kq_config_unref(cfg);
}

/* placement.go: an existing parent queue, or a queue to be created below a leaf, is no
 * match; then root.default when it exists and is a leaf. */
static void test_unusable_results(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    placementrules:\n"
                                   "      - name: provided\n"
                                   "        create: true\n"
                                   "    queues:\n"
                                   "      - name: root\n"
                                   "        queues:\n"
                                   "          - name: p\n"
                                   "            parent: true\n"
                                   "          - name: leaf\n"
                                   "          - name: default\n");
    assert_non_null(cfg);
    expect(cfg, NULL, "u", NULL, 0, "ns", "root.p", NULL, false, "root.default", NULL);
    expect(cfg, NULL, "u", NULL, 0, "ns", "root.leaf.x", NULL, false, "root.default", NULL);
    expect(cfg, NULL, "u", NULL, 0, "ns", "root.p.x", NULL, false, "root.p.x", NULL);
    expect(cfg, NULL, "u", NULL, 0, "ns", "root.leaf", NULL, false, "root.leaf", NULL);
    kq_config_unref(cfg);
}

/* filter.go allowUser: lists are exact and case-sensitive, one entry with a regexp
 * character is a regexp, groups are matched one at a time, deny inverts */
static void test_filters(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    placementrules:\n"
                                   "      - name: user\n"
                                   "        create: true\n"
                                   "        filter:\n"
                                   "          type: deny\n"
                                   "          users: [root, admin]\n"
                                   "          groups: ['^sys.*$']\n"
                                   "      - name: fixed\n"
                                   "        value: other\n"
                                   "        create: true\n"
                                   "    queues:\n"
                                   "      - name: root\n");
    assert_non_null(cfg);
    expect(cfg, NULL, "alice", NULL, 0, "ns", NULL, NULL, false, "root.alice", NULL);
    expect(cfg, NULL, "admin", NULL, 0, "ns", NULL, NULL, false, "root.other", NULL);
    expect(cfg, NULL, "Admin", NULL, 0, "ns", NULL, NULL, false, "root.admin", NULL); /* case-sensitive */
    const char *g1[] = {"users", "system"};
    expect(cfg, NULL, "bob", g1, 2, "ns", NULL, NULL, false, "root.other", NULL);
    const char *g2[] = {"users", "mysys"};
    expect(cfg, NULL, "bob", g2, 2, "ns", NULL, NULL, false, "root.bob", NULL);

    const kq_rule_conf_t *r = kq_config_partition(cfg, "default")->rules[0];
    assert_true(r->filter_deny);
    assert_non_null(r->filter_group_re);
    assert_null(r->filter_user_re);
    kq_config_unref(cfg);
}

/* queue_config.md "Child Template": root.parent.sales uses root.parent's template,
 * root.notemplate.sales inherits root's */
static void test_child_template(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config(" partitions:\n"
                                   "   - name: default\n"
                                   "     placementrules:\n"
                                   "       - name: provided\n"
                                   "         create: true\n"
                                   "     queues:\n"
                                   "       - name: root\n"
                                   "         submitacl: '*'\n"
                                   "         childtemplate:\n"
                                   "           maxapplications: 10\n"
                                   "           properties:\n"
                                   "             application.sort.policy: fifo\n"
                                   "           resources:\n"
                                   "             guaranteed:\n"
                                   "               vcore: 1\n"
                                   "               memory: 1G\n"
                                   "             max:\n"
                                   "               vcore: 20\n"
                                   "               memory: 600G\n"
                                   "         queues:\n"
                                   "           - name: parent\n"
                                   "             parent: true\n"
                                   "             childtemplate:\n"
                                   "               resources:\n"
                                   "                 max:\n"
                                   "                   vcore: 21\n"
                                   "                   memory: 610G\n"
                                   "           - name: notemplate\n"
                                   "             parent: true\n");
    assert_non_null(cfg);
    const kq_partition_conf_t *part = kq_config_partition(cfg, "default");
    const kq_child_template_t *t = kq_placement_template(part, "root.parent.sales");
    assert_non_null(t);
    assert_true(t->has_max);
    bool present = false;
    assert_int_equal(kq_resource_get(&t->max, "vcore", &present), 21000); /* millicores */
    assert_true(present);
    assert_int_equal(kq_resource_get(&t->max, "memory", &present), 610000000000LL);
    assert_int_equal(t->max_applications, 0);
    t = kq_placement_template(part, "root.notemplate.sales");
    assert_non_null(t);
    assert_int_equal(kq_resource_get(&t->max, "vcore", &present), 20000);
    assert_int_equal(t->max_applications, 10);
    assert_non_null(kq_placement_template(part, "root.sales"));
    assert_null(kq_placement_template(part, "root.parent")); /* configured */
    /* guaranteed and the sort policy are accepted and reported as not used */
    size_t nw = kq_config_warning_count(cfg);
    bool g = false, prop = false;
    for (size_t i = 0; i < nw; i++) {
        g |= strstr(kq_config_warning_at(cfg, i), "childtemplate.resources.guaranteed") != NULL;
        prop |= strstr(kq_config_warning_at(cfg, i), "childtemplate.properties.application.sort.policy") != NULL;
    }
    assert_true(g);
    assert_true(prop);
    kq_config_unref(cfg);
}

/* rule.go newRule, fixed_rule.go, tag_rule.go initialise: rule sets YuniKorn refuses */
static void test_bad_rules(void **state)
{
    (void)state;
    static const struct { const char *rule, *want; } cases[] = {
        {"- name: recovery", "the recovery rule is implicit"},
        {"- name: nosuch", "unknown placement rule 'nosuch'"},
        {"- name: tag", "a tag rule needs a value"},
        {"- name: fixed", "a fixed rule needs a value"},
        {"- name: fixed\n        value: root.a\n        parent:\n          name: user",
         "cannot have a parent rule"},
        {"- name: fixed\n        value: 'a b'", "is not a valid queue path"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char yaml[512];
        snprintf(yaml, sizeof(yaml),
                 "partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n"
                 "          - name: a\n    placementrules:\n      %s\n", cases[i].rule);
        kq_config_t *cfg = NULL;
        kq_diags_t d;
        kq_diags_init(&d);
        assert_int_equal(kq_config_load_buffer(yaml, strlen(yaml), "t.yaml", &cfg, &d), KQ_EPARSE);
        char *all = kq_diags_join(&d, "\n");
        if (all == NULL || strstr(all, cases[i].want) == NULL)
            fail_msg("case %zu: want \"%s\" in \"%s\"", i, cases[i].want, all ? all : "");
        free(all);
        kq_diags_free(&d);
    }
}

/* every real YuniKorn configuration in examples/yunikorn loads (each file cites its source) */
static void test_examples_load(void **state)
{
    (void)state;
    static const char *const files[] = {"default.yaml", "namespace-parent.yaml", "child-template.yaml",
                                         "placement-use-case.yaml"};
    const char *d = getenv("KQ_TEST_DATA");
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/../../examples/yunikorn/%s", d && *d ? d : "tests/data", files[i]);
        kq_config_t *cfg = NULL;
        kq_diags_t dg;
        kq_diags_init(&dg);
        int rc = kq_config_load_file(path, &cfg, &dg);
        if (rc != 0) {
            char *all = kq_diags_join(&dg, "\n");
            fail_msg("%s: %s", path, all ? all : "?");
        }
        assert_true(kq_config_partition(cfg, "default")->n_rules > 0);
        kq_config_unref(cfg);
        kq_diags_free(&dg);
    }
}

/* Dynamic queues in the ugm: one exists while something is counted there and goes when
 * it empties; a dynamic leaf is held to the child template in force (queue_config.md
 * "Child Template") or, when set, to its namespace's limits (resource_quota_mgmt.md
 * "Namespace quota"), which replace the template's. */
static void test_ugm_dynamic_queues(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    placementrules:\n"
                                   "      - name: provided\n"
                                   "        create: true\n"
                                   "    queues:\n"
                                   "      - name: root\n"
                                   "        childtemplate:\n"
                                   "          maxapplications: 2\n"
                                   "          resources:\n"
                                   "            max: {vcore: 2}\n"
                                   "        queues:\n"
                                   "          - name: p\n"
                                   "            parent: true\n");
    assert_non_null(cfg);
    kq_ugm_t *m = kq_ugm_new("default");
    assert_non_null(m);
    assert_int_equal(kq_ugm_set_config(m, cfg), 0);
    kq_user_t u = {.name = "alice"};
    kq_resource_t one = KQ_RESOURCE_EMPTY, half = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&one, "cpu", 1000), 0);
    assert_int_equal(kq_resource_set(&half, "cpu", 500), 0);
    char why[512];

    assert_int_equal(kq_ugm_queue_kind(m, "root.p.x"), KQ_QKIND_NONE);
    assert_int_equal(kq_ugm_increase(m, "root.p.x", "a1", &u, &one, why, sizeof(why), NULL), 0);
    assert_int_equal(kq_ugm_queue_kind(m, "root.p.x"), KQ_QKIND_LEAF);
    assert_int_equal(kq_ugm_queue_kind(m, "ROOT.P.X"), KQ_QKIND_LEAF); /* names are case-insensitive */
    assert_int_equal(kq_ugm_queue_kind(m, "root.p"), KQ_QKIND_PARENT);
    /* root's template, inherited through root.p: 2 vcore, 2 applications */
    assert_int_equal(kq_ugm_increase(m, "root.p.x", "a2", &u, &one, why, sizeof(why), NULL), 0);
    kq_denial_t kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ugm_increase(m, "root.p.x", "a2", &u, &half, why, sizeof(why), &kind), KQ_EDENIED);
    assert_non_null(strstr(why, "child template"));
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    assert_int_equal(kq_ugm_decrease(m, "root.p.x", "a2", "alice", &one), 0);
    assert_int_equal(kq_ugm_increase(m, "root.p.x", "a3", &u, &half, why, sizeof(why), NULL), 0);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ugm_increase(m, "root.p.x", "a4", &u, &half, why, sizeof(why), &kind), KQ_EDENIED);
    assert_non_null(strstr(why, "maxapplications"));
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    /* the namespace's limits replace the template's */
    kq_resource_t three = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&three, "cpu", 3000), 0);
    assert_int_equal(kq_ugm_set_dynamic_limits(m, "root.p.x", &three, 5), 0);
    assert_int_equal(kq_ugm_increase(m, "root.p.x", "a4", &u, &one, why, sizeof(why), NULL), 0);
    assert_int_equal(kq_ugm_increase(m, "root.p.x", "a5", &u, &one, why, sizeof(why), NULL), KQ_EDENIED);
    assert_non_null(strstr(why, "namespace annotation"));
    assert_int_equal(kq_ugm_set_dynamic_limits(m, "root.p.x", NULL, 0), 0); /* cleared: template again */
    assert_int_equal(kq_ugm_increase(m, "root.p.x", "a4", &u, &half, why, sizeof(why), NULL), KQ_EDENIED);
    /* a dynamic leaf deeper down takes the template of its nearest configured ancestor */
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ugm_increase(m, "root.p.q.y", "b1", &u, &three, why, sizeof(why), &kind), KQ_EDENIED);
    assert_non_null(strstr(why, "root.p.q.y"));
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS); /* 3 alone > the template's 2 */
    /* a configured queue is not dynamic: no template */
    assert_int_equal(kq_ugm_increase(m, "root.p", "b1", &u, &three, why, sizeof(why), NULL), 0);
    assert_int_equal(kq_ugm_decrease(m, "root.p", "b1", "alice", &three), 0);
    /* emptied: the dynamic queue goes */
    assert_int_equal(kq_ugm_decrease(m, "root.p.x", "a1", "alice", &one), 0);
    assert_int_equal(kq_ugm_decrease(m, "root.p.x", "a3", "alice", &half), 0);
    assert_int_equal(kq_ugm_decrease(m, "root.p.x", "a4", "alice", &one), 0);
    assert_int_equal(kq_ugm_queue_kind(m, "root.p.x"), KQ_QKIND_NONE);
    assert_int_equal(kq_ugm_queue_kind(m, "root.p"), KQ_QKIND_NONE);
    kq_ugm_free(m);
    kq_config_unref(cfg);
}

/* GET /ws/v1/partition/{p}/placementrules: dao.RuleDAO as each rule's ruleDAO() builds it
 * (apache/yunikorn-core pkg/scheduler/placement/ {fixed,tag,user,provided}_rule.go ruleDAO, filter.go filterDAO,
 * recovery_rule.go; pkg/webservice/dao/rule_info.go) */
static void test_rules_json(void **state)
{
    (void)state;
    kq_config_t *cfg = test_config("partitions:\n"
                                   "  - name: default\n"
                                   "    placementrules:\n"
                                   "      - name: User\n"
                                   "        create: true\n"
                                   "        filter:\n"
                                   "          type: deny\n"
                                   "          users: [bob, alice]\n"
                                   "          groups: ['dev*']\n"
                                   "        parent:\n"
                                   "          name: tag\n"
                                   "          value: Namespace\n"
                                   "      - name: fixed\n"
                                   "        value: root.default\n"
                                   "    queues:\n"
                                   "      - name: root\n"
                                   "        queues:\n"
                                   "          - name: default\n");
    assert_non_null(cfg);
    json_t *got = kq_placement_rules_json(kq_config_partition(cfg, "default"));
    json_error_t je;
    json_t *want = json_loads(
        "[{\"name\":\"user\",\"parameters\":{\"create\":\"true\"},"
        "  \"filter\":{\"type\":\"deny\",\"userList\":[\"alice\",\"bob\"],\"groupExp\":\"dev*\"},"
        "  \"parentRule\":{\"name\":\"tag\",\"parameters\":{\"tagName\":\"namespace\",\"create\":\"false\"}}},"
        " {\"name\":\"fixed\",\"parameters\":{\"queue\":\"root.default\",\"create\":\"false\",\"qualified\":\"true\"}},"
        " {\"name\":\"recovery\",\"parameters\":{\"queue\":\"root.@recovery@\"}}]", 0, &je);
    assert_non_null(want);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS);
        fail_msg("got %s", g ? g : "NULL");
    }
    json_decref(got);
    json_decref(want);
    kq_config_unref(cfg);
    /* no rules: YuniKorn's implicit provided rule, then recovery */
    cfg = test_config("partitions:\n  - name: default\n    queues:\n      - name: root\n");
    got = kq_placement_rules_json(kq_config_partition(cfg, "default"));
    want = json_loads("[{\"name\":\"provided\",\"parameters\":{\"create\":\"false\"}},"
                      "{\"name\":\"recovery\",\"parameters\":{\"queue\":\"root.@recovery@\"}}]", 0, &je);
    assert_true(json_equal(got, want));
    json_decref(got);
    json_decref(want);
    kq_config_unref(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_config),
        cmocka_unit_test(test_provided_with_user_parent),
        cmocka_unit_test(test_user_and_fixed),
        cmocka_unit_test(test_complex_example),
        cmocka_unit_test(test_acl_skips_rule),
        cmocka_unit_test(test_parent_queue_annotation),
        cmocka_unit_test(test_unusable_results),
        cmocka_unit_test(test_denial_kinds),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_child_template),
        cmocka_unit_test(test_bad_rules),
        cmocka_unit_test(test_examples_load),
        cmocka_unit_test(test_ugm_dynamic_queues),
        cmocka_unit_test(test_rules_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
