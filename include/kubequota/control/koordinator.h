/* Koordinator's names that the elastic quota modules share (elastic.c, resolve.c,
 * profiles.c): the label and annotation prefix of its quotas and its reserved quota names
 * (koordinator-sh/koordinator apis/extension/elastic_quota.go). Constants only.
 */
#ifndef KUBEQUOTA_KOORDINATOR_H
#define KUBEQUOTA_KOORDINATOR_H

#define KQ_EQ_LABEL_PREFIX "quota.scheduling.koordinator.sh/"

#define KQ_KOORD_ROOT    "koordinator-root-quota"
#define KQ_KOORD_SYSTEM  "koordinator-system-quota"
#define KQ_KOORD_DEFAULT "koordinator-default-quota"

#define KQ_KOORD_LABEL_IS_PARENT KQ_EQ_LABEL_PREFIX "is-parent"
#define KQ_KOORD_LABEL_TREE_ID   KQ_EQ_LABEL_PREFIX "tree-id"

#endif
