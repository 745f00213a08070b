/* The usage dashboard's files (embedded at build time) and the features document the page
 * starts from. See ui.h. The page, script and style are real files under src/serve/ui/;
 * the Makefile turns them into $(BUILD)/gen/ui_files.inc with scripts/embed.sh, and this
 * module includes that table. Nothing here does I/O.
 */
#include "kubequota/serve/ui.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ui_files.inc" /* static const kq_ui_file_t ui_files[] */

#define N_FILES (sizeof(ui_files) / sizeof(ui_files[0]))

const kq_ui_file_t *kq_ui_file(const char *name)
{
    if (name == NULL || name[0] == '\0')
        name = "index.html";
    for (size_t i = 0; i < N_FILES; i++)
        if (strcmp(ui_files[i].name, name) == 0)
            return &ui_files[i];
    return NULL;
}

char *kq_ui_features(const kq_app_t *app, const char *const *routes, size_t n, size_t *len)
{
    json_t *r = json_array();
    for (size_t i = 0; r != NULL && i < n; i++)
        if (json_array_append_new(r, json_string(routes[i])) != 0) {
            json_decref(r);
            r = NULL;
        }
    json_t *o = r == NULL ? NULL
                          : json_pack("{s:s, s:b, s:b, s:b, s:b, s:o}", "partition",
                                      app->partition ? app->partition : "default", "metering", app->metering != NULL,
                                      "elastic", app->elastic != NULL, "history", app->history != NULL, "gate",
                                      app->gating != NULL, "routes", r);
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (s != NULL)
        *len = strlen(s);
    return s;
}
