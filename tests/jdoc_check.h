/* Test helper shared by the unit tests and the fuzzers: whether a kq_jdoc node is the same
 * value as a jansson value, and whether a document's shape is consistent. Header-only. */
#ifndef KQ_TESTS_JDOC_CHECK_H
#define KQ_TESTS_JDOC_CHECK_H

#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/kube/jscan.h"

/* The node's subtree is well formed: sizes add up, member names only in objects, counts
 * match the (non-shadowed) children. */
static inline bool jdoc_shape_ok(const kq_jnode_t *n)
{
    if (n->size == 0)
        return false;
    if (n->type != KQ_JOBJECT && n->type != KQ_JARRAY)
        return n->size == 1 && (n->type == KQ_JSTRING) == (n->str != NULL) &&
               (n->type != KQ_JSTRING || strlen(n->str) <= n->len);
    size_t sum = 1, live = 0;
    for (const kq_jnode_t *c = n + 1; c < n + n->size; c += c->size) {
        if (c->size == 0 || c + c->size > n + n->size)
            return false;
        if ((n->type == KQ_JOBJECT) != (c->key != NULL))
            return false;
        if (n->type == KQ_JARRAY && c->shadowed)
            return false;
        if (!jdoc_shape_ok(c))
            return false;
        sum += c->size;
        live += !c->shadowed;
    }
    return sum == n->size && live == n->count;
}

/* Same value: types (integer and real told apart), numbers, strings byte for byte, arrays
 * element by element, objects with the same names (the doc's live members) and values. */
static inline bool jdoc_equal_json(const kq_jnode_t *n, const json_t *j)
{
    if (n == NULL || j == NULL)
        return n == NULL && j == NULL;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        if (n->type != KQ_JOBJECT || n->count != json_object_size(j))
            return false;
        for (const kq_jnode_t *c = kq_jnode_first(n); c != NULL; c = kq_jnode_next(n, c)) {
            const json_t *m = json_object_getn(j, c->key, c->key_len);
            if (m == NULL || !jdoc_equal_json(c, m))
                return false;
            if (kq_jnode_get(n, c->key) != c && strlen(c->key) == c->key_len)
                return false;
        }
        return true;
    }
    case JSON_ARRAY: {
        if (n->type != KQ_JARRAY || n->count != json_array_size(j))
            return false;
        size_t i = 0;
        for (const kq_jnode_t *c = kq_jnode_first(n); c != NULL; c = kq_jnode_next(n, c), i++)
            if (!jdoc_equal_json(c, json_array_get(j, i)))
                return false;
        return i == json_array_size(j);
    }
    case JSON_STRING:
        return n->type == KQ_JSTRING && n->len == json_string_length(j) &&
               memcmp(n->str, json_string_value(j), n->len) == 0 && n->str[n->len] == '\0';
    case JSON_INTEGER:
        return n->type == KQ_JNUMBER && !n->real && n->i == json_integer_value(j);
    case JSON_REAL:
        return n->type == KQ_JNUMBER && n->real && n->d == json_real_value(j);
    case JSON_TRUE:
        return n->type == KQ_JTRUE;
    case JSON_FALSE:
        return n->type == KQ_JFALSE;
    case JSON_NULL:
        return n->type == KQ_JNULL;
    }
    return false;
}

/* A new jansson value equal to the node (NULL for NULL), for printing and comparing. */
static inline json_t *jdoc_to_json(const kq_jnode_t *n)
{
    if (n == NULL)
        return NULL;
    json_t *v = NULL;
    switch (n->type) {
    case KQ_JOBJECT:
        v = json_object();
        for (const kq_jnode_t *c = kq_jnode_first(n); c != NULL; c = kq_jnode_next(n, c))
            json_object_setn_new(v, c->key, c->key_len, jdoc_to_json(c));
        break;
    case KQ_JARRAY:
        v = json_array();
        for (const kq_jnode_t *c = kq_jnode_first(n); c != NULL; c = kq_jnode_next(n, c))
            json_array_append_new(v, jdoc_to_json(c));
        break;
    case KQ_JSTRING: v = json_stringn(n->str, n->len); break;
    case KQ_JNUMBER: v = n->real ? json_real(n->d) : json_integer(n->i); break;
    case KQ_JTRUE: v = json_true(); break;
    case KQ_JFALSE: v = json_false(); break;
    default: v = json_null(); break;
    }
    return v;
}

#endif
