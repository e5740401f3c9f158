"""How raybridge reads two refusals of the real servers, as tables: the Kubernetes API server's admission
denials and the Ray Job API's answer to a submission id it already knows.

Why: both were misread on the real cluster. A ValidatingAdmissionPolicy's denial (403 by default) was
reported as a missing permission, and a Ray head that already ran a job under the id raybridge submits
(a reused --submission-id) answered 500 "already exists", which raybridge retried and then took for its
own job, following someone else's run. The end-to-end tests show both through the CLI
(tests/e2e/test_kube_preflight.py, tests/e2e/test_kube_eviction.py); here each rule gets a row. What this
does not do: talk to a server.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from raybridge.errors import BadInput
from raybridge.jobapi.client import RayJobs
from raybridge.kube.calls import PermissionDenied, translate_api_exception


def api_error(status: int, message: str) -> Any:
    return SimpleNamespace(status=status, reason="", body=json.dumps({"kind": "Status", "message": message, "code": status}))


WEBHOOK = 'admission webhook "policy.example.com" denied the request: RayJobs are frozen'
POLICY = "rayjobs.ray.io \"frozen\" is forbidden: ValidatingAdmissionPolicy 'frozen' with binding 'frozen-ml' denied request: RayJobs are frozen"
UNBOUND_POLICY = "rayjobs.ray.io \"frozen\" is forbidden: ValidatingAdmissionPolicy 'frozen' denied request: RayJobs are frozen"
RBAC = 'rayjobs.ray.io is forbidden: User "alice" cannot create resource "rayjobs" in API group "ray.io" in the namespace "ml"'

REFUSALS = [
    # (case, HTTP status, the Status message, the error raybridge raises)
    ("a webhook's denial, 403", 403, WEBHOOK, BadInput),
    ("a webhook's denial, 422", 422, WEBHOOK, BadInput),
    ("a ValidatingAdmissionPolicy's denial, 403 (reason Forbidden)", 403, POLICY, BadInput),
    ("a ValidatingAdmissionPolicy's denial, 422 (its default reason, Invalid)", 422, POLICY, BadInput),
    ("a policy's denial without a binding's name", 403, UNBOUND_POLICY, BadInput),
    ("RBAC: a permission is missing", 403, RBAC, PermissionDenied),
]


@pytest.mark.parametrize("case,status,message,error", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_an_admission_denial_is_bad_input_and_only_rbac_is_a_missing_permission(case: str, status: int, message: str, error: type) -> None:
    translated = translate_api_exception("creating RayJob ml/frozen", api_error(status, message))
    assert type(translated) is error
    assert message in str(translated)


class JobApi:
    """Ray's Job API client as far as `submit` uses it: answers each call with the next of `answers`."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls = 0

    def submit_job(self, **_: Any) -> str:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


KNOWN = RuntimeError("Request failed with status code 500: Traceback ... ValueError: Job with submission_id run-1 already exists.")
AGENT_NOT_READY = RuntimeError("Request failed with status code 500: No available agent to submit job, please try again later.")

SUBMISSIONS = [
    # (case, the Job API's answers in turn, what submit returns (or raises), calls made)
    ("accepted at once", ["run-1"], "run-1", 1),
    ("a 500, then the id is known: the first attempt got through", [AGENT_NOT_READY, KNOWN], "run-1", 2),
    ("the id known to the first attempt: another job's, refused", [KNOWN], BadInput, 1),
]


@pytest.mark.parametrize("case,answers,expected,calls", SUBMISSIONS, ids=[r[0] for r in SUBMISSIONS])
def test_a_submission_id_the_head_knows_is_ours_only_after_a_failed_attempt(case: str, answers: list, expected: Any, calls: int) -> None:
    jobs = RayJobs.__new__(RayJobs)  # the adapter without a dashboard to connect to
    jobs.address, jobs.client = "http://127.0.0.1:8265", JobApi(*answers)
    if isinstance(expected, type):
        with pytest.raises(expected, match="already has a job with submission id run-1"):
            jobs.submit("python -c 1", "run-1", None, retry_for=5.0)
    else:
        assert jobs.submit("python -c 1", "run-1", None, retry_for=5.0) == expected
    assert jobs.client.calls == calls


def _strict_patch_refusal(field: str, object_size: int) -> str:
    """kube-apiserver's 422 message for a JSON merge patch of a custom resource with `fieldValidation=Strict` and a
    field the CRD lacks: the whole patched object quoted as the invalid value of `patch`, then the reason (as the
    real v1.34 server answers it)."""
    patched = json.dumps({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "long", "annotations": {"a": "x" * object_size}}})
    return f' "" is invalid: patch: Invalid value: {json.dumps(patched)}: strict decoding error: unknown field "{field}"'


@pytest.mark.parametrize("size", [10, 300, 20_000], ids=["a small object", "a 300-character object", "a 20,000-character object"])
def test_a_strict_patch_refusal_keeps_the_unknown_field_whatever_the_object_s_size(size: int) -> None:
    """`submit --no-wait` on KubeRay before v1.6 learns that spec.preRunningDeadlineSeconds is unknown from this
    refusal: with the object quoted whole, the message was cut before the field and every --no-wait ended in exit 2."""
    from raybridge.jobs.decision.orphan_guard import unknown_fields

    translated = translate_api_exception("updating RayJob ml/long", api_error(422, _strict_patch_refusal("spec.preRunningDeadlineSeconds", size)))
    assert type(translated) is BadInput
    assert unknown_fields(str(translated)) == ["spec.preRunningDeadlineSeconds"]
    assert len(str(translated)) < 400
