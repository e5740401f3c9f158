"""kubesim: a simulated Kubernetes cluster (API server, Kueue, KubeRay, schedulers, autoscalers) for tests.

Why it exists: raybridge's tests and benchmarks need a cluster that answers as a real one of a
named release does, in-process and without Docker; README.md says what it simulates and how to
use it, FIDELITY.md which upstream source each step follows.
What it deliberately doesn't do: import raybridge (kubesim/tests/test_independence.py checks
that) or ship in raybridge's wheel.
"""
