/* Helpers shared by the unit tests. */
#ifndef KUBEQUOTA_TESTUTIL_H
#define KUBEQUOTA_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubequota/engine/config.h"

/* A configuration from YAML text (named "test.yaml" in diagnostics); NULL after printing
 * every diagnostic to stderr when the text is refused. */
static inline kq_config_t *test_config(const char *yaml)
{
    kq_config_t *cfg = NULL;
    kq_diags_t d;
    kq_diags_init(&d);
    if (kq_config_load_buffer(yaml, strlen(yaml), "test.yaml", &cfg, &d) != 0) {
        char *all = kq_diags_join(&d, "\n");
        fprintf(stderr, "config: %s\n", all ? all : "?");
        free(all);
        cfg = NULL;
    }
    kq_diags_free(&d);
    return cfg;
}

#endif
