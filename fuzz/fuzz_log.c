/* libFuzzer target for the log writer's body parser (kq_log_render) and the duration
 * parser (kq_duration_parse). Log bodies carry untrusted text (pod names, reasons, API
 * server messages), so rendering must never crash or overrun, whatever the body holds.
 *
 * Checked beyond "no crash": every rendered line fits the buffer, is NUL-terminated, ends
 * in exactly one newline with no newline before it (one event, one line), and the JSON
 * form is one object that jansson parses whenever the input is valid UTF-8 and NUL-free;
 * an accepted duration formats and parses back to the same milliseconds.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
