"""Kubernetes: everything the provider knows of a Kubernetes API server.

``launcher`` submits (client or cluster mode, the driver pod named up front) and follows an application;
``commands`` holds the exact spark-submit commands and API requests it sends (Kubernetes does not run here:
tests check those argument lists and requests).
"""

from airflow_provider_finegrained.launchers.kubernetes.launcher import KubernetesLauncher, follow_status, kill_followed

__all__ = ["KubernetesLauncher", "follow_status", "kill_followed"]
