/* libFuzzer target for the kubeconfig parser (untrusted YAML): kq_kubeconfig_parse must
 * never crash, leak or read out of bounds, and must either succeed with a server set or
 * fail with at least one diagnostic.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude fuzz/fuzz_kubeconfig.c \
 *     src/kube/kube.c src/base/error.c src/base/log.c src/base/duration.c -ljansson -lyaml -lcurl -lssl -lcrypto -lpthread \
 *     -o /tmp/fk && /tmp/fk -max_total_time=60 fuzz/corpus/kubeconfig
 */
#include <stdint.h>
#include <stdlib.h>

#include "kubequota/kube/kube.h"
#include "kubequota/base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kq_kube_conf_t c = {0};
    kq_diags_t d;
    kq_log_level_current = KQ_LOG_ERROR; /* parse warnings would flood the output */
    kq_diags_init(&d);
    int rc = kq_kubeconfig_parse((const char *)data, size, "fuzz.kubeconfig", "/base", &c, &d);
    if (rc == 0 && (c.server == NULL || d.n != 0))
        abort();
    if (rc == KQ_EPARSE && d.n == 0)
        abort();
    if (rc != 0 && c.server != NULL)
        abort(); /* output must be untouched on failure */
    kq_kube_conf_free(&c);
    kq_diags_free(&d);
    return 0;
}
