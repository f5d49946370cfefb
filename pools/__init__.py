"""The core domain: inventory, teams, requests, allocations, sizing, reclamation and the audit trail."""
