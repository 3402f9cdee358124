"""The served OpenAPI document is the contract lenders generate clients from: moving code must not change
it. The snapshot was first taken from the served document before the move into one namespace (it held
through that move unchanged); a deliberate change to the interface regenerates it in the same commit:

    .venv/bin/python -c "import json; from vip.api.openapi import document; \
        print(json.dumps(document('http://snapshot.invalid'), indent=1, sort_keys=True))" \
        > tests/data/openapi.json
"""

from __future__ import annotations

import json

from tests.support.paths import REPO_ROOT
from vip.api.openapi import document

SNAPSHOT = REPO_ROOT / "tests" / "data" / "openapi.json"
BASE_URL = "http://snapshot.invalid"


def test_served_document_equals_the_reviewed_snapshot():
    served = json.loads(json.dumps(document(BASE_URL), sort_keys=True))
    assert served == json.loads(SNAPSHOT.read_text())
