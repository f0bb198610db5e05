"""A shared cluster's cost: K concurrent DAG runs on one loopback standalone cluster, per policy (issue 15, item 2)."""
