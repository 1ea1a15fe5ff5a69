"""Generic plumbing beside the product: clocks, once per process, pauses, rate-limit windows, deadlines."""
