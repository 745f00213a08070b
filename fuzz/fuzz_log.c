/* libFuzzer target for the log writer's body parser (kq_log_render) and the duration
 * parser (kq_duration_parse). Log bodies carry untrusted text (pod names, reasons, API
 * server messages), so rendering must never crash or overrun, whatever the body holds.
 *
 * Checked beyond "no crash": every rendered line fits the buffer, is NUL-terminated, ends
 * in exactly one newline with no newline before it (one event, one line), and the JSON
 * form is one object that jansson parses whenever the input is valid UTF-8 and NUL-free;
 * an accepted duration formats and parses back to the same milliseconds.
 *
 * The writer (kq_log_format) gets a format made from the input and argument strings cut
 * from it: the input up to its first NUL is the format's text ('%' kept literal); each of
 * the first three bytes 1, 2 or 3 in it adds the value " kN=%s", " kN=%.3s" or " kN=\"%s\""
 * after that text (values after the prose, as call sites write them); the parts after NULs
 * are the arguments. Whatever the arguments hold, the rendered line has the same keys as
 * with the argument "x" (no key forged, none lost), and a kN=%s value reads back as the
 * argument.
 *
 *   make build/fuzz/fuzz_log && build/fuzz/fuzz_log -max_total_time=60 fuzz/corpus/log
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/base/duration.h"
#include "kubequota/base/log.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool valid_utf8_no_nul(const char *s, size_t n)
{
    json_error_t je;
    json_t *j = json_stringn(s, n); /* NULL for invalid UTF-8 */
    (void)je;
    bool ok = j != NULL && memchr(s, '\0', n) == NULL;
    json_decref(j);
    return ok;
}

/* the keys of a JSON line rendered from body; NULL when body is not valid UTF-8 */
static json_t *render_writer_body(const char *body)
{
    static const struct timespec ts = {1732458380, 555000000};
    static char out[65536]; /* a 4 KiB body escaped fits: nothing is cut */
    if (!valid_utf8_no_nul(body, strlen(body)))
        return NULL;
    size_t n = kq_log_render(out, sizeof(out), KQ_LOG_JSON, KQ_LOG_INFO, 0, &ts, "f.c", 1, body);
    json_error_t je;
    json_t *j = json_loadb(out, n, 0, &je);
    CHECK(j != NULL && json_is_object(j));
    return j;
}

static void fuzz_writer(const uint8_t *data, size_t size)
{
    const char *parts[4] = {"", "", "", ""};
    char *copy = malloc(size + 1);
    CHECK(copy != NULL);
    memcpy(copy, data, size);
    copy[size] = '\0';
    parts[0] = copy;
    for (size_t i = 0, k = 1; i < size && k < 4; i++)
        if (copy[i] == '\0')
            parts[k++] = copy + i + 1;
    size_t tlen = strlen(parts[0]);
    char *fmt = malloc(tlen * 2 + 64);
    CHECK(fmt != NULL);
    size_t n = 0;
    int marks = 0;
    char kind[3] = {0, 0, 0};
    for (size_t i = 0; i < tlen; i++) {
        unsigned char c = (unsigned char)parts[0][i];
        if (c >= 1 && c <= 3 && marks < 3)
            kind[marks++] = (char)c;
        else if (c == '%')
            fmt[n++] = '%';
        fmt[n++] = (char)c;
    }
    for (int m = 0; m < marks; m++) {
        static const char *const forms[] = {" k%d=%%s", " k%d=%%.3s", " k%d=\"%%s\""};
        n += (size_t)sprintf(fmt + n, forms[kind[m] - 1], m + 1);
    }
    fmt[n] = '\0';
    static const size_t caps[] = {1, 2, 7, 64, 4096};
    char body[4096], benign[4096];
    for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        size_t len = kq_log_format(body, caps[c], fmt, parts[1], parts[2], parts[3]);
        CHECK(len < caps[c] && body[len] == '\0' && strlen(body) == len);
    }
    size_t len = kq_log_format(body, sizeof(body), fmt, parts[1], parts[2], parts[3]);
    char text[65536];
    static const struct timespec ts = {1732458380, 555000000};
    size_t tn = kq_log_render(text, sizeof(text), KQ_LOG_TEXT, KQ_LOG_INFO, 0, &ts, "f.c", 1, body);
    CHECK(tn > 0 && text[tn - 1] == '\n' && memchr(text, '\n', tn - 1) == NULL);
    kq_log_format(benign, sizeof(benign), fmt, "x", "x", "x");
    json_t *j = len + 1 < sizeof(body) ? render_writer_body(body) : NULL; /* not cut */
    json_t *b = j != NULL ? render_writer_body(benign) : NULL;
    if (j != NULL && b != NULL) {
        const char *key;
        json_t *v;
        CHECK(json_object_size(j) == json_object_size(b));
        json_object_foreach(b, key, v) {
            json_t *got = json_object_get(j, key);
            CHECK(got != NULL);
            /* kN=%s outside any quoted value of the format: the value is the argument */
            if (strlen(key) == 2 && key[0] == 'k' && key[1] >= '1' && key[1] <= '3' && json_is_string(v) &&
                strcmp(json_string_value(v), "x") == 0 && kind[key[1] - '1'] == 1) {
                const char *arg = parts[key[1] - '0'];
                if (json_is_integer(got))
                    CHECK(json_integer_value(got) == strtoll(arg, NULL, 10));
                else
                    CHECK(json_is_string(got) && strcmp(json_string_value(got), arg) == 0);
            }
        }
    }
    json_decref(j);
    json_decref(b);
    free(fmt);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_writer(data, size);
    char *body = malloc(size + 1);
    if (body == NULL)
        return 0;
    memcpy(body, data, size);
    body[size] = '\0';
    static const struct timespec ts = {1732458380, 555000000};
    size_t caps[] = {4, 64, 600, 8192};
    for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        for (int fmt = 0; fmt < 2; fmt++) {
            char *out = malloc(caps[c]);
            CHECK(out != NULL);
            size_t n = kq_log_render(out, caps[c], (kq_log_format_t)fmt, KQ_LOG_INFO, 0, &ts, "f.c", 1, body);
            CHECK(n < caps[c]);
            CHECK(out[n] == '\0');
            if (caps[c] >= 64) {
                CHECK(n > 0 && out[n - 1] == '\n');
                CHECK(memchr(out, '\n', n - 1) == NULL);
            }
            if (fmt == KQ_LOG_JSON && caps[c] == 8192 && valid_utf8_no_nul(body, strlen(body))) {
                json_error_t je;
                json_t *j = json_loadb(out, n, 0, &je);
                CHECK(j != NULL && json_is_object(j) && json_is_string(json_object_get(j, "msg")));
                json_decref(j);
            }
            free(out);
        }
    }
    long ms = -7;
    char err[256];
    if (kq_duration_parse(body, 0, &ms, err, sizeof(err)) == 0) {
        CHECK(ms >= 0 && ms <= KQ_DURATION_MAX_MS);
        char buf[64];
        long back = -1;
        CHECK(kq_duration_parse(kq_duration_format(ms, buf, sizeof(buf)), 0, &back, NULL, 0) == 0 && back == ms);
    } else {
        CHECK(ms == -7 && memchr(err, '\0', sizeof(err)) != NULL);
    }
    free(body);
    return 0;
}
