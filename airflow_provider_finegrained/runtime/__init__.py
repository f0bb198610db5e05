"""Code that runs inside the Spark driver (and in the operator): writing, committing and reading outputs.

Heavy dependencies (pyspark, pyarrow) are imported inside functions only.
"""
