"""Go's strconv.ParseFloat and ParseInt as KAI reads its annotations (core/go_number.py), and the three
readers of gpu-fraction (the planner, the KAI baseline, the fair-share view) agreeing on every row.

Rows follow Go's src/strconv/atof.go (readFloat, special) and atoi.go (underscoreOK, ParseInt), and are
checked against Go itself where Go is installed (test_the_rows_are_what_go_s_strconv_returns); what
KAI v0.13.0 does after parsing is each caller's range: the planner takes 0 < f < 1 (the binder's
gpu_request_validator.go), the fair-share view any positive finite value, the baseline anything.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

import pytest

from raybridge.kai import node_scale_adjuster as kai_policy
from raybridge.kai.share import scheduler_request
from raybridge.kai.share import parse_fraction
from raybridge.core.go_number import go_float_exact, go_parse_float, go_parse_int
from raybridge.kai.names import KAI_GPU_DEVICES_ANNOTATION, KAI_GPU_FRACTION_ANNOTATION, KAI_GPU_MEMORY_ANNOTATION

NAN = "nan"

# (text, what Go's ParseFloat(text, 64) returns: a float, NAN, or None for an error)
FLOAT_ROWS = [
    ("0.5", 0.5),
    ("+.5", 0.5),
    ("-0.5", -0.5),
    ("5.", 5.0),
    ("5e-1", 0.5),
    ("5E-1", 0.5),
    ("0x1p-1", 0.5),  # hex float: Go takes it
    ("0X1P-1", 0.5),
    ("0x.8p0", 0.5),
    ("0x_1p-1", 0.5),  # '_' after the base prefix
    ("0x1", None),  # a hex float needs its p exponent
    ("0x", None),
    ("1_0.5", 10.5),  # '_' between digits, in base 10 too
    ("0.2_5", 0.25),
    ("1e1_0", 1e10),
    ("_1", None),
    ("1_", None),
    ("1__0", None),
    ("1_.5", None),
    ("1._5", None),
    ("1_e5", None),
    ("0.5\n", None),  # Python's float() strips it; Go does not
    (" 0.5", None),
    ("0.5 ", None),
    ("\u0660.\u0665", None),  # Arabic-Indic 0.5
    ("\uff10.\uff15", None),  # full-width 0.5
    ("0,5", None),
    ("", None),
    (".", None),
    ("e5", None),
    ("Inf", math.inf),
    ("+inf", math.inf),
    ("-Infinity", -math.inf),
    ("INFINITY", math.inf),
    ("infin", None),
    ("NaN", NAN),
    ("nan", NAN),
    ("+NaN", None),  # Go takes no sign on NaN
    ("-nan", None),
    ("1e400", None),  # beyond float64: Go's range error
    ("0x1p2000", None),
    ("1e-400", 0.0),  # below float64's smallest: zero, no error
    ("4" * 5000, None),  # longer than any annotation we read
]


def same_as_go(got: Optional[float], value: object) -> bool:
    """Whether `got` is the row's value: NaN for NAN, None for Go's error, else equal."""
    if value == NAN:
        return got is not None and math.isnan(got)
    return got == value


def annotated_pod(key: str, text: str) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": {key: text}}}


@pytest.mark.parametrize("text,value", FLOAT_ROWS, ids=[repr(t[:20]) for t, _ in FLOAT_ROWS])
def test_go_parse_float(text: str, value: object) -> None:
    got = go_parse_float(text)
    if value == NAN:
        assert got is not None and math.isnan(got)
    else:
        assert got == value


@pytest.mark.parametrize("text,value", FLOAT_ROWS, ids=[repr(t[:20]) for t, _ in FLOAT_ROWS])
def test_the_three_readers_of_gpu_fraction_agree_with_go(text: str, value: object) -> None:
    go = None if value in (None, NAN) else value
    # the KAI baseline (getGPUFraction on the pod's annotation): whatever Go returns, NaN and infinities included
    baseline = kai_policy.gpu_fraction(annotated_pod(KAI_GPU_FRACTION_ANNOTATION, text), memory_ratio=0.25)
    assert same_as_go(baseline, value), baseline
    # the fair-share view (KAI's scheduler, pod_info.go): 0 < f <= 1, else no fraction request
    request = scheduler_request({KAI_GPU_FRACTION_ANNOTATION: text})
    share: Optional[float] = request.fraction if request is not None else None
    assert share == (go if isinstance(go, float) and math.isfinite(go) and 0 < go <= 1 else None)
    # the planner: the exact value, 0 < f < 1
    fraction, why = parse_fraction(text)
    exact = go_float_exact(text)
    expected = exact if exact is not None and 0 < exact < 1 and len(text) <= 64 else None
    assert fraction == expected, why
    if fraction is not None:
        assert float(fraction) == go


def test_the_planner_keeps_the_decimal_exact() -> None:
    assert go_float_exact("0.33") == Fraction(33, 100) != Fraction(0.33)
    assert go_float_exact("0x1p-1") == Fraction(1, 2)


# (text, what Go's ParseInt(text, 10, 64) returns, None for an error)
INT_ROWS = [
    ("1024", 1024),
    ("+7", 7),
    ("-3", -3),
    ("08", 8),
    ("1_0", None),  # '_' only with base 0
    ("1.0", None),
    ("1e3", None),
    ("0x10", None),
    ("2\n", None),
    (" 2", None),
    ("\u0662", None),  # Arabic-Indic 2
    ("\uff12", None),  # full-width 2
    ("9223372036854775807", 2**63 - 1),
    ("9223372036854775808", None),
    ("-9223372036854775808", -(2**63)),
    ("", None),
]


@pytest.mark.parametrize("text,value", INT_ROWS, ids=[repr(t) for t, _ in INT_ROWS])
def test_go_parse_int(text: str, value: Optional[int]) -> None:
    assert go_parse_int(text) == value
    assert kai_policy.go_parse_int(text) == value
    # the KAI baseline's readers of the two whole-number annotations: the devices as parsed, and the fixed memory
    # ratio for any gpu-memory Go parses (an empty annotation is no sharing request: none either way)
    assert kai_policy.num_devices(annotated_pod(KAI_GPU_DEVICES_ANNOTATION, text)) == value
    assert kai_policy.gpu_fraction(annotated_pod(KAI_GPU_MEMORY_ANNOTATION, text), memory_ratio=0.25) == (None if value is None else 0.25)


#: Prints what Go's strconv returns for each text it is given (JSON in, JSON out): null for an error, else the
#: value, a float as strconv.FormatFloat(f, 'g', -1, 64) writes it (the shortest text that reads back the same).
GO_STRCONV = """package main

import (
	"encoding/json"
	"os"
	"strconv"
)

func main() {
	var rows struct{ Floats, Ints []string }
	if err := json.NewDecoder(os.Stdin).Decode(&rows); err != nil {
		panic(err)
	}
	out := map[string][]*string{"floats": {}, "ints": {}}
	for _, s := range rows.Floats {
		var got *string
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			text := strconv.FormatFloat(f, 'g', -1, 64)
			got = &text
		}
		out["floats"] = append(out["floats"], got)
	}
	for _, s := range rows.Ints {
		var got *string
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			text := strconv.FormatInt(i, 10)
			got = &text
		}
		out["ints"] = append(out["ints"], got)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		panic(err)
	}
}
"""


@pytest.mark.needs_go
@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed: the rows are checked against Go's strconv where it is")
def test_the_rows_are_what_go_s_strconv_returns(tmp_path: Path) -> None:
    """The tables above are Go's answers, not this module's: every row's text through Go's own ParseFloat(s, 64)
    and ParseInt(s, 10, 64) (the standard library only; nothing is downloaded)."""
    (tmp_path / "main.go").write_text(GO_STRCONV)
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GO111MODULE": "on"}
    rows = json.dumps({"floats": [text for text, _ in FLOAT_ROWS], "ints": [text for text, _ in INT_ROWS]})
    done = subprocess.run(["go", "run", "main.go"], input=rows, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    floats = [None if got is None else float(got) for got in answers["floats"]]
    wrong = [(text[:20], value, got) for (text, value), got in zip(FLOAT_ROWS, floats, strict=True) if not same_as_go(got, value)]
    assert wrong == [], "rows of FLOAT_ROWS that are not what ParseFloat returns: (text, row, Go)"
    ints = [None if got is None else int(got) for got in answers["ints"]]
    wrong = [(text, value, got) for (text, value), got in zip(INT_ROWS, ints, strict=True) if got != value]
    assert wrong == [], "rows of INT_ROWS that are not what ParseInt returns: (text, row, Go)"
