"""A sample `data.object` for every event type, fired by `vip trigger` (`POST /v1/events/trigger`): real
deliveries from a test run, the examples of docs/webhooks.md (tests/test_webhook_dev_loop.py holds both
to the OpenAPI schemas and to each other). Kept as JSON text so amounts stay exact decimals."""

from __future__ import annotations

from typing import Any

import simplejson

_SAMPLES = {
    'connection.wallet.created': (
        '{"id":"con_4bdfaf29373f7ac5bb481dbb","type":"wallet","status":"active","network":"local","user_id":"'
        'usr_a83e363308aea5e79604dcb1","provider":"siwe","created_at":"2026-11-22T07:24:48Z","identifier":"0x'
        '90F79bf6EB2c4f870365E785982E1f101E93b906","last_synced_at":"2026-11-22T07:24:48Z"}'
    ),
    'connection.platform.created': (
        '{"id":"con_f16eb4c271eed77b73ff6786","type":"platform","status":"active","user_id":"usr_a83e363308ae'
        'a5e79604dcb1","provider":"paystream","created_at":"2027-03-02T12:00:00Z","identifier":"Jane '
        'Doe","source_type":"payroll","last_synced_at":"2027-03-02T12:00:00Z"}'
    ),
    'connection.revoked': (
        '{"id":"con_4bdfaf29373f7ac5bb481dbb","type":"wallet","status":"revoked","network":"local","user_id":'
        '"usr_a83e363308aea5e79604dcb1","provider":"siwe","created_at":"2026-11-22T07:24:48Z","identifier":"0'
        'x90F79bf6EB2c4f870365E785982E1f101E93b906","last_synced_at":"2026-11-22T07:24:48Z"}'
    ),
    'vip.generating': (
        '{"id":"vip_be756dc1842d1f2b50704179","status":"pending","network":null,"user_id":"usr_a83e363308aea5'
        'e79604dcb1","error_code":null,"fraud_flags":[],"generated_at":null,"wallet_address":null,"income_cur'
        'rency":"USD","income_variance":null,"consistency_rate":null,"data_source_type":null,"payroll_platfor'
        'm":null,"periods_verified":0,"verified_periods":[],"periods_requested":1,"unverified_periods":[],"ve'
        'rification_method":"deterministic_match","data_source_platform":null,"average_verified_amount":null,'
        '"verified_monthly_income_usd":null}'
    ),
    'vip.verified': (
        '{"id":"vip_be756dc1842d1f2b50704179","status":"verified","network":"local","user_id":"usr_a83e363308'
        'aea5e79604dcb1","error_code":null,"fraud_trace":{"history_days":365,"history_from":"2025-12-29T00:00'
        ':00Z","max_hops":4,"self_funded_share":0.5,"transfers_traced":7,"self_funded":0,"fetch_cap_hit":fals'
        'e,"untraced_count":0,"untraced":[],"opaque_count":0,"opaque":[]},"fraud_flags":[],"generated_at":"20'
        '27-03-02T12:00:00Z","wallet_address":"0x90F79bf6EB2c4f870365E785982E1f101E93b906","income_currency":'
        '"USD","income_variance":0.000000,"consistency_rate":1.0000,"data_source_type":"payroll","payroll_pla'
        'tform":"paystream","periods_verified":1,"verified_periods":[{"period":"2027-02","tx_hash":"0x67c0db8'
        'b1eec81b3fa09083b7bf312e8990a42636f18114de0c81290d86a9c01","transfers":[{"tx_hash":"0x67c0db8b1eec81'
        'b3fa09083b7bf312e8990a42636f18114de0c81290d86a9c01","log_index":4,"amount_usd":7000.000000,"block_ti'
        'mestamp":"2027-02-25T12:00:00Z","origin_address":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"}],"ver'
        'ified":true,"payout_date":"2027-02-25","origin_address":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"'
        ',"block_timestamp":"2027-02-25T12:00:00Z","expected_amount":7000.000000,"received_amount":7000.00000'
        '0,"match_confidence":"exact"}],"periods_requested":1,"unverified_periods":[],"verification_method":"'
        'deterministic_match","data_source_platform":"paystream","average_verified_amount":7000.000000,"verif'
        'ied_monthly_income_usd":7000.000000}'
    ),
    'vip.partially_verified': (
        '{"id":"vip_64160e6409533028f9e6b935","status":"partially_verified","network":"local","user_id":"usr_'
        'a83e363308aea5e79604dcb1","error_code":null,"fraud_trace":{"history_days":365,"history_from":"2025-1'
        '2-29T00:00:00Z","max_hops":4,"self_funded_share":0.5,"transfers_traced":7,"self_funded":0,"fetch_cap'
        '_hit":false,"untraced_count":0,"untraced":[],"opaque_count":0,"opaque":[]},"fraud_flags":[{"code":"E'
        'RR_WASH_TRADE_DETECTED","network":"local","tx_hash":"0x0abc2340065c2bcfd94826429b3a5c3ce3803f767da55'
        '56ac5ade930064743f5","log_index":0,"wallet_id":"wal_2218523ff07fd26fe4b84f7a","amount_usd":2000.0000'
        '00,"fraud_type":"wash_trade","wallet_address":"0x90F79bf6EB2c4f870365E785982E1f101E93b906","block_ti'
        'mestamp":"2026-12-28T12:00:00Z","evidence":null},{"code":"ERR_WASH_TRADE_DETECTED","network":"local"'
        ',"tx_hash":"0x77e1dc6a07d27d6eaed5b7ed53b5b0d60392d1a117a66c7aff5f30ed07c14aca","log_index":0,"walle'
        't_id":"wal_2218523ff07fd26fe4b84f7a","amount_usd":1990.000000,"fraud_type":"wash_trade","wallet_addr'
        'ess":"0x90F79bf6EB2c4f870365E785982E1f101E93b906","block_timestamp":"2026-12-29T12:00:00Z","evidence'
        '":null}],"generated_at":"2027-03-02T12:00:00Z","wallet_address":"0x90F79bf6EB2c4f870365E785982E1f101'
        'E93b906","income_currency":"USD","income_variance":1000.000000,"consistency_rate":0.6667,"data_sourc'
        'e_type":"payroll","payroll_platform":"paystream","periods_verified":2,"verified_periods":[{"period":'
        '"2026-12","tx_hash":"0xaa14e3b52fe64cefc73cc1a8206f964f25542b2cee1a35f68066477394c13163","verified":'
        'true,"payout_date":"2026-12-25","origin_address":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC","block'
        '_timestamp":"2026-12-25T12:00:00Z","expected_amount":5000.000000,"received_amount":5000.000000,"matc'
        'h_confidence":"exact"},{"period":"2027-02","tx_hash":"0x67c0db8b1eec81b3fa09083b7bf312e8990a42636f18'
        '114de0c81290d86a9c01","transfers":[{"tx_hash":"0x67c0db8b1eec81b3fa09083b7bf312e8990a42636f18114de0c'
        '81290d86a9c01","log_index":4,"amount_usd":7000.000000,"block_timestamp":"2027-02-25T12:00:00Z","orig'
        'in_address":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"}],"verified":true,"payout_date":"2027-02-25'
        '","origin_address":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC","block_timestamp":"2027-02-25T12:00:'
        '00Z","expected_amount":7000.000000,"received_amount":7000.000000,"match_confidence":"exact"}],"perio'
        'ds_requested":3,"unverified_periods":[{"period":"2027-01","reasons":[{"code":"ERR_INCOME_MISMATCH","'
        'details":{"tolerance_pct":0.05,"expected_amount":5000.000000,"received_amount":0,"actual_variance_pc'
        't":1.000000},"message":"no on-chain inflow matches the income record"}],"verified":false,"reason_cod'
        'es":["ERR_INCOME_MISMATCH"],"expected_amount":5000.000000,"received_amount":0.000000}],"verification'
        '_method":"deterministic_match","data_source_platform":"paystream","average_verified_amount":6000.000'
        '000,"verified_monthly_income_usd":6000.000000}'
    ),
    'vip.unverified': (
        '{"id":"vip_6f2f52b12e5ceaada2250c84","status":"unverified","network":"local","user_id":"usr_a83e3633'
        '08aea5e79604dcb1","error_code":"ERR_INSUFFICIENT_HISTORY","fraud_trace":{"history_days":365,"history'
        '_from":"2025-12-29T00:00:00Z","max_hops":4,"self_funded_share":0.5,"transfers_traced":7,"self_funded'
        '":0,"fetch_cap_hit":false,"untraced_count":0,"untraced":[],"opaque_count":0,"opaque":[]},"fraud_flag'
        's":[],"generated_at":"2027-04-02T12:00:00Z","wallet_address":"0x90F79bf6EB2c4f870365E785982E1f101E93'
        'b906","income_currency":"USD","income_variance":0.000000,"consistency_rate":0.0000,"data_source_type'
        '":"payroll","payroll_platform":"paystream","periods_verified":0,"verified_periods":[],"periods_reque'
        'sted":1,"unverified_periods":[{"period":"2027-03","reasons":[{"code":"ERR_INCOME_MISMATCH","details"'
        ':{"tolerance_pct":0.05,"expected_amount":5000.000000,"received_amount":0,"actual_variance_pct":1.000'
        '000},"message":"no on-chain inflow matches the income record"}],"verified":false,"reason_codes":["ER'
        'R_INCOME_MISMATCH"],"expected_amount":5000.000000,"received_amount":0.000000}],"verification_method"'
        ':"deterministic_match","data_source_platform":"paystream","average_verified_amount":0.000000,"verifi'
        'ed_monthly_income_usd":0}'
    ),
    'vip.failed': (
        '{"id":"vip_c93a970da1a432e02f2d7dd7","status":"error","network":null,"user_id":"usr_a83e363308aea5e7'
        '9604dcb1","error_code":"ERR_MISSING_WALLET","fraud_flags":[],"generated_at":"2027-04-02T12:00:00Z","'
        'wallet_address":null,"income_currency":"USD","income_variance":null,"consistency_rate":null,"data_so'
        'urce_type":null,"payroll_platform":null,"periods_verified":0,"verified_periods":[],"periods_requeste'
        'd":2,"unverified_periods":[],"verification_method":"deterministic_match","data_source_platform":null'
        ',"average_verified_amount":null,"verified_monthly_income_usd":null}'
    ),
    'income.change_detected': (
        '{"vip_id":"vip_be756dc1842d1f2b50704179","user_id":"usr_a83e363308aea5e79604dcb1","change_pct":0.166'
        '667,"detected_at":"2027-03-02T12:00:00Z","previous_vip_id":"vip_64160e6409533028f9e6b935","verified_'
        'monthly_income_usd":7000.000000,"previous_verified_monthly_income_usd":6000.000000}'
    ),
    'fraud.flagged': (
        '{"details":"value returned to the counterparty it came from within the wash-trade window","tx_hash":'
        '"0x0abc2340065c2bcfd94826429b3a5c3ce3803f767da5556ac5ade930064743f5","user_id":"usr_a83e363308aea5e7'
        '9604dcb1","wallet_id":"wal_2218523ff07fd26fe4b84f7a","amount_usd":2000.000000,"flagged_at":"2027-03-'
        '02T12:00:00Z","fraud_type":"wash_trade"}'
    ),
    'risk_score.generated': (
        '{"id":"rsk_f764b01f3d9fcd048d9a2440","vip_id":"vip_be756dc1842d1f2b50704179","pillars":{"volume":{"s'
        'core":700,"weight":0.25,"details":{"income_tier":"mid","annualized_income_usd":84000.000000,"verifie'
        'd_monthly_income_usd":7000.000000},"explanation":"Verified monthly income 7000.000000 USD (mid '
        'tier); full marks from 10000 USD.","weighted_contribution":175},"leverage":{"score":1000,"weight":0.'
        '15,"details":{"dti_ratio":0.0000,"on_chain_debt_signals":[],"estimated_monthly_obligations_usd":0.00'
        '0000},"explanation":"Recurring obligations 0.000000 USD a month, 0.0% of income; 0 lending '
        'protocol(s) repaid.","weighted_contribution":150},"consistency":{"score":1000,"weight":0.40,"details'
        '":{"periods_missed":0,"consistency_rate":1.0000,"periods_verified":1,"longest_streak_months":1},"exp'
        'lanation":"Income verified in 1 of 1 months, longest unbroken run 1 months.","weighted_contribution"'
        ':400},"liquidity_buffer":{"score":1000,"weight":0.20,"details":{"buffer_months":142857.9836,"income_'
        'multiple":142857.9836,"average_usdc_balance":1000005885.000000},"explanation":"Average USDC balance '
        '1000005885.000000 USD is 142857.98 months of income.","weighted_contribution":200}},"user_id":"usr_a'
        '83e363308aea5e79604dcb1","fraud_flags":[],"score_range":{"max":1000,"min":0},"generated_at":"2027-03'
        '-02T12:00:00Z","recommendation":"approve","composite_score":925,"adverse_action_reasons":[],"suggest'
        'ed_credit_limit_usd":14000.000000}'
    ),
    'payment_intent.created': (
        '{"id":"pi_b389bd16c32fe4c4ed4095d3","token":"USDC","status":"pending_approval","network":"local","us'
        'er_id":"usr_42aba9351b5956a5f6547873","metadata":{"loan_id":"L-1","term_months":12},"amount_usd":250'
        '.5,"created_at":"2026-11-22T07:24:51Z","expires_at":"2026-11-22T07:54:51Z","funding_wallet":"0x976EA'
        '74026E726554dB657fA54763abd0C3a0aa9","approval_tx_hash":null,"contract_address":"0x9fE46736679d2D9a6'
        '5F0992F2272dE9f3c7fa6e0","recipient_wallet":"0xe8a29FB68D353D3a4B61988578F3C2De1D503E4C","approval_c'
        'alldata":{"amount":"250500000","spender":"0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0","function":"ap'
        'prove","token_contract":"0x5FbDB2315678afecb367f032d93F642f64180aa3"},"approval_coverage":null}'
    ),
    'payment_intent.approval_confirmed': (
        '{"id":"pi_b389bd16c32fe4c4ed4095d3","token":"USDC","status":"approval_confirmed","network":"local","'
        'user_id":"usr_42aba9351b5956a5f6547873","metadata":{"loan_id":"L-1","term_months":12},"amount_usd":2'
        '50.5,"created_at":"2026-11-22T07:24:51Z","expires_at":"2026-11-22T07:54:51Z","funding_wallet":"0x976'
        'EA74026E726554dB657fA54763abd0C3a0aa9","approval_tx_hash":"0xe38ab18f070c9b179d1f7fb448d9bfc59f70d7d'
        '58371525efd855d97fd5f954f","contract_address":"0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0","recipien'
        't_wallet":"0xe8a29FB68D353D3a4B61988578F3C2De1D503E4C","approval_calldata":{"amount":"250500000","sp'
        'ender":"0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0","function":"approve","token_contract":"0x5FbDB23'
        '15678afecb367f032d93F642f64180aa3"},"approval_coverage":"approval"}'
    ),
    'payment_intent.expired': (
        '{"id":"pi_8417fdec4930364f14b1bd29","token":"USDC","status":"expired","network":"local","user_id":"u'
        'sr_42aba9351b5956a5f6547873","metadata":{"loan_id":"L-1","term_months":12},"amount_usd":5,"created_a'
        't":"2026-11-22T07:24:51Z","expires_at":"2026-11-22T07:54:51Z","funding_wallet":"0x9965507D1a55bcC269'
        '5C58ba16FB37d819B0A4dc","approval_tx_hash":null,"contract_address":"0x9fE46736679d2D9a65F0992F2272dE'
        '9f3c7fa6e0","recipient_wallet":"0xe8a29FB68D353D3a4B61988578F3C2De1D503E4C","approval_calldata":{"am'
        'ount":"5000000","spender":"0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0","function":"approve","token_c'
        'ontract":"0x5FbDB2315678afecb367f032d93F642f64180aa3"},"approval_coverage":null}'
    ),
    'charge.succeeded': (
        '{"id":"ch_ff768881e7d7254ad2b6224e","token":"USDC","status":"succeeded","network":"local","amount_us'
        'd":250.5,"created_at":"2026-11-22T07:24:51Z","executed_at":"2026-11-22T07:24:51Z","failure_code":nul'
        'l,"failure_message":null,"approval_tx_hash":"0xe38ab18f070c9b179d1f7fb448d9bfc59f70d7d58371525efd855'
        'd97fd5f954f","recipient_wallet":"0xe8a29FB68D353D3a4B61988578F3C2De1D503E4C","payment_intent_id":"pi'
        '_b389bd16c32fe4c4ed4095d3","disbursement_tx_hash":"0x93ea0dbb4302f2bce580cf9a85423bbe8b3510345ee513f'
        '46e9883d984032760"}'
    ),
    'charge.failed': (
        '{"id":"ch_da5fc5ad209cf8b05c1e58ec","token":"USDC","status":"failed","network":"local","amount_'
        'usd":40,"created_at":"2026-11-22T07:24:51Z","executed_at":null,"failure_code":"ERR_RECIPIENT_BL'
        'ACKLISTED","failure_message":"USDC refused the transfer: the recipient wallet 0xe8a29FB68D353D3'
        "a4B61988578F3C2De1D503E4C is blacklisted by the token's issuer, so it cannot receive this loan;"
        ' nothing was sent (the token\'s reason: \'Blacklistable: account is blacklisted\')","approval_tx_h'
        'ash":"0x7f9e0f430ad651a3a2dbe3dba3fb6e66c0f59c86b67f04d2e91071e309e13968","recipient_wallet":"0'
        'xe8a29FB68D353D3a4B61988578F3C2De1D503E4C","payment_intent_id":"pi_cc246f4c8bfc40690b704ec0","d'
        'isbursement_tx_hash":null}'
    ),
    'webhook_endpoint.disabled': (
        '{"id":"whe_5e0c2b7d9a1f4e3c8b6d0a2f","url":"http://127.0.0.1:4242/hooks","status":"disabled","create'
        'd_at":"2026-03-02T09:00:00Z","deleted_at":null,"description":null,"disabled_at":"2026-03-05T09:10:00'
        'Z","event_types":["*"],"disabled_reason":"every delivery attempt failed since 2026-03-02T09:00:00Z '
        '(more than 3 days)","previous_secret_expires_at":null}'
    ),
}


def sample_object(event_type: str) -> dict[str, Any]:
    """A fresh copy of the sample object of `event_type` (KeyError for a type without one)."""
    sample: dict[str, Any] = simplejson.loads(_SAMPLES[event_type], use_decimal=True)
    return sample


def sampled_types() -> tuple[str, ...]:
    return tuple(_SAMPLES)
