#!/usr/bin/python3
"""Shows that the real-cluster tier can fail: runs it (fail-fast) against broken variants and
reports which test caught each. Not part of `make test` (each variant is a tier run); its
results are quoted in the closing notes of issue 25.

  python3 tests/cluster/mutants.py [allow-all] [widen-conditions] [rbac] [drop-rule:KIND/NAME/I ...]

  allow-all         kubequota swapped for tests/cluster/allow_all.py (every pod fits, every
                    admission request allowed unchanged)
  widen-conditions  the chart's webhooks without their matchConditions (they see every pod)
  rbac              every rule of the chart's rendered (Cluster)Roles removed, one at a time
  preemption-on     gate-only's profile keeps DefaultPreemption (caught by
                    test_kube_gate_only GateOnlyPlacement.test_no_preemption_across_groups)
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster as clus  # noqa: E402


def rendered_rules():
    c = clus.Cluster.__new__(clus.Cluster)
    c.work = clus.tempfile.mkdtemp(prefix="kq-mutants-")
    c.chart_values = {}
    c._certs()
    rules = clus.rbac_rules(c.render_chart())
    clus.shutil.rmtree(c.work, ignore_errors=True)
    return ["drop-rule:%s/%d" % (kn, i) for kn, i, _ in rules]


def run(name, env):
    e = dict(os.environ, **env)
    r = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--failfast"], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    caught = [l.split()[1] for l in r.stdout.splitlines() if l.startswith(("FAIL ", "ERROR "))]
    verdict = "caught by %s" % caught[0] if caught else "SURVIVED"
    print("%-60s %s" % (name, verdict), flush=True)
    return bool(caught)


def main(args):
    args = args or ["allow-all", "widen-conditions", "rbac"]
    todo = []
    for a in args:
        if a == "allow-all":
            todo.append((a, {"KQ_BINARY": os.path.join(HERE, "allow_all.py")}))
        elif a == "rbac":
            todo += [(m, {"KQ_CLUSTER_MUTATE": m}) for m in rendered_rules()]
        else:
            todo.append((a, {"KQ_CLUSTER_MUTATE": a}))
    survived = [n for n, env in todo if not run(n, env)]
    print("mutants: %d caught, %d survived%s" % (len(todo) - len(survived), len(survived),
                                                  (": " + ", ".join(survived)) if survived else ""))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
