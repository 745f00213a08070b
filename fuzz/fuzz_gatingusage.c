/* libFuzzer target for the usage-history document the admission gate keeps in a ConfigMap
 * (anyone who may edit that ConfigMap writes its input): kq_fairshare_load_text().
 *
 * Checked beyond "no crash" (ASan + UBSan):
 *   - a refused document gives KQ_EPARSE or KQ_ERANGE with a reason, merges nothing and
 *     leaves the state exactly as it was (its dump is unchanged);
 *   - an accepted one merges by maximum: no average it held before goes down, and the
 *     dump written afterwards is itself accepted (a round trip never produces a document
 *     the loader refuses).
 *
 *   make build/fuzz/fuzz_gatingusage && build/fuzz/fuzz_gatingusage -max_total_time=60 fuzz/corpus/gatingusage
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/base/error.h"
#include "kubequota/base/log.h"
#include "kubequota/engine/fairshare.h"

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const double NOW = 1795000000.0;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    kq_log_set_level("error");
    return 0;
}

static char *dump_text(kq_fairshare_t *fs)
{
    json_t *d = kq_fairshare_dump(fs, NOW, NULL);
    CHECK(d != NULL);
    json_object_del(d, "updated");
    char *s = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(d);
    CHECK(s != NULL);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_fairshare_t *fs = kq_fairshare_new(3600);
    CHECK(fs != NULL);
    CHECK(kq_fairshare_set_halflife(fs, "root.a", 3600, NOW - 7200) == 0); /* tracked: keeps history */
    kq_resource_t req = KQ_RESOURCE_EMPTY;
    CHECK(kq_resource_set(&req, "cpu", 1500) == 0);
    kq_fairshare_change(fs, "root.a", "alice", &req, +1, NOW - 7200);
    kq_fairshare_change(fs, "root.a", "alice", &req, -1, NOW - 3600);
    char *before = dump_text(fs);
    kq_resource_t avg0 = KQ_RESOURCE_EMPTY;
    CHECK(kq_fairshare_get(fs, "root.a", "alice", NOW, NULL, &avg0) == 0);

    char err[512] = "";
    size_t merged = 7;
    int rc = kq_fairshare_load_text(fs, (const char *)data, size, NOW, &merged, err, sizeof err);
    if (rc != 0) {
        CHECK(rc == KQ_EPARSE || rc == KQ_ERANGE);
        CHECK(err[0] != '\0');
        CHECK(merged == 0);
        char *after = dump_text(fs);
        CHECK(strcmp(before, after) == 0);
        free(after);
    } else {
        kq_resource_t avg1 = KQ_RESOURCE_EMPTY;
        CHECK(kq_fairshare_get(fs, "root.a", "alice", NOW, NULL, &avg1) == 0);
        CHECK(kq_resource_get(&avg1, "cpu", NULL) >= kq_resource_get(&avg0, "cpu", NULL));
        kq_resource_free(&avg1);
        json_t *d = kq_fairshare_dump(fs, NOW, NULL);
        CHECK(d != NULL);
        char *text = json_dumps(d, JSON_COMPACT);
        json_decref(d);
        CHECK(text != NULL);
        kq_fairshare_t *b = kq_fairshare_new(3600);
        CHECK(b != NULL);
        CHECK(kq_fairshare_load_text(b, text, strlen(text), NOW, NULL, err, sizeof err) == 0);
        kq_fairshare_free(b);
        free(text);
    }
    kq_resource_free(&avg0);
    free(before);
    kq_resource_free(&req);
    kq_fairshare_free(fs);
    return 0;
}
