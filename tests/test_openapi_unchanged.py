"""The served OpenAPI document is the contract lenders generate clients from: moving code between packages
must not change it. The snapshot was taken from the served document before the move into one namespace;
a deliberate change to the interface updates the snapshot in the same commit."""

from __future__ import annotations

import json

from tests.support.paths import REPO_ROOT
from vip.api.openapi import document

SNAPSHOT = REPO_ROOT / "tests" / "data" / "openapi-before-namespace.json"
BASE_URL = "http://snapshot.invalid"


def test_served_document_equals_the_snapshot_taken_before_the_move():
    served = json.loads(json.dumps(document(BASE_URL), sort_keys=True))
    assert served == json.loads(SNAPSHOT.read_text())
