"""Token flow pages and API (they show money, so they sit on the billing floor)."""
