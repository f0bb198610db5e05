"""Storage as one small layer over URIs: fsspec on the Python side, Hadoop's filesystems on Spark's.

Modules: :mod:`.locations` (pure: roots, layout, containment, what Spark is given),
:mod:`.filesystem` (every filesystem call, through fsspec), :mod:`.classpath` (which Hadoop
filesystem a scheme needs on Spark's classpath), :mod:`.hadoop_conf` (credentials as
``spark.hadoop.*`` settings and back), :mod:`.probe` (a real write, read and delete under a root).
No Airflow and no pyspark imports.
"""
