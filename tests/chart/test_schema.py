"""charts/kubequota/values.schema.json: every value of values.yaml is described, unknown keys
are refused (`--set replicas=3` must not be ignored silently), and policies are enums, as
Helm enforces the schema on install, upgrade, template and lint."""

import json
import os
import unittest

import yaml

import chartlib as cl

SCHEMA = os.path.join(cl.CHART, "values.schema.json")


def load():
    with open(SCHEMA) as f:
        return json.load(f)


def walk(values, schema, path=""):
    """Yields (path, problem) for values.yaml entries the schema does not describe."""
    if not isinstance(values, dict):
        return
    props = schema.get("properties")
    if props is None:
        return  # a free-form map (annotations, resources, queues, ...): described as a whole
    for k, v in values.items():
        p = path + "." + k if path else k
        if k not in props:
            yield p, "not in values.schema.json"
            continue
        yield from walk(v, props[k], p)


class SchemaTest(unittest.TestCase):

    def test_every_value_is_described(self):
        with open(os.path.join(cl.CHART, "values.yaml")) as f:
            values = yaml.safe_load(f)
        self.assertEqual(list(walk(values, load())), [])

    def test_unknown_keys_refused_everywhere(self):
        def objects(s, path="$"):
            if s.get("type") == "object" and "properties" in s:
                yield path, s
            for k, sub in (s.get("properties") or {}).items():
                yield from objects(sub, path + "." + k)
        for path, s in objects(load()):
            self.assertIs(s.get("additionalProperties"), False, "%s accepts unknown keys" % path)

    def test_defaults_and_value_sets_validate(self):
        for name in cl.VALUE_SETS:
            cl.render(name)  # fails on a schema violation

    def test_refused_values(self):
        cases = [
            (["--set", "replicas=3"], "replicas"),
            (["--set", "replicaCount=0"], "replicaCount"),
            (["--set", "webhooks.identity.failurePolicy=fail"], "failurePolicy"),
            (["--set", "webhooks.failurePolicy=Ignore"], "failurePolicy"),
            (["--set", "webhooks.validate.configFailurePolicy=Never"], "configFailurePolicy"),
            (["--set", "kubequota.logLevel=verbose"], "logLevel"),
            (["--set", "kubequota.restAuth=basic"], "restAuth"),
            (["--set", "kubequota.image.pullPolicy=Sometimes"], "pullPolicy"),
            (["--set", "service.type=Ingress"], "type"),
            (["--set", "metering.persistence.accessMode=ReadOnlyMany"], "accessMode"),
            (["--set", "metering.settings.state-dir=/tmp"], "state-dir"),
            (["--set", "kubequota.stateDir=/var/lib/kubequota"], "stateDir"),
            (["--set", "webhooks.timeoutSeconds=60"], "timeoutSeconds"),
        ]
        for args, word in cases:
            r = cl.render_with(*args)
            self.assertNotEqual(r.returncode, 0, "helm accepted %s" % args)
            self.assertIn("schema", r.stderr, args)
            self.assertIn(word, r.stderr, args)
