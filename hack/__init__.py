"""Developer tooling; importable so tests and the benchmark share one launcher."""
