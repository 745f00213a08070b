/* The kubectl plugin: `kubectl kubequota usage | waiting | why | what-if`, answered by the kubequota
 * binary itself when it runs as `kubectl-kubequota` (kubectl finds plugins by that name on
 * PATH) or as `kubequota kubectl ...`.
 *
 * It reads the caller's kubeconfig (--kubeconfig, else the first file of $KUBECONFIG, else
 * ~/.kube/config; kq_kubeconfig_load) and reaches kubequota's usage view through the API
 * server's service proxy:
 *   /api/v1/namespaces/{ns}/services/https:{service}:{port}/proxy/ws/v1/...
 * The API server authenticates the caller, checks `get services/proxy` and removes the
 * Authorization header before proxying (kubernetes staging/src/k8s.io/apiserver/pkg/
 * endpoints/filters/authentication.go), so the plugin also sends the caller's bearer token
 * (when the kubeconfig has one) as X-Kubequota-Authorization, which kubequota's usage view
 * reads when there is no Authorization header (auth.h).
 *
 * Output: tables for people, `-o json` for scripts (the view's own JSON). Exit status 0,
 * 1 when kubequota or the API server answered an error, 2 for a bad command line or input.
 *
 * Threads: one; nothing shared.
 */
#ifndef KUBEQUOTA_KUBECTL_H
#define KUBEQUOTA_KUBECTL_H

#include <stddef.h>

#include <jansson.h>

/* argv[0] is the program name (ignored), argv[1] the command. Returns the exit status. */
int kq_kubectl_main(int argc, char **argv);

/* in with terminal control characters made visible (new string, NULL on no memory): ESC as
 * "^[" and CR as "\r", as kubectl escapes them (cli-runtime printers.EscapeTerminal); also the
 * other C0 controls except newline and tab, and DEL, in caret notation (BEL "^G", DEL
 * "^?"), the C1 controls U+0080..U+009F as "\u0080".."\u009f", and bytes that are not
 * UTF-8 as "\xNN". Everything else, other UTF-8 included, is kept. */
char *kq_kubectl_escape_terminal(const char *in);

/* The documents of a YAML or JSON text (untrusted input: never crashes), as a new JSON
 * array, one element per document, scalars typed as Kubernetes' YAML decoding does (plain
 * true/false, null/~, integers and floats; quoted scalars stay strings). NULL with the
 * reason (line and column) in err on malformed input, aliases, or more than max_nodes nodes. */
json_t *kq_kubectl_yaml_docs(const char *buf, size_t len, size_t max_nodes, char *err, size_t errlen);

/* The pods a document stands for (new reference, a JSON array): a Pod itself; each item of a
 * List; spec.replicas (or a Job's spec.parallelism, default 1) copies of the pod template of a
 * workload (spec.template, or spec.jobTemplate.spec.template for a CronJob), named
 * "<workload>-<i>", in the workload's namespace. NULL with the reason in err when the
 * document is none of these. */
json_t *kq_kubectl_pods_of(json_t *doc, char *err, size_t errlen);

#endif
