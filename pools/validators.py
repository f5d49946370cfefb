"""Field validators the sub-domains share: node names and slugs."""

from django.core.validators import RegexValidator

# RFC 1123 host names, plus '_' which Slurm node names allow. No spaces.
hostname_validator = RegexValidator(
    r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})$",
    "A node name is letters, digits, '.', '-' and '_' (no spaces), at most 253 characters.",
)

# Kubernetes object names of one DNS-1123 label (a Kueue cohort, a Volcano queue, a label value).
dns_label_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    "Lower-case letters, digits and '-', starting and ending with a letter or digit, at most "
    "63 characters (a DNS-1123 label).",
)

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9_-]*$", "Lower-case letters, digits, - and _.")
