/* libFuzzer target for the informer's watch stream decoding (src/kube/kube.c): line framing
 * over arbitrary chunk boundaries, then each line as an event envelope ({"type", "object"})
 * with the object built through the pod filter (kq_pod_fields), the way the pod informer
 * reads a live stream. Input: byte 0 seeds where the stream is cut into chunks, byte 1
 * picks the longest line allowed (64 B .. 128 KiB), the rest is the stream.
 *
 * Enforced (any mismatch aborts):
 *   1. Nothing crashes, leaks or trips ASan/UBSan, whatever the bytes.
 *   2. Framing does not depend on chunking: the stream fed whole and fed in the chunks
 *      gives the same outcome and the same events, in order (type and built object).
 *   3. An event reaches the handler only as ADDED/MODIFIED/DELETED with an object that
 *      holds nothing the filter does not name.
 *   4. A document handler (kq_watch_handler_t.doc, what the pod informer uses) sees the
 *      same outcome and the same events as a jansson handler, chunked as in 2.
 *
 *   make build/fuzz/fuzz_watch && build/fuzz/fuzz_watch -max_total_time=60 fuzz/corpus/watch
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/kube/kube.h"
#include "kubequota/base/log.h"
#include "kubequota/kube/pod.h"

#include "fuzz.h"
#include "../tests/jdoc_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENTS 256

typedef struct seen {
    size_t n;
    int type[MAX_EVENTS];
    char *obj[MAX_EVENTS];
} seen_t;

/* Whether every member of v is named by keep (recursively, arrays filtered per element). */
static bool only_kept(const json_t *v, const kq_jfilter_t *keep)
{
    if (keep == NULL)
        return true;
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) if (!only_kept(e, keep)) return false;
        return true;
    }
    if (!json_is_object(v))
        return true;
    const char *k;
    const json_t *m;
    json_object_foreach((json_t *)v, k, m) {
        const kq_jfilter_t *f = keep;
        while (f->key != NULL && strcmp(f->key, k) != 0)
            f++;
        if (f->key == NULL || !only_kept(m, f->sub))
            return false;
    }
    return true;
}

static void record(void *ud, int type, json_t *obj)
{
    seen_t *s = ud;
    CHECK(type == KQ_WATCH_ADDED || type == KQ_WATCH_MODIFIED || type == KQ_WATCH_DELETED); /* 3 */
    CHECK(json_is_object(obj) && only_kept(obj, kq_pod_fields));
    if (s->n < MAX_EVENTS) {
        s->type[s->n] = type;
        s->obj[s->n] = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        CHECK(s->obj[s->n] != NULL);
    }
    s->n++;
}

static void record_doc(void *ud, int type, const kq_jnode_t *obj)
{
    CHECK(obj != NULL && jdoc_shape_ok(obj));
    json_t *j = jdoc_to_json(obj);
    CHECK(j != NULL);
    record(ud, type, j);
    json_decref(j);
}

static void seen_free(seen_t *s)
{
    for (size_t i = 0; i < s->n && i < MAX_EVENTS; i++)
        free(s->obj[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    kq_log_set_level("error");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint32_t rnd = data[0] * 2654435761u + 1;
    size_t max_line = (size_t)64 << (data[1] % 12);
    const char *text = (const char *)data + 2;
    size_t len = size - 2;

    size_t cuts[64], ncuts = 0, at = 0;
    while (ncuts < 64 && at < len) {
        rnd ^= rnd << 13;
        rnd ^= rnd >> 17;
        rnd ^= rnd << 5;
        at += 1 + rnd % (data[0] % 4 == 0 ? 3 : 97); /* some runs cut every few bytes */
        cuts[ncuts++] = at;
    }

    seen_t whole = {0}, chunked = {0}, docs = {0};
    kq_watch_handler_t h = {.object = record, .keep = kq_pod_fields};
    h.ud = &whole;
    int rw = kq_kube_watch_feed(&h, text, len, NULL, 0, max_line);
    h.ud = &chunked;
    int rc = kq_kube_watch_feed(&h, text, len, cuts, ncuts, max_line);
    kq_watch_handler_t hd = {.doc = record_doc, .keep = kq_pod_fields, .ud = &docs};
    int rd = kq_kube_watch_feed(&hd, text, len, cuts, ncuts, max_line);
    CHECK(rw == rc && rw == rd); /* 2, 4 */
    CHECK(rw == 0 || rw == KQ_EGONE || rw == KQ_EPARSE);
    CHECK(whole.n == chunked.n && whole.n == docs.n);
    for (size_t i = 0; i < whole.n && i < MAX_EVENTS; i++)
        CHECK(whole.type[i] == chunked.type[i] && strcmp(whole.obj[i], chunked.obj[i]) == 0 &&
              whole.type[i] == docs.type[i] && strcmp(whole.obj[i], docs.obj[i]) == 0);
    seen_free(&whole);
    seen_free(&chunked);
    seen_free(&docs);
    return 0;
}
