"""`dry_run(spec)`: what `submit` would create, decided by the same steps, with nothing created.

Why it exists: `submit --dry-run` and the Python API must preview the same job the submit then runs. Both
take a `SubmitRequest` from `service.prepare_submit` (so a dry run refuses what the submit refuses), read
the inventory the chosen backend would read (`discovery.submission_inventory`), size the job with
`planning.plan_job` and, for Kubernetes, render the objects with `planning.render_job`. The CLI only prints
the result.

What it deliberately does not do: print (the caller says `progress_lines` and `warnings` where it says
things, and renders `document`), create or contact anything beyond what discovery reads, or choose a
backend of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from raybridge.core.inventory import Inventory
from raybridge.jobs.decision.sizing import SizingDecision
from raybridge.jobs.decision.spec import JobSpec
from raybridge.jobs.options import SubmitOptions, upload_lines
from raybridge.jobs.service import SubmitRequest, prepare_submit
from raybridge.jobs.spec_file import SpecLike


@dataclass(frozen=True)
class SubmitPreview:
    """What a submit would do: the document `submit --dry-run` prints, the warnings it says, the upload lines."""

    #: backend, backendReason, plan (the sizing decision), entrypoint and, on Kubernetes, objects (the manifests).
    document: dict[str, Any]
    #: Said as warnings before the document (an unpinned default image); also in document["plan"]["warnings"].
    warnings: tuple[str, ...]
    #: What of this machine would be uploaded, one line each.
    upload_lines: tuple[str, ...]


def preview_submit(request: SubmitRequest, reason: Optional[str] = None) -> SubmitPreview:
    """The preview of a prepared submission; `reason` replaces the backend's why (the CLI's `--nodes` case)."""
    from raybridge.jobapi.ray_import import installed_ray_version, local_python
    from raybridge.jobs.decision.planning import DEFAULT_RENDER_NAME, plan_job, render_job
    from raybridge.jobs.decision.sizing import SizingRequest, unsized_decision
    from raybridge.jobs.discovery import submission_inventory

    spec, options, backend = request.spec, request.options, request.backend
    inventory = without_library_notes(submission_inventory(backend, options, spec.tolerations))
    decision = unsized_decision(SizingRequest.from_spec(spec)) if inventory is None else plan_job(spec, inventory)
    document: dict[str, Any] = {"backend": backend, "backendReason": reason or request.why, "plan": decision.to_dict(),
                                "entrypoint": spec.entrypoint}  # fmt: skip
    warnings: tuple[str, ...] = ()
    if backend == "kubernetes":
        ray_version, python = installed_ray_version(), local_python()
        warnings = unpinned_image_warnings(spec, decision)
        document["plan"]["warnings"] = [*decision.warnings, *warnings]
        namespace = replace(options.cluster, namespace=spec.namespace or options.namespace).resolved_namespace()
        document["objects"] = render_job(spec, decision, name=spec.name or DEFAULT_RENDER_NAME, namespace=namespace,
                                         ray_version=ray_version, python=python)  # fmt: skip
    return SubmitPreview(document, warnings, tuple(upload_lines(list(request.uploads), dry_run=True)))


def dry_run(spec: SpecLike, options: Optional[SubmitOptions] = None, **kwargs: Any) -> SubmitPreview:
    """What `submit(spec, ...)` would create, with nothing created (`submit --dry-run` from Python)."""
    return preview_submit(prepare_submit(spec, options, **kwargs))


def unpinned_image_warnings(spec: JobSpec, decision: SizingDecision) -> tuple[str, ...]:
    """The AMD default image is a moving tag from ROCm, not a Ray release (docs/spec.md: pin one): the warning, if any."""
    from raybridge.jobapi.ray_import import installed_ray_version, local_python
    from raybridge.jobs.decision.images import unpinned_image_warning
    from raybridge.jobs.decision.manifests import image_for

    ray_version = installed_ray_version()
    warning = unpinned_image_warning(spec.image, image_for(spec, decision, ray_version, local_python()), ray_version)
    return (warning,) if warning else ()


def without_library_notes(inventory: Optional[Inventory]) -> Optional[Inventory]:
    """This machine's inventory without its GPU-library notes when it has no GPUs (`noise.py` says when they show)."""
    from raybridge.core.consts import VENDORS
    from raybridge.noise import without_probe_library_notes

    if inventory is None or inventory.source != "local" or any(node.vendor for node in inventory.nodes):
        return inventory
    return replace(inventory, notes=without_probe_library_notes(tuple(inventory.notes), tuple(VENDORS)))
