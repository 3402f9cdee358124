"""Clients generated from the served OpenAPI document work against the real API: a Python client
(openapi-python-client, from PyPI) and a TypeScript one (openapi-typescript types with openapi-fetch,
pinned in package.json, compiled by `tsc` in strict mode, run by node). Each walks a short journey:
create a user with only some optional fields, read it, list its transactions, ask for its VIP (a 422 the
client reads as the Error schema), fire a test event and read it back (`data.test` a boolean).

Generation itself is part of what is checked: the Python client must import, the TypeScript journey must
type-check (an optional request field the document gave a `default` would be required there)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.support.live_api import LiveApi, live_api_fixture  # noqa: F401 (the module's fixture)
from tests.support.paths import REPO_ROOT

# Every test here runs a client generator (and node) in a subprocess.
pytestmark = [pytest.mark.timeout(300), pytest.mark.e2e]
NODE_BIN = REPO_ROOT / "node_modules" / ".bin"
PACKAGE = "vip_generated_client"


def served_document(live_api: LiveApi, folder: Path) -> Path:
    path = folder / "openapi.json"
    path.write_text(requests.get(f"{live_api.url}/v1/openapi.json", timeout=30).text)
    return path


def test_a_generated_python_client_walks_a_journey(live_api: LiveApi, tmp_path: Path):
    document = served_document(live_api, tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    generated = subprocess.run(
        [str(Path(sys.executable).parent / "openapi-python-client"), "generate", "--path", str(document),
         "--output-path", str(tmp_path / PACKAGE), "--meta", "none"],
        capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert "Warning" not in generated.stdout, generated.stdout  # nothing of the document was skipped
    sys.path.insert(0, str(tmp_path))
    try:
        journey_in_python(live_api)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def journey_in_python(live_api: LiveApi) -> None:
    client_module = importlib.import_module(PACKAGE)
    users = importlib.import_module(f"{PACKAGE}.api.users")
    wallets = importlib.import_module(f"{PACKAGE}.api.wallets")
    verification = importlib.import_module(f"{PACKAGE}.api.verification")
    webhooks = importlib.import_module(f"{PACKAGE}.api.webhooks")
    models = importlib.import_module(f"{PACKAGE}.models")
    for name in ("create_user", "get_user"):
        importlib.import_module(f"{users.__name__}.{name}")
    importlib.import_module(f"{wallets.__name__}.list_transactions")
    importlib.import_module(f"{verification.__name__}.get_vip_report")
    for name in ("trigger_event", "get_event"):
        importlib.import_module(f"{webhooks.__name__}.{name}")

    client = client_module.AuthenticatedClient(base_url=live_api.url, token=live_api.key)
    metadata = models.CreateUserMetadata.from_dict({"loan_id": "loan-42"})
    created = users.create_user.sync_detailed(
        client=client, body=models.CreateUser(external_id="python-journey", metadata=metadata))
    assert created.status_code == 201, created.content
    user = created.parsed.user
    assert user.external_id == "python-journey" and user.metadata.to_dict() == {"loan_id": "loan-42"}

    read = users.get_user.sync_detailed(client=client, user_id=user.id)
    assert read.status_code == 200 and read.parsed.user.id == user.id

    page = wallets.list_transactions.sync_detailed(client=client, user_id=user.id, limit=10)
    assert page.status_code == 200, page.content
    assert page.parsed.transactions == [] and page.parsed.pagination.has_more is False

    vip = verification.get_vip_report.sync_detailed(client=client, user_id=user.id)
    assert vip.status_code == 422 and isinstance(vip.parsed, models.Error)
    assert vip.parsed.error.code == "ERR_MISSING_WALLET"

    fired = webhooks.trigger_event.sync_detailed(
        client=client, body=models.TriggerEvent(type_=models.TriggerEventType("vip.verified")))
    assert fired.status_code == 201, fired.content
    event = webhooks.get_event.sync_detailed(client=client, event_id=fired.parsed.event.id)
    assert event.status_code == 200 and event.parsed.event.data.test is True


TS_JOURNEY = """
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";

const api = createClient<paths>({ baseUrl: BASE_URL, headers: { Authorization: `Bearer ${API_KEY}` } });

function check(condition: boolean, what: string): void {
  if (!condition) { throw new Error(what); }
}

// Only some optional fields: a field with a `default` in the document would be required here.
const created = await api.POST("/v1/users", { body: { external_id: "ts-journey" } });
check(created.response.status === 201 && created.data !== undefined, "create a user");
const userId: string = created.data!.user.id;

const read = await api.GET("/v1/users/{user_id}", { params: { path: { user_id: userId } } });
check(read.data?.user.external_id === "ts-journey", "read the user");

const page = await api.GET("/v1/transactions", { params: { query: { user_id: userId, limit: 10 } } });
check(page.data !== undefined && page.data.transactions.length === 0, "list transactions");
const hasMore: boolean = page.data!.pagination.has_more;

const vip = await api.GET("/v1/vip-report", { params: { query: { user_id: userId } } });
check(vip.response.status === 422 && vip.error?.error.code === "ERR_MISSING_WALLET", "a VIP without wallet");

const fired = await api.POST("/v1/events/trigger", { body: { type: "vip.verified" } });
check(fired.response.status === 201 && fired.data !== undefined, "fire a test event");
const eventId: string = fired.data!.event.id;
const event = await api.GET("/v1/events/{event_id}", { params: { path: { event_id: eventId } } });
const test: boolean | undefined = event.data?.event.data.test;
check(test === true, "read the test event back");

console.log(JSON.stringify({ user: userId, hasMore, vip: vip.error?.error.code, test }));
"""

TSCONFIG = {"compilerOptions": {"strict": True, "target": "ES2022", "module": "NodeNext",
                                "moduleResolution": "NodeNext", "lib": ["ES2022", "DOM"], "types": [],
                                "skipLibCheck": True, "outDir": "out", "noEmitOnError": True},
            "files": ["journey.ts", "schema.d.ts"]}


def test_a_generated_typescript_client_walks_a_journey(live_api: LiveApi, tmp_path: Path):
    if not (NODE_BIN / "tsc").exists():
        pytest.fail("node_modules lacks the pinned TypeScript tools: run scripts/setup (npm ci)")
    document = served_document(live_api, tmp_path)
    (tmp_path / "node_modules").symlink_to(REPO_ROOT / "node_modules")  # openapi-fetch, as a project has it
    (tmp_path / "package.json").write_text(json.dumps({"type": "module", "private": True}))
    (tmp_path / "tsconfig.json").write_text(json.dumps(TSCONFIG))
    where = f"const BASE_URL = {json.dumps(live_api.url)};\nconst API_KEY = {json.dumps(live_api.key)};\n"
    (tmp_path / "journey.ts").write_text(where + TS_JOURNEY)

    def run(*command: str) -> str:
        done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path)
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    run(str(NODE_BIN / "openapi-typescript"), str(document), "--output", "schema.d.ts")
    run(str(NODE_BIN / "tsc"), "--project", "tsconfig.json")
    outcome = json.loads(run("node", "out/journey.js").strip().splitlines()[-1])
    assert outcome["vip"] == "ERR_MISSING_WALLET" and outcome["test"] is True and outcome["hasMore"] is False
    assert outcome["user"].startswith("usr_")
