"""Checking the SVG pictures as a person sees them: rasterised to PNG, pixels read back where the bars are.

`rasterise` draws an SVG with resvg (the `resvg-py` wheel, no system
libraries); `decode_png` reads the 8-bit RGBA PNG it writes with the standard
library alone; `check_bars` asserts that every bar the layout placed is drawn
there, in its colour, and ends where the layout says. With
RAYBRIDGE_PICTURES_DIR set, `keep` writes each picture there as SVG and PNG,
for a person to look at.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Sequence

from raybridge.core.svg import BACKGROUND, HIGHLIGHT, Chart, layout

Pixel = tuple[int, int, int, int]


def rasterise(svg: str) -> bytes:
    import resvg_py

    return bytes(resvg_py.svg_to_bytes(svg_string=svg))


def keep(name: str, svg: str) -> None:
    """Write the picture to $RAYBRIDGE_PICTURES_DIR (SVG and PNG), when it is set."""
    folder = os.environ.get("RAYBRIDGE_PICTURES_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.svg").write_text(svg)
        (Path(folder) / f"{name}.png").write_bytes(rasterise(svg))


def decode_png(data: bytes) -> tuple[int, int, list[list[Pixel]]]:
    """(width, height, rows of RGBA pixels) of an 8-bit RGBA or RGB, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[list[Pixel]] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append([
            tuple(line[x * channels : x * channels + channels]) + ((255,) if channels == 3 else ())  # type: ignore[misc]
            for x in range(width)
        ])  # fmt: skip
        previous = line
    return width, height, rows


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def near(pixel: Sequence[int], colour: str, tolerance: int = 24) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel[:3], rgb(colour)))


def check_bars(chart: Chart, png: bytes) -> int:
    """Assert the PNG is the layout's size and every bar is drawn where the layout put it; returns the bars checked."""
    box = layout(chart)
    width, height, pixels = decode_png(png)
    assert (width, height) == (box.width, box.height)
    colours = {s.key: s.colour for s in chart.series}
    checked = 0
    for bar in box.bars:
        if bar.width < 4:
            continue
        solid = not chart.rows[bar.row].cells[bar.column][_index(chart, bar)].unbounded
        middle = pixels[int(bar.y + bar.height / 2)][int(bar.x + bar.width / 2)]
        assert not near(middle, BACKGROUND, 8) and not near(middle, HIGHLIGHT, 8), (bar, middle)
        if solid:
            assert near(middle, colours[bar.series]), (bar, middle, colours[bar.series])
            # the bar ends where the layout says: the pixel just past its end is background, not bar
            after = pixels[int(bar.y + bar.height / 2)][int(bar.x + bar.width + 2.5)]
            assert not near(after, colours[bar.series], 8), (bar, after)
        checked += 1
    return checked


def _index(chart: Chart, bar: object) -> int:
    """The bar's position in its cell (bars of one cell are laid out in order)."""
    box = layout(chart)
    same = [b for b in box.bars if (b.row, b.column) == (bar.row, bar.column)]  # type: ignore[attr-defined]
    return same.index(bar)  # type: ignore[arg-type]
