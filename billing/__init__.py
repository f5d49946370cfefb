"""Rate cards, usage metering, statements and cost reports (built on pools)."""
