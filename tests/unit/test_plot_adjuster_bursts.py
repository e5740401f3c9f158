"""benchmarks/plot_adjuster_bursts.py: the burst benchmark's runs to a picture, and the committed picture up to date."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import ROOT
from tests.pictures import check_bars, keep, rasterise

SCRIPT = ROOT / "benchmarks" / "plot_adjuster_bursts.py"
SVG = "{http://www.w3.org/2000/svg}"
sys.path.insert(0, str(ROOT / "benchmarks"))
import plot_adjuster_bursts as plot  # noqa: E402


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


RUNS = [  # two runs of one scenario, as run_one returns them; KAI gave up once
    {"scenario": "40 pods x 0.5 GPU", "policy": "raybridge", "seconds": 120, "asked": 20, "nodes": 3},
    {"scenario": "40 pods x 0.5 GPU", "policy": "kai", "seconds": 118, "asked": 20, "nodes": 3},
    {"scenario": "40 pods x 0.5 GPU", "policy": "raybridge", "seconds": 140, "asked": 20, "nodes": 3},
    {"scenario": "40 pods x 0.5 GPU", "policy": "kai", "seconds": None, "asked": 24, "nodes": 4},
]
MARKDOWN = """| scenario | policy | burst -> all running (s) | GPUs asked | nodes added |
|---|---|---|---|---|
| 30 pods x 0.6 GPU | raybridge | 115 | 30 | 4 |
| 30 pods x 0.6 GPU | kai | > 1800 | 22 | 5 |
"""


def test_runs_become_ranges_and_gpus_added_are_nodes_times_node_gpus(tmp_path):
    results = tmp_path / "runs.json"
    results.write_text(json.dumps(RUNS))
    out = run(str(results))
    assert out.returncode == 0, out.stderr
    shown = [el.text for el in ET.fromstring(out.stdout).iter(f"{SVG}text")]
    assert "120 to 140 s" in shown and "never in 1 of 2" in shown and "24 to 32" in shown
    chart = plot.chart(RUNS, 8, "t", "s")
    assert out.stdout.count("<svg") == 1 and check_bars(chart, rasterise(plot.render(chart))) >= 4


def test_the_picture_says_which_way_is_better_and_what_each_column_counts():
    chart = plot.chart(RUNS, 8, "t", "s")
    assert chart.notes_title == "Reading it: shorter bars are better in every column"
    columns = [c.title for c in chart.columns]
    # one note per column, opening with its name, each saying lower is better
    assert [n.split(":")[0] for n in chart.notes] == ["burst -> all pods running", "GPUs added", "GPUs asked for"] == [
        t.split(" (")[0] for t in columns]
    assert all("lower is better" in n for n in chart.notes)
    assert "every placeholder (raybridge) or scaling pod (KAI) created during the run" in chart.notes[2]


def test_the_benchmarks_printed_table_is_read_too(tmp_path):
    results = tmp_path / "runs.md"
    results.write_text(MARKDOWN + MARKDOWN)
    out = run(str(results))
    assert out.returncode == 0, out.stderr
    shown = [el.text for el in ET.fromstring(out.stdout).iter(f"{SVG}text")]
    assert "115 s" in shown and "never" in shown and "40" in shown  # 5 nodes x 8 GPUs


@pytest.mark.parametrize("text,fragment", [
    ("{not json", "not JSON"),
    ('[{"scenario": "a", "policy": "yunikorn", "seconds": 1, "asked": 1, "nodes": 1}]', "policy must be raybridge or kai"),
    ('[{"scenario": "a", "policy": "kai", "seconds": "soon", "asked": 1, "nodes": 1}]', "not a number: 'soon'"),
    ('[{"scenario": "a", "policy": "kai", "seconds": -1, "asked": 1, "nodes": 1}]', "finite number >= 0"),
    ("nothing here", "no result rows"),
])  # fmt: skip
def test_bad_results_exit_2_with_one_line(tmp_path, text, fragment):
    results = tmp_path / "runs"
    results.write_text(text)
    out = run(str(results))
    assert out.returncode == 2 and fragment in out.stderr and out.stdout == "", out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_the_committed_picture_is_drawn_from_the_committed_results():
    out = run(str(ROOT / "docs" / "adjuster-bursts.json"))
    assert out.returncode == 0, out.stderr
    assert (ROOT / "docs" / "adjuster-bursts.svg").read_text() == out.stdout, (
        "regenerate: python benchmarks/plot_adjuster_bursts.py docs/adjuster-bursts.json > docs/adjuster-bursts.svg"
    )
    keep("adjuster-bursts", out.stdout)
