"""Getting a run out to other tools: tables (CSV, Parquet), Weights & Biases, Prometheus."""
