"""A test auth manager: Airflow's SimpleAuthManager, except that user ``outsider`` may not read one DAG.

Configured in the api-server the UI tests start (``AIRFLOW__CORE__AUTH_MANAGER``); real Airflow
machinery with a rule of ours, so the plugin's API is tested against a user who may not read the DAG.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

from tests.ui.dag_text import DAG_ID

OUTSIDER = "outsider"


class DenyingAuthManager(SimpleAuthManager):  # type: ignore[misc]
    """Denies every access to :data:`DAG_ID` for :data:`OUTSIDER`."""

    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if user.get_name() == OUTSIDER and details is not None and details.id == DAG_ID:
            return False
        return bool(super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details))
