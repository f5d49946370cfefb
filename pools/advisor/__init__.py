"""The troubleshooting advisor (issue #31): the seeds' symptom tables as rules over stored
signals (:mod:`pools.advisor.rules`), the findings they open and close, and where people see
them."""
