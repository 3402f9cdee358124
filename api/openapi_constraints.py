"""What the validators enforce, stated in the OpenAPI document so that generated clients and schema-driven
tools believe it: enums of the values a deployment accepts (its networks, platforms, the personas),
formats (addresses, dates of years 1000-9998), required parameters, and no `default` on an optional request
field (generators read one as "always present"), no type-less enum, no `const` where a boolean will do.

Applied to the built document (api/openapi.py) as passes over it: the request models and shared schemas
stay the validators' own. Values that depend on a deployment's configuration come from `ServedValues`,
so the served document lists the served networks. What no schema can state (a value only the service
issues, like a cursor or an OAuth state; a time relative to the service's clock; a host's DNS answer) is
said in the descriptions."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from vip.api.validation import NOT_BLANK, SPACE, WHITESPACE
from vip.config import Settings
from vip.personas.catalogue import PERSONAS
from vip.transactions.wallets import SPEC_NETWORKS
from vip.webhooks.catalogue import ALL, EVENT_TYPES

# Years a date or date-time may have: the validators' range (Python's datetime, with room for any UTC
# offset at both ends) without the edges that overflow (year 0 and 9999 are refused everywhere).
YEAR_PATTERN = r"^(?!9999)[1-9][0-9]{3}-"
ADDRESS_FORMAT = "evm-address"
ADDRESS_NOTE = ("A 0x address: 40 hex digits, all lower-case, all upper-case, or mixed case with a valid "
                "EIP-55 checksum (format `evm-address`)")
HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"


@dataclass(frozen=True)
class ServedValues:
    """The values a deployment's validators accept that depend on its configuration."""

    networks: tuple[str, ...]  # configured (time travel and personas name one; a non-local one is a 422)
    enabled: tuple[str, ...]  # followed, with an RPC URL (wallet sign-in, funding wallets)
    disbursing: tuple[str, ...]  # enabled with a disbursement contract (payment intents)
    platforms: tuple[tuple[str, str], ...]  # OAuth platforms: (id, source type)
    allow_http: bool = False  # plain-http webhook URLs (local development)
    max_amount_usd: str = "1000000"  # the largest payment intent (disbursement.max_amount_usd)

    @property
    def wallet_filter(self) -> tuple[str, ...]:
        """GET /v1/wallets?network=: the spec's four and every configured network."""
        return tuple(sorted(set(SPEC_NETWORKS) | set(self.networks)))

    @classmethod
    def of(cls, settings: Settings) -> ServedValues:
        enabled = list(settings.enabled_networks())
        return cls(networks=tuple(sorted(settings.networks)), enabled=tuple(sorted(n.name for n in enabled)),
                   disbursing=tuple(sorted(n.name for n in enabled if n.disbursement_contract)),
                   platforms=tuple(sorted((p.id, p.source_type) for p in settings.platforms.values())),
                   allow_http=settings.webhooks.allow_http,
                   max_amount_usd=str(settings.disbursement.max_amount_usd))


# The document built without settings (the reviewed snapshot, the response checks of the tests, the
# examples): the shipped networks as a deployment runs them (RPC URLs and disbursement contracts set), and
# `vip dev`'s local chain.
SHIPPED = ServedValues(networks=(*SPEC_NETWORKS, "local"), enabled=(*SPEC_NETWORKS, "local"),
                       disbursing=(*SPEC_NETWORKS, "local"),
                       platforms=(("blockmart", "exchange_account"), ("coinharbor", "exchange_account"),
                                  ("crewroll", "payroll"), ("ledgerpay", "payroll"),
                                  ("novabank", "neobank_account"), ("paystream", "payroll"),
                                  ("tidewater", "neobank_account")))


def _one_of(values: tuple[str, ...], what: str, base: dict[str, Any]) -> dict[str, Any]:
    """A string one of `values`; with none, the plain string and a description saying nothing passes."""
    if values:
        return {**{k: v for k, v in base.items() if k not in ("pattern", "minLength", "maxLength")},
                "type": "string", "enum": list(values)}
    refused = f" (no {what} is configured on this deployment: every value is refused)"
    return {**base, "description": (base.get("description", "") + refused).strip()}


def _describe(schema: dict[str, Any], sentence: str) -> None:
    schema["description"] = f"{schema['description'].rstrip('.')}. {sentence}" if schema.get(
        "description") else sentence


def _address(schema: dict[str, Any]) -> None:
    schema["format"] = ADDRESS_FORMAT
    if "EIP-55" not in schema.get("description", ""):
        _describe(schema, ADDRESS_NOTE)


# --- generic passes ----------------------------------------------------------------------------------------

def json_number(text: str) -> int | float:
    """A decimal setting as a JSON number (an integer when it is one)."""
    value = Decimal(text)
    return int(value) if value == value.to_integral() else float(value)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names[type(value)]


def _walk(node: Any, visit: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)


def typed_values(node: dict[str, Any]) -> None:
    """An enum or const says its type (generators guess wrong without one); a boolean const is a boolean
    (a `const: true` makes some generators write a type they cannot import)."""
    if "const" in node and isinstance(node["const"], bool):
        value = node.pop("const")
        node["type"] = "boolean"
        _describe(node, f"Always {'true' if value else 'false'} when present")
        return
    values = node.get("enum", [node["const"]] if "const" in node else None)
    if values is None or "type" in node or not isinstance(values, list):
        return
    types = sorted({_json_type(v) for v in values}, key=lambda t: (t == "null", t))
    node["type"] = types[0] if len(types) == 1 else types


def _years(node: dict[str, Any]) -> None:
    if node.get("format") in ("date", "date-time") and "pattern" not in node:
        node["pattern"] = YEAR_PATTERN


def _not_blank(schema: dict[str, Any]) -> None:
    """A text the validators strip before checking its length: whitespace alone is refused."""
    kinds = schema.get("type")
    text = kinds == "string" or (isinstance(kinds, list) and "string" in kinds)
    if text and schema.get("minLength", 0) >= 1 and not {"pattern", "enum", "format", "const"} & set(schema):
        schema["pattern"] = NOT_BLANK


def no_defaults(schema: dict[str, Any]) -> None:
    """Optional request fields without `default` (openapi-typescript makes a field with one required);
    the default is said in words instead."""
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict) and "default" in prop:
            value = prop.pop("default")
            if value is not None:
                _describe(prop, f"Default: {value}")


# --- the request models' constraints -----------------------------------------------------------------------

def _body_constraints(schemas: dict[str, Any], served: ServedValues) -> None:
    p = {name: schemas[name]["properties"] for name in (
        "ConnectWallet", "FundingWalletNonce", "RegisterFundingWallet", "CreatePaymentIntent",
        "TimeTravelRequest", "CreatePersona", "DirectPlatformConnection", "DirectRecord",
        "CreateWebhookEndpoint", "RegisterSignInDomain")}
    for model in ("ConnectWallet", "FundingWalletNonce"):
        p[model]["network"] = _one_of(served.enabled, "network", p[model]["network"])
    intent = p["CreatePaymentIntent"]
    intent["network"] = _one_of(served.disbursing, "network with a disbursement contract", intent["network"])
    intent["amount_usd"]["maximum"] = json_number(served.max_amount_usd)
    intent["amount_usd"].pop("exclusiveMaximum", None)
    intent["token"] = {**{k: v for k, v in intent["token"].items() if k != "pattern"}, "type": "string",
                       "enum": ["USDC", "USDT"]}
    for model, field in (("ConnectWallet", "address"), ("FundingWalletNonce", "address"),
                         ("RegisterFundingWallet", "address"), ("CreatePaymentIntent", "recipient_wallet"),
                         ("CreatePaymentIntent", "funding_wallet")):
        _address(p[model][field])
    # Whitespace alone is stripped to nothing, which the length check refuses.
    p["RegisterFundingWallet"]["nonce"]["pattern"] = NOT_BLANK
    travel = p["TimeTravelRequest"]
    travel["network"] = _one_of(served.networks, "network", travel["network"])
    schemas["TimeTravelRequest"]["not"] = {"required": ["seconds", "to_timestamp"],
                                           "properties": {"seconds": {"type": "integer"},
                                                          "to_timestamp": {"type": ["string", "integer"]}}}
    _describe(schemas["TimeTravelRequest"], "`seconds` and `to_timestamp` may not both be given")
    persona = p["CreatePersona"]
    persona["persona"] = _one_of(tuple(PERSONAS), "persona", persona["persona"])
    persona["network"] = _one_of(served.networks, "network", persona["network"])
    # Any platform may push; one of the OAuth platforms pushes with its own source type.
    schemas["DirectPlatformConnection"]["allOf"] = [
        {"if": {"properties": {"platform": {"const": platform}}, "required": ["platform"]},
         "then": {"properties": {"source_type": {"const": kind}}}} for platform, kind in served.platforms]
    _describe(p["DirectPlatformConnection"]["platform"],
              "An OAuth platform's id requires that platform's source_type")
    record = p["DirectRecord"]
    # An origin that looks like an address must be one (checksummed when mixed-case); inbound needs one.
    record["from_reference"]["anyOf"] = [
        {"pattern": rf"^{SPACE}*0[xX][0-9a-fA-F]{{40}}{SPACE}*$", "format": ADDRESS_FORMAT},
        {"pattern": rf"^(?!{SPACE}*0[xX])"}]
    schemas["DirectRecord"]["if"] = {"properties": {"direction": {"const": "inbound"}},
                                     "required": ["direction"]}
    schemas["DirectRecord"]["then"] = {"required": ["from_reference"],
                                       "properties": {"from_reference": {"type": "string"}}}
    # The stored form is lower-case; a port is 1-65535.
    p["RegisterSignInDomain"]["domain"]["pattern"] = (
        rf"^(?=[^:]{{1,253}}(?::|$)){HOST_LABEL}(?:\.{HOST_LABEL})*"
        r"(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?$")
    _describe(p["RegisterSignInDomain"]["uri_prefixes"], "Each on the domain itself")
    endpoint = p["CreateWebhookEndpoint"]
    scheme = "https?" if served.allow_http else "https"
    local = "" if served.allow_http else r"(?![^/?#]*(?:localhost|\.local|\.internal)\.?(?:[:/?]|$))"
    endpoint["url"]["pattern"] = (rf"^{scheme}://{local}(?:{HOST_LABEL}\.)+[A-Za-z]{{2,63}}\.?"
                                  rf"(?::[1-9][0-9]{{0,3}})?(?:[/?][^{WHITESPACE}#\x00-\x1f\x7f]*)?$")
    _describe(endpoint["url"], "A host name (a public IP address is accepted too); no user:password@, no "
                               "#fragment; a name that resolves to a private address is refused")
    types = endpoint["event_types"]
    types.pop("items", None)
    types["anyOf"] = [{"items": {"type": "string", "const": ALL}, "maxItems": 1},
                      {"items": {"type": "string", "enum": list(EVENT_TYPES)}}]
    _describe(types, '"*" stands alone')


def _parameter(doc: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    [param] = [p for p in doc["paths"][path]["get"]["parameters"] if p["name"] == name]
    found: dict[str, Any] = param
    return found


def _parameter_constraints(doc: dict[str, Any], served: ServedValues) -> None:
    authorize = _parameter(doc, "/v1/connect/platform/authorize", "platform")
    authorize["schema"] = _one_of(tuple(p for p, _ in served.platforms), "platform", authorize["schema"])
    wallets = _parameter(doc, "/v1/wallets", "network")
    wallets["schema"] = _one_of(served.wallet_filter, "network", wallets["schema"])
    for name in ("state", "code"):
        param = _parameter(doc, "/v1/connect/platform/callback", name)
        param["required"] = True
        param["schema"] = {"type": "string", "minLength": 1, "maxLength": 200 if name == "state" else 4096}
    _parameter(doc, "/v1/connect/platform/callback", "state")["description"] = (
        "The state GET /v1/connect/platform/authorize put in redirect_url: single use, 10 minutes")
    _parameter(doc, "/v1/connect/platform/callback", "code")["description"] = (
        "The platform's authorization code (a platform reporting `error` instead is answered 400 "
        "ERR_OAUTH_DENIED)")
    for name in ("from_date", "to_date"):
        param = _parameter(doc, "/v1/transactions", name)
        param["schema"] = {"anyOf": [{"type": "string", "format": "date", "pattern": YEAR_PATTERN},
                                     {"type": "string", "format": "date-time", "pattern": YEAR_PATTERN}]}
    _parameter(doc, "/v1/transactions", "classification")["description"] += (
        " (without it, 400); from_date may not be after to_date")
    for path, name in (("/v1/transactions", "cursor"), ("/v1/events", "cursor")):
        _describe(_parameter(doc, path, name), "Only a cursor the service issued is accepted (else 400)")


def with_constraints(doc: dict[str, Any], served: ServedValues, body_models: list[str]) -> dict[str, Any]:
    """The document with every constraint above stated."""
    doc = copy.deepcopy(doc)
    schemas = doc["components"]["schemas"]
    _body_constraints(schemas, served)
    _parameter_constraints(doc, served)
    for name in body_models:
        no_defaults(schemas[name])
        _walk(schemas[name], _years)
        for field, prop in schemas[name].get("properties", {}).items():
            if (name, field) != ("ConnectWallet", "message"):  # the signed text is taken byte for byte
                _not_blank(prop)
    for item in doc["paths"].values():
        for op in item.values():
            for param in op.get("parameters", []):
                _walk(param["schema"], _years)
                if param["in"] in ("query", "header"):
                    _not_blank(param["schema"])
    _walk(doc["components"], typed_values)
    _walk(doc["paths"], typed_values)
    _walk(doc.get("webhooks", {}), typed_values)
    return doc
