# Two stages: build a virtualenv from the lock, then copy it into a slim runtime image that
# runs as a numeric non-root user and works with a read-only root filesystem. The same inputs
# build the same image: the base by digest, every package pinned with its hashes
# (requirements/daemon.txt, written by scripts/lock.sh).
#
# The digest was not read from the registry where this file was written (no Docker engine or
# registry access there): it is a python:3.11-slim-bookworm index digest published in two
# unrelated public Dockerfiles, and registries keep old digests pullable. Check it, and
# refresh it whenever the lock is refreshed, with the multi-platform index digest (it covers
# amd64 and arm64):
#   docker buildx imagetools inspect python:3.11-slim-bookworm --format '{{.Manifest.Digest}}'
#   (or the "Digest: sha256:..." line that `docker pull python:3.11-slim-bookworm` prints)
# or give one to a build: docker build --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/autoscaler
# scripts/install.sh's two steps, apart so the dependencies' layer outlives a code change.
# Only the daemon's set: matplotlib (simulate's plot) is the `plot` extra and stays out.
COPY requirements/daemon.txt requirements/daemon.txt
RUN /opt/autoscaler/bin/pip install --require-hashes -r requirements/daemon.txt
COPY pyproject.toml README.md setup.py MANIFEST.in ./
COPY build_backend ./build_backend
COPY autoscaler ./autoscaler
# The locked setuptools builds the package (no build-time download); then pip and setuptools
# leave the virtualenv: they build, they do not run. The core is pure Python, as every
# install is unless AUTOSCALER_COMPILE=1 asks for mypyc (setup.py): the slim base has no C
# compiler, and the daemon's pass waits on Prometheus and the API server, not on the
# decisions a compiled core speeds up (docs/architecture.md, "Compiled or pure").
RUN /opt/autoscaler/bin/pip install --no-deps --no-build-isolation . \
 && /opt/autoscaler/bin/python -m pip uninstall -q -y pip setuptools

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="autoscaler" \
      org.opencontainers.image.description="Prometheus-driven autoscaler for Kubernetes workloads"
COPY --from=build /opt/autoscaler /opt/autoscaler
# No .pyc writes and unbuffered logs (the root filesystem is read-only in deploy/).
ENV PATH=/opt/autoscaler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["autoscaler"]
CMD ["run", "--config", "/etc/autoscaler/autoscaler.toml"]
