"""Whether the nodes still offer what a pass read, asked between the pass's creations: `NodesAsRead`.

A pass decides on one read of the cluster and then acts for a while: each create is a round trip, a second or more
for a burst's placeholders on a loaded API server. A node that comes up meanwhile (the one the autoscaler added for
a placeholder kube-scheduler bound elsewhere) has room the decision did not count, so the placeholders it made for
the pods that room holds are needless; created, they are deleted at the next pass, but an autoscaler that saw them in
between (one loop is enough) has already added a node for them or for a placeholder whose node they took in its
simulation. So the controller asks this before each creation and leaves the rest to the next pass, which the node's
event has already called for.

Cheap where nothing changed: the node cache's revision is compared first, and where it moved only the node objects
the cache replaced since are read again (at 2,000 nodes, a few milliseconds). What it deliberately does not do: look
at pods (a pod that lands is counted by the next pass as any other change; what it frees or takes is on a node the
decision already counted), or decide anything itself (`scale_adjuster.node_capacity` says what of a node counts).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from raybridge.adjuster.decision.scale_adjuster import NodeCapacity, node_capacity
from raybridge.core.views import Node
from raybridge.kube.informer import Informer


class NodesAsRead:
    """The nodes a pass read (`listed`, read from `nodes` at its `revision`), and whether the cache still offers them."""

    def __init__(self, nodes: Informer, revision: int, listed: Sequence[Node]) -> None:
        self.nodes = nodes
        self._revision = revision
        self._listed = listed
        self._read: Optional[frozenset[NodeCapacity]] = None
        #: Per node object last read (by identity: the cache replaces an object when it changes, and keeps the same
        #: one while it does not), the object and what it offers; each is held, so no other object takes its id.
        self._known: dict[int, tuple[Any, NodeCapacity]] = {}
        self._same = True

    def unchanged(self) -> bool:
        """True while the node cache offers what the pass read: the same nodes, each as Ready, as schedulable and
        offering the same resources (labels and annotations may differ). Only the nodes whose objects changed since
        the last question are read again."""
        revision = self.nodes.revision
        if revision == self._revision:
            return self._same
        self._revision = revision
        if self._read is None:
            self._known = {id(node.obj): (node.obj, node_capacity(node)) for node in self._listed}
            self._read = frozenset(capacity for _, capacity in self._known.values())
        known: dict[int, tuple[Any, NodeCapacity]] = {}
        for obj in self.nodes.snapshot():
            found = self._known.get(id(obj))
            known[id(obj)] = found if found is not None and found[0] is obj else (obj, node_capacity(obj))
        self._known = known
        self._same = frozenset(capacity for _, capacity in known.values()) == self._read
        return self._same
