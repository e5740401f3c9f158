"""kubesim: the programs of the node-scale-adjuster's world that cannot run here, simulated for tests and benchmarks.

Why it exists: cluster-autoscaler (the Go module proxy serves none of it) and KAI's scheduler and binder past v0.12
(not served) cannot be built, so raybridge's adjuster tests run them simulated, as clients of the real kube-apiserver
of testcluster/ (real_api.py); Kueue's pod sets and flavor assignment are here too, as pure functions that judge the
shipped queue configs. README.md says what each module stands for, FIDELITY.md which upstream source each step
follows.
What it deliberately doesn't do: serve an API (the real kube-apiserver does), import raybridge
(kubesim/tests/test_independence.py checks that) or ship in raybridge's wheel.
"""
