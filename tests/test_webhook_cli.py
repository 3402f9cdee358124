"""`vip webhooks ...` against a real database: the operator's way to manage endpoints and replay."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from tests.support.webhooks import DEV_CIPHER, deliveries
from vip.clock import WallClock
from vip.config import WebhookConfig
from vip.store.outbox import record_event
from vip.store.tables import webhook_deliveries, webhook_endpoints
from vip.webhooks.store import open_secret
from vip.webhooks.worker import DeliveryWorker


def vip(*args: str, database_url: str, expect: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("VIP_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "vip.cli", "webhooks", *args], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == expect, (done.stdout, done.stderr)
    return done


@pytest.mark.e2e
async def test_create_list_rotate_replay_delete(database_url, engine):
    out = vip("create", "--org", "acme", "--url", "https://hooks.example.com/vip", "--event-types",
              "vip.verified,fraud.flagged", database_url=database_url).stdout.splitlines()
    endpoint_id = out[0].split()[1]
    secret = out[1].rsplit(" ", 1)[1]
    assert secret.startswith("whsec_")
    async with engine.connect() as conn:
        row = (await conn.execute(webhook_endpoints.select())).one()
    assert (row.id, row.event_types) == (endpoint_id, ["vip.verified", "fraud.flagged"])
    # Kept sealed under the key ring (here the development key), bound to its endpoint.
    assert secret not in row.secret and open_secret(DEV_CIPHER, row.id, row.secret) == secret

    listing = vip("list", "--org", "acme", database_url=database_url).stdout
    assert endpoint_id in listing and "vip.verified,fraud.flagged" in listing and secret not in listing

    rotated = vip("rotate-secret", endpoint_id, "--org", "acme", database_url=database_url).stdout
    new_secret = rotated.splitlines()[1].rsplit(" ", 1)[1]
    assert new_secret != secret
    async with engine.connect() as conn:
        row = (await conn.execute(webhook_endpoints.select())).one()
    opened = [open_secret(DEV_CIPHER, row.id, s) for s in (row.secret, row.previous_secret)]
    assert opened == [new_secret, secret]

    async with engine.begin() as conn:
        event_id = await record_event(conn, "vip.verified", {"id": "vip_1"}, created_at=datetime.now(UTC),
                                      organisation_id=row.organisation_id)
    assert await DeliveryWorker(engine, WallClock(), WebhookConfig(), cipher=DEV_CIPHER).fan_out() == 1
    async with engine.begin() as conn:  # as after the fifth failed attempt
        await conn.execute(update(webhook_deliveries).values(status="failed", attempts=5,
                                                             next_attempt_at=None))
    assert f"{event_id}  vip.verified" in vip("events", "--org", "acme", "--status", "failed",
                                              database_url=database_url).stdout
    assert "to 1 endpoint" in vip("replay", event_id, "--org", "acme", database_url=database_url).stdout
    [delivery] = await deliveries(engine, event_id)
    assert (delivery.status, delivery.attempts) == ("pending", 0)

    assert vip("delete", endpoint_id, "--org", "acme", database_url=database_url).stdout.startswith("deleted")
    assert vip("list", "--org", "acme", database_url=database_url).stdout == ""
    vip("delete", endpoint_id, "--org", "acme", database_url=database_url, expect=1)
    assert (await deliveries(engine, event_id))[0].status == "cancelled"


@pytest.mark.e2e
async def test_bad_url_and_types_are_refused(database_url):
    err = vip("create", "--org", "acme", "--url", "http://hooks.example.com/x", database_url=database_url,
              expect=2).stderr
    assert "https" in err
    err = vip("create", "--org", "acme", "--url", "https://hooks.example.com/x", "--event-types", "nope",
              database_url=database_url, expect=2).stderr
    assert "unknown event types: nope" in err
    # SSRF: a host that is, or resolves to, an address of our own network is refused here too.
    for url, why in (("https://169.254.169.254/latest", "link-local"),
                     ("https://localhost:8443/x", "local name"), ("https://[::ffff:10.1.2.3]/x", "private")):
        err = vip("create", "--org", "acme", "--url", url, database_url=database_url, expect=2).stderr
        assert why in err and "public" in err, err
