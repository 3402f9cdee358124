"""Property-based run (schemathesis) against the served OpenAPI document: whatever the generated input,
no 500 and no response that breaks the document; and hostile input on every operation (NUL in each path
and query parameter, bodies nested hundreds, thousands and a hundred thousand levels deep): a documented
400 in the error body."""

from __future__ import annotations

import functools

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.live_api import LiveApi, live_api_fixture  # noqa: F401 (the module's fixture)
from tests.support.openapi_check import violations_of
from tests.support.schema_valid import POSITIVE_CONFIG, SchemaValidRequests
from vip.api.openapi import document

CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]
# Operations whose valid requests take long, run with fewer examples: the event stream holds each request
# open for its keep-alive period; a persona plays six months of transfers on the chain.
FEWER_EXAMPLES = {("GET", "/v1/events/stream"): 3, ("POST", "/v1/dev/personas"): 3}


# Bounded by the number of examples, never by the clock: the same work on a quiet or a loaded machine.
EXAMPLES_PER_OPERATION = 25
# Every operation of the document, one test each (parallel workers share the sweep). Listed from the document
# as the server builds it; each test reads the document the live server serves.
OPERATIONS = sorted((path, method.upper()) for path, item in document("http://127.0.0.1")["paths"].items()
                    for method in item if method in {"get", "post", "put", "patch", "delete"})
OPERATION_IDS = [f"{method} {path}" for path, method in OPERATIONS]


def examples_for(operation) -> int:
    return FEWER_EXAMPLES.get((operation.method.upper(), operation.path), EXAMPLES_PER_OPERATION)


@functools.cache
def served_schema(url: str, positive: bool = False) -> schemathesis.schemas.BaseSchema:
    """The live server's document, read once per worker and mode."""
    config = POSITIVE_CONFIG if positive else None
    return schemathesis.openapi.from_url(f"{url}/v1/openapi.json", config=config)


def test_the_sweep_covers_the_api():
    assert len(OPERATIONS) >= 40


@pytest.mark.fuzz
@pytest.mark.parametrize(("path", "method"), OPERATIONS, ids=OPERATION_IDS)
def test_generated_requests_never_break_the_api(live_api: LiveApi, path: str, method: str):
    operation = served_schema(live_api.url)[path][method]

    @given(case=operation.as_strategy())
    @settings(max_examples=examples_for(operation), deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    def run(case) -> None:
        # Half the cases aim at a real user, so handlers past validation run too.
        if case.query and "user_id" in case.query and len(str(case.query)) % 2:
            case.query["user_id"] = live_api.user_id
        case.call_and_validate(base_url=live_api.url, headers=live_api.headers, checks=CHECKS)

    run()




def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def test_nul_and_deep_nesting_on_every_operation_are_documented_400s(live_api: LiveApi):
    schema = served_schema(live_api.url)
    doc = requests.get(f"{live_api.url}/v1/openapi.json", timeout=10).json()
    tried = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        method, template = operation.method.upper(), operation.path
        spec = doc["paths"][template][operation.method.lower()]
        path_names = [p["name"] for p in spec.get("parameters", []) if p["in"] == "path"]
        query_names = [p["name"] for p in spec.get("parameters", []) if p["in"] == "query"]
        filler = dict.fromkeys(path_names, "x1")
        cases = [operation.Case(path_parameters={**filler, name: "x\x00y"}) for name in path_names]
        cases += [operation.Case(path_parameters=filler, query={name: "a\x00b"}) for name in query_names]
        if "requestBody" in spec:
            cases += [operation.Case(path_parameters=filler, body={"metadata": nested(200)},
                                     media_type="application/json"),
                      operation.Case(path_parameters=filler, body=nested(300), media_type="application/json")]
        for case in cases:
            response = case.call_and_validate(base_url=live_api.url, headers=live_api.headers, checks=CHECKS)
            assert response.status_code == 400, (method, template, case.path_parameters, case.query,
                                                 response.text[:300])
            assert response.json()["error"]["code"].startswith("ERR_"), response.text
            tried += 1
        if "requestBody" in spec:
            # Deeper than any encoder recurses: raw bytes.
            url = live_api.url + template.format(**filler)
            for raw in ['{"metadata": ' + "[" * 5_000 + "]" * 5_000 + "}", "[" * 100_000 + "]" * 100_000]:
                response = requests.request(method, url, data=raw.encode(), timeout=30, headers={
                    **live_api.headers, "Content-Type": "application/json"})
                assert response.status_code == 400, (method, template, response.text[:300])
                assert not violations_of(doc, method, template, 400, response.json())
                tried += 1
    assert tried >= 40


def refusals(operation, live_api: LiveApi, requests_: SchemaValidRequests) -> list[str]:
    """What the API refused (400) or failed on (5xx but 502/503: a chain or platform not answering) among
    the schema-valid requests generated for `operation` (25, or fewer for the slow ones)."""
    found: list[str] = []

    @given(case=operation.as_strategy())
    @settings(max_examples=examples_for(operation), deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    def run(case) -> None:
        requests_.make_real(case)
        response = case.call(base_url=live_api.url, headers=live_api.headers, timeout=120)
        status = response.status_code
        if status == 400 or (status >= 500 and status not in (502, 503)):
            body = case.body if not isinstance(case.body, schemathesis.core.NotSet) else ""
            found.append(f"{status} {response.text[:300]} <- {case.path_parameters} {case.query} {body}")

    run()
    return found


# A stream stays open: it is answered 200 or not at all (the sweep above checks it).
VALID_OPERATIONS = [(path, method) for path, method in OPERATIONS if path != "/v1/events/stream"]


@pytest.mark.fuzz
@pytest.mark.parametrize(("path", "method"), VALID_OPERATIONS, ids=[f"{m} {p}" for p, m in VALID_OPERATIONS])
def test_no_schema_valid_request_is_refused(live_api: LiveApi, path: str, method: str):
    """Whatever schemathesis generates from the served document within it (positive mode, no NUL) is never
    refused with a 400: every constraint the validators enforce is in the document. Bounded by example
    count (25 per operation), not by time. The few values no schema can state (a cursor or OAuth state only
    the service issues, a time relative to its clock) are made real first: tests/support/schema_valid.py."""
    operation = served_schema(live_api.url, positive=True)[path][method]
    requests_ = SchemaValidRequests(live_api.url, live_api.headers, live_api.user_id)
    found = refusals(operation, live_api, requests_)
    assert found == [], f"{operation.label}: {found[0]} ({len(found)} cases)" if found else ""
