/* Error codes and diagnostic lists shared by every module. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* vasprintf */
#endif
#include "kubequota/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *kq_strerror(int err)
{
    switch (err) {
    case KQ_OK:
        return "success";
#define KQ_ERRNO_CASE(name, val, text) \
    case KQ_##name:                    \
        return text;
        KQ_ERRNO_MAP(KQ_ERRNO_CASE)
#undef KQ_ERRNO_CASE
    }
    return "unknown error";
}

void kq_diags_init(kq_diags_t *d)
{
    d->v = NULL;
    d->n = d->cap = 0;
}

void kq_diags_free(kq_diags_t *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->v[i].file);
        free(d->v[i].where);
        free(d->v[i].text);
    }
    free(d->v);
    kq_diags_init(d);
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

int kq_diags_add(kq_diags_t *d, const char *file, int line, int column, const char *where,
                 const char *fmt, ...)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        kq_diag_t *v = realloc(d->v, cap * sizeof(*v));
        if (v == NULL)
            return KQ_ENOMEM;
        d->v = v;
        d->cap = cap;
    }
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (rc < 0)
        return KQ_ENOMEM;
    kq_diag_t *x = &d->v[d->n];
    x->file = dup_or_null(file);
    x->where = dup_or_null(where);
    x->text = text;
    x->line = line;
    x->column = column;
    if ((file && !x->file) || (where && !x->where)) {
        free(x->file);
        free(x->where);
        free(x->text);
        return KQ_ENOMEM;
    }
    d->n++;
    return 0;
}

size_t kq_diag_format(const kq_diag_t *d, char *buf, size_t len)
{
    char pos[64] = "";
    if (d->line > 0 && d->column > 0)
        snprintf(pos, sizeof(pos), ":%d:%d", d->line, d->column);
    else if (d->line > 0)
        snprintf(pos, sizeof(pos), ":%d", d->line);
    int n = snprintf(buf, len, "%s%s%s%s%s%s", d->file ? d->file : "", d->file ? pos : "",
                     d->file ? ": " : "", d->where ? d->where : "", d->where ? ": " : "", d->text);
    return n < 0 ? 0 : (size_t)n;
}

char *kq_diags_join(const kq_diags_t *d, const char *sep)
{
    size_t total = 1, seplen = strlen(sep);
    for (size_t i = 0; i < d->n; i++)
        total += kq_diag_format(&d->v[i], NULL, 0) + seplen;
    char *out = malloc(total), *p = out;
    if (out == NULL)
        return NULL;
    *p = '\0';
    for (size_t i = 0; i < d->n; i++) {
        if (i > 0) {
            memcpy(p, sep, seplen);
            p += seplen;
        }
        p += kq_diag_format(&d->v[i], p, total - (size_t)(p - out));
    }
    *p = '\0';
    return out;
}

void kq_errf(char *buf, size_t len, const char *fmt, ...)
{
    if (buf == NULL || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}
