"""Access: API tokens (hashed, one per client, expiring, revocable) and users' admin rights,
each change written to the audit trail."""
