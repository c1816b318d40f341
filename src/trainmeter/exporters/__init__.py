"""Getting a finished run out to other tools: tables (CSV, Parquet) and Weights & Biases."""
