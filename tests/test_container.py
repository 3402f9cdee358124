"""The container image and the example compose file, checked without a Docker engine: every command they run
is a subcommand of the installed `vip` script that accepts those arguments, their health checks hit paths
the processes serve, and the image is multi-stage, slim and non-root."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
import yaml

from tests.support.paths import REPO_ROOT
from vip.api.app import create_app
from vip.cli import build_parser
from vip.config import (
    ENV_OPERATOR_KEY,
    ENV_OPERATOR_KEYSTORE_PASSWORD,
    ENV_STATE_SECRET,
    ENV_TOKEN_KEY,
    load_settings,
)
from vip.daemon import start_metrics_server
from vip.devstack.anvil import free_port

DEPLOY = REPO_ROOT / "deploy"
VIP_SCRIPT = Path(sys.executable).parent / "vip"  # the console script installed beside this interpreter
IMAGE = "vip:latest"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str:
        return self.all(keyword)[-1]


def dockerfile_stages(text: str) -> list[Stage]:
    """Instructions per build stage (continuation lines joined, comments dropped)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    logical = re.sub(r"\\\n", " ", "\n".join(lines))
    stages: list[Stage] = []
    for line in logical.splitlines():
        if not line.strip():
            continue
        keyword, _, args = line.strip().partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            base, _, name = args.partition(" AS ")
            stages.append(Stage(base.strip(), name.strip() or None))
        else:
            stages[-1].instructions.append((keyword, args))
    return stages


def exec_form(args: str) -> list[str]:
    parsed = json.loads(args)
    assert isinstance(parsed, list) and all(isinstance(a, str) for a in parsed), args
    return parsed


def runtime() -> Stage:
    return dockerfile_stages((REPO_ROOT / "Dockerfile").read_text())[-1]


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def image_commands() -> dict[str, list[str]]:
    """What each container of the image runs: ENTRYPOINT + CMD, or + a compose service's command."""
    stage = runtime()
    entrypoint, default = exec_form(stage.last("ENTRYPOINT")), exec_form(stage.last("CMD"))
    commands = {"image default": entrypoint + default}
    for name, service in compose()["services"].items():
        if service.get("image") == IMAGE:
            command = service.get("command", default)
            commands[name] = service.get("entrypoint", entrypoint) + (
                shlex.split(command) if isinstance(command, str) else command)
    return commands


def health_urls() -> dict[str, str]:
    """The URL each health check fetches (image default and compose overrides)."""
    found = {}
    healthcheck = runtime().last("HEALTHCHECK")
    found["image default"] = re.search(r"https?://[^'\"]+", healthcheck).group(0)
    for name, service in compose()["services"].items():
        test = " ".join(service.get("healthcheck", {}).get("test", []))
        if match := re.search(r"https?://[^'\"]+", test):
            found[name] = match.group(0)
    return found


def test_image_is_multi_stage_slim_and_non_root():
    stages = dockerfile_stages((REPO_ROOT / "Dockerfile").read_text())
    builder, final = stages[0], stages[-1]
    assert len(stages) >= 2 and builder.name and final.base.endswith("-slim")
    assert any("pip install" in run for run in builder.all("RUN"))
    # Only runtime pieces in the final stage: no installs, no build tools, no test extras anywhere.
    assert not any(re.search(r"pip install|apt-get|apk add", run) for run in final.all("RUN"))
    assert not re.search(r"\.\[test\]|\[test\]", (REPO_ROOT / "Dockerfile").read_text())
    copies = final.all("COPY")
    assert any(c.startswith(f"--from={builder.name} /opt/venv") for c in copies)
    user = final.last("USER")
    assert user not in ("root", "0")
    assert any("useradd" in run and user in run and "--uid 0 " not in run for run in final.all("RUN"))
    assert "--interval" in final.last("HEALTHCHECK")
    # Every package the distribution ships is copied into the builder, and every copied path exists.
    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    wanted = set(setuptools["package-dir"].values())
    copied = {source for c in builder.all("COPY") if not c.startswith("--") for source in c.split()[:-1]}
    assert wanted <= copied
    for copy in builder.all("COPY") + copies:
        if not copy.startswith("--"):
            for source in copy.split()[:-1]:
                assert (REPO_ROOT / source).exists(), source
    ignored = (REPO_ROOT / ".dockerignore").read_text().split()
    assert {".venv", "node_modules", ".vip-dev", ".git"} <= set(ignored)


@pytest.mark.e2e
def test_every_command_the_containers_run_is_a_vip_subcommand():
    commands = image_commands()
    assert {"image default", "migrate", "api", "indexer"} <= set(commands)
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    parser = build_parser()
    for where, argv in commands.items():
        assert argv[0] in scripts, f"{where}: {argv[0]} is not a console script of the package"
        done = subprocess.run([str(VIP_SCRIPT), argv[1], "--help"], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, f"{where}: {argv}: {done.stderr}"
        assert done.stdout.startswith(f"usage: vip {argv[1]}"), where
        parser.parse_args(argv[1:])  # the arguments are accepted too (argparse exits on an error)
    assert {argv[1] for argv in commands.values()} >= {"serve", "index", "migrate"}


async def test_health_checks_hit_paths_the_processes_serve(api):
    settings = load_settings(extra_files=[DEPLOY / "container.toml"], environ={})
    assert settings.api.host == "0.0.0.0" and settings.daemon.metrics_host == "0.0.0.0"
    urls = health_urls()
    image_health = urlsplit(urls["image default"])
    # Liveness: a container is marked unhealthy when its process hangs, not when a dependency is down.
    assert image_health.port == settings.api.port and image_health.path == "/healthz"
    resp = await api.client.get(image_health.path)
    assert resp.status == 200 and (await resp.json())["status"] == "ok"
    served = {route.resource.canonical for route in create_app(settings, "postgresql+psycopg://x/x").router.routes()}
    assert image_health.path in served

    daemon_health = urlsplit(urls["indexer"])
    assert daemon_health.port == settings.daemon.metrics_port
    port = free_port()
    runner = await start_metrics_server("127.0.0.1", port)
    try:
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{port}{daemon_health.path}") as resp:
            assert resp.status == 200
    finally:
        await runner.cleanup()


def test_compose_file_wires_postgres_migrations_api_and_daemon():
    spec = compose()
    services = spec["services"]
    assert {"postgres", "migrate", "api", "indexer"} <= set(services)
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for role in ("api", "indexer"):
        assert services[role]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["restart"] == "no"

    postgres = services["postgres"]["environment"]
    env = services["api"]["environment"]
    url = urlsplit(re.sub(r"\$\{[^}]*\}", "secret", env["DATABASE_URL"]))
    assert (url.scheme, url.hostname, url.username, url.path) == (
        "postgresql", "postgres", postgres["POSTGRES_USER"], f"/{postgres['POSTGRES_DB']}")
    # Every shipped network can be given its RPC URL from the environment.
    shipped = load_settings(environ={})
    assert {n.rpc_url_env for n in shipped.networks.values()} <= set(env)
    # The overlays the containers read exist and are valid settings files.
    overlays = env["VIP_CONFIG"].split(":")
    assert overlays[0] == "/app/deploy/container.toml"
    assert any(c.endswith("deploy/container.toml /app/deploy/container.toml") for c in runtime().all("COPY"))
    mounts = {target.removesuffix(":ro"): source for source, _, target in
              (v.partition(":") for v in services["api"]["volumes"])}
    for overlay in overlays[1:]:
        local = DEPLOY / mounts[overlay]
        load_settings(extra_files=[DEPLOY / "container.toml", local], environ={})
    # Every host path mounted exists, and Prometheus scrapes the compose services by name.
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), source
    scrape = yaml.safe_load((REPO_ROOT / "config" / "ops" / "prometheus.yml").read_text())
    hosts = {t.split(":")[0] for job in scrape["scrape_configs"] for c in job["static_configs"]
             for t in c["targets"]}
    assert hosts <= set(services)


def test_the_secrets_are_passed_in_from_the_environment_never_baked_in():
    """Production refuses to start without its secrets (vip.config.production_secret_problems): compose
    hands every one of them to the roles that use it, requiring those always needed, and the image sets
    none. The operator key goes to the daemon alone (the API never signs)."""
    operator = {ENV_OPERATOR_KEY, ENV_OPERATOR_KEYSTORE_PASSWORD}
    services = compose()["services"]
    for role in ("api", "indexer", "migrate"):
        env = services[role]["environment"]
        secrets = {ENV_TOKEN_KEY, ENV_STATE_SECRET} | (operator if role == "indexer" else set())
        assert secrets <= set(env), role
        assert role == "indexer" or not operator & set(env), role
        for name in secrets:
            assert env[name].startswith("${" + name + ":"), (role, name)  # from the operator's environment
        for required in (ENV_TOKEN_KEY, ENV_STATE_SECRET):
            assert env[required].startswith("${" + required + ":?"), (role, required)  # compose refuses
    secrets = {ENV_TOKEN_KEY, ENV_STATE_SECRET} | operator
    baked = " ".join(args for stage in dockerfile_stages((REPO_ROOT / "Dockerfile").read_text())
                     for kw, args in stage.instructions if kw in ("ENV", "ARG"))
    assert not any(name in baked for name in secrets)
    text = (REPO_ROOT / "Dockerfile").read_text()
    assert all(f"-e {name}" in text for name in (ENV_TOKEN_KEY, ENV_STATE_SECRET, ENV_OPERATOR_KEY))
