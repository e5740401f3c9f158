"""Pods that must not share a host: how many of a kind one node may take, read from the pod's own rules.

Why: replicas with a required pod anti-affinity by hostname, or a hard topology spread by hostname, cannot all
land on one new node. Planned as if they could, they got one placeholder; once its node came, its room "covered"
the replicas KAI would never put there until the provision timeout. So a pod whose own rules select pods like
itself (its labels match the rule's selector, in its own namespace) is of a kind that one node takes at most
`per_node` of: 1 for anti-affinity, `maxSkew` for a spread (new nodes join empty, so the least loaded node has
none of them). The placeholders of such a kind keep apart the same way, and avoid the nodes the replicas already
run on by hostname, not by a copy of the pod's anti-affinity terms (KAI's own scaling pod copies the pod's whole
affinity: kai-scheduler@v0.12.0 pkg/nodescaleadjuster/scaler/scaling_pod.go createScalingPodSpec): such a
placeholder runs a while, and the copy kept the replicas off its node (scale_adjuster.py placeholder_manifest).

What it deliberately does not do: other topology keys (zones: a new node's zone is the autoscaler's choice),
preferred terms, `whenUnsatisfiable: ScheduleAnyway`, rules whose selector does not match the pod itself (they
keep it from other pods, which capacity already placed answers), `matchLabelKeys`, namespace selectors. Pure:
a pod's view (`core/views.py`) in, plain data out.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from raybridge.core.kubeobjects import as_dict, as_list
from raybridge.core.views import Pod

HOSTNAME_KEY = "kubernetes.io/hostname"


@dataclass(frozen=True)
class HostSpread:
    """At most `per_node` pods of this kind on one node; `selectors`: what makes a pod one of them (label selector
    and namespaces, canonical JSON); `anti_affinity_terms`: the pod's required anti-affinity terms by hostname."""

    per_node: int
    selectors: str
    anti_affinity_terms: str

    def to_json(self) -> str:
        return json.dumps({"perNode": self.per_node, "selectors": json.loads(self.selectors),
                           "terms": json.loads(self.anti_affinity_terms)}, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> Optional["HostSpread"]:
        if not text:
            return None
        data = json.loads(text)
        return HostSpread(data["perNode"], json.dumps(data["selectors"], sort_keys=True, separators=(",", ":")),
                          json.dumps(data["terms"], sort_keys=True, separators=(",", ":")))

    @functools.cached_property
    def _selectors(self) -> list[Any]:
        return json.loads(self.selectors)

    def is_one_of(self, pod: Pod) -> bool:
        """Whether `pod` is of this kind: a selector matches its labels in its namespace."""
        labels, namespace = pod.meta.labels, pod.meta.namespace_or_default
        return any(namespace in namespaces and selector_matches(selector, labels) for selector, namespaces in self._selectors)


    def selects_own_kind(self, term: Mapping[str, Any]) -> bool:
        """Whether an anti-affinity term of `anti_affinity_terms` is one that makes pods of this kind keep apart."""
        return any(term.get("labelSelector") == selector and term.get("namespaces") == namespaces for selector, namespaces in self._selectors)


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """A metav1.LabelSelector on a pod's labels (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist);
    an empty selector matches every pod, a malformed one none."""
    for key, value in as_dict(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for expr in as_list(selector.get("matchExpressions")):
        expr = as_dict(expr)
        key, operator, values = expr.get("key"), expr.get("operator"), as_list(expr.get("values"))
        present = key in labels
        if operator == "In":
            ok = present and labels.get(key) in values
        elif operator == "NotIn":
            ok = not present or labels.get(key) not in values
        elif operator == "Exists":
            ok = present
        elif operator == "DoesNotExist":
            ok = not present
        else:
            return False
        if not ok:
            return False
    return True


def host_spread(pod: Pod) -> Optional[HostSpread]:
    """The pod's limit per node, from its own required anti-affinity and hard spread by hostname; None: no limit."""
    spec, labels, namespace = pod.spec, pod.meta.labels, pod.meta.namespace_or_default
    limits: list[int] = []
    selectors: list[Any] = []
    terms: list[Any] = []
    anti = as_dict(as_dict(spec.get("affinity")).get("podAntiAffinity"))
    for term in as_list(anti.get("requiredDuringSchedulingIgnoredDuringExecution")):
        term = as_dict(term)
        selector = as_dict(term.get("labelSelector"))
        namespaces = sorted(n for n in as_list(term.get("namespaces")) if isinstance(n, str)) or [namespace]
        if term.get("topologyKey") != HOSTNAME_KEY or "labelSelector" not in term or term.get("namespaceSelector") is not None:
            continue
        terms.append({"labelSelector": selector, "namespaces": namespaces, "topologyKey": HOSTNAME_KEY})
        if namespace in namespaces and selector_matches(selector, labels):
            limits.append(1)
            selectors.append([selector, namespaces])
    for constraint in as_list(spec.get("topologySpreadConstraints")):
        constraint = as_dict(constraint)
        skew = constraint.get("maxSkew")
        selector = as_dict(constraint.get("labelSelector"))
        if (constraint.get("topologyKey") != HOSTNAME_KEY or constraint.get("whenUnsatisfiable") != "DoNotSchedule"
                or not isinstance(skew, int) or isinstance(skew, bool) or skew < 1 or not selector_matches(selector, labels)):
            continue
        limits.append(skew)
        selectors.append([selector, [namespace]])
    if not limits:
        return None
    canonical = lambda value: json.dumps(value, sort_keys=True, separators=(",", ":"))  # noqa: E731
    unique_selectors = sorted({canonical(s) for s in selectors})
    unique_terms = sorted({canonical(t) for t in terms})
    return HostSpread(min(limits), "[" + ",".join(unique_selectors) + "]", "[" + ",".join(unique_terms) + "]")
