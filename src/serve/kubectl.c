/* The kubectl plugin (kubectl.h): `kubectl kubequota usage | waiting | why | what-if`. A short-lived
 * client: parses its flags, loads the caller's kubeconfig, makes one to three requests to
 * kubequota's usage view through the API server's service proxy, and prints tables or the
 * view's JSON. Input files (what-if -f) are YAML or JSON, decoded by kq_kubectl_yaml_docs
 * (fuzzed: fuzz/fuzz_kubectl.c).
 *
 * Everything the server (or the API server) supplies is printed through
 * kq_kubectl_escape_terminal: names, messages and error bodies cannot move the cursor,
 * retitle the window, ring the bell or rewrite a line on the caller's terminal.
 */
#include "kubequota/serve/kubectl.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yaml.h>

#include "kubequota/base/error.h"
#include "kubequota/kube/kube.h"

#define TOKEN_HEADER "X-Kubequota-Authorization"
#define INPUT_MAX ((size_t)16 << 20) /* bytes of a what-if file */
#define YAML_NODES_MAX 200000
#define YAML_DEPTH_MAX 64
#define REPLICAS_MAX 1000 /* the explain API's own limit of a list */
/* what-if's verdict as its exit code: 0 every pod would be admitted now; these when not
 * (1 and 2 stay errors: an answer that is an error, a bad command line or FILE) */
#define EXIT_WOULD_WAIT 3 /* some would wait for quota */
#define EXIT_NEVER_FITS 4 /* some can never fit as they are: waiting will not help */

/* ------------------------------------------------------------------ terminal escaping */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0)))
        return 0; /* overlong, or a UTF-16 surrogate */
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
        return 0; /* overlong, or above U+10FFFF */
    return n;
}

char *kq_kubectl_escape_terminal(const char *in)
{
    if (in == NULL)
        return NULL;
    size_t len = strlen(in);
    char *out = malloc(len * 6 + 1); /* the longest replacement, \u009b, is 6 bytes for 2 */
    if (out == NULL)
        return NULL;
    const unsigned char *s = (const unsigned char *)in;
    char *o = out;
    while (*s != '\0') {
        unsigned char c = *s;
        size_t n = utf8_len(s);
        if (c == 0x1B) { /* as kubectl: ESC -> ^[ */
            memcpy(o, "^[", 2), o += 2;
        } else if (c == '\r') { /* as kubectl: CR -> \r */
            memcpy(o, "\\r", 2), o += 2;
        } else if (c == '\n' || c == '\t') {
            *o++ = (char)c;
        } else if (c < 0x20 || c == 0x7F) { /* other C0 controls and DEL in caret notation */
            *o++ = '^';
            *o++ = (char)(c ^ 0x40);
        } else if (n == 2 && c == 0xC2 && s[1] < 0xA0) { /* C1 controls U+0080..U+009F */
            o += sprintf(o, "\\u%04x", s[1]);
            s += 2;
            continue;
        } else if (n == 0) { /* not UTF-8: the byte in hex */
            o += sprintf(o, "\\x%02x", c);
        } else {
            memcpy(o, s, n);
            o += n;
            s += n;
            continue;
        }
        s++;
    }
    *o = '\0';
    return out;
}

/* The escaped form of s for one printf: up to 16 at once (a row's cells); a CLI's single
 * thread only. NULL prints as "". */
static const char *tx(const char *s)
{
    static char *ring[16];
    static unsigned next;
    char **slot = &ring[next++ % 16];
    free(*slot);
    *slot = s != NULL ? kq_kubectl_escape_terminal(s) : NULL;
    return *slot != NULL ? *slot : "";
}

/* ------------------------------------------------------------------ YAML and JSON input */

typedef struct ydec {
    yaml_document_t *doc;
    size_t nodes, max_nodes;
    char *err;
    size_t errlen;
} ydec_t;

static bool all_digits(const char *s)
{
    if (*s == '+' || *s == '-')
        s++;
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

static bool is_float(const char *s)
{
    if (*s == '+' || *s == '-')
        s++;
    bool digits = false, dot = false;
    for (; *s && *s != 'e' && *s != 'E'; s++) {
        if (*s >= '0' && *s <= '9')
            digits = true;
        else if (*s == '.' && !dot)
            dot = true;
        else
            return false;
    }
    if (!digits)
        return false;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        return all_digits(s);
    }
    return dot;
}

/* A plain scalar as Kubernetes' YAML decoding types it; quoted ones are strings. */
static json_t *scalar(const yaml_node_t *n)
{
    const char *v = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    if (strlen(v) != len) /* an escaped NUL inside: not representable as a C string */
        return NULL;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return json_stringn(v, len);
    if (len == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
        strcmp(v, "NULL") == 0)
        return json_null();
    if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "TRUE") == 0)
        return json_true();
    if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0 || strcmp(v, "FALSE") == 0)
        return json_false();
    if (all_digits(v) && len < 19) {
        errno = 0;
        long long x = strtoll(v, NULL, 10);
        if (errno == 0)
            return json_integer(x);
    }
    if (is_float(v) && len < 64)
        return json_real(strtod(v, NULL));
    return json_stringn(v, len);
}

static json_t *ynode(ydec_t *d, yaml_node_t *n, int depth)
{
    if (n == NULL)
        return NULL;
    if (++d->nodes > d->max_nodes || depth > YAML_DEPTH_MAX) {
        snprintf(d->err, d->errlen, "line %zu: document too large or too deeply nested", n->start_mark.line + 1);
        return NULL;
    }
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        json_t *v = scalar(n);
        if (v == NULL)
            snprintf(d->err, d->errlen, "line %zu: a string with a NUL character", n->start_mark.line + 1);
        return v;
    }
    case YAML_SEQUENCE_NODE: {
        json_t *a = json_array();
        for (yaml_node_item_t *it = n->data.sequence.items.start; a != NULL && it < n->data.sequence.items.top;
             it++) {
            json_t *v = ynode(d, yaml_document_get_node(d->doc, *it), depth + 1);
            if (v == NULL || json_array_append_new(a, v) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    case YAML_MAPPING_NODE: {
        json_t *o = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; o != NULL && p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(d->doc, p->key);
            if (k == NULL || k->type != YAML_SCALAR_NODE || strlen((const char *)k->data.scalar.value) !=
                                                                k->data.scalar.length) {
                snprintf(d->err, d->errlen, "line %zu: a mapping key must be a string",
                         (k ? k : n)->start_mark.line + 1);
                json_decref(o);
                return NULL;
            }
            json_t *v = ynode(d, yaml_document_get_node(d->doc, p->value), depth + 1);
            if (v == NULL || json_object_set_new(o, (const char *)k->data.scalar.value, v) != 0) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    default:
        snprintf(d->err, d->errlen, "line %zu: unexpected YAML node", n->start_mark.line + 1);
        return NULL;
    }
}

json_t *kq_kubectl_yaml_docs(const char *buf, size_t len, size_t max_nodes, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    char dummy[8];
    if (err == NULL || errlen == 0) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    if (buf == NULL) {
        snprintf(err, errlen, "no input");
        return NULL;
    }
    /* JSON first when it looks like JSON (libyaml refuses some valid JSON, e.g. tabs) */
    size_t i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
        i++;
    if (i < len && (buf[i] == '{' || buf[i] == '[')) {
        json_error_t je;
        json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
        if (v != NULL) {
            json_t *a = json_array();
            if (a == NULL || json_array_append_new(a, v) != 0) {
                json_decref(a);
                snprintf(err, errlen, "out of memory");
                return NULL;
            }
            return a;
        }
    }
    yaml_parser_t ps;
    if (!yaml_parser_initialize(&ps)) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&ps, (const unsigned char *)buf, len);
    json_t *docs = json_array();
    ydec_t d = {.max_nodes = max_nodes ? max_nodes : YAML_NODES_MAX, .err = err, .errlen = errlen};
    while (docs != NULL) {
        yaml_document_t doc;
        if (!yaml_parser_load(&ps, &doc)) {
            snprintf(err, errlen, "line %zu, column %zu: malformed YAML: %s", ps.problem_mark.line + 1,
                     ps.problem_mark.column + 1, ps.problem ? ps.problem : "syntax error");
            json_decref(docs);
            docs = NULL;
            break;
        }
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (root == NULL) { /* the end of the stream */
            yaml_document_delete(&doc);
            break;
        }
        d.doc = &doc;
        json_t *v = ynode(&d, root, 0);
        yaml_document_delete(&doc);
        if (v == NULL || json_array_append_new(docs, v) != 0) {
            if (err[0] == '\0')
                snprintf(err, errlen, "out of memory");
            json_decref(docs);
            docs = NULL;
        }
    }
    yaml_parser_delete(&ps);
    return docs;
}

/* ------------------------------------------------------------------ workloads to pods */

static const char *str_at(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* A copy of the pod template as a Pod named name in namespace ns, owned by the workload
 * (a controller ownerReference, as the workload's controller would set: the pods then form
 * one application, as they will once created). */
static json_t *pod_from_template(json_t *tmpl, const char *ns, const char *name, json_t *owner)
{
    json_t *md = json_object_get(tmpl, "metadata");
    json_t *pod = json_pack("{s:s, s:s, s:O?, s:O}", "apiVersion", "v1", "kind", "Pod", "metadata",
                            json_is_object(md) ? md : NULL, "spec", json_object_get(tmpl, "spec"));
    if (pod == NULL)
        return NULL;
    json_t *m = json_object_get(pod, "metadata");
    if (m == NULL) {
        m = json_object();
        json_object_set_new(pod, "metadata", m);
    } else {
        m = json_deep_copy(m);
        json_object_set_new(pod, "metadata", m);
    }
    if (m == NULL) {
        json_decref(pod);
        return NULL;
    }
    json_object_set_new(m, "name", json_string(name));
    if (owner != NULL)
        json_object_set_new(m, "ownerReferences", json_pack("[O]", owner));
    if (ns != NULL)
        json_object_set_new(m, "namespace", json_string(ns));
    return pod;
}

json_t *kq_kubectl_pods_of(json_t *doc, char *err, size_t errlen)
{
    const char *kind = str_at(doc, "kind");
    json_t *out = json_array();
    if (out == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!json_is_object(doc) || kind == NULL) {
        snprintf(err, errlen, "not a Kubernetes object (no kind)");
        goto fail;
    }
    if (strcmp(kind, "Pod") == 0) {
        json_array_append(out, doc);
        return out;
    }
    if (strcmp(kind, "List") == 0 || (strlen(kind) > 4 && strcmp(kind + strlen(kind) - 4, "List") == 0)) {
        json_t *items = json_object_get(doc, "items");
        size_t i;
        json_t *it;
        if (!json_is_array(items)) {
            snprintf(err, errlen, "%s without items", kind);
            goto fail;
        }
        json_array_foreach(items, i, it)
        {
            json_t *p = kq_kubectl_pods_of(it, err, errlen);
            if (p == NULL)
                goto fail;
            json_array_extend(out, p);
            json_decref(p);
            if (json_array_size(out) > REPLICAS_MAX) {
                snprintf(err, errlen, "more than %d pods", REPLICAS_MAX);
                goto fail;
            }
        }
        return out;
    }
    json_t *spec = json_object_get(doc, "spec");
    json_t *tmpl = json_object_get(spec, "template");
    if (strcmp(kind, "CronJob") == 0) {
        spec = json_object_get(json_object_get(spec, "jobTemplate"), "spec");
        tmpl = json_object_get(spec, "template");
    }
    if (!json_is_object(tmpl) || !json_is_object(json_object_get(tmpl, "spec"))) {
        snprintf(err, errlen, "a %s is neither a Pod, a List nor a workload with a pod template (spec.template)",
                 kind);
        goto fail;
    }
    json_t *r = json_object_get(spec, "replicas");
    if (r == NULL)
        r = json_object_get(spec, "parallelism");
    json_int_t n = r == NULL ? 1 : json_is_integer(r) ? json_integer_value(r) : -1;
    if (n < 0 || n > REPLICAS_MAX) {
        snprintf(err, errlen, "%s: replicas must be a whole number from 0 to %d", kind, REPLICAS_MAX);
        goto fail;
    }
    json_t *md = json_object_get(doc, "metadata");
    const char *name = str_at(md, "name") ? str_at(md, "name") : "what-if";
    const char *ns = str_at(md, "namespace");
    char uid[600];
    snprintf(uid, sizeof(uid), "what-if:%.40s/%.250s/%.250s", kind, ns ? ns : "", name);
    json_t *owner = json_pack("{s:s, s:s, s:s, s:s, s:b}", "apiVersion",
                              str_at(doc, "apiVersion") ? str_at(doc, "apiVersion") : "v1", "kind", kind, "name", name,
                              "uid", uid, "controller", 1);
    for (json_int_t i = 0; owner != NULL && i < n; i++) {
        char pname[300];
        snprintf(pname, sizeof(pname), "%.250s-%lld", name, (long long)i);
        json_t *p = pod_from_template(tmpl, ns, pname, owner);
        if (p == NULL || json_array_append_new(out, p) != 0) {
            json_decref(owner);
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    }
    if (owner == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    json_decref(owner);
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* ------------------------------------------------------------------ command line */

typedef struct cli {
    const char *cmd;
    const char *kubeconfig, *ns, *svc, *port, *partition;
    const char *user, *group, *queue, *file, *pod, *pod_ns;
    bool json;
} cli_t;

static int usage_err(const char *fmt, ...) KQ_PRINTF(1, 2);
static int usage_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kubectl kubequota: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nSee 'kubectl kubequota --help'.\n", stderr);
    va_end(ap);
    return 2;
}

static void help(FILE *f)
{
    fputs("kubectl kubequota: your quota, why a pod waits, and whether a job would fit now.\n\n"
          "Usage:\n"
          "  kubectl kubequota usage [--user U | --group G | --queue Q] [-o json]\n"
          "  kubectl kubequota waiting [--queue Q] [-o json]   (pods behind the admission gate, in\n"
          "                                                     the order they will be released)\n"
          "  kubectl kubequota why POD [-n NAMESPACE] [-o json]\n"
          "  kubectl kubequota what-if -f FILE [-o json]   (a Pod, a List, or a workload with a\n"
          "                                                 pod template; YAML or JSON; - = stdin)\n\n"
          "Exit codes: 0 done (what-if: every pod would fit now); 1 kubequota or the API server\n"
          "answered an error; 2 bad command line or FILE; what-if only: 3 some pods would wait\n"
          "for quota, 4 some can never fit as they are.\n\n"
          "Flags:\n"
          "  --kubeconfig FILE            kubeconfig (default: $KUBECONFIG, else ~/.kube/config)\n"
          "  --kubequota-namespace NS     namespace of kubequota's Service (default kubequota-system)\n"
          "  --kubequota-service NAME     kubequota's Service (default kubequota)\n"
          "  --kubequota-port PORT        its port, number or name (default 443)\n"
          "  --partition NAME             partition (default default)\n"
          "  -n, --namespace NS           the pod's namespace (why; default: the kubeconfig's, else default)\n"
          "  --user U, --group G, --queue Q   one user's, group's or queue's usage (usage);\n"
          "                               --queue: the pods waiting in a queue and its children (waiting)\n"
          "  -f, --filename FILE          the pod, list or workload (what-if)\n"
          "  -o, --output json            the usage view's JSON instead of a table\n"
          "  -h, --help\n\n"
          "kubequota is reached through the API server's service proxy\n"
          "(/api/v1/namespaces/NS/services/https:NAME:PORT/proxy/...): you need `get services/proxy`\n"
          "on it (and `create` for what-if), and kubequota's usage view must let your token in\n"
          "(docs/cli.md).\n",
          f);
}

static int parse(int argc, char **argv, cli_t *c)
{
    *c = (cli_t){.ns = "kubequota-system", .svc = "kubequota", .port = "443", .partition = "default"};
    const char *pos = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help(stdout);
            exit(0);
        }
        static const struct {
            const char *name, *alt;
            size_t off;
        } opts[] = {
            {"--kubeconfig", NULL, offsetof(cli_t, kubeconfig)},
            {"--kubequota-namespace", NULL, offsetof(cli_t, ns)},
            {"--kubequota-service", NULL, offsetof(cli_t, svc)},
            {"--kubequota-port", NULL, offsetof(cli_t, port)},
            {"--partition", NULL, offsetof(cli_t, partition)},
            {"--namespace", "-n", offsetof(cli_t, pod_ns)},
            {"--user", NULL, offsetof(cli_t, user)},
            {"--group", NULL, offsetof(cli_t, group)},
            {"--queue", NULL, offsetof(cli_t, queue)},
            {"--filename", "-f", offsetof(cli_t, file)},
            {"--output", "-o", 0},
        };
        bool matched = false;
        for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]) && !matched; k++) {
            size_t nl = strlen(opts[k].name);
            const char *val = NULL;
            if (strcmp(a, opts[k].name) == 0 || (opts[k].alt && strcmp(a, opts[k].alt) == 0)) {
                if (i + 1 >= argc)
                    return usage_err("%s needs a value", a);
                val = argv[++i];
            } else if (strncmp(a, opts[k].name, nl) == 0 && a[nl] == '=') {
                val = a + nl + 1;
            } else {
                continue;
            }
            matched = true;
            if (opts[k].off == 0) {
                if (strcmp(val, "json") != 0)
                    return usage_err("-o %s: only json is supported (the default is a table)", val);
                c->json = true;
            } else {
                *(const char **)((char *)c + opts[k].off) = val;
            }
        }
        if (matched)
            continue;
        if (a[0] == '-' && a[1] != '\0')
            return usage_err("unknown flag %s", a);
        if (c->cmd == NULL)
            c->cmd = a;
        else if (pos == NULL)
            pos = a;
        else
            return usage_err("unexpected argument '%s'", a);
    }
    if (c->cmd == NULL) {
        help(stderr);
        return 2;
    }
    if (strcmp(c->cmd, "usage") == 0) {
        if ((c->user != NULL) + (c->group != NULL) + (c->queue != NULL) > 1)
            return usage_err("usage: give at most one of --user, --group and --queue");
    } else if (strcmp(c->cmd, "waiting") == 0) {
        if (c->user != NULL || c->group != NULL)
            return usage_err("waiting: only --queue narrows it (kubectl kubequota waiting [--queue Q])");
    } else if (strcmp(c->cmd, "why") == 0) {
        if (pos == NULL)
            return usage_err("why: which pod? (kubectl kubequota why POD [-n NAMESPACE])");
        c->pod = pos;
        pos = NULL;
    } else if (strcmp(c->cmd, "what-if") == 0) {
        if (c->file == NULL)
            return usage_err("what-if: -f FILE is required (a Pod, a List or a workload; - for stdin)");
    } else {
        return usage_err("unknown command '%s' (usage, waiting, why, what-if)", c->cmd);
    }
    if (pos != NULL)
        return usage_err("unexpected argument '%s'", pos);
    if (strcmp(c->cmd, "usage") != 0 && (c->user || c->group || (c->queue && strcmp(c->cmd, "waiting") != 0)))
        return usage_err("--user, --group and --queue belong to usage (and --queue to waiting)");
    return 0;
}

/* ------------------------------------------------------------------ requests */

typedef struct conn {
    kq_kube_t *kube;
    char *base; /* /api/v1/namespaces/NS/services/https:SVC:PORT/proxy */
    char *default_ns;
} conn_t;

static char *escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);
    char *out = e ? strdup(e) : NULL;
    curl_free(e);
    return out;
}

static int connect_kube(const cli_t *c, conn_t *out)
{
    char path[4096];
    const char *kc = c->kubeconfig;
    if (kc == NULL) {
        const char *env = getenv("KUBECONFIG");
        if (env != NULL && env[0] != '\0') { /* the first file of the list that exists */
            const char *p = env;
            while (*p) {
                size_t n = strcspn(p, ":");
                struct stat st;
                snprintf(path, sizeof(path), "%.*s", (int)n, p);
                if (n > 0 && stat(path, &st) == 0) {
                    kc = path;
                    break;
                }
                p += n + (p[n] == ':');
            }
        }
        if (kc == NULL) {
            const char *home = getenv("HOME");
            snprintf(path, sizeof(path), "%s/.kube/config", home ? home : "");
            kc = path;
        }
    }
    kq_kube_conf_t conf = {0};
    kq_diags_t diags;
    kq_diags_init(&diags);
    if (kq_kubeconfig_load(kc, &conf, &diags) != 0) {
        char *all = kq_diags_join(&diags, "\n  ");
        fprintf(stderr, "kubectl kubequota: cannot use the kubeconfig %s:\n  %s\n", kc, all ? all : "unreadable");
        free(all);
        kq_diags_free(&diags);
        return 2;
    }
    kq_diags_free(&diags);
    kq_kube_opts_t o;
    kq_kube_opts_default(&o);
    o.token_header = TOKEN_HEADER;
    o.max_response = (size_t)64 << 20;
    out->kube = kq_kube_new_opts(&conf, &o);
    out->default_ns = conf.namespace ? strdup(conf.namespace) : NULL;
    kq_kube_conf_free(&conf);
    char *ens = escape(c->ns), *esvc = escape(c->svc), *eport = escape(c->port);
    if (out->kube == NULL || ens == NULL || esvc == NULL || eport == NULL ||
        asprintf(&out->base, "/api/v1/namespaces/%s/services/https:%s:%s/proxy", ens, esvc, eport) < 0) {
        out->base = NULL;
        free(ens);
        free(esvc);
        free(eport);
        fprintf(stderr, "kubectl kubequota: out of memory\n");
        return 1;
    }
    free(ens);
    free(esvc);
    free(eport);
    return 0;
}

/* How a request ended: an answer of kubequota's own ({"status_code","message",
 * "description"}, YuniKorn's error shape) is told apart from the API server's (a Status,
 * or text): a 404 of kubequota names a missing user, queue or pod; one of the API server
 * means its Service is not where the plugin looked. */
typedef struct failure {
    long status;       /* 0: no HTTP answer (transport error, printed already) */
    bool ours;         /* kubequota answered */
    const char *title; /* kubequota's "message" (its short title, e.g. "Partition not found") */
} failure_t;

/* The text of an error answer v (NULL when none): kubequota's description, the API
 * server's Status message, or a short text body. */
static const char *error_text(json_t *v, const kq_kube_resp_t *r)
{
    const char *msg = v ? (str_at(v, "description") ? str_at(v, "description") : str_at(v, "message")) : NULL;
    if (msg == NULL)
        msg = v ? str_at(v, "error") : NULL;
    if (msg == NULL && r->body && r->len < 500 && strlen(r->body) == r->len)
        msg = r->body;
    return msg != NULL && msg[0] != '\0' ? msg : "(no message)";
}

/* One request to kubequota through the proxy: 0 with *out (the JSON answer), else 1. On
 * failure the message is printed unless quiet (then only *f says what happened, for a
 * caller that goes on without the answer); not_found, when given, is printed instead of
 * kubequota's own message for a 404 of kubequota other than a missing partition. */
static int call_ex(conn_t *c, const char *method, const char *rel, const char *body, bool quiet,
                   const char *not_found, json_t **out, failure_t *f)
{
    failure_t dummy;
    if (f == NULL)
        f = &dummy;
    *f = (failure_t){0};
    char *path = NULL;
    if (asprintf(&path, "%s%s", c->base, rel) < 0)
        return 1;
    kq_kube_resp_t r = {0};
    int rc = kq_kube_request(c->kube, method, path, body ? "application/json" : NULL, body, &r);
    if (rc != 0) {
        if (!quiet)
            fprintf(stderr, "kubectl kubequota: %s %s: %s\n", method, tx(path), kq_strerror(rc));
        free(path);
        return 1;
    }
    json_error_t je;
    json_t *v = json_loadb(r.body, r.len, 0, &je);
    if (r.status == 200 && v != NULL) {
        kq_kube_resp_free(&r);
        free(path);
        *out = v;
        return 0;
    }
    f->status = r.status;
    f->ours = json_is_integer(json_object_get(v, "status_code"));
    if (quiet) {
        json_decref(v);
        kq_kube_resp_free(&r);
        free(path);
        return 1;
    }
    const char *title = f->ours ? str_at(v, "message") : NULL, *desc = f->ours ? str_at(v, "description") : NULL;
    /* YuniKorn's error bodies repeat the bare title ("User not found") as the description:
     * then not_found says which; a description of its own is printed as it is */
    bool bare = desc == NULL || title == NULL || strcmp(desc, title) == 0;
    if (f->ours && r.status == 404 && not_found != NULL && bare &&
        (title == NULL || strcmp(title, "Partition not found") != 0))
        fprintf(stderr, "kubectl kubequota: %s\n", tx(not_found));
    else if (f->ours && r.status == 404) /* the message names what is missing */
        fprintf(stderr, "kubectl kubequota: %s\n", tx(error_text(v, &r)));
    else if (f->ours)
        fprintf(stderr, "kubectl kubequota: kubequota answered %ld to %s %s: %s\n", r.status, method, tx(path),
                tx(error_text(v, &r)));
    else
        fprintf(stderr, "kubectl kubequota: the API server answered %ld to %s %s: %s\n", r.status, method, tx(path),
                tx(error_text(v, &r)));
    if (r.status == 401 || r.status == 403) /* the API server's verb for the method (docs/cli.md) */
        fprintf(stderr, "  (through the service proxy you need `%s services/proxy` on kubequota's Service, and "
                        "kubequota's usage view must accept your token: --rest-auth=kubernetes)\n",
                strcmp(method, "POST") == 0 ? "create" : "get");
    else if (!f->ours && (r.status == 404 || r.status == 503))
        fprintf(stderr, "  (is kubequota's Service there? see --kubequota-namespace and --kubequota-service)\n");
    json_decref(v);
    kq_kube_resp_free(&r);
    free(path);
    return 1;
}

static int call(conn_t *c, const char *method, const char *rel, const char *body, json_t **out)
{
    return call_ex(c, method, rel, body, false, NULL, out, NULL);
}

/* ------------------------------------------------------------------ output */

/* Whether a resource's values are bytes: memory, storage, huge pages, and the "memory" counter
 * of partitionable DRA devices (<class>.deviceclass.resource.k8s.io/memory, docs/dra.md). */
static bool bytes_res(const char *res)
{
    static const char dra_mem[] = ".deviceclass.resource.k8s.io/memory";
    size_t l = strlen(res), d = sizeof(dra_mem) - 1;
    return strcmp(res, "memory") == 0 || strcmp(res, "ephemeral-storage") == 0 ||
           strncmp(res, "hugepages-", 10) == 0 || (l > d && strcmp(res + l - d, dra_mem) == 0);
}

static void fmt_res(const char *res, double x, char *out, size_t n)
{
    if (strcmp(res, "vcore") == 0 || strcmp(res, "cpu") == 0) {
        snprintf(out, n, "%g", x / 1000.0);
    } else if (bytes_res(res)) {
        static const char *u[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
        int i = 0;
        while (x >= 1024 && i < 5) {
            x /= 1024;
            i++;
        }
        snprintf(out, n, "%.4g%s", x, u[i]);
    } else if (x > -9007199254740992.0 && x < 9007199254740992.0 && x == (double)(long long)x) {
        snprintf(out, n, "%lld", (long long)x); /* a count, exactly (%g wrote 1234567 as 1.23457e+06) */
    } else {
        snprintf(out, n, "%g", x);
    }
}

/* "used/max" or "used" of one resource. */
static void cell(json_t *used, json_t *max, const char *res, char *out, size_t n)
{
    char a[32], b[32];
    json_t *u = json_object_get(used, res), *m = json_object_get(max, res);
    if (u == NULL && m == NULL) {
        snprintf(out, n, "-");
        return;
    }
    fmt_res(res, json_number_value(u), a, sizeof(a));
    if (m == NULL) {
        snprintf(out, n, "%s", a);
        return;
    }
    fmt_res(res, json_number_value(m), b, sizeof(b));
    snprintf(out, n, "%s/%s", a, b);
}

/* The resources the columns do not show (DRA devices and counters, extended resources, ...):
 * one line each under the row, "used/max" or "used", in name order. */
static void other_rows(json_t *use, json_t *max, int pad)
{
    const char *names[64];
    size_t n = 0;
    json_t *sets[2] = {use, max};
    for (int s = 0; s < 2; s++) {
        const char *k;
        json_t *v;
        json_object_foreach(sets[s], k, v)
        {
            if (strcmp(k, "vcore") == 0 || strcmp(k, "cpu") == 0 || strcmp(k, "memory") == 0 ||
                strcmp(k, "pods") == 0 || (s == 0 && json_number_value(v) == 0 && json_object_get(max, k) == NULL))
                continue;
            bool dup = false;
            for (size_t i = 0; i < n && !dup; i++)
                dup = strcmp(names[i], k) == 0;
            if (!dup && n < 64)
                names[n++] = k;
        }
    }
    for (size_t i = 1; i < n; i++) /* insertion sort: a handful of names */
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        char val[80];
        cell(use, max, names[i], val, sizeof(val));
        printf("%*s  %s %s\n", pad, "", tx(names[i]), val);
    }
}

static void tracker_rows(const char *name, json_t *q, bool *first)
{
    if (!json_is_object(q))
        return;
    json_t *use = json_object_get(q, "resourceUsage"), *max = json_object_get(q, "maxResources");
    bool any = json_object_size(max) > 0 || json_integer_value(json_object_get(q, "maxApplications")) > 0;
    const char *k;
    json_t *v;
    json_object_foreach(use, k, v)
    {
        if (json_number_value(v) != 0)
            any = true;
    }
    if (any) {
        char cpu[64], mem[64], pods[64], apps[64];
        cell(use, max, "vcore", cpu, sizeof(cpu));
        cell(use, max, "memory", mem, sizeof(mem));
        cell(use, max, "pods", pods, sizeof(pods));
        size_t na = json_array_size(json_object_get(q, "runningApplications"));
        json_int_t ma = json_integer_value(json_object_get(q, "maxApplications"));
        if (ma > 0)
            snprintf(apps, sizeof(apps), "%zu/%lld", na, (long long)ma);
        else
            snprintf(apps, sizeof(apps), "%zu", na);
        printf("%-16s %-28s %-14s %-20s %-10s %s\n", *first ? tx(name) : "", tx(str_at(q, "queuePath")), cpu, mem,
               pods, apps);
        other_rows(use, max, 45);
        *first = false;
    }
    size_t i;
    json_array_foreach(json_object_get(q, "children"), i, v)
    tracker_rows(name, v, first);
}

static void print_trackers(json_t *v, const char *key, const char *title)
{
    printf("%-16s %-28s %-14s %-20s %-10s %s\n", title, "QUEUE", "CPU", "MEMORY", "PODS", "APPS");
    json_t *list = json_is_array(v) ? json_incref(v) : json_pack("[O]", v);
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t)
    {
        bool first = true;
        const char *name = str_at(t, key) ? str_at(t, key) : "";
        tracker_rows(name, json_object_get(t, "queues"), &first);
        if (first) /* nothing counted, no limit */
            printf("%-16s %-28s %-14s %-20s %-10s %s\n", tx(name), "root", "0", "0", "0", "0");
    }
    json_decref(list);
}

static void queue_rows(json_t *q, int depth)
{
    char cpu[64], mem[64], pods[64], name[300];
    json_t *use = json_object_get(q, "allocatedResource"), *max = json_object_get(q, "maxResource");
    cell(use, max, "vcore", cpu, sizeof(cpu));
    cell(use, max, "memory", mem, sizeof(mem));
    cell(use, max, "pods", pods, sizeof(pods));
    snprintf(name, sizeof(name), "%*s%s", depth * 2, "", tx(str_at(q, "queuename")));
    printf("%-32s %-14s %-20s %-10s %lld\n", name, cpu, mem, pods,
           (long long)json_integer_value(json_object_get(q, "runningApps")));
    other_rows(use, max, 32);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(q, "children"), i, c)
    queue_rows(c, depth + 1);
}

/* One line per blocker. The message is the denial reason as the Event words it, which
 * already names its scope ("user alice in queue root.a: ..."), so "kind name: " is only
 * put before a message that does not start with it. */
static void print_blockers(json_t *v)
{
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(v, "blockers"), i, b)
    {
        const char *kind = str_at(b, "kind"), *name = str_at(b, "name"), *msg = str_at(b, "message");
        char scope[600];
        snprintf(scope, sizeof(scope), "%s %s", kind ? kind : "?", name ? name : "");
        if (msg != NULL && (strncmp(msg, scope, strlen(scope)) == 0 || (name != NULL && strstr(msg, name) != NULL)))
            printf("  %s\n", tx(msg));
        else
            printf("  %s %s: %s\n", kind ? tx(kind) : "?", tx(name), tx(msg));
    }
}

/* What the owner of a pod that can never fit as it is can do (explain's first blocker):
 * waiting does not help, so say what does. */
static void print_never_advice(json_t *v)
{
    json_t *b = json_array_get(json_object_get(v, "blockers"), 0);
    const char *kind = str_at(b, "kind"), *res = str_at(b, "resource"), *max = str_at(b, "max");
    if (kind != NULL && (strcmp(kind, "queue-missing") == 0 || strstr(tx(str_at(b, "message")), "not a leaf") != NULL))
        printf("  what you can do: waiting will not help; recreate the pod naming an existing leaf queue "
               "(label kubequota.io/queue), or ask for its queue to be created\n");
    else if (res != NULL && max != NULL)
        printf("  what you can do: waiting will not help; recreate the pod requesting at most %s %s, "
               "or ask for %s %s's limit to be raised\n", tx(max), tx(res), tx(kind), tx(str_at(b, "name")));
    else
        printf("  what you can do: waiting will not help; recreate the pod so that it fits, "
               "or ask for the limit above to be raised\n");
}

/* The view's JSON as it came, except that DEL and the C1 controls (which JSON allows raw
 * in strings, and jansson writes raw) are written as \u escapes, like the C0 controls; the
 * document means the same. */
static void print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s == NULL)
        return;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == 0x7F)
            fputs("\\u007f", stdout);
        else if (*p == 0xC2 && p[1] >= 0x80 && p[1] < 0xA0)
            printf("\\u%04x", *++p);
        else
            putchar(*p);
    }
    putchar('\n');
    free(s);
}

/* ------------------------------------------------------------------ commands */

static int cmd_usage(const cli_t *c, conn_t *k)
{
    char rel[1200];
    char *e = NULL;
    const char *what = c->user ? "user" : c->group ? "group" : c->queue ? "queue" : NULL;
    const char *val = c->user ? c->user : c->group ? c->group : c->queue;
    char *part = escape(c->partition);
    if (part == NULL)
        return 1;
    if (what != NULL) {
        e = escape(val);
        if (e == NULL) {
            free(part);
            return 1;
        }
    }
    if (what == NULL)
        snprintf(rel, sizeof(rel), "/ws/v1/partition/%s/usage/users", part);
    else if (strcmp(what, "queue") == 0)
        snprintf(rel, sizeof(rel), "/ws/v1/partition/%s/queue/%s?subtree", part, e);
    else
        snprintf(rel, sizeof(rel), "/ws/v1/partition/%s/usage/%s/%s", part, what, e);
    free(part);
    free(e);
    /* kubequota answers YuniKorn's bare "User not found" / "Queue not found": say which */
    char missing[1200] = "";
    if (what != NULL && strcmp(what, "queue") == 0)
        snprintf(missing, sizeof(missing), "queue \"%s\" is neither configured nor in use", val);
    else if (what != NULL)
        snprintf(missing, sizeof(missing), "%s \"%s\" not found (no usage tracked, not named in a limit)", what,
                 val);
    json_t *v = NULL;
    if (call_ex(k, "GET", rel, NULL, false, missing[0] ? missing : NULL, &v, NULL) != 0)
        return 1;
    if (c->json)
        print_json(v);
    else if (what != NULL && strcmp(what, "queue") == 0) {
        printf("%-32s %-14s %-20s %-10s %s\n", "QUEUE", "CPU", "MEMORY", "PODS", "APPS");
        queue_rows(v, 0);
    } else if (what != NULL && strcmp(what, "group") == 0)
        print_trackers(v, "groupName", "GROUP");
    else
        print_trackers(v, "userName", "USER");
    json_decref(v);
    return 0;
}

/* The admission gate's waiting pods (GET gating/waiting): [{"queue","waiting","pods":[{
 * "namespace","name","user","position","waitingSeconds","reason","neverFits"}...]}...],
 * each queue's pods in release order; those set aside as never fitting last, position null. */
static int get_waiting(const cli_t *c, conn_t *k, bool quiet, json_t **out, failure_t *f)
{
    char *part = escape(c->partition);
    if (part == NULL)
        return 1;
    char rel[600];
    snprintf(rel, sizeof(rel), "/ws/v1/partition/%s/gating/waiting", part);
    free(part);
    return call_ex(k, "GET", rel, NULL, quiet, NULL, out, f);
}

/* Is queue path q the queue want or one of its descendants? */
static bool in_subtree(const char *q, const char *want)
{
    size_t n = strlen(want);
    return q != NULL && strncmp(q, want, n) == 0 && (q[n] == '\0' || q[n] == '.');
}

/* The pods of a queue that are in line (with a position): the last position. */
static json_int_t line_length(json_t *queue)
{
    json_int_t n = 0;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(queue, "pods"), i, p)
    {
        json_int_t pos = json_integer_value(json_object_get(p, "position"));
        if (pos > n)
            n = pos;
    }
    return n;
}

static void fmt_wait(double secs, char *out, size_t n)
{
    long s = secs < 0 ? 0 : (long)secs;
    if (s < 60)
        snprintf(out, n, "%lds", s);
    else if (s < 3600)
        snprintf(out, n, "%ldm%lds", s / 60, s % 60);
    else
        snprintf(out, n, "%ldh%ldm", s / 3600, s % 3600 / 60);
}

static int by_queue(const void *a, const void *b)
{
    const char *x = str_at(*(json_t *const *)a, "queue"), *y = str_at(*(json_t *const *)b, "queue");
    return strcmp(x ? x : "", y ? y : "");
}

static int cmd_waiting(const cli_t *c, conn_t *k)
{
    json_t *v = NULL;
    if (get_waiting(c, k, false, &v, NULL) != 0)
        return 1;
    /* the queues asked for, by name (the view's order is its hash table's) */
    size_t i, j, n = 0;
    json_t *q, *p;
    json_t **sel = calloc(json_array_size(v) + 1, sizeof(*sel));
    json_t *shown = json_array();
    if (sel == NULL || shown == NULL) {
        free(sel);
        json_decref(shown);
        json_decref(v);
        fprintf(stderr, "kubectl kubequota: out of memory\n");
        return 1;
    }
    json_array_foreach(v, i, q)
    {
        if (c->queue == NULL || in_subtree(str_at(q, "queue"), c->queue))
            sel[n++] = q;
    }
    qsort(sel, n, sizeof(*sel), by_queue);
    for (i = 0; i < n; i++)
        json_array_append(shown, sel[i]);
    free(sel);
    size_t rows = 0;
    json_array_foreach(shown, i, q)
    rows += json_array_size(json_object_get(q, "pods"));
    if (c->json) {
        print_json(shown);
    } else if (rows == 0) {
        if (c->queue != NULL)
            printf("no pod waits behind the admission gate in queue %s\n", tx(c->queue));
        else
            printf("no pod waits behind the admission gate (is it on? kubequota serve --admission-gate)\n");
    } else {
        printf("%-24s %-9s %-40s %-16s %-8s %s\n", "QUEUE", "POSITION", "POD", "USER", "WAITING", "REASON");
        json_array_foreach(shown, i, q)
        {
            json_int_t len = line_length(q);
            json_array_foreach(json_object_get(q, "pods"), j, p)
            {
                char pos[64], pod[600], wait[32];
                json_t *jp = json_object_get(p, "position");
                if (json_is_integer(jp))
                    snprintf(pos, sizeof(pos), "%lld/%lld", (long long)json_integer_value(jp), (long long)len);
                else
                    snprintf(pos, sizeof(pos), "-");
                snprintf(pod, sizeof(pod), "%s/%s", tx(str_at(p, "namespace")), tx(str_at(p, "name")));
                fmt_wait(json_number_value(json_object_get(p, "waitingSeconds")), wait, sizeof(wait));
                const char *reason = str_at(p, "reason");
                bool never = json_is_true(json_object_get(p, "neverFits"));
                printf("%-24s %-9s %-40s %-16s %-8s %s%s\n", tx(str_at(q, "queue")), pos, pod, tx(str_at(p, "user")),
                       wait, never && (reason == NULL || strstr(reason, "never") == NULL) ? "never fits: " : "",
                       tx(reason));
            }
        }
    }
    json_decref(shown);
    json_decref(v);
    return 0;
}

/* Where pod ns/name stands behind the admission gate, printed under why's verdict; nothing
 * when the gate is off, the pod is not gated, or the caller may not read the waiting view
 * (self-service: only explain is theirs). */
static void print_place_in_line(const cli_t *c, conn_t *k, const char *ns, const char *name)
{
    json_t *v = NULL;
    if (get_waiting(c, k, true, &v, NULL) != 0)
        return;
    size_t i, j;
    json_t *q, *p;
    json_array_foreach(v, i, q)
    {
        json_array_foreach(json_object_get(q, "pods"), j, p)
        {
            const char *pns = str_at(p, "namespace"), *pname = str_at(p, "name");
            if (pns == NULL || pname == NULL || strcmp(pns, ns) != 0 || strcmp(pname, name) != 0)
                continue;
            char wait[32];
            fmt_wait(json_number_value(json_object_get(p, "waitingSeconds")), wait, sizeof(wait));
            json_t *jp = json_object_get(p, "position");
            if (json_is_integer(jp))
                printf("  place in line: %lld of %lld behind the admission gate in queue %s (1 is released next), "
                       "waiting %s\n",
                       (long long)json_integer_value(jp), (long long)line_length(q), tx(str_at(q, "queue")), wait);
            else
                printf("  place in line: none, set aside behind the admission gate in queue %s: it can never fit as "
                       "it is (waiting %s)\n",
                       tx(str_at(q, "queue")), wait);
            json_decref(v);
            return;
        }
    }
    json_decref(v);
}

static int cmd_why(const cli_t *c, conn_t *k)
{
    const char *ns = c->pod_ns ? c->pod_ns : k->default_ns ? k->default_ns : "default";
    char *part = escape(c->partition), *ens = escape(ns), *epod = escape(c->pod);
    char rel[1500];
    int rc = 1;
    json_t *v = NULL;
    char missing[700];
    snprintf(missing, sizeof(missing), "pod \"%s\" not found in namespace \"%s\"", c->pod, ns);
    if (part && ens && epod) {
        snprintf(rel, sizeof(rel), "/ws/v1/partition/%s/explain/%s/%s", part, ens, epod);
        rc = call_ex(k, "GET", rel, NULL, false, missing, &v, NULL);
    }
    free(part);
    free(ens);
    free(epod);
    if (rc != 0)
        return rc;
    if (c->json) {
        print_json(v);
    } else {
        printf("pod %s/%s (user %s, queue %s): ", tx(ns), tx(c->pod), str_at(v, "user") ? tx(str_at(v, "user")) : "?",
               str_at(v, "queue") ? tx(str_at(v, "queue")) : "?");
        if (json_is_false(json_object_get(v, "managed")))
            printf("not kubequota's (another scheduler)\n");
        else if (json_is_true(json_object_get(v, "fits")))
            printf("fits its quota now\n");
        else
            printf("%s\n", json_is_true(json_object_get(v, "neverFits")) ? "can never fit as it is" : "waits for quota");
        print_blockers(v);
        if (json_is_false(json_object_get(v, "fits")) && json_is_true(json_object_get(v, "neverFits")))
            print_never_advice(v);
        if (!json_is_false(json_object_get(v, "managed")))
            print_place_in_line(c, k, ns, c->pod);
    }
    json_decref(v);
    return 0;
}

static char *read_input(const char *file, size_t *len)
{
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        if (cap >= INPUT_MAX) {
            free(buf);
            buf = NULL;
            errno = EFBIG;
            break;
        }
        char *nb = realloc(buf, cap * 2 + 1);
        if (nb == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (f != stdin)
        fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

static int cmd_what_if(const cli_t *c, conn_t *k)
{
    size_t len = 0;
    char *text = read_input(c->file, &len);
    if (text == NULL) {
        fprintf(stderr, "kubectl kubequota: what-if: cannot read %s: %s\n", c->file, strerror(errno));
        return 2;
    }
    char err[300];
    json_t *docs = kq_kubectl_yaml_docs(text, len, 0, err, sizeof(err));
    free(text);
    if (docs == NULL) {
        fprintf(stderr, "kubectl kubequota: what-if: %s: %s\n", c->file, err);
        return 2;
    }
    json_t *pods = json_array();
    size_t i;
    json_t *d;
    json_array_foreach(docs, i, d)
    {
        if (json_is_null(d))
            continue; /* an empty document between --- lines */
        json_t *p = kq_kubectl_pods_of(d, err, sizeof(err));
        if (p == NULL) {
            fprintf(stderr, "kubectl kubequota: what-if: %s, document %zu: %s\n", c->file, i + 1, err);
            json_decref(pods);
            json_decref(docs);
            return 2;
        }
        json_array_extend(pods, p);
        json_decref(p);
    }
    json_decref(docs);
    if (json_array_size(pods) == 0) {
        fprintf(stderr, "kubectl kubequota: what-if: %s has no pod\n", c->file);
        json_decref(pods);
        return 2;
    }
    json_t *payload = json_array_size(pods) == 1 ? json_incref(json_array_get(pods, 0)) : json_incref(pods);
    char *body = json_dumps(payload, JSON_COMPACT);
    json_decref(payload);
    char *part = escape(c->partition);
    char rel[600];
    json_t *v = NULL;
    int rc = 1;
    if (body != NULL && part != NULL) {
        snprintf(rel, sizeof(rel), "/ws/v1/partition/%s/explain", part);
        rc = call(k, "POST", rel, body, &v);
    }
    free(body);
    free(part);
    size_t npods = json_array_size(pods);
    json_decref(pods);
    if (rc != 0)
        return rc;
    if (c->json) {
        print_json(v);
    } else {
        json_int_t nfit = json_object_get(v, "fitCount") ? json_integer_value(json_object_get(v, "fitCount"))
                                                         : json_is_true(json_object_get(v, "fits"));
        printf("%lld of %zu pod%s would fit now%s\n", (long long)nfit, npods, npods == 1 ? "" : "s",
               json_is_true(json_object_get(v, "neverFits")) ? "; the rest can never fit as they are" : "");
        print_blockers(v);
    }
    /* the verdict as the exit code, whatever the output format (docs/cli.md) */
    json_int_t fit = json_object_get(v, "fitCount") ? json_integer_value(json_object_get(v, "fitCount"))
                                                    : json_is_true(json_object_get(v, "fits"));
    rc = fit >= (json_int_t)npods                          ? 0
         : json_is_true(json_object_get(v, "neverFits")) ? EXIT_NEVER_FITS
                                                          : EXIT_WOULD_WAIT;
    json_decref(v);
    return rc;
}

int kq_kubectl_main(int argc, char **argv)
{
    cli_t c;
    int rc = parse(argc, argv, &c);
    if (rc != 0)
        return rc;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    conn_t k = {0};
    rc = connect_kube(&c, &k);
    if (rc == 0) {
        if (strcmp(c.cmd, "usage") == 0)
            rc = cmd_usage(&c, &k);
        else if (strcmp(c.cmd, "waiting") == 0)
            rc = cmd_waiting(&c, &k);
        else if (strcmp(c.cmd, "why") == 0)
            rc = cmd_why(&c, &k);
        else
            rc = cmd_what_if(&c, &k);
    }
    kq_kube_free(k.kube);
    free(k.base);
    free(k.default_ns);
    curl_global_cleanup();
    return rc;
}
