"""One implementation per way a region reaches Spark (local, standalone, YARN, Kubernetes, warm pool)."""
