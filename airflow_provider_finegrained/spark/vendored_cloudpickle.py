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
import zipimport
from types import CodeType

_MODULE = "pyspark.cloudpickle.cloudpickle"


def _code() -> tuple[CodeType, str]:
    """The code of pyspark's ``cloudpickle/cloudpickle.py`` and where it came from, pyspark not imported."""
    spec = importlib.util.find_spec("pyspark")  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("pyspark is not installed: the provider pickles stage callables with its cloudpickle")
    code: CodeType | None
    if isinstance(spec.loader, zipimport.zipimporter):
        # A spark-submit'd driver imports pyspark from pyspark.zip (its PYTHONPATH): no file to open.
        where = os.path.join(spec.loader.archive, "pyspark", "cloudpickle")  # the importer of that folder
        code = zipimport.zipimporter(where).get_code(_MODULE)
    else:
        where = os.path.join(next(iter(spec.submodule_search_locations)), "cloudpickle", "cloudpickle.py")
        code = importlib.machinery.SourceFileLoader(__name__, where).get_code(__name__)
    if code is None:
        raise ImportError(f"no code in {where}")
    return code, where


_CODE, _PATH = _code()
# The vendored file imports only the standard library; its functions get this module's name.
exec(_CODE, globals())
