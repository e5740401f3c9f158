"""Adapters to the Kubernetes API, through the official `kubernetes` client.

Nothing here decides anything: these modules read and write objects and map
the client's errors onto raybridge's exit statuses. Importing this package
does not import the kubernetes client; each module does, where it is used.
"""
