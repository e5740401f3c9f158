"""Where raybridge's tests import `RealApi` from: kubesim's simulations as clients of the real API server.

Why this module exists: the adapter lives with the simulations it serves (kubesim/real_api.py), where kubesim's own
tests can reach it too; raybridge's tests keep importing it by this name.
What it deliberately does not do: define anything. It only re-exports.
"""

from kubesim.real_api import RealApi

__all__ = ["RealApi"]
