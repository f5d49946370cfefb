"""Write-side services: one function per state change, each in one transaction."""
