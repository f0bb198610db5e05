"""TaskFlow decorators (registered as ``@task.spark_stage`` through the provider info)."""
