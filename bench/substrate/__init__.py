"""Same substrate: the TPC-H pipeline's stage functions in one warm pool, where only the sizing differs."""
