"""Shared-card chargeback (issue 36 item 4): the tenants of one time-sliced, MPS or MIG-shared
card and its idle remainder add up to the card-hour exactly, to the cent. Pure: no ORM.

A card's window is the billing month (cut at rate periods: one split per period, as every
statement line is). Each tenant's **card-seconds** in the window, by basis:

- **time-slicing / MPS** (NVIDIA k8s-device-plugin ``sharing.timeSlicing`` / ``sharing.mps``
  ``resources[].replicas``: the card is advertised as ``R`` ``nvidia.com/gpu``): a pod holding
  ``k`` of the ``R`` replicas for ``t`` seconds uses ``t × k / R`` card-seconds;
- **MIG**: a slice of ``g`` of the card's ``G`` compute slices for ``t`` seconds uses
  ``t × g / G`` (:func:`pools.capacity.slices.slice_share`, the share slices are billed at);
- **DCGM utilisation** (dcgm-exporter ``DCGM_FI_DEV_GPU_UTIL`` labelled ``pod``/``namespace``,
  where the site attributes utilisation per pod, e.g. under MPS): a pod at an average ``u`` %
  for ``t`` seconds uses ``t × u / 100``.

At no instant may the tenants hold more than the whole card (the replicas held are at most
``R``, the slices at most ``G``, the utilisations at most 100 %): a card whose data says so is
refused (:class:`CardOverShared`), never billed above its card-hour. The **idle remainder** is
the window's seconds less the tenants' card-seconds.

Money: the card's window is priced once, ``round(window seconds × price / 3600)``
(:func:`billing.pricing.card_hour_amount`, the statements' one rounding), then split over the
tenants and the idle remainder in proportion to their card-seconds by
:func:`billing.pricing.split_minor_units` (largest remainder: whoever lost most to rounding down
gets the odd cent; on a tie the larger share, then team order, the idle remainder last). So the
tenants' amounts plus the idle amount are the card's amount, to the cent, per card and period;
a month is the sum of its periods.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

from billing.pricing import card_hour_amount, split_minor_units
from pools.capacity.arithmetic import clip


class CardOverShared(ValueError):
    """The uses of a card hold more than the whole card at ``at`` (``share`` > 1)."""

    def __init__(self, at: datetime, share: Fraction) -> None:
        super().__init__(f"the card is held {float(share):.3f} times over at {at.isoformat()}")
        self.at = at
        self.share = share


@dataclass(frozen=True)
class CardUse:
    """One tenant's use of the card over ``[start, end)``: ``fraction`` of the card at every
    instant (``k/R`` replicas, ``g/G`` slices or ``u``/100 utilisation), under ``basis``."""

    tenant: Hashable
    basis: str
    start: datetime
    end: datetime
    fraction: Fraction


def replicas_fraction(held: int, replicas: int) -> Fraction:
    """``k`` of a time-sliced / MPS card's ``R`` replicas: ``k/R`` (``R`` >= 1, ``k`` <= ``R``)."""
    if replicas < 1 or not 0 < held <= replicas:
        raise ValueError(f"{held} of {replicas} replicas: need 0 < held <= replicas, replicas >= 1")
    return Fraction(held, replicas)


def utilisation_fraction(percent: Decimal) -> Fraction:
    """A DCGM utilisation in per cent (0 to 100) as a fraction of the card."""
    value = Fraction(str(percent)) / 100
    if not 0 <= value <= 1:
        raise ValueError(f"utilisation {percent} % is outside 0-100 %")
    return value


@dataclass(frozen=True)
class TenantPart:
    tenant: Hashable
    basis: str
    card_seconds: Fraction
    share: Fraction  # of the window's card-seconds
    amount: Decimal


@dataclass(frozen=True)
class CardSplit:
    """One card's window: its card-seconds and amount, the tenants' parts, the idle rest."""

    start: datetime
    end: datetime
    window_seconds: int
    amount: Decimal
    parts: tuple[TenantPart, ...]
    idle_seconds: Fraction
    idle_amount: Decimal

    @property
    def idle_share(self) -> Fraction:
        return self.idle_seconds / self.window_seconds


def _check_not_over(uses: list[CardUse]) -> None:
    """Sweep the uses' starts and ends in time order (an end before a start at the same
    instant: intervals are half-open): the card held at any instant is at most one whole card.
    ``O(n log n)`` for ``n`` uses."""
    events = sorted(
        [(u.end, 0, -u.fraction) for u in uses] + [(u.start, 1, u.fraction) for u in uses],
        key=lambda e: (e[0], e[1]),
    )
    held = Fraction(0)
    for at, is_start, change in events:
        held += change
        if is_start and held > 1:
            raise CardOverShared(at, held)


def card_split(
    *,
    start: datetime,
    end: datetime,
    uses: Iterable[CardUse],
    price_per_card_hour: Decimal,
    currency: str,
    order: Iterable[Hashable] = (),
) -> CardSplit:
    """Split one card's ``[start, end)`` (aware, whole seconds) over its tenants' ``uses``
    (clipped to the window) and the idle remainder, to the cent. ``order``: the tenants in
    the order ties are settled (team slug order); tenants not in it come after, by key.
    Raises :class:`CardOverShared` when the uses hold more than the card at some instant."""
    window = int((end - start).total_seconds())
    clipped = []
    for use in uses:
        span = clip(use.start, use.end, start, end)
        if span is not None and use.fraction:
            clipped.append(CardUse(use.tenant, use.basis, span[0], span[1], use.fraction))
    _check_not_over(clipped)
    seconds: dict[tuple[Hashable, str], Fraction] = {}
    for use in clipped:
        key = (use.tenant, use.basis)
        length = int((use.end - use.start).total_seconds())
        seconds[key] = seconds.get(key, Fraction(0)) + use.fraction * length
    rank = {tenant: i for i, tenant in enumerate(order)}
    keys = sorted(seconds, key=lambda k: (rank.get(k[0], len(rank)), str(k[0]), k[1]))
    idle = window - sum(seconds.values(), Fraction(0))
    amount = card_hour_amount(Decimal(window), price_per_card_hour, currency)
    weights = [seconds[k] / window for k in keys] + [idle / window]
    amounts = split_minor_units(amount, weights, currency)
    parts = tuple(
        TenantPart(k[0], k[1], seconds[k], weights[i], amounts[i]) for i, k in enumerate(keys)
    )
    return CardSplit(start, end, window, amount, parts, idle, amounts[-1])
