"""The pod cache's objects as views kept from one pass to the next: `KeptPodViews`.

Each pass reads every pod of the cache, and most are the objects the last pass read: the informer replaces an
object when a watch event changes it and keeps the same one while nothing does (`kube.informer.Informer._apply`,
`put` stores a copy). A view of an unchanged object is therefore the same view, with what the decision already read
from it (`core.views.Pod.facts`: the pod's requests, its constraints, its share, its PodScheduled condition), so a
pass reads each fact of an unchanged pod once: a quarter of a pass that packs nothing new at 10,000 pods.

What it deliberately does not do: copy or compare objects. A view is kept by the object's identity and its
`metadata.resourceVersion`, which holds because nothing changes a cached object in place (the cache's contract with
every reader, `core/views.py`); should something apply a change in place anyway, the API server's new resourceVersion
comes with it and the object is read again. Code that changes objects in place without one, as tests building
objects may, reads them with `core.views.read_pods`.
"""

from __future__ import annotations

from typing import Any, Iterable

from raybridge.core.kubeobjects import as_dict
from raybridge.core.views import Pod, is_object, read_pod


class KeptPodViews:
    """`pods(objs)`: the views of `objs`, the last pass's view for each object it read too."""

    def __init__(self) -> None:
        #: Per object last read (by identity): the object (held, so that no other object takes its id), its view, and
        #: the resourceVersion it had then.
        self._kept: dict[int, tuple[Any, Pod, Any]] = {}

    def pods(self, objs: Iterable[Any]) -> list[Pod]:
        """The views of the objects among `objs` (anything else left out); only these are kept for the next call."""
        kept: dict[int, tuple[Any, Pod, Any]] = {}
        views: list[Pod] = []
        last = self._kept
        for obj in objs:
            if not is_object(obj):
                continue
            version = as_dict(obj.get("metadata")).get("resourceVersion")
            found = last.get(id(obj))  # `last` holds its objects: an id found there is this very object's
            view = found[1] if found is not None and found[2] == version else read_pod(obj)
            kept[id(obj)] = (obj, view, version)
            views.append(view)
        self._kept = kept
        return views

    def __len__(self) -> int:
        return len(self._kept)
