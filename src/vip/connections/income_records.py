"""An income record's values, whether a platform sends it (an OAuth pull) or a lender pushes it
(POST /v1/connect/platform/direct): exact amounts of at most 6 decimals, calendar days, currencies,
payer references; and the records of one pulled account."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import AfterValidator

from vip.formats import address_in

MAX_AMOUNT = Decimal("1000000000000000")  # 10^15: far above any income, far below NUMERIC(38,6)
MICRO = Decimal("0.000001")
_DECIMAL_TEXT = re.compile(r"^[0-9]{1,16}(\.[0-9]{1,30})?$")
_DAY = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_CURRENCY = re.compile(r"^[A-Z][A-Z0-9]{1,9}$")


def check_amount(value: Any, *, allow_text: bool = False) -> Decimal:
    """A positive amount with at most 6 decimals, exact: a JSON number (int or Decimal, never a float or
    a boolean), or with `allow_text` a plain decimal string such as "5000.00"."""
    if isinstance(value, bool | float):
        raise ValueError("must be a JSON number (exact decimal)")
    if isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, Decimal):
        amount = value
    elif isinstance(value, str) and allow_text and _DECIMAL_TEXT.match(value):
        try:
            amount = Decimal(value)
        except InvalidOperation as exc:  # pragma: no cover - the pattern admits only valid text
            raise ValueError("must be a decimal number") from exc
    else:
        raise ValueError("must be a number" + (" or a decimal string" if allow_text else ""))
    if not amount.is_finite():
        raise ValueError("must be a finite number")
    if amount <= 0:
        raise ValueError("must be greater than 0")
    if amount >= MAX_AMOUNT:
        raise ValueError(f"must be less than {MAX_AMOUNT}")
    if amount != amount.quantize(MICRO, rounding=ROUND_DOWN):
        raise ValueError("must have at most 6 decimal places")
    return amount.quantize(MICRO)


def check_day(value: Any) -> date:
    """A calendar date written YYYY-MM-DD (nothing else: no timestamps, no numbers)."""
    if not isinstance(value, str) or not _DAY.match(value):
        raise ValueError("must be a date written YYYY-MM-DD")
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise ValueError("is not a real calendar date") from exc


def check_reference(value: str) -> str:
    """An origin: a 0x address (20 bytes; EIP-55 checksum if mixed-case), stored lower-case, or another
    non-empty reference."""
    if value[:2].lower() == "0x":
        try:
            return address_in(value).lower()
        except ValueError as exc:
            raise ValueError("looks like an address but is not one: 0x and 40 hex digits, with a valid "
                             "EIP-55 checksum if mixed-case") from exc
    if not value:
        raise ValueError("must not be empty")
    return value


def check_currency(value: str) -> str:
    value = value.upper()
    if not _CURRENCY.match(value):
        raise ValueError("must be a currency code of 2 to 10 letters or digits, e.g. USDC, USDT, USD")
    return value


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]


@dataclass(frozen=True)
class IncomeRecord:
    record_date: date
    amount: Decimal
    currency: str
    direction: str
    from_reference: str | None
    description: str | None

    def row(self, connection_id: str) -> dict[str, Any]:
        return {"connection_id": connection_id, "record_date": self.record_date, "amount": self.amount,
                "currency": self.currency, "direction": self.direction,
                "from_reference": self.from_reference, "description": self.description}


@dataclass(frozen=True)
class PulledAccount:
    account_id: str
    holder: str
    records: list[IncomeRecord]
