"""The vocabulary every sub-domain shares: choices.py (the model enumerations), errors.py
(DomainError and its kinds, which the API turns into status codes) and validators.py (names,
slugs, date range, card bounds)."""
