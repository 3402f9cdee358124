"""The operator account that calls Disbursement.disburse, from config: the key itself ($VIP_OPERATOR_KEY)
or an encrypted keystore file and its password. The key is never logged and never leaves this object."""

from __future__ import annotations

import json
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from vip.config import DisbursementConfig


class OperatorKeyMissing(RuntimeError):
    """No operator key is configured: intents work, charges cannot execute."""


def load_operator(config: DisbursementConfig) -> LocalAccount:
    key: str | bytes
    if config.operator_private_key is not None:
        key = config.operator_private_key.get_secret_value()
    elif config.operator_keystore:
        if config.operator_keystore_password is None:
            raise OperatorKeyMissing("operator_keystore is set but $VIP_OPERATOR_KEYSTORE_PASSWORD is not")
        keystore = json.loads(Path(config.operator_keystore).read_text())
        key = Account.decrypt(keystore, config.operator_keystore_password.get_secret_value())
    else:
        raise OperatorKeyMissing("no operator key: set $VIP_OPERATOR_KEY or disbursement.operator_keystore")
    account: LocalAccount = Account.from_key(key)  # eth-account leaves it untyped
    return account


def load_deployer(config: DisbursementConfig) -> LocalAccount:
    """The key that deploys and owns the disbursement contract: $VIP_DEPLOYER_KEY, or
    `disbursement.deployer_keystore` with $VIP_DEPLOYER_KEYSTORE_PASSWORD; without either, the operator's."""
    if config.deployer_private_key is not None:
        deployer: LocalAccount = Account.from_key(config.deployer_private_key.get_secret_value())
        return deployer
    if config.deployer_keystore:
        if config.deployer_keystore_password is None:
            raise OperatorKeyMissing("deployer_keystore is set but $VIP_DEPLOYER_KEYSTORE_PASSWORD is not")
        keystore = json.loads(Path(config.deployer_keystore).read_text())
        key = Account.decrypt(keystore, config.deployer_keystore_password.get_secret_value())
        from_keystore: LocalAccount = Account.from_key(key)
        return from_keystore
    try:
        return load_operator(config)
    except OperatorKeyMissing:
        raise OperatorKeyMissing("no deployer key: set $VIP_DEPLOYER_KEY (or disbursement.deployer_keystore "
                                 "and $VIP_DEPLOYER_KEYSTORE_PASSWORD), or the operator's key") from None
