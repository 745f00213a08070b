/* Access to the usage view (REST) and, by a flag, /metrics.
 *
 * A caller is let in when it
 *   - presented a client certificate the TLS layer verified against --client-ca, or
 *   - sends "Authorization: Bearer <t>" (or, when there is no Authorization header,
 *     "X-Kubequota-Authorization: Bearer <t>": the kubectl plugin through the API server's
 *     service proxy, which removes Authorization) where <t> is the token in --rest-token-file
 *     (compared in constant time; the file is re-read when it changes, so it can be
 *     rotated; deleting it revokes the token), or
 *   - with --rest-auth=kubernetes, sends a Kubernetes bearer token that TokenReview
 *     authenticates and SubjectAccessReview allows for verb "get" on the virtual resource
 *     "usage" in API group "kubequota.io" (grant it with a ClusterRole rule:
 *     apiGroups ["kubequota.io"], resources ["usage"], verbs ["get"]).
 * With --rest-auth=none the view is open (for local tests); with no mechanism configured
 * it is closed, and says how to open it.
 *
 * Self-service: a Kubernetes token that is authenticated but refused the permission (403)
 * still names its user (kq_auth_check_who); the server lets it read that user's own usage
 * and explain that user's own pods, and nothing else (server.c, GUARD_REST_SELF).
 *
 * Kubernetes answers are cached for a short time, keyed by a SHA-256 digest of the token
 * (tokens themselves are never stored or logged): an allowed token for cache_seconds (60),
 * so a revoked token keeps working at most that long; a refused one for 10 s. Rejections
 * are rate-limited by source and by failure: a client address may have 20 tokens rejected
 * by TokenReview at once and then 10 per second, after which its unknown tokens are
 * answered 429 without a review (its cached tokens are unaffected); addresses with a
 * rejection on record also share a budget of 100 at once, then 50 per second. A review that
 * succeeds costs nothing, and an address with no rejection on record is always reviewed:
 * a flood of random tokens from one address never refuses a valid token from another.
 *
 * Threads: kq_auth_check is called from civetweb workers; a private mutex guards the token
 * and the cache, and is never held during a request to the API server.
 */
#ifndef KUBEQUOTA_AUTH_H
#define KUBEQUOTA_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "kubequota/base/error.h"
#include "kubequota/kube/kube.h"

typedef enum kq_auth_mode {
    KQ_AUTH_DEFAULT = 0, /* client certificate or token file */
    KQ_AUTH_NONE,        /* open */
    KQ_AUTH_KUBERNETES,  /* client certificate, token file, or TokenReview + SubjectAccessReview */
} kq_auth_mode_t;

typedef struct kq_auth_opts {
    kq_auth_mode_t mode;
    bool client_certs;      /* the server requires and verifies client certificates */
    const char *token_file; /* NULL = none */
    kq_kube_t *kube;        /* for KQ_AUTH_KUBERNETES; borrowed */
    int cache_seconds;      /* how long an allowed answer is cached (0 = 60; denials 10 s) */
} kq_auth_opts_t;

typedef struct kq_auth kq_auth_t;

/* Parses "none", "kubernetes" or "default". 0 or KQ_EINVAL. */
int kq_auth_mode_parse(const char *s, kq_auth_mode_t *out) KQ_WUR;

/* NULL with a reason in err when the token file cannot be read or is empty. */
kq_auth_t *kq_auth_new(const kq_auth_opts_t *o, char *err, size_t errlen);
void kq_auth_free(kq_auth_t *a);

/* True when no mechanism could ever let a caller in (the view is closed). */
bool kq_auth_closed(const kq_auth_t *a);

/* Decides one request. has_client_cert: the connection presented a verified client
 * certificate. authorization: the Authorization header or NULL. Returns 200 (allowed),
 * 401 (no or unknown credentials), 403 (authenticated but not allowed), 429 (too many
 * unknown tokens to review now) or 503 (the API server could not be asked); why[] says
 * why for the error body. */
int kq_auth_check(kq_auth_t *a, bool has_client_cert, const char *authorization, char *why, size_t whylen);

/* Who a Kubernetes token belongs to (TokenReview's answer), for self-service: a caller
 * without the usage permission may still read their own user's usage and explain pods of
 * their own identity (server.h). */
#define KQ_AUTH_USER_MAX 256
#define KQ_AUTH_GROUPS_BYTES 1024
typedef struct kq_auth_who {
    char user[KQ_AUTH_USER_MAX];       /* the TokenReview username; "" when not known */
    char groups[KQ_AUTH_GROUPS_BYTES]; /* its groups, each NUL-terminated, back to back (a
                                        * group that does not fit is left out) */
    size_t n_groups;
} kq_auth_who_t;

/* kq_auth_check, and with --rest-auth=kubernetes the caller's identity in *who (cleared
 * otherwise) when the answer is 200 or 403. */
int kq_auth_check_who(kq_auth_t *a, bool has_client_cert, const char *authorization, kq_auth_who_t *who,
                      char *why, size_t whylen);

/* kq_auth_check_who for a caller at source (the peer address, the key of the rejection
 * budget; NULL: one shared source). kq_auth_check and kq_auth_check_who use NULL. */
int kq_auth_check_from(kq_auth_t *a, const char *source, bool has_client_cert, const char *authorization,
                       kq_auth_who_t *who, char *why, size_t whylen);

/* True when group is one of who's groups. */
bool kq_auth_who_in_group(const kq_auth_who_t *who, const char *group);

#endif
