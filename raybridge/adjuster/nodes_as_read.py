"""Whether the nodes still offer what a pass read, asked between the pass's creations: `NodesAsRead`.

A pass decides on one read of the cluster and then acts for a while: each create is a round trip, a second or more
for a burst's placeholders on a loaded API server. A node that comes up meanwhile (the one the autoscaler added for
a placeholder kube-scheduler bound elsewhere) has room the decision did not count, so the placeholders it made for
the pods that room holds are needless; created, they are deleted at the next pass, but an autoscaler that saw them in
between (one loop is enough) has already added a node for them or for a placeholder whose node they took in its
simulation. So the controller asks this before each creation and leaves the rest to the next pass, which the node's
event has already called for.

Cheap where nothing changed: the node cache's revision is compared first, and the nodes are read again only when it
moved. What it deliberately does not do: look at pods (a pod that lands is counted by the next pass as any other
change; what it frees or takes is on a node the decision already counted), or decide anything itself
(`scale_adjuster.nodes_capacity` says what of a node counts).
"""

from __future__ import annotations

from typing import Optional, Sequence

from raybridge.adjuster.decision.scale_adjuster import NodeCapacity, nodes_capacity
from raybridge.core.views import Node
from raybridge.kube.informer import Informer


class NodesAsRead:
    """The nodes a pass read (`listed`, read from `nodes` at its `revision`), and whether the cache still offers them."""

    def __init__(self, nodes: Informer, revision: int, listed: Sequence[Node]) -> None:
        self.nodes = nodes
        self._revision = revision
        self._listed = listed
        self._read: Optional[frozenset[NodeCapacity]] = None
        self._same = True

    def unchanged(self) -> bool:
        """True while the node cache offers what the pass read: the same nodes, each as Ready, as schedulable and
        offering the same resources (labels and annotations may differ)."""
        revision = self.nodes.revision
        if revision != self._revision:
            self._revision = revision
            if self._read is None:
                self._read = nodes_capacity(self._listed)
            self._same = nodes_capacity(self.nodes.snapshot()) == self._read
        return self._same
