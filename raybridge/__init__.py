"""raybridge: run Ray jobs on Kubernetes GPU clusters, AMD and NVIDIA alike.

The public surface, one call away from a notebook or a Ray driver::

    import raybridge
    handle = raybridge.submit("examples/hello.yaml")   # a path, a mapping or a JobSpec; local Ray, or KubeRay + Kueue
    handle.wait(); print(handle.logs())

Names are imported lazily so that `import raybridge` (and `--help`) stays
fast and never pulls in ray or kubernetes.
"""

from raybridge.core.lazy import lazy_exports

__version__ = "0.1.0"

__all__, __getattr__ = lazy_exports(__name__, {
    "JobSpec": "raybridge.jobs.decision.spec",
    "load_spec": "raybridge.jobs.spec_file",
    "build_spec": "raybridge.jobs.decision.spec",
    "SizingDecision": "raybridge.jobs.decision.sizing",
    "Inventory": "raybridge.core.inventory",
    "discover_inventory": "raybridge.jobs.discovery",
    "plan_job": "raybridge.jobs.decision.planning",
    "render_job": "raybridge.jobs.decision.planning",
    "installed_ray_version": "raybridge.jobapi.ray_import",
    "local_python": "raybridge.jobapi.ray_import",
    "submit": "raybridge.jobs",
    "dry_run": "raybridge.jobs",
    "queue_job": "raybridge.jobs",
    "JobHandle": "raybridge.jobs",
    "adjuster_plan": "raybridge.adjuster",
    "adjuster_manifests": "raybridge.adjuster",
    "AdjusterSettings": "raybridge.adjuster.decision.settings",
    "RaybridgeError": "raybridge.errors",
    "BadInput": "raybridge.errors",
    "InfraError": "raybridge.errors",
    "ClusterUnreachable": "raybridge.errors",
})
__all__ = [*__all__, "__version__"]
