/* Unit tests for the metrics module: the exposition is parsed back line by line with an
 * independent parser (metric name, labels with escapes, value), and the numbers are
 * compared with what the test recorded: counters, cumulative histogram buckets with
 * consistent _count/_sum, label escaping, usage gauges from the ugm, concurrent updates.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>
#include <pthread.h>

#include <cmocka.h>

#include "kubequota/app.h"
#include "kubequota/engine/config.h"
#include "kubequota/control/ledger.h"
#include "kubequota/base/log.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/engine/ugm.h"

/* ------------------------------------------------------------------ exposition parser */

#define MAX_LABELS 8
#define MAX_SAMPLES 4096

typedef struct sample {
    char name[128];
    int n_labels;
    char key[MAX_LABELS][64];
    char val[MAX_LABELS][256];
    double value;
} sample_t;

typedef struct expo {
    sample_t *s;
    int n;
    char types[64][128]; /* families with a TYPE line, in order */
    char type_of[64][16];
    int n_types;
} expo_t;

static bool name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

/* Parses one sample line; fails the test on any syntax error. */
static void parse_sample(const char *line, sample_t *s)
{
    memset(s, 0, sizeof(*s));
    const char *p = line;
    size_t n = 0;
    if (!name_start(*p))
        fail_msg("bad metric name in line: %s", line);
    while (name_char(*p)) {
        assert_true(n + 1 < sizeof(s->name));
        s->name[n++] = *p++;
    }
    if (*p == '{') {
        p++;
        while (*p != '}') {
            assert_true(s->n_labels < MAX_LABELS);
            int k = s->n_labels++;
            size_t kn = 0;
            if (!name_start(*p))
                fail_msg("bad label name in line: %s", line);
            while (name_char(*p))
                s->key[k][kn++] = *p++;
            if (p[0] != '=' || p[1] != '"')
                fail_msg("expected =\" in line: %s", line);
            p += 2;
            size_t vn = 0;
            while (*p != '"') {
                char c = *p++;
                if (c == '\0' || c == '\n')
                    fail_msg("unterminated label value in line: %s", line);
                if (c == '\\') {
                    c = *p++;
                    if (c == 'n')
                        c = '\n';
                    else if (c != '\\' && c != '"')
                        fail_msg("bad escape in line: %s", line);
                }
                assert_true(vn + 1 < sizeof(s->val[k]));
                s->val[k][vn++] = c;
            }
            p++;
            if (*p == ',')
                p++;
            else if (*p != '}')
                fail_msg("expected , or } in line: %s", line);
        }
        p++;
    }
    if (*p != ' ')
        fail_msg("expected a space before the value in line: %s", line);
    p++;
    char *end;
    if (strcmp(p, "+Inf") == 0) {
        s->value = INFINITY;
        return;
    }
    s->value = strtod(p, &end);
    if (end == p || *end != '\0')
        fail_msg("bad value in line: %s", line);
}

/* Parses the whole text; checks HELP/TYPE come before their family's samples and that a
 * family's samples are contiguous. */
static void parse(const char *text, expo_t *e)
{
    memset(e, 0, sizeof(*e));
    e->s = calloc(MAX_SAMPLES, sizeof(sample_t));
    assert_non_null(e->s);
    assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
    char *copy = strdup(text), *save = NULL;
    const char *current = NULL; /* family of the last TYPE line */
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# HELP ", 7) == 0)
            continue;
        if (strncmp(line, "# TYPE ", 7) == 0) {
            assert_true(e->n_types < 64);
            char fam[128], type[16];
            assert_int_equal(sscanf(line + 7, "%127s %15s", fam, type), 2);
            for (int i = 0; i < e->n_types; i++)
                if (strcmp(e->types[i], fam) == 0)
                    fail_msg("family %s declared twice", fam);
            assert_true(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0 || strcmp(type, "histogram") == 0);
            strcpy(e->types[e->n_types], fam);
            strcpy(e->type_of[e->n_types], type);
            current = e->types[e->n_types++];
            continue;
        }
        assert_true(line[0] != '#');
        assert_true(e->n < MAX_SAMPLES);
        sample_t *s = &e->s[e->n++];
        parse_sample(line, s);
        /* the sample belongs to the current family (histograms: _bucket/_sum/_count) */
        assert_non_null(current);
        size_t fl = strlen(current);
        if (strncmp(s->name, current, fl) != 0 ||
            !(s->name[fl] == '\0' || strcmp(s->name + fl, "_bucket") == 0 || strcmp(s->name + fl, "_sum") == 0 ||
              strcmp(s->name + fl, "_count") == 0))
            fail_msg("sample %s outside its family (current %s)", s->name, current);
    }
    free(copy);
}

static const char *label(const sample_t *s, const char *key)
{
    for (int i = 0; i < s->n_labels; i++)
        if (strcmp(s->key[i], key) == 0)
            return s->val[i];
    return NULL;
}

/* The value of the sample `name` whose labels include all given pairs; -1 if absent. */
static double find(const expo_t *e, const char *name, ...)
{
    const char *k[8], *v[8];
    int n = 0;
    va_list ap;
    va_start(ap, name);
    for (const char *key; (key = va_arg(ap, const char *)) != NULL && n < 8; n++) {
        k[n] = key;
        v[n] = va_arg(ap, const char *);
    }
    va_end(ap);
    for (int i = 0; i < e->n; i++) {
        if (strcmp(e->s[i].name, name) != 0)
            continue;
        bool ok = true;
        for (int j = 0; j < n && ok; j++) {
            const char *have = label(&e->s[i], k[j]);
            ok = have != NULL && strcmp(have, v[j]) == 0;
        }
        if (ok)
            return e->s[i].value;
    }
    return -1;
}

static char *render(kq_metrics_t *m, kq_app_t *app)
{
    size_t len = 0;
    char *t = kq_metrics_render(m, app, &len);
    assert_non_null(t);
    assert_int_equal(len, strlen(t));
    return t;
}

/* ------------------------------------------------------------------ tests */

static void test_counters(void **state)
{
    (void)state;
    kq_metrics_t *m = kq_metrics_new();
    for (int i = 0; i < 3; i++)
        kq_metrics_decision(m, KQ_VERB_FILTER, KQ_RESULT_DENIED);
    kq_metrics_decision(m, KQ_VERB_BIND, KQ_RESULT_ALLOWED);
    kq_metrics_decision(m, (kq_verb_t)99, KQ_RESULT_ALLOWED); /* ignored */
    kq_metrics_config_reload(m, true);
    kq_metrics_config_reload(m, false);
    kq_metrics_config_reload(m, false);
    kq_metrics_watch_restart(m);
    char *t = render(m, NULL);
    expo_t e;
    parse(t, &e);
    assert_true(find(&e, "kubequota_decisions_total", "verb", "filter", "result", "denied", NULL) == 3);
    assert_true(find(&e, "kubequota_decisions_total", "verb", "bind", "result", "allowed", NULL) == 1);
    assert_true(find(&e, "kubequota_decisions_total", "verb", "filter", "result", "allowed", NULL) == 0);
    assert_true(find(&e, "kubequota_config_reloads_total", "result", "success", NULL) == 1);
    assert_true(find(&e, "kubequota_config_reloads_total", "result", "failure", NULL) == 2);
    assert_true(find(&e, "kubequota_watch_restarts_total", NULL) == 1);
    assert_int_equal(kq_metrics_decision_count(m, KQ_VERB_FILTER, KQ_RESULT_DENIED), 3);
    /* every family is typed */
    const char *families[] = {"kubequota_decisions_total", "kubequota_request_duration_seconds",
                              "kubequota_watch_restarts_total", "kubequota_config_reloads_total"};
    for (size_t i = 0; i < 4; i++) {
        bool found = false;
        for (int j = 0; j < e.n_types; j++)
            found |= strcmp(e.types[j], families[i]) == 0;
        assert_true(found);
    }
    free(e.s);
    free(t);
    kq_metrics_free(m);
}

static void test_histogram(void **state)
{
    (void)state;
    kq_metrics_t *m = kq_metrics_new();
    kq_metrics_latency(m, KQ_EP_FILTER, 0.00001);  /* <= 5e-05 */
    kq_metrics_latency(m, KQ_EP_FILTER, 0.00005);  /* exactly the first bound: <= 5e-05 */
    kq_metrics_latency(m, KQ_EP_FILTER, 0.0003);   /* <= 0.0005 */
    kq_metrics_latency(m, KQ_EP_FILTER, 2.0);      /* <= 2.5 */
    kq_metrics_latency(m, KQ_EP_FILTER, 11.0);     /* over the 10s extender timeout: only +Inf */
    kq_metrics_latency(m, KQ_EP_FILTER, -1.0);     /* clamped to 0 */
    kq_metrics_latency(m, KQ_EP_BIND, 0.7);        /* <= 1 */
    char *t = render(m, NULL);
    expo_t e;
    parse(t, &e);
    const char *ep = "/scheduler/filter";
    const char *B = "kubequota_request_duration_seconds_bucket";
    assert_true(find(&e, B, "endpoint", ep, "le", "5e-05", NULL) == 3);
    assert_true(find(&e, B, "endpoint", ep, "le", "0.00025", NULL) == 3);
    assert_true(find(&e, B, "endpoint", ep, "le", "0.0005", NULL) == 4);
    assert_true(find(&e, B, "endpoint", ep, "le", "1", NULL) == 4);
    assert_true(find(&e, B, "endpoint", ep, "le", "2.5", NULL) == 5);
    assert_true(find(&e, B, "endpoint", ep, "le", "10", NULL) == 5);
    assert_true(find(&e, B, "endpoint", ep, "le", "+Inf", NULL) == 6);
    assert_true(find(&e, "kubequota_request_duration_seconds_count", "endpoint", ep, NULL) == 6);
    double sum = find(&e, "kubequota_request_duration_seconds_sum", "endpoint", ep, NULL);
    assert_true(fabs(sum - 13.00036) < 1e-6);
    assert_true(find(&e, B, "endpoint", "/scheduler/bind", "le", "0.5", NULL) == 0);
    assert_true(find(&e, B, "endpoint", "/scheduler/bind", "le", "1", NULL) == 1);
    assert_int_equal(kq_metrics_latency_count(m, KQ_EP_FILTER), 6);

    /* for every endpoint: buckets ascend in le and in count, +Inf last and equal to _count */
    for (int k = 0; k < KQ_EP_COUNT; k++) {
        const char *name = kq_endpoint_name((kq_endpoint_t)k);
        double last_le = -1, last_count = 0;
        int buckets = 0;
        for (int i = 0; i < e.n; i++) {
            const sample_t *s = &e.s[i];
            if (strcmp(s->name, B) != 0 || strcmp(label(s, "endpoint"), name) != 0)
                continue;
            const char *le = label(s, "le");
            double lev = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);
            assert_true(lev > last_le);
            assert_true(s->value >= last_count);
            last_le = lev;
            last_count = s->value;
            buckets++;
        }
        assert_int_equal(buckets, 18); /* 17 bounds up to 10s, then +Inf */
        assert_true(isinf(last_le));
        assert_true(find(&e, "kubequota_request_duration_seconds_count", "endpoint", name, NULL) == last_count);
        assert_true(find(&e, B, "endpoint", name, "le", "5e-05", NULL) >= 0);
    }
    free(e.s);
    free(t);
    kq_metrics_free(m);
}

typedef struct worker_arg {
    kq_metrics_t *m;
} worker_arg_t;

static void *worker(void *p)
{
    worker_arg_t *a = p;
    for (int i = 0; i < 10000; i++) {
        kq_metrics_decision(a->m, KQ_VERB_BIND, KQ_RESULT_ERROR);
        kq_metrics_latency(a->m, KQ_EP_BIND, 0.001);
    }
    return NULL;
}

static void test_concurrent_updates(void **state)
{
    (void)state;
    kq_metrics_t *m = kq_metrics_new();
    worker_arg_t a = {m};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, worker, &a);
    char *t = render(m, NULL); /* rendering while updating is fine */
    free(t);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(kq_metrics_decision_count(m, KQ_VERB_BIND, KQ_RESULT_ERROR), 40000);
    t = render(m, NULL);
    expo_t e;
    parse(t, &e);
    assert_true(find(&e, "kubequota_request_duration_seconds_count", "endpoint", "/scheduler/bind", NULL) == 40000);
    double sum = find(&e, "kubequota_request_duration_seconds_sum", "endpoint", "/scheduler/bind", NULL);
    assert_true(fabs(sum - 40.0) < 1e-6);
    free(e.s);
    free(t);
    kq_metrics_free(m);
}

static void test_null_registry(void **state)
{
    (void)state;
    kq_metrics_decision(NULL, KQ_VERB_FILTER, KQ_RESULT_ALLOWED);
    kq_metrics_latency(NULL, KQ_EP_FILTER, 1);
    kq_metrics_free(NULL);
    char *t = render(NULL, NULL);
    expo_t e;
    parse(t, &e);
    assert_true(find(&e, "kubequota_decisions_total", "verb", "filter", "result", "allowed", NULL) == 0);
    free(e.s);
    free(t);
}

static const char QUEUES_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: team-a\n"
    "            limits:\n"
    "              - limit: dev group\n"
    "                groups: [dev]\n"
    "                maxapplications: 10\n";

/* Usage gauges come from the ugm views; odd names are escaped and parse back intact. */
static void test_usage_gauges_and_escaping(void **state)
{
    (void)state;
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    assert_int_equal(kq_config_load_buffer(QUEUES_YAML, strlen(QUEUES_YAML), "t.yaml", &cfg, &d), 0);
    kq_diags_free(&d);
    kq_app_t app = {.partition = "default", .scheduler_name = "s", .default_user = "nobody"};
    atomic_init(&app.ready, false);
    app.ugm = kq_ugm_new("default");
    assert_int_equal(kq_ugm_set_config(app.ugm, cfg), 0);
    app.ledger = kq_ledger_new(app.ugm, "s");
    app.metrics = kq_metrics_new();

    const char *weird = "we\"ird\\name\nx";
    const char *groups[] = {"dev"};
    kq_user_t u1 = {.name = weird, .groups = groups, .n_groups = 1};
    kq_user_t u2 = {.name = "alice", .groups = groups, .n_groups = 1};
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&r, "cpu", 1500), 0);
    assert_int_equal(kq_resource_set(&r, "memory", 1024), 0);
    char reason[256];
    assert_int_equal(kq_ugm_increase(app.ugm, "root.team-a", "app-1", &u1, &r, reason, sizeof(reason), NULL), 0);
    assert_int_equal(kq_ugm_increase(app.ugm, "root.team-a", "app-2", &u2, &r, reason, sizeof(reason), NULL), 0);
    assert_int_equal(kq_ugm_increase(app.ugm, "root.team-a", "app-2", &u2, &r, reason, sizeof(reason), NULL), 0);

    char *t = render(app.metrics, &app);
    expo_t e;
    parse(t, &e);
    const char *U = "kubequota_user_resource_used";
    /* cpu in cores (1500m = 1.5), memory in bytes */
    assert_true(find(&e, U, "user", weird, "queue", "root.team-a", "resource", "cpu", NULL) == 1.5);
    assert_true(find(&e, U, "user", weird, "queue", "root", "resource", "memory", NULL) == 1024);
    assert_true(find(&e, U, "user", "alice", "queue", "root.team-a", "resource", "cpu", NULL) == 3);
    assert_true(find(&e, "kubequota_user_running_applications", "user", "alice", "queue", "root.team-a", NULL) == 1);
    /* a user group has its own label, never confused with a quota group */
    assert_true(find(&e, "kubequota_user_group_resource_used", "user_group", "dev", "queue", "root.team-a", "resource",
                     "cpu", NULL) == 4.5);
    assert_true(find(&e, "kubequota_queue_resource_used", "queue", "root.team-a", "resource", "cpu", NULL) == 4.5);
    assert_true(find(&e, "kubequota_queue_resource_used", "queue", "root", "resource", "cpu", NULL) == 4.5);
    assert_true(find(&e, "kubequota_queue_running_applications", "queue", "root.team-a", NULL) == 2);
    assert_true(find(&e, "kubequota_pods_tracked", "state", "counted", NULL) == 0);
    /* the escaped form is in the raw text */
    assert_non_null(strstr(t, "user=\"we\\\"ird\\\\name\\nx\""));
    free(e.s);
    free(t);

    assert_int_equal(kq_ugm_decrease(app.ugm, "root.team-a", "app-1", weird, &r), 0);
    t = render(app.metrics, &app);
    parse(t, &e);
    assert_true(find(&e, "kubequota_queue_resource_used", "queue", "root.team-a", "resource", "cpu", NULL) == 3);
    assert_true(find(&e, U, "user", weird, "queue", "root.team-a", "resource", "cpu", NULL) <= 0);
    free(e.s);
    free(t);

    kq_ledger_free(app.ledger);
    kq_ugm_free(app.ugm);
    kq_metrics_free(app.metrics);
    kq_config_unref(cfg);
}

/* --metrics-max-users: with more users than the limit, the ones using the most cpu (then
 * memory; ties by name) get series and the rest are counted as omitted; with no more than
 * the limit, every user. The users are ranked while the view streams past. */
static void test_top_users(void **state)
{
    (void)state;
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    assert_int_equal(kq_config_load_buffer(QUEUES_YAML, strlen(QUEUES_YAML), "t.yaml", &cfg, &d), 0);
    kq_diags_free(&d);
    kq_app_t app = {.partition = "default", .scheduler_name = "s", .default_user = "nobody"};
    atomic_init(&app.ready, false);
    app.ugm = kq_ugm_new("default");
    assert_int_equal(kq_ugm_set_config(app.ugm, cfg), 0);
    app.metrics = kq_metrics_new();
    /* 200 users: user-i uses (i * 37) % 200 + 1 millicores, and memory 1000 - i; users 0 and
     * 100 use the same cpu (1), ranked by memory */
    char reason[256];
    for (int i = 0; i < 200; i++) {
        char name[32], app_id[32];
        snprintf(name, sizeof(name), "user-%03d", i);
        snprintf(app_id, sizeof(app_id), "app-%d", i);
        const char *groups[] = {"g"};
        kq_user_t u = {.name = name, .groups = groups, .n_groups = 1};
        kq_resource_t r = KQ_RESOURCE_EMPTY;
        assert_int_equal(kq_resource_set(&r, "cpu", (i * 37) % 200 + 1), 0);
        assert_int_equal(kq_resource_set(&r, "memory", 1000 - i), 0);
        assert_int_equal(kq_ugm_increase(app.ugm, "root.team-a", app_id, &u, &r, reason, sizeof(reason), NULL), 0);
        kq_resource_free(&r);
    }
    const char *U = "kubequota_user_resource_used";
    kq_metrics_set_max_users(app.metrics, 3);
    char *t = render(app.metrics, &app);
    expo_t e;
    parse(t, &e);
    int shown = 0;
    for (int i = 0; i < 200; i++) {
        char name[32];
        snprintf(name, sizeof(name), "user-%03d", i);
        double v = find(&e, U, "user", name, "queue", "root", "resource", "cpu", NULL);
        int cpu = (i * 37) % 200 + 1;
        if (v >= 0) {
            shown++;
            assert_true(cpu >= 198); /* 200, 199 and 198 millicores */
        } else {
            assert_true(cpu < 198);
        }
    }
    assert_int_equal(shown, 3);
    assert_true(find(&e, "kubequota_users_omitted", NULL) == 197);
    free(e.s);
    free(t);

    kq_metrics_set_max_users(app.metrics, 500);
    t = render(app.metrics, &app);
    parse(t, &e);
    assert_true(find(&e, U, "user", "user-000", "queue", "root", "resource", "cpu", NULL) == 0.001);
    assert_true(find(&e, U, "user", "user-199", "queue", "root", "resource", "cpu", NULL) >= 0);
    assert_true(find(&e, "kubequota_users_omitted", NULL) == 0);
    free(e.s);
    free(t);

    kq_metrics_set_max_users(app.metrics, 0);
    t = render(app.metrics, &app);
    parse(t, &e);
    assert_true(find(&e, U, "user", "user-000", "queue", "root", "resource", "cpu", NULL) < 0);
    assert_true(find(&e, "kubequota_users_omitted", NULL) == 200);
    free(e.s);
    free(t);

    kq_ugm_free(app.ugm);
    kq_metrics_free(app.metrics);
    kq_config_unref(cfg);
}

int main(void)
{
    kq_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_concurrent_updates),
        cmocka_unit_test(test_null_registry),
        cmocka_unit_test(test_usage_gauges_and_escaping),
        cmocka_unit_test(test_top_users),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
