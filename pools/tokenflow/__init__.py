"""Token flow per agent task: per-call gateway records grouped by a task id (issue #31 item 3)."""
