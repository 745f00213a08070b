/* jscan: a strict, validating JSON scanner that builds nothing.
 *
 * It walks a JSON text (RFC 8259) once, checks every byte of it, and reports where values
 * are: byte spans into the caller's text, never copies. It exists for request bodies that
 * are mostly passed through (kube-scheduler's ExtenderArgs: one Pod and thousands of node
 * names), where building a jansson tree of the whole body costs a malloc per value.
 *
 * What is valid (everything else is an error, and nothing is reported as found):
 *   - RFC 8259 grammar: one value, optional whitespace (space, tab, LF, CR) around it;
 *     no trailing commas, no comments, literals exactly true/false/null, numbers
 *     -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?;
 *   - strings: no raw byte below 0x20; escapes only \" \\ \/ \b \f \n \r \t \uXXXX;
 *     \u escapes of UTF-16 surrogates only as a high+low pair (an unpaired surrogate
 *     names no character: error); raw bytes >= 0x80 only as well-formed UTF-8
 *     (no overlong forms, no surrogates, nothing above U+10FFFF), anywhere in the text;
 *   - nesting: a value may sit inside at most KQ_JSCAN_MAX_DEPTH - 1 containers
 *     (scalars count as a level, as in jansson: 2048 empty arrays nest, 2048 arrays
 *     around a 1 do not).
 * Flags make it reject what jansson's json_loadb rejects beyond RFC 8259:
 *   KQ_JSCAN_NO_NUL     a \u0000 escape in any string (jansson without JSON_ALLOW_NUL;
 *                       keys are always rejected by jansson);
 *   KQ_JSCAN_NUM_RANGE  integers (no fraction, no exponent) outside int64 and reals that
 *                       overflow a double (strtod gives HUGE_VAL; LC_NUMERIC must be "C",
 *                       which it is unless the program calls setlocale);
 *   KQ_JSCAN_JANSSON    both: with it, kq_jscan_validate accepts exactly the texts that
 *                       json_loadb(text, len, JSON_DECODE_ANY) accepts (jansson 2.14;
 *                       duplicate keys are valid for both, the last one wins in jansson).
 *
 * Spans: a value's span is its text from its first to its last byte (a string's span
 * includes its quotes). A string's contents (kq_jstr_t) are the raw bytes between the
 * quotes, escapes not decoded; `escaped` says whether any backslash occurs. Written back
 * between quotes, raw contents are the same JSON string.
 *
 * Two kinds of function build something: kq_jscan_json* build a jansson tree (for objects
 * a caller handles as jansson values: ElasticQuotas, nodes, Status bodies), and kq_jdoc_*
 * decode into a flat, reusable document (pods: the informer and the filter request).
 *
 * Errors: KQ_EPARSE (not valid JSON, or rejected by a flag), KQ_EINVAL (valid JSON of the
 * wrong type where an object or array was required), KQ_ENOMEM (only with
 * KQ_JSCAN_NUM_RANGE: a copy of a real longer than 127 bytes at the very end of the
 * text). The error struct, when given, says where (byte offset, 1-based line and column
 * in characters) and what. Nothing here allocates except that copy (and kq_jscan_json's
 * tree); no function keeps a pointer after it returns. Threads: no shared state.
 */
#ifndef KUBEQUOTA_JSCAN_H
#define KUBEQUOTA_JSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kubequota/base/error.h"

#define KQ_JSCAN_MAX_DEPTH 2048 /* jansson's JSON_PARSER_MAX_DEPTH */

#define KQ_JSCAN_NO_NUL 0x1u
#define KQ_JSCAN_NUM_RANGE 0x2u
#define KQ_JSCAN_JANSSON (KQ_JSCAN_NO_NUL | KQ_JSCAN_NUM_RANGE)

/* Value types, as bits so that a set of them fits in an unsigned. */
typedef enum kq_jtype {
    KQ_JNONE = 0, /* absent */
    KQ_JOBJECT = 1u << 0,
    KQ_JARRAY = 1u << 1,
    KQ_JSTRING = 1u << 2,
    KQ_JNUMBER = 1u << 3,
    KQ_JTRUE = 1u << 4,
    KQ_JFALSE = 1u << 5,
    KQ_JNULL = 1u << 6,
} kq_jtype_t;

typedef struct kq_jscan_error {
    size_t offset;   /* byte offset of the offending byte (len at end of input) */
    int line;        /* 1-based */
    int column;      /* 1-based, in UTF-8 characters */
    char text[120];  /* what was wrong, e.g. "invalid escape '\\x' in a string" */
} kq_jscan_error_t;

/* One value found by the scanner (borrowed: points into the scanned text). */
typedef struct kq_jvalue {
    const char *ptr;     /* first byte of the value; NULL when type is KQ_JNONE */
    size_t len;          /* bytes up to and including the last one */
    kq_jtype_t type;
    size_t count;        /* object: members, array: elements (direct children only) */
    unsigned elem_types; /* object, array: OR of the types of its member values or
                          * elements (direct children only; 0 when empty) */
    bool escaped;        /* string: a backslash occurs in it */
} kq_jvalue_t;

/* A string's raw contents (borrowed): the bytes between the quotes. */
typedef struct kq_jstr {
    const char *ptr;
    size_t len;
    bool escaped;
} kq_jstr_t;

/* A member of an object, as reported to a kq_jscan_member_fn. */
typedef struct kq_jmember {
    kq_jstr_t key;
    kq_jvalue_t value;
} kq_jmember_t;

/* Called for each member of the scanned object in text order; returns 0 to go on, or
 * anything else to stop the scan (kq_jscan_object then returns that value). Members are
 * reported as they are scanned, before the rest of the text is checked: act on them only
 * once kq_jscan_object returned 0. */
typedef int (*kq_jscan_member_fn)(void *ctx, const kq_jmember_t *member);

/* Validates text[0..len) as one JSON value. On success fills *out (when not NULL) with
 * the value's span and type. 0, KQ_EPARSE or KQ_ENOMEM; *out untouched on failure. */
int kq_jscan_validate(const char *text, size_t len, unsigned flags, kq_jvalue_t *out,
                      kq_jscan_error_t *err) KQ_WUR;

/* Validates text[0..len) as one JSON value that must be an object, calling fn (may be
 * NULL) for each of its own members (not nested ones). 0; KQ_EPARSE; KQ_EINVAL when the
 * text is valid JSON but not an object (err->text says so); KQ_ENOMEM; or what fn
 * returned. */
int kq_jscan_object(const char *text, size_t len, unsigned flags, kq_jscan_member_fn fn, void *ctx,
                    kq_jscan_error_t *err) KQ_WUR;

/* Validates an object like kq_jscan_object and looks up nkeys member names: values[i]
 * is the value of the member whose decoded name equals keys[i] exactly (NUL-terminated,
 * case-sensitive; the last one when a name repeats, as jansson does), type KQ_JNONE when
 * there is none. On failure values[] is untouched. */
int kq_jscan_object_find(const char *text, size_t len, unsigned flags, const char *const *keys, size_t nkeys,
                         kq_jvalue_t *values, kq_jscan_error_t *err) KQ_WUR;

/* Parses text[0..len) (one JSON value) into a new jansson value (the caller releases it
 * with json_decref): json_equal to what json_loadb(text, len, JSON_DECODE_ANY) returns,
 * accepting exactly the same texts (KQ_JSCAN_JANSSON is implied), but in jscan's one
 * pass instead of jansson's byte-at-a-time lexer (about 5x faster on a Pod). 0 with *out
 * set, or KQ_EPARSE / KQ_ENOMEM with err filled and *out untouched. */
int kq_jscan_json(const char *text, size_t len, json_t **out, kq_jscan_error_t *err) KQ_WUR;

/* What kq_jscan_json_filtered keeps of an object: a list of member names ended by an
 * entry whose key is NULL. `sub` is applied to the member's value when it is an object,
 * and to each object element when it is an array (arrays of arrays pass it down); NULL
 * keeps the whole value. Members not named are not built (they are still validated). */
typedef struct kq_jfilter {
    const char *key;
    const struct kq_jfilter *sub;
} kq_jfilter_t;

/* Like kq_jscan_json, but builds only what `keep` names (NULL: everything). The whole text
 * is validated exactly as kq_jscan_json validates it; the tree is what kq_jscan_json
 * builds with the members not named removed. For decoding a few fields of large objects
 * (a pod of which the informer reads a dozen fields) without allocating the rest. */
int kq_jscan_json_filtered(const char *text, size_t len, const kq_jfilter_t *keep, json_t **out,
                           kq_jscan_error_t *err) KQ_WUR;

/* Iterates over the elements of one JSON array (e.g. a kq_jvalue_t of type KQ_JARRAY),
 * validating as it goes, so it is safe on any text. Elements are treated as nested one
 * level deeper than the array's own text. */
typedef struct kq_jscan_iter {
    const char *start, *p, *end; /* the array's text; position */
    unsigned flags;
    size_t index; /* index of the element the next call yields */
    int state;    /* internal: 0 before '[', 1 in the array, 2 done, <0 failed */
} kq_jscan_iter_t;

/* Starts an iteration over text[0..len), which must be one array (whitespace around it
 * allowed). 0, or KQ_EPARSE / KQ_EINVAL (not an array) with err filled. */
int kq_jscan_iter_begin(kq_jscan_iter_t *it, const char *text, size_t len, unsigned flags,
                        kq_jscan_error_t *err) KQ_WUR;

/* The next element: 1 with *v filled, 0 after the last one (the rest of the text is
 * checked then), or KQ_EPARSE / KQ_ENOMEM with err filled (error offsets are relative to
 * the array's text). After a failure every call fails. */
int kq_jscan_iter_next(kq_jscan_iter_t *it, kq_jvalue_t *v, kq_jscan_error_t *err) KQ_WUR;

/* Like kq_jscan_iter_next, and builds the element in the same pass as
 * kq_jscan_json_filtered(element, keep) would: 1 with *v and *out (a new reference)
 * filled; 0 after the last element and negative on failure, *out untouched. */
int kq_jscan_iter_next_json(kq_jscan_iter_t *it, const kq_jfilter_t *keep, kq_jvalue_t *v, json_t **out,
                            kq_jscan_error_t *err) KQ_WUR;

/* ---- kq_jdoc: a decoded document in two flat, reusable buffers ----
 * What kq_jscan_json_filtered builds as a jansson tree (a malloc per value, freed value by
 * value), kq_jdoc_parse builds as an array of nodes in document order plus one buffer of
 * decoded strings, both kept for the next parse: decoding a pod into a warm document
 * allocates nothing. A node's subtree is the nodes that follow it (`size` of them,
 * itself included), so the next sibling is `node + node->size`.
 *
 * Semantics are jansson's: the same texts are accepted (KQ_JSCAN_JANSSON), integers
 * (no fraction, no exponent) and reals are told apart, and when a member name repeats in
 * an object only the last one counts: the earlier ones are marked `shadowed`, are skipped
 * by kq_jnode_first/kq_jnode_next and kq_jnode_get, and `count` does not include them.
 * Members come in text order (jansson keeps a repeated name at its first position; here it
 * is at its last). Strings are NUL-terminated; one holding \u0000 cannot be told from a
 * shorter one by strlen (KQ_JSCAN_JANSSON rejects \u0000 anyway). */
typedef struct kq_jnode {
    kq_jtype_t type;
    uint32_t size;     /* nodes in this value's subtree, itself included (1 for a scalar) */
    uint32_t count;    /* object: members (not counting shadowed ones); array: elements */
    bool real;         /* number: written with a fraction or an exponent (json_real) */
    bool shadowed;     /* member: a later member of the same object has the same name */
    const char *key;   /* member: its decoded name (NUL-terminated); else NULL */
    size_t key_len;
    const char *str;   /* string: decoded contents, NUL-terminated; else NULL */
    size_t len;        /* string: bytes of str */
    long long i;       /* integer number */
    double d;          /* number (an integer's value as a double too) */
} kq_jnode_t;

typedef struct kq_jdoc {
    kq_jnode_t *nodes; /* nodes[0] is the root after a successful parse */
    size_t n, cap;
    char *text;        /* decoded strings */
    size_t text_cap;
    /* internal: the open containers while building */
    uint32_t *open;
    size_t open_cap;
    uint32_t *sort; /* scratch for finding repeated names in large objects */
    size_t sort_cap;
} kq_jdoc_t;

/* Parses text[0..len) (one JSON value) into doc, keeping only what `keep` names (NULL:
 * everything; as in kq_jscan_json_filtered). The text is validated exactly as
 * kq_jscan_json validates it. 0 with the root in kq_jdoc_root(doc); KQ_EPARSE or
 * KQ_ENOMEM with err filled and doc empty. doc must be zeroed before its first use and
 * released with kq_jdoc_free; its buffers are reused by the next parse (pointers into a
 * document are valid until then). */
int kq_jdoc_parse(kq_jdoc_t *doc, const char *text, size_t len, const kq_jfilter_t *keep,
                  kq_jscan_error_t *err) KQ_WUR;
void kq_jdoc_free(kq_jdoc_t *doc);
/* Frees doc's buffers when together they hold more than keep bytes (a rare huge document
 * should not pin its memory for the life of a reused document); doc stays usable. */
void kq_jdoc_trim(kq_jdoc_t *doc, size_t keep);

static inline const kq_jnode_t *kq_jdoc_root(const kq_jdoc_t *doc)
{
    return doc->n > 0 ? doc->nodes : NULL;
}

/* The first member or element of a container (shadowed members skipped), or NULL (none,
 * or n is NULL or not a container). */
static inline const kq_jnode_t *kq_jnode_first(const kq_jnode_t *n)
{
    if (n == NULL || n->size <= 1 || (n->type != KQ_JOBJECT && n->type != KQ_JARRAY))
        return NULL;
    const kq_jnode_t *c = n + 1, *end = n + n->size;
    while (c < end && c->shadowed)
        c += c->size;
    return c < end ? c : NULL;
}

/* The member or element after c in its container parent, or NULL after the last one. */
static inline const kq_jnode_t *kq_jnode_next(const kq_jnode_t *parent, const kq_jnode_t *c)
{
    const kq_jnode_t *end = parent + parent->size;
    for (c += c->size; c < end && c->shadowed; c += c->size)
        ;
    return c < end ? c : NULL;
}

/* The value of member `key` of obj, or NULL (absent, or obj NULL or not an object). */
const kq_jnode_t *kq_jnode_get(const kq_jnode_t *obj, const char *key);

/* A string node's contents, or NULL when n is NULL or not a string. */
static inline const char *kq_jnode_string(const kq_jnode_t *n)
{
    return n != NULL && n->type == KQ_JSTRING ? n->str : NULL;
}

/* Like kq_jscan_object_find (with KQ_JSCAN_JANSSON), and in the same pass decodes the value
 * of member doc_key into doc as kq_jdoc_parse of that value with keep would (the last one
 * when the name repeats): a request body is scanned once, and only the part a caller reads
 * is decoded. 0 with values[] filled and the member at kq_jdoc_root(doc) (doc empty when
 * the member is absent); on failure values[] is untouched and doc empty. */
int kq_jscan_object_find_doc(const char *text, size_t len, const char *const *keys, size_t nkeys,
                             kq_jvalue_t *values, const char *doc_key, const kq_jfilter_t *keep, kq_jdoc_t *doc,
                             kq_jscan_error_t *err) KQ_WUR;

/* Like kq_jscan_iter_next_json, decoding the element into doc (kq_jdoc_parse of the
 * element with keep): 1 with *v filled and the element at kq_jdoc_root(doc); 0 after the
 * last element; negative on failure (doc empty). */
int kq_jscan_iter_next_doc(kq_jscan_iter_t *it, const kq_jfilter_t *keep, kq_jvalue_t *v, kq_jdoc_t *doc,
                           kq_jscan_error_t *err) KQ_WUR;

/* Like kq_jscan_iter_next for an array of strings: 1 with the next string's raw contents
 * in *s, 0 after the last one, KQ_EINVAL when element it->index is a valid value but not
 * a string (err says which), or KQ_EPARSE. */
int kq_jscan_iter_next_string(kq_jscan_iter_t *it, kq_jstr_t *s, kq_jscan_error_t *err) KQ_WUR;

/* Whether raw string contents (from the scanner: valid) decode to exactly the
 * NUL-terminated s. Decodes escapes on the fly; no allocation. */
bool kq_jscan_str_equal(const kq_jstr_t *raw, const char *s);

/* Decodes raw string contents (from the scanner: valid) into out, which must have room
 * for raw->len bytes (decoding never lengthens); returns the decoded length. Not
 * NUL-terminated; \u0000 decodes to a NUL byte. */
size_t kq_jscan_str_decode(const kq_jstr_t *raw, char *out);

/* Name of a type ("object", "array", "string", "number", "true", "false", "null",
 * "none"). */
const char *kq_jscan_type_name(kq_jtype_t type);

#endif
