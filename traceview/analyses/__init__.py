"""Pure functions from a Trace's DataFrames to Reports (one module per analysis)."""
