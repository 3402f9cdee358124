"""The operations kit in config/ops: the Prometheus scrape config, the alert rules and the Grafana dashboard
refer only to series the service exports, with their real labels, and every alert is explained in
docs/operations.md. Where `promtool` is installed it also checks the files and runs the rules' unit tests
(config/ops/alerts_test.yml); without it the checks here still parse every expression."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import promql
from tests.support.paths import REPO_ROOT
from vip import metrics
from vip.api.app import create_app
from vip.config import Settings, load_settings
from vip.daemon import start_metrics_server
from vip.devstack.anvil import free_port

OPS = REPO_ROOT / "config" / "ops"
PROMTOOL = shutil.which("promtool")
EXPORTED = promql.exported_series(metrics)
SERIES = {**EXPORTED, **promql.PROMETHEUS_SERIES}
SEVERITIES = {"warning", "critical"}
TEMPLATE_LABEL = re.compile(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)")
LEGEND_LABEL = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def load_yaml(name: str):
    return yaml.safe_load((OPS / name).read_text())


def rules() -> list[dict]:
    return [rule for group in load_yaml("alerts.yml")["groups"] for rule in group["rules"]]


def scrape_jobs() -> dict[str, dict]:
    return {job["job_name"]: job for job in load_yaml("prometheus.yml")["scrape_configs"]}


def promtool(*args: str) -> None:
    done = subprocess.run([PROMTOOL, *args], cwd=OPS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def check_expression(expr: str, where: str) -> promql.Refs:
    """Every series exists, every label named in a matcher or grouping exists on the series it applies
    to; returns what the expression refers to."""
    assert promql.balanced(expr), f"{where}: unbalanced brackets in {expr!r}"
    refs = promql.references(expr)
    assert not refs.unknown_functions, f"{where}: unknown functions {refs.unknown_functions}"
    unknown = refs.series - set(SERIES)
    assert not unknown, f"{where}: series not exported by vip.metrics: {sorted(unknown)}"
    assert refs.series, f"{where}: names no series"
    for name, labels in refs.matchers:
        assert name is not None, f"{where}: a selector without a series name"
        missing = labels - promql.scraped_labels(SERIES[name])
        assert not missing, f"{where}: {name} has no label(s) {sorted(missing)}"
    available = set().union(*(promql.scraped_labels(SERIES[n]) for n in refs.series))
    missing = (refs.by_labels | refs.other_grouping_labels) - available
    assert not missing, f"{where}: grouping by labels no series has: {sorted(missing)}"
    for name, labels in refs.matchers:
        if name == "up" and "job" in labels:
            jobs = re.findall(r'job=~?"([^"]+)"', expr)
            for job in "|".join(jobs).split("|"):
                assert job in scrape_jobs(), f"{where}: no scrape job {job}"
    return refs


def result_labels(refs: promql.Refs) -> set[str]:
    """Labels the expression's result keeps (roughly: the `by` labels when it aggregates)."""
    if refs.aggregates and not refs.uses_without:
        return refs.by_labels
    return set().union(*(promql.scraped_labels(SERIES[n]) for n in refs.series))


def test_exposition_names_are_those_prometheus_client_writes():
    registry = CollectorRegistry()
    counter = Counter("things_total", "", ["network"], registry=registry, namespace="x")
    gauge = Gauge("level", "", registry=registry, namespace="x")
    histogram = Histogram("wait_seconds", "", ["job"], registry=registry, namespace="x", buckets=(1, 2))
    counter.labels("base").inc()
    gauge.set(1)
    histogram.labels("w").observe(1.5)
    written = {line.split("{")[0].split(" ")[0] for line in generate_latest(registry).decode().splitlines()
               if line and not line.startswith("#")}
    expected = {name for metric in (counter, gauge, histogram) for family in metric.describe()
                for name in promql.exposition_names(family.name, family.type)}
    assert written == expected


def test_references_reads_selectors_groupings_and_functions():
    refs = promql.references('sum by (network, le) (rate(vip_rpc_request_seconds_bucket{kind="a{b}"}[5m]))'
                             ' / on (network) group_left max(vip_x) and rte(up[1m:10s] offset 5m)')
    assert refs.series == {"vip_rpc_request_seconds_bucket", "vip_x", "up"}
    assert refs.functions == {"sum", "rate", "max"} and refs.unknown_functions == {"rte"}
    assert refs.by_labels == {"network", "le"} and refs.other_grouping_labels == {"network"}
    assert refs.matchers == [("vip_rpc_request_seconds_bucket", {"kind"})]
    assert promql.balanced("max(a{b=\")\"})") and not promql.balanced("max(a{b})) (")
    assert promql.scraped_labels(("job", "kind")) == {"exported_job", "kind", "job", "instance"}
    assert promql.scraped_labels(("queue", "kind")) == {"queue", "kind", "job", "instance"}


@pytest.mark.e2e
def test_every_alert_rule_is_complete_valid_and_explained():
    alerts = rules()
    names = [rule["alert"] for rule in alerts]
    assert len(names) == len(set(names)), "alert names repeat"
    operations = (REPO_ROOT / "docs" / "operations.md").read_text()
    monitoring = operations.split("\n## Monitoring\n", 1)[1]
    for rule in alerts:
        where = rule.get("alert", rule)
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, where
        assert re.fullmatch(r"Vip[A-Z][A-Za-z]+", rule["alert"]), where
        assert re.fullmatch(r"\d+[smh]", rule["for"]), where
        assert rule["labels"].get("severity") in SEVERITIES, where
        assert {"summary", "description", "runbook"} <= set(rule["annotations"]), where
        assert rule["annotations"]["runbook"] == f"docs/operations.md#{rule['alert'].lower()}"
        assert f"\n### {rule['alert']}\n" in monitoring, f"{where} is not explained in docs/operations.md"
        refs = check_expression(rule["expr"], where)
        used = {label for text in rule["annotations"].values() for label in TEMPLATE_LABEL.findall(text)}
        assert used <= result_labels(refs), f"{where}: annotations use labels the result lacks"
    if PROMTOOL:
        promtool("check", "rules", "alerts.yml")
        promtool("test", "rules", "alerts_test.yml")


def test_alerts_cover_lag_rpc_reorgs_webhooks_charges_and_jobs():
    by_series: dict[str, list[dict]] = {}
    for rule in rules():
        for name in promql.references(rule["expr"]).series:
            by_series.setdefault(name, []).append(rule)
    for name in ("vip_indexer_lag_blocks", "vip_indexer_lag_seconds", "vip_rpc_errors_total",
                 "vip_indexer_reorgs_beyond_finality_total", "vip_webhook_oldest_undelivered_seconds",
                 "vip_charges_total", "vip_jobs_oldest_pending_seconds", "vip_job_errors_total"):
        assert name in by_series, f"no alert on {name}"
    for name in ("vip_indexer_lag_blocks", "vip_indexer_lag_seconds"):
        [lag] = by_series[name]
        assert lag["for"] == "5m" and promql.references(lag["expr"]).by_labels == {"network"}
    for job in ("vip-api", "vip-indexer"):
        assert any(f'up{{job="{job}"}}' in rule["expr"] for rule in rules()), f"no alert on {job} down"


@pytest.mark.e2e
def test_dashboard_shows_every_metric_with_valid_queries(tmp_path: Path):
    dashboard = json.loads((OPS / "grafana" / "vip-dashboard.json").read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    source, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variables["network"]["definition"]).groups()
    assert label in promql.scraped_labels(SERIES[source])

    expressions: list[str] = []
    cells: set[tuple[int, int]] = set()
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        area = {(grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])}
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), panel["title"]
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "5m")
            refs = check_expression(expr, panel["title"])
            legend = set(LEGEND_LABEL.findall(target.get("legendFormat", "")))
            assert legend <= result_labels(refs), f"{panel['title']}: legend uses labels the result lacks"
            expressions.append(expr.replace("$network", ".*"))

    shown = set().union(*(promql.references(e).series for e in expressions))
    for family, kind in ((f.name, f.type) for m in promql.metric_objects(metrics) for f in m.describe()):
        assert shown & set(promql.exposition_names(family, kind)), f"no panel shows {family}"
    if PROMTOOL:  # promtool parses every query as a recording rule
        records = [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(expressions)]
        (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": records}]}))
        promtool("check", "rules", str(tmp_path / "queries.yml"))


@pytest.mark.e2e
async def test_scrape_config_targets_serve_the_metrics(api):
    config = load_yaml("prometheus.yml")
    for rule_file in config["rule_files"]:
        assert (OPS / rule_file).is_file(), rule_file
    jobs = scrape_jobs()
    defaults = Settings()
    # The deployment's settings: the API's metrics on their own listener, not on the public API port.
    container = load_settings(extra_files=[REPO_ROOT / "deploy" / "container.toml"], environ={})
    [api_target] = jobs["vip-api"]["static_configs"][0]["targets"]
    [daemon_target] = jobs["vip-indexer"]["static_configs"][0]["targets"]
    assert container.api.metrics_port is not None
    assert int(api_target.rsplit(":", 1)[1]) == container.api.metrics_port != container.api.port
    assert int(daemon_target.rsplit(":", 1)[1]) == defaults.daemon.metrics_port

    port = free_port()
    listening = create_app(api.settings.model_copy(update={"api": api.settings.api.model_copy(
        update={"metrics_port": port})}), "postgresql+psycopg://unused/unused")
    runner = web.AppRunner(listening)
    await runner.setup()  # starts the metrics listener (the API's own port is not opened here)
    path = jobs["vip-api"].get("metrics_path", "/metrics")
    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
            assert resp.status == 200
            families = {f.name for f in text_string_to_metric_families(await resp.text())}
        assert families >= promql.family_names(metrics)
    finally:
        await runner.cleanup()

    port = free_port()
    runner = await start_metrics_server("127.0.0.1", port)
    try:
        path = jobs["vip-indexer"].get("metrics_path", "/metrics")
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
            assert resp.status == 200
            families = {f.name for f in text_string_to_metric_families(await resp.text())}
        assert families >= promql.family_names(metrics)
    finally:
        await runner.cleanup()
    if PROMTOOL:
        promtool("check", "config", "prometheus.yml")
