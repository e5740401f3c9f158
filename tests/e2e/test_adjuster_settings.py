"""`adjuster run` as an admin starts it, before it reaches a cluster: a bad setting is exit 2 with one line, and the
shipped configs/adjuster/ objects are complete, valid and agree with what the code spells.

Where the rest went: every scenario against a cluster runs on the real kube-apiserver. With the simulated
cluster-autoscaler and KAI past v0.12 as clients beside the real kube-scheduler and kwok (tests/e2e/ca_on_real_api.py):
test_adjuster_ca_on_real_api.py (bursts, `--mode provisioning-request`, the CLI's metrics, health and leader election),
test_adjuster_guards_on_real_api.py (what it holds back, refuses or says), test_adjuster_races_on_real_api.py (races
that could cost a node), test_adjuster_rbac_real.py (the shipped RBAC, verb by verb). With the real KAI v0.12 and
Karpenter v1.14.1: test_adjuster_real.py (API faults through the fault proxy, a restart mid-reconcile) and
test_adjuster_karpenter_real.py.
What it deliberately does not do: start a cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from raybridge.adjuster.decision import consts
from tests.adjuster_world import SLIM_ADJUSTER

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", SLIM_ADJUSTER, "adjuster", "run", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})


BAD_SETTINGS = [
    (["--grace-period", "-1"], {}, "--grace-period"),
    (["--namespace", "Not_A_Namespace"], {}, "--namespace"),
    ([], {"RAYBRIDGE_ADJUSTER_MAX_GPUS": "many"}, "--max-gpus"),
    ([], {"RAYBRIDGE_ADJUSTER_LOG_FORMAT": "xml"}, "--log-format"),
    (["--lease-duration", "5", "--renew-deadline", "5"], {}, "--lease-duration must be more than --renew-deadline"),
    (["--metrics-port", "70000"], {}, "--metrics-port"),
    (["--kubeconfig", "/does/not/exist"], {}, "--kubeconfig"),
]


@pytest.mark.parametrize("args,env,expected", BAD_SETTINGS)
def test_a_bad_setting_is_exit_2_with_one_line(args: list[str], env: dict[str, str], expected: str) -> None:
    proc = _cli(*args, env=env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert expected in err
    assert "Traceback" not in err




# --- configs/adjuster: the shipped objects ------------------------------------------------------------

CONFIG_DIR = REPO / "configs" / "adjuster"


def _config_docs(*opt_in: str) -> list[dict[str, Any]]:
    """The shipped configs/adjuster/*.yaml, and the opt-in files of configs/adjuster/optional/ named (stems)."""
    import yaml

    paths = [*sorted(CONFIG_DIR.glob("*.yaml")), *(CONFIG_DIR / "optional" / f"{name}.yaml" for name in opt_in)]
    return [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]



def test_the_configs_are_complete_and_validate() -> None:
    from tests.unit.k8s_schemas import k8s_schema_errors, versions_for

    docs = _config_docs()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                            "PriorityClass", "Deployment", "Service", "NetworkPolicy",
                            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"])
    for doc in [*docs, *_config_docs("karpenter-hold")[len(docs):]]:
        for version in versions_for(doc):
            assert k8s_schema_errors(doc, version) == [], (doc["kind"], version)
    # The policies name the adjuster's ServiceAccount and the hold's label and annotation as the code spells them
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]
    username = f"system:serviceaccount:{account['namespace']}:{account['name']}"
    for policy in [d for d in _config_docs("karpenter-hold") if d["kind"] == "ValidatingAdmissionPolicy"]:
        assert [c["expression"] for c in policy["spec"]["matchConditions"]] == [f"request.userInfo.username == '{username}'"]
    hold_policy = json.dumps(next(d for d in _config_docs("karpenter-hold")[len(docs):] if d["kind"] == "ValidatingAdmissionPolicy"))
    assert all(f"'{key}'" in hold_policy for key in (consts.HOLD_LABEL, *consts.HOLD_ANNOTATIONS, *consts.HOLD_VALUES))
    assert (CONFIG_DIR.parent.parent / consts.HOLD_GRANT_FILE).is_file()
    # Patching nodes is granted only by the opt-in file
    assert not [r for d in docs if d["kind"] == "ClusterRole" for r in d["rules"] if "nodes" in r["resources"] and "patch" in r["verbs"]]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    container = pod["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz" and container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # The probes go to a port of their own, the one --health-probe-bind-address names; Prometheus to the metrics one
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"]["port"] == container["readinessProbe"]["httpGet"]["port"] == "health"
    assert f"--health-probe-bind-address=:{ports['health']}" in container["args"]
    assert f"--metrics-bind-address=:{ports['metrics']}" in container["args"] and ports["health"] != ports["metrics"]
    service = next(d for d in docs if d["kind"] == "Service")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["metrics"]
    assert pod["securityContext"]["runAsNonRoot"] is True and container["securityContext"]["readOnlyRootFilesystem"] is True
    priority = next(d for d in docs if d["kind"] == "PriorityClass")
    assert priority["value"] < 0 and priority["metadata"]["name"] == consts.DEFAULT_PRIORITY_CLASS
    # The NetworkPolicy admits the metrics port of the adjuster's own pods, by the port's name, and not the probe port
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels(deployment).items()
    assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == ["metrics"]


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    return deployment["spec"]["template"]["metadata"]["labels"]

