"""What raybridge knows of KubeRay, pure: a RayJob's and RayCluster's state as the operator reports it
(`rayjob`), and which fields bound a RayJob on which operator release (`releases`).

What a new KubeRay release changes is here (with its CRDs and the test cluster). Domains use it;
`raybridge.kube.rayapi` and `raybridge.kube.operators` read the objects. Nothing here does I/O.
"""
