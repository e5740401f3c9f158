"""The SVG renderer and the queue charts: valid SVG, input text escaped, bars where the numbers put them."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from decimal import Decimal

import pytest

from raybridge.queues.decision.kueue_explain import FlavorRequest, KueueExplanation
from raybridge.kai.fairshare import Amounts, QueueSpec, ResourceTerms, divide_fair_share
from raybridge.queues.decision.kai_explain import explain_kai
from raybridge.kai.pod_group import read_pod_group
from raybridge.kai.queue import read_kai_queue
from raybridge.queues.decision.queue_svg import fair_share_chart, kai_explain_chart, kueue_explain_chart
from raybridge.core.svg import BAR_WIDTH, Bar, Chart, Column, Row, Series, clean, layout, render
from tests.pictures import check_bars, decode_png, rasterise

SVG = "{http://www.w3.org/2000/svg}"
GPU_TERMS = ResourceTerms(quota=14, limit=-1, over_quota_weight=2)


def texts(svg: str) -> list[str]:
    return [el.text or "" for el in ET.fromstring(svg).iter() if el.tag in (f"{SVG}text", f"{SVG}title")]


def pool_a() -> list[QueueSpec]:
    return [
        QueueSpec("department-a", gpu=ResourceTerms(40, -1, 1)),
        QueueSpec("project-1", "department-a", gpu=GPU_TERMS),
        QueueSpec("project-2", "department-a", gpu=ResourceTerms(6, -1, 3)),
        QueueSpec("project-3", "department-a", gpu=ResourceTerms(0, -1, 1)),
    ]


def test_fair_share_chart_bars_are_the_fair_shares_on_the_capacity_scale():
    result = divide_fair_share(pool_a(), Amounts(gpu=40), None)
    chart = fair_share_chart(result)
    assert [r.label for r in chart.rows] == ["capacity", "department-a", "project-1", "project-2", "project-3"]
    assert [r.depth for r in chart.rows] == [0, 0, 1, 1, 1]
    assert [c.title for c in chart.columns] == ["GPU (devices)"]  # cpu and memory: all zero, not drawn
    box = layout(chart)
    assert box.scales == (40.0,)
    # the fair share is drawn as what the queue deserves (its quota) with what it gets over quota stacked on it
    deserved = {chart.rows[b.row].label: b for b in box.bars if b.series == "deserved"}
    over = {chart.rows[b.row].label: b for b in box.bars if b.series == "over-quota"}
    fair = {name: over[name].x + over[name].width - deserved[name].x for name in deserved}
    assert fair == pytest.approx({"department-a": BAR_WIDTH, "project-1": 21 / 40 * BAR_WIDTH, "project-2": 16 / 40 * BAR_WIDTH,
                                  "project-3": 3 / 40 * BAR_WIDTH})  # fmt: skip
    assert all(over[name].x == deserved[name].x + deserved[name].width and over[name].y == deserved[name].y for name in deserved)
    assert deserved["project-1"].width == 14 / 40 * BAR_WIDTH and over["project-1"].width == 7 / 40 * BAR_WIDTH
    # why each gets what it does over quota: its weight beside its priority, the rule under the chart
    assert [r.note for r in chart.rows[2:]] == [
        "priority 100, over-quota weight 2", "priority 100, over-quota weight 3", "priority 100, over-quota weight 1",
    ]  # fmt: skip
    shown = texts(render(chart))
    assert "14 + 7 = 21" in shown and "6 + 10 = 16" in shown and "0 + 3 = 3" in shown
    assert any("in proportion to their over-quota weight" in t for t in shown)
    requested = [b for b in box.bars if b.series == "requested"]
    assert all(b.width == BAR_WIDTH for b in requested)  # no demand given: unbounded, drawn hatched full width
    assert "unbounded" in texts(render(chart))


HOSTILE = '<script>alert("x")</script>&amp;]]>\x1b[31m\u2028\uffff'


def test_names_from_input_are_text_never_markup():
    result = divide_fair_share([QueueSpec(HOSTILE, gpu=GPU_TERMS)], Amounts(gpu=4), None)
    svg = render(fair_share_chart(result, warnings=[HOSTILE]))
    root = ET.fromstring(svg)  # well-formed XML despite every character above
    assert not [el for el in root.iter() if "script" in el.tag]
    assert "<script>" not in svg and "\x1b" not in svg and "\u2028" not in svg and "\uffff" not in svg
    assert clean(HOSTILE) == '<script>alert("x")</script>&amp;]]>\\x1b[31m\\u2028\\uffff'
    assert any(clean(HOSTILE) in t for t in texts(svg))  # the name is shown, escaped as the CLI prints it


def test_a_long_label_is_cut_with_the_whole_name_in_its_tooltip():
    name = "a-queue-" + "x" * 80
    svg = render(Chart("t", (Series("s", "s", "#000000"),), (Column("c"),), (Row(name, ((Bar("s", 1, "1"),),)),)))
    shown = texts(svg)
    assert name in shown and any(t.endswith("\u2026") and name.startswith(t[:-1]) for t in shown)


def test_kai_explain_highlights_the_pods_queue_path():
    queues = [
        {"metadata": {"name": "research"}, "spec": {"resources": {"gpu": {"quota": 12, "limit": -1, "overQuotaWeight": 1}}}},
        {"metadata": {"name": "team-a"}, "spec": {"parentQueue": "research", "resources": {"gpu": {"quota": 4, "limit": -1, "overQuotaWeight": 1}}}},
        {"metadata": {"name": "team-b"}, "spec": {"parentQueue": "research", "resources": {"gpu": {"quota": 8, "limit": -1, "overQuotaWeight": 1}}}},
    ]  # fmt: skip
    specs = [QueueSpec("research", gpu=ResourceTerms(12, -1, 1)), QueueSpec("team-a", "research", gpu=ResourceTerms(4, -1, 1)),
             QueueSpec("team-b", "research", gpu=ResourceTerms(8, -1, 1))]  # fmt: skip
    result = divide_fair_share(specs, Amounts(gpu=12), {"team-a": Amounts(gpu=12), "team-b": Amounts(gpu=8)})
    pod_group = {"metadata": {"name": "pg"}, "spec": {"queue": "team-a"}, "status": {"phase": "Pending"}}
    explanation = explain_kai("ml", None, read_pod_group(pod_group), [read_kai_queue(q) for q in queues], result,
                              {"team-a": Amounts(gpu=6), "team-b": Amounts(gpu=2)})
    chart = kai_explain_chart(explanation, "PodGroup ml/pg")
    assert [(r.label, r.depth, r.highlight) for r in chart.rows] == [("research", 0, True), ("team-a", 1, True), ("team-b", 1, False)]
    allocated = {chart.rows[b.row].label: b.width for b in layout(chart).bars if b.series == "allocated"}
    assert allocated == {"research": 8 / 12 * BAR_WIDTH, "team-a": 6 / 12 * BAR_WIDTH, "team-b": 2 / 12 * BAR_WIDTH}
    # under the picture: the state and each queue's verdict, not the quota terms the bars already show
    assert chart.notes == tuple(line.strip() for line in explanation.standing() + explanation.verdicts(terms_shown=False))
    assert "queue team-a is over its fair share of 4 GPUs: 6 allocated" in chart.notes
    assert not [n for n in chart.notes if "over-quota weight" in n] and [n for n in explanation.lines() if "over-quota weight" in n]


def kueue_explanation() -> KueueExplanation:
    def row(flavor, nominal, used, potential, verdict):
        return FlavorRequest("workers", 2, flavor, "nvidia.com/gpu", Decimal(5), Decimal(10), Decimal(nominal), Decimal(used),
                             None, None, Decimal(potential), Decimal(2), False, verdict)  # fmt: skip

    return KueueExplanation(
        kind="RayJob", name="train", namespace="ml", deployment="Suspended", job_status=None, job_id=None, reason="",
        dashboard=None, local_queue="team-a", cluster_queue="team-a", cohort="gpu", workload="wl", state="pending",
        requests=(row("a100", 4, 0, 4, "never-fits"), row("h100", 8, 6, 10, "needs-borrowing")), cohort_parents=("all",),
    )  # fmt: skip


def test_kueue_explain_shows_the_cohort_path_and_each_flavors_arithmetic():
    chart = kueue_explain_chart(kueue_explanation())
    assert [(r.label, r.depth, r.highlight) for r in chart.rows] == [
        ("cohort all", 0, True), ("cohort gpu", 1, True), ("ClusterQueue team-a", 2, True),
        ("flavor a100, pod set workers", 3, True), ("flavor h100, pod set workers", 3, True),
    ]  # fmt: skip
    assert "can never fit here" in chart.rows[3].note and "borrows from the cohort" in chart.rows[4].note
    bars = {(chart.rows[b.row].label.split(",")[0], b.series): b for b in layout(chart).bars}
    # what the job asks (10) is stacked on what is in use (6), against the nominal quota (8): the scale is the stack's 16
    in_use, asks, nominal = bars[("flavor h100", "in-use")], bars[("flavor h100", "asks")], bars[("flavor h100", "nominal")]
    assert (in_use.width, asks.width, nominal.width) == (6 / 16 * BAR_WIDTH, 10 / 16 * BAR_WIDTH, 8 / 16 * BAR_WIDTH)
    assert asks.x == in_use.x + in_use.width and asks.y == in_use.y != nominal.y
    shown = texts(render(chart))
    assert "6 + 10 = 16" in shown
    # the per-flavor sentences are the bars: under the picture only the state and the verdict
    assert not [t for t in shown if "asks for, per pod set" in t or "of 8 quota" in t]
    assert chart.notes[:2] == ("deployment: Suspended; Ray job: not started", "Kueue workload wl: pending")


@pytest.mark.parametrize("which", ["fair share", "kueue explain", "hostile names"])
def test_the_png_shows_every_bar_where_the_layout_puts_it(which):
    if which == "fair share":
        chart = fair_share_chart(divide_fair_share(pool_a(), Amounts(gpu=40), {"project-1": Amounts(gpu=30), "project-3": Amounts(gpu=2)}))
    elif which == "kueue explain":
        chart = kueue_explain_chart(kueue_explanation())
    else:
        chart = fair_share_chart(divide_fair_share([QueueSpec(HOSTILE, gpu=GPU_TERMS)], Amounts(gpu=4), None))
    png = rasterise(render(chart))
    width, height, _ = decode_png(png)
    assert len(png) > 1000 and (width, height) == (layout(chart).width, layout(chart).height)
    assert check_bars(chart, png) >= 3
