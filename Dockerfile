# cronoq serve as a container image: a slim Python base, a non-root user, tokens from the
# environment. Build and run:
#
#   docker build -t cronoq .
#   docker run -p 7070:7070 -p 7071:7071 -v cronoq-data:/var/lib/cronoq \
#     -e CRONOQ_CLIENT_TOKEN=... -e CRONOQ_WORKER_TOKEN=... \
#     -e CRONOQ_METRICS_TOKEN=... -e CRONOQ_ADMIN_TOKEN=... cronoq
#
# The default configuration is deploy/docker/cronoq.toml (SQLite in the volume); mount another
# file and pass `--config PATH` for PostgreSQL and the rest (docs/how-to/production.md).

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# wheels of cronoq and of everything the server and the PostgreSQL store need
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[server,postgres]"

FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/cronoq --create-home cronoq
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "cronoq[server,postgres]" \
    && rm -rf /wheels
COPY deploy/docker/cronoq.toml /etc/cronoq/cronoq.toml
USER 10001:10001
WORKDIR /var/lib/cronoq
VOLUME ["/var/lib/cronoq"]
EXPOSE 7070 7071
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:7071/healthz', timeout=2)"]
ENTRYPOINT ["cronoq", "serve"]
CMD ["--config", "/etc/cronoq/cronoq.toml"]
