"""The utilisation fleet (:mod:`utilisation_support`) for the utilisation tests; a module that
defines its own ``fleet`` uses its own."""

from utilisation_support import fleet  # noqa: F401
