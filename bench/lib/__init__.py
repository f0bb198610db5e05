"""The library every experiment of the lab shares; each concern in one module.

- :mod:`~bench.lib.pipeline`: the TPC-H example pipeline as data, its tables and the runner of its stages
  (:func:`~bench.lib.pipeline.run_stages`); :mod:`~bench.lib.answers` checks the answers agree, and
  :mod:`~bench.lib.stage_app` is the application a plain spark-submit runs some stages with.
- :mod:`~bench.lib.measure`: a measured process (wall, CPU, peak memory of its tree);
  :mod:`~bench.lib.spark_metrics`: what Spark says an application did (event logs, the status REST API).
- :mod:`~bench.lib.stats`: medians, ratios and the exact Mann-Whitney test.
- :mod:`~bench.lib.report`: the machine, the command, and the JSON and Markdown result files.
- :mod:`~bench.lib.session`: Spark sessions and submissions, Spark's defaults, and each stage's settings as
  the provider decides them (its one decision path, ``airflow_provider_finegrained.execution.decision``).
- :mod:`~bench.lib.sweep`: one sweep over candidate partition counts, and the orders runs alternate in.
- :mod:`~bench.lib.airflow` runs Airflow (``dags test`` homes, ``airflow standalone``);
  :mod:`~bench.lib.provider` calls the provider's command line (warm pools, loopback clusters, reports).

The provider is used only through its public names (a package's ``__all__``, the documented entry points and
its command line): ``tests/structure`` checks it.
"""
