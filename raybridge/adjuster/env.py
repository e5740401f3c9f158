"""The `RAYBRIDGE_ADJUSTER_*` environment variables every `adjuster run` flag falls back to.

Why it exists: the Deployment configures the controller through its environment as well as its
flags; the variable's name is derived from the flag here, once. It reads the environment and
nothing else; what a value must be is checked in `adjuster/decision/settings.py`.
"""

from __future__ import annotations

import os
from typing import Optional

from raybridge.adjuster.decision import consts


def env_name(flag: str) -> str:
    """`--grace-period` -> `RAYBRIDGE_ADJUSTER_GRACE_PERIOD`."""
    return consts.ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def env_default(flag: str, default: Optional[str] = None) -> Optional[str]:
    value = os.environ.get(env_name(flag))
    return value if value not in (None, "") else default
