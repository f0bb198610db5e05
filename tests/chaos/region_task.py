"""A stand-in for an Airflow task process: runs one real local-mode region through the local launcher.

``python region_task.py WORKDIR MARKER``. The region's one stage (an application file run by
``runtime/driver.py``) records the Spark settings its driver sees, then blocks in Python workers
(``mapPartitions`` that sleeps), each worker leaving ``worker-<pid>`` in WORKDIR. Every process of the
region carries ``FINEGRAINED_KILL_TEST=<MARKER>`` in its environment. The harness prints its pid and
waits for the launch; the region trial (region.py) or its test kills it with SIGKILL, as a worker's OOM
killer or ``kill -9`` would.

Uses only what the provider had before the kill fix too, so the same harness reproduces the orphans on
an older checkout (PYTHONPATH=<old checkout> python region_task.py ...).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

MARKER_ENV = "FINEGRAINED_KILL_TEST"
SECRETS = {
    "spark.authenticate.secret": "sh4red-s3cret=a:b\\c #!x \u00e9",
    "spark.hadoop.fs.s3a.secret.key": "s3a-Secr3tKey/abc+def",
}
PUBLIC = {"spark.ui.enabled": "false", "spark.driver.memory": "640m", "spark.finegrained.kill.test": "public-value"}

APP = textwrap.dedent(
    """
    import json, os, sys, time
    from airflow_provider_finegrained.runtime.api import current_stage

    stage = current_stage()
    spark, work = stage.spark, sys.argv[1]
    conf = spark.sparkContext.getConf()
    keys = json.loads(sys.argv[2])
    seen = {key: conf.get(key, None) for key in keys}
    try:  # the driver's own parent-death signal (this runs in the driver process); None before the fix
        from airflow_provider_finegrained.spark.parent_death import parent_death_signal
        seen["driver_parent_death_signal"] = parent_death_signal()
    except ImportError:
        seen["driver_parent_death_signal"] = None
    with open(os.path.join(work, "seen.json.tmp"), "w") as handle:
        json.dump(seen, handle)
    os.replace(os.path.join(work, "seen.json.tmp"), os.path.join(work, "seen.json"))

    def slow(rows):
        open(os.path.join(work, f"worker-{os.getpid()}"), "w").close()
        time.sleep(600)
        yield from rows

    df = spark.range(0, 4, numPartitions=2)
    df.rdd.mapPartitions(slow).count()
    stage.publish(df)
    """
)


def main(work: str, marker: str) -> int:
    from airflow_provider_finegrained.launchers.base import LaunchSpec
    from airflow_provider_finegrained.launchers.local import LocalLauncher
    from airflow_provider_finegrained.runtime.job import RegionJob, StageJob
    from airflow_provider_finegrained.settings import ConnectionSettings

    app = os.path.join(work, "app.py")
    with open(app, "w") as file:
        file.write(APP)
    keys = [*SECRETS, *PUBLIC]
    stage = StageJob("slow", [], {}, None, application=app, application_args=[work, json.dumps(keys)])
    job = RegionJob("region-0", "kill_test", "manual__1", 1, work, work, [stage])
    settings = ConnectionSettings.from_connection_fields("local[2]", {}, airflow_home=work)
    launcher = LocalLauncher(settings)
    spec = LaunchSpec(
        "region-0", "kill_test.region-0", job.dump(), conf={**PUBLIC, **SECRETS}, env={MARKER_ENV: marker}
    )
    handle = launcher.submit(spec)
    print(f"HARNESS_PID {os.getpid()}", flush=True)
    result = launcher.wait(handle)
    print(f"HARNESS_DONE {result.returncode}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
