"""The plugin's routes under the real api-server refuse every token Airflow did not sign for the user asking:
none, not a JWT, ``alg: none``, signed with another key, a genuine token whose claims were changed."""

from __future__ import annotations

import base64
import json
from typing import Any

import jwt
import pytest

from tests.ui.conftest import Server
from tests.ui.dag_text import DAG_ID

pytestmark = [pytest.mark.slow, pytest.mark.security]

ROUTES = [
    f"/finegrained/api/dags/{DAG_ID}/history",
    f"/finegrained/api/dags/{DAG_ID}/runs/any-run",
    f"/finegrained/dags/{DAG_ID}/history",
    f"/finegrained/dags/{DAG_ID}/runs/any-run",
]


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _forgeries(admin: str, outsider: str) -> dict[str, str]:
    """Tokens claiming to be the admin that Airflow never signed so."""
    header = jwt.get_unverified_header(admin)
    claims = jwt.decode(admin, options={"verify_signature": False})
    outsider_header, _, outsider_signature = outsider.split(".")
    return {
        "not a JWT": "not-a-jwt",
        "alg none": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}.",
        "alg none, no signature part": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}",
        "signed with another key": jwt.encode(claims, "k" * 64, algorithm=header["alg"], headers=header),
        # The outsider's genuine signature over the admin's claims.
        "claims changed": f"{outsider_header}.{_b64(claims)}.{outsider_signature}",
    }


def test_missing_wrong_forged_and_valid_tokens(api_server: Server) -> None:
    admin, outsider = api_server.token("admin"), api_server.token("outsider")
    assert api_server.get(ROUTES[0], admin)[0] == 200  # the genuine token of a user who may read the DAG
    for route in ROUTES:
        assert api_server.get(route)[0] == 401, route
        assert api_server.get(route, outsider)[0] == 403, route  # genuine, but may not read this DAG
        for what, token in _forgeries(admin, outsider).items():
            assert api_server.get(route, token)[0] == 403, (route, what)
