"""Bridges to other trace-analysis tools. Each bridge imports its tool only when called."""
