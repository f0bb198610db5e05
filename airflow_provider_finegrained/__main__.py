import sys

from airflow_provider_finegrained.cli.main import main

sys.exit(main())
