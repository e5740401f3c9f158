"""What raybridge knows of KAI-Scheduler, pure: GPU-sharing annotations (`share`), Queues and their
capacity and demand (`queue`), the fair-share division (`fairshare`), PodGroups (`pod_group`) and KAI's
own node-scale-adjuster rule (`node_scale_adjuster`).

What a new KAI release changes is here (with its CRDs and the test cluster). Domains use it;
`raybridge.kube.kai` reads the objects. Nothing here does I/O.
"""
