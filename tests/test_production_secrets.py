"""Production (no network marked `local`) refuses to start with a missing or public development secret:
`vip serve` and `vip index` exit 2 with one line naming each variable, before touching the database.
A development stack (a local network, as `vip dev` and the tests run) keeps its fixed public secrets."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest

from tests.support.webhooks import PRODUCTION_SECRETS
from vip.api.app import create_app
from vip.api.context import SETTINGS
from vip.config import DEV_TOKEN_KEY, load_settings
from vip.devstack.anvil import DEV_PRIVATE_KEYS
from vip.production_secrets import production_secret_problems

UNREACHABLE_DATABASE = "postgresql://nobody@127.0.0.1:9/none"  # refusing must come before any connection
RPC = {"VIP_RPC_BASE": "http://127.0.0.1:9"}
OWN_OPERATOR_KEY = "0x" + "5a" * 32
CONTRACT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("VIP_RPC_") and k not in ("VIP_CONFIG", "VIP_TOKEN_KEY", "VIP_STATE_SECRET",
                                                          "VIP_OPERATOR_KEY")}
    return subprocess.run([sys.executable, "-m", "vip.cli", command], capture_output=True, text=True,
                          env={**base, "DATABASE_URL": UNREACHABLE_DATABASE, **env}, timeout=60)


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["serve", "index"])
def test_production_refuses_the_development_secrets(command):
    done = run(command, RPC)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"vip {command}: refusing to start in production (no network is marked local)")
    assert "VIP_TOKEN_KEY" in line and "VIP_STATE_SECRET" in line and "VIP_OPERATOR_KEY" not in line

    # Only the one still missing is named.
    done = run(command, {**RPC, "VIP_TOKEN_KEY": PRODUCTION_SECRETS["VIP_TOKEN_KEY"]})
    [line] = done.stderr.splitlines()
    assert done.returncode == 2 and "VIP_STATE_SECRET" in line and "VIP_TOKEN_KEY" not in line


@pytest.mark.e2e
def test_production_with_its_secrets_gets_past_the_check(tmp_path):
    # Past the check, `vip serve` goes on to the database, which is unreachable here: a different failure.
    done = run("serve", {**RPC, **PRODUCTION_SECRETS})
    assert done.returncode != 0 and "refusing to start" not in done.stderr


def settings(environ: dict[str, str], overlay: str = "", tmp_path=None):
    extra = []
    if overlay:
        path = tmp_path / "overlay.toml"
        path.write_text(overlay)
        extra.append(path)
    return load_settings(extra_files=extra, environ=environ)


def test_each_secret_is_checked_and_named(tmp_path):
    prod = {**RPC, **PRODUCTION_SECRETS}
    assert production_secret_problems(settings(prod)) == []
    # A dev key anywhere in the ring, even after a good one, is refused (sealed data it opens is public).
    ring = f"{PRODUCTION_SECRETS['VIP_TOKEN_KEY']},old:{DEV_TOKEN_KEY}"
    [problem] = production_secret_problems(settings({**prod, "VIP_TOKEN_KEY": ring}))
    assert problem.startswith("VIP_TOKEN_KEY")
    for short in ("dev-only-state-secret", "x" * 31):
        [problem] = production_secret_problems(settings({**prod, "VIP_STATE_SECRET": short}))
        assert problem.startswith("VIP_STATE_SECRET")

    # The operator key matters once a followed network has a disbursement contract.
    disbursing = f'[networks.base]\ndisbursement_contract = "{CONTRACT}"\n'
    [problem] = production_secret_problems(settings(prod, disbursing, tmp_path))
    assert problem.startswith("VIP_OPERATOR_KEY is unset")
    [problem] = production_secret_problems(settings({**prod, "VIP_OPERATOR_KEY": DEV_PRIVATE_KEYS[1]},
                                                    disbursing, tmp_path))
    assert problem == "VIP_OPERATOR_KEY is a public development key (Anvil's)"
    assert production_secret_problems(settings({**prod, "VIP_OPERATOR_KEY": OWN_OPERATOR_KEY},
                                               disbursing, tmp_path)) == []
    keystore = disbursing + '[disbursement]\noperator_keystore = "/k.json"\n'
    [problem] = production_secret_problems(settings(prod, keystore, tmp_path))
    assert problem == "VIP_OPERATOR_KEYSTORE_PASSWORD is unset"


def test_a_local_network_is_development(tmp_path):
    local = """[networks.local]
chain_id = 31337
rpc_url = "http://127.0.0.1:8545"
local = true
finality_depth = 2
[networks.local.tokens.USDC]
address = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
"""
    dev = settings({}, local, tmp_path)
    assert dev.is_development and production_secret_problems(dev) == []
    assert not settings(RPC).is_development


def test_the_token_key_ring_is_validated():
    key = base64.urlsafe_b64encode(b"q" * 32).decode()
    ring = settings({"VIP_TOKEN_KEY": f"new:{key},{DEV_TOKEN_KEY}"}).api.cipher()
    assert ring.current_id == "new"
    for bad in (f"a:{key},a:{key}", f"bad id:{key}", f"{key},", "k:short"):
        with pytest.raises(ValueError):
            settings({"VIP_TOKEN_KEY": bad})


@pytest.mark.e2e
def test_the_api_needs_no_operator_key_and_refuses_one(tmp_path):
    """The operator key is the daemon's alone: `vip serve` starts without it where `vip index` needs it,
    and production refuses an API given one (a compromised API process must hold nothing that signs)."""
    prod = {**RPC, **PRODUCTION_SECRETS}
    disbursing = f'[networks.base]\ndisbursement_contract = "{CONTRACT}"\n'
    keyless = settings(prod, disbursing, tmp_path)
    assert keyless.disburses and production_secret_problems(keyless, "serve") == []
    [problem] = production_secret_problems(keyless, "index")
    assert problem.startswith("VIP_OPERATOR_KEY is unset")

    keyed = settings({**prod, "VIP_OPERATOR_KEY": OWN_OPERATOR_KEY}, disbursing, tmp_path)
    assert production_secret_problems(keyed, "index") == []
    [problem] = production_secret_problems(keyed, "serve")
    assert problem.startswith("VIP_OPERATOR_KEY") and "`vip index` only" in problem
    keystore = settings(prod, disbursing + '[disbursement]\noperator_keystore = "/k.json"\n', tmp_path)
    assert len(production_secret_problems(keystore, "serve")) == 1

    done = run("serve", {**prod, "VIP_OPERATOR_KEY": OWN_OPERATOR_KEY})
    [line] = done.stderr.splitlines()
    assert done.returncode == 2 and "VIP_OPERATOR_KEY" in line and "never signs" in line
    assert OWN_OPERATOR_KEY not in done.stderr


def test_the_api_application_holds_no_operator_key():
    """Even in development (where `vip serve` only warns), the application drops the key it is given."""
    keyed = settings({**RPC, "VIP_OPERATOR_KEY": OWN_OPERATOR_KEY})
    assert keyed.disbursement.operator_private_key is not None
    app = create_app(keyed, UNREACHABLE_DATABASE)
    assert app[SETTINGS].disbursement.operator_private_key is None
    assert not app[SETTINGS].operator_key_given and app[SETTINGS].disbursement.operator_keystore is None


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["serve", "index"])
def test_production_refuses_http_webhooks(command, tmp_path):
    """`webhooks.allow_http` turns the SSRF guard off (decision 105): local development only."""
    overlay = tmp_path / "http.toml"
    overlay.write_text("[webhooks]\nallow_http = true\n")
    prod = {**RPC, **PRODUCTION_SECRETS}
    [problem] = production_secret_problems(settings(prod, overlay.read_text(), tmp_path), command)
    assert problem.startswith("webhooks.allow_http is true")
    done = run(command, {**prod, "VIP_CONFIG": str(overlay)})
    [line] = done.stderr.splitlines()
    assert done.returncode == 2 and "webhooks.allow_http" in line and "VIP_TOKEN_KEY" not in line
    assert production_secret_problems(settings(prod), command) == []
