"""Why a charge failed, in words a lender can act on: the disbursement contract's revert decoded (the
token's own reason kept by SafeTokenCall.sol), completed by the token's state at the same block for
tokens that revert without a reason (USDT's bare `require`), becomes a `failure_code` and a
`failure_message`. Pure: no I/O.

Codes (docs/api.md, error catalogue): ERR_RECIPIENT_BLACKLISTED, ERR_FUNDING_WALLET_BLACKLISTED,
ERR_TOKEN_PAUSED, ERR_INSUFFICIENT_BALANCE, ERR_INSUFFICIENT_ALLOWANCE, ERR_TOKEN_TRANSFER_FEE; otherwise
ERR_DISBURSEMENT_REJECTED (refused before anything was sent) or ERR_DISBURSEMENT_REVERTED (mined and
reverted)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from eth_utils import to_checksum_address

from vip.chain.reverts import Revert
from vip.chain.token_reads import TokenState

RECIPIENT_BLACKLISTED = "ERR_RECIPIENT_BLACKLISTED"
FUNDING_WALLET_BLACKLISTED = "ERR_FUNDING_WALLET_BLACKLISTED"
TOKEN_PAUSED = "ERR_TOKEN_PAUSED"
INSUFFICIENT_BALANCE = "ERR_INSUFFICIENT_BALANCE"
INSUFFICIENT_ALLOWANCE = "ERR_INSUFFICIENT_ALLOWANCE"
TRANSFER_FEE = "ERR_TOKEN_TRANSFER_FEE"
REJECTED = "ERR_DISBURSEMENT_REJECTED"
REVERTED = "ERR_DISBURSEMENT_REVERTED"
# Causes the token's state shows (it may change: an unpause, a new approve), and all the named ones.
STATE_CAUSES = (RECIPIENT_BLACKLISTED, FUNDING_WALLET_BLACKLISTED, TOKEN_PAUSED, INSUFFICIENT_BALANCE,
                INSUFFICIENT_ALLOWANCE)
CAUSES = (*STATE_CAUSES, TRANSFER_FEE)
MAX_MESSAGE_CHARS = 600


@dataclass(frozen=True)
class Pull:
    """What the charge asked the token to move."""

    token: str  # symbol
    decimals: int
    funding_wallet: str
    recipient: str
    spender: str
    amount: int  # base units


@dataclass(frozen=True)
class Failure:
    code: str
    message: str


@dataclass(frozen=True)
class Sending:
    """Whether the call was refused before sending (`tx_hash` None) or mined and reverted."""

    tx_hash: str | None = None
    block_number: int | None = None


def _units(amount: int, pull: Pull) -> str:
    return f"{Decimal(amount).scaleb(-pull.decimals):f} {pull.token}"


def _cause_from_reason(text: str) -> str | None:
    """The cause a token's own reason names: USDC's FiatToken messages, our test tokens' errors."""
    lowered = text.lower()
    if "blacklist" in lowered:
        return "blacklisted"
    if "paused" in lowered:
        return TOKEN_PAUSED
    if "exceeds balance" in lowered or lowered.startswith("insufficientbalance"):
        return INSUFFICIENT_BALANCE
    if "exceeds allowance" in lowered or lowered.startswith("insufficientallowance"):
        return INSUFFICIENT_ALLOWANCE
    return None


def obstacle(state: TokenState, pull: Pull) -> str | None:
    """The first switch or shortfall in the token's state that stops the pull, or None. A blacklisted
    recipient comes last: USDT only checks the sender, so its recipient flag explains nothing when
    something else is wrong."""
    if state.paused:
        return TOKEN_PAUSED
    if state.owner_blacklisted:
        return FUNDING_WALLET_BLACKLISTED
    if state.balance < pull.amount:
        return INSUFFICIENT_BALANCE
    if state.allowance < pull.amount:
        return INSUFFICIENT_ALLOWANCE
    if state.recipient_blacklisted:
        return RECIPIENT_BLACKLISTED
    return None


def _which_blacklisted(state: TokenState | None) -> str | None:
    if state is None:
        return None
    if state.owner_blacklisted:
        return FUNDING_WALLET_BLACKLISTED
    if state.recipient_blacklisted:
        return RECIPIENT_BLACKLISTED
    return None


def cause_of(revert: Revert, state: TokenState | None, pull: Pull) -> str | None:
    """The failure code of a cause we can name, or None."""
    if revert.error == "TokenShortDelivery":
        return TRANSFER_FEE
    reason = revert.token_reason.text if revert.token_reason else None
    named = _cause_from_reason(reason or revert.text or "") if (reason or revert.text) else None
    if named == "blacklisted":
        return _which_blacklisted(state)
    if named is not None:
        return named
    if revert.error in ("TokenReverted", "", "unknown") and state is not None:
        return obstacle(state, pull)
    return None


def _explanation(code: str, state: TokenState | None, pull: Pull, revert: Revert) -> str:
    wallet, recipient = to_checksum_address(pull.funding_wallet), to_checksum_address(pull.recipient)
    if code == RECIPIENT_BLACKLISTED:
        return (f"{pull.token} refused the transfer: the recipient wallet {recipient} is blacklisted by the "
                "token's issuer, so it cannot receive this loan")
    if code == FUNDING_WALLET_BLACKLISTED:
        return (f"{pull.token} refused the transfer: the funding wallet {wallet} is blacklisted by the "
                "token's issuer, so nothing can move from it")
    if code == TOKEN_PAUSED:
        return f"{pull.token} is paused by its issuer: no transfer moves until it is unpaused"
    if code == INSUFFICIENT_BALANCE:
        held = f" holds {_units(state.balance, pull)}," if state is not None else ""
        return (f"the funding wallet {wallet}{held} less than the {_units(pull.amount, pull)} to pay: "
                "fund it and create a new payment intent")
    if code == INSUFFICIENT_ALLOWANCE:
        left = f" is {_units(state.allowance, pull)}," if state is not None else ""
        return (f"the funding wallet's allowance to the spender {to_checksum_address(pull.spender)}{left} "
                f"less than the {_units(pull.amount, pull)} to pay (revoked, lowered or spent since the "
                "approval was confirmed): approve again and create a new payment intent")
    if code == TRANSFER_FEE:
        got = f" (it would receive {_units(revert.delivered[1], pull)})" if revert.delivered else ""
        return (f"{pull.token} takes a fee on transfers: the recipient would not receive the full "
                f"{_units(pull.amount, pull)}{got}, and a loan is paid in full or not at all")
    return "the disbursement contract refused the call"


def _what_happened(sending: Sending) -> str:
    if sending.tx_hash is None:
        return "nothing was sent"
    return f"transaction {sending.tx_hash} reverted in block {sending.block_number}; nothing moved"


def _token_said(revert: Revert) -> str:
    reason = revert.token_reason
    if reason is not None:
        return f"the token's reason: {reason.text!r}" if reason.text else "the token gave no reason"
    if revert.error == "":
        return "no revert data"
    return f"the contract's error: {revert.text or revert.error or revert.raw}"


def explain(revert: Revert, state: TokenState | None, pull: Pull, sending: Sending) -> Failure:
    """The charge's failure_code and failure_message."""
    code = cause_of(revert, state, pull)
    generic = REJECTED if sending.tx_hash is None else REVERTED
    text = (f"{_explanation(code or generic, state, pull, revert)}; {_what_happened(sending)} "
            f"({_token_said(revert)})")
    return Failure(code or generic, text[:MAX_MESSAGE_CHARS])
