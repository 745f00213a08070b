/* Resources: sets of named Kubernetes quantities as canonical integers.
 *
 * Canonical units: cpu in millicores; memory, ephemeral-storage, storage and
 * hugepages-* in bytes; every other (extended) resource as a whole count. "vcore"
 * (YuniKorn's name) is an alias of "cpu".
 *
 * A kq_resource_t holds any number of named entries, kept sorted by name. Names are
 * interned: every name in a kq_resource_t is the pointer returned by kq_resource_name(),
 * so two entries for the same resource compare equal as pointers. Interned names live
 * until exit.
 *
 * Storage and ownership. Up to KQ_RES_INLINE entries live in the set itself (no heap:
 * the common case, every hot path); a set that grows beyond spills ALL its entries into
 * one heap array it owns. Read entries through KQ_RES_E(r)[0..r->n). The owner of a set
 * that may have spilled releases it with kq_resource_free(); copy with
 * kq_resource_copy() (never `a = b`, which would share the heap array), move with
 * kq_resource_move(). A set starts as KQ_RESOURCE_EMPTY (or zeroed memory). Functions
 * writing into a set (`*r` or `*out`) take an initialised set and reuse its storage.
 *
 * Limit (issue 15). There is no fixed cap on names per set: a set holds at most
 * kq_resource_max_names() names, by default KQ_RES_NAMES_MAX (every name the process can
 * intern, so the default never refuses a set). Tests lower it to exercise KQ_ERANGE;
 * growing beyond it is KQ_ERANGE.
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

#define KQ_RES_INLINE 16 /* entries held without the heap */
#define KQ_RES_NAME_MAX 317 /* DNS-1123 subdomain prefix (253) + '/' + name (63) */
#define KQ_RES_NAMES_MAX 4096 /* distinct interned names; kq_resource_name() returns NULL beyond */
#define KQ_QUANTITY_MAX 64     /* longest quantity in kq_config_parse_resource_list()'s option lists */

typedef struct kq_res_entry {
    const char *name; /* interned */
    int64_t value;    /* canonical units, >= 0 */
} kq_res_entry_t;

typedef struct kq_resource {
    uint32_t n;   /* entries in use */
    uint32_t cap; /* capacity of heap[]; 0 while the entries are in inl[] */
    union {       /* the same size as before sets could spill: hot paths read no more memory */
        kq_res_entry_t inl[KQ_RES_INLINE];
        kq_res_entry_t *heap; /* owned; all n entries once the set has spilled (cap > 0) */
    };
} kq_resource_t;

#define KQ_RESOURCE_EMPTY ((kq_resource_t){.n = 0})

/* Makes *r an empty set without clearing its inline room (cheaper than = KQ_RESOURCE_EMPTY
 * for a local on a hot path). */
static inline void kq_resource_init(kq_resource_t *r)
{
    r->n = 0;
    r->cap = 0;
    r->heap = NULL;
}

/* Names a set may hold (see Limit above). kq_resource_set_max_names changes it for the
 * whole process; call it before any other thread uses resource sets. */
uint32_t kq_resource_max_names(void);
void kq_resource_set_max_names(uint32_t n);

/* The entries of r, r->n of them, sorted by name (const when r is). */
#define KQ_RES_E(r) ((r)->cap ? (r)->heap : (r)->inl)

/* Releases r's heap array (if any) and leaves r empty and reusable. NULL is a no-op. */
void kq_resource_free(kq_resource_t *r);

/* *dst = a copy of *src (dst initialised; its storage is reused). KQ_ENOMEM (or KQ_ERANGE beyond
 * the limit) leaves dst unchanged. dst == src is a no-op. */
int kq_resource_copy(kq_resource_t *dst, const kq_resource_t *src) KQ_WUR;

/* *dst = *src, leaving *src empty: a spilled src hands its heap array over (dst's own is
 * freed); inline entries are copied into dst's storage, which dst keeps. Never fails. */
void kq_resource_move(kq_resource_t *dst, kq_resource_t *src);

/* Makes room for n entries (so sets up to n names never allocate later). KQ_ENOMEM. */
int kq_resource_reserve(kq_resource_t *r, uint32_t n) KQ_WUR;

/* Sets an interned name (from kq_resource_name()) to value, keeping the order. KQ_ENOMEM
 * (r unchanged) when the set must grow and cannot. */
int kq_resource_put(kq_resource_t *r, const char *iname, int64_t value) KQ_WUR;

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

/* Empties r, keeping its storage for reuse (kq_resource_free releases it). */
static inline void kq_resource_clear(kq_resource_t *r) { r->n = 0; }

/* Value of `name` (any spelling; it is canonicalised). Returns 0 and sets *present=false
 * (if non-NULL) when absent. */
int64_t kq_resource_get(const kq_resource_t *r, const char *name, bool *present);

/* Sets name=value (value >= 0). KQ_EINVAL for a bad name or negative value, KQ_ENOMEM
 * when the name table is full or the set cannot grow. */
int kq_resource_set(kq_resource_t *r, const char *name, int64_t value) KQ_WUR;

/* r += b per name. KQ_ERANGE on overflow, KQ_ENOMEM; r unchanged on error. */
int kq_resource_add(kq_resource_t *r, const kq_resource_t *b) KQ_WUR;

/* Whether kq_resource_add(r, b) would succeed: 0 (and r has room for the result, so that
 * add cannot fail), KQ_ERANGE on overflow, KQ_ENOMEM. r's entries never change. */
int kq_resource_add_check(kq_resource_t *r, const kq_resource_t *b) KQ_WUR;

/* r = max(r, b) per name (names only in b are added). KQ_ENOMEM; r unchanged on error. */
int kq_resource_max(kq_resource_t *r, const kq_resource_t *b) KQ_WUR;

/* Adds b's entries for the names r lacks (r's own values stay). KQ_ENOMEM as above. */
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
 * being unlimited (so the other side's value is taken). out may be a or b. KQ_ENOMEM
 * leaves out unchanged. */
int kq_resource_min(kq_resource_t *out, const kq_resource_t *a, const kq_resource_t *b) KQ_WUR;

/* {"cpu": 500, "memory": 1073741824} with canonical integers. New reference; NULL on ENOMEM. */
json_t *kq_resource_to_json(const kq_resource_t *r);

/* From a JSON object whose values are quantity strings or non-negative integers already in
 * canonical units (pod requests use strings). *out is initialised; on success its old
 * entries are replaced. On error returns KQ_EPARSE/KQ_ERANGE/KQ_ENOMEM and a reason in
 * err; *out is untouched. */
int kq_resource_from_json(const json_t *obj, kq_resource_t *out, char *err, size_t errlen) KQ_WUR;

/* "cpu=1500m memory=2Gi" (empty string for an empty set). Returns length like snprintf. */
size_t kq_resource_format(const kq_resource_t *r, char *buf, size_t len);

#endif
