# The in-cluster node-scale-adjuster (`raybridge adjuster run`), deployed by configs/adjuster/.
#
#   docker build -t ghcr.io/raybridge/raybridge-adjuster:0.1.0 .
#
# Slim on purpose: the adjuster needs the Kubernetes client, PyYAML and prometheus-client, not
# Ray (tests/e2e/test_adjuster_run.py runs it with ray, rich and pynvml made unimportable).
# The full CLI (jobs, queues) needs `pip install raybridge` with its dependencies instead.
#
# Placeholder pods do not use this image: they run a busybox `true` that exits at once
# (raybridge/adjuster/consts.py DEFAULT_PLACEHOLDER_IMAGE; --placeholder-image to mirror it).

# --- build: wheels for raybridge (without its dependencies) and the adjuster's dependencies ---
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY raybridge ./raybridge
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && pip wheel --wheel-dir /wheels "kubernetes>=30" "PyYAML>=6" "prometheus-client>=0.20"

# --- runtime: no compilers, no pip cache, a fixed non-root user ---
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY --from=build /wheels /wheels
RUN pip install --no-index --find-links /wheels kubernetes PyYAML prometheus-client \
 && pip install --no-index --no-deps /wheels/raybridge-*.whl \
 && rm -rf /wheels \
 && groupadd --gid 10001 raybridge \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin raybridge
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080
ENTRYPOINT ["python", "-m", "raybridge", "adjuster", "run"]
CMD ["--log-format=json"]
