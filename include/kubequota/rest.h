/* REST usage view (YuniKorn's paths and shapes): users, groups and queues of a partition,
 * and validation of a queues.yaml.
 *
 * Each function returns the HTTP status and sets *body to a new malloc'ed, NUL-terminated
 * JSON text (caller frees with free()) and *len to its length. On ENOMEM it returns 500
 * and *body is NULL. Errors have the body {"error":"..."}. An unknown partition (anything
 * but app->partition) is 404, as is an unknown user or group.
 *
 * Threads: any; the data comes from the ugm's JSON views (which take the ugm's locks).
 */
#ifndef KUBEQUOTA_REST_H
#define KUBEQUOTA_REST_H

#include <stddef.h>

#include "kubequota/app.h"

/* GET /ws/v1/partition/{partition}/usage/users */
int kq_rest_users(kq_app_t *app, const char *partition, char **body, size_t *len);
/* GET /ws/v1/partition/{partition}/usage/user/{user} */
int kq_rest_user(kq_app_t *app, const char *partition, const char *user, char **body, size_t *len);
/* GET /ws/v1/partition/{partition}/usage/groups */
int kq_rest_groups(kq_app_t *app, const char *partition, char **body, size_t *len);
/* GET /ws/v1/partition/{partition}/usage/group/{group} */
int kq_rest_group(kq_app_t *app, const char *partition, const char *group, char **body, size_t *len);
/* GET /ws/v1/partition/{partition}/queues */
int kq_rest_queues(kq_app_t *app, const char *partition, char **body, size_t *len);

/* POST /ws/v1/validate-conf: yaml is a queues.yaml. Always 200 (like YuniKorn) with
 * {"allowed":true,"reason":""} or {"allowed":false,"reason":"<every diagnostic, joined
 * with \"; \">"}. Nothing is applied. With app, the file is also judged as the running
 * serve's reload would judge it (kq_app_check_config: its partition, its metering);
 * NULL: the loader's rules only. */
int kq_rest_validate_conf(kq_app_t *app, const char *yaml, size_t yaml_len, char **body, size_t *len);

/* {"error":"<message>"} as a new malloc'ed string (*len its length); NULL on ENOMEM. */
char *kq_rest_error_body(const char *message, size_t *len);

#endif
