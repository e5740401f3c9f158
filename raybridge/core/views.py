"""Typed views of the Kubernetes objects every domain reads: a Pod, a Node, their metadata and conditions.

Why it exists: objects reach raybridge from the API server, from `kubectl get -o json|yaml` files
and from files users wrote, and any field of them can be absent or of the wrong type. A view reads
an object once, at the boundary where it comes in, checking each field's type as it goes (a field
of the wrong type reads as absent, as `core/kubeobjects.as_dict` does), so the code above asks
`pod.node_name` or `node.meta.labels` instead of walking nested mappings field by field.

What it deliberately does not do:
- decide what the fields mean (whether a pod is demand, whether a node may take it): each domain does;
- copy: `labels`, `annotations`, `spec` and `status` are the object's own mappings (or an empty one),
  shared with it, so reading 10,000 pods costs no copies; nothing may change them;
- raise: a view of anything (a list, None, a number) is a view of an object that says nothing.

The whole object stays at hand (`obj`) for what is read rarely or by upstream's own rules
(`core/kubeobjects.pod_requests`, the scheduler's constraint matching). What a reader derives from a pod alone
(its requests, its PodScheduled condition) it may keep with the view (`pod_fact`): since nothing changes the
object, a view read again is read for nothing.
"""

from __future__ import annotations

import functools
from collections import abc
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping, Optional, TypeVar

from raybridge.core.kubeobjects import as_dict, as_list, parse_rfc3339

#: Pod phases in which a pod no longer runs nor holds what it requested.
FINISHED_PHASES = ("Succeeded", "Failed")
#: The scheduler a pod without `spec.schedulerName` gets (the API server's default).
DEFAULT_SCHEDULER = "default-scheduler"

_EMPTY: Mapping[str, Any] = {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def is_object(value: Any) -> bool:
    """Whether `value` is a mapping (a JSON object): parsed JSON and YAML give dicts, checked first, as the ABC check
    costs ten times more and a pass asks it of every pod and node."""
    return type(value) is dict or isinstance(value, abc.Mapping)


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """One of `metadata.ownerReferences`."""

    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(frozen=True, slots=True)
class Condition:
    """One of `status.conditions` ("" where a field is absent or not text)."""

    type: str
    status: str
    reason: str
    message: str
    #: As written (RFC 3339 text, or a datetime where YAML read an unquoted one); `transitioned_at` parses it.
    last_transition_time: Any = None

    @property
    def true(self) -> bool:
        return self.status == "True"

    @property
    def transitioned_at(self) -> Optional[datetime]:
        return parse_rfc3339(self.last_transition_time)

    def words(self) -> str:
        """"reason: message", or whichever of the two it has."""
        if self.reason and self.message:
            return f"{self.reason}: {self.message}"
        return self.reason or self.message


def read_condition(entry: Mapping[str, Any]) -> Condition:
    """The view of one entry of `status.conditions` (an object; `conditions_of` leaves the others out)."""
    return Condition(_text(entry.get("type")), _text(entry.get("status")), _text(entry.get("reason")),
                     _text(entry.get("message")), entry.get("lastTransitionTime"))


def conditions_of(status: Any) -> tuple[Condition, ...]:
    """The conditions in `status.conditions`; entries that are not objects are left out."""
    return tuple(read_condition(cond) for cond in as_list(as_dict(status).get("conditions")) if is_object(cond))


def find_condition(conditions: tuple[Condition, ...], kind: str) -> Optional[Condition]:
    """The first condition of type `kind` (controllers keep one of each), or None."""
    return next((c for c in conditions if c.type == kind), None)


@dataclass(frozen=True, slots=True)
class Meta:
    """An object's `metadata` ("" where a field is absent or not text)."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, Any]
    annotations: Mapping[str, Any]
    #: As written: RFC 3339 text, or a datetime where YAML read an unquoted one (`created_at` parses it).
    creation_timestamp: Any
    #: Whether `deletionTimestamp` is set: the object is being deleted.
    deleting: bool
    owner_references: Any

    @property
    def key(self) -> str:
        """"namespace/name" as the adjuster and its Events name a pod: "default" for no namespace, "?" for no name."""
        return f"{self.namespace or 'default'}/{self.name or '?'}"

    @property
    def namespace_or_default(self) -> str:
        return self.namespace or "default"

    @property
    def created(self) -> Optional[str]:
        """`creationTimestamp` as text (RFC 3339 sorts as text), or None."""
        stamp = self.creation_timestamp
        return stamp if isinstance(stamp, str) else None

    @property
    def created_at(self) -> Optional[datetime]:
        return parse_rfc3339(self.creation_timestamp)

    @property
    def owners(self) -> tuple[OwnerRef, ...]:
        """`ownerReferences`, read when asked (most readers never ask)."""
        found = []
        for ref in as_list(self.owner_references):
            if is_object(ref):
                found.append(OwnerRef(_text(ref.get("kind")), _text(ref.get("name")), _text(ref.get("uid")), ref.get("controller") is True))
        return tuple(found)

    def owned_by_kind(self, kind: str) -> bool:
        return any(ref.kind == kind for ref in self.owners)

    def label(self, key: str) -> str:
        """The label `key` as text; "" where absent or not text (a file may say anything: a list, a mapping, a number,
        none of which the API server takes)."""
        return _text(self.labels.get(key))


def read_meta(obj: Any) -> Meta:
    """The view of `obj`'s metadata (of anything: a non-object reads as metadata that says nothing)."""
    meta = as_dict(obj.get("metadata")) if is_object(obj) else _EMPTY
    return Meta(
        name=_text(meta.get("name")),
        namespace=_text(meta.get("namespace")),
        uid=_text(meta.get("uid")),
        labels=as_dict(meta.get("labels")),
        annotations=as_dict(meta.get("annotations")),
        creation_timestamp=meta.get("creationTimestamp"),
        deleting=bool(meta.get("deletionTimestamp")),
        owner_references=meta.get("ownerReferences"),
    )


@dataclass(frozen=True, slots=True)
class Pod:
    """A Pod, read once."""

    obj: Mapping[str, Any]
    meta: Meta
    #: `spec` ({} where absent or not an object: `has_spec` tells which).
    spec: Mapping[str, Any]
    has_spec: bool
    status: Mapping[str, Any]
    #: `spec.nodeName` as text ("" where unbound, or where it is not text: `bound` still says it is set).
    node_name: str
    #: Whether `spec.nodeName` is set at all (of whatever type): the scheduler is done with the pod.
    bound: bool
    phase: str
    scheduler_name: str
    #: What readers derived from this pod alone, each read once per view (`pod_fact`). Nothing changes the object a
    #: view reads, so a reader that keeps the views of unchanged objects from one pass to the next (the adjuster's
    #: controller, `adjuster/kept_views.py`) reads each fact of an unchanged pod once.
    facts: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        return self.meta.key

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED_PHASES

    @property
    def waiting(self) -> bool:
        """Not landed: unbound, not finished, not being deleted."""
        return not (self.bound or self.meta.deleting or self.finished)

    @property
    def conditions(self) -> tuple[Condition, ...]:
        return conditions_of(self.status)

    def condition(self, kind: str) -> Optional[Condition]:
        """The pod's first condition of type `kind` (e.g. PodScheduled), read without reading the others."""
        for cond in as_list(self.status.get("conditions")):
            if is_object(cond) and cond.get("type") == kind:
                return read_condition(cond)
        return None


_UNREAD = object()
Fact = TypeVar("Fact")


def pod_fact(pod: Pod, reader: Callable[..., Fact], *helpers: Any) -> Fact:
    """`reader(pod, *helpers)`, read once per view: `reader` reads the pod alone and is the fact's key; `helpers` only
    make the reading cheaper (a pass's caches of parsed texts), never change what is read."""
    found = pod.facts.get(reader, _UNREAD)
    if found is _UNREAD:
        found = pod.facts[reader] = reader(pod, *helpers)
    return found  # type: ignore[no-any-return]


def scheduled_condition(pod: Pod) -> Optional[Condition]:
    """The pod's PodScheduled condition (the scheduler's verdict), as a `pod_fact` reader."""
    return pod.condition("PodScheduled")


def read_pods(objs: Iterable[Any]) -> list[Pod]:
    """The views of the objects among `objs` (anything else left out)."""
    return [read_pod(obj) for obj in objs if is_object(obj)]


def read_pod(obj: Any) -> Pod:
    """The view of a Pod object (of anything: a non-object reads as a pod that says nothing)."""
    if not is_object(obj):
        obj = _EMPTY
    raw_spec, status = obj.get("spec"), as_dict(obj.get("status"))
    spec = as_dict(raw_spec)
    node = spec.get("nodeName")
    return Pod(
        obj=obj,
        meta=read_meta(obj),
        spec=spec,
        has_spec=is_object(raw_spec),
        status=status,
        node_name=_text(node),
        bound=bool(node),
        phase=_text(status.get("phase")),
        scheduler_name=_text(spec.get("schedulerName")) or DEFAULT_SCHEDULER,
    )


@dataclass(frozen=True)
class Node:
    """A Node, read once."""

    obj: Mapping[str, Any]
    meta: Meta
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    #: `spec.taints` entries that are objects.
    taints: tuple[Mapping[str, Any], ...]
    #: `spec.unschedulable` is true: cordoned.
    cordoned: bool
    #: `status.allocatable`, else `status.capacity` (what a node not yet reporting allocatable offers).
    allocatable: Mapping[str, Any]

    @property
    def name(self) -> str:
        return self.meta.name

    @functools.cached_property
    def text_labels(self) -> dict[str, str]:
        """The labels whose values are text (selectors match only those), read once."""
        return {str(k): v for k, v in self.meta.labels.items() if isinstance(v, str)}

    def not_ready_reason(self) -> Optional[str]:
        """Why the node does not count as Ready ("not Ready", "(no Ready condition)" when it has none), or None."""
        for cond in as_list(self.status.get("conditions")):
            if is_object(cond) and cond.get("type") == "Ready":
                return None if cond.get("status") == "True" else "not Ready"
        return "not Ready (no Ready condition)"


def read_node(obj: Any) -> Node:
    """The view of a Node object (of anything: a non-object reads as a node that says nothing)."""
    if not is_object(obj):
        obj = _EMPTY
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    return Node(
        obj=obj,
        meta=read_meta(obj),
        spec=spec,
        status=status,
        taints=tuple(t for t in as_list(spec.get("taints")) if is_object(t)),
        cordoned=spec.get("unschedulable") is True,
        allocatable=as_dict(status.get("allocatable")) or as_dict(status.get("capacity")),
    )
