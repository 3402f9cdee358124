# Production image: the API (`vip serve`) and the indexer daemon (`vip index`) from one image.
# Anvil, solcjs and the embedded PostgreSQL are development tools and are not used here: set
# DATABASE_URL and the VIP_RPC_<NETWORK> variables.
#
#   docker build -t vip .
#   docker run -e DATABASE_URL=... vip                       # the API on :8080
#   docker run -e DATABASE_URL=... -e VIP_RPC_BASE=... vip vip index   # the daemon, metrics on :9464

FROM python:3.11-slim AS build
WORKDIR /app
COPY pyproject.toml README.md ./
COPY vip ./vip
COPY indexer ./indexer
COPY api ./api
COPY verification ./verification
# Installed in place: the code finds config/ and contracts/artifacts/ beside its packages in /app.
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir -e .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 vip
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
COPY config /app/config
COPY contracts/artifacts /app/contracts/artifacts
WORKDIR /app
ENV PATH=/opt/venv/bin:$PATH VIP_LOG_FORMAT=json PYTHONUNBUFFERED=1
USER vip
EXPOSE 8080 9464
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)" || exit 1
CMD ["vip", "serve", "--host", "0.0.0.0"]
