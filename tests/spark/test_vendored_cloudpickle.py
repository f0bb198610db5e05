"""pyspark's vendored cloudpickle loaded without pyspark: pickles made in a fresh process that never imports
pyspark load with pyspark's own ``cloudpickle.loads`` (as the region's driver does)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark import cloudpickle

PYSPARK_ZIP = Path(cloudpickle.__file__).parents[1] / "python" / "lib" / "pyspark.zip"
"""What a spark-submit'd driver imports pyspark from (its PYTHONPATH): no cloudpickle.py file to open."""

PICKLE = textwrap.dedent(
    """
    import sys
    from collections import namedtuple

    from airflow_provider_finegrained.spark import vendored_cloudpickle as cloudpickle

    Point = namedtuple("Point", "x y")

    class Offset:
        def __init__(self, by):
            self.by = by

    def stage(x, offset=Offset(3)):
        return Point(x + offset.by, sys.version_info.major)

    sys.stdout.buffer.write(cloudpickle.dumps(stage))
    print(cloudpickle._PATH, file=sys.stderr)
    sys.stderr.write("pyspark imported: " + str(any(m.split(".")[0] == "pyspark" for m in sys.modules)))
    """
)


@pytest.mark.parametrize("from_zip", [False, True], ids=["site-packages", "pyspark.zip"])
def test_a_callable_pickled_without_pyspark_loads_with_pysparks_cloudpickle(from_zip: bool) -> None:
    env = dict(os.environ)
    if from_zip:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYSPARK_ZIP), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", PICKLE], capture_output=True, check=True, env=env)
    where, imported = done.stderr.decode().splitlines()[-2:]
    assert imported == "pyspark imported: False"
    assert where.startswith(str(PYSPARK_ZIP)) == from_zip, where
    assert b"airflow_provider_finegrained.spark.vendored_cloudpickle" in done.stdout
    stage = cloudpickle.loads(done.stdout)
    assert stage(1) == (4, sys.version_info.major) and type(stage(1)).__name__ == "Point"


def test_it_is_the_installed_pysparks_cloudpickle() -> None:
    from airflow_provider_finegrained.spark import vendored_cloudpickle

    assert cloudpickle.cloudpickle.__file__ == vendored_cloudpickle._PATH
    assert vendored_cloudpickle.DEFAULT_PROTOCOL == cloudpickle.DEFAULT_PROTOCOL
    assert vendored_cloudpickle.dumps is not cloudpickle.dumps  # its own functions, named after it
