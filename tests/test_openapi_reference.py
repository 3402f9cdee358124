"""The reference a lender's developer reads: the served document is valid OpenAPI 3.1, every operation has
an example for its request body and for each of its responses, each example is valid under its own schema
(and a request example passes the handler's own validation), every event type is in `webhooks`, and the
schemas carry no generator noise. Real deliveries are checked against `webhooks` by
tests/test_webhook_events_end_to_end.py (through tests/support/event_shapes.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from eth_utils import is_checksum_address
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from pydantic import BaseModel

from tests.support.event_shapes import envelope_problems
from tests.support.paths import REPO_ROOT
from vip.api.openapi import document
from vip.api.openapi_examples import OPERATION_ERRORS, REQUESTS, RESPONSES
from vip.api.openapi_paths import BODY_MODELS
from vip.api.routes.docs import REDOC_BUNDLE, redoc_bundle, vendored_bundle
from vip.formats import loads
from vip.webhooks.catalogue import EVENT_TYPES

DOC = document("http://vip.test")
MODELS: dict[str, type[BaseModel]] = {model.__name__: model for model in BODY_MODELS}
ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}(?![0-9a-fA-F])")


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(verb, path, op) for path, item in doc["paths"].items() for verb, op in item.items()]


def examples(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any], Any]]:
    """(where, schema, example) of every example in the document: request bodies, responses, webhooks."""
    found = []
    for kind, items in (("paths", doc["paths"]), ("webhooks", doc["webhooks"])):
        for name, item in items.items():
            for verb, op in item.items():
                if "requestBody" in op:
                    media = op["requestBody"]["content"]["application/json"]
                    found.append((f"{kind} {verb} {name} body", media["schema"], media.get("example")))
                found.extend((f"{kind} {verb} {name} {status}", media["schema"], media.get("example"))
                             for status, response in op["responses"].items()
                             for media in response.get("content", {}).values())
    return found


def problems(schema: dict[str, Any], instance: Any) -> list[str]:
    validator = Draft202012Validator({**schema, "components": DOC["components"]},
                                     format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}"
            for e in validator.iter_errors(instance)]


async def test_the_served_document_is_valid_openapi_3_1_with_webhooks_and_navigation(api):
    resp = await api.client.get("/v1/openapi.json")
    assert resp.status == 200
    served = await resp.json()
    validate(served)
    assert served["openapi"] == "3.1.0"
    assert sorted(served["webhooks"]) == sorted(EVENT_TYPES)
    tags = [tag["name"] for tag in served["tags"]]
    used = {t for _, _, op in operations(served) for t in op["tags"]}
    used |= {t for item in served["webhooks"].values() for op in item.values() for t in op["tags"]}
    assert used == set(tags), "every tag used is described, and every described tag used"
    grouped = [t for group in served["x-tagGroups"] for t in group["tags"]]
    assert sorted(grouped) == sorted(tags), "every tag is in exactly one group (Redoc hides the others)"


def test_every_operation_has_request_and_response_examples():
    missing = [where for where, _, example in examples(DOC) if example is None]
    assert missing == []
    assert len(operations(DOC)) >= 29
    ids = [op["operationId"] for _, _, op in operations(DOC)]
    assert len(ids) == len(set(ids)), "operationIds are unique (Redoc links and client generators use them)"
    for verb, path, op in operations(DOC):
        responses = op["responses"]
        # JSON everywhere, but the event stream's text/event-stream.
        assert any(s < "300" for s in responses) and all(
            "example" in media for r in responses.values() for media in r["content"].values()), (verb, path)


def test_every_written_example_is_used():
    """No example for an operation or a status the document does not have (a renamed path, a dropped code)."""
    answered = {(verb, path, status) for verb, path, op in operations(DOC) for status in op["responses"]}
    assert set(RESPONSES) - answered == set()
    assert set(OPERATION_ERRORS) - answered == set()
    assert set(REQUESTS) == set(MODELS)


@pytest.mark.parametrize(("where", "schema", "example"), examples(DOC), ids=[w for w, _, _ in examples(DOC)])
def test_each_example_is_valid_under_its_own_schema(where, schema, example):
    assert problems(schema, example) == []


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_request_example_passes_the_handlers_validation(name):
    """The body validators, not only the schema, accept the example (read as the API reads a body)."""
    media = [op["requestBody"]["content"]["application/json"] for _, _, op in operations(DOC)
             if op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
             == {"$ref": f"#/components/schemas/{name}"}]
    assert media
    for m in media:
        MODELS[name].model_validate(loads(json.dumps(m["example"])))


def test_examples_use_checksummed_addresses():
    """EIP-55 everywhere, but for the fields the API answers lower-case (a VIP's wallet and origins);
    request bodies always checksummed (the validators refuse the others)."""
    for where, _, example in examples(DOC):
        for address in ADDRESS.findall(json.dumps(example)):
            if where.endswith(" body") and where.startswith("paths"):
                assert is_checksum_address(address), (where, address)
            else:
                assert is_checksum_address(address) or address == address.lower(), (where, address)


def webhook_example(event_type: str) -> dict[str, Any]:
    return DOC["webhooks"][event_type]["post"]["requestBody"]["content"]["application/json"]["example"]


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_each_webhook_example_is_the_spec_envelope(event_type):
    assert webhook_example(event_type)["type"] == event_type
    assert envelope_problems(loads(json.dumps(webhook_example(event_type)))) == []


def test_a_wrong_payload_is_refused_by_the_webhook_schema():
    """The schemas are not vacuous: an event whose object is in another state, or of another type, fails."""
    example, verified = (webhook_example("charge.succeeded"), webhook_example("vip.verified"))
    failed = {**example, "data": {"object": {**example["data"]["object"], "status": "failed"}}}
    assert envelope_problems(failed) != []
    assert envelope_problems({**example, "data": verified["data"]}) != []


def walk(node: Any, path: str = ""):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, f"{path}/{i}")


def test_schemas_carry_no_generator_noise():
    """No titles that repeat a name, no anyOf with a null branch where a list of types says it (3.1),
    descriptions on one line (a wrapped docstring showed a literal \\n on the old page)."""
    for path, node in walk(DOC["components"]["schemas"]):
        if path.endswith("/properties"):
            continue  # the names of properties, not keywords
        assert "title" not in node, path
        branches = node.get("anyOf", [])
        assert not any(b == {"type": "null"} for b in branches if isinstance(b, dict)), path
        assert "\n" not in str(node.get("description", "")), path


def test_the_vendored_bundle_is_the_pinned_redoc():
    """api/static holds a copy of the bundle of the version package.json pins (the wheel serves it without
    node_modules); after a version bump, copy the new file (scripts/setup says how)."""
    pinned = json.loads((REPO_ROOT / "package.json").read_text())["devDependencies"]["redoc"]
    installed = REPO_ROOT / "node_modules" / "redoc"
    assert json.loads((installed / "package.json").read_text())["version"] == pinned, "run scripts/setup"
    assert vendored_bundle() == (installed / "bundles" / REDOC_BUNDLE).read_bytes()
    # served without the one address elsewhere it would fetch (the logo): nothing absolute is loaded
    assert b"cdn.redoc.ly" not in redoc_bundle() and len(redoc_bundle()) == len(vendored_bundle()) - 40
    assert Path(REPO_ROOT / "api" / "static" / "redoc.LICENSE").exists()
