"""The adjuster burst benchmark as a picture: time to all pods running and GPUs added, raybridge against KAI's rule.

Reads the results of `benchmarks/adjuster_burst_vs_kai.py` and writes an SVG
bar chart (the same renderer as `queues fairshare -o svg`), one row per
scenario, one bar per policy:

    python benchmarks/plot_adjuster_bursts.py docs/adjuster-bursts.json > docs/adjuster-bursts.svg

The results file is either

* JSON: a list of runs as the benchmark's `run_one` returns them
  (`{"scenario", "policy", "seconds", "asked", "nodes"}`; `seconds` null when
  the run gave up), or an object with that list under "runs" (and optionally
  "node_gpus", "title", "source"); a value may also be a range `[low, high]`
  where a write-up gives one; or
* the Markdown table the benchmark prints, one or more runs concatenated
  (`python benchmarks/adjuster_burst_vs_kai.py >> runs.md`).

Runs of the same scenario and policy are drawn as their range (the bar to the
highest, the range in words). GPUs added are the nodes added times the GPUs of
a node (8, the benchmark's `node_gpus`). Bad input is exit 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raybridge.core.svg import Bar, Chart, Column, Row, Series, render  # noqa: E402

POLICIES = {"raybridge": "raybridge", "kai": "KAI rule", "kai rule": "KAI rule"}
SERIES = (Series("raybridge", "raybridge adjuster", "#2563eb"), Series("KAI rule", "KAI's node-scale-adjuster rule", "#9ca3af"))
MEASURES = ("seconds", "added", "asked")


class BadResults(Exception):
    pass


def load_runs(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise BadResults(f"{path}: {exc.strerror or exc}") from None
    if text.lstrip().startswith(("[", "{")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadResults(f"{path}: not JSON: {exc}") from None
        meta = data if isinstance(data, dict) else {}
        runs = data.get("runs") if isinstance(data, dict) else data
        if not isinstance(runs, list):
            raise BadResults(f"{path}: expected a list of runs (or an object with one under 'runs')")
        return runs, meta
    return markdown_runs(text, path), {}


def markdown_runs(text: str, path: Path) -> list[dict[str, Any]]:
    """Rows of the benchmark's printed table: | scenario | policy | seconds | GPUs asked | nodes added |."""
    runs = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("scenario", "") or set(cells[0]) <= {"-"}:
            continue
        seconds: Any = None if cells[2].startswith(">") else cells[2]
        runs.append({"scenario": cells[0], "policy": cells[1], "seconds": seconds, "asked": cells[3], "nodes": cells[4]})
    if not runs:
        raise BadResults(f"{path}: no result rows (neither JSON nor the benchmark's Markdown table)")
    return runs


def _span(value: Any, where: str) -> Optional[tuple[float, float]]:
    """A value as (low, high); None for a run that gave up."""
    if value is None:
        return None
    values = value if isinstance(value, list) and len(value) == 2 else [value]
    out = []
    for v in values:
        try:
            number = float(v)
        except (TypeError, ValueError):
            raise BadResults(f"{where}: not a number: {v!r}") from None
        if not math.isfinite(number) or number < 0:
            raise BadResults(f"{where}: must be a finite number >= 0 (got {v!r})")
        out.append(number)
    return min(out), max(out)


def chart(runs: list[dict[str, Any]], node_gpus: int, title: str, source: str) -> Chart:
    table: dict[str, dict[str, dict[str, list[Optional[tuple[float, float]]]]]] = {}
    for i, run in enumerate(runs):
        where = f"run {i + 1}"
        if not isinstance(run, dict) or not isinstance(run.get("scenario"), str) or not run["scenario"].strip():
            raise BadResults(f"{where}: needs a 'scenario' name")
        policy = POLICIES.get(str(run.get("policy", "")).strip().lower())
        if policy is None:
            raise BadResults(f"{where}: policy must be raybridge or kai (got {run.get('policy')!r})")
        nodes = _span(run.get("nodes"), f"{where} nodes")
        measures = {
            "seconds": _span(run.get("seconds"), f"{where} seconds"),
            "added": None if nodes is None else (nodes[0] * node_gpus, nodes[1] * node_gpus),
            "asked": _span(run.get("asked"), f"{where} asked"),
        }
        cell = table.setdefault(run["scenario"], {}).setdefault(policy, {m: [] for m in MEASURES})
        for measure, span in measures.items():
            cell[measure].append(span)
    rows = []
    for scenario, policies in table.items():
        cells = []
        for measure in MEASURES:
            bars = []
            for series in SERIES:
                spans = policies.get(series.key, {}).get(measure, [])
                bars.append(_bar(series.key, spans, " s" if measure == "seconds" else ""))
            cells.append(tuple(bars))
        count = max(len(p["seconds"]) for p in policies.values())
        rows.append(Row(scenario, tuple(cells), note=f"{count} run{'s' if count != 1 else ''}" if count > 1 else ""))
    return Chart(
        title=title,
        subtitle=source,
        series=SERIES,
        columns=(Column("burst -> all pods running (s)"), Column(f"GPUs added ({node_gpus}-GPU nodes)"), Column("GPUs asked for")),
        rows=tuple(rows),
        notes=READING,
        notes_title="Reading it: shorter bars are better in every column",
    )


#: What each column measures, under the chart.
READING = (
    "burst -> all pods running: seconds from the burst to the last pod Running; lower is better.",
    "GPUs added: the GPUs of the nodes the autoscaler added; lower is better, down to what the pods need.",
    "GPUs asked for: the GPUs of every placeholder (raybridge) or scaling pod (KAI) created during the run, "
    "each counted once; the autoscaler adds a node for what these ask, so asking for more than the pods need "
    "risks extra nodes; lower is better.",
)


def _bar(series: str, spans: list[Optional[tuple[float, float]]], unit: str) -> Bar:
    if not spans:
        return Bar(series, None, "not measured")
    if any(s is None for s in spans):
        done = [s for s in spans if s is not None]
        return Bar(series, None, "never" if not done else f"never in {len(spans) - len(done)} of {len(spans)}", unbounded=True)
    low, high = min(s[0] for s in spans if s), max(s[1] for s in spans if s)
    words = f"{low:g}{unit}" if low == high else f"{low:g} to {high:g}{unit}"
    return Bar(series, high, words)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="JSON runs, or the benchmark's Markdown output")
    parser.add_argument("--node-gpus", type=int, default=None, help="GPUs per added node (default: the file's node_gpus, else 8)")
    args = parser.parse_args(argv)
    try:
        runs, meta = load_runs(args.results)
        node_gpus = args.node_gpus or int(meta.get("node_gpus") or 8)
        if node_gpus < 1:
            raise BadResults("--node-gpus must be at least 1")
        title = str(meta.get("title") or "A burst of GPU-sharing pods to all running: raybridge's adjuster against KAI's rule")
        source = str(meta.get("source") or f"python benchmarks/adjuster_burst_vs_kai.py; results from {args.results.name}")
        svg = render(chart(runs, node_gpus, title, source))
    except BadResults as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
