"""Horizontal bar charts as SVG text: rows of named things, a few bars per row and column.

Why this exists: fair shares, quotas and benchmark results are comparisons of
a few numbers per row, which people read faster as bars than as a table. One
small renderer draws them all (`queues fairshare -o svg`, `explain -o svg`,
the benchmark plot in docs/), so they look alike: a title, a legend, one
column per measure (a resource, a benchmark figure) with its own scale, and
one row per thing (a queue, a trace), indented by depth, optionally
highlighted, with notes under the chart.

Pure: a `Chart` in, a string out; `layout()` gives every bar's box, so a test
can check the pixels where the bars should be. The tree is built with
`xml.etree.ElementTree`, which escapes `<`, `&` and quotes in text and
attributes; before that every text from input goes through
`core.printable.one_line` (line breaks, control and format characters as
escapes) and loses the few characters XML 1.0 cannot hold at all, so a name
can neither add markup nor make the document unreadable.

It does not read or write files, fit arbitrary data (values are laid out on a
linear scale from 0 per column; negative values are drawn as 0), or wrap
labels (they are cut, with the whole text in a tooltip).
"""

from __future__ import annotations

import math
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Optional, Sequence

from raybridge.core.printable import one_line

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
FONT = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif"

# Geometry, in SVG user units (pixels at 100%).
MARGIN = 16
LABEL_WIDTH = 280
COLUMN_WIDTH = 290
BAR_WIDTH = 180
BAR_HEIGHT = 10
BAR_GAP = 3
ROW_PADDING = 7
MIN_ROW_HEIGHT = 38
HEADER_TOP = 96
NOTE_LINE = 16
#: Charts are at least this wide, so the notes under a one-column chart stay readable.
MIN_WIDTH = 900
#: Average advance of a character at 12 px (DejaVu Sans is about 0.55 em): used to wrap notes and cut labels.
CHAR_WIDTH_12 = 6.9
INDENT = 14

BACKGROUND = "#ffffff"
HIGHLIGHT = "#fff2c2"
ACCENT = "#c2410c"
TEXT = "#1f2937"
MUTED = "#6b7280"
RULE = "#e5e7eb"


@dataclass(frozen=True)
class Series:
    """One kind of bar, named in the legend: its colour, and whether unbounded values are possible."""

    key: str
    label: str
    colour: str


@dataclass(frozen=True)
class Bar:
    """One value: `value` sets the length on its column's scale; `text` is printed beside it.

    `value=None` draws no bar (unknown); `unbounded=True` draws the whole width, hatched."""

    series: str
    value: Optional[float]
    text: str
    unbounded: bool = False
    #: Drawn on the line of the bar before it in the cell, from where that one ends (in use, then what is asked);
    #: a bar followed by a stacked one prints no text, the last of the stack prints its own after the stack's end.
    stacked: bool = False


@dataclass(frozen=True)
class Column:
    """One measure: its title, and the value drawn at full bar width (0 or less: taken from the bars)."""

    title: str
    scale: float = 0.0


@dataclass(frozen=True)
class Row:
    label: str
    cells: tuple[tuple[Bar, ...], ...]
    depth: int = 0
    highlight: bool = False
    #: A second, smaller line under the label (a priority, a verdict).
    note: str = ""


@dataclass(frozen=True)
class Chart:
    title: str
    series: tuple[Series, ...]
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    subtitle: str = ""
    #: Lines under the chart, wrapped to its width; `notes_title` above them in bold.
    notes: tuple[str, ...] = ()
    notes_title: str = ""


@dataclass(frozen=True)
class BarBox:
    """Where one bar is drawn (a zero-length bar has width 0)."""

    row: int
    column: int
    series: str
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class RowBox:
    y: float
    height: float


@dataclass(frozen=True)
class Layout:
    width: int
    height: int
    rows: tuple[RowBox, ...]
    bars: tuple[BarBox, ...]
    scales: tuple[float, ...]
    notes: tuple[str, ...] = field(default=())
    notes_top: float = 0.0


def column_x(index: int) -> float:
    return MARGIN + LABEL_WIDTH + index * COLUMN_WIDTH


def column_scale(chart: Chart, index: int) -> float:
    """The value at full bar width: the column's own, else the largest finite value drawn in it (1 if none)."""
    column = chart.columns[index]
    if column.scale > 0 and math.isfinite(column.scale):
        return column.scale
    values = [total for row in chart.rows if index < len(row.cells) for total in _line_totals(row.cells[index])]
    largest = max(values, default=0.0)
    return largest if largest > 0 else 1.0


def _line_totals(cell: Sequence[Bar]) -> list[float]:
    """The finite value each line of a cell reaches: a bar's own, a stack's sum."""
    totals: list[float] = []
    for bar in cell:
        value = bar.value if bar.value is not None and not bar.unbounded and math.isfinite(bar.value) else 0.0
        if bar.stacked and totals:
            totals[-1] += max(value, 0.0)
        else:
            totals.append(value)
    return totals


def _row_height(row: Row) -> float:
    bars = max((sum(1 for i, bar in enumerate(cell) if not (bar.stacked and i)) for cell in row.cells), default=0)
    return max(MIN_ROW_HEIGHT, 2 * ROW_PADDING + bars * BAR_HEIGHT + max(0, bars - 1) * BAR_GAP)


def bar_length(bar: Bar, scale: float) -> float:
    if bar.unbounded:
        return float(BAR_WIDTH)
    if bar.value is None or not math.isfinite(bar.value) or bar.value <= 0:
        return 0.0
    length = min(1.0, bar.value / scale) * BAR_WIDTH
    return max(length, 1.5)  # a small value stays visible


def width_of(chart: Chart) -> int:
    return int(max(MIN_WIDTH, 2 * MARGIN + LABEL_WIDTH + len(chart.columns) * COLUMN_WIDTH))


def layout(chart: Chart) -> Layout:
    """Every row's and bar's position: what `render` draws, and what a test checks the pixels of."""
    scales = tuple(column_scale(chart, i) for i in range(len(chart.columns)))
    width = width_of(chart)
    y = float(HEADER_TOP + 12)
    rows: list[RowBox] = []
    bars: list[BarBox] = []
    for r, row in enumerate(chart.rows):
        height = _row_height(row)
        rows.append(RowBox(y, height))
        for c, cell in enumerate(row.cells[: len(chart.columns)]):
            top = y + ROW_PADDING
            for i, bar in enumerate(cell):
                if bar.stacked and i:
                    before = bars[-1]
                    x = before.x + before.width
                    room = column_x(c) + BAR_WIDTH - x
                    length = 0.0 if bar.value is None or bar.value <= 0 else min(bar_length(bar, scales[c]), room)
                    bars.append(BarBox(r, c, bar.series, x, before.y, max(length, 0.0), BAR_HEIGHT))
                    continue
                bars.append(BarBox(r, c, bar.series, column_x(c), top, bar_length(bar, scales[c]), BAR_HEIGHT))
                top += BAR_HEIGHT + BAR_GAP
        y += height
    notes: list[str] = []
    per_line = max(20, int((width - 2 * MARGIN) / CHAR_WIDTH_12))
    for note in chart.notes:
        text = clean(note)
        indent = " " * (len(text) - len(text.lstrip(" ")) + 4)
        notes.extend(textwrap.wrap(text, per_line, subsequent_indent=indent) or [""])
    notes_top = y + 20
    if notes or chart.notes_title:
        y = notes_top + (NOTE_LINE if chart.notes_title else 0) + len(notes) * NOTE_LINE
    return Layout(width, int(math.ceil(y + MARGIN)), tuple(rows), tuple(bars), scales, tuple(notes), notes_top)


def clean(text: str) -> str:
    """Text from input made safe for an SVG text node: one line, and only characters XML 1.0 allows."""
    shown = one_line(str(text))
    # one_line escapes controls and surrogates; XML also forbids the two noncharacters U+FFFE and U+FFFF
    return shown.replace("\ufffe", "\\ufffe").replace("\uffff", "\\uffff")


def cut(text: str, room: float, char_width: float = CHAR_WIDTH_12) -> str:
    """`text` cut to about `room` pixels, ending in an ellipsis when cut."""
    fits = max(4, int(room / char_width))
    return text if len(text) <= fits else text[: fits - 1] + "\u2026"


def render(chart: Chart) -> str:
    """The chart as a standalone SVG document."""
    box = layout(chart)
    svg = _document(box)
    ET.SubElement(svg, "title").text = clean(chart.title)
    _hatch_patterns(ET.SubElement(svg, "defs"), chart.series)
    ET.SubElement(svg, "rect", {"width": "100%", "height": "100%", "fill": BACKGROUND})
    _header(svg, chart, box)
    series_by_key = {s.key: s for s in chart.series}
    bars = iter(box.bars)
    for row, row_box in zip(chart.rows, box.rows):
        placed = [
            (bar, next(bars), i + 1 == len(cell) or not cell[i + 1].stacked)
            for cell in row.cells[: len(chart.columns)]
            for i, bar in enumerate(cell)
        ]
        _row(svg, row, row_box, box.width, placed, series_by_key)
    _notes(svg, chart, box)
    return ET.tostring(svg, encoding="unicode") + "\n"


def _document(box: Layout) -> ET.Element:
    """The root `svg` element, sized to the layout."""
    return ET.Element(
        "svg",
        {
            "xmlns": SVG_NAMESPACE,
            "width": str(box.width),
            "height": str(box.height),
            "viewBox": f"0 0 {box.width} {box.height}",
            "font-family": FONT,
            "font-size": "12",
            # the notes' indentation is meaning (a sentence under the one it explains): keep spaces as written
            "{http://www.w3.org/XML/1998/namespace}space": "preserve",
        },
    )


def _hatch_patterns(defs: ET.Element, series: Sequence[Series]) -> None:
    """One hatched fill per series, for the bars drawn hatched."""
    for one in series:
        pattern = ET.SubElement(
            defs, "pattern",
            {"id": f"hatch-{_ident(one.key)}", "width": "6", "height": "6", "patternUnits": "userSpaceOnUse",
             "patternTransform": "rotate(45)"},
        )  # fmt: skip
        ET.SubElement(pattern, "rect", {"width": "6", "height": "6", "fill": one.colour, "fill-opacity": "0.35"})
        ET.SubElement(pattern, "rect", {"width": "3", "height": "6", "fill": one.colour})


def _header(svg: ET.Element, chart: Chart, box: Layout) -> None:
    """Title, subtitle, legend, the column titles and the rule under them."""
    _text(svg, MARGIN, 28, chart.title, size=16, bold=True, room=box.width - 2 * MARGIN)
    if chart.subtitle:
        _text(svg, MARGIN, 48, chart.subtitle, size=12, colour=MUTED, room=box.width - 2 * MARGIN)
    _legend(svg, chart.series)
    for c, column in enumerate(chart.columns):
        title = clean(column.title)
        _text(svg, column_x(c), HEADER_TOP, title, bold=True, room=COLUMN_WIDTH - 10)
    ET.SubElement(
        svg, "line",
        {"x1": str(MARGIN), "x2": str(box.width - MARGIN), "y1": str(HEADER_TOP + 6), "y2": str(HEADER_TOP + 6),
         "stroke": RULE},
    )  # fmt: skip


def _row(
    svg: ET.Element,
    row: Row,
    row_box: RowBox,
    width: int,
    placed: Sequence[tuple[Bar, BarBox, bool]],
    series_by_key: dict[str, Series],
) -> None:
    """One row: its highlight, its label (cut, whole in a tooltip), its note, its bars and the rule under it."""
    group = ET.SubElement(svg, "g", {"class": "row"})
    if row.highlight:
        ET.SubElement(
            group, "rect",
            {"x": str(MARGIN - 8), "y": f"{row_box.y + 1:g}", "width": str(width - 2 * MARGIN + 16),
             "height": f"{row_box.height - 2:g}", "fill": HIGHLIGHT},
        )  # fmt: skip
        ET.SubElement(
            group, "rect",
            {"x": str(MARGIN - 8), "y": f"{row_box.y + 1:g}", "width": "4", "height": f"{row_box.height - 2:g}",
             "fill": ACCENT},
        )  # fmt: skip
    indent = MARGIN + INDENT * row.depth
    room = LABEL_WIDTH - 10 - INDENT * row.depth
    label = clean(row.label)
    name = _text(group, indent, row_box.y + 18, cut(label, room), bold=row.highlight)
    if label != cut(label, room):
        ET.SubElement(name, "title").text = label
    if row.note:
        _text(group, indent, row_box.y + 31, cut(clean(row.note), room, 5.7), size=10, colour=MUTED)
    for bar, box, labelled in placed:
        _bar(group, bar, box, series_by_key.get(bar.series), labelled)
    ET.SubElement(
        group, "line",
        {"x1": str(MARGIN), "x2": str(width - MARGIN), "y1": f"{row_box.y + row_box.height:g}",
         "y2": f"{row_box.y + row_box.height:g}", "stroke": RULE},
    )  # fmt: skip


def _notes(svg: ET.Element, chart: Chart, box: Layout) -> None:
    """The notes under the chart, under their title when there is one."""
    if box.notes or chart.notes_title:
        y = box.notes_top
        if chart.notes_title:
            _text(svg, MARGIN, y, chart.notes_title, bold=True)
            y += NOTE_LINE
        for line in box.notes:
            _text(svg, MARGIN, y, line)
            y += NOTE_LINE


def _ident(key: str) -> str:
    return "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in key)


def _text(
    parent: ET.Element, x: float, y: float, text: str, *, size: int = 12, bold: bool = False,
    colour: str = TEXT, room: Optional[float] = None,
) -> ET.Element:  # fmt: skip
    shown = clean(text)
    if room is not None:
        shown = cut(shown, room, CHAR_WIDTH_12 * size / 12 * (1.1 if bold else 1.0))
    attributes = {"x": f"{x:g}", "y": f"{y:g}", "fill": colour}
    if size != 12:
        attributes["font-size"] = str(size)
    if bold:
        attributes["font-weight"] = "bold"
    element = ET.SubElement(parent, "text", attributes)
    element.text = shown
    return element


def _legend(svg: ET.Element, series: Sequence[Series]) -> None:
    x = float(MARGIN)
    for s in series:
        ET.SubElement(svg, "rect", {"x": f"{x:g}", "y": "62", "width": "14", "height": str(BAR_HEIGHT), "fill": s.colour})
        label = clean(s.label)
        _text(svg, x + 20, 71, label)
        x += 20 + len(label) * 6.6 + 24


def _bar(group: ET.Element, bar: Bar, box: BarBox, series: Optional[Series], labelled: bool = True) -> None:
    colour = series.colour if series else MUTED
    if box.width > 0:
        fill = f"url(#hatch-{_ident(bar.series)})" if bar.unbounded else colour
        rect = ET.SubElement(
            group, "rect",
            {"x": f"{box.x:g}", "y": f"{box.y:g}", "width": f"{box.width:.2f}", "height": f"{box.height:g}", "fill": fill,
             "class": f"bar {_ident(bar.series)}"},
        )  # fmt: skip
        ET.SubElement(rect, "title").text = clean(f"{series.label if series else bar.series}: {bar.text}")
    if not labelled:
        return
    end = box.x + max(box.width, 0) - column_x(box.column)
    _text(group, box.x + max(box.width, 0) + 5, box.y + box.height - 1, bar.text, size=10, colour=TEXT if end else MUTED,
          room=COLUMN_WIDTH - 12 - end)  # fmt: skip
