# raybridge: the CLI and the in-cluster node-scale-adjuster in one image.
# Build: docker build -t raybridge:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY raybridge ./raybridge
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
RUN useradd --create-home --uid 10001 raybridge
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 10001
WORKDIR /home/raybridge
ENTRYPOINT ["python", "-m", "raybridge"]
CMD ["--help"]
