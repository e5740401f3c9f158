"""What raybridge knows of Kueue, pure: its Workloads (`workload`), its quota arithmetic (`fit`), its API versions (`api`).

What a new Kueue release changes is here (with its CRDs and the test cluster). Domains use
it; `raybridge.kube.kueue` reads the objects. Nothing here does I/O.
"""
