/* kubequota error codes and parser diagnostics.
 *
 * Fallible functions return 0 or a negative KQ_E* code. The codes are defined once
 * in KQ_ERRNO_MAP, which also gives kq_strerror() its text.
 *
 * Parsers of files and requests report what went wrong in a kq_diags_t list: each
 * diagnostic names the file, line and column (1-based; 0 when unknown), an optional
 * path inside the document (a queue path, a JSON path) and a human-readable text.
 */
#ifndef KUBEQUOTA_ERROR_H
#define KUBEQUOTA_ERROR_H

#include <stddef.h>

#define KQ_ERRNO_MAP(X)                                      \
    X(EINVAL,    -1, "invalid argument")                     \
    X(ENOMEM,    -2, "out of memory")                        \
    X(ERANGE,    -3, "value out of range")                   \
    X(EPARSE,    -4, "malformed input")                      \
    X(ENOENT,    -5, "not found")                            \
    X(EEXIST,    -6, "already exists")                       \
    X(EDENIED,   -7, "quota exceeded")                       \
    X(EIO,       -8, "input/output error")                   \
    X(ETIMEDOUT, -9, "timed out")                            \
    X(ECONFLICT, -10, "conflict")                            \
    X(EHTTP,     -11, "unexpected HTTP status")              \
    X(ETOOBIG,   -12, "too large")                           \
    X(ESTATE,    -13, "operation not valid in this state")   \
    X(EGONE,     -14, "resource version too old")

enum kq_errno {
    KQ_OK = 0,
#define KQ_ERRNO_ENUM(name, val, text) KQ_##name = (val),
    KQ_ERRNO_MAP(KQ_ERRNO_ENUM)
#undef KQ_ERRNO_ENUM
};

/* Static text for a KQ_E* code (or "unknown error"). */
const char *kq_strerror(int err);

/* What kind of denial a KQ_EDENIED carries, next to its text: the functions that word a
 * denial (ugm, quota tree, placement, ledger, metering) also say its kind through an
 * optional out-parameter (NULL: not wanted), so callers never read the kind back out of the
 * words. serve/extender.c maps each kind to its Event reason and metric label
 * (docs/events.md). */
typedef enum kq_denial {
    KQ_DENIAL_NONE = 0,       /* not denied, or a denial of no particular kind */
    KQ_DENIAL_OVER_LIMIT,     /* over a user, group, queue or quota group limit right now */
    KQ_DENIAL_OVER_RUNTIME,   /* over an elastic quota group's runtime */
    KQ_DENIAL_NEVER_FITS,     /* the request alone is over a limit */
    KQ_DENIAL_QUEUE_MISSING,  /* no queue for the pod */
    KQ_DENIAL_QUEUE_NOT_LEAF, /* the pod's queue is a parent queue */
    KQ_DENIAL_GROUP_MISSING,  /* the pod's quota group does not exist */
    KQ_DENIAL_GROUP_NOT_LEAF, /* the pod's quota group is a parent group */
    KQ_DENIAL_ACL,            /* the queue's submitacl/adminacl do not allow the user */
    KQ_DENIAL_BUDGET,         /* the owner's credit budget is spent */
    KQ_DENIAL_APP_OWNER,      /* the pod's application id belongs to another user */
    KQ_DENIAL_QUOTA_NOT_FOUND, /* the pod's quota label names no quota (yet) */
    KQ_DENIAL_QUOTA_OTHER_NS, /* the pod's quota label names a quota that does not govern its namespace */
    KQ_DENIAL_COUNT
} kq_denial_t;

/* *kind = v when kind is not NULL. */
static inline void kq_denial_set(kq_denial_t *kind, kq_denial_t v)
{
    if (kind != NULL)
        *kind = v;
}

#define KQ_WUR __attribute__((warn_unused_result))
#define KQ_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

typedef struct kq_diag {
    char *file;   /* owned; NULL when not from a file */
    int line;     /* 1-based, 0 = unknown */
    int column;   /* 1-based, 0 = unknown */
    char *where;  /* owned; queue path / limit / JSON path, or NULL */
    char *text;   /* owned; never NULL */
} kq_diag_t;

typedef struct kq_diags {
    kq_diag_t *v;
    size_t n, cap;
} kq_diags_t;

void kq_diags_init(kq_diags_t *d);
/* Frees every diagnostic; the list is empty and reusable afterwards. NULL is a no-op. */
void kq_diags_free(kq_diags_t *d);
/* Appends one diagnostic; strings are copied. Returns 0 or KQ_ENOMEM. */
int kq_diags_add(kq_diags_t *d, const char *file, int line, int column, const char *where,
                 const char *fmt, ...) KQ_PRINTF(6, 7);
/* Formats one diagnostic as "file:line:column: where: text" (parts that are unknown are
 * left out). Returns the length it would have written, like snprintf. */
size_t kq_diag_format(const kq_diag_t *d, char *buf, size_t len);
/* All diagnostics, one per line, as a new malloc'ed string (caller frees); NULL on ENOMEM. */
char *kq_diags_join(const kq_diags_t *d, const char *sep);

/* Writes a message into a caller's error buffer, cut to len (always NUL-terminated); a
 * NULL buffer or len 0 writes nothing. The one helper behind every "err, errlen" pair. */
void kq_errf(char *buf, size_t len, const char *fmt, ...) KQ_PRINTF(3, 4);

#endif
