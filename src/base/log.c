/* Leveled, structured logging to stderr: klog text or JSON lines (include/kubequota/log.h).
 *
 * DESIGN: a call site formats its body (message words + key=value pairs) into a stack
 * buffer; kq_log_render() splits it into message and keys and writes one line of the
 * chosen format. Each line goes out with a single write() so lines from different
 * threads never interleave. The format and verbosity are set once in main before any
 * thread starts and only read afterwards. The limiter has one private mutex, a leaf lock
 * (nothing is called under it).
 *
 * Formats follow Kubernetes' component logs (kubernetes.io/docs/concepts/cluster-administration/
 * system-logs/): text is klog's "Lmmdd hh:mm:ss.uuuuuu pid file:line] "msg" key=value";
 * JSON has "ts" (seconds since the epoch), "caller", "v" and "msg", then the keys.
 * Deliberate difference: text values are quoted only when they need it (logfmt), so
 * `grep event=bind` works on both old and new logs.
 */
#include "kubequota/base/log.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int kq_log_level_current = KQ_LOG_INFO;
int kq_log_verbosity = 0;
static kq_log_format_t log_format = KQ_LOG_TEXT;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int kq_log_set_level(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            kq_log_level_current = i;
            if (i == KQ_LOG_DEBUG && kq_log_verbosity < KQ_LOG_DEBUG_V)
                kq_log_verbosity = KQ_LOG_DEBUG_V;
            return 0;
        }
    }
    return KQ_EINVAL;
}

int kq_log_set_verbosity(int v)
{
    if (v < 0 || v > 10)
        return KQ_EINVAL;
    kq_log_verbosity = v;
    if (v >= KQ_LOG_DEBUG_V)
        kq_log_level_current = KQ_LOG_DEBUG;
    else if (kq_log_level_current > KQ_LOG_INFO)
        kq_log_level_current = KQ_LOG_INFO;
    return 0;
}

int kq_log_set_format(const char *name)
{
    if (strcmp(name, "text") == 0)
        log_format = KQ_LOG_TEXT;
    else if (strcmp(name, "json") == 0)
        log_format = KQ_LOG_JSON;
    else
        return KQ_EINVAL;
    return 0;
}

kq_log_format_t kq_log_get_format(void)
{
    return log_format;
}

/* ======================================================================== */
/* parsing a body                                                           */
/* ======================================================================== */

#define MAX_KEYS 48

typedef struct span {
    const char *p;
    size_t n;
    bool quoted; /* p..n is the inside of a "..." value, escapes still in it */
} span_t;

typedef struct kv {
    span_t k, v;
} kv_t;

typedef struct parsed {
    kv_t kv[MAX_KEYS];
    size_t n;
    span_t words[MAX_KEYS]; /* message words outside key=value pairs, in order */
    size_t nwords;
    span_t msg;             /* msg= value, when present */
    bool has_msg;
    span_t event;
    bool has_event;
    const char *body;      /* the body parsed */
    const char *prose_end; /* words came after a key: the message is the body up to here */
} parsed_t;

static bool key_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && ((c >= '0' && c <= '9') || c == '.' || c == '-'));
}

/* s points at a token; true when it starts with key= (and sets the key's length). */
static bool is_key(const char *s, size_t *klen)
{
    size_t i = 0;
    if (!key_char(s[0], true))
        return false;
    while (key_char(s[i], i == 0))
        i++;
    if (s[i] != '=')
        return false;
    *klen = i;
    return true;
}

/* after a '"': only spaces up to the end, or spaces then key= */
static bool closes(const char *s)
{
    size_t klen;
    if (*s == '\0')
        return true;
    if (*s != ' ') /* "a "b=c" d": the quote before b opens a quotation inside the value */
        return false;
    while (*s == ' ')
        s++;
    return *s == '\0' || is_key(s, &klen);
}

static void parse_body(const char *s, parsed_t *p)
{
    memset(p, 0, sizeof(*p));
    p->body = s;
    while (*s) {
        while (*s == ' ')
            s++;
        if (*s == '\0')
            break;
        size_t klen;
        if (is_key(s, &klen)) {
            span_t k = {s, klen, false}, v;
            s += klen + 1;
            if (*s == '"') {
                /* the closing quote is one followed by the end or by another key=: call
                 * sites pass texts such as reasons that hold quotes of their own */
                const char *start = ++s;
                while (*s && !(*s == '"' && closes(s + 1))) {
                    if (*s == '\\' && s[1])
                        s++;
                    s++;
                }
                v = (span_t){start, (size_t)(s - start), true};
                if (*s == '"')
                    s++;
            } else {
                const char *start = s;
                while (*s && *s != ' ')
                    s++;
                v = (span_t){start, (size_t)(s - start), false};
            }
            if (klen == 3 && memcmp(k.p, "msg", 3) == 0 && !p->has_msg) {
                p->msg = v;
                p->has_msg = true;
                continue;
            }
            if (klen == 5 && memcmp(k.p, "event", 5) == 0 && !p->has_event) {
                p->event = v;
                p->has_event = true;
            }
            if (p->n < MAX_KEYS)
                p->kv[p->n++] = (kv_t){k, v};
            continue;
        }
        const char *start = s;
        while (*s && *s != ' ')
            s++;
        if (p->n > 0 || p->has_msg) /* prose around a key=value: keep the sentence whole */
            p->prose_end = s;
        if (p->nwords < MAX_KEYS)
            p->words[p->nwords++] = (span_t){start, (size_t)(s - start), false};
    }
}

/* ======================================================================== */
/* output                                                                   */
/* ======================================================================== */

typedef struct out {
    char *b;
    size_t cap, n; /* cap excludes room kept for "\n" (and "}" in JSON) + NUL */
    bool cut;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->n + n > o->cap) {
        n = o->cap - o->n;
        o->cut = true;
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
}

static void puts_(out_t *o, const char *s)
{
    put(o, s, strlen(s));
}

static void putc_(out_t *o, char c)
{
    put(o, &c, 1);
}

/* The text of a span, escapes of a quoted value undone, JSON-escaped. */
static void put_json_str(out_t *o, span_t s)
{
    putc_(o, '"');
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        if (s.quoted && c == '\\' && i + 1 < s.n) {
            c = (unsigned char)s.p[++i];
            if (c == 'n' || c == 'r' || c == 't') { /* the escapes escape_of() writes */
                char e[2] = {'\\', (char)c};
                put(o, e, 2);
                continue;
            }
        }
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(o, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            char e[8];
            snprintf(e, sizeof(e), "\\u%04x", c);
            puts_(o, e);
        } else {
            putc_(o, (char)c);
        }
    }
    putc_(o, '"');
}

/* A plain token is written bare in text format; anything else is quoted. */
static bool plain_token(span_t s)
{
    if (s.n == 0)
        return false;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("_./:@,+-*%[]()", c) != NULL))
            return false;
    }
    return true;
}

static bool json_integer(span_t s)
{
    size_t i = 0;
    if (s.quoted || s.n == 0 || s.n > 18)
        return false;
    if (s.p[0] == '-')
        i++;
    if (i == s.n || (s.p[i] == '0' && s.n > i + 1))
        return false;
    for (; i < s.n; i++)
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
    return true;
}

static void put_text_value(out_t *o, span_t s)
{
    if (plain_token(s))
        put(o, s.p, s.n);
    else
        put_json_str(o, s);
}

/* The message: msg=, else the leading words, else the event name. Written as a JSON
 * string (klog quotes the message in text format too). */
static void put_message(out_t *o, const parsed_t *p)
{
    if (p->prose_end != NULL && !p->has_msg) {
        put_json_str(o, (span_t){p->body, (size_t)(p->prose_end - p->body), false});
        return;
    }
    if (p->has_msg && p->nwords == 0) {
        put_json_str(o, p->msg);
        return;
    }
    if (p->nwords == 0) {
        put_json_str(o, p->has_event ? p->event : (span_t){"", 0, false});
        return;
    }
    /* words (and msg after them): one string, spaces between */
    char buf[2048];
    size_t n = 0;
    for (size_t i = 0; i < p->nwords && n < sizeof(buf); i++) {
        size_t len = p->words[i].n;
        if (n + len + 1 > sizeof(buf))
            len = sizeof(buf) - n - 1;
        if (i > 0)
            buf[n++] = ' ';
        if (n + len > sizeof(buf))
            break;
        memcpy(buf + n, p->words[i].p, len);
        n += len;
    }
    /* a trailing ':' of "module:" prefix alone reads badly; keep it, it names the module */
    if (p->has_msg && n + 2 < sizeof(buf)) {
        buf[n++] = ':';
        buf[n++] = ' ';
        size_t len = p->msg.n < sizeof(buf) - n ? p->msg.n : sizeof(buf) - n;
        memcpy(buf + n, p->msg.p, len);
        n += len;
        put_json_str(o, (span_t){buf, n, p->msg.quoted});
        return;
    }
    put_json_str(o, (span_t){buf, n, false});
}

static bool reserved_key(span_t k)
{
    static const char *const names[] = {"ts", "caller", "v", "level", "msg"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i]) == k.n && memcmp(names[i], k.p, k.n) == 0)
            return true;
    return false;
}

static const char *base_name(const char *file)
{
    const char *slash = file ? strrchr(file, '/') : NULL;
    return slash ? slash + 1 : file ? file : "?";
}

size_t kq_log_render(char *buf, size_t cap, kq_log_format_t fmt, int level, int v, const struct timespec *ts,
                     const char *file, int line, const char *body)
{
    if (cap < 4) {
        if (cap > 0)
            buf[0] = '\0';
        return 0;
    }
    struct timespec now;
    if (ts == NULL) {
        clock_gettime(CLOCK_REALTIME, &now);
        ts = &now;
    }
    parsed_t *p = malloc(sizeof(*p));
    parsed_t local_fallback;
    if (p == NULL) { /* keep logging when memory is short: a smaller parse on the stack */
        p = &local_fallback;
    }
    parse_body(body ? body : "", p);
    out_t o = {buf, cap - 3, 0, false};
    char tmp[96];
    if (level < KQ_LOG_ERROR)
        level = KQ_LOG_ERROR;
    if (level > KQ_LOG_DEBUG)
        level = KQ_LOG_DEBUG;
    if (fmt == KQ_LOG_JSON) {
        snprintf(tmp, sizeof(tmp), "{\"ts\":%lld.%03ld,\"caller\":", (long long)ts->tv_sec, ts->tv_nsec / 1000000);
        puts_(&o, tmp);
        snprintf(tmp, sizeof(tmp), "%s:%d", base_name(file), line);
        put_json_str(&o, (span_t){tmp, strlen(tmp), false});
        if (level == KQ_LOG_ERROR) {
            puts_(&o, ",\"level\":\"error\"");
        } else {
            if (level == KQ_LOG_WARN)
                puts_(&o, ",\"level\":\"warning\"");
            snprintf(tmp, sizeof(tmp), ",\"v\":%d", v);
            puts_(&o, tmp);
        }
        size_t mark = o.n;
        puts_(&o, ",\"msg\":");
        put_message(&o, p);
        if (o.cut) { /* even the message does not fit: say so, keep the object whole */
            o.n = mark;
            o.cut = false;
            puts_(&o, ",\"msg\":\"(line too long)\"");
        }
        for (size_t i = 0; i < p->n && !o.cut; i++) {
            mark = o.n;
            putc_(&o, ',');
            if (reserved_key(p->kv[i].k)) {
                char k[80];
                snprintf(k, sizeof(k), "x_%.*s", (int)p->kv[i].k.n, p->kv[i].k.p);
                put_json_str(&o, (span_t){k, strlen(k), false});
            } else {
                put_json_str(&o, p->kv[i].k);
            }
            putc_(&o, ':');
            if (json_integer(p->kv[i].v))
                put(&o, p->kv[i].v.p, p->kv[i].v.n);
            else
                put_json_str(&o, p->kv[i].v);
            if (o.cut) /* a member that does not fit is left out whole */
                o.n = mark;
        }
        buf[o.n++] = '}';
    } else {
        static const char sev[] = "EWII";
        struct tm tm;
        gmtime_r(&ts->tv_sec, &tm);
        snprintf(tmp, sizeof(tmp), "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ", sev[level], tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts->tv_nsec / 1000, (int)getpid(), base_name(file),
                 line);
        puts_(&o, tmp);
        put_message(&o, p);
        for (size_t i = 0; i < p->n; i++) {
            putc_(&o, ' ');
            put(&o, p->kv[i].k.p, p->kv[i].k.n);
            putc_(&o, '=');
            put_text_value(&o, p->kv[i].v);
        }
    }
    buf[o.n++] = '\n';
    buf[o.n] = '\0';
    if (p != &local_fallback)
        free(p);
    return o.n;
}

/* ======================================================================== */
/* formatting a body from a call site's format and arguments               */
/* ======================================================================== */

/* Call sites print names that come from users' objects straight after key= (user=%s,
 * pod=%s/%s). Formatted by plain vsnprintf, a name with a space ends the value early and
 * its rest becomes junk keys; a name holding `" event=x` forges a key. So the writer walks
 * the format itself:
 *   - the text after key= up to the next space is one value (pod=%s/%s is one value);
 *     when that run holds a %s or %c and the result needs it (empty, space, '"', '\\', '=',
 *     a control character), the whole run is written in quotes, escaped as parse_body reads
 *     it back (\" \\ \n \r \t);
 *   - a %s or %c inside a value the format itself quotes (error="%s") is escaped the same
 *     way, without new quotes;
 *   - every conversion is formatted by snprintf from its own spec with an argument of the
 *     type the spec names, so numbers come out exactly as vsnprintf writes them.
 * A conversion the tables below do not know (%n, %ls, positional %1$s, ...) falls back to
 * vsnprintf of the whole body, as before. */

typedef struct wbuf {
    char *b;
    size_t cap, n; /* b[0..n) written; n < cap, room for the NUL is kept */
} wbuf_t;

/* the argument types a conversion consumes */
enum { A_BAD, A_INT, A_UINT, A_LONG, A_ULONG, A_LLONG, A_ULLONG, A_SIZE, A_INTMAX, A_UINTMAX, A_PTRDIFF,
       A_DOUBLE, A_LDOUBLE, A_STR, A_PTR, A_PCT };

/* length modifiers, longest first */
static const struct {
    const char *s;
    unsigned char len;
} length_mods[] = {{"hh", 1}, {"h", 2}, {"ll", 4}, {"l", 3}, {"z", 5}, {"j", 6}, {"t", 7}, {"L", 8}};

/* conversion classes */
enum { C_SIGNED, C_UNSIGNED, C_FLOAT, C_CHAR, C_STR, C_PTR, C_PCT, C_N };

/* [length][class] -> argument type; A_BAD: not handled here (wide %lc/%ls, %Ld, %hf ...) */
static const unsigned char arg_type[9][C_N] = {
    /*         signed     unsigned    float      char   str    ptr    pct */
    /* -  */ {A_INT, A_UINT, A_DOUBLE, A_INT, A_STR, A_PTR, A_PCT},
    /* hh */ {A_INT, A_UINT, A_BAD, A_BAD, A_BAD, A_BAD, A_BAD},
    /* h  */ {A_INT, A_UINT, A_BAD, A_BAD, A_BAD, A_BAD, A_BAD},
    /* l  */ {A_LONG, A_ULONG, A_DOUBLE, A_BAD, A_BAD, A_BAD, A_BAD},
    /* ll */ {A_LLONG, A_ULLONG, A_BAD, A_BAD, A_BAD, A_BAD, A_BAD},
    /* z  */ {A_SIZE, A_SIZE, A_BAD, A_BAD, A_BAD, A_BAD, A_BAD},
    /* j  */ {A_INTMAX, A_UINTMAX, A_BAD, A_BAD, A_BAD, A_BAD, A_BAD},
    /* t  */ {A_PTRDIFF, A_PTRDIFF, A_BAD, A_BAD, A_BAD, A_BAD, A_BAD},
    /* L  */ {A_BAD, A_BAD, A_LDOUBLE, A_BAD, A_BAD, A_BAD, A_BAD},
};

static int conv_class(char c)
{
    static const char *const classes[C_N] = {"di", "uxXo", "fFeEgGaA", "c", "s", "p", "%"};
    for (int i = 0; i < C_N; i++)
        if (c != '\0' && strchr(classes[i], c) != NULL)
            return i;
    return -1;
}

/* the escape of c inside a quoted value, or 0 */
static char escape_of(unsigned char c)
{
    return c == '"' ? '"' : c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : 0;
}

static bool needs_quotes(const char *s, size_t n)
{
    if (n == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == 0x7f || c == '"' || c == '\\' || c == '=')
            return true;
    }
    return false;
}

/* Escapes w->b[from..n) in place, in quotes when quote is set. What does not fit is cut
 * at a whole character (never half an escape). */
static void escape_tail(wbuf_t *w, size_t from, bool quote)
{
    size_t room = w->cap - 1 - from, q = quote ? 2 : 0, grow = 0, k = 0;
    if (room < q) {
        w->n = from;
        return;
    }
    for (; from + k < w->n; k++) {
        size_t add = escape_of((unsigned char)w->b[from + k]) ? 1 : 0;
        if (k + 1 + grow + add + q > room)
            break;
        grow += add;
    }
    size_t end = from + k + grow + q; /* new w->n */
    size_t d = end;
    if (quote)
        w->b[--d] = '"';
    for (size_t i = k; i-- > 0;) { /* backwards: a character never moves left */
        char c = w->b[from + i], e = escape_of((unsigned char)c);
        if (e) {
            w->b[--d] = e;
            w->b[--d] = '\\';
        } else {
            w->b[--d] = c;
        }
    }
    if (quote)
        w->b[--d] = '"';
    w->n = end;
}

static void wput(wbuf_t *w, const char *s, size_t n)
{
    if (n > w->cap - 1 - w->n)
        n = w->cap - 1 - w->n;
    memcpy(w->b + w->n, s, n);
    w->n += n;
}

/* One conversion at *fmt (just past the '%'): formats it into w and advances *fmt.
 * Returns the conversion class, or -1 when it is not one this writer handles. */
static int put_conversion(wbuf_t *w, const char **fmt, va_list *ap)
{
    const char *p = *fmt;
    char spec[48];
    size_t sn = 0;
    spec[sn++] = '%';
    while (*p && strchr("-+ #0'", *p) != NULL && sn < 16)
        spec[sn++] = *p++;
    for (int part = 0; part < 2; part++) { /* width, then precision */
        if (part == 1) {
            if (*p != '.')
                break;
            p++;
        }
        if (*p == '*') {
            int v = va_arg(*ap, int);
            p++;
            if (v < -4096 || v > 4096) /* wider than any body: not worth a special case */
                return -1;
            if (part == 0 || v >= 0)
                sn += (size_t)snprintf(spec + sn, sizeof(spec) - sn, part ? ".%d" : "%d", v);
        } else {
            if (part == 1)
                spec[sn++] = '.';
            int digits = 0;
            while (*p >= '0' && *p <= '9') {
                if (++digits > 4)
                    return -1;
                spec[sn++] = *p++;
            }
            if (*p == '$') /* positional arguments */
                return -1;
        }
    }
    int len = 0;
    for (size_t i = 0; i < sizeof(length_mods) / sizeof(length_mods[0]); i++) {
        size_t l = strlen(length_mods[i].s);
        if (strncmp(p, length_mods[i].s, l) == 0) {
            len = length_mods[i].len;
            memcpy(spec + sn, p, l);
            sn += l;
            p += l;
            break;
        }
    }
    int cls = conv_class(*p);
    if (cls < 0 || arg_type[len][cls] == A_BAD)
        return -1;
    spec[sn++] = *p++;
    spec[sn] = '\0';
    *fmt = p;
    char *dst = w->b + w->n;
    size_t room = w->cap - w->n;
    int r;
    switch (arg_type[len][cls]) {
    case A_INT: r = snprintf(dst, room, spec, va_arg(*ap, int)); break;
    case A_UINT: r = snprintf(dst, room, spec, va_arg(*ap, unsigned)); break;
    case A_LONG: r = snprintf(dst, room, spec, va_arg(*ap, long)); break;
    case A_ULONG: r = snprintf(dst, room, spec, va_arg(*ap, unsigned long)); break;
    case A_LLONG: r = snprintf(dst, room, spec, va_arg(*ap, long long)); break;
    case A_ULLONG: r = snprintf(dst, room, spec, va_arg(*ap, unsigned long long)); break;
    case A_SIZE: r = snprintf(dst, room, spec, va_arg(*ap, size_t)); break;
    case A_INTMAX: r = snprintf(dst, room, spec, va_arg(*ap, intmax_t)); break;
    case A_UINTMAX: r = snprintf(dst, room, spec, va_arg(*ap, uintmax_t)); break;
    case A_PTRDIFF: r = snprintf(dst, room, spec, va_arg(*ap, ptrdiff_t)); break;
    case A_DOUBLE: r = snprintf(dst, room, spec, va_arg(*ap, double)); break;
    case A_LDOUBLE: r = snprintf(dst, room, spec, va_arg(*ap, long double)); break;
    case A_STR: {
        const char *str = va_arg(*ap, const char *);
        if (sn == 2 && str != NULL) { /* plain %s, the common case: no printf machinery */
            size_t l = strlen(str);
            wput(w, str, l);
            return cls;
        }
        r = snprintf(dst, room, spec, str);
        break;
    }
    case A_PTR: r = snprintf(dst, room, spec, va_arg(*ap, void *)); break;
    default: r = snprintf(dst, room, "%%"); break;
    }
    if (r < 0)
        return -1;
    w->n += (size_t)r < room ? (size_t)r : room - 1;
    return cls;
}

/* Where the value of the format token at p starts: the '=' after its key, as parse_body
 * reads keys, or the first '=' of a token that starts with a %s (a key the call site
 * passes: "%s=%s", unquoted values only); NULL for prose. */
static const char *value_start(const char *p)
{
    size_t klen;
    if (is_key(p, &klen))
        return p + klen;
    if (p[0] != '%' || p[1] != 's')
        return NULL;
    for (; *p != '\0' && *p != ' '; p++)
        if (*p == '=')
            return p[1] == '"' ? NULL : p;
    return NULL;
}

/* Formats a body as described above; false when a conversion is not handled (then the
 * caller falls back to vsnprintf with a fresh copy of the arguments). The walk mirrors
 * parse_body on the format's own text: the same tokens are keys, a value the format quotes
 * ends where parse_body ends it (closes()), and \x inside it is one escape. */
static bool format_body(char *out, size_t cap, const char *fmt, va_list *ap)
{
    wbuf_t w = {out, cap, 0};
    size_t run = 0;         /* start of the unquoted value being written */
    bool in_run = false;    /* between a key's '=' and the next space */
    bool run_text = false;  /* the run holds a %s or %c */
    bool in_quotes = false; /* inside a value the format quotes */
    const char *eq = value_start(fmt);
    const char *p = fmt;
    while (*p) {
        char c = *p;
        if (c == '%') {
            p++;
            size_t at = w.n;
            int cls = put_conversion(&w, &p, ap);
            if (cls < 0)
                return false;
            if (cls == C_STR || cls == C_CHAR) {
                if (in_quotes)
                    escape_tail(&w, at, false);
                else if (in_run)
                    run_text = true;
            }
            continue;
        }
        if (in_quotes) {
            if (c == '\\' && p[1] == '%' && p[2] != '%') {
                /* a lone backslash before a conversion would escape the value's first
                 * character; written as an escape of its own it stays a backslash */
                wput(&w, "\\\\", 2);
                p++;
                continue;
            }
            if (c == '\\' && p[1] != '\0' && p[1] != '%') { /* the call site's own escape */
                wput(&w, p, 2);
                p += 2;
                continue;
            }
            if (c == '"') {
                if (closes(p + 1)) {
                    in_quotes = false;
                } else {
                    /* an inner quote the call site left bare: if an argument comes next,
                     * its text must not decide that the quote ends the value */
                    const char *q = p + 1;
                    while (*q == ' ')
                        q++;
                    if (q[0] == '%' && q[1] != '%') {
                        wput(&w, "\\\"", 2);
                        p++;
                        continue;
                    }
                }
            }
        } else if (c == ' ') {
            if (in_run && run_text && needs_quotes(w.b + run, w.n - run))
                escape_tail(&w, run, true);
            in_run = run_text = false;
            eq = value_start(p + 1);
        } else if (p == eq) {
            wput(&w, p, 1);
            p++;
            if (*p == '"') {
                in_quotes = true;
                wput(&w, p, 1);
                p++;
            } else {
                in_run = true;
                run = w.n;
            }
            continue;
        }
        wput(&w, p, 1);
        p++;
    }
    if (in_run && run_text && needs_quotes(w.b + run, w.n - run))
        escape_tail(&w, run, true);
    w.b[w.n] = '\0';
    return true;
}

size_t kq_log_vformat(char *out, size_t cap, const char *fmt, va_list ap)
{
    if (cap == 0)
        return 0;
    va_list walk;
    va_copy(walk, ap);
    bool ok = format_body(out, cap, fmt, &walk);
    va_end(walk);
    if (!ok) { /* a conversion the writer does not know: printf's text, unquoted */
        int r = vsnprintf(out, cap, fmt, ap);
        if (r < 0)
            out[0] = '\0';
    }
    return strlen(out);
}

size_t kq_log_format(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = kq_log_vformat(out, cap, fmt, ap);
    va_end(ap);
    return n;
}

void kq_log_write(int level, int v, const char *file, int line, const char *fmt, ...)
{
    char body[4096];
    char out[8192];
    va_list ap;
    va_start(ap, fmt);
    kq_log_vformat(body, sizeof(body), fmt, ap);
    va_end(ap);
    size_t n = kq_log_render(out, sizeof(out), log_format, level, v, NULL, file, line, body);
    ssize_t w = write(STDERR_FILENO, out, n);
    (void)w;
}

const char *kq_log_quote(char *buf, size_t cap, const char *s)
{
    size_t n = 0;
    if (cap == 0)
        return buf;
    for (; s != NULL && *s != '\0'; s++) {
        char c = *s, e = escape_of((unsigned char)c);
        if (n + (e ? 2 : 1) >= cap)
            break;
        if (e) {
            buf[n++] = '\\';
            buf[n++] = e;
        } else {
            buf[n++] = c;
        }
    }
    buf[n] = '\0';
    return buf;
}

/* ======================================================================== */
/* rate limiter                                                             */
/* ======================================================================== */

#define LIMITER_SLOTS 1024

struct kq_log_limiter {
    pthread_mutex_t mu; /* leaf lock: guards everything below */
    double window_s, per_s, burst;
    double tokens, refill_at;
    unsigned long suppressed;
    struct {
        uint64_t hash;
        double at;
    } slot[LIMITER_SLOTS];
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h | 1; /* 0 marks an empty slot */
}

kq_log_limiter_t *kq_log_limiter_new(double window_s, double per_s, double burst)
{
    kq_log_limiter_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    pthread_mutex_init(&l->mu, NULL);
    l->window_s = window_s;
    l->per_s = per_s;
    l->burst = burst;
    l->tokens = burst;
    l->refill_at = -1;
    return l;
}

void kq_log_limiter_free(kq_log_limiter_t *l)
{
    if (l == NULL)
        return;
    pthread_mutex_destroy(&l->mu);
    free(l);
}

bool kq_log_limiter_allow(kq_log_limiter_t *l, const char *key, const double *now_s, unsigned long *suppressed)
{
    double now;
    if (now_s != NULL) {
        now = *now_s;
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    }
    uint64_t h = fnv1a(key ? key : "");
    bool ok = false;
    pthread_mutex_lock(&l->mu);
    if (l->refill_at < 0)
        l->refill_at = now;
    l->tokens = fmin(l->burst, l->tokens + (now - l->refill_at) * l->per_s);
    l->refill_at = now;
    size_t i = (size_t)(h % LIMITER_SLOTS);
    bool recent = l->slot[i].hash == h && now - l->slot[i].at < l->window_s;
    if (!recent && l->tokens >= 1.0) {
        l->tokens -= 1.0;
        l->slot[i].hash = h;
        l->slot[i].at = now;
        ok = true;
        if (suppressed != NULL)
            *suppressed = l->suppressed;
        l->suppressed = 0;
    } else {
        l->suppressed++;
    }
    pthread_mutex_unlock(&l->mu);
    return ok;
}
