"""API of the explainer: ``POST /api/v1/requests/explain/`` (a dry run of a request's fields,
nothing saved) and ``GET /api/v1/requests/{id}/explanation/`` (a saved request's).

A request of a team the caller cannot see is a 404, like the request itself (its id is in the
path). A team slug in the dry run's body is a field like the others: one the caller cannot see
is the create's 400 naming ``team``, worded as for a slug no team has, so the answer never tells
whether another team exists. The dry run's fields are checked as a create checks them
(:class:`pools.capacity.api.CapacityRequestSerializer`, then
:func:`pools.capacity.services.requests.validate_request_fields` and ``validate_shape_fields``):
invalid fields are a 400 with the same ``errors``; the last check of a create, whether the cards
exist at all, is what the explanation explains, so it answers 200 with that check's field errors
under ``submit_errors`` (what a create would refuse now). ``justification`` may be left out."""

from __future__ import annotations

from dataclasses import replace

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.capacity import selectors as capacity_selectors
from pools.capacity.api import CapacityRequestSerializer
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import (
    JUSTIFICATION_MAX,
    request_class,
    request_class_errors,
    validate_request_fields,
    validate_shape_fields,
)
from pools.common.choices import RequestKind
from pools.common.errors import InvalidInput
from pools.explain import selectors

ANSWER_DOC = (
    "`approvable_now`; `summary` (plain words); `why_not`: reasons in order, each `{code, text, "
    "data}` with code one of kind, class, model, pool_model, driver, budget, free_cards, shape, "
    "ceiling; "
    "`when`: per eligible pool × GPU model the earliest start where the count and shape fit "
    "(null: not within a year); `where_instead`: alternatives (kind other_model, other_pool, "
    "split_shape, smaller_shape, fewer_cards, growth; a pool with fewer usable cards than an "
    "alternative asks is left out) with free cards, earliest start, price and "
    "the request fields to change (`prefill`); `holders`: who holds the cards: pool admins get "
    "`allocations` (team, allocation id, cards, ends), everyone else `own_allocations`, "
    "`own_held_peak` (the most of those held at once in the window), "
    "`other_teams` (a count) and `other_ends` (cards and end times only); `overrides`: the "
    "team's temporary overrides in force in that pool and GPU model, in words."
)
ANSWER_EXAMPLE = {
    "approvable_now": False,
    "summary": "Cannot be approved as asked: only 28 of 48 A100 SXM4 80GB cards in Training are "
    "free for the whole window: 20 held at the peak by 3 teams; not counted: 16 down or drained, "
    "0 under maintenance. Fits from 14 Jan 2027 09:00 UTC (Training). Instead: 40 H800 SXM5 in "
    "Training: 40 free, free now.",
    "why_not": [{"code": "free_cards", "text": "only 28 of 48 …", "data": {"free": 28}}],
    "when": [
        {
            "pool": "train",
            "gpu_model": "a100_80g_sxm",
            "free": 28,
            "usable": 48,
            "earliest_start": "2027-01-14T09:00:00Z",
        }
    ],  # fmt: skip
    "where_instead": [
        {
            "kind": "other_model",
            "pool": "train",
            "gpu_model": "h800_sxm",
            "card_count": 40,
            "free": 40,
            "fits_now": True,
        }
    ],  # fmt: skip
    "holders": {
        "other_teams": 3,
        "other_ends": [{"cards": 8, "ends_at": "2027-01-13T09:00:00Z"}],
        "text": "held by 3 other teams; 36 free from 13 Jan 2027 09:00 UTC",
    },  # fmt: skip
    "submit_errors": {},
}


class ExplainSerializer(CapacityRequestSerializer):
    """A request's fields, as for a create; ``justification`` optional; ``sizing_estimate``
    names an inference sizing estimate whose card count per GPU model the alternatives ask."""

    justification = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=JUSTIFICATION_MAX
    )
    sizing_estimate = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Id of a sizing estimate you may see: for inference, alternatives on another "
        "GPU model ask for the estimate's card count on that model.",
    )

    class Meta(CapacityRequestSerializer.Meta):
        fields = [
            "team", "workload_kind", "workload_class", "kind", "pool", "gpu_model",
            "min_memory_gib", "card_count", "cards_per_node", "node_count", "one_nvlink_domain",
            "shared_nodes",
            "starts_at", "ends_at", "cuda_version", "justification", "sizing_estimate",
        ]  # fmt: skip
        read_only_fields = []


def explain_fields(*, user, data: dict) -> dict:
    """The explanation of validated fields (``ExplainSerializer.validated_data``) for
    ``user`` as JSON, with ``submit_errors``; raises :class:`InvalidInput` (400) for fields a
    create would refuse before counting cards, and for a sizing estimate the user cannot see.
    A model the request's class may not use is a reason (``class``), not a 400."""
    fields = RequestFields.from_data(data)
    fields = replace(
        fields, workload_class=request_class(team=fields.team, workload_class=fields.workload_class)
    )
    errors = validate_request_fields(fields, capacity=False)
    errors.update(validate_shape_fields(fields))
    if fields.kind != RequestKind.CARDS:
        errors["kind"] = "Only a request for cards is explained; capacity to add needs no pool."
    sizing = None
    if data.get("sizing_estimate") is not None:
        sizing = selectors.sizing_cards_of(user=user, estimate_id=data["sizing_estimate"])
        if sizing is None:
            errors["sizing_estimate"] = "No finished sizing estimate of yours has this id."
    if errors:
        raise InvalidInput("The request has invalid fields.", errors=errors)
    submit_errors = validate_request_fields(fields)
    submit_errors.update(
        request_class_errors(workload_class=fields.workload_class, gpu_model=fields.gpu_model)
    )
    answer = selectors.explanation_for_fields(
        user=user,
        team=fields.team,
        workload_kind=fields.workload_kind,
        card_count=fields.card_count,
        starts_at=fields.starts_at,
        ends_at=fields.ends_at,
        pool=fields.pool,
        gpu_model=fields.gpu_model,
        min_memory_gib=fields.min_memory_gib,
        cuda_version=fields.cuda_version,
        cards_per_node=fields.cards_per_node,
        node_count=fields.node_count,
        one_nvlink_domain=fields.one_nvlink_domain,
        shared_nodes=fields.shared_nodes,
        sizing_cards=sizing,
        workload_class=fields.workload_class,
    ).as_dict()
    answer["submit_errors"] = {k: [v] for k, v in submit_errors.items()}
    return answer


class RequestExplainView(APIView):
    """``POST /api/v1/requests/explain/``: why a request with these fields could not be
    approved now, when it could, where instead and who holds the cards; nothing is saved."""

    @extend_schema(
        request=ExplainSerializer,
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description=ANSWER_DOC),
            400: OpenApiResponse(
                description="Invalid fields, as for a create (a team you cannot see: `team`, "
                "as a slug no team has)."
            ),
        },
        examples=[
            OpenApiExample(
                "bob's 40 A100 for next week",
                value={
                    "team": "nlp",
                    "workload_kind": "training",
                    "pool": "train-slurm",
                    "gpu_model": "a100_80g_sxm",
                    "card_count": 40,
                    "starts_at": "2027-01-11T09:00:00Z",
                    "ends_at": "2027-01-18T09:00:00Z",
                },
                request_only=True,
            ),
            OpenApiExample("The answer", value=ANSWER_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request):
        form = ExplainSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        return Response(explain_fields(user=request.user, data=dict(form.validated_data)))


class RequestExplanationView(APIView):
    """``GET /api/v1/requests/{id}/explanation/``: the explanation of a saved request (404
    for a request of a team you cannot see)."""

    @extend_schema(responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description=ANSWER_DOC)})
    def get(self, request, pk: int):
        obj = capacity_selectors.capacity_request_list(user=request.user).filter(pk=pk).first()
        if obj is None:
            raise NotFound("No such request.")
        answer = selectors.explanation_for_request(user=request.user, request=obj).as_dict()
        return Response(answer)
