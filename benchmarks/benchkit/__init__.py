"""What the benchmark scripts share."""
