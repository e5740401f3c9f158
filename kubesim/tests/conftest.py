"""kubesim's own tests get the fixtures of kubesim/pytest_plugin.py (the test API server, the release matrix).

Why here and not in the top-level conftest.py: only these tests use them, and the plugin imports the kubernetes
package, which raybridge's pure unit tests run without (tests/unit/test_suite_plugins.py). Imported, they are
this directory's fixtures alone. The plugin's rule that a test asking for absent CRDs skips is the top-level
conftest.py's, for every tree, so its hooks are not imported here (each would run twice).
"""

from kubesim.pytest_plugin import kube_api, kube_server, release, release_server  # noqa: F401 - fixtures, registered by name
