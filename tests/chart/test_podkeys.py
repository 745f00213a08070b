"""Every label and annotation kubequota reads to say who a pod is, where it is counted and
which application it joins is fixed once the pod exists (issue 29): the pod parser reads
them from one list, include/kubequota/kube/podkeys.h (KQ_POD_KEYS), the webhook guards that
list, and the identity webhook's matchConditions must let every change of one of them
through to the webhook, or the API server would store the change without asking.

The list is parsed from the header here; tests/unit/test_pod.c holds the parser to it (a
label or annotation the parser reads is in the list, or named there as not placing a pod).
The conditions are evaluated by the real CEL evaluator (tests/chart/cel_eval.mjs), for an
UPDATE that adds, changes or removes each key, for every value set with the identity
webhook on.
"""

import copy
import os
import re
import unittest

import chartlib as cl
from test_render import values_of
from test_webhook_scope import Dispatch, TEAM, pod, request

HEADER = os.path.join(cl.REPO, "include", "kubequota", "kube", "podkeys.h")
ENTRY = re.compile(r'^\s*X\((LABEL|ANNOTATION),\s*(IDENTITY|QUEUE|APP|QUOTA),\s*"([^"]+)"\)\s*\\?\s*$')


def pod_keys():
    """[(map, role, key)] of KQ_POD_KEYS, in the header's order."""
    text = open(HEADER).read()
    body = text[text.index("#define KQ_POD_KEYS(X)"):]
    body = body[:body.index("\n\n")]
    keys = []
    for line in body.splitlines()[1:]:
        m = ENTRY.match(line)
        if not m:
            raise AssertionError("%s: cannot read KQ_POD_KEYS line %r" % (HEADER, line))
        keys.append((m.group(1), m.group(2), m.group(3)))
    return keys


class PodKeysHeaderTest(unittest.TestCase):
    def test_header_lists_every_key_kubequota_documents(self):
        keys = {(m, k) for m, _, k in pod_keys()}
        # the keys of issue 29: YuniKorn's queue label and every application id key
        for want in [("LABEL", "yunikorn.apache.org/queue"), ("LABEL", "yunikorn.apache.org/app-id"),
                     ("ANNOTATION", "yunikorn.apache.org/app-id"), ("LABEL", "applicationId"),
                     ("LABEL", "spark-app-selector"), ("LABEL", "kubequota.io/app-id"),
                     ("ANNOTATION", "kubequota.io/user-info"), ("ANNOTATION", "yunikorn.apache.org/user.info")]:
            self.assertIn(want, keys)


class PodKeysChecks:
    set_name = None

    @classmethod
    def setUpClass(cls):
        cls.r = cl.render(cls.set_name)
        cls.full = values_of(cls.r)["full"]
        cls.d = Dispatch(cls.r)

    def test_every_pod_key_change_reaches_the_webhook(self):
        wh = self.full["webhooks"]
        if not (wh["enabled"] and wh["identity"]["enabled"]):
            self.skipTest("identity webhook off")
        sched = self.full["schedulerName"]
        cases, what = [], []
        for m, role, key in pod_keys():
            field = "annotations" if m == "ANNOTATION" else "labels"
            base = pod(sched, annotations={"kubequota.io/user-info": '{"user":"alice"}'})
            base["metadata"].setdefault(field, {})
            with_a = copy.deepcopy(base)
            with_a["metadata"][field][key] = "a"
            with_b = copy.deepcopy(base)
            with_b["metadata"][field][key] = "b"
            for new, old, how in ((with_a, base, "added"), (with_b, with_a, "changed"), (base, with_a, "removed")):
                # the pod, and its status subresource, which writes metadata too (issue 37)
                for sub in ("", "status"):
                    cases.append(request("UPDATE", TEAM, new, old, sub=sub))
                    what.append("%s %s %s%s" % (m.lower(), key, how, " via /status" if sub else ""))
        hits = self.d.called(cases)
        missed = []
        for w, hit in zip(what, hits):
            paths = {self.path(n) for n, v in hit.items() if v is True}
            if "/admission/mutate" not in paths:
                missed.append("%s -> %s" % (w, hit))
        self.assertEqual(missed, [], "%s: pod key changes the identity webhook never sees (the chart's "
                         "matchConditions miss keys of include/kubequota/kube/podkeys.h)" % self.set_name)

    def path(self, name):
        return [w for w in self.d.hooks if w["name"] == name][0]["clientConfig"]["service"]["path"]


for _name in cl.VALUE_SETS:
    _cls = type("PodKeys" + "".join(p.capitalize() for p in _name.split("-")), (PodKeysChecks, unittest.TestCase),
                {"set_name": _name})
    globals()[_cls.__name__] = _cls
del _name, _cls
