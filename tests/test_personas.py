"""Personas through the pytest plugin, as a lender's own test file uses them: each preset borrower,
made on the plugin's stack, produces the VIP status, verified months, fraud flags and risk
recommendation the catalogue promises (real Anvil, PostgreSQL, indexer daemon and API)."""

from __future__ import annotations

import pytest

from vip.personas.catalogue import PERSONAS
from vip.testing import VipClient


@pytest.mark.parametrize("name", sorted(PERSONAS))
def test_persona_produces_its_outcome(name: str, vip_client: VipClient, vip_persona):
    persona = vip_persona(name)
    expected = persona["expected"]
    vip = vip_client.wait_for_vip(persona["user_id"])
    flags = sorted({flag["code"] for flag in vip["fraud_flags"]})
    score = vip_client.get("/v1/risk-score", user_id=persona["user_id"], vip_id=vip["id"])
    recommendation = score.body["risk_score"]["recommendation"] if score.status == 200 else None
    got = (vip["status"], vip["periods_verified"], flags, recommendation)
    shown = score.body["risk_score"]["composite_score"] if score.status == 200 else score.error_code
    assert got == (expected["status"], expected["periods_verified"], expected["fraud_flags"],
                   expected["recommendation"]), (name, shown)
    if expected["recommendation"] is None:  # no verified period: no score, as the spec says
        assert (score.status, score.error_code) == (422, "ERR_INSUFFICIENT_HISTORY")
