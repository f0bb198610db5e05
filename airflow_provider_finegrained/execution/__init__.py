"""Run-time decisions for a region: from a DAG plan and measured upstream sizes to a region job."""
