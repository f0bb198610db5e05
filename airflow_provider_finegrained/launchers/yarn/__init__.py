"""YARN: everything the provider knows of a ResourceManager.

``launcher`` submits (client or cluster mode), follows and kills an application through the RM's Cluster
Application API; ``capacity`` reads free capacity, the running applications and a queue's headroom.
"""

from airflow_provider_finegrained.launchers.yarn.launcher import YarnLauncher, yarn_cluster_submit_request

__all__ = ["YarnLauncher", "yarn_cluster_submit_request"]
