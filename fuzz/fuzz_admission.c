/* libFuzzer target for the admission webhooks: kq_admission_mutate() and
 * kq_admission_validate() on arbitrary bodies, with the default options and with
 * schedulerName stamping on and no trusted requesters.
 *
 * Checked beyond "no crash": the HTTP status is 200, 400 or 413 (or KQ_ENOMEM); the body
 * is NUL-terminated JSON of the length reported; a 200 answer is an AdmissionReview
 * response with a string uid and a boolean allowed; a denial carries a status message and
 * no patch; a patch is base64 of a JSON array whose operations apply, strictly and in
 * order, to request.object (every parent exists, replace/remove find their member).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude fuzz/fuzz_admission.c \
 *     src/serve/admission.c src/engine/config.c src/engine/resource.c src/base/error.c src/base/log.c \
 *     -ljansson -lyaml -lssl -lcrypto -lpthread -o /tmp/fuzz_admission
 *   /tmp/fuzz_admission -max_total_time=60 fuzz/corpus/admission
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "kubequota/serve/admission.h"
#include "kubequota/base/log.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Unescapes one JSON pointer segment [s, e) into a new string. */
static char *segment(const char *s, const char *e)
{
    char *r = malloc((size_t)(e - s) + 1), *w = r;
    CHECK(r != NULL);
    for (; s < e; s++) {
        if (*s == '~') {
            s++;
            CHECK(s < e && (*s == '0' || *s == '1'));
            *w++ = *s == '0' ? '~' : '/';
        } else {
            *w++ = *s;
        }
    }
    *w = '\0';
    return r;
}

static void apply(json_t *doc, const json_t *ops)
{
    CHECK(json_is_array(ops) && json_array_size(ops) > 0);
    size_t i;
    json_t *op;
    json_array_foreach(ops, i, op) {
        const char *kind = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        json_t *value = json_object_get(op, "value");
        CHECK(kind != NULL && path != NULL && path[0] == '/');
        json_t *parent = doc;
        const char *s = path + 1;
        for (const char *slash; (slash = strchr(s, '/')) != NULL; s = slash + 1) {
            char *k = segment(s, slash);
            parent = json_object_get(parent, k);
            free(k);
            CHECK(json_is_object(parent));
        }
        CHECK(json_is_object(parent));
        char *key = segment(s, s + strlen(s));
        json_t *cur = json_object_get(parent, key);
        if (strcmp(kind, "add") == 0) {
            CHECK(value != NULL);
            CHECK(json_object_set(parent, key, value) == 0);
        } else if (strcmp(kind, "replace") == 0) {
            CHECK(value != NULL && cur != NULL);
            CHECK(json_object_set(parent, key, value) == 0);
        } else {
            CHECK(strcmp(kind, "remove") == 0 && cur != NULL && value == NULL);
            json_object_del(parent, key);
        }
        free(key);
    }
}

static void check(int rc, char *out, size_t out_len, const uint8_t *data, size_t size)
{
    if (rc == KQ_ENOMEM)
        return;
    CHECK(rc == 200 || rc == 400 || rc == 413);
    CHECK(out != NULL && strlen(out) == out_len);
    json_t *body = json_loads(out, 0, NULL);
    CHECK(json_is_object(body));
    if (rc != 200) {
        CHECK(json_is_string(json_object_get(body, "error")));
        json_decref(body);
        return;
    }
    CHECK(strcmp(json_string_value(json_object_get(body, "apiVersion")), "admission.k8s.io/v1") == 0);
    const json_t *resp = json_object_get(body, "response");
    CHECK(json_is_string(json_object_get(resp, "uid")));
    const json_t *allowed = json_object_get(resp, "allowed");
    CHECK(json_is_boolean(allowed));
    const char *patch = json_string_value(json_object_get(resp, "patch"));
    if (!json_is_true(allowed)) {
        CHECK(patch == NULL);
        CHECK(json_is_string(json_object_get(json_object_get(resp, "status"), "message")));
    }
    if (patch != NULL) {
        CHECK(strcmp(json_string_value(json_object_get(resp, "patchType")), "JSONPatch") == 0);
        size_t n = strlen(patch);
        unsigned char *raw = malloc(n + 1);
        CHECK(raw != NULL);
        int len = EVP_DecodeBlock(raw, (const unsigned char *)patch, (int)n);
        CHECK(len >= 0);
        for (size_t i = n; i > 0 && patch[i - 1] == '='; i--)
            len--;
        json_t *ops = json_loadb((const char *)raw, (size_t)len, 0, NULL);
        free(raw);
        json_t *req = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
        CHECK(req != NULL);
        json_t *obj = json_deep_copy(json_object_get(json_object_get(req, "request"), "object"));
        CHECK(json_is_object(obj));
        apply(obj, ops);
        json_decref(obj);
        json_decref(req);
        json_decref(ops);
    }
    json_decref(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        kq_log_set_level("error");
        init = 1;
    }
    kq_admission_opts_t opts[2];
    opts[0] = kq_admission_opts_default();
    opts[1] = kq_admission_opts_default();
    opts[1].set_scheduler_name = true;
    opts[1].n_trusted_users = opts[1].n_trusted_groups = 0;
    for (int i = 0; i < 2; i++) {
        for (int v = 0; v < 2; v++) {
            char *out = NULL;
            size_t out_len = 0;
            int rc = (v ? kq_admission_validate : kq_admission_mutate)(&opts[i], (const char *)data, size, &out,
                                                                       &out_len);
            check(rc, out, out_len, data, size);
            free(out);
        }
    }
    return 0;
}
