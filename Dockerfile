# The in-cluster node-scale-adjuster (`raybridge adjuster run`), deployed by configs/adjuster/.
#
#   docker build -t ghcr.io/raybridge/raybridge-adjuster:0.1.0 .
#
# Slim on purpose: the adjuster needs the Kubernetes client, PyYAML and prometheus-client, not
# Ray (tests/e2e/test_adjuster_run.py runs it with ray, rich and pynvml made unimportable).
# The full CLI (jobs, queues) needs `pip install raybridge` with its dependencies instead.
#
# Placeholder pods do not use this image: they run a busybox `true` that exits at once
# (raybridge/adjuster/decision/consts.py DEFAULT_PLACEHOLDER_IMAGE; --placeholder-image to mirror it).

# Pinned, so a rebuild installs the same bytes (tests/unit/test_dockerfile_pins.py checks all three):
# - the base image by digest: python:3.11-slim's multi-arch index as published in August 2026
#   (Python 3.11.16 on Debian trixie). To move to a newer one, read the tag's current digest with
#   `docker buildx imagetools inspect python:3.11-slim` (the "Digest:" line) and change it here;
#   --build-arg PYTHON_IMAGE=<mirror>/python@sha256:... builds from a mirror with the same digest.
# - the adjuster's dependencies by hash: requirements.lock (from requirements.in), installed with
#   --require-hashes and wheels only, so nothing is built or fetched unpinned;
# - the build tools of the raybridge wheel by hash: requirements-build.lock, and no build isolation
#   (which would fetch setuptools unpinned).
# The build stage also installs gcc from the base image's Debian release (apt checks its signatures; the version is
# the release's): setup.py compiles the exact packing's searches with mypyc, and the runtime stage checks that the
# wheel carries them compiled (the same searches, step for step, three to five times as fast: docs/benchmarks.md).
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# --- build: the raybridge wheel (without its dependencies) and the locked dependencies' wheels ---
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY requirements.lock requirements-build.lock ./
RUN pip install --require-hashes --only-binary=:all: -r requirements-build.lock \
 && pip download --require-hashes --only-binary=:all: --dest /wheels -r requirements.lock
COPY pyproject.toml setup.py README.md ./
COPY raybridge ./raybridge
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /raybridge-wheel .

# --- runtime: no compilers, no pip cache, a fixed non-root user ---
FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY requirements.lock /tmp/requirements.lock
COPY --from=build /wheels /wheels
COPY --from=build /raybridge-wheel /raybridge-wheel
RUN pip install --no-index --find-links /wheels --require-hashes --only-binary=:all: -r /tmp/requirements.lock \
 && pip install --no-index --no-deps /raybridge-wheel/raybridge-*.whl \
 && python -c "from raybridge.adjuster.decision.searches import BUILD; assert BUILD.kind == 'compiled', BUILD" \
 && rm -rf /wheels /raybridge-wheel /tmp/requirements.lock \
 && groupadd --gid 10001 raybridge \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin raybridge
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080 8081
ENTRYPOINT ["python", "-m", "raybridge", "adjuster", "run"]
CMD ["--log-format=json"]
