"""The core domain: inventory, teams, requests, allocations, sizing, reclamation, audit trail."""
