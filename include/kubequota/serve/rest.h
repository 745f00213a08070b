/* REST usage view (YuniKorn's paths and shapes, apache/yunikorn-core pkg/webservice):
 * users, groups, queues, applications and nodes of a partition, partitions, clusters,
 * scheduler health, the configuration, and validation of a queues.yaml.
 *
 * Each function returns the HTTP status and sets *body to a new malloc'ed, NUL-terminated
 * JSON text (caller frees with free()) and *len to its length. On ENOMEM it returns 500
 * and *body is NULL. Errors have YuniKorn's body {"status_code":N,"message":"...",
 * "description":"..."} (dao.YAPIError) with YuniKorn's handlers' texts ("Partition not
 * found", "User not found", "Invalid user name", "Queue not found", "Application not
 * found", "Node not found", ...) and description equal to message, as YuniKorn's
 * buildJSONErrorResponse sends them. An unknown partition (anything but app->partition) is
 * 404, as is an unknown user or group (users and groups named in a configured limit are
 * known), queue, application or node; a malformed queue path, user or group name is 400.
 *
 * Threads: any; the data comes from the ugm's JSON views (which take the ugm's locks).
 */
#ifndef KUBEQUOTA_REST_H
#define KUBEQUOTA_REST_H

#include <stdbool.h>
#include <stddef.h>

#include "kubequota/app.h"

/* Large views streamed: the bytes kq_rest_users (KQ_REST_VIEW_USERS), kq_rest_groups
 * (_GROUPS) or kq_rest_apps (_APPS, arg = the state or NULL) answer, handed to write(ctx, p,
 * n) in pieces while the view is built one element at a time (kq_ugm_users_each,
 * kq_ugm_apps_each), so that no more than one element's tree is held at once. write returns
 * 0, or non-zero to stop. An answer that is not streamed (an error such as an unknown
 * partition, or the fixed empty list of a state kubequota keeps no history of) comes back
 * as the buffered forms give it, in *body (new) with its status, nothing written. Else
 * *body is NULL and the result is 200 once the whole answer was written, or -1 when it was
 * cut off after the first piece (write failed, or ENOMEM): the caller must end the
 * connection without completing the answer. */
typedef enum { KQ_REST_VIEW_USERS, KQ_REST_VIEW_GROUPS, KQ_REST_VIEW_APPS } kq_rest_view_t;
typedef int (*kq_rest_write_fn)(void *ctx, const char *p, size_t n);
int kq_rest_stream(kq_app_t *app, kq_rest_view_t view, const char *partition, const char *arg, kq_rest_write_fn write,
                   void *ctx, char **body, size_t *len);

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

/* GET /ws/v1/partition/{partition}/queue/{queue}[?subtree]: one queue of the queues view,
 * with its children only when subtree is set (childNames always). */
int kq_rest_queue(kq_app_t *app, const char *partition, const char *queue, bool subtree, char **body,
                  size_t *len);
/* GET /ws/v1/partition/{partition}/queue/{queue}/applications: the running applications
 * whose first pod went to that queue (kq_ugm_apps_json). */
int kq_rest_queue_apps(kq_app_t *app, const char *partition, const char *queue, char **body, size_t *len);
/* GET /ws/v1/partition/{partition}/applications[/{state}]: state NULL or "active": the
 * running applications; "rejected", "completed": [] (no history kept); else 400. */
int kq_rest_apps(kq_app_t *app, const char *partition, const char *state, char **body, size_t *len);
/* GET /ws/v1/partition/{partition}/nodes: [{"nodeID","hostName","capacity" (allocatable),
 * "allocated" (the requests of the counted pods bound to it), "available" (capacity -
 * allocated), "schedulable","isReserved"}] from the nodes informer ([] without elastic
 * quota); zero values pruned. */
int kq_rest_nodes(kq_app_t *app, const char *partition, char **body, size_t *len);
/* GET /ws/v1/partition/{partition}/node/{node}: one node of that view; 404 "Node not found". */
int kq_rest_node(kq_app_t *app, const char *partition, const char *node, char **body, size_t *len);
/* GET /ws/v1/partition/{p}/applications/{state}?status= (queue NULL) and
 * /ws/v1/partition/{p}/queue/{queue}/applications/{state}?status=, checked in the order of
 * YuniKorn's getPartitionApplicationsByState / getQueueApplicationsByState. 0 when the
 * answer is every active application (of the queue): the caller then answers as
 * kq_rest_stream / kq_rest_queue_apps do; else the status with *body ([] for a state or
 * status no kubequota application is in, or an error). */
int kq_rest_apps_select(kq_app_t *app, const char *partition, const char *queue, const char *state,
                        const char *status, char **body, size_t *len);
/* GET /ws/v1/partition/{p}/application/{id} (queue NULL) and
 * /ws/v1/partition/{p}/queue/{queue}/application/{id}: the application's object of the
 * applications view; 404 "Application not found". */
int kq_rest_application(kq_app_t *app, const char *partition, const char *queue, const char *id, char **body,
                        size_t *len);
/* GET /ws/v1/metrics: YuniKorn's metric families that kubequota can compute (Prometheus text
 * format 0.0.4): yunikorn_queue_app{queue,state="running"} (leaf queues),
 * yunikorn_queue_resource{queue,resource,state} (guaranteed, max, allocated, pending,
 * maxRunningApps), the same per queue under YuniKorn's pre-1.7 names
 * yunikorn_<queue>_queue_app / _queue_resource (its Grafana dashboard queries those),
 * yunikorn_scheduler_application_total{state="running"}, yunikorn_scheduler_node{state=
 * "active"} and yunikorn_scheduler_<resource>_node_usage_total{range}. A new malloc'ed text
 * (*len its length); NULL on ENOMEM or without usage tracking. */
char *kq_rest_metrics(kq_app_t *app, size_t *len);
/* GET /ws/v1/scheduler/node-utilizations: [dao.PartitionNodesUtilDAOInfo] of the partition:
 * per resource, ten buckets of nodes by allocated/capacity (kq_rest_nodes' numbers), as
 * YuniKorn's getPartitionNodesUtilJSON. */
int kq_rest_node_utilizations(kq_app_t *app, char **body, size_t *len);
/* GET /ws/v1/history/apps and /ws/v1/history/containers: YuniKorn's answer when its internal
 * metrics collection is off (500 "Internal metrics collection is not enabled."): kubequota
 * keeps no history. */
int kq_rest_history(kq_app_t *app, char **body, size_t *len);
/* YuniKorn's configs.UserRegExp and GroupRegExp. */
bool kq_rest_user_name_valid(const char *name);
bool kq_rest_group_name_valid(const char *name);
/* GET /ws/v1/partitions: [dao.PartitionInfo] for the one partition served. */
int kq_rest_partitions(kq_app_t *app, char **body, size_t *len);
/* GET /ws/v1/clusters: [dao.ClusterDAOInfo]. */
int kq_rest_clusters(kq_app_t *app, char **body, size_t *len);
/* GET /ws/v1/scheduler/healthcheck: dao.SchedulerHealthDAOInfo ({"Healthy",
 * "HealthChecks":[...]}); healthy once the first pod list is in. */
int kq_rest_healthcheck(kq_app_t *app, char **body, size_t *len);
/* GET /ws/v1/config: the configuration in force, in queues.yaml's key names (JSON, which
 * is also YAML); quantities as strings, cpu as "vcore". */
int kq_rest_config(kq_app_t *app, char **body, size_t *len);
/* GET /ws/v1/partition/{p}/placementrules: the rules in force, as YuniKorn's dao.RuleDAO
 * list (kq_placement_rules_json). */
int kq_rest_placement_rules(kq_app_t *app, const char *partition, char **body, size_t *len);
/* Records the process start time (the clusters and partitions views); call once early. */
/* GET /ws/v1/partition/{p}/gating/waiting: the gated pods per queue in release order
 * (kq_gating_waiting_json); [] when gating is off. */
int kq_rest_gating_waiting(kq_app_t *app, const char *partition, char **body, size_t *len);
void kq_rest_init(void);

/* POST /ws/v1/validate-conf: yaml is a queues.yaml. Always 200 (like YuniKorn) with
 * {"allowed":true,"reason":""} or {"allowed":false,"reason":"<every diagnostic, joined
 * with \"; \">"}. Nothing is applied. With app, the file is also judged as the running
 * serve's reload would judge it (kq_app_check_config: its partition, its metering);
 * NULL: the loader's rules only. */
int kq_rest_validate_conf(kq_app_t *app, const char *yaml, size_t yaml_len, char **body, size_t *len);

/* {"status_code":status,"message":message,"description":message} as a new malloc'ed string
 * (*len its length); NULL on ENOMEM. description is ignored: YuniKorn's handlers send the
 * message as the description too (dao.NewYAPIError with no cause). */
char *kq_rest_error_body(int status, const char *message, const char *description, size_t *len);

#endif
