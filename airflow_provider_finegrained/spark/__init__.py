"""The Spark side: finding Java and Spark, building spark-submit commands, running and killing them.

No Airflow imports here: the hook and the operator sit above this package.
"""
