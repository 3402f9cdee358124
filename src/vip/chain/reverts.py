"""Revert data decoded: the Disbursement contract's own custom errors (with their arguments), and inside
`TokenReverted` the token's own reason: an `Error(string)` (USDC's "Pausable: paused"), a `Panic`, a
custom error we know the signature of (our test tokens'), or nothing at all (USDT's bare `require`).
Pure: bytes in, values out."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from eth_abi.abi import decode
from eth_abi.exceptions import DecodingError
from eth_typing import ABIError
from eth_utils import abi_to_signature, keccak

from vip.chain.contracts import ARTIFACTS_DIR, load_artifact

ERROR_STRING = keccak(text="Error(string)")[:4]
PANIC = keccak(text="Panic(uint256)")[:4]
# SafeTokenCall.sol's errors: the first argument is the token.
TOKEN_ERRORS = ("TokenReverted", "TokenRefused", "TokenHasNoCode", "TokenShortDelivery")


@dataclass(frozen=True)
class TokenReason:
    """Why the token refused: `text` is its Error(string) message, or the signature of a custom error
    (`InsufficientAllowance()`), or a panic code; None when the token said nothing."""

    text: str | None
    raw: str  # 0x hex, as the token reverted


@dataclass(frozen=True)
class Revert:
    """A decoded revert. `error` is the error's name (`TokenReverted`, `AlreadyDisbursed`, `Error` for a
    plain string, `Panic`, "" for empty data, `unknown` for a selector we do not know); `token` and
    `token_reason` are set for the SafeTokenCall errors."""

    error: str
    raw: str
    token: str | None = None
    token_reason: TokenReason | None = None
    text: str | None = None  # the message of Error(string), or the signature of a known custom error
    delivered: tuple[int, int] | None = None  # TokenShortDelivery: (expected, received) base units


@cache
def _errors() -> dict[bytes, ABIError]:
    """4-byte selector -> the ABI entry of every custom error in our artifacts."""
    found: dict[bytes, ABIError] = {}
    for path in sorted(ARTIFACTS_DIR.glob("*.json")):
        for entry in load_artifact(path.stem)["abi"]:
            if entry["type"] == "error":
                error: ABIError = entry
                found[keccak(text=abi_to_signature(error))[:4]] = error
    return found


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def _plain(data: bytes) -> tuple[str, str | None]:
    """(name, text) of revert data that is no error of ours with arguments."""
    if not data:
        return "", None
    selector, body = data[:4], data[4:]
    try:
        if selector == ERROR_STRING:
            return "Error", str(decode(["string"], body)[0])
        if selector == PANIC:
            return "Panic", f"panic 0x{int(decode(['uint256'], body)[0]):02x}"
    except (DecodingError, OverflowError, ValueError):
        return "unknown", None
    entry = _errors().get(selector)
    if entry is not None:
        return entry["name"], abi_to_signature(entry)
    return "unknown", None


def token_reason(data: bytes) -> TokenReason:
    return TokenReason(_plain(data)[1] if data else None, _hex(data))


def decode_revert(raw: str | None) -> Revert:
    """The revert data `raw` (0x hex, or None when the node gave none) decoded."""
    data = bytes.fromhex(raw[2:]) if raw and raw.startswith("0x") else b""
    entry = _errors().get(data[:4]) if len(data) >= 4 else None
    if entry is not None and entry["name"] in TOKEN_ERRORS:
        try:
            values = decode([i["type"] for i in entry.get("inputs", [])], data[4:])
        except (DecodingError, OverflowError, ValueError):
            return Revert("unknown", _hex(data))
        token = str(values[0]).lower()
        if entry["name"] == "TokenShortDelivery":
            return Revert(entry["name"], _hex(data), token=token, delivered=(int(values[1]), int(values[2])))
        reason = token_reason(bytes(values[1])) if len(values) > 1 else None
        return Revert(entry["name"], _hex(data), token=token, token_reason=reason)
    name, text = _plain(data)
    return Revert(name, _hex(data), text=text)
