/* Tests for the queue configuration module: data-driven cases under
 * $KQ_TEST_DATA/config/{valid,invalid} (each invalid file names its expected error in a
 * "# expect:" line and optionally its line in "# line:"), plus the snapshot's structure,
 * queue lookup, limits carried from the partition, reference counting, the holder and
 * the check-config exit codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kubequota/engine/config.h"

static const char *data_dir(void)
{
    const char *d = getenv("KQ_TEST_DATA");
    return d && *d ? d : "tests/data";
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf != NULL) {
        size_t got = fread(buf, 1, (size_t)n, f);
        buf[got] = '\0';
    }
    fclose(f);
    return buf;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Lists *.yaml in dir (sorted). Caller frees each and the array. */
static size_t list_yaml(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    char **v = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".yaml") != 0)
            continue;
        v = realloc(v, (n + 1) * sizeof(*v));
        assert_non_null(v);
        char *p = malloc(strlen(dir) + l + 2);
        assert_non_null(p);
        sprintf(p, "%s/%s", dir, e->d_name);
        v[n++] = p;
    }
    closedir(d);
    qsort(v, n, sizeof(*v), cmp_str);
    *out = v;
    return n;
}

static void print_diags(const char *what, const kq_diags_t *d)
{
    char *all = kq_diags_join(d, "\n  ");
    fprintf(stderr, "%s:\n  %s\n", what, all ? all : "(out of memory)");
    free(all);
}

static void test_valid_files(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/config/valid", data_dir());
    char **files;
    size_t n = list_yaml(dir, &files);
    assert_true(n >= 10);
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        kq_diags_t d;
        kq_diags_init(&d);
        kq_config_t *cfg = NULL;
        int rc = kq_config_load_file(files[i], &cfg, &d);
        if (rc != 0 || cfg == NULL || d.n != 0) {
            print_diags(files[i], &d);
            failed++;
        }
        kq_config_unref(cfg);
        kq_diags_free(&d);
        free(files[i]);
    }
    free(files);
    assert_int_equal(failed, 0);
}

/* Files the loader accepts and serve refuses (serve-refuses/): kq_config_check_partition
 * names the file and says why; the default partition is "default". */
static void test_serve_refuses_files(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/config/serve-refuses", data_dir());
    char **files;
    size_t n = list_yaml(dir, &files);
    assert_true(n >= 3);
    for (size_t i = 0; i < n; i++) {
        char *text = slurp(files[i]);
        assert_non_null(text);
        const char *e = strstr(text, "# expect: ");
        char expect[256] = "no partition is defined";
        if (e != NULL) {
            e += strlen("# expect: ");
            size_t el = strcspn(e, "\n");
            assert_true(el > 0 && el < sizeof(expect));
            memcpy(expect, e, el);
            expect[el] = '\0';
        }
        kq_diags_t d;
        kq_diags_init(&d);
        kq_config_t *cfg = NULL;
        assert_int_equal(kq_config_load_file(files[i], &cfg, &d), 0);
        assert_int_equal(kq_config_check_partition(cfg, NULL, files[i], &d), KQ_EPARSE);
        assert_int_equal(d.n, 1);
        char buf[1024];
        kq_diag_format(&d.v[0], buf, sizeof(buf));
        if (strstr(buf, expect) == NULL || strncmp(buf, files[i], strlen(files[i])) != 0)
            fail_msg("%s: got '%s', expected '%s'", files[i], buf, expect);
        kq_config_unref(cfg);
        kq_diags_free(&d);
        free(text);
        free(files[i]);
    }
    free(files);

    /* the partition in use, not only "default"; found case-insensitively like lookups */
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    const char *two = "partitions:\n  - name: default\n    queues: [{name: root}]\n"
                      "  - name: Batch\n    queues: [{name: root}]\n";
    assert_int_equal(kq_config_load_buffer(two, strlen(two), "q.yaml", &cfg, &d), 0);
    assert_int_equal(kq_config_check_partition(cfg, "default", "q.yaml", &d), 0);
    assert_int_equal(kq_config_check_partition(cfg, "batch", "q.yaml", &d), 0);
    assert_int_equal(d.n, 0);
    assert_int_equal(kq_config_check_partition(cfg, "gpu", "q.yaml", &d), KQ_EPARSE);
    char buf[512];
    kq_diag_format(&d.v[0], buf, sizeof(buf));
    assert_string_equal(buf, "q.yaml: partition \"gpu\" is not defined (kubequota enforces it: --partition)");
    kq_config_unref(cfg);
    kq_diags_free(&d);
}

static void test_invalid_files(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/config/invalid", data_dir());
    char **files;
    size_t n = list_yaml(dir, &files);
    assert_true(n >= 40);
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        char *text = slurp(files[i]);
        assert_non_null(text);
        char expect[512] = "";
        int want_line = 0;
        const char *e = strstr(text, "# expect: ");
        assert_non_null(e);
        e += strlen("# expect: ");
        size_t el = strcspn(e, "\n");
        assert_true(el > 0 && el < sizeof(expect));
        memcpy(expect, e, el);
        expect[el] = '\0';
        const char *ln = strstr(text, "# line: ");
        if (ln != NULL)
            want_line = atoi(ln + strlen("# line: "));

        kq_diags_t d;
        kq_diags_init(&d);
        kq_config_t *sentinel = (kq_config_t *)(uintptr_t)0x1, *cfg = sentinel;
        int rc = kq_config_load_file(files[i], &cfg, &d);
        bool found = false;
        for (size_t k = 0; k < d.n && !found; k++) {
            char buf[2048];
            kq_diag_format(&d.v[k], buf, sizeof(buf));
            if (strstr(buf, expect) != NULL && (want_line == 0 || d.v[k].line == want_line) &&
                d.v[k].file != NULL && strcmp(d.v[k].file, files[i]) == 0 &&
                (d.v[k].line > 0 || strstr(expect, "too complex") != NULL))
                found = true;
        }
        if (rc != KQ_EPARSE || cfg != sentinel || !found) {
            fprintf(stderr, "%s: rc=%d, expected '%s'%s%.0d\n", files[i], rc, expect,
                    want_line ? " at line " : "", want_line);
            print_diags("got", &d);
            failed++;
        }
        kq_diags_free(&d);
        free(text);
        free(files[i]);
    }
    free(files);
    assert_int_equal(failed, 0);
}

static kq_config_t *load_ok(const char *yaml)
{
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    int rc = kq_config_load_buffer(yaml, strlen(yaml), "inline.yaml", &cfg, &d);
    if (rc != 0)
        print_diags("inline.yaml", &d);
    assert_int_equal(rc, 0);
    assert_non_null(cfg);
    kq_diags_free(&d);
    return cfg;
}

static const char *const TREE =
    "partitions:\n"
    "  - name: default\n"
    "    limits:\n"
    "      - limit: partition cap\n"
    "        users: [\"*\"]\n"
    "        maxapplications: 20\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: Dev\n"
    "            parent: true\n"
    "            resources:\n"
    "              guaranteed: {vcore: 500m, memory: 1Gi}\n"
    "              max: {vcore: 4, memory: \"8 Gi\"}\n"
    "            queues:\n"
    "              - name: team-a\n"
    "                maxapplications: 7\n"
    "                properties: {application.sort.policy: fifo}\n"
    "                submitacl: \"alice dev\"\n"
    "                limits:\n"
    "                  - limit: mixed\n"
    "                    users: [alice, \"*\"]\n"
    "                    maxapplications: 3\n"
    "          - name: prod\n";

static void test_tree_and_lookup(void **state)
{
    (void)state;
    kq_config_t *cfg = load_ok(TREE);
    assert_int_equal(kq_config_partition_count(cfg), 1);
    const kq_partition_conf_t *p = kq_config_partition(cfg, "default");
    assert_non_null(p);
    assert_ptr_equal(p, kq_config_partition_at(cfg, 0));
    assert_null(kq_config_partition_at(cfg, 1));
    assert_null(kq_config_partition(cfg, "gpu"));
    assert_int_equal(p->n_queues, 4);

    const kq_queue_conf_t *root = kq_config_queue(p, "root");
    assert_ptr_equal(root, p->root);
    assert_null(root->parent);
    assert_int_equal(root->depth, 0);
    assert_true(root->is_parent);
    assert_int_equal(root->n_children, 2);

    /* names are case-insensitive and stored lowercase */
    const kq_queue_conf_t *dev = kq_config_queue(p, "root.dev");
    assert_non_null(dev);
    assert_ptr_equal(dev, kq_config_queue(p, "ROOT.Dev"));
    assert_string_equal(dev->name, "dev");
    assert_string_equal(dev->path, "root.dev");
    assert_ptr_equal(dev->parent, root);
    assert_int_equal(dev->line, 10);
    assert_true(dev->has_guaranteed && dev->has_max);
    assert_int_equal(kq_resource_get(&dev->guaranteed, "cpu", NULL), 500);
    assert_int_equal(kq_resource_get(&dev->max, "vcore", NULL), 4000);
    assert_int_equal(kq_resource_get(&dev->max, "memory", NULL), 8LL << 30);

    const kq_queue_conf_t *ta = kq_config_queue(p, "root.dev.team-a");
    assert_non_null(ta);
    assert_ptr_equal(ta, dev->children[0]);
    assert_int_equal(ta->depth, 2);
    assert_false(ta->is_parent);
    assert_false(ta->has_max);
    assert_int_equal(ta->max_applications, 7);
    assert_int_equal(ta->n_properties, 1);
    assert_string_equal(ta->properties[0].key, "application.sort.policy");
    assert_string_equal(ta->properties[0].value, "fifo");
    assert_string_equal(ta->submit_acl, "alice dev");
    assert_null(ta->admin_acl);

    /* users [alice, "*"] is split so each entry is names only or exactly {"*"} */
    assert_int_equal(ta->n_limits, 2);
    assert_int_equal(ta->limits[0].n_users, 1);
    assert_string_equal(ta->limits[0].users[0], "alice");
    assert_int_equal(ta->limits[1].n_users, 1);
    assert_string_equal(ta->limits[1].users[0], "*");
    assert_int_equal(ta->limits[0].max_applications, 3);
    assert_int_equal(ta->limits[1].max_applications, 3);
    assert_string_equal(ta->limits[1].description, "mixed");
    assert_int_equal(ta->limits[0].line, 21);
    assert_false(ta->limits[0].has_max_resources);

    assert_null(kq_config_queue(p, "root.dev.team-b"));
    assert_null(kq_config_queue(p, "dev"));
    assert_null(kq_config_queue(p, ""));

    char sum[128];
    kq_config_summary(cfg, sum, sizeof(sum));
    assert_string_equal(sum, "1 partition(s), 4 queue(s), 2 limit(s)");
    kq_config_unref(cfg);
}

static void test_partition_limits_on_root(void **state)
{
    (void)state;
    kq_config_t *cfg = load_ok(TREE);
    const kq_partition_conf_t *p = kq_config_partition(cfg, "");
    assert_non_null(p);
    assert_int_equal(p->n_limits, 1);
    assert_string_equal(p->limits[0].description, "partition cap");
    assert_int_equal(p->limits[0].max_applications, 20);
    /* the root queue has no limits of its own: it carries the partition's */
    assert_int_equal(p->root->n_limits, 1);
    assert_string_equal(p->root->limits[0].description, "partition cap");
    assert_int_equal(p->root->limits[0].n_users, 1);
    assert_string_equal(p->root->limits[0].users[0], "*");
    assert_int_equal(p->root->limits[0].line, 4);
    /* other queues keep only their own */
    assert_int_equal(kq_config_queue(p, "root.prod")->n_limits, 0);
    kq_config_unref(cfg);

    /* equal partition and root limits: one copy on root */
    cfg = load_ok("partitions:\n"
                  "  - limits: [{limit: a, users: [bob], maxresources: {memory: 1Gi}}]\n"
                  "    queues:\n"
                  "      - name: root\n"
                  "        limits: [{limit: a, users: [bob], maxresources: {memory: 1Gi}}]\n");
    p = kq_config_partition(cfg, "default");
    assert_int_equal(p->n_limits, 1);
    assert_int_equal(p->root->n_limits, 1);
    assert_true(p->root->limits[0].has_max_resources);
    assert_int_equal(kq_resource_get(&p->root->limits[0].max_resources, "memory", NULL),
                     1LL << 30);
    kq_config_unref(cfg);
}

static void test_root_inserted(void **state)
{
    (void)state;
    kq_config_t *cfg = load_ok("partitions:\n"
                               "  - name: gpu\n"
                               "    queues:\n"
                               "      - name: a\n"
                               "      - name: b\n"
                               "        queues: [{name: c}]\n");
    const kq_partition_conf_t *p = kq_config_partition(cfg, "GPU");
    assert_non_null(p);
    assert_string_equal(p->root->path, "root");
    assert_int_equal(p->root->n_children, 2);
    assert_non_null(kq_config_queue(p, "root.a"));
    assert_non_null(kq_config_queue(p, "root.b.c"));
    assert_true(kq_config_queue(p, "root.b")->is_parent);
    assert_int_equal(p->n_queues, 4);
    kq_config_unref(cfg);
}

static void test_all_errors_reported(void **state)
{
    (void)state;
    const char *yaml = "partitions:\n"
                       "  - name: default\n"
                       "    queues:\n"
                       "      - name: root\n"
                       "        queues:\n"
                       "          - name: bad name\n"
                       "          - name: ok\n"
                       "            resources:\n"
                       "              max: {memory: 1Gi}\n"
                       "            limits:\n"
                       "              - limit: big\n"
                       "                users: [alice]\n"
                       "                maxresources: {memory: 2Gi}\n"
                       "              - limit: nothing\n"
                       "                users: [bob]\n";
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    int rc = kq_config_load_buffer(yaml, strlen(yaml), "x.yaml", &cfg, &d);
    assert_int_equal(rc, KQ_EPARSE);
    assert_null(cfg);
    assert_int_equal(d.n, 3);
    char buf[512];
    kq_diag_format(&d.v[0], buf, sizeof(buf));
    assert_string_equal(buf, "x.yaml:6:19: root: invalid queue name 'bad name': use 1 to 64 "
                             "of a-z A-Z 0-9 _ : # / @ -");
    kq_diag_format(&d.v[1], buf, sizeof(buf));
    assert_string_equal(buf, "x.yaml:11:17: root.ok: limit 'big': maxresources memory 2Gi "
                             "exceeds queue max 1Gi");
    assert_int_equal(d.v[2].line, 14);
    assert_string_equal(d.v[2].where, "root.ok: limit 'nothing'");
    kq_diags_free(&d);
}

static void test_empty_and_example(void **state)
{
    (void)state;
    kq_config_t *cfg = load_ok("# nothing\n");
    assert_int_equal(kq_config_partition_count(cfg), 0);
    assert_null(kq_config_partition(cfg, "default"));
    kq_config_unref(cfg);

    /* examples/queues.yaml is used by make run and the end-to-end tests */
    char path[512];
    snprintf(path, sizeof(path), "%s/../../examples/queues.yaml", data_dir());
    kq_diags_t d;
    kq_diags_init(&d);
    int rc = kq_config_load_file(path, &cfg, &d);
    if (rc != 0)
        print_diags(path, &d);
    assert_int_equal(rc, 0);
    const kq_partition_conf_t *p = kq_config_partition(cfg, "default");
    assert_non_null(p);
    assert_non_null(kq_config_queue(p, "root.dev.team-a"));
    assert_non_null(kq_config_queue(p, "root.dev.team-b"));
    assert_non_null(kq_config_queue(p, "root.prod"));
    assert_non_null(kq_config_queue(p, "root.default"));
    kq_config_unref(cfg);
    kq_diags_free(&d);
}

static void test_refcount_and_holder(void **state)
{
    (void)state;
    kq_config_t *a = load_ok(TREE);
    kq_config_t *b = load_ok("partitions: [{queues: [{name: root}]}]\n");
    kq_config_holder_t *h = kq_config_holder_new(a);
    assert_non_null(h);
    kq_config_unref(a); /* the holder keeps it alive */

    kq_config_t *got = kq_config_holder_get(h);
    assert_ptr_equal(got, a);
    const kq_partition_conf_t *p = kq_config_partition(got, "default");
    kq_config_holder_swap(h, b);
    kq_config_unref(b);
    /* the reader's reference still keeps the old snapshot readable */
    assert_string_equal(kq_config_queue(p, "root.dev.team-a")->path, "root.dev.team-a");
    kq_config_unref(got);

    got = kq_config_holder_get(h);
    assert_ptr_equal(got, b);
    assert_ptr_equal(kq_config_ref(got), b);
    kq_config_unref(got);
    kq_config_unref(got);
    kq_config_holder_swap(h, NULL);
    assert_null(kq_config_holder_get(h));
    kq_config_holder_free(h);
    kq_config_holder_free(NULL);
    kq_config_unref(NULL);

    kq_config_holder_t *e = kq_config_holder_new(NULL);
    assert_null(kq_config_holder_get(e));
    kq_config_holder_free(e);
}

/* Runs check-config with stdout/stderr redirected to temp files. */
static int run_check(int argc, char **argv, char **out, char **err)
{
    char o[] = "/tmp/kqcfg-outXXXXXX", e[] = "/tmp/kqcfg-errXXXXXX";
    int fo = mkstemp(o), fe = mkstemp(e);
    assert_true(fo >= 0 && fe >= 0);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    dup2(fo, 1);
    dup2(fe, 2);
    int rc = kq_config_check_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    close(fo);
    close(fe);
    *out = slurp(o);
    *err = slurp(e);
    unlink(o);
    unlink(e);
    return rc;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* preemption.quotapreemptionenabled and the queue property quota.preemption.delay are read
 * (elastic.c's reclaim acts on them, issue 16): kept in the partition, no "not used" warning. */
static void test_quota_preemption_read(void **state)
{
    (void)state;
    static const char on[] = "partitions:\n  - name: default\n    preemption:\n      quotapreemptionenabled: true\n"
                             "    queues:\n      - name: root\n        properties:\n"
                             "          quota.preemption.delay: 30s\n";
    static const char off[] = "partitions:\n  - name: default\n    preemption:\n      quotapreemptionenabled: false\n"
                              "    queues:\n      - name: root\n";
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    assert_int_equal(kq_config_load_buffer(on, strlen(on), "q.yaml", &cfg, &d), 0);
    assert_int_equal(kq_config_warning_count(cfg), 0);
    assert_true(kq_config_partition(cfg, "default")->quota_preemption_enabled);
    kq_config_unref(cfg);
    cfg = NULL;
    assert_int_equal(kq_config_load_buffer(off, strlen(off), "q.yaml", &cfg, &d), 0);
    assert_int_equal(kq_config_warning_count(cfg), 0);
    assert_false(kq_config_partition(cfg, "default")->quota_preemption_enabled);
    kq_config_unref(cfg);
    kq_diags_free(&d);
}

/* The admission gate's properties are read (gating.c): no "not used" warning; a usage policy
 * with no resources.max on a leaf's path falls back to cpu, which the load says (naming the
 * leaf), once per such leaf. */
static void test_gating_properties(void **state)
{
    (void)state;
    static const char capped[] = "partitions:\n  - name: default\n    queues:\n      - name: root\n"
                                 "        properties: {kubequota.io/gating.policy: usage, kubequota.io/gating.halflife: 24h,\n"
                                 "                     kubequota.io/gating.weight.user.alice: \"2\"}\n"
                                 "        queues:\n          - name: batch\n"
                                 "            resources: {max: {vcore: 64}}\n"
                                 "            queues:\n              - name: a\n              - name: b\n";
    static const char uncapped[] = "partitions:\n  - name: default\n    queues:\n      - name: root\n"
                                   "        properties: {kubequota.io/gating.policy: usage}\n"
                                   "        queues:\n          - name: a\n"
                                   "          - name: b\n            resources: {max: {memory: 8Gi}}\n"
                                   "          - name: c\n            properties: {kubequota.io/gating.policy: fair}\n";
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    assert_int_equal(kq_config_load_buffer(capped, strlen(capped), "q.yaml", &cfg, &d), 0);
    assert_int_equal(kq_config_warning_count(cfg), 0);
    kq_config_unref(cfg);
    cfg = NULL;
    kq_diags_free(&d);
    kq_diags_init(&d);
    assert_int_equal(kq_config_load_buffer(uncapped, strlen(uncapped), "q.yaml", &cfg, &d), 0);
    assert_int_equal(kq_config_warning_count(cfg), 1); /* root.a only: b is capped, c is fair */
    assert_non_null(strstr(kq_config_warning_at(cfg, 0), "root.a: kubequota.io/gating.policy: usage, but no "
                                                          "resources.max on this queue's path"));
    kq_config_unref(cfg);
    kq_diags_free(&d);
}

static void test_check_config(void **state)
{
    (void)state;
    char dir[] = "/tmp/kqcfg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char good[128], bad[128], missing[128];
    snprintf(good, sizeof(good), "%s/good.yaml", dir);
    snprintf(bad, sizeof(bad), "%s/bad.yaml", dir);
    snprintf(missing, sizeof(missing), "%s/missing.yaml", dir);
    write_file(good, TREE);
    write_file(bad, "partitions:\n"
                    "  - queues:\n"
                    "      - name: root\n"
                    "        queues:\n"
                    "          - name: a\n"
                    "            maxapplications: 2\n"
                    "            limits:\n"
                    "              - limit: x\n"
                    "                users: [alice]\n"
                    "                maxapplications: 3\n"
                    "          - name: A\n");
    char *out, *err;
    char *args_good[] = {"check-config", good, NULL};
    assert_int_equal(run_check(2, args_good, &out, &err), 0);
    assert_non_null(strstr(out, "1 partition(s), 4 queue(s), 2 limit(s)"));
    assert_null(strchr(out, '\n') == out + strlen(out) - 1 ? NULL : "more than one line");
    /* a setting kubequota accepts but does not act on is a warning naming the key, one line,
     * on stderr (the file is still valid: exit 0) */
    char want_warn[256];
    snprintf(want_warn, sizeof(want_warn), "warning: %s:16:17: root.dev.team-a: properties.application.sort.policy "
             "is not used by kubequota (shown in the queue view only)\n", good);
    assert_string_equal(err, want_warn);
    free(out);
    free(err);

    char *args_bad[] = {"check-config", bad, NULL};
    assert_int_equal(run_check(2, args_bad, &out, &err), 1);
    assert_string_equal(out, "");
    char want1[256], want2[256];
    snprintf(want1, sizeof(want1),
             "%s:8:17: root.a: limit 'x': maxapplications 3 exceeds the queue's "
             "maxapplications 2\n", bad);
    snprintf(want2, sizeof(want2), "%s:11:19: root: duplicate queue name 'a'", bad);
    assert_non_null(strstr(err, want1));
    assert_non_null(strstr(err, want2));
    size_t lines = 0;
    for (const char *s = err; *s; s++)
        lines += *s == '\n';
    assert_int_equal(lines, 2);
    free(out);
    free(err);

    char *args_missing[] = {"check-config", missing, NULL};
    assert_int_equal(run_check(2, args_missing, &out, &err), 2);
    assert_non_null(strstr(err, "missing.yaml"));
    free(out);
    free(err);

    char *args_none[] = {"check-config", NULL};
    assert_int_equal(run_check(1, args_none, &out, &err), 2);
    assert_non_null(strstr(err, "usage"));
    free(out);
    free(err);

    char *args_many[] = {"check-config", good, bad, NULL};
    assert_int_equal(run_check(3, args_many, &out, &err), 2);
    free(out);
    free(err);

    char *args_dir[] = {"check-config", dir, NULL};
    assert_int_equal(run_check(2, args_dir, &out, &err), 2);
    free(out);
    free(err);

    unlink(good);
    unlink(bad);
    rmdir(dir);
}

static void test_size_and_garbage(void **state)
{
    (void)state;
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    size_t big = (8u << 20) + 1;
    char *buf = malloc(big);
    assert_non_null(buf);
    memset(buf, '#', big);
    assert_int_equal(kq_config_load_buffer(buf, big, "big.yaml", &cfg, &d), KQ_EPARSE);
    assert_null(cfg);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].text, "too large"));
    kq_diags_free(&d);
    free(buf);

    /* binary junk and odd shapes never crash and never succeed */
    static const char *const junk[] = {
        "\x01\x02\xff\xfe", "- a\n- b\n", "partitions: 3\n", "partitions: [1, [2]]\n",
        "partitions:\n  - queues: [[1]]\n", "partitions:\n  - queues: [{name: [x]}]\n",
        "partitions:\n  - queues: &a [{name: root, queues: *a}]\n", "{[1]: 2}\n",
        "partitions:\n  - queues:\n      - name: root\n        limits: [{users: {a: b}}]\n",
    };
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        kq_diags_init(&d);
        cfg = NULL;
        assert_int_equal(kq_config_load_buffer(junk[i], strlen(junk[i]), "j.yaml", &cfg, &d),
                         KQ_EPARSE);
        assert_null(cfg);
        assert_true(d.n >= 1);
        kq_diags_free(&d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_files),
        cmocka_unit_test(test_invalid_files),
        cmocka_unit_test(test_serve_refuses_files),
        cmocka_unit_test(test_tree_and_lookup),
        cmocka_unit_test(test_partition_limits_on_root),
        cmocka_unit_test(test_root_inserted),
        cmocka_unit_test(test_all_errors_reported),
        cmocka_unit_test(test_empty_and_example),
        cmocka_unit_test(test_refcount_and_holder),
        cmocka_unit_test(test_gating_properties),
        cmocka_unit_test(test_check_config),
        cmocka_unit_test(test_quota_preemption_read),
        cmocka_unit_test(test_size_and_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
