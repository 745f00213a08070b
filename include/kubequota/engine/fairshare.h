/* Usage history for the admission gate's usage policy (docs/gating.md "Usage policy").
 *
 * For every (queue, user) it keeps two resource sets:
 *  - current: what the user's pods in the queue are counted with now. The pod ledger
 *    reports every count and release (kq_fairshare_change), so this is the same number
 *    the ugm holds for the user in that queue, rebuilt from the pods after a restart.
 *  - average: current, averaged over time with exponential decay. Between two changes it
 *    moves toward current with the queue's half-life H:
 *        average(t + d) = current + (average(t) - current) * 2^(-d / H)
 *    A user who ran 8 cpu for one half-life averages 4 cpu; one who stops halves every H.
 *    H = 0 keeps no history (average = current: plain dominant-resource fairness).
 *
 * A user is ranked by usage = max(average, current) per resource: history weighs on a
 * user until it decays, and what it runs now counts at once (so a burst of releases to
 * one user is seen by the very next choice), and by its dominant share, the largest
 * usage / capacity over the resources the queue caps (kq_fairshare_dominant).
 *
 * Time is wall-clock seconds, so the averages survive a restart through kq_fairshare_dump
 * and kq_fairshare_load (the gate keeps them in a ConfigMap). A clock that steps back
 * counts as no time passed.
 *
 * The (queue, user) pairs whose current usage changed are remembered until
 * kq_fairshare_drain, so the gate re-ranks only the users whose usage changed.
 *
 * DESIGN: one mutex guards everything; it is a leaf lock (the ledger calls in holding its
 * own lock, the gate holding gating.mu; fairshare never calls out). Cost: a change or a
 * lookup is O(1) hash lookups plus O(resource names). A pair with no current usage whose
 * average decayed below one canonical unit is freed at the next dump.
 */
#ifndef KUBEQUOTA_FAIRSHARE_H
#define KUBEQUOTA_FAIRSHARE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kubequota/base/error.h"
#include "kubequota/engine/resource.h"

typedef struct kq_fairshare kq_fairshare_t;

/* Limits of what kq_fairshare_load accepts (a ConfigMap anybody with write access may edit). */
#define KQ_FAIRSHARE_MAX_ENTRIES 200000
#define KQ_FAIRSHARE_NAME_MAX 1024
/* Most tracked pairs kq_fairshare_dump writes (about 65 bytes each: a ConfigMap holds 1 MiB). */
#define KQ_FAIRSHARE_DUMP_MAX 15000

/* default_halflife_s: the half-life of queues never given one (>= 0). NULL on ENOMEM. */
kq_fairshare_t *kq_fairshare_new(double default_halflife_s);
void kq_fairshare_free(kq_fairshare_t *fs);

/* Wall-clock seconds (CLOCK_REALTIME). */
double kq_fairshare_now(void);

/* Tracking: only the queues given a half-life (the queues with the usage policy) keep
 * history; the others keep the current usage alone (no decay arithmetic on a count, and a
 * pair is dropped when its usage returns to zero), so a queue that becomes tracked has its
 * current usage at once and its history from then on. The caller says which queues are
 * tracked after each configuration change: kq_fairshare_track_begin, set_halflife for each
 * usage queue, kq_fairshare_track_end (a tracked queue not named again loses its history).
 * kq_fairshare_load tracks the queues it names until then. */
void kq_fairshare_track_begin(kq_fairshare_t *fs);
void kq_fairshare_track_end(kq_fairshare_t *fs);

/* The half-life of queue's history, in seconds (>= 0; anything else is KQ_EINVAL), and
 * tracks it. It applies from now on: every pair of the queue is first brought up to now
 * with the old one. kq_fairshare_dump writes tracked queues only. 0 or KQ_ENOMEM. */
int kq_fairshare_set_halflife(kq_fairshare_t *fs, const char *queue, double halflife_s, double now) KQ_WUR;

/* A pod of user in queue started (sign > 0) or stopped (sign < 0) being counted with req.
 * A stop never takes current below zero. Out of memory loses the change (logged). */
void kq_fairshare_change(kq_fairshare_t *fs, const char *queue, const char *user, const kq_resource_t *req,
                         int sign, double now);

/* current and average of (queue, user) at now (either may be NULL); both empty when the
 * pair is unknown. 0 or KQ_ENOMEM. */
int kq_fairshare_get(kq_fairshare_t *fs, const char *queue, const char *user, double now, kq_resource_t *current,
                     kq_resource_t *average) KQ_WUR;

/* usage = max(average, current) at now, per resource. 0 or KQ_ENOMEM. */
int kq_fairshare_usage(kq_fairshare_t *fs, const char *queue, const char *user, double now,
                       kq_resource_t *usage) KQ_WUR;

/* The paths of the tracked queues (the caller frees each and the array); NULL and *n = 0
 * when none. 0 or KQ_ENOMEM. */
int kq_fairshare_tracked(kq_fairshare_t *fs, char ***paths, size_t *n) KQ_WUR;

/* Whether any queue is tracked (has been given a half-life). */
bool kq_fairshare_tracks_any(kq_fairshare_t *fs);

/* The dominant share of usage: the largest usage[r] / caps[r] over the resources caps
 * names with a value above 0. -1 when caps names none of them (no capacity is known). */
double kq_fairshare_dominant(const kq_resource_t *usage, const kq_resource_t *caps);

/* The pairs whose current usage changed since the last drain, as "queue\nuser" strings
 * (the caller frees each and the array); *n = 0 and NULL when none. 0 or KQ_ENOMEM (then
 * nothing is forgotten). */
int kq_fairshare_drain(kq_fairshare_t *fs, char ***keys, size_t *n) KQ_WUR;

/* The averages of the tracked queues as a document (new reference), pairs with nothing
 * left dropped (and forgotten). The lock is held only to copy the pairs (the ledger, on
 * the bind path, waits for it); the decay and the JSON are done after. *pairs (if not
 * NULL) is the number of tracked pairs, SIZE_MAX when more than KQ_FAIRSHARE_DUMP_MAX (then
 * NULL is returned: the document would not fit a ConfigMap); NULL also on ENOMEM.
 * kq_fairshare_dump, _track_begin and _track_end are called from one thread (the gate's
 * controller): the dump borrows the names of tracked pairs, which only those free:
 *   {"kind":"GatingUsage","apiVersion":"kubequota.io/v1","updated":"<RFC 3339 UTC>",
 *    "queues":[{"queue":"root.a","halfLifeSeconds":3600,
 *               "users":[{"user":"alice","average":{"cpu":"1500m","memory":"2Gi"}}]}]}
 * Quantities are Kubernetes' canonical form. */
json_t *kq_fairshare_dump(kq_fairshare_t *fs, double now, size_t *pairs);

/* Merges a document written by kq_fairshare_dump (perhaps by another replica, perhaps
 * long ago): each average is decayed from "updated" to now with its queue's half-life
 * here (toward zero: what ran while nobody watched is not known), and a pair's average
 * becomes the larger of the two per resource. Validates the whole document first: on
 * error returns KQ_EPARSE (KQ_ERANGE for limits) with what and where in err, and changes
 * nothing. *merged (if non-NULL) counts the pairs merged. */
int kq_fairshare_load(kq_fairshare_t *fs, const json_t *doc, double now, size_t *merged, char *err,
                      size_t errlen) KQ_WUR;

/* The same from text (JSON). */
int kq_fairshare_load_text(kq_fairshare_t *fs, const char *text, size_t len, double now, size_t *merged,
                           char *err, size_t errlen) KQ_WUR;

#endif
