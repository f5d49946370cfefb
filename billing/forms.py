"""Billing's forms: the Django admin's rate-card form (:mod:`billing.admin`)."""

from django import forms

from billing import models
from billing.errors import RateCardConflict
from billing.services.rates import rate_card_check
from pools.common.errors import InvalidInput


class RateCardForm(forms.ModelForm):
    """A rate card as the Django admin adds or changes it, refused as
    :func:`~billing.services.rates.rate_card_create` refuses one, by the same check
    (:func:`billing.services.rates.rate_card_check`): a month shared with a card of another
    currency is an error on ``currency``, an overlap with another card an error of the form.
    Nothing is saved then."""

    class Meta:
        model = models.RateCard
        fields = ["name", "currency", "effective_from", "effective_to",
                  "replayed_tokens_charged", "replayed_tokens_count_to_quota"]  # fmt: skip

    def clean(self):
        data = super().clean()
        if any(name in self.errors for name in ("currency", "effective_from", "effective_to")):
            return data  # the field's own error says it; the dates cannot be checked yet
        card = models.RateCard(
            pk=self.instance.pk,
            name=data.get("name") or "",
            currency=data["currency"],
            effective_from=data["effective_from"],
            effective_to=data.get("effective_to"),
        )
        try:
            rate_card_check(card)
        except RateCardConflict as exc:
            self.add_error(None, exc.message)
        except InvalidInput as exc:
            for field, errors in exc.data["errors"].items():
                self.add_error(field, errors)
        return data
