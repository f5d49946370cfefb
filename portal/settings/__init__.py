"""Settings modules: ``base`` (everything, from the environment) and ``test``."""
