"""YARN: everything the provider knows of a ResourceManager.

``launcher`` submits (client or cluster mode) and follows an application; ``applications`` holds the RM's
Cluster Application API (status, kill, the state mapping); ``capacity`` reads free capacity, the running
applications and a queue's headroom.
"""

from airflow_provider_finegrained.launchers.yarn.launcher import YarnLauncher, yarn_cluster_submit_request

__all__ = ["YarnLauncher", "yarn_cluster_submit_request"]
