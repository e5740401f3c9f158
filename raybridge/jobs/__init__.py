"""Launching: `submit(spec) -> JobHandle`, on a local Ray or on Kubernetes; and the lifecycle commands.

The service the CLI and the Python API share. This `__init__` only
re-exports: the options and backend choice are in `options.py`, the handle
in `handle.py`, `submit` in `service.py`, the backends in `local.py` and
`kubernetes.py`, the after-the-fact commands in `lifecycle.py`.
"""

from raybridge.jobs.handle import JobHandle
from raybridge.jobs.options import DEFAULT_TIMEOUT, SubmitOptions, choose_backend, new_submission_id
from raybridge.jobs.service import submit

__all__ = ["DEFAULT_TIMEOUT", "JobHandle", "SubmitOptions", "choose_backend", "new_submission_id", "submit"]
