"""adjuster/preflight.py: what `adjuster run` says, warns of or refuses before it acts."""

from __future__ import annotations

import pytest

from raybridge.adjuster.preflight import priority_verdict

# (case, PriorityClass value (None: missing), readable, cutoff, refused, said)
PRIORITY_ROWS = [
    ("the shipped -1 over the default cutoff: said once", -1, True, -10, None, "assuming the cluster autoscaler's --expendable-pods-priority-cutoff is -10"),
    ("exactly the cutoff: not expendable (priority < cutoff is)", -10, True, -10, None, "priority -10"),
    ("the old -1000: expendable, the autoscaler never scales up for it", -1000, True, -10, "below the cluster autoscaler's --expendable-pods-priority-cutoff (-10)", None),
    ("a cutoff the admin passes", -1000, True, -2000, None, "is -2000"),
    ("missing", None, True, -10, "does not exist", None),
    ("forbidden: a warning, not a refusal", None, False, -10, None, None),
]


@pytest.mark.parametrize("case,value,readable,cutoff,refused,said", PRIORITY_ROWS, ids=[r[0] for r in PRIORITY_ROWS])
def test_the_placeholders_priority_against_the_autoscaler_s_cutoff(case, value, readable, cutoff, refused, said):
    findings = priority_verdict("raybridge-placeholder", value, cutoff, readable=readable)
    assert bool(findings.problems) == bool(refused)
    if refused:
        assert refused in findings.problems[0]
    if said:
        assert len(findings.notes) == 1 and said in findings.notes[0]
    if not readable:
        assert "forbidden" in findings.warnings[0]


def test_the_shipped_priority_class_is_not_expendable():
    from pathlib import Path

    import yaml

    from raybridge.adjuster.decision import consts

    doc = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs/adjuster/10-priorityclass.yaml").read_text())
    assert consts.DEFAULT_EXPENDABLE_CUTOFF <= doc["value"] < 0 and doc["preemptionPolicy"] == "Never"


def _pod(name, namespace, labels, **meta):
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels, **meta}, "status": {"phase": "Running"}}


# (case, pods, found)
KAI_ROWS = [
    ("KAI's node-scale-adjuster pod (the operator's Deployment node-scale-adjuster)",
     [_pod("node-scale-adjuster-5d9c", "kai-scheduler", {"app": "node-scale-adjuster"})], ["kai-scheduler/node-scale-adjuster-5d9c"]),
    ("one of its scaling pods", [_pod("team-p0", "kai-scale-adjust", {"app": "scaling-pod", "shared-gpu-pod-name": "p0",
                                                                     "shared-gpu-pod-namespace": "team"})], ["kai-scale-adjust/team-p0"]),
    ("one being deleted does not count", [_pod("x", "kai-scheduler", {"app": "node-scale-adjuster"}, deletionTimestamp="2025-06-01T00:00:00Z")], []),
    ("other pods", [_pod("binder", "kai-scheduler", {"app": "binder"}), _pod("gpu-reservation-n1-ab", "kai-resource-reservation",
                                                                            {"app": "kai-resource-reservation"})], []),
]


@pytest.mark.parametrize("case,pods,found", KAI_ROWS, ids=[r[0] for r in KAI_ROWS])
def test_kai_s_own_node_scale_adjuster_is_recognised(case, pods, found):
    from raybridge.adjuster.preflight import kai_adjuster_pods, kai_adjuster_verdict

    assert kai_adjuster_pods(pods) == found
    verdict = kai_adjuster_verdict(found)
    assert bool(verdict.problems) == bool(found)
    if found:
        assert "global.clusterAutoscaling=false" in verdict.problems[0] and found[0] in verdict.problems[0]


@pytest.mark.parametrize("served,refused,warned", [(True, False, False), (False, True, False), (None, False, True)])
def test_provisioning_request_mode_needs_the_v1_api(served, refused, warned):
    from raybridge.adjuster.preflight import provisioning_verdict

    findings = provisioning_verdict(served)
    assert bool(findings.problems) == refused and bool(findings.warnings) == warned
    if refused:
        assert "autoscaling.x-k8s.io/v1" in findings.problems[0] and "1.31" in findings.problems[0]
    else:
        assert "--enable-provisioning-requests" in findings.notes[0]


# (gpu memory label, the autoscaler reads DRA, fragments said)
DEVICE_CHOICE_ROWS = [
    ("nvidia.com/gpu.memory", False, ("require the node label nvidia.com/gpu.memory", "asked for as the device plugin's resource")),
    ("karpenter.k8s.aws/instance-gpu-memory", True, ("require the node label karpenter.k8s.aws/instance-gpu-memory", "left to the autoscaler")),
    ("", False, ("placeholders require no GPU memory", "--autoscaler-reads-dra true")),
]


@pytest.mark.parametrize("label,reads_dra,said", DEVICE_CHOICE_ROWS, ids=[f"{r[0] or 'none'}-{r[1]}" for r in DEVICE_CHOICE_ROWS])
def test_how_placeholders_ask_for_devices_is_said_at_start(label, reads_dra, said):
    from raybridge.adjuster.preflight import device_choices

    memory, claims = device_choices(label, reads_dra)
    assert said[0] in memory and said[1] in claims
