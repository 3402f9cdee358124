"""The development keys written out in vip.devstack.anvil are the accounts Anvil makes from its mnemonic."""

from __future__ import annotations

from eth_account import Account

from vip.devstack.anvil import DEV_MNEMONIC, DEV_PRIVATE_KEYS


def test_the_written_out_dev_keys_are_the_mnemonic_s_first_accounts():
    Account.enable_unaudited_hdwallet_features()
    derived = tuple("0x" + Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}").key.hex()
                    for i in range(len(DEV_PRIVATE_KEYS)))
    assert derived == DEV_PRIVATE_KEYS
    assert len(DEV_PRIVATE_KEYS) == 10
