/* Queue configuration: YuniKorn's queues.yaml format, parsed with libyaml and validated
 * with YuniKorn's rules, into an immutable, reference-counted snapshot.
 *
 * A snapshot never changes after kq_config_load_*() returns it. Threads share it by
 * taking a reference (kq_config_ref) and dropping it (kq_config_unref); reload builds a
 * new snapshot off-lock and swaps the pointer (see kq_config_holder_*). Every pointer
 * reachable from a snapshot (partitions, queues, limits, strings) is borrowed and valid
 * while the caller holds a reference.
 *
 * Partition-level limits are kept in kq_partition_conf_t.limits and also apply to the
 * root queue, so the engine only ever looks at queue limits: the root queue's limits
 * array holds the root queue's own limits, or the partition's when root has none
 * (YuniKorn rejects a file where both are given and differ, so one copy suffices).
 *
 * A users/groups list "a, b, *" (which YuniKorn accepts) is split into two entries with
 * the same description and maxima: one with the names, one with exactly {"*"}.
 */
#ifndef KUBEQUOTA_CONFIG_H
#define KUBEQUOTA_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <regex.h>

#include "kubequota/base/error.h"
#include "kubequota/engine/resource.h"

typedef struct kq_limit_conf {
    const char *description;        /* the "limit" text; may be NULL */
    const char *const *users;       /* names, or exactly {"*"} */
    size_t n_users;
    const char *const *groups;      /* names, or exactly {"*"} */
    size_t n_groups;
    uint64_t max_applications;      /* 0 = not limited */
    bool has_max_resources;
    kq_resource_t max_resources;    /* canonical units */
    int line, column;               /* where the limit starts in the file */
} kq_limit_conf_t;

typedef struct kq_property {
    const char *key, *value;
} kq_property_t;

/* A parent queue's childtemplate: settings for the dynamic leaf queues created below it
 * by placement rules (YuniKorn: a parent without one inherits its nearest ancestor's). */
typedef struct kq_child_template {
    bool has_guaranteed;
    kq_resource_t guaranteed;
    bool has_max;
    kq_resource_t max;
    uint64_t max_applications;      /* 0 = not limited */
    const kq_property_t *properties;
    size_t n_properties;
    int line, column;
} kq_child_template_t;

/* One placement rule (YuniKorn's PlacementRule), names and values lowercased like
 * YuniKorn normalises them. The loader rejects unknown names, a fixed/tag rule without a
 * value, a fully qualified fixed rule with a parent, and "recovery" (implicit). */
typedef struct kq_rule_conf kq_rule_conf_t;
struct kq_rule_conf {
    const char *name;               /* "provided", "user", "fixed" or "tag" */
    const char *value;              /* fixed: queue; tag: tag name; "" otherwise */
    bool create;
    bool filter_deny;               /* filter type "deny" (default allow) */
    bool filter_set;                /* users or groups given */
    const char *const *filter_users;  /* list, or one entry that may be a regexp */
    size_t n_filter_users;
    const char *const *filter_groups;
    size_t n_filter_groups;
    /* a single users/groups entry with a regexp character ^$*+?()[{}| is a POSIX extended
     * regexp (unanchored search), compiled here; NULL otherwise. regexec on it is
     * thread-safe. */
    const regex_t *filter_user_re, *filter_group_re;
    const kq_rule_conf_t *parent;   /* NULL when none */
    int line, column;
};

typedef struct kq_queue_conf kq_queue_conf_t;
struct kq_queue_conf {
    const char *name;               /* the queue's own name ("b") */
    const char *path;               /* full path from root ("root.a.b") */
    const kq_queue_conf_t *parent;  /* NULL for root */
    const kq_queue_conf_t *const *children;
    size_t n_children;
    unsigned depth;                 /* root = 0 */
    bool is_parent;                 /* "parent: true" or has children */
    bool has_guaranteed;
    kq_resource_t guaranteed;       /* resources.guaranteed */
    bool has_max;
    kq_resource_t max;              /* resources.max */
    uint64_t max_applications;      /* 0 = not limited */
    const kq_property_t *properties;
    size_t n_properties;
    const char *submit_acl, *admin_acl; /* may be NULL */
    const kq_limit_conf_t *limits;  /* in file order; see the partition note above */
    size_t n_limits;
    int line, column;
    /* the child template in force for dynamic children: the queue's own, else the nearest
     * ancestor's; NULL when none (always NULL for a leaf) */
    const kq_child_template_t *child_template;
};

typedef struct kq_partition_conf {
    const char *name;
    const kq_queue_conf_t *root;
    const kq_limit_conf_t *limits;  /* partition-level limits, file order */
    size_t n_limits;
    size_t n_queues;
    const kq_rule_conf_t *const *rules; /* placementrules, in file order (see placement.h) */
    size_t n_rules;
    bool quota_preemption_enabled;  /* preemption.quotapreemptionenabled (elastic.c reclaim) */
} kq_partition_conf_t;

typedef struct kq_config kq_config_t;

/* Loads and validates a file. On success *out is a new reference. On failure returns
 * KQ_EIO (unreadable) or KQ_EPARSE (invalid), *out is untouched and every problem found
 * is appended to diags (file, line, column, queue path and limit where known). One bad
 * entry rejects the whole file. */
int kq_config_load_file(const char *path, kq_config_t **out, kq_diags_t *diags) KQ_WUR;

/* The same for a buffer; `name` is used as the file name in diagnostics. */
int kq_config_load_buffer(const char *buf, size_t len, const char *name, kq_config_t **out,
                          kq_diags_t *diags) KQ_WUR;

/* New reference to the same snapshot. */
kq_config_t *kq_config_ref(kq_config_t *cfg);
/* Drops a reference; the last one frees the snapshot. NULL is a no-op. */
void kq_config_unref(kq_config_t *cfg);

size_t kq_config_partition_count(const kq_config_t *cfg);
const kq_partition_conf_t *kq_config_partition_at(const kq_config_t *cfg, size_t i);
/* Partition by name, or NULL. Borrowed. */
const kq_partition_conf_t *kq_config_partition(const kq_config_t *cfg, const char *name);

/* What `kubequota serve` requires of a loaded configuration beyond kq_config_load_*: the
 * partition it enforces exists (an empty or comment-only file defines none). 0 when it
 * does; else adds one diagnostic for `file` and returns KQ_EPARSE (KQ_ENOMEM if the
 * diagnostic cannot be stored). check-config, the ConfigMap webhook, validate-conf, serve's
 * start-up and its reload all call this, so they refuse the same files with the same
 * message. */
int kq_config_check_partition(const kq_config_t *cfg, const char *partition, const char *file,
                              kq_diags_t *diags) KQ_WUR;

/* Queue by full path ("root.a.b"), or NULL. Constant time (hash lookup). Borrowed. */
const kq_queue_conf_t *kq_config_queue(const kq_partition_conf_t *p, const char *path);

/* Settings the file gives that kubequota accepts but does not act on, one text per
 * setting naming the key ("file:line:column: partition 'default': nodesortpolicy is not
 * used by kubequota ..."). Logged at load and printed by check-config. Borrowed. */
size_t kq_config_warning_count(const kq_config_t *cfg);
const char *kq_config_warning_at(const kq_config_t *cfg, size_t i);

/* One-line summary for check-config: "N partition(s), M queue(s), L limit(s)". */
size_t kq_config_summary(const kq_config_t *cfg, char *buf, size_t len);

/* A holder for the current snapshot, shared by threads: readers take a new reference,
 * reload swaps in a new snapshot. The holder's lock only guards the pointer (never held
 * during parsing or I/O). */
typedef struct kq_config_holder kq_config_holder_t;
/* Takes its own reference of `initial` (may be NULL). NULL on ENOMEM. */
kq_config_holder_t *kq_config_holder_new(kq_config_t *initial);
void kq_config_holder_free(kq_config_holder_t *h);
/* New reference to the current snapshot (caller unrefs); NULL if none. */
kq_config_t *kq_config_holder_get(kq_config_holder_t *h);
/* Makes `next` current (takes its own reference) and drops the holder's old reference. */
void kq_config_holder_swap(kq_config_holder_t *h, kq_config_t *next);

/* Elastic quota queue properties (validated by the loader; applied by elastic.c):
 *   kubequota.io/shared-weight  resource list "cpu=4,memory=8Gi" (commas and/or spaces
 *                               between entries); default: the queue's max
 *   kubequota.io/allow-lent     "true" (default) or "false"
 * A queue's min is resources.guaranteed and its max resources.max. */
#define KQ_PROP_SHARED_WEIGHT "kubequota.io/shared-weight"
/* The admission gate's fair order (control/gating.h, docs/gating.md): a queue property
 * "kubequota.io/gating.weight.user.<user>" or ".group.<group>" = a number in (0, 1e6]. */
#define KQ_PROP_GATING_WEIGHT_USER  "kubequota.io/gating.weight.user."
#define KQ_PROP_GATING_WEIGHT_GROUP "kubequota.io/gating.weight.group."
/* ... and its policy: "kubequota.io/gating.policy" = "fair" (stride scheduling on released
 * cost, the default) or "usage" (dominant share of decayed usage), with the usage
 * history's "kubequota.io/gating.halflife" = a duration up to 7 days ("0": none). Both
 * apply to a queue's subtree: a queue without the property takes its nearest ancestor's. */
#define KQ_PROP_GATING_POLICY   "kubequota.io/gating.policy"
#define KQ_PROP_GATING_HALFLIFE "kubequota.io/gating.halflife"
#define KQ_PROP_ALLOW_LENT    "kubequota.io/allow-lent"

/* Parses a resource list "name=quantity[,name=quantity...]" into canonical units. 0, or
 * KQ_EPARSE/KQ_ERANGE with the reason in err; *out untouched on error. */
int kq_config_parse_resource_list(const char *text, kq_resource_t *out, char *err, size_t errlen) KQ_WUR;

/* `kubequota check-config FILE`: prints a one-line summary on stdout and returns 0 when
 * valid; prints one error per line on stderr and returns 1 when invalid; returns 2 when
 * the file cannot be read or the arguments are wrong. */
int kq_config_check_main(int argc, char **argv);

#endif
