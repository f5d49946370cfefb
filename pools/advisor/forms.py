"""The advisor's form: the reason given when acknowledging or muting a finding."""

from __future__ import annotations

from django import forms

from pools.advisor.services import MAX_REASON_CHARS


class TriageForm(forms.Form):
    reason = forms.CharField(max_length=MAX_REASON_CHARS, strip=True)
