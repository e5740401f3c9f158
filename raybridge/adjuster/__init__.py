"""The in-cluster node-scale-adjuster (`adjuster run`): re-exports only, imported lazily.

consts (labels, defaults), decision/ (the pure decision: settings, demand,
packing, plan, reconcile, scale_adjuster), env (the flags' environment
variables), scaler (the act step's calls, retried at its own level; the calls themselves are kube/'s),
controller (the caches' wiring, the reconcile loop, leader election; the informer and the Lease are kube/'s), metrics
(Prometheus; the /metrics and the /healthz, /readyz servers). The decision itself is `adjuster/decision/reconcile.py`.
Lazy, so that building the CLI's parser (which reads consts and settings)
imports neither kubernetes nor prometheus-client.
"""

from raybridge.core.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "Controller": ".controller",
    "EndpointServer": ".metrics",
    "Metrics": ".metrics",
    "decide": ".decision.scale_adjuster",
    "decide_requests": ".decision.scale_adjuster",
    "placeholder_manifest": ".decision.scale_adjuster",
    "read_placeholder": ".decision.scale_adjuster",
    "read_request": ".decision.scale_adjuster",
    "Outcome": ".scaler",
    "Scaler": ".scaler",
    "RunSettings": ".decision.settings",
    "adjuster_plan": ".offline",
    "adjuster_manifests": ".offline",
    "PlanInputs": ".offline",
})
