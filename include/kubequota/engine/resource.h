/* Resources: sets of named Kubernetes quantities as canonical integers.
 *
 * Canonical units: cpu in millicores; memory, ephemeral-storage, storage and
 * hugepages-* in bytes; every other (extended) resource as a whole count. "vcore"
 * (YuniKorn's name) is an alias of "cpu".
 *
 * A kq_resource_t is a small value type (no heap, copy by assignment): at most
 * KQ_RES_MAX named entries, kept sorted by name. Names are interned: every name in a
 * kq_resource_t is the pointer returned by kq_resource_name(), so two entries for the
 * same resource compare equal as pointers. Interned names live until exit.
 *
 * Semantics of a maximum: a resource missing from a maximum is unlimited; an explicit
 * 0 allows nothing of it.
 *
 * Thread safety: kq_resource_name() may be called from any thread; everything else
 * works on caller-owned values.
 */
#ifndef KUBEQUOTA_RESOURCE_H
#define KUBEQUOTA_RESOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kubequota/base/error.h"

#define KQ_RES_MAX 16
#define KQ_RES_NAME_MAX 317 /* DNS-1123 subdomain prefix (253) + '/' + name (63) */
#define KQ_RES_NAMES_MAX 4096 /* distinct interned names; kq_resource_name() returns NULL beyond */
#define KQ_QUANTITY_MAX 64     /* longest quantity in kq_config_parse_resource_list()'s option lists */

typedef struct kq_res_entry {
    const char *name; /* interned */
    int64_t value;    /* canonical units, >= 0 */
} kq_res_entry_t;

typedef struct kq_resource {
    uint32_t n;
    kq_res_entry_t e[KQ_RES_MAX];
} kq_resource_t;

#define KQ_RESOURCE_EMPTY ((kq_resource_t){.n = 0})

/* Canonical interned name for a resource name ("vcore" -> "cpu"). Borrowed pointer, valid
 * until exit. NULL when the name is not a valid resource name (empty, too long, bad
 * characters) or the intern table is full. */
const char *kq_resource_name(const char *name);

/* Parses a Kubernetes quantity string for resource `name` into canonical units, as a
 * Kubernetes component reads it (Quantity.UnmarshalJSON, then Value() for bytes and
 * counts, MilliValue() for cpu): every string resource.ParseQuantity accepts, of any
 * length, with surrounding white space dropped, rounded UP to the canonical unit
 * ("1181116006400m" memory is 1181116007 bytes, "100500u" cpu is 101m, "0.5" of a GPU
 * is 1). A binary-suffixed byte or count quantity above 2^63-1 is capped there, as
 * Kubernetes caps it ("8Ei" memory). Rejects negative values, junk, and values that do
 * not fit an int64 in canonical units (where Kubernetes' own int64 accessors overflow).
 * On error returns KQ_EPARSE or KQ_ERANGE and writes a reason to err (if non-NULL);
 * *out is untouched. */
int kq_quantity_parse(const char *name, const char *s, int64_t *out, char *err, size_t errlen) KQ_WUR;

/* The same grammar read as a whole number of canonical units, for configuration formats
 * with their own rules (YuniKorn's queues.yaml): no white space, no rounding (a fraction
 * of the canonical unit is KQ_ERANGE "not a whole number"), no cap (KQ_ERANGE "too
 * large"), and at least one digit. */
int kq_quantity_parse_whole(const char *name, const char *s, int64_t *out, char *err, size_t errlen) KQ_WUR;

/* The same, always through the exact big-number path. kq_quantity_parse takes a 64-bit
 * shortcut for plain values ("500m", "2", "1.5", "8Gi"); tests and the quantity fuzzer
 * require the two to agree on every input. */
int kq_quantity_parse_exact(const char *name, const char *s, int64_t *out, char *err, size_t errlen) KQ_WUR;

/* Formats a canonical value in Kubernetes' canonical form, as Quantity.String() writes
 * it: cpu as a DecimalSI quantity of millicores ("1500m", "2", "1k"), counts as DecimalSI
 * ("8", "1k"), bytes as BinarySI ("2Gi", "1536"; below 1Ki as DecimalSI: "1k", "512").
 * Kubernetes parses the result back to the same value. Returns the length like snprintf. */
size_t kq_quantity_format(const char *name, int64_t value, char *buf, size_t len);

static inline void kq_resource_clear(kq_resource_t *r) { r->n = 0; }

/* Value of `name` (any spelling; it is canonicalised). Returns 0 and sets *present=false
 * (if non-NULL) when absent. */
int64_t kq_resource_get(const kq_resource_t *r, const char *name, bool *present);

/* Sets name=value (value >= 0). KQ_EINVAL for a bad name or negative value, KQ_ERANGE when
 * the set already holds KQ_RES_MAX other names. */
int kq_resource_set(kq_resource_t *r, const char *name, int64_t value) KQ_WUR;

/* r += b per name. KQ_ERANGE on overflow or too many names; r unchanged on error. */
int kq_resource_add(kq_resource_t *r, const kq_resource_t *b) KQ_WUR;

/* r = max(r, b) per name (names only in b are added). KQ_ERANGE when the result would
 * hold more than KQ_RES_MAX names; r unchanged on error. */
int kq_resource_max(kq_resource_t *r, const kq_resource_t *b) KQ_WUR;

/* Adds b's entries for the names r lacks (r's own values stay). KQ_ERANGE as above. */
int kq_resource_fill(kq_resource_t *r, const kq_resource_t *b) KQ_WUR;

/* r -= b per name, clamped at 0 (a name that reaches 0 stays present with 0).
 * Returns true when nothing had to be clamped. */
bool kq_resource_sub(kq_resource_t *r, const kq_resource_t *b);

/* True when every entry is 0 (or the set is empty). */
bool kq_resource_is_zero(const kq_resource_t *r);

/* True when both sets have the same non-zero entries. */
bool kq_resource_equal(const kq_resource_t *a, const kq_resource_t *b);

/* True when a <= max for every name in max (names missing from max are unlimited). */
bool kq_resource_fits_in(const kq_resource_t *a, const kq_resource_t *max);

/* True when used + req <= max for every name with a non-zero request that max
 * names. On false, *failed (if non-NULL) is the first name that does not fit. */
bool kq_resource_fits(const kq_resource_t *used, const kq_resource_t *req, const kq_resource_t *max,
                      const char **failed);

/* min(a, b) per name present in either; a name missing from one side counts as that side
 * being unlimited (so the other side's value is taken). */
void kq_resource_min(kq_resource_t *out, const kq_resource_t *a, const kq_resource_t *b);

/* {"cpu": 500, "memory": 1073741824} with canonical integers. New reference; NULL on ENOMEM. */
json_t *kq_resource_to_json(const kq_resource_t *r);

/* From a JSON object whose values are quantity strings or non-negative integers already in
 * canonical units (pod requests use strings). On error returns KQ_EPARSE/KQ_ERANGE and a
 * reason in err; *out is untouched. */
int kq_resource_from_json(const json_t *obj, kq_resource_t *out, char *err, size_t errlen) KQ_WUR;

/* "cpu=1500m memory=2Gi" (empty string for an empty set). Returns length like snprintf. */
size_t kq_resource_format(const kq_resource_t *r, char *buf, size_t len);

#endif
