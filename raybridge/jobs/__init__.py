"""Launching: `submit(spec) -> JobHandle`, on a local Ray or on Kubernetes; and the lifecycle commands.

The service the CLI and the Python API share. This `__init__` only
re-exports, lazily: the options and backend choice are in `options.py`, the
handle in `handle.py`, `submit` in `service.py`, `dry_run` (what a submit would create) in `preview.py`, the backends in `local.py`
and `kubernetes.py`, the after-the-fact commands in `lifecycle.py`. Lazy, so
that a lifecycle command (`list`, `status`, `logs`) does not import the job
spec's models and the submit path it never uses.
"""

from raybridge.core.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "DEFAULT_TIMEOUT": ".options",
    "JobHandle": ".handle",
    "SubmitOptions": ".options",
    "choose_backend": ".options",
    "new_submission_id": ".options",
    "submit": ".service",
    "prepare_submit": ".service",
    "launch": ".service",
    "queue_job": ".service",
    "SubmitRequest": ".service",
    "dry_run": ".preview",
    "preview_submit": ".preview",
    "SubmitPreview": ".preview",
})
