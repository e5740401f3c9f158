"""A pod's share and a node's GPUs are read once: the demand (pods that wait) and reconcile (pods that landed)
count a pod the same. Each row is a pod or a node read by both halves; both must give the same answer."""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction

import pytest

from raybridge.adjuster.decision.demand import select_demand
from raybridge.kai.share import KaiShare, landed_share, read_kai_share
from raybridge.adjuster.decision.node_room import node_rooms as _node_rooms
from raybridge.adjuster.decision.placeholders import PROVIDED, ExistingPlaceholder
from raybridge.adjuster.decision.reconcile import reconcile
from raybridge.adjuster.decision.settings import AdjusterSettings
from raybridge.core.views import read_node, read_pod
from tests.unit.adjuster_objects import NOW, node, pod

SETTINGS = AdjusterSettings()
#: An MI300X node as the ROCm GPU operator's node labeller labels it: VRAM in GiB with a "G" suffix.
ROCM_NODE = node("mi300x-0", 8, vendor="amd", memory="192G")
ROCM_NODE["metadata"]["labels"]["beta.amd.com/gpu.vram"] = "192G"
HALF_OF_192_GIB = str(96 * 1024)  # MiB


def waiting_fraction(pods, nodes):
    selection = select_demand(pods, nodes, SETTINGS, NOW)
    return {p.pod: p.fraction for p in selection.pieces}, {i.pod: i.code for i in selection.ignored}


def test_a_rocm_node_s_gpu_memory_is_read_for_what_landed_and_its_waiting_pods_get_no_node():
    """KAI shares NVIDIA GPUs alone: a pod waiting for an AMD GPU share is ignored (no MI300X node would let it run);
    what landed there (by whatever means) is still counted with the node's VRAM label read in GiB."""
    fractions, ignored = waiting_fraction([pod("w", memory=HALF_OF_192_GIB)], [ROCM_NODE])
    assert (fractions, ignored) == ({}, {"team/w": "vendor-not-shared"})
    landed = pod("l", memory=HALF_OF_192_GIB, node_name="mi300x-0", phase="Running")
    rooms = _node_rooms([read_node(ROCM_NODE)], [read_pod(landed)])
    assert sorted(rooms["mi300x-0"], reverse=True) == [Fraction(1)] * 7 + [Fraction(1, 2)]


# (case, gpu-memory text, KAI's ParseInt reads it)
MEMORY_TEXTS = [
    ("plain digits", "40000", True),
    ("an underscore between digits (Python's int takes it, Go's ParseInt base 10 does not)", "40_000", False),
    ("a leading space", " 40000", False),
    ("a trailing newline", "40000\n", False),
    ("Arabic-Indic digits", "٤٠٠٠٠", False),
]


@pytest.mark.parametrize("case,text,read", MEMORY_TEXTS, ids=[r[0] for r in MEMORY_TEXTS])
def test_gpu_memory_is_one_number_waiting_and_landed(case, text, read):
    h100 = node("h100-0", 8, memory="80000")
    fractions, ignored = waiting_fraction([pod("w", memory=text)], [h100])
    landed = _node_rooms([read_node(h100)], [read_pod(pod("l", memory=text, node_name="h100-0", phase="Running"))])["h100-0"]
    if read:
        assert fractions == {"team/w": Fraction(1, 2)} and min(landed) == Fraction(1, 2)
    else:  # not demand while waiting; landed, KAI placed it as something this reader cannot tell: a whole GPU
        assert ignored == {"team/w": "bad-annotation"} and min(landed) == 0


# (case, annotations, what is read)
SHARES = [
    ("a fraction", {"gpu-fraction": "0.5"}, KaiShare(Fraction(1, 2), None, 1)),
    ("a fraction on two devices", {"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}, KaiShare(Fraction(1, 4), None, 2)),
    ("an empty fraction: gpu-memory decides", {"gpu-fraction": "", "gpu-memory": "1024"}, KaiShare(None, 1024, 1)),
    ("both empty", {"gpu-fraction": "", "gpu-memory": ""},
     KaiShare(None, None, 1, "gpu-fraction and gpu-memory are both empty or absent")),
    ("a malformed device count", {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "x"},
     KaiShare(Fraction(1, 2), None, None, "gpu-fraction-num-devices 'x' is not a whole number")),
    ("a fraction out of range, then a malformed count: the first problem", {"gpu-fraction": "1.5", "gpu-fraction-num-devices": "x"},
     KaiShare(None, None, None, "gpu-fraction '1.5' is out of range (0 < f < 1)")),
]


@pytest.mark.parametrize("case,annotations,expected", SHARES, ids=[r[0] for r in SHARES])
def test_read_kai_share(case, annotations, expected):
    assert read_kai_share(annotations) == expected
    assert read_kai_share(annotations, cache := {}) == expected == read_kai_share(annotations, cache)


# (case, annotations, MiB per GPU of its node, what a landed pod holds)
LANDED = [
    ("no sharing annotation", {}, 80000, None),
    ("a fraction", {"gpu-fraction": "0.5"}, None, (Fraction(1, 2), 1)),
    ("gpu-memory on a node whose GPU memory is known", {"gpu-memory": "20000"}, 80000, (Fraction(1, 4), 1)),
    ("gpu-memory on a node whose GPU memory is unknown: whole GPUs", {"gpu-memory": "20000"}, None, (Fraction(1), 1)),
    ("more memory than the GPU has: one whole GPU", {"gpu-memory": "90000"}, 80000, (Fraction(1), 1)),
    ("a malformed fraction: whole GPUs", {"gpu-fraction": "half", "gpu-fraction-num-devices": "2"}, None, (Fraction(1), 2)),
    ("a malformed device count: one device", {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "x"}, None, (Fraction(1, 2), 1)),
]


@pytest.mark.parametrize("case,annotations,memory,expected", LANDED, ids=[r[0] for r in LANDED])
def test_landed_share(case, annotations, memory, expected):
    assert landed_share(annotations, memory) == expected
