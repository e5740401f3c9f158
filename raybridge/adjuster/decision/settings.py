"""Every setting of `adjuster run`, validated once at start.

`RunSettings` holds the planner's settings (the same `AdjusterSettings` as
`adjuster plan`) plus what only the in-cluster controller needs. `problems()`
names every bad value in one sentence each; the CLI turns them into exit 2
before anything connects. `AdjusterSettings` is every knob of the planner
(`adjuster plan` and `run` alike). `parse_bind_address` reads
`--metrics-bind-address` (controller-runtime's HOST:PORT); the port's range is
checked in `port_problem` alone; `--health-probe-bind-address` is read the same way.
Nothing here talks to a cluster or binds.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Optional

from raybridge.adjuster.decision import consts
from raybridge.core.consts import ADJUSTER_DEFAULT_GRACE_SECONDS, ADJUSTER_DEFAULT_VENDOR, VENDORS
from raybridge.kai.names import ADJUSTER_DEFAULT_MEMORY_FRACTION, KAI_GPU_MEMORY_LABEL, KAI_SCALE_ADJUST_NAMESPACE, KAI_SCHEDULER_NAME
from raybridge.core.names import label_key_problem, name_problem, namespace_problem

MODES = ("placeholder", "provisioning-request")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LOG_FORMATS = ("text", "json")
#: RFC 1123 host names (what `--metrics-bind-address` accepts besides IP literals).
_HOST_NAME = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*")
_PORT_DIGITS = re.compile(r"[0-9]{1,5}")
MAX_PORT = 65535


def port_problem(port: object) -> Optional[str]:
    """The one range check of the metrics port, whichever flag gave it (0: no server)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
        return f"the port must be 0 (off) or a TCP port up to {MAX_PORT} (got {port!r})"
    return None


def host_problem(host: object) -> Optional[str]:
    """'' (every interface), an IPv4 or IPv6 literal, or an RFC 1123 host name."""
    if not isinstance(host, str):
        return f"the host must be text (got {host!r})"
    if host == "":
        return None
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if _HOST_NAME.fullmatch(host):
        return None
    return f"the host must be an IP address or a host name (got {host!r})"


def parse_bind_address(text: str) -> tuple[str, int]:
    """`--metrics-bind-address`, as controller-runtime reads it: `HOST:PORT`, `:PORT` for every
    interface, `[::1]:PORT` for an IPv6 address, `0` for no server. Returns (host, port); port 0 is off.
    Raises ValueError with the reason."""
    if text == "0":
        return "", 0
    host, colon, port_text = text.rpartition(":")
    if not colon:
        raise ValueError(f"must be HOST:PORT, :PORT (every interface) or 0 (off) (got {text!r})")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if ":" not in host:
            raise ValueError(f"only an IPv6 address goes in brackets (got {text!r})")
    elif ":" in host:
        raise ValueError(f"an IPv6 address goes in brackets, e.g. [::1]:8080 (got {text!r})")
    port = parse_port(port_text)
    problem = host_problem(host)
    if problem:
        raise ValueError(problem)
    return host, port


def parse_port(text: str) -> int:
    """A port as typed: ASCII digits only (no sign, space, '_' or other scripts' digits), then `port_problem`."""
    if not _PORT_DIGITS.fullmatch(text):
        raise ValueError(f"the port must be digits 0-9 (got {text!r})")
    port = int(text)
    problem = port_problem(port)
    if problem:
        raise ValueError(problem)
    return port


def bind_address_text(host: str, port: int) -> str:
    """(host, port) written back as `--metrics-bind-address` takes it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


POLICIES = ("exact", "kai")


@dataclass(frozen=True)
class AdjusterSettings:
    """Every knob of the planner; `problems()` says what is wrong with a value."""

    scheduler_name: str = KAI_SCHEDULER_NAME
    grace_period_seconds: float = ADJUSTER_DEFAULT_GRACE_SECONDS
    #: A gpu-memory pod's fraction where the GPU memory of its nodes is unknown (KAI: 0.1 always).
    memory_fallback_fraction: Fraction = Fraction(ADJUSTER_DEFAULT_MEMORY_FRACTION)
    #: At most this many placeholder GPUs in all (None: no cap).
    max_total_gpus: Optional[int] = None
    #: The vendor of pods whose annotation and nodes do not say.
    default_vendor: str = ADJUSTER_DEFAULT_VENDOR
    policy: str = "exact"
    #: GPUs per node where the nodes of a group are unknown (None: placeholders no larger than the largest pod).
    node_gpus: Optional[int] = None
    #: Exact search for groups of at most this many GPU slices; larger groups get first-fit-decreasing.
    exact_max_slices: int = 400
    #: Search steps per group (bin completion; a tenth of it for the branch and bound after it) before settling for
    #: the best packing found: about a second of CPU at most.
    search_budget: int = 200_000
    #: KAI policy: where KAI's scaling pods live.
    kai_namespace: str = KAI_SCALE_ADJUST_NAMESPACE
    #: The node label (MiB per GPU) a placeholder for gpu-memory pods requires at least their memory by, so that the
    #: autoscaler brings a node type whose GPUs hold them ("": it requires none). KAI's own label by default.
    gpu_memory_label: str = KAI_GPU_MEMORY_LABEL
    #: The autoscaler reads pods' ResourceClaims itself (Karpenter --ignore-dra-requests=false, cluster-autoscaler
    #: --enable-dynamic-resource-allocation): pods whose GPUs come through claims are then its, as whole-GPU pods are.
    autoscaler_reads_dra: bool = False

    def __post_init__(self) -> None:
        ratio = self.memory_fallback_fraction
        if not isinstance(ratio, Fraction) and isinstance(ratio, (int, float, Decimal, str)) and not isinstance(ratio, bool):
            try:  # through the decimal text, so 0.1 is 1/10 and not the binary float's fraction
                value = Decimal(str(ratio))
                if value.is_finite():
                    object.__setattr__(self, "memory_fallback_fraction", Fraction(value))
            except (InvalidOperation, ValueError):
                pass  # problems() names it

    def problems(self) -> list[str]:
        found = []
        if not isinstance(self.scheduler_name, str) or not self.scheduler_name:
            found.append("--scheduler-name: the scheduler name must be a non-empty string")
        grace = self.grace_period_seconds
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not math.isfinite(grace) or grace < 0:
            found.append(f"--grace-period must be a finite number of seconds >= 0 (got {grace!r})")
        ratio = self.memory_fallback_fraction
        if not isinstance(ratio, Fraction) or not 0 < ratio <= 1:
            shown = f"{float(ratio):g}" if isinstance(ratio, Fraction) else repr(ratio)
            found.append(f"--memory-fraction (the memory fallback fraction) must be above 0 and at most 1 (got {shown})")
        cap = self.max_total_gpus
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            found.append(f"--max-gpus (the GPU cap) must be a whole number >= 0 (got {cap!r})")
        if self.default_vendor not in VENDORS:
            found.append(f"--default-vendor must be one of {', '.join(VENDORS)} (got {self.default_vendor!r})")
        if self.policy not in POLICIES:
            found.append(f"--policy must be one of {', '.join(POLICIES)} (got {self.policy!r})")
        node_gpus = self.node_gpus
        if node_gpus is not None and (isinstance(node_gpus, bool) or not isinstance(node_gpus, int) or node_gpus < 1):
            found.append(f"--node-gpus (GPUs per node) must be a whole number >= 1 (got {node_gpus!r})")
        label = self.gpu_memory_label
        if not isinstance(label, str) or (label and label_key_problem(label)):
            found.append(f"--gpu-memory-label must be a label key or empty (got {label!r}): "
                         f"{label_key_problem(label) if isinstance(label, str) else 'not text'}")
        if not isinstance(self.autoscaler_reads_dra, bool):
            found.append(f"--autoscaler-reads-dra must be true or false (got {self.autoscaler_reads_dra!r})")
        for name in ("exact_max_slices", "search_budget"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                found.append(f"{name} must be a whole number >= 0 (got {value!r})")
        return found


@dataclass(frozen=True)
class RunSettings:
    planner: AdjusterSettings = field(default_factory=AdjusterSettings)
    namespace: str = consts.DEFAULT_NAMESPACE
    mode: str = "placeholder"
    priority_class: str = consts.DEFAULT_PRIORITY_CLASS
    #: The cluster autoscaler's --expendable-pods-priority-cutoff: placeholders below it never cause a scale-up.
    expendable_cutoff: int = consts.DEFAULT_EXPENDABLE_CUTOFF
    placeholder_image: str = consts.DEFAULT_PLACEHOLDER_IMAGE
    provision_timeout: float = consts.DEFAULT_PROVISION_TIMEOUT_SECONDS
    provisioning_class: str = consts.DEFAULT_PROVISIONING_CLASS
    failed_backoff: float = consts.DEFAULT_FAILED_BACKOFF_SECONDS
    resync: float = consts.DEFAULT_RESYNC_SECONDS
    debounce: float = consts.DEFAULT_DEBOUNCE_SECONDS
    #: New placeholders wait while a burst is still arriving (reconcile.BatchWindow); idle 0: made at once.
    batch_idle: float = consts.DEFAULT_BATCH_IDLE_SECONDS
    batch_max: float = consts.DEFAULT_BATCH_MAX_SECONDS
    request_timeout: float = consts.DEFAULT_REQUEST_TIMEOUT_SECONDS
    kubeconfig: Optional[str] = None
    log_format: str = "text"
    #: 0: no metrics server.
    metrics_port: int = consts.DEFAULT_METRICS_PORT
    #: '': every interface (in a pod: the pod's own network, where Prometheus scrapes).
    metrics_host: str = consts.DEFAULT_METRICS_HOST
    #: The probe server (/healthz and /readyz alone, for the kubelet); 0: none.
    probe_port: int = consts.DEFAULT_PROBE_PORT
    probe_host: str = consts.DEFAULT_PROBE_HOST
    leader_election: bool = True
    lease_name: str = consts.DEFAULT_LEASE_NAME
    lease_namespace: Optional[str] = None
    lease_duration: int = consts.DEFAULT_LEASE_DURATION_SECONDS
    renew_deadline: int = consts.DEFAULT_RENEW_DEADLINE_SECONDS
    retry_period: int = consts.DEFAULT_RETRY_PERIOD_SECONDS
    identity: str = ""

    def problems(self) -> list[str]:
        found = list(self.planner.problems())
        if self.planner.policy != "exact":
            found.append("adjuster run plans with --policy exact only (KAI's rule is for comparison in `adjuster plan`)")
        for what, value in (("--namespace", self.namespace), ("--lease-namespace", self.lease_namespace)):
            if value is not None:
                problem = namespace_problem(value)
                if problem:
                    found.append(f"{what} {value!r}: {problem}")
        if self.mode not in MODES:
            found.append(f"--mode must be one of {', '.join(MODES)} (got {self.mode!r})")
        if not isinstance(self.provisioning_class, str) or not _DNS_SUBDOMAIN.match(self.provisioning_class) or len(self.provisioning_class) > 253:
            found.append(f"--provisioning-class must be a DNS subdomain (got {self.provisioning_class!r})")
        elif self.provisioning_class == consts.CHECK_CAPACITY_CLASS:
            found.append(f"--provisioning-class {consts.CHECK_CAPACITY_CLASS} only checks for capacity that exists and never adds "
                         f"a node, so the pods would wait on; use {consts.DEFAULT_PROVISIONING_CLASS} (the default) or your "
                         "cloud's scale-up class")
        for what, value in (("--priority-class", self.priority_class), ("--lease-name", self.lease_name)):
            problem = name_problem("PriorityClass", value) if isinstance(value, str) and value else "must not be empty"
            if problem:
                found.append(f"{what} {value!r}: {problem}")
        if not isinstance(self.placeholder_image, str) or not self.placeholder_image.strip() or " " in self.placeholder_image:
            found.append(f"--placeholder-image must be an image reference (got {self.placeholder_image!r})")
        for what, value, low in (
            ("--provision-timeout", self.provision_timeout, 0.0),
            ("--failed-backoff", self.failed_backoff, 0.0),
            ("--resync", self.resync, 0.01),
            ("--debounce", self.debounce, 0.0),
            ("--batch-idle-duration", self.batch_idle, 0.0),
            ("--batch-max-duration", self.batch_max, 0.0),
            ("--request-timeout", self.request_timeout, 0.1),
        ):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
                found.append(f"{what} must be a finite number of seconds >= {low} (got {value!r})")
        if self.log_format not in LOG_FORMATS:
            found.append(f"--log-format must be one of {', '.join(LOG_FORMATS)} (got {self.log_format!r})")
        for problem in (port_problem(self.metrics_port), host_problem(self.metrics_host)):
            if problem:
                found.append(f"--metrics-bind-address (or --metrics-port): {problem}")
        for problem in (port_problem(self.probe_port), host_problem(self.probe_host)):
            if problem:
                found.append(f"--health-probe-bind-address: {problem}")
        if self.probe_port and self.probe_port == self.metrics_port:
            found.append(f"--health-probe-bind-address and --metrics-bind-address both name port {self.probe_port}: the probes "
                         "need a port of their own, which no metrics client can fill")
        cutoff = self.expendable_cutoff
        if isinstance(cutoff, bool) or not isinstance(cutoff, int):
            found.append(f"--expendable-pods-priority-cutoff must be a whole number (got {cutoff!r})")
        lease_ok = True
        for what, value in (("--lease-duration", self.lease_duration), ("--renew-deadline", self.renew_deadline),
                            ("--retry-period", self.retry_period)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                found.append(f"{what} must be a whole number of seconds, at least 1 (got {value!r})")
                lease_ok = False
        if self.leader_election and lease_ok:
            # The official leader-election module's own rules, checked here so it never calls sys.exit.
            if self.renew_deadline <= 1.2 * self.retry_period:
                found.append(f"--renew-deadline must be more than 1.2 x --retry-period (got {self.renew_deadline} and {self.retry_period})")
            if self.lease_duration <= self.renew_deadline:
                found.append(f"--lease-duration must be more than --renew-deadline (got {self.lease_duration} and {self.renew_deadline})")
        if len(self.identity) > 128:
            found.append(f"--identity must be at most 128 characters (got {len(self.identity)})")
        return found
