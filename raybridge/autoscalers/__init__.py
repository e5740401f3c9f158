"""What raybridge knows of the node autoscalers, pure: cluster-autoscaler's ProvisioningRequest API and the one
reading of a request's state (`provisioning_request`).

A new autoscaler release that changes these names or rules changes them here. `raybridge.kube.provisioning`
reads and writes the objects; `kueue/` and the adjuster's decision read their state through this package.
Nothing here does I/O.
"""
