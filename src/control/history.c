/* Usage over time for the dashboard: a fixed ring of samples per queue and per user, and
 * the denials of the last hour in one-minute buckets. See history.h for the bounds.
 *
 * DESIGN: h->mu (a leaf lock, never held while calling out) guards times, ticks, series,
 * n_series, dropped, buckets and last_denials. A sample builds the ugm's views with no lock
 * of ours held (the ugm takes its own), reduces them to numbers in a local array, then
 * pushes those under h->mu. Readers copy a series (at most `points` samples) under h->mu and
 * build JSON from the copy after unlocking. The sampler thread sleeps on h->cond (with
 * h->mu) between samples, so kq_history_free wakes it at once.
 */
#include "kubequota/control/history.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#define NVAL 3 /* vcore, memory, pods */
#define MINUTES 60

static const char *const VAL_NAMES[NVAL] = {"vcore", "memory", "pods"};

typedef struct series {
    char *key;            /* "q:" or "u:" then the name */
    uint64_t first;       /* first tick sampled */
    uint64_t last_seen;   /* last tick the name was in the view */
    uint64_t last_used;   /* last tick with anything used */
    bool used_ever;
    int64_t *vals;        /* points x NVAL */
    UT_hash_handle hh;
} series_t;

typedef struct row {
    char *key;
    int64_t v[NVAL];
} row_t;

typedef struct rows {
    row_t *v;
    size_t n, cap;
} rows_t;

struct kq_history {
    kq_ugm_t *ugm;
    long interval_ms;
    size_t points, max_series;
    kq_history_count_fn denials;
    void *denials_ud;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t thread;
    bool started, stop;
    double *times;        /* points: wall-clock seconds of each tick's sample */
    uint64_t ticks;       /* samples taken */
    series_t *series;
    size_t n_series;
    unsigned long dropped;
    long bucket_minute[MINUTES];
    unsigned long bucket_count[MINUTES];
    unsigned long last_denials;
};

/* ------------------------------------------------------------------ sampling */

static int rows_add(rows_t *r, const char *prefix, const char *name, json_t *res)
{
    if (name == NULL)
        return 0;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        row_t *v = realloc(r->v, cap * sizeof(*v));
        if (v == NULL)
            return KQ_ENOMEM;
        r->v = v;
        r->cap = cap;
    }
    row_t *x = &r->v[r->n];
    size_t len = strlen(prefix) + strlen(name) + 1;
    if ((x->key = malloc(len)) == NULL)
        return KQ_ENOMEM;
    strcpy(x->key, prefix);
    strcat(x->key, name);
    for (int i = 0; i < NVAL; i++)
        x->v[i] = (int64_t)json_integer_value(json_object_get(res, VAL_NAMES[i]));
    r->n++;
    return 0;
}

static int add_queue(rows_t *r, json_t *q)
{
    if (!json_is_object(q))
        return 0;
    int rc = rows_add(r, "q:", json_string_value(json_object_get(q, "queuename")),
                      json_object_get(q, "allocatedResource"));
    json_t *c;
    size_t i;
    json_array_foreach(json_object_get(q, "children"), i, c) {
        if (rc == 0)
            rc = add_queue(r, c);
    }
    return rc;
}

static int add_user(void *ctx, json_t *u)
{
    json_t *root = json_object_get(u, "queues");
    return rows_add(ctx, "u:", json_string_value(json_object_get(u, "userName")),
                    json_object_get(root, "resourceUsage"));
}

static void drop_series(kq_history_t *h, series_t *s)
{
    HASH_DEL(h->series, s);
    h->n_series--;
    free(s->key);
    free(s->vals);
    free(s);
}

static void add_denials(kq_history_t *h, unsigned long now_count, double now)
{
    unsigned long d = now_count >= h->last_denials ? now_count - h->last_denials : 0;
    h->last_denials = now_count;
    long minute = (long)(now / 60.0);
    size_t b = (size_t)(minute % MINUTES);
    if (h->bucket_minute[b] != minute) {
        h->bucket_minute[b] = minute;
        h->bucket_count[b] = 0;
    }
    h->bucket_count[b] += d;
}

void kq_history_sample(kq_history_t *h, double now)
{
    if (h == NULL)
        return;
    rows_t r = {0};
    json_t *queues = kq_ugm_queues_json(h->ugm); /* the ugm's locks, none of ours */
    int rc = queues != NULL ? add_queue(&r, queues) : 0;
    json_decref(queues);
    if (rc == 0)
        rc = kq_ugm_users_each(h->ugm, add_user, &r);
    unsigned long denials = h->denials != NULL ? h->denials(h->denials_ud) : 0;

    pthread_mutex_lock(&h->mu);
    uint64_t tick = h->ticks;
    size_t slot = (size_t)(tick % h->points);
    h->times[slot] = now;
    for (size_t i = 0; i < r.n; i++) {
        series_t *s = NULL;
        HASH_FIND_STR(h->series, r.v[i].key, s);
        bool used = r.v[i].v[0] != 0 || r.v[i].v[1] != 0 || r.v[i].v[2] != 0;
        if (s == NULL) {
            if (!used && r.v[i].key[0] == 'u')
                continue; /* a user with nothing used takes no slot */
            if (h->n_series >= h->max_series) {
                h->dropped++;
                continue;
            }
            if ((s = calloc(1, sizeof(*s))) == NULL ||
                (s->vals = calloc(h->points * NVAL, sizeof(int64_t))) == NULL) {
                free(s);
                continue;
            }
            s->key = r.v[i].key;
            r.v[i].key = NULL; /* the series owns it now */
            s->first = tick;
            HASH_ADD_KEYPTR(hh, h->series, s->key, strlen(s->key), s);
            h->n_series++;
        }
        memcpy(&s->vals[slot * NVAL], r.v[i].v, sizeof(r.v[i].v));
        s->last_seen = tick;
        if (used) {
            s->last_used = tick;
            s->used_ever = true;
        }
    }
    series_t *s, *tmp;
    HASH_ITER(hh, h->series, s, tmp) {
        if (s->last_seen != tick)
            memset(&s->vals[slot * NVAL], 0, NVAL * sizeof(int64_t));
        uint64_t idle_since = s->used_ever ? s->last_used : s->first;
        bool idle = tick - idle_since >= h->points;
        /* a user idle for a whole window; a queue gone from the view and idle as long */
        if (idle && (s->key[0] == 'u' || s->last_seen != tick))
            drop_series(h, s);
    }
    add_denials(h, denials, now);
    h->ticks++;
    pthread_mutex_unlock(&h->mu);

    for (size_t i = 0; i < r.n; i++)
        free(r.v[i].key);
    free(r.v);
}

/* ------------------------------------------------------------------ thread */

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *sampler_main(void *arg)
{
    kq_history_t *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        pthread_mutex_unlock(&h->mu);
        kq_history_sample(h, wall_now());
        pthread_mutex_lock(&h->mu);
        if (h->stop)
            break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (h->interval_ms % 1000) * 1000000L;
        until.tv_sec += h->interval_ms / 1000 + ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        while (!h->stop && pthread_cond_timedwait(&h->cond, &h->mu, &until) == 0)
            ; /* woken without stop (spurious): keep waiting until the deadline */
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ------------------------------------------------------------------ public API */

kq_history_t *kq_history_new(kq_ugm_t *ugm, const kq_history_opts_t *o)
{
    if (ugm == NULL || o == NULL || o->interval_ms <= 0 || o->points == 1 || o->points > KQ_HISTORY_POINTS ||
        o->max_series > KQ_HISTORY_SERIES)
        return NULL;
    kq_history_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->ugm = ugm;
    h->interval_ms = o->interval_ms;
    h->points = o->points ? o->points : KQ_HISTORY_POINTS;
    h->max_series = o->max_series ? o->max_series : KQ_HISTORY_SERIES;
    h->denials = o->denials;
    h->denials_ud = o->denials_ud;
    if ((h->times = calloc(h->points, sizeof(double))) == NULL) {
        free(h);
        return NULL;
    }
    for (size_t i = 0; i < MINUTES; i++)
        h->bucket_minute[i] = -1;
    h->last_denials = h->denials != NULL ? h->denials(h->denials_ud) : 0;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cond, NULL);
    return h;
}

int kq_history_start(kq_history_t *h)
{
    if (h == NULL)
        return KQ_EINVAL;
    pthread_mutex_lock(&h->mu);
    bool started = h->started;
    if (!started && pthread_create(&h->thread, NULL, sampler_main, h) == 0)
        h->started = started = true;
    pthread_mutex_unlock(&h->mu);
    return started ? 0 : KQ_ENOMEM;
}

void kq_history_free(kq_history_t *h)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    bool started = h->started;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->mu);
    if (started)
        pthread_join(h->thread, NULL);
    series_t *s, *tmp;
    HASH_ITER(hh, h->series, s, tmp) {
        drop_series(h, s);
    }
    free(h->times);
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

json_t *kq_history_summary_json(kq_history_t *h, double now)
{
    unsigned long denials = h->denials != NULL ? h->denials(h->denials_ud) : 0;
    long minute = (long)(now / 60.0);
    pthread_mutex_lock(&h->mu);
    unsigned long last_hour = denials >= h->last_denials ? denials - h->last_denials : 0;
    for (size_t i = 0; i < MINUTES; i++)
        if (h->bucket_minute[i] > minute - MINUTES && h->bucket_minute[i] <= minute)
            last_hour += h->bucket_count[i];
    size_t n = 0;
    char **names = malloc((h->n_series ? h->n_series : 1) * sizeof(char *));
    series_t *s, *tmp;
    if (names != NULL)
        HASH_ITER(hh, h->series, s, tmp) {
            if ((names[n] = strdup(s->key)) != NULL)
                n++;
        }
    uint64_t ticks = h->ticks;
    unsigned long dropped = h->dropped;
    pthread_mutex_unlock(&h->mu);

    qsort(names, n, sizeof(char *), cmp_str);
    json_t *qs = json_array(), *us = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(names[i][0] == 'q' ? qs : us, json_string(names[i] + 2));
        free(names[i]);
    }
    free(names);
    double interval = (double)h->interval_ms / 1000.0;
    return json_pack("{s:f,s:I,s:f,s:I,s:I,s:I,s:I,s:o,s:o}", "intervalSeconds", interval, "points",
                     (json_int_t)h->points, "windowSeconds", interval * (double)h->points, "maxSeries",
                     (json_int_t)h->max_series, "samples", (json_int_t)(ticks < h->points ? ticks : h->points),
                     "seriesDropped", (json_int_t)dropped, "denialsLastHour", (json_int_t)last_hour, "queues", qs,
                     "users", us);
}

json_t *kq_history_series_json(kq_history_t *h, const char *kind, const char *name, bool *found)
{
    *found = false;
    const char *prefix = strcmp(kind, "queue") == 0 ? "q:" : strcmp(kind, "user") == 0 ? "u:" : NULL;
    if (prefix == NULL || name == NULL)
        return NULL;
    size_t klen = strlen(name) + 3;
    char *key = malloc(klen);
    double *t = malloc(h->points * sizeof(double));
    int64_t *v = malloc(h->points * NVAL * sizeof(int64_t));
    if (key == NULL || t == NULL || v == NULL) {
        free(key);
        free(t);
        free(v);
        return NULL;
    }
    strcpy(key, prefix);
    strcat(key, name);
    size_t n = 0;
    pthread_mutex_lock(&h->mu);
    series_t *s = NULL;
    HASH_FIND_STR(h->series, key, s);
    if (s != NULL) {
        *found = true;
        uint64_t from = h->ticks > h->points ? h->ticks - h->points : 0;
        if (from < s->first)
            from = s->first;
        for (uint64_t k = from; k < h->ticks; k++, n++) {
            size_t slot = (size_t)(k % h->points);
            t[n] = h->times[slot];
            memcpy(&v[n * NVAL], &s->vals[slot * NVAL], NVAL * sizeof(int64_t));
        }
    }
    pthread_mutex_unlock(&h->mu);
    free(key);

    json_t *o = NULL;
    if (*found) {
        json_t *pts = json_array();
        for (size_t i = 0; pts != NULL && i < n; i++)
            json_array_append_new(pts, json_pack("{s:f,s:I,s:I,s:I}", "time", t[i], "vcore", (json_int_t)v[i * NVAL],
                                                 "memory", (json_int_t)v[i * NVAL + 1], "pods",
                                                 (json_int_t)v[i * NVAL + 2]));
        o = json_pack("{s:s,s:s,s:f,s:o}", "kind", kind, "name", name, "intervalSeconds",
                      (double)h->interval_ms / 1000.0, "points", pts);
    }
    free(t);
    free(v);
    return o;
}
