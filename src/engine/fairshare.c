/* Usage history for the admission gate's usage policy: see include/kubequota/engine/fairshare.h. */
#include "kubequota/engine/fairshare.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#include "kubequota/base/log.h"

typedef struct fs_queue fs_queue_t;

typedef struct fs_pair {
    char *user; /* key within its queue */
    UT_hash_handle hh;
    fs_queue_t *q;
    kq_resource_t cur, avg;
    double t;                     /* wall-clock seconds avg was last brought up to */
    bool changed;                 /* on the changed list */
    struct fs_pair *next_changed;
} fs_pair_t;

struct fs_queue {
    char *path; /* key */
    UT_hash_handle hh;
    double halflife; /* seconds; 0: no history */
    bool tracked;    /* keeps history (given a half-life, or loaded): averaged and dumped */
    uint64_t mark;   /* the tracking generation that last gave it a half-life */
    fs_pair_t *pairs;
};

struct kq_fairshare {
    pthread_mutex_t mu; /* guards everything below */
    double default_halflife;
    fs_queue_t *queues;
    fs_pair_t *changed; /* linked through next_changed */
    uint64_t gen;       /* tracking generation (kq_fairshare_track_begin) */
};

double kq_fairshare_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

kq_fairshare_t *kq_fairshare_new(double default_halflife_s)
{
    if (!(default_halflife_s >= 0) || !isfinite(default_halflife_s))
        return NULL;
    kq_fairshare_t *fs = calloc(1, sizeof(*fs));
    if (fs == NULL)
        return NULL;
    if (pthread_mutex_init(&fs->mu, NULL) != 0) {
        free(fs);
        return NULL;
    }
    fs->default_halflife = default_halflife_s;
    return fs;
}

static void pair_free(fs_pair_t *p)
{
    free(p->user);
    kq_resource_free(&p->cur);
    kq_resource_free(&p->avg);
    free(p);
}

static void queue_free(fs_queue_t *q)
{
    fs_pair_t *p, *tmp;
    HASH_ITER(hh, q->pairs, p, tmp) {
        HASH_DEL(q->pairs, p);
        pair_free(p);
    }
    free(q->path);
    free(q);
}

void kq_fairshare_free(kq_fairshare_t *fs)
{
    if (fs == NULL)
        return;
    fs_queue_t *q, *tmp;
    HASH_ITER(hh, fs->queues, q, tmp) {
        HASH_DEL(fs->queues, q);
        queue_free(q);
    }
    pthread_mutex_destroy(&fs->mu);
    free(fs);
}

/* ---- helpers (lock held) ---- */

static fs_queue_t *queue_get(kq_fairshare_t *fs, const char *path, bool create)
{
    fs_queue_t *q;
    HASH_FIND_STR(fs->queues, path, q);
    if (q != NULL || !create)
        return q;
    if ((q = calloc(1, sizeof(*q))) == NULL || (q->path = strdup(path)) == NULL) {
        free(q);
        return NULL;
    }
    q->halflife = fs->default_halflife;
    HASH_ADD_KEYPTR(hh, fs->queues, q->path, strlen(q->path), q);
    return q;
}

static fs_pair_t *pair_get(fs_queue_t *q, const char *user, double now, bool create)
{
    fs_pair_t *p;
    HASH_FIND_STR(q->pairs, user, p);
    if (p != NULL || !create)
        return p;
    if ((p = calloc(1, sizeof(*p))) == NULL || (p->user = strdup(user)) == NULL) {
        free(p);
        return NULL;
    }
    p->q = q;
    p->t = now;
    HASH_ADD_KEYPTR(hh, q->pairs, p->user, strlen(p->user), p);
    return p;
}

static int64_t round_units(double v)
{
    if (!(v > 0))
        return 0;
    if (v >= 9.2e18)
        return INT64_MAX;
    return llround(v);
}

/* *avg moved toward cur over d seconds with half-life h: by the factor 2^(-d/h); h <= 0
 * makes it cur. No lock (values only). KQ_ENOMEM leaves *avg unchanged. */
static int decay(kq_resource_t *avg, const kq_resource_t *cur, double d, double h)
{
    if (!(h > 0))
        return kq_resource_copy(avg, cur);
    double f = exp2(-d / h);
    kq_resource_t n;
    kq_resource_init(&n);
    const kq_res_entry_t *a = KQ_RES_E(avg), *c = KQ_RES_E(cur);
    uint32_t i = 0, j = 0;
    while (i < avg->n || j < cur->n) { /* both sorted by strcmp(name): a merge walk */
        int cmp = i >= avg->n ? 1 : j >= cur->n ? -1 : a[i].name == c[j].name ? 0 : strcmp(a[i].name, c[j].name);
        const char *name = cmp <= 0 ? a[i].name : c[j].name;
        double av = cmp <= 0 ? (double)a[i].value : 0, cv = cmp >= 0 ? (double)c[j].value : 0;
        if (cmp <= 0)
            i++;
        if (cmp >= 0)
            j++;
        int64_t v = round_units(cv + (av - cv) * f);
        if ((v > 0 || cv > 0) && kq_resource_put(&n, name, v) != 0) {
            kq_resource_free(&n);
            return KQ_ENOMEM;
        }
    }
    kq_resource_move(avg, &n);
    kq_resource_free(&n);
    return 0;
}

/* Brings p->avg from p->t to now (lock held). KQ_ENOMEM leaves p unchanged. */
static int advance(fs_pair_t *p, double now)
{
    double d = now - p->t;
    if (!(d > 0)) /* no time, a clock stepped back, or NaN */
        return 0;
    if (decay(&p->avg, &p->cur, d, p->q->halflife) != 0)
        return KQ_ENOMEM;
    p->t = now;
    return 0;
}

static void mark_changed(kq_fairshare_t *fs, fs_pair_t *p)
{
    if (p->changed)
        return;
    p->changed = true;
    p->next_changed = fs->changed;
    fs->changed = p;
}

/* A queue starts keeping history: every pair's average starts from nothing now (lock held). */
static void start_history(kq_fairshare_t *fs, fs_queue_t *q, double now)
{
    q->tracked = true;
    fs_pair_t *p, *tmp;
    HASH_ITER(hh, q->pairs, p, tmp) {
        kq_resource_clear(&p->avg);
        p->t = now;
        mark_changed(fs, p);
    }
}

/* A pair of an untracked queue with nothing counted is dropped at once (lock held). */
static void drop_if_idle(fs_queue_t *q, fs_pair_t *p)
{
    if (!q->tracked && !p->changed && kq_resource_is_zero(&p->cur)) {
        HASH_DEL(q->pairs, p);
        pair_free(p);
    }
}

/* ---- API ---- */

void kq_fairshare_track_begin(kq_fairshare_t *fs)
{
    if (fs == NULL)
        return;
    pthread_mutex_lock(&fs->mu);
    fs->gen++;
    pthread_mutex_unlock(&fs->mu);
}

void kq_fairshare_track_end(kq_fairshare_t *fs)
{
    if (fs == NULL)
        return;
    pthread_mutex_lock(&fs->mu);
    fs_queue_t *q, *qt;
    HASH_ITER(hh, fs->queues, q, qt) {
        if (!q->tracked || q->mark == fs->gen)
            continue;
        q->tracked = false; /* no longer a usage queue: its history goes */
        fs_pair_t *p, *pt;
        HASH_ITER(hh, q->pairs, p, pt) {
            kq_resource_clear(&p->avg);
            drop_if_idle(q, p);
        }
    }
    pthread_mutex_unlock(&fs->mu);
}

int kq_fairshare_set_halflife(kq_fairshare_t *fs, const char *queue, double halflife_s, double now)
{
    if (fs == NULL || queue == NULL || !(halflife_s >= 0) || !isfinite(halflife_s))
        return KQ_EINVAL;
    pthread_mutex_lock(&fs->mu);
    int rc = 0;
    fs_queue_t *q = queue_get(fs, queue, true);
    if (q != NULL) {
        q->mark = fs->gen;
        if (!q->tracked)
            start_history(fs, q, now);
    }
    if (q == NULL) {
        rc = KQ_ENOMEM;
    } else if (q->halflife != halflife_s) {
        fs_pair_t *p, *tmp;
        HASH_ITER(hh, q->pairs, p, tmp) {
            if (advance(p, now) != 0)
                rc = KQ_ENOMEM;
            mark_changed(fs, p); /* its rank follows the new half-life */
        }
        q->halflife = halflife_s;
    }
    pthread_mutex_unlock(&fs->mu);
    return rc;
}

void kq_fairshare_change(kq_fairshare_t *fs, const char *queue, const char *user, const kq_resource_t *req,
                         int sign, double now)
{
    if (fs == NULL || queue == NULL || user == NULL || req == NULL || sign == 0)
        return;
    pthread_mutex_lock(&fs->mu);
    fs_queue_t *q = queue_get(fs, queue, true);
    fs_pair_t *p = q ? pair_get(q, user, now, true) : NULL;
    int rc = p == NULL ? KQ_ENOMEM : q->tracked ? advance(p, now) : 0;
    if (rc == 0) {
        if (sign > 0)
            rc = kq_resource_add(&p->cur, req);
        else
            (void)kq_resource_sub(&p->cur, req);
        if (!q->tracked) { /* the current usage only: no history, nobody ranked by it */
            p->t = now;
            drop_if_idle(q, p);
        } else {
            if (q->halflife <= 0 && rc == 0)
                rc = kq_resource_copy(&p->avg, &p->cur);
            mark_changed(fs, p);
        }
    }
    pthread_mutex_unlock(&fs->mu);
    if (rc != 0)
        kq_error("event=fairshare_change_failed queue=%s user=%s error=\"%s\"", queue, user, kq_strerror(rc));
}

int kq_fairshare_get(kq_fairshare_t *fs, const char *queue, const char *user, double now, kq_resource_t *current,
                     kq_resource_t *average)
{
    if (current != NULL)
        kq_resource_clear(current);
    if (average != NULL)
        kq_resource_clear(average);
    if (fs == NULL || queue == NULL || user == NULL)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&fs->mu);
    fs_queue_t *q = queue_get(fs, queue, false);
    fs_pair_t *p = q ? pair_get(q, user, now, false) : NULL;
    if (p != NULL) {
        rc = q->tracked ? advance(p, now) : 0;
        if (rc == 0 && current != NULL)
            rc = kq_resource_copy(current, &p->cur);
        if (rc == 0 && average != NULL)
            rc = kq_resource_copy(average, &p->avg);
    }
    pthread_mutex_unlock(&fs->mu);
    return rc;
}

int kq_fairshare_usage(kq_fairshare_t *fs, const char *queue, const char *user, double now, kq_resource_t *usage)
{
    kq_resource_t cur;
    kq_resource_init(&cur);
    int rc = kq_fairshare_get(fs, queue, user, now, &cur, usage);
    if (rc == 0)
        rc = kq_resource_max(usage, &cur);
    kq_resource_free(&cur);
    return rc;
}

double kq_fairshare_dominant(const kq_resource_t *usage, const kq_resource_t *caps)
{
    double best = -1;
    const kq_res_entry_t *c = KQ_RES_E(caps);
    for (uint32_t i = 0; i < caps->n; i++) {
        if (c[i].value <= 0)
            continue;
        double s = (double)kq_resource_get(usage, c[i].name, NULL) / (double)c[i].value;
        if (s > best)
            best = s;
    }
    return best;
}

int kq_fairshare_tracked(kq_fairshare_t *fs, char ***paths, size_t *n)
{
    *paths = NULL;
    *n = 0;
    if (fs == NULL)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&fs->mu);
    size_t cnt = 0;
    fs_queue_t *q, *qt;
    HASH_ITER(hh, fs->queues, q, qt) {
        cnt += q->tracked;
    }
    char **v = cnt ? calloc(cnt, sizeof(*v)) : NULL;
    if (cnt > 0 && v == NULL)
        rc = KQ_ENOMEM;
    HASH_ITER(hh, fs->queues, q, qt) {
        if (rc != 0 || !q->tracked)
            continue;
        if ((v[*n] = strdup(q->path)) == NULL)
            rc = KQ_ENOMEM;
        else
            (*n)++;
    }
    pthread_mutex_unlock(&fs->mu);
    if (rc != 0) {
        for (size_t i = 0; i < *n; i++)
            free(v[i]);
        free(v);
        *n = 0;
        return rc;
    }
    *paths = v;
    return 0;
}

bool kq_fairshare_tracks_any(kq_fairshare_t *fs)
{
    bool any = false;
    if (fs == NULL)
        return false;
    pthread_mutex_lock(&fs->mu);
    fs_queue_t *q, *qt;
    HASH_ITER(hh, fs->queues, q, qt) {
        if (q->tracked) {
            any = true;
            break;
        }
    }
    pthread_mutex_unlock(&fs->mu);
    return any;
}

int kq_fairshare_drain(kq_fairshare_t *fs, char ***keys, size_t *n)
{
    *keys = NULL;
    *n = 0;
    if (fs == NULL)
        return 0;
    pthread_mutex_lock(&fs->mu);
    size_t cnt = 0;
    for (fs_pair_t *p = fs->changed; p != NULL; p = p->next_changed)
        cnt++;
    char **v = cnt ? calloc(cnt, sizeof(*v)) : NULL;
    int rc = 0;
    if (cnt > 0 && v == NULL)
        rc = KQ_ENOMEM;
    size_t i = 0;
    for (fs_pair_t *p = fs->changed; rc == 0 && p != NULL; p = p->next_changed) {
        if (asprintf(&v[i], "%s\n%s", p->q->path, p->user) < 0) {
            v[i] = NULL;
            rc = KQ_ENOMEM;
            break;
        }
        i++;
    }
    if (rc != 0) {
        for (size_t k = 0; k < i; k++)
            free(v[k]);
        free(v);
    } else {
        for (fs_pair_t *p = fs->changed, *next; p != NULL; p = next) {
            next = p->next_changed;
            p->changed = false;
            p->next_changed = NULL;
        }
        fs->changed = NULL;
        *keys = v;
        *n = cnt;
    }
    pthread_mutex_unlock(&fs->mu);
    return rc;
}

/* ---- persistence ---- */

static json_t *quantities_json(const kq_resource_t *r)
{
    json_t *o = json_object();
    const kq_res_entry_t *e = KQ_RES_E(r);
    for (uint32_t i = 0; o != NULL && i < r->n; i++) {
        if (e[i].value <= 0)
            continue;
        char buf[64];
        kq_quantity_format(e[i].name, e[i].value, buf, sizeof(buf));
        if (json_object_set_new(o, e[i].name, json_string(buf)) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

static void format_time(double t, char *buf, size_t len)
{
    time_t s = (time_t)t;
    struct tm tm;
    if (gmtime_r(&s, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "1970-01-01T00:00:00Z");
}

/* A tracked pair as kq_fairshare_dump copies it under the lock, to do the arithmetic and
 * the JSON after unlocking (the ledger, on the bind path, waits for this lock). The user
 * name is borrowed: a tracked pair is freed only by kq_fairshare_dump and _track_end,
 * which run on one thread (fairshare.h). The resource entries go to one flat array. */
typedef struct snap {
    const fs_queue_t *q;
    const char *user;
    double t;
    size_t avg_at, avg_n, cur_at, cur_n; /* into the entries array */
} snap_t;

typedef struct snapshot {
    snap_t *v;
    size_t n;
    kq_res_entry_t *e;
    size_t ne, cap;
} snapshot_t;

static void snapshot_free(snapshot_t *s)
{
    free(s->v);
    free(s->e);
}

static int put_entries(snapshot_t *s, const kq_resource_t *r, size_t *at, size_t *n)
{
    if (s->ne + r->n > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        while (cap < s->ne + r->n)
            cap *= 2;
        kq_res_entry_t *e = realloc(s->e, cap * sizeof(*e));
        if (e == NULL)
            return KQ_ENOMEM;
        s->e = e;
        s->cap = cap;
    }
    *at = s->ne;
    *n = r->n;
    if (r->n > 0) /* an empty set: no entries array may exist yet */
        memcpy(s->e + s->ne, KQ_RES_E(r), r->n * sizeof(*s->e));
    s->ne += r->n;
    return 0;
}

/* Copies the tracked pairs (lock held). KQ_ENOMEM, or KQ_ERANGE when there are more than
 * KQ_FAIRSHARE_DUMP_MAX. */
static int snapshot(kq_fairshare_t *fs, snapshot_t *s)
{
    size_t total = 0;
    fs_queue_t *q, *qt;
    HASH_ITER(hh, fs->queues, q, qt) {
        if (q->tracked)
            total += HASH_COUNT(q->pairs);
    }
    if (total > KQ_FAIRSHARE_DUMP_MAX)
        return KQ_ERANGE;
    if ((s->v = malloc((total ? total : 1) * sizeof(*s->v))) == NULL)
        return KQ_ENOMEM;
    HASH_ITER(hh, fs->queues, q, qt) {
        if (!q->tracked)
            continue;
        fs_pair_t *p, *pt;
        HASH_ITER(hh, q->pairs, p, pt) {
            snap_t *x = &s->v[s->n++];
            x->q = q;
            x->user = p->user;
            x->t = p->t;
            if (put_entries(s, &p->avg, &x->avg_at, &x->avg_n) != 0 ||
                put_entries(s, &p->cur, &x->cur_at, &x->cur_n) != 0)
                return KQ_ENOMEM;
        }
    }
    return 0;
}

static int entries_to(const snapshot_t *s, size_t at, size_t n, kq_resource_t *out)
{
    kq_resource_clear(out);
    for (size_t i = 0; i < n; i++)
        if (kq_resource_put(out, s->e[at + i].name, s->e[at + i].value) != 0)
            return KQ_ENOMEM;
    return 0;
}

/* Drops the pairs the dump found empty, unless they changed since (lock held). */
static void drop_dead(kq_fairshare_t *fs, const snapshot_t *s, const bool *dead)
{
    for (size_t i = 0; i < s->n; i++) {
        if (!dead[i])
            continue;
        fs_queue_t *q = (fs_queue_t *)s->v[i].q;
        fs_pair_t *p;
        HASH_FIND_STR(q->pairs, s->v[i].user, p);
        if (p != NULL && !p->changed && p->t == s->v[i].t && kq_resource_is_zero(&p->cur)) {
            HASH_DEL(q->pairs, p);
            pair_free(p);
        }
    }
}

json_t *kq_fairshare_dump(kq_fairshare_t *fs, double now, size_t *pairs)
{
    if (pairs != NULL)
        *pairs = 0;
    char ts[32];
    format_time(now, ts, sizeof(ts));
    json_t *queues = json_array(), *users = NULL;
    json_t *doc = json_pack("{s:s,s:s,s:s}", "kind", "GatingUsage", "apiVersion", "kubequota.io/v1", "updated", ts);
    snapshot_t snap = {0};
    bool *dead = NULL;
    if (queues == NULL || doc == NULL || fs == NULL)
        goto fail;
    pthread_mutex_lock(&fs->mu);
    int rc = snapshot(fs, &snap);
    pthread_mutex_unlock(&fs->mu);
    if (pairs != NULL)
        *pairs = rc == KQ_ERANGE ? SIZE_MAX : snap.n;
    size_t n = snap.n;
    if (rc != 0 || (dead = calloc(n ? n : 1, sizeof(*dead))) == NULL)
        goto fail;
    kq_resource_t avg, cur;
    kq_resource_init(&avg);
    kq_resource_init(&cur);
    bool ok = true;
    for (size_t i = 0; ok && i <= n; i++) { /* snapshot order: queue by queue */
        if (i == n || i == 0 || snap.v[i].q != snap.v[i - 1].q) {
            if (users != NULL && json_array_size(users) > 0) {
                json_t *jq = json_pack("{s:s,s:f,s:O}", "queue", snap.v[i - 1].q->path, "halfLifeSeconds",
                                       snap.v[i - 1].q->halflife, "users", users);
                ok = jq != NULL && json_array_append_new(queues, jq) == 0;
            }
            json_decref(users);
            users = NULL;
            if (i == n)
                break;
            ok = ok && (users = json_array()) != NULL;
        }
        const snap_t *x = &snap.v[i];
        double d = now - x->t;
        if (!ok || entries_to(&snap, x->avg_at, x->avg_n, &avg) != 0 ||
            entries_to(&snap, x->cur_at, x->cur_n, &cur) != 0 ||
            (d > 0 && decay(&avg, &cur, d, x->q->halflife) != 0)) {
            ok = false;
            break;
        }
        if (kq_resource_is_zero(&avg)) {
            dead[i] = kq_resource_is_zero(&cur);
            continue;
        }
        json_t *ja = quantities_json(&avg);
        json_t *u = ja ? json_pack("{s:s,s:o}", "user", x->user, "average", ja) : NULL;
        ok = u != NULL && json_array_append_new(users, u) == 0;
    }
    json_decref(users);
    kq_resource_free(&avg);
    kq_resource_free(&cur);
    if (!ok)
        goto fail;
    pthread_mutex_lock(&fs->mu);
    drop_dead(fs, &snap, dead);
    pthread_mutex_unlock(&fs->mu);
    free(dead);
    snapshot_free(&snap);
    if (json_object_set_new(doc, "queues", queues) != 0) {
        json_decref(doc);
        return NULL;
    }
    return doc;
fail:
    free(dead);
    snapshot_free(&snap);
    json_decref(queues);
    json_decref(doc);
    return NULL;
}

/* "YYYY-MM-DDTHH:MM:SSZ" (RFC 3339 in UTC, as the dump writes it) to seconds. */
static bool parse_time(const char *s, double *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (end == NULL || *end != '\0')
        return false;
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return false;
    *out = (double)t;
    return true;
}

typedef struct loaded {
    const char *queue, *user;
    kq_resource_t avg;
} loaded_t;

static void loaded_free(loaded_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        kq_resource_free(&v[i].avg);
    free(v);
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= KQ_FAIRSHARE_NAME_MAX && strchr(s, '\n') == NULL;
}

/* Validates doc into v (names borrowed from doc). KQ_EPARSE/KQ_ERANGE/KQ_ENOMEM with err. */
static int validate(const json_t *doc, double *updated, loaded_t **out, size_t *nout, char *err, size_t errlen)
{
    *out = NULL;
    *nout = 0;
    if (!json_is_object(doc)) {
        kq_errf(err, errlen, "the document is not a JSON object");
        return KQ_EPARSE;
    }
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    if (kind == NULL || strcmp(kind, "GatingUsage") != 0) {
        kq_errf(err, errlen, "kind: expected \"GatingUsage\"");
        return KQ_EPARSE;
    }
    const char *ts = json_string_value(json_object_get(doc, "updated"));
    if (ts == NULL || !parse_time(ts, updated)) {
        kq_errf(err, errlen, "updated: expected a time like \"2026-01-02T03:04:05Z\"");
        return KQ_EPARSE;
    }
    const json_t *queues = json_object_get(doc, "queues");
    if (!json_is_array(queues)) {
        kq_errf(err, errlen, "queues: expected an array");
        return KQ_EPARSE;
    }
    size_t total = 0, cap = 0;
    loaded_t *v = NULL;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < json_array_size(queues); i++) {
        const json_t *jq = json_array_get(queues, i);
        const char *qp = json_string_value(json_object_get(jq, "queue"));
        const json_t *users = json_object_get(jq, "users");
        if (qp == NULL || !name_ok(qp)) {
            kq_errf(err, errlen, "queues[%zu].queue: expected a queue path", i);
            rc = KQ_EPARSE;
            break;
        }
        if (!json_is_array(users)) {
            kq_errf(err, errlen, "queues[%zu].users: expected an array", i);
            rc = KQ_EPARSE;
            break;
        }
        for (size_t k = 0; rc == 0 && k < json_array_size(users); k++) {
            const json_t *ju = json_array_get(users, k);
            const char *un = json_string_value(json_object_get(ju, "user"));
            const json_t *avg = json_object_get(ju, "average");
            if (un == NULL || !name_ok(un)) {
                kq_errf(err, errlen, "queues[%zu].users[%zu].user: expected a user name", i, k);
                rc = KQ_EPARSE;
                break;
            }
            if (!json_is_object(avg)) {
                kq_errf(err, errlen, "queues[%zu].users[%zu].average: expected an object of quantities", i, k);
                rc = KQ_EPARSE;
                break;
            }
            if (++total > KQ_FAIRSHARE_MAX_ENTRIES) {
                kq_errf(err, errlen, "more than %d users in all", KQ_FAIRSHARE_MAX_ENTRIES);
                rc = KQ_ERANGE;
                break;
            }
            if (*nout == cap) {
                size_t nc = cap ? 2 * cap : 16;
                loaded_t *nv = realloc(v, nc * sizeof(*nv));
                if (nv == NULL) {
                    rc = KQ_ENOMEM;
                    kq_errf(err, errlen, "out of memory");
                    break;
                }
                v = nv;
                cap = nc;
            }
            loaded_t *l = &v[(*nout)++];
            l->queue = qp;
            l->user = un;
            kq_resource_init(&l->avg);
            const char *rn;
            const json_t *jv;
            json_object_foreach((json_t *)avg, rn, jv) {
                const char *s = json_string_value(jv), *iname = kq_resource_name(rn);
                char why[256] = "";
                int64_t val = 0;
                if (iname == NULL) {
                    kq_errf(err, errlen, "queues[%zu].users[%zu].average: \"%.100s\" is not a resource name", i, k, rn);
                    rc = KQ_EPARSE;
                } else if (s == NULL) {
                    kq_errf(err, errlen, "queues[%zu].users[%zu].average.%s: expected a quantity string", i, k, iname);
                    rc = KQ_EPARSE;
                } else if ((rc = kq_quantity_parse(iname, s, &val, why, sizeof(why))) != 0) {
                    kq_errf(err, errlen, "queues[%zu].users[%zu].average.%s: %s", i, k, iname, why);
                } else if (kq_resource_get(&l->avg, iname, NULL) != 0) {
                    kq_errf(err, errlen, "queues[%zu].users[%zu].average.%s: given twice", i, k, iname);
                    rc = KQ_EPARSE;
                } else if ((rc = kq_resource_put(&l->avg, iname, val)) != 0) {
                    kq_errf(err, errlen, "out of memory");
                }
                if (rc != 0)
                    break;
            }
        }
    }
    if (rc != 0) {
        loaded_free(v, *nout);
        *nout = 0;
        return rc;
    }
    *out = v;
    return 0;
}

int kq_fairshare_load(kq_fairshare_t *fs, const json_t *doc, double now, size_t *merged, char *err, size_t errlen)
{
    if (merged != NULL)
        *merged = 0;
    if (fs == NULL)
        return KQ_EINVAL;
    double updated = 0;
    loaded_t *v = NULL;
    size_t n = 0;
    int rc = validate(doc, &updated, &v, &n, err, errlen);
    if (rc != 0)
        return rc;
    double age = now - updated;
    if (!(age > 0))
        age = 0;
    pthread_mutex_lock(&fs->mu);
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        fs_queue_t *q = queue_get(fs, v[i].queue, true);
        if (q != NULL && !q->tracked) /* kept until the configuration says it is no usage queue */
            start_history(fs, q, now);
        fs_pair_t *p = q ? pair_get(q, v[i].user, now, true) : NULL;
        if (p == NULL || advance(p, now) != 0) {
            rc = KQ_ENOMEM;
            continue;
        }
        /* what the document says, decayed toward zero over the time since it was written */
        double f = q->halflife > 0 ? exp2(-age / q->halflife) : 0;
        kq_resource_t d;
        kq_resource_init(&d);
        const kq_res_entry_t *e = KQ_RES_E(&v[i].avg);
        for (uint32_t k = 0; k < v[i].avg.n; k++) {
            int64_t x = round_units((double)e[k].value * f);
            if (x > 0 && kq_resource_put(&d, e[k].name, x) != 0)
                rc = KQ_ENOMEM;
        }
        if (kq_resource_max(&p->avg, &d) != 0)
            rc = KQ_ENOMEM;
        kq_resource_free(&d);
        mark_changed(fs, p);
        done++;
    }
    pthread_mutex_unlock(&fs->mu);
    loaded_free(v, n);
    if (merged != NULL)
        *merged = done;
    if (rc != 0)
        kq_errf(err, errlen, "out of memory");
    return rc;
}

int kq_fairshare_load_text(kq_fairshare_t *fs, const char *text, size_t len, double now, size_t *merged, char *err,
                           size_t errlen)
{
    if (merged != NULL)
        *merged = 0;
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (doc == NULL) {
        kq_errf(err, errlen, "not JSON: %s at line %d column %d", je.text, je.line, je.column);
        return KQ_EPARSE;
    }
    int rc = kq_fairshare_load(fs, doc, now, merged, err, errlen);
    json_decref(doc);
    return rc;
}
