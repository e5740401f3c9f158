"""What a Ray job's runtime env holds, and the allocation env vars raybridge sets.

Two readers need a runtime env from one spec: the RayJob manifest
(`runtimeEnvYAML`, which the cluster must be able to use by itself, so local
paths are left out) and the Ray Job API submission (which uploads a local
`working_dir`). Both, and every container's env, carry the allocation
variables (`NUM_GPUS`, `NUM_REPLICAS`, `NUM_GPUS_PER_REPLICA`) with what was
actually allocated. Those rules live here once.

Pure: it neither checks that a local directory exists nor reads it; the
launcher does that before anything is created.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Optional

from raybridge.core.consts import ALLOCATION_ENV, ENV_NUM_GPUS, ENV_NUM_GPUS_PER_REPLICA, ENV_NUM_REPLICAS

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(value: Any) -> bool:
    """True for `s3://...`, `gs://...`, `https://...`: something the cluster fetches itself."""
    return isinstance(value, str) and bool(_URI.match(value))


def format_number(value: int | float) -> str:
    """2.0 -> "2", 0.5 -> "0.5": how GPU counts appear in env values and annotations."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return format(Decimal(repr(round(value, 6))).normalize(), "f")
    return str(value)


def allocation_env(total_gpus: int | float, replicas: int, gpus_per_replica: int | float) -> dict[str, str]:
    """The allocation variables, from what was allocated (not what was asked for)."""
    return {
        ENV_NUM_GPUS: format_number(total_gpus),
        ENV_NUM_REPLICAS: str(replicas),
        ENV_NUM_GPUS_PER_REPLICA: format_number(gpus_per_replica),
    }


def reserved_env_clash(env: dict[str, str]) -> list[str]:
    """The allocation variable names a user's `env` tries to set."""
    return sorted(set(env) & set(ALLOCATION_ENV))


def cluster_runtime_env(runtime_env: Optional[dict[str, Any]], working_dir: Optional[str]) -> Optional[dict[str, Any]]:
    """The runtime env the cluster can use by itself: local paths are left for the Job API to upload.

    `working_dir` overrides `runtime_env.working_dir`. A `working_dir` or
    `py_modules` entry that is a local path is dropped; URIs are kept. None
    when nothing is left.
    """
    env = dict(runtime_env or {})
    if working_dir:
        env["working_dir"] = working_dir
    if "working_dir" in env and not is_uri(env["working_dir"]):
        del env["working_dir"]
    if isinstance(env.get("py_modules"), list):
        remote = [m for m in env["py_modules"] if is_uri(m)]
        if remote:
            env["py_modules"] = remote
        else:
            del env["py_modules"]
    return env or None


def local_working_dir(runtime_env: Optional[dict[str, Any]], working_dir: Optional[str]) -> Optional[str]:
    """The local directory a submission would upload, or None (none given, or a URI)."""
    chosen = working_dir or (runtime_env or {}).get("working_dir")
    if chosen and not is_uri(chosen):
        return str(chosen)
    return None


def submission_runtime_env(
    runtime_env: Optional[dict[str, Any]],
    working_dir: Optional[str],
    allocation: dict[str, str],
    env: dict[str, str],
) -> dict[str, Any]:
    """The runtime env for `JobSubmissionClient.submit_job`: the spec's, its working dir, the allocation vars, then `env`.

    `working_dir` must already be resolved (an absolute local path or a URI).
    """
    result: dict[str, Any] = dict(runtime_env or {})
    if working_dir:
        result["working_dir"] = working_dir
    env_vars = dict(result.get("env_vars") or {})
    env_vars.update(allocation)
    env_vars.update(env)
    result["env_vars"] = env_vars
    return result
