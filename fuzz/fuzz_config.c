/* libFuzzer target for the queue configuration parser and validator: any bytes are loaded
 * as a queues.yaml. Nothing may crash, leak or trip the sanitizers; a rejected file must
 * come with at least one diagnostic, and an accepted one must answer lookups of its own
 * queues, and its limits and ACLs must apply to a usage tracker that then counts, checks,
 * releases and renders without trouble.
 *
 *   make fuzz FUZZ_SECONDS=60     (runs every target; this one seeds from fuzz/corpus/config)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/log.h"
#include "kubequota/engine/placement.h"
#include "kubequota/engine/ugm.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    kq_log_level_current = -1; /* silence: the fuzzer's own output is what matters */
    return 0;
}

static void walk(const kq_partition_conf_t *p, const kq_queue_conf_t *q)
{
    if (kq_config_queue(p, q->path) != q)
        abort(); /* every queue must be found by its own path */
    for (size_t i = 0; i < q->n_children; i++)
        walk(p, q->children[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    int rc = kq_config_load_buffer((const char *)data, size, "fuzz.yaml", &cfg, &d);
    if (rc != 0) {
        if (d.n == 0 || cfg != NULL)
            abort(); /* a rejection must say why and return nothing */
    } else {
        for (size_t i = 0; i < kq_config_partition_count(cfg); i++) {
            const kq_partition_conf_t *p = kq_config_partition_at(cfg, i);
            if (p->root != NULL)
                walk(p, p->root);
            /* an accepted rule set must run (filters, regexps, parents) without trouble */
            static const char *const groups[] = {"dev", "system:masters"};
            kq_tag_t tags[] = {{"namespace", "team-a"}, {"namespace.parentqueue", "root.dev"}};
            kq_place_in_t in = {.user = "alice.b", .groups = groups, .n_groups = 2, .provided = "q.x",
                                .tags = tags, .n_tags = 2};
            char *q = NULL, why[256];
            if (kq_placement_place(p, &in, &q, why, sizeof(why), NULL) == 0) {
                if (q == NULL || strncmp(q, "root", 4) != 0)
                    abort();
                (void)kq_placement_template(p, q);
            }
            free(q);
            json_decref(kq_placement_rules_json(p));
            for (size_t w = 0; w < kq_config_warning_count(cfg); w++)
                if (kq_config_warning_at(cfg, w) == NULL)
                    abort();
        }
        /* the limits and submitacl/adminacl strings, as the ugm parses and applies them */
        kq_ugm_t *m = kq_ugm_new("default");
        if (m != NULL && kq_ugm_set_config(m, cfg) == 0) {
            static const char *const ug[] = {"dev", "*"};
            kq_user_t u = {.name = "alice", .groups = ug, .n_groups = 2};
            kq_resource_t r = KQ_RESOURCE_EMPTY;
            char why[512];
            if (kq_resource_set(&r, "cpu", 100) != 0)
                abort();
            (void)kq_ugm_check(m, "root.a", "app", &u, &r, why, sizeof(why), NULL);
            if (kq_ugm_increase(m, "root.a", "app", &u, &r, why, sizeof(why), NULL) == 0 &&
                kq_ugm_decrease(m, "root.a", "app", "bob", &r) != 0)
                abort(); /* released from the application's owner, whoever's pod it was */
            json_decref(kq_ugm_users_json(m));
            json_decref(kq_ugm_groups_json(m));
            json_decref(kq_ugm_queues_json(m));
            if (kq_ugm_user_count(m) != 0)
                abort();
        }
        kq_ugm_free(m);
        char buf[128];
        kq_config_summary(cfg, buf, sizeof(buf));
        /* serve's own rule: refused exactly when the partition is missing, with a reason */
        size_t before = d.n;
        int prc = kq_config_check_partition(cfg, "default", "fuzz.yaml", &d);
        if ((prc == 0) != (kq_config_partition(cfg, "default") != NULL) ||
            (prc == KQ_EPARSE && d.n != before + 1))
            abort();
        kq_config_unref(cfg);
    }
    char *all = kq_diags_join(&d, "\n");
    free(all);
    kq_diags_free(&d);
    return 0;
}
