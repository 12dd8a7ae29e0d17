# Two stages: build a virtualenv with the package, then copy it into a slim runtime image that
# runs as a numeric non-root user and works with a read-only root filesystem.
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/autoscaler
COPY pyproject.toml README.md ./
COPY autoscaler ./autoscaler
RUN /opt/autoscaler/bin/pip install .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="autoscaler" \
      org.opencontainers.image.description="Prometheus-driven autoscaler for Kubernetes workloads"
COPY --from=build /opt/autoscaler /opt/autoscaler
# No .pyc writes, unbuffered logs, and caches under /tmp (an emptyDir in deploy/).
ENV PATH=/opt/autoscaler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["autoscaler"]
CMD ["run", "--config", "/etc/autoscaler/autoscaler.toml"]
