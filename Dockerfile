# cronoq serve as a container image: a Python base, a non-root user, tokens from the
# environment. Build and run:
#
#   docker build -t cronoq .
#   docker run -p 7070:7070 -p 7071:7071 -v cronoq-data:/var/lib/cronoq \
#     -e CRONOQ_CLIENT_TOKEN=... -e CRONOQ_WORKER_TOKEN=... \
#     -e CRONOQ_METRICS_TOKEN=... -e CRONOQ_ADMIN_TOKEN=... cronoq
#
# The default configuration is deploy/docker/cronoq.toml (SQLite in the volume); mount another
# file and pass `--config PATH` for PostgreSQL and the rest (docs/how-to/production.md).
#
# Two build arguments, for machines without a registry or without network at build time
# (docs/how-to/production.md#building-without-a-registry):
#   BASE     the base image (default: the official python slim image); any image with
#            `python3` >= 3.11 with its venv module and `useradd`, e.g. a Debian made locally
#            with debootstrap (deploy/docker/make-base-image.sh)
#   OFFLINE  1: install only the wheels already in deploy/docker/wheels/ (built on the host
#            for the base's Python), with no network; 0 (default): build them here with pip
ARG BASE=python:3.12-slim

FROM ${BASE} AS build
ARG OFFLINE=0
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY deploy/docker/wheels/ /wheels/
# wheels of cronoq and of everything the server and the PostgreSQL store need
RUN if [ "$OFFLINE" != 1 ]; then \
      python3 -m venv /opt/pip && /opt/pip/bin/pip wheel --no-cache-dir --wheel-dir /wheels ".[server,postgres]"; \
    fi

FROM ${BASE}
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PATH=/opt/cronoq/bin:$PATH
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/cronoq --create-home cronoq
COPY --from=build /wheels /wheels
RUN python3 -m venv /opt/cronoq \
    && /opt/cronoq/bin/pip install --no-cache-dir --no-index --find-links /wheels "cronoq[server,postgres]" \
    && rm -rf /wheels
COPY deploy/docker/cronoq.toml /etc/cronoq/cronoq.toml
USER 10001:10001
WORKDIR /var/lib/cronoq
VOLUME ["/var/lib/cronoq"]
EXPOSE 7070 7071
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:7071/healthz', timeout=2)"]
ENTRYPOINT ["cronoq", "serve"]
CMD ["--config", "/etc/cronoq/cronoq.toml"]
