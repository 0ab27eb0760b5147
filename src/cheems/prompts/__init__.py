"""The prompt side of the paper: a prompt pool deduplicated, kept out of the benchmarks, and placed in the taxonomy."""
