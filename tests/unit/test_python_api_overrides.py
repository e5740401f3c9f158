"""The Python API's `overrides`: spec fields that win over a spec file's, a mapping's or a JobSpec's own.

Why this module exists: `raybridge.submit("examples/train-gpu.yaml")` took the file's `queue` and no argument could
change it (issue 40, point 9), where the command line's `--queue` wins over the file. Checked through
`prepare_submit`, which decides everything `submit` launches, without a cluster.
"""

from __future__ import annotations

import pytest

import raybridge
from raybridge.errors import BadInput
from raybridge.jobs.service import prepare_submit
from tests.helpers import EXAMPLES


def test_a_spec_files_queue_and_gpus_give_way_to_the_overrides_camel_or_snake_case():
    request = prepare_submit(str(EXAMPLES / "train-gpu.yaml"), overrides={"queue": "team-b", "gpus": 8, "priorityClass": "build"}, backend="kubernetes")
    assert (request.spec.queue, request.spec.gpus, request.spec.priority_class) == ("team-b", 8, "build")
    unchanged = prepare_submit(str(EXAMPLES / "train-gpu.yaml"), backend="kubernetes")
    assert unchanged.spec.queue == "team-a"


def test_overrides_apply_to_a_mapping_and_a_jobspec_and_none_leaves_a_field_alone():
    from_mapping = prepare_submit({"entrypoint": "python x.py", "queue": "a"}, overrides={"queue": "b", "name": None}, backend="kubernetes")
    assert from_mapping.spec.queue == "b" and from_mapping.spec.entrypoint == "python x.py"
    from_spec = prepare_submit(from_mapping.spec, overrides={"working_dir": str(EXAMPLES / "hello")}, backend="kubernetes")
    assert from_spec.spec.queue == "b" and from_spec.spec.working_dir == str(EXAMPLES / "hello")


def test_a_wrong_override_is_bad_input_naming_it():
    with pytest.raises(BadInput, match="queu"):
        prepare_submit({"entrypoint": "python x.py"}, overrides={"queu": "b"}, backend="kubernetes")
    with pytest.raises(BadInput, match="overrides must be a mapping"):
        prepare_submit({"entrypoint": "python x.py"}, overrides=["queue"], backend="kubernetes")  # type: ignore[arg-type]


def test_the_library_submit_takes_overrides():
    import inspect

    assert "overrides" in inspect.signature(raybridge.submit).parameters
