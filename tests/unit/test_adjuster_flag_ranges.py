"""A flag's range is checked in one place, the settings (adjuster/decision/settings.py): the CLI's flag types only
read the text as a number. So `adjuster plan`, `adjuster run` and the RAYBRIDGE_ADJUSTER_* variables refuse a
value with the same sentence, and a value the type reads is never refused twice in two wordings."""

from __future__ import annotations

import pytest

from raybridge.adjuster.decision.settings import AdjusterSettings, RunSettings
from raybridge.cli.adjuster import run_settings_from_args, settings_from_args
from raybridge.cli.main import build_parser
from raybridge.errors import BadInput

PLAN = ["adjuster", "plan", "--pods", "pods.json"]
RUN = ["adjuster", "run"]

# (case, command line, the settings' sentence)
ROWS = [
    ("negative grace period", [*PLAN, "--grace-period", "-1"], "--grace-period must be a finite number of seconds >= 0 (got -1.0)"),
    ("infinite grace period", [*PLAN, "--grace-period", "inf"], "--grace-period must be a finite number of seconds >= 0 (got inf)"),
    ("a negative cap", [*PLAN, "--max-gpus", "-3"], "--max-gpus (the GPU cap) must be a whole number >= 0 (got -3)"),
    ("no GPUs per node", [*PLAN, "--node-gpus", "0"], "--node-gpus (GPUs per node) must be a whole number >= 1 (got 0)"),
    ("a memory fraction above 1", [*PLAN, "--memory-fraction", "1.5"],
     "--memory-fraction (the memory fallback fraction) must be above 0 and at most 1 (got 1.5)"),
    ("a negative provision timeout", [*RUN, "--provision-timeout", "-5"], "--provision-timeout must be a finite number of seconds >= 0.0 (got -5.0)"),
    ("a resync of zero", [*RUN, "--resync", "0"], "--resync must be a finite number of seconds >= 0.01 (got 0.0)"),
    ("a retry period of zero", [*RUN, "--retry-period", "0"], "--retry-period must be a whole number of seconds, at least 1 (got 0)"),
    ("a negative batch idle time", [*RUN, "--batch-idle-duration", "-1"], "--batch-idle-duration must be a finite number of seconds >= 0.0 (got -1.0)"),
    ("an endless batch window", [*RUN, "--batch-max-duration", "inf"], "--batch-max-duration must be a finite number of seconds >= 0.0 (got inf)"),
]


@pytest.mark.parametrize("case,argv,sentence", ROWS, ids=[r[0] for r in ROWS])
def test_the_flag_type_reads_the_number_and_the_settings_refuse_its_range(case, argv, sentence):
    args = build_parser(argv).parse_args(argv)  # the type takes it: no SystemExit here
    read = run_settings_from_args if argv[:2] == RUN else settings_from_args
    with pytest.raises(BadInput) as refused:
        read(args)
    assert sentence in refused.value.args


@pytest.mark.parametrize("argv", [[*PLAN, "--grace-period", "soon"], [*PLAN, "--max-gpus", "2.5"], [*RUN, "--retry-period", "x"]])
def test_text_that_is_no_number_is_refused_by_the_type(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser(argv).parse_args(argv)
    assert exited.value.code == 2 and "not a" in capsys.readouterr().err


def test_the_settings_hold_every_range_for_values_that_come_from_elsewhere():
    """Values built in code (or read from the environment) meet the same checks as flags."""
    assert AdjusterSettings(grace_period_seconds=-1, node_gpus=0).problems() == [
        "--grace-period must be a finite number of seconds >= 0 (got -1)",
        "--node-gpus (GPUs per node) must be a whole number >= 1 (got 0)",
    ]
    assert RunSettings(lease_duration=0, leader_election=False).problems() == [
        "--lease-duration must be a whole number of seconds, at least 1 (got 0)"]
