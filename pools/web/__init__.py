"""What the sub-domains' pages and APIs share: pages.py (the pool-admin guard, filtered and
exported lists, the plain select), api.py (API permissions, fields, pagination), csv_cells.py (the
one CSV writer) and csv_numbers.py (plain decimals in every CSV)."""
