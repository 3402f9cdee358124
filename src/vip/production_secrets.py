"""What a production start refuses: missing secrets, the public development values that a development
stack runs with, an operator key given to the API (which never signs), and development-only settings
(`vip serve` and `vip index` exit 2 naming each)."""

from __future__ import annotations

from eth_account import Account

from vip.config import (
    DEV_STATE_SECRET,
    DEV_TOKEN_KEY,
    ENV_METRICS_TOKEN,
    ENV_OPERATOR_KEY,
    ENV_OPERATOR_KEYSTORE_PASSWORD,
    ENV_STATE_SECRET,
    ENV_TOKEN_KEY,
    Settings,
)
from vip.token_cipher import decode_key, parse_keyring

MIN_STATE_SECRET_CHARS = 32
# Anvil's well-known development accounts (mnemonic "test test ... junk"): their keys are public.
DEV_OPERATOR_ADDRESSES = frozenset({
    "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266", "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc", "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
    "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65", "0x9965507d1a55bcc2695c58ba16fb37d819b0a4dc",
    "0x976ea74026e726554db657fa54763abd0c3a0aa9", "0x14dc79964da2c08b23698b3d3cc7ca32193d9955",
    "0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f", "0xa0ee7a142d267c1f36714e4a8f75612f20a79720",
})


def production_secret_problems(settings: Settings, command: str = "index") -> list[str]:
    """Each secret that is missing or a public development value, naming its variable, for `command`
    (`serve` or `index`); empty in a development stack (Settings.is_development) or when all is well.
    The operator key belongs to the daemon alone: `index` needs it where a followed network disburses,
    `serve` refuses it (a compromised API process must hold nothing that signs)."""
    if settings.is_development:
        return []
    problems = []
    if settings.webhooks.allow_http:
        problems.append("webhooks.allow_http is true (http and inward webhook URLs are for local "
                        "development only)")
    dev_key = decode_key(DEV_TOKEN_KEY)
    if any(key == dev_key for _, key in parse_keyring(settings.api.token_key.get_secret_value())):
        problems.append(f"{ENV_TOKEN_KEY} is unset or holds the public development key")
    state = settings.api.state_secret
    if state == DEV_STATE_SECRET or len(state) < MIN_STATE_SECRET_CHARS:
        problems.append(f"{ENV_STATE_SECRET} is unset, the development value or shorter than "
                        f"{MIN_STATE_SECRET_CHARS} characters")
    token = settings.api.metrics_token
    if token is not None and len(token.get_secret_value()) < MIN_STATE_SECRET_CHARS:
        problems.append(f"{ENV_METRICS_TOKEN} is shorter than {MIN_STATE_SECRET_CHARS} characters")
    if command == "serve":
        if settings.operator_key_given or settings.disbursement.operator_keystore is not None:
            problems.append(f"{ENV_OPERATOR_KEY} (or disbursement.operator_keystore, "
                            f"{ENV_OPERATOR_KEYSTORE_PASSWORD}) is set for the API, which never signs: give "
                            "the operator key to `vip index` only")
    elif settings.disburses:
        d = settings.disbursement
        if d.operator_private_key is not None:
            try:
                address = Account.from_key(d.operator_private_key.get_secret_value()).address.lower()
            except (ValueError, TypeError):
                problems.append(f"{ENV_OPERATOR_KEY} is not a private key")
            else:
                if address in DEV_OPERATOR_ADDRESSES:
                    problems.append(f"{ENV_OPERATOR_KEY} is a public development key (Anvil's)")
        elif d.operator_keystore is None:
            problems.append(f"{ENV_OPERATOR_KEY} is unset (or set disbursement.operator_keystore)")
        elif d.operator_keystore_password is None:
            problems.append(f"{ENV_OPERATOR_KEYSTORE_PASSWORD} is unset")
    return problems
