"""pyspark's vendored cloudpickle, without importing pyspark: ``dumps``, ``register_pickle_by_value`` etc.

A task pickles its stage callables before its region starts. ``from pyspark import cloudpickle`` runs
``pyspark/__init__`` (the RDD and SQL modules, py4j: 0.6-3 s, by load) although cloudpickle itself
needs only the standard library. Loading ``pyspark/cloudpickle/cloudpickle.py`` by its file under
``pyspark.cloudpickle.cloudpickle`` would not help: pickling a global imports its module's top-level
package, so the first ``dumps`` would import pyspark anyway. So this module runs that file's code as its
own: pickles name this module (``airflow_provider_finegrained.spark.vendored_cloudpickle._make_function``
...), which any process of the provider imports in milliseconds, and they are made by the exact
cloudpickle of the installed pyspark (no second copy to keep in step). Unpickle them with
``pickle.loads`` or pyspark's ``cloudpickle.loads`` (the same function).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os


def _source() -> str:
    spec = importlib.util.find_spec("pyspark")  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("pyspark is not installed: the provider pickles stage callables with its cloudpickle")
    return os.path.join(next(iter(spec.submodule_search_locations)), "cloudpickle", "cloudpickle.py")


_PATH = _source()
_CODE = importlib.machinery.SourceFileLoader(__name__, _PATH).get_code(__name__)
if _CODE is None:
    raise ImportError(f"no code in {_PATH}")
# The vendored file imports only the standard library; its functions get this module's name.
exec(_CODE, globals())
