/* libFuzzer target for DRA ResourceClaims (kube/claim.c): the bytes are decoded (kq_jdoc)
 * and handed to kq_claim_parse, whole and through the informer's filter (kq_claim_fields),
 * and a parsed claim goes through the claim table. Nothing may crash, leak or trip the
 * sanitizers whatever the JSON shape, the filtered view must parse to the same claim (or
 * fail with the same reason) as the whole document, and a claim never charges a negative
 * count or more than KQ_CLAIM_MAX_REQUESTS * max(KQ_CLAIM_COUNT_MAX, KQ_CLAIM_ALL_MAX)
 * devices.
 *
 *   make build/fuzz/fuzz_claim && build/fuzz/fuzz_claim -max_total_time=60 fuzz/corpus/claim
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubequota/base/log.h"
#include "kubequota/control/claims.h"
#include "kubequota/kube/claim.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    (void)kq_log_set_level("error");
    return 0;
}

static bool same_strs(char **a, size_t na, char **b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

static void bounded(const kq_resource_t *r)
{
    for (uint32_t i = 0; i < r->n; i++) {
        int64_t v = KQ_RES_E(r)[i].value;
        if (v < 0 || v > (int64_t)KQ_CLAIM_MAX_REQUESTS * KQ_CLAIM_COUNT_MAX)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kq_jdoc_t whole, filtered; /* reused, as the informer reuses its own */
    static kq_claims_t *table;
    if (table == NULL)
        table = kq_claims_new();
    const char *text = (const char *)data;
    if (kq_jdoc_parse(&whole, text, size, NULL, NULL) != 0)
        return 0;
    if (kq_jdoc_parse(&filtered, text, size, kq_claim_fields, NULL) != 0)
        abort(); /* the filter never makes valid JSON invalid */
    kq_claim_t a, b;
    char ea[256] = "", eb[256] = "";
    int ra = kq_claim_parse(kq_jdoc_root(&whole), &a, ea, sizeof(ea));
    int rb = kq_claim_parse(kq_jdoc_root(&filtered), &b, eb, sizeof(eb));
    if (ra != rb || (ra != 0 && strcmp(ea, eb) != 0))
        abort();
    if (ra == 0) {
        if (strcmp(a.uid, b.uid) != 0 || strcmp(a.ns, b.ns) != 0 || strcmp(a.name, b.name) != 0 ||
            a.allocated != b.allocated || !kq_resource_equal(&a.may, &b.may) ||
            !kq_resource_equal(&a.alloc, &b.alloc) || (a.owner_pod == NULL) != (b.owner_pod == NULL) ||
            !same_strs(a.reserved, a.n_reserved, b.reserved, b.n_reserved))
            abort();
        bounded(&a.may);
        bounded(&a.alloc);
        char ns[300], name[300];
        snprintf(ns, sizeof(ns), "%s", a.ns);
        snprintf(name, sizeof(name), "%s", a.name);
        const char *first = a.n_reserved > 0 ? a.reserved[0] : NULL;
        char uid[300] = "";
        if (first != NULL)
            snprintf(uid, sizeof(uid), "%s", first);
        bool changed = false;
        if (kq_claims_put(table, &a, &changed) == 0) {
            kq_resource_t sum = KQ_RESOURCE_EMPTY;
            if (kq_claims_devices(table, ns, name, &sum) != 0 && strlen(ns) + strlen(name) < 400)
                abort();
            if (uid[0] != '\0' && strlen(ns) + strlen(name) < 400 &&
                kq_claims_reserved_index(table, ns, name, uid) != 0)
                abort();
            kq_resource_free(&sum);
            if (kq_claims_size(table, NULL) > 64) {
                kq_claims_resync_begin(table);
                (void)kq_claims_resync_end(table, NULL, NULL);
            }
        }
    }
    kq_claim_clear(&a);
    kq_claim_clear(&b);
    return 0;
}
