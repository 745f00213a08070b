/* libFuzzer target for the kubectl plugin's input decoding (what-if -f: untrusted YAML or
 * JSON): kq_kubectl_yaml_docs must never crash, leak or read out of bounds, must answer an
 * array or NULL with a reason, and kq_kubectl_pods_of must do the same for every document.
 *
 *   make build/fuzz/fuzz_kubectl && build/fuzz/fuzz_kubectl -max_total_time=60 fuzz/corpus/kubectl
 */
#include <stdint.h>
#include <stdlib.h>

#include "kubequota/serve/kubectl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    err[0] = '\0';
    json_t *docs = kq_kubectl_yaml_docs((const char *)data, size, 5000, err, sizeof(err));
    if (docs == NULL) {
        if (err[0] == '\0')
            abort(); /* a failure always says why */
        return 0;
    }
    if (!json_is_array(docs))
        abort();
    size_t i;
    json_t *d;
    json_array_foreach(docs, i, d)
    {
        err[0] = '\0';
        json_t *pods = kq_kubectl_pods_of(d, err, sizeof(err));
        if (pods == NULL && err[0] == '\0')
            abort();
        if (pods != NULL && (!json_is_array(pods) || json_array_size(pods) > 1000))
            abort();
        json_decref(pods);
    }
    json_decref(docs);
    return 0;
}
