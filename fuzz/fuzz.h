/* Shared by the libFuzzer targets in fuzz/: CHECK aborts with the file, line and failed
 * condition, so a broken invariant is a crash libFuzzer saves and reports like any other. */
#ifndef KUBEQUOTA_FUZZ_H
#define KUBEQUOTA_FUZZ_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#endif
