# syntax=docker/dockerfile:1
# One image, two roles: the API (`vip serve`, the default) and the indexer daemon (`vip index`), plus the
# one-off `vip migrate`. Anvil, solcjs and the embedded PostgreSQL are development tools and are not in
# it: set DATABASE_URL and the VIP_RPC_<NETWORK> variables. See docs/operations.md ("Container").
# Secrets come from the environment at run time, never from the image: VIP_TOKEN_KEY and VIP_STATE_SECRET
# always, VIP_OPERATOR_KEY (or a keystore and VIP_OPERATOR_KEYSTORE_PASSWORD) for `vip index` alone when a
# network disburses (the API never signs and refuses the key).
# Without a network marked local the service is in production and refuses to start without them.
#
#   docker build -t vip .
#   docker run -e DATABASE_URL=postgresql://... -e VIP_TOKEN_KEY -e VIP_STATE_SECRET -e VIP_RPC_BASE \
#       -p 8080:8080 vip                                                              # the API
#   docker run -e DATABASE_URL=postgresql://... -e VIP_TOKEN_KEY -e VIP_STATE_SECRET -e VIP_RPC_BASE \
#       -e VIP_OPERATOR_KEY vip index                                                 # the daemon, :9464
#   docker run -e DATABASE_URL=postgresql://... vip migrate

# --- builder: the package and its dependencies in a virtual environment -----------------------------
FROM python:3.11-slim AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
RUN python -m venv /opt/venv
# Dependencies first, in a layer of their own that a code change does not invalidate. pgserver (the
# embedded PostgreSQL for development: 34 MB of binaries) is left out; the image always uses DATABASE_URL.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; \
print('\n'.join(d for d in deps if not d.startswith('pgserver')))" > /tmp/requirements.txt \
 && /opt/venv/bin/pip install -r /tmp/requirements.txt
# Every folder pyproject.toml maps into the `vip` namespace; the package is built and installed as a wheel
# (config defaults, contract artifacts and migrations are package data inside it).
COPY src ./src
COPY indexer ./indexer
COPY api ./api
COPY verification ./verification
COPY config ./config
COPY contracts ./contracts
RUN /opt/venv/bin/pip install --no-deps . \
 && /opt/venv/bin/pip uninstall -y pip

# --- runtime: slim, non-root, only what the service runs --------------------------------------------
FROM python:3.11-slim AS runtime
RUN useradd --system --uid 10001 --user-group --home-dir /app --shell /usr/sbin/nologin vip
COPY --from=builder /opt/venv /opt/venv
COPY deploy/container.toml /app/deploy/container.toml
WORKDIR /app
# container.toml makes the API and the daemon's metrics listen on every interface; append your own
# overlays to VIP_CONFIG with ":" (see deploy/compose.yaml).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VIP_LOG_FORMAT=json \
    VIP_CONFIG=/app/deploy/container.toml
USER vip
EXPOSE 8080 9464
# Liveness of the API role (/readyz, readiness, is for the load balancer). The daemon's container overrides
# it with its own /healthz on 9464 (deploy/compose.yaml).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["vip"]
CMD ["serve"]
