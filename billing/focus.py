"""Statements as a FOCUS 1.2 cost and usage dataset (CSV), for finance tools that read cloud bills.

FOCUS is the FinOps Foundation's Open Cost and Usage Specification; the columns and their rules
here follow FOCUS_Spec v1.2 (``specification/columns/*.md``, tag ``v1.2``). Every column whose
feature level is *Mandatory* there is present (:data:`MANDATORY`, in the specification's
alphabetical order), then the *Conditional* ones the portal can fill, then the portal's own
columns with the ``x_`` prefix the specification reserves for provider-defined columns.

One row per statement line. How the portal's charges map:

- ``BilledCost`` = ``EffectiveCost`` = ``ListCost`` = ``ContractedCost`` = the line's amount, in
  the statement's currency, rounded to its minor unit as the statement adds it (the portal grants
  no discounts or commitments, so the four are equal — FOCUS asks for all four regardless);
- ``BillingAccountId``/``Name``: the statement's cost centre (who pays), the team's slug/name when
  it has none; ``SubAccountId``/``Name``: the team;
- ``BillingPeriodStart``/``End``: the statement's month, ``ChargePeriodStart``/``End``: the
  line's rate period; local midnights of the billing time zone written in UTC as
  ``YYYY-MM-DDTHH:mm:ssZ`` (FOCUS DateTimeFormat);
- ``ChargeCategory`` ``Usage``; ``ChargeClass`` ``Correction`` for an adjustment line (late usage
  of a month already invoiced), else null — FOCUS: not null exactly when the row corrects a
  previous billing period;
- ``PricingQuantity``/``PricingUnit``: the quantity in the unit the price is quoted in —
  ``GPU-Hours`` (a card-hour; FOCUS UnitFormat ``<singular-unit>-<plural-time-units>``) or
  ``1000000 Tokens``; ``ConsumedQuantity``/``ConsumedUnit``: card-hours or whole tokens;
- ``ProviderName``, ``PublisherName``, ``InvoiceIssuerName``: ``settings.FOCUS_PROVIDER_NAME``
  (the organisation that runs the pool);
- ``ServiceCategory`` ``AI and Machine Learning`` (FOCUS's allowed value for GPU and model
  serving), but ``Storage`` for shared storage and ``Networking`` for egress (allowed values of
  ``specification/columns/servicecategory.md``: a finance tool grouping by category would
  otherwise count storage and egress as GPU spend); ``ServiceName`` the charge basis
  (reserved / used / burst card-hours, tokens, shared storage, network egress);
- ``ChargeDescription``: the basis, what the line is for as the statement names it (the GPU
  or served model, with the pool for burst-pool card-hours; storage and egress name their pool
  only when they have one), the quantity and its unit: "Reserved card-hours: L40S, 2880
  card-hours", "Network egress in Rented, 120 gb", "Shared storage, 500 gb-months".

Nulls are empty cells. Numbers are plain decimals (:func:`pools.web.csv_numbers.plain_number`).
"""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime

from django.conf import settings

from billing.choices import ChargeBasis, LineKind
from billing.conf import billing_zone
from billing.pricing import (
    local_midnight,
    month_bounds,
    priced_quantity,
    quantity_places,
    round_money,
    unit_price_places,
)
from billing.selectors import lines_by_statement
from pools.web.csv_cells import SafeCsvWriter
from pools.web.csv_numbers import plain_number

MANDATORY = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass",
    "ChargeDescription", "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost",
    "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity", "PricingUnit",
    "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
)  # fmt: skip
"""The 21 columns FOCUS 1.2 marks *Mandatory* (feature level in each column's file)."""

CONDITIONAL = (
    "ChargeFrequency", "ConsumedQuantity", "ConsumedUnit", "ContractedUnitPrice",
    "ListUnitPrice", "PricingCategory", "SkuId", "SubAccountId", "SubAccountName", "Tags",
)  # fmt: skip
"""Conditional/recommended columns the portal has the data for."""

CUSTOM = (
    "x_StatementId", "x_StatementStatus", "x_Line", "x_Month", "x_Basis", "x_GpuModel",
    "x_ServedModel",
)  # fmt: skip

COLUMNS = MANDATORY + CONDITIONAL + CUSTOM

# storage and egress (issue 35): FOCUS's own unit names for data stored over time and data sent
_PRICING_UNIT = {"card-hours": "GPU-Hours", "gb-months": "GB-Months", "gb": "GB"}
_CONSUMED_UNIT = {"card-hours": "GPU-Hours", "gb-months": "GB-Months", "gb": "GB"}
_SERVICE_CATEGORY = {ChargeBasis.STORAGE: "Storage", ChargeBasis.EGRESS: "Networking"}
_EXTRA_BASES = frozenset(_SERVICE_CATEGORY)


def _utc(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _day(day: date, zone) -> str:
    return _utc(local_midnight(day, zone))


def _units(unit: str) -> tuple[str, str]:
    """(PricingUnit, ConsumedUnit) of a statement line's unit."""
    if unit in _PRICING_UNIT:
        return _PRICING_UNIT[unit], _CONSUMED_UNIT[unit]
    return "1000000 Tokens", "Tokens"


def focus_rows(statements) -> list[dict[str, str]]:
    """One dict per statement line of ``statements`` (in their order), keyed by :data:`COLUMNS`;
    two queries whatever their number. Money in each statement's currency."""
    zone = billing_zone()
    provider = settings.FOCUS_PROVIDER_NAME
    statements = list(statements)
    lines_of = lines_by_statement([s.pk for s in statements])
    rows = []
    for s in statements:
        month_start, month_end = month_bounds(s.month, zone)
        account_id = s.cost_centre or s.team.slug
        account_name = s.cost_centre or s.team.name
        for line in lines_of.get(s.pk, ()):
            amount = plain_number(round_money(line.amount, s.currency))
            price = plain_number(line.unit_price, unit_price_places(line.unit_price, s.currency))
            pricing_unit, consumed_unit = _units(line.unit)
            places = quantity_places(line.unit)
            priced = priced_quantity(line.quantity, line.unit)
            known = line.basis in ChargeBasis.values
            basis = ChargeBasis(line.basis).label if known else line.basis
            correction = line.kind == LineKind.ADJUSTMENT
            # a storage / egress line's label is its basis (and pool): not said twice
            what = line.label if line.basis in _EXTRA_BASES else f"{basis}: {line.label}"
            description = f"{what}, {line.quantity.normalize():f} {line.unit}"
            if correction:
                description += f" (late usage of {line.period:%Y-%m})"
            rows.append({
                "BilledCost": amount, "BillingAccountId": account_id,
                "BillingAccountName": account_name, "BillingCurrency": s.currency,
                "BillingPeriodEnd": _utc(month_end), "BillingPeriodStart": _utc(month_start),
                "ChargeCategory": "Usage", "ChargeClass": "Correction" if correction else "",
                "ChargeDescription": description,
                "ChargePeriodEnd": _day(line.rate_to, zone),
                "ChargePeriodStart": _day(line.rate_from, zone),
                "ContractedCost": amount, "EffectiveCost": amount,
                "InvoiceIssuerName": provider, "ListCost": amount,
                "PricingQuantity": plain_number(priced, places) if places
                else plain_number(priced.normalize()),
                "PricingUnit": pricing_unit, "ProviderName": provider, "PublisherName": provider,
                "ServiceCategory": _SERVICE_CATEGORY.get(line.basis, "AI and Machine Learning"),
                "ServiceName": basis,
                "ChargeFrequency": "Usage-Based",
                "ConsumedQuantity": plain_number(line.quantity, places),
                "ConsumedUnit": consumed_unit, "ContractedUnitPrice": price,
                "ListUnitPrice": price, "PricingCategory": "Standard",
                "SkuId": line.gpu_model.slug if line.gpu_model_id else line.served_model,
                "SubAccountId": s.team.slug, "SubAccountName": s.team.name,
                "Tags": json.dumps({"team": s.team.slug, "cost_centre": s.cost_centre},
                                   separators=(",", ":")),
                "x_StatementId": str(s.pk), "x_StatementStatus": s.status,
                "x_Line": str(line.position), "x_Month": f"{s.month:%Y-%m}",
                "x_Basis": line.basis, "x_GpuModel": line.gpu_model.slug if line.gpu_model_id
                else "", "x_ServedModel": line.served_model,
            })  # fmt: skip
    return rows


def focus_csv(statements) -> str:
    """:func:`focus_rows` as CSV text, header first (:data:`COLUMNS`)."""
    out = io.StringIO()
    writer = SafeCsvWriter(out)
    writer.writerow(COLUMNS)
    for row in focus_rows(statements):
        writer.writerow([row[c] for c in COLUMNS])
    return out.getvalue()
