"""What raybridge must do differently on the KubeRay releases the Go module proxy does not serve.

Why this module exists: the served releases (v1.3.2, v1.5.0, v1.6.1) run for real in test_release_matrix.py;
v1.5.2 (a patch beside v1.5.0) and the newest, v1.7.0, are read from their sources only. Two of raybridge's rules
answer differently there than on any served release, so each is held here to what those sources say:
- the orphan bound after an eviction: kuberay@v1.5.2 ray-operator/controllers/ray/rayjob_controller.go has no
  checkPreRunningDeadlineAndUpdateStatusIfNeeded (it comes with v1.6.0 and stays in v1.7.0), so on v1.5.2 the
  submit must say so as on v1.5.0, and on v1.7.0 rely on it as on v1.6.1;
- `authSecret`: kuberay@v1.5.1 adds AuthOptions (ray-operator/apis/ray/v1/raycluster_types.go), v1.6.0 adds its
  SecretName, so v1.5.1-v1.5.x are the only releases that know authOptions but refuse authOptions.secretName; v1.5.2's
  CRD (../shared/crds/versions/kuberay-v1.5.2, from its source) says so, and raybridge must name authSecret, not
  token auth, when the API server's strict field validation refuses the field.

What it deliberately does not do: run any operator (the served releases run for real), or test the renewal
itself (test_orphan_guard_decision.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from raybridge.errors import BadInput
from raybridge.jobs.decision.manifests import render_manifests
from raybridge.jobs.decision.orphan_guard import eviction_bound_note
from raybridge.jobs.decision.sizing import SizingRequest, size_workload
from raybridge.jobs.decision.spec import build_spec
from raybridge.jobs.creation import create_protected
from raybridge.kube import operators
from raybridge.kuberay.releases import pre_running_supported
from testcluster.crd_schemas import KUBERAY_NEWEST, schema_errors
from tests.unit.test_manifests import NV_4x2, PY

WHERE = "(Deployment kuberay-system/kuberay-operator)"


# (the release its Helm chart labels the Deployment with, read from its sources (1) or run for real here (0),
#  whether it honours preRunningDeadlineSeconds)
RELEASES = [("v1.3.2", 0, False), ("v1.5.0", 0, False), ("v1.5.2", 1, False), ("v1.6.1", 0, True), ("v1.7.0", 1, True)]


@pytest.mark.parametrize("version, read_only, pre_running", RELEASES, ids=[r[0] for r in RELEASES])
def test_the_eviction_bound_said_follows_the_operator_release_read_from_its_deployment(
    monkeypatch: pytest.MonkeyPatch, version: str, read_only: int, pre_running: bool
) -> None:
    """The release as Helm labels the operator's Deployment (helm-chart/kuberay-operator/templates/_helpers.tpl), then
    what submit says of an eviction after raybridge has exited: what test_release_matrix.py checks end to end on the
    served releases."""
    helm = {"metadata": {"name": "kuberay-operator", "namespace": "kuberay-system",
                         "labels": {"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/version": version}}}  # fmt: skip
    monkeypatch.setattr(operators, "_deployments", lambda kube, what, path: [helm] if "kuberay-operator" in path else [])
    found = operators.kuberay_operator_release(object())  # type: ignore[arg-type]
    assert found.version == version
    assert pre_running_supported(found.version) is pre_running
    note = eviction_bound_note(f"{found.version} {WHERE}", True, pre_running_supported(found.version), 60)
    if pre_running:
        assert note.startswith(f"orphan protection after an eviction: KubeRay operator {version} {WHERE} honours preRunningDeadlineSeconds")
        assert "fails within 1m of its new start" in note
    else:
        assert note.startswith(f"note: KubeRay operator {version} {WHERE} predates v1.6, so no preRunningDeadlineSeconds")
        assert "the job's age then plus 1m" in note


def _token_rayjob(**fields: str) -> dict[str, Any]:
    spec = build_spec({"ray": True, "kind": "RayJob", "gpus": 2, **fields})
    (obj,) = render_manifests(spec, size_workload(SizingRequest.from_spec(spec), NV_4x2), name="locked", namespace="ml",
                              ray_version="2.60.0", python=PY)  # fmt: skip
    return obj


class _StrictServer:
    """A RayObjects whose create answers as kube-apiserver's strict field validation does for the fields a release's
    CRD lacks (the message of staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go's strict decoding)."""

    def __init__(self, release: str) -> None:
        self.release = release

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        fields = unknown_from_schema(obj, self.release)
        if fields:
            raise BadInput('creating RayJob ml/locked: RayJob in version "v1" cannot be handled as a RayJob: strict decoding error: '
                           + ", ".join(f'unknown field "{f}"' for f in fields))  # fmt: skip
        return obj


def unknown_from_schema(obj: dict[str, Any], release: str) -> list[str]:
    """The field paths a release's CRD does not know, as the API server names them (`spec.a.b`)."""
    found = []
    for error in schema_errors(obj, kuberay=release):
        path, _, rest = error.partition(": Additional properties are not allowed (")
        if rest:
            names = rest.rsplit(" w", 1)[0]  # "'a', 'b' were unexpected)" / "'a' was unexpected)"
            found += [f"{path}.{name.strip(chr(39))}" for name in names.split(", ")]
    return found


def test_the_v1_5_2_crd_knows_auth_options_but_not_their_secret_name() -> None:
    """What the v1.5.2 CRD (from its source) refuses of a job with authSecret: secretName alone; the newest takes it."""
    obj = _token_rayjob(authSecret="ray-auth-token")
    assert unknown_from_schema(obj, "kuberay-v1.5.2") == ["spec.rayClusterSpec.authOptions.secretName"]
    assert unknown_from_schema(_token_rayjob(authMode="token"), "kuberay-v1.5.2") == []
    assert schema_errors(obj, kuberay=KUBERAY_NEWEST) == []


# (the release's CRD, the spec's fields, what submit says (None: created))
AUTH_ROWS = [
    ("kuberay-v1.5.2", {"authSecret": "ray-auth-token"}, "authSecret: naming the token's Secret needs KubeRay v1.6.0 or later"),
    ("kuberay-v1.5.2", {"authMode": "token"}, None),
    ("kuberay-v1.3.2", {"authMode": "token"}, "authMode: token authentication needs KubeRay v1.5.1 or later"),
    (KUBERAY_NEWEST, {"authSecret": "ray-auth-token"}, None),
]


@pytest.mark.parametrize("release, fields, said", AUTH_ROWS, ids=[f"{r[0]}-{'-'.join(r[1])}" for r in AUTH_ROWS])
def test_a_refused_auth_field_names_what_the_release_lacks(release: str, fields: dict[str, str], said: str | None) -> None:
    obj = _token_rayjob(**fields)
    if said is None:
        assert create_protected(_StrictServer(release), obj) is obj  # type: ignore[arg-type]
        return
    with pytest.raises(BadInput) as refused:
        create_protected(_StrictServer(release), obj)  # type: ignore[arg-type]
    assert str(refused.value).startswith(said), str(refused.value)
