"""Requests that are valid by the OpenAPI document and by the few rules no schema can state, for the
positive schemathesis run (tests/test_api_fuzz.py).

The document states every constraint the validators enforce on a request's shape (api/openapi_constraints.py).
What no JSON schema can say, and the document says in words, is made real here before a generated request
is sent, and nothing else is touched:

- values only the service issues: a pagination `cursor` (left out: the first page), an OAuth `state` (a
  fresh one from GET /v1/connect/platform/authorize; a platform's `error` report is left out, since
  relaying a refusal is its purpose);
- rules relative to the service's clock: a pushed record is not dated after today; time travel goes
  forward from the head (`to_timestamp` left out);
- a sign-in domain's URI prefixes, each on the domain itself (left out: the default prefix);
- rules across query parameters: `wash_trade` and `circular` come with include_filtered=true, from_date
  is not after to_date.
Every address the document marks `evm-address` is generated valid (checksummed, or one case)."""

from __future__ import annotations

from datetime import date
from typing import Any

import requests
import schemathesis
from eth_utils import to_checksum_address
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig

from vip.api.routes.transactions import parse_instant

POSITIVE_CONFIG = SchemathesisConfig.from_str("""
[generation]
mode = "positive"
allow-x00 = false
""")

_hex40 = st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)
schemathesis.openapi.format("evm-address", st.one_of(
    _hex40.map(lambda h: "0x" + h), _hex40.map(lambda h: "0x" + h.upper()),
    _hex40.map(lambda h: to_checksum_address("0x" + h))))

LATEST_RECORD_DAY = "2020-12-31"  # before any service clock's today


def _after(from_date: str, to_date: str) -> bool:
    """Whether the API would refuse this pair as from_date after to_date: compared as the instants it reads
    (a date-time's offset counts: 11:44-01:00 is after 11:44Z), not as text."""
    try:
        return parse_instant(from_date, end_of_day=False) >= parse_instant(to_date, end_of_day=True)
    except ValueError:
        return False  # refused on its own: not this rule's case


class SchemaValidRequests:
    def __init__(self, base_url: str, headers: dict[str, str], user_id: str) -> None:
        self.base_url, self.headers, self.user_id = base_url, headers, user_id

    def fresh_state(self, platform: str = "paystream") -> str:
        """A new single-use OAuth state, as the platform would hand it back."""
        answer = requests.get(f"{self.base_url}/v1/connect/platform/authorize", headers=self.headers,
                              params={"platform": platform, "user_id": self.user_id}, timeout=30)
        answer.raise_for_status()
        query = requests.utils.urlparse(answer.json()["redirect_url"]).query
        return dict(part.split("=", 1) for part in query.split("&"))["state"]

    def make_real(self, case: Any) -> None:
        path, query, body = case.operation.path, case.query, case.body
        if isinstance(query, dict):
            query.pop("cursor", None)
            if path == "/v1/connect/platform/callback":
                query.pop("error", None)
                query.pop("error_description", None)
                query["state"] = requests.utils.unquote(self.fresh_state())
            if path == "/v1/transactions":
                if query.get("classification") in ("wash_trade", "circular"):
                    query["include_filtered"] = "true"
                ends = [query.get("from_date"), query.get("to_date")]
                if all(ends) and _after(str(ends[0]), str(ends[1])):
                    query["from_date"], query["to_date"] = ends[1], ends[0]
        if isinstance(body, dict):
            if path == "/v1/sign-in-domains":
                body.pop("uri_prefixes", None)  # each must be on the generated domain: the default is
            if path == "/v1/dev/time-travel":
                body.pop("to_timestamp", None)
            if path == "/v1/connect/platform/direct":
                for record in (body.get("data") or {}).get("transaction_history") or ():
                    if isinstance(record, dict) and str(record.get("date", "")) > LATEST_RECORD_DAY:
                        record["date"] = date.fromisoformat(LATEST_RECORD_DAY).isoformat()
