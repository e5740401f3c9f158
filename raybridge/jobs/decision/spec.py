"""The job spec: one Ray (or plain Kubernetes) workload, validated.

A spec comes from YAML text, from command-line flags, or from Python; flags
win over the file. Validation collects every problem at once and raises
`BadInput` with one sentence per bad field, so the user fixes them in one go.
Bad input is refused, never reinterpreted: a count of 0 replicas, a negative
memory, a GPUs-per-replica that allocates nothing are errors, not defaults.

Pure: it parses text and mappings and reads no file (`raybridge.jobs.spec_file.load_spec`
reads the YAML file and hands its text here). It does not look at the cluster:
sizing against real capacity is `raybridge.jobs.decision.sizing`, and turning a spec
into objects is `raybridge.jobs.decision.manifests`.
"""

from __future__ import annotations

import difflib
import posixpath
from typing import Any, Literal, Optional

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from raybridge.core.consts import DEFAULT_CPUS_PER_GPU, DEFAULT_MEMORY_PER_GPU, VENDORS
from raybridge.core.documents import load_yaml
from raybridge.kuberay.names import name_limit
from raybridge.core.names import env_var_name_problem, name_problem, namespace_problem, queue_name_problem, subdomain_problem
from raybridge.core.quantity import amount_problem
from raybridge.jobs.decision.gpu_access import model_name_problem
from raybridge.core.runtime_env import is_uri, reserved_env_clash
from raybridge.errors import BadInput

#: The most GPUs a count may say: sizing and Ray's `num_gpus` count in floats, exact up to 2^53.
MAX_GPUS = 2**53
#: Kubernetes' int32: a Deployment's and a RayCluster worker group's `replicas` hold no more.
MAX_REPLICAS = 2**31 - 1
#: Kueue reads its max-exec-time-seconds label as an int32 and drops a limit that does not fit, without a word
#: (pkg/controller/jobframework/interface.go, MaximumExecutionTimeSecondsForObject: strconv.ParseInt(v, 10, 32)).
MAX_RUN_SECONDS = 2**31 - 1

#: What `kind` may say, by whether the workload runs Ray.
RAY_KINDS = ("RayJob", "RayCluster")
PLAIN_KINDS = ("job", "service")
_KIND_SPELLINGS = {k.lower(): k for k in RAY_KINDS + PLAIN_KINDS}


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, alias_generator=to_camel, frozen=True, allow_inf_nan=False
    )


class PodResources(_Model):
    """CPU and memory for one pod (the head, or a worker overriding the per-GPU defaults)."""

    cpu: Optional[str] = None
    memory: Optional[str] = None

    @field_validator("cpu", "memory", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> Any:
        if value is None:
            return None
        problem = amount_problem(value)
        if problem:
            raise ValueError(problem)
        return str(value)


class Toleration(_Model):
    key: Optional[str] = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: Optional[str] = None
    effect: Optional[Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]] = None
    toleration_seconds: Optional[int] = None

    def tolerates(self, taint: dict[str, Any]) -> bool:
        """Kubernetes' matching rule for one taint (`core.placement.tolerates`)."""
        from raybridge.core.placement import tolerates

        return tolerates({"key": self.key, "operator": self.operator, "value": self.value, "effect": self.effect}, taint)


class JobSpec(_Model):
    """One workload. Counts left unset are None; sizing decides what they become."""

    ray: bool = True
    kind: Optional[str] = None
    name: Optional[str] = None
    namespace: Optional[str] = None
    entrypoint: Optional[str] = None
    working_dir: Optional[str] = None
    runtime_env: Optional[dict[str, Any]] = None
    image: Optional[str] = None
    gpus: int = Field(default=0, ge=0)
    replicas: Optional[int] = Field(default=None, ge=0)
    gpus_per_replica: Optional[float] = Field(default=None, ge=0)
    gpu_vendor: Optional[Literal["amd", "nvidia"]] = None
    #: Only GPUs whose model names this ("H100", "MI300X", "NVIDIA-A100-SXM4-40GB"; case, spaces, dashes and
    #: underscores aside), and of at least this much memory each ("80Gi").
    gpu_model: Optional[str] = None
    gpu_memory: Optional[str] = None
    queue: Optional[str] = None
    priority_class: Optional[str] = None
    cpus_per_gpu: float = Field(default=DEFAULT_CPUS_PER_GPU, gt=0)
    memory_per_gpu: str = DEFAULT_MEMORY_PER_GPU
    head: PodResources = PodResources()
    worker: PodResources = PodResources()
    #: KubeRay token authentication for the Ray cluster (KubeRay v1.5 and later).
    auth_mode: Optional[Literal["token", "disabled"]] = None
    #: A Secret of the namespace (key `auth_token`) holding the token of the job's Ray cluster, made by its owner once
    #: for every job (KubeRay's `authOptions.secretName`, v1.6.0 and later): the submitter then needs to read that
    #: Secret alone (configs/rbac/submitter-token-auth.yaml). Token authentication is on with it.
    auth_secret: Optional[str] = None
    #: Longest the job may run once admitted; Kueue evicts it after that (its `max-exec-time-seconds`).
    max_run_seconds: Optional[int] = Field(default=None, gt=0)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("gpus", "replicas", "gpus_per_replica", "cpus_per_gpu", "max_run_seconds", mode="before")
    @classmethod
    def _number_not_boolean(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"must be a number, not a boolean (got {str(value).lower()})")
        return value

    @field_validator("gpus", "replicas", "gpus_per_replica", "max_run_seconds")
    @classmethod
    def _within_what_is_written(cls, value: Optional[float], info: ValidationInfo) -> Optional[float]:
        bound, why = _BOUNDS[info.field_name or ""]
        if value is not None and value > bound:
            raise ValueError(f"must be at most {bound} (got {value!r}): {why}")
        return value

    @field_validator("gpu_vendor", mode="before")
    @classmethod
    def _vendor(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lower() in VENDORS:
            return value.lower()
        if value in (None, ""):
            return None
        raise ValueError(f"must be one of {', '.join(VENDORS)} (got {value!r})")

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> Any:
        if value in (None, ""):
            return None
        if isinstance(value, str) and value.lower() in _KIND_SPELLINGS:
            return _KIND_SPELLINGS[value.lower()]
        raise ValueError(f"must be one of {', '.join(RAY_KINDS + PLAIN_KINDS)} (got {value!r})")

    @field_validator("gpus_per_replica")
    @classmethod
    def _whole_or_fraction(cls, value: Optional[float]) -> Optional[float]:
        if value is not None and value >= 1 and value != int(value):
            raise ValueError(f"must be a whole number, or a fraction below 1 for GPU sharing (got {value})")
        return value

    @field_validator("gpu_model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> Any:
        if value in (None, ""):
            return None
        problem = model_name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("gpu_memory", mode="before")
    @classmethod
    def _gpu_memory(cls, value: Any) -> Any:
        if value in (None, ""):
            return None
        problem = amount_problem(value)
        if problem:
            raise ValueError(problem)
        return str(value)

    @field_validator("memory_per_gpu", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> Any:
        problem = amount_problem(value)
        if problem:
            raise ValueError(problem)
        return str(value)

    @field_validator("replicas")
    @classmethod
    def _at_least_one_replica(cls, value: Optional[int]) -> Optional[int]:
        if value == 0:
            raise ValueError("must be at least 1 (got 0); leave it unset for one replica")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: Optional[str], info: ValidationInfo) -> Optional[str]:
        if value is None:
            return None
        kind = info.data.get("kind") or ("RayJob" if info.data.get("ray", True) else "job")
        problem = name_problem(kind, value, name_limit(kind))
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("queue", "priority_class")
    @classmethod
    def _label_value(cls, value: Optional[str]) -> Optional[str]:
        problem = queue_name_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        problem = env_vars_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("runtime_env")
    @classmethod
    def _runtime_env_vars(cls, value: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        env_vars = (value or {}).get("env_vars")
        if env_vars is None:
            return value
        if not isinstance(env_vars, dict) or not all(isinstance(v, str) for v in env_vars.values()):
            raise ValueError("env_vars must map names to strings (Ray refuses anything else)")
        problem = env_vars_problem(env_vars)
        if problem:
            raise ValueError(f"env_vars: {problem}")
        return value

    @field_validator("auth_secret")
    @classmethod
    def _secret_name(cls, value: Optional[str]) -> Optional[str]:
        problem = subdomain_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: Optional[str]) -> Optional[str]:
        problem = namespace_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "JobSpec":
        problems: list[str] = []
        if self.kind is not None:
            if self.ray and self.kind not in RAY_KINDS:
                problems.append(f"kind: {self.kind!r} is a non-Ray kind; set ray: false (--no-ray) or use {' or '.join(RAY_KINDS)}")
            if not self.ray and self.kind not in PLAIN_KINDS:
                problems.append(f"kind: {self.kind!r} needs Ray; with ray: false use {' or '.join(PLAIN_KINDS)}")
        if self.auth_secret is not None and self.auth_mode == "disabled":
            problems.append("authSecret names the Secret of the cluster's token: it needs authMode: token (or authMode unset)")
        if self.gpus > 0 and self.gpus_per_replica == 0:
            problems.append(f"gpusPerReplica: 0 contradicts gpus: {self.gpus}; leave gpusPerReplica unset or give a positive number")
        if self.ray and self.gpus_per_replica and self.replicas is None and self.gpus == 0:
            per = _number(self.gpus_per_replica)
            problems.append(
                f"gpusPerReplica: {per} with replicas unset and gpus 0 allocates no GPUs; "
                f"give replicas (--replicas N for N x {per} GPUs) or a total (--gpus)"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def resolved_auth_mode(self) -> Optional[str]:
        """`authMode`, with `authSecret` meaning token."""
        return self.auth_mode or ("token" if self.auth_secret else None)

    @property
    def resolved_kind(self) -> str:
        if self.kind:
            return self.kind
        return "RayJob" if self.ray else "job"


def env_vars_problem(env: dict[str, str]) -> Optional[str]:
    """Why these environment variables cannot be set (a bad name, or one raybridge sets), or None."""
    for name in env:
        problem = env_var_name_problem(name)
        if problem:
            return problem
    reserved = reserved_env_clash(env)
    if reserved:
        return f"{', '.join(reserved)} {'is' if len(reserved) == 1 else 'are'} set by raybridge to what was allocated"
    return None


#: The most each count may be, and why.
_BOUNDS: dict[str, tuple[int, str]] = {
    "gpus": (MAX_GPUS, "GPUs are counted in floating point, exact up to 2^53"),
    "gpus_per_replica": (MAX_GPUS, "GPUs are counted in floating point, exact up to 2^53"),
    "replicas": (MAX_REPLICAS, "a Kubernetes replicas field is an int32"),
    "max_run_seconds": (MAX_RUN_SECONDS, "Kueue reads its max-exec-time-seconds label as an int32 and drops a limit beyond it"),
}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# --- building and error reporting ----------------------------------------------------------

_FIELD_ALIASES = sorted({to_camel(n) for n in JobSpec.model_fields} | set(JobSpec.model_fields))


def _field_path(loc: tuple[Any, ...]) -> str:
    parts = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "spec"


def _describe(error: dict[str, Any]) -> list[str]:
    loc = tuple(error.get("loc", ()))
    path = _field_path(loc)
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        field = str(loc[-1]) if loc else "?"
        close = difflib.get_close_matches(field, _FIELD_ALIASES, n=1) if len(loc) == 1 else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return [f"{path}: unknown field{hint}"]
    message = str(error.get("msg", "invalid"))
    if kind in ("value_error", "assertion_error"):
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if not loc:  # a model-level check: its lines already name their fields
            return message.split("\n")
        return [f"{path}: {line}" for line in message.split("\n")]
    got = error.get("input")
    shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
    return [f"{path}: {message[0].lower() + message[1:]}{shown}"]


def build_spec(data: dict[str, Any]) -> JobSpec:
    """Validate a mapping (camelCase or snake_case keys) into a JobSpec, or raise BadInput."""
    if not isinstance(data, dict):
        raise BadInput(f"the spec must be a mapping of fields, not {type(data).__name__}")
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        problems: list[str] = []
        for error in exc.errors():
            problems.extend(_describe(error))
        raise BadInput(*problems) from None


def parse_spec(
    text: Optional[str],
    origin: str = "spec",
    base_dir: Optional[str] = None,
    overrides: Optional[dict[str, Any]] = None,
) -> JobSpec:
    """Validate YAML text (or none), with non-None `overrides` applied on top, into a JobSpec.

    `origin` names the text in messages (e.g. "spec file 'job.yaml'"). A relative
    `workingDir` in the text means relative to `base_dir` (the file's directory,
    absolute), wherever raybridge runs; the caller finds that directory.
    """
    data: dict[str, Any] = {}
    if text is not None:
        loaded = load_yaml(text, origin)
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise BadInput(f"{origin} must hold a mapping of fields, not {type(loaded).__name__}")
        if "spec" in loaded and isinstance(loaded.get("spec"), dict) and "apiVersion" in loaded:
            raise BadInput(f"{origin} looks like a Kubernetes object; raybridge wants the plain job spec (see examples/)")
        data = dict(loaded)
        working_dir = data.get("workingDir", data.get("working_dir"))
        if base_dir and isinstance(working_dir, str) and not is_uri(working_dir) and not working_dir.startswith(("/", "~")):
            data.pop("working_dir", None)
            data["workingDir"] = posixpath.normpath(posixpath.join(base_dir, working_dir))
    for key, value in (overrides or {}).items():
        if value is not None:
            data[to_camel(key)] = value
            data.pop(key, None) if key != to_camel(key) else None
    return build_spec(data)


# --- the one entrypoint rule ---------------------------------------------------------------------

#: What a command does with a spec, as far as its entrypoint goes.
Purpose = Literal["size", "render", "submit"]


def has_entrypoint(spec: JobSpec) -> bool:
    """A command to run: blank text (`entrypoint: ''`, spaces) is none."""
    return bool((spec.entrypoint or "").strip())


def entrypoint_problem(spec: JobSpec, purpose: Purpose) -> Optional[str]:
    """Why this spec's entrypoint keeps `purpose` from going ahead, or None; the one rule every command asks.

    Only a RayJob that is to run needs a command: `submit` and `render` of a RayJob (the object carries
    it). Sizing (`plan`) needs none, and neither does a RayCluster or a plain workload. A RayCluster
    runs no entrypoint: `submit` refuses one rather than create a cluster that never runs it;
    `plan` and `render` go ahead and `entrypoint_note` says where it goes instead.
    """
    if not spec.ray or purpose == "size":
        return None
    if spec.resolved_kind == "RayJob" and not has_entrypoint(spec):
        return "entrypoint: a RayJob needs a command to run: give one in the spec, with --entrypoint, or after --"
    if spec.resolved_kind == "RayCluster" and has_entrypoint(spec) and purpose == "submit":
        return (
            "entrypoint: a RayCluster runs no entrypoint; leave out --kind RayCluster to run it as a RayJob, "
            "or create the cluster and submit to it later"
        )
    return None


def entrypoint_note(spec: JobSpec) -> Optional[str]:
    """Where the entrypoint goes when the object made from the spec does not carry it, or None."""
    if spec.ray and spec.resolved_kind == "RayCluster" and has_entrypoint(spec):
        return (
            f"a RayCluster runs no entrypoint, so {spec.entrypoint.strip()!r} is not in it: once the cluster is up, "  # type: ignore[union-attr]
            "submit it with `ray job submit --address <its dashboard> -- <entrypoint>`, or leave out --kind RayCluster "
            "for a RayJob that carries it"
        )
    return None
