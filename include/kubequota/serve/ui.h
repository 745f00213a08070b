/* The usage dashboard: GET /ui/ serves a page, its script and its style, all embedded in the
 * binary at build time (src/serve/ui/, turned into C by scripts/embed.sh), so nothing is
 * fetched from elsewhere. The page reads the usage view (/ws/v1) from the browser with the
 * caller's own credentials (a client certificate, or a bearer token the page asks for and
 * keeps in sessionStorage): the page itself holds no data and is served to anyone.
 *
 * Threads: any; the files are constant, kq_ui_features only reads app's settings.
 */
#ifndef KUBEQUOTA_UI_H
#define KUBEQUOTA_UI_H

#include <stddef.h>

#include "kubequota/app.h"

typedef struct kq_ui_file {
    const char *name;  /* "index.html", "app.js", ... (the path after /ui/) */
    const char *ctype; /* Content-Type */
    const unsigned char *data;
    size_t len;
} kq_ui_file_t;

/* The headers every dashboard answer carries: a Content-Security-Policy allowing nothing but
 * this origin (no inline script or style, no other host), no framing, no referrer. Each
 * line ends with CRLF. */
#define KQ_UI_HEADERS                                                                                         \
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "     \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n"                    \
    "X-Frame-Options: DENY\r\n"                                                                               \
    "Referrer-Policy: no-referrer\r\n"

/* The embedded file at /ui/<name> ("" is index.html), borrowed and constant; NULL if none. */
const kq_ui_file_t *kq_ui_file(const char *name);

/* GET /ui/features.json: what the page may ask for, so that it never requests a route that
 * is not there: {"partition": ..., "metering": bool, "elastic": bool, "history": bool (usage
 * over time is sampled), "gate": bool (--admission-gate), "routes": [GET
 * patterns of the usage view, '*' for a path parameter]}. routes/n are the server's. A new
 * malloc'ed string (*len its length), NULL on ENOMEM. */
char *kq_ui_features(const kq_app_t *app, const char *const *routes, size_t n, size_t *len);

#endif
