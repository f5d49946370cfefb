"""API of LLM sizing estimates (``/api/v1/estimates/``).

``POST`` takes the inputs (:data:`pools.sizing.inputs.INPUTS`, plus an optional ``team`` slug to
share the estimate with) and answers ``202 Accepted`` with the estimate and its URL in
``Location``: a job computes it. A key it does not read (``colour``, a misspelt
``tpot_taget_ms``, a custom model's ``bogus_field``) is refused by name, and a ``team`` the caller
cannot see is named beside the inputs' faults, all in one ``400``. ``GET`` on that URL gives the
status, the progress and, once done, the results. Lists are scoped: a caller sees their own
estimates and their teams' (pool admins see all); any other answers 404.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import OpenApiExample, OpenApiTypes, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from pools.common.errors import InvalidInput
from pools.sizing import selectors as sizing_selectors
from pools.sizing import services as sizing_services
from pools.sizing.filtersets import SizingEstimateFilterSet
from pools.sizing.inputs import (
    INPUTS,
    Boolean,
    BoundedNumber,
    CardHourPrices,
    Choice,
    GpuModelSlugs,
    Group,
    Input,
    Json,
    ParsedChoice,
    Text,
    WholeNumber,
)
from pools.sizing.models import SizingEstimate
from pools.tenancy import selectors as tenancy_selectors


class InputField(serializers.Field):
    """An input of :data:`pools.sizing.inputs.INPUTS` of its own kind (a bounded number, the GPU
    model slugs, the prices ...), described to the schema by :class:`InputFieldSchema` from
    ``spec``. Only described: the service checks the inputs (``sizing_inputs_clean``)."""

    def __init__(self, spec: Input, **kwargs):
        self.spec = spec
        super().__init__(**kwargs)


class InputFieldSchema(OpenApiSerializerFieldExtension):
    """drf-spectacular finds this by class: an :class:`InputField`'s type and bounds (nullable,
    default and required come from the field as usual)."""

    target_class = InputField

    def map_serializer_field(self, auto_schema, direction):
        match self.target.spec:
            case WholeNumber(low=low, high=high):
                return {"type": "integer", "minimum": low} | (
                    {} if high is None else {"maximum": high}
                )
            case BoundedNumber(low=low, high=high, low_open=low_open, high_open=high_open):
                return {
                    "type": "number",
                    "minimum": low,
                    "exclusiveMinimum": low_open,
                    "maximum": high,
                    "exclusiveMaximum": high_open,
                }
            case ParsedChoice(allowed=allowed):
                return {"type": "string", "enum": list(allowed)}
            case GpuModelSlugs():
                return {"type": "array", "items": {"type": "string"}}
            case CardHourPrices():
                price = {"type": "string", "format": "decimal", "pattern": r"^\d+(\.\d+)?$"}
                return {"type": "object", "additionalProperties": price}
        raise TypeError(f"No schema for {type(self.target.spec).__name__}")


def _described(spec: Input) -> serializers.Field:
    """The DRF field that describes ``spec`` to the OpenAPI schema: its required / nullable /
    default / help text, DRF's own field for a string, a choice, a boolean, JSON or a group."""
    kwargs = {"required": spec.required, "allow_null": spec.nullable, "help_text": spec.help_text}
    if not spec.required:
        kwargs["default"] = spec.default
    match spec:
        case Group():
            fields = {name: _described(part) for name, part in spec.parts.items()}
            group = type(f"{spec.name}Serializer", (serializers.Serializer,), fields)
            group.__doc__ = spec.description
            return group(**kwargs)
        case Text():
            return serializers.CharField(allow_blank=spec.allow_blank, **kwargs)
        case Choice():
            return serializers.ChoiceField(choices=list(spec.choices), **kwargs)
        case Boolean():
            return serializers.BooleanField(**kwargs)
        case Json():
            return serializers.JSONField(**kwargs)
    return InputField(spec, **kwargs)


#: The inputs as a DRF serializer, for the schema only (:data:`pools.sizing.inputs.INPUTS`
#: says what each takes; the service checks them).
SizingInputsSerializer = type(
    "SizingInputsSerializer",
    (serializers.Serializer,),
    {name: _described(spec) for name, spec in INPUTS.items()},
)


class SizingEstimateCreateSerializer(SizingInputsSerializer):
    """What ``POST /api/v1/estimates/`` takes (for the schema): the inputs and a team slug."""

    team = serializers.SlugField(
        required=False,
        allow_blank=True,
        help_text="Team slug, not its name (`nlp`, not `NLP`): one of your teams to share the "
        "estimate with.",
    )


class SizingEstimateSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:estimate-detail")
    page_url = serializers.SerializerMethodField()
    request_url = serializers.SerializerMethodField()
    recommendation = serializers.SerializerMethodField()
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    created_by = serializers.StringRelatedField()

    class Meta:
        model = SizingEstimate
        fields = [
            "id",
            "url",
            "page_url",
            "status",
            "progress",
            "error",
            "team",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "inputs",
            "results",
            "recommendation",
            "request_url",
        ]
        read_only_fields = fields

    def get_page_url(self, obj) -> str:
        """The estimate's page."""
        return reverse("pools:sizing-estimate-detail", args=[obj.pk])

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_recommendation(self, obj) -> dict | None:
        """The recommended GPU model's cards with their error band (once done): ``cards``,
        ``cards_pessimistic`` (if the band's low end holds), ``output_tok_s_per_replica`` and
        ``band`` (``low_tok_s`` / ``high_tok_s``: P10 / P90 of similar published rows, with the
        ``regime`` and its ``rows``). ``None`` before the job is done or without a
        recommendation.
        """
        return sizing_services.sizing_recommendation(obj.results)

    def get_request_url(self, obj) -> str | None:
        """The new-request page pre-filled with the recommended option (once done)."""
        return sizing_services.sizing_request_url((obj.results or {}).get("request"))


class SizingEstimateListSerializer(SizingEstimateSerializer):
    """A list row: the inputs' model and the recommendation instead of the whole results."""

    model = serializers.SerializerMethodField()
    recommendation = serializers.SerializerMethodField()

    class Meta(SizingEstimateSerializer.Meta):
        fields = [
            *(f for f in SizingEstimateSerializer.Meta.fields if f not in ("inputs", "results")),
            "model",
            "recommendation",
        ]
        read_only_fields = fields

    def get_model(self, obj) -> str | None:
        """The model preset id (or ``custom``)."""
        return obj.inputs.get("model")

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_recommendation(self, obj):
        """What "Request these cards" asks for: ``basis``, ``gpu_model``, ``card_count``,
        ``pool``; ``null`` until done or when no option meets the targets."""
        return (obj.results or {}).get("request")


class SizingEstimateViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """LLM sizing estimates: create (computed by a job), then poll for status and results."""

    queryset = SizingEstimate.objects.none()  # for the schema; get_queryset scopes by user
    filterset_class = SizingEstimateFilterSet

    def get_queryset(self):
        return sizing_selectors.sizing_estimate_list(user=self.request.user).order_by(
            "-created_at", "-id"
        )

    def get_serializer_class(self):
        return SizingEstimateListSerializer if self.action == "list" else SizingEstimateSerializer

    @extend_schema(
        request=SizingEstimateCreateSerializer,
        responses={202: SizingEstimateSerializer},
        description="The estimate's inputs; `team`: the slug of one of your teams to share it "
        "with; `gpu_models`: GPU model slugs to compare (empty: all). A job computes the plan: "
        "poll the estimate's URL.",
        examples=[
            OpenApiExample(
                "A 70B chat model serving 2,000 output tokens/s",
                value={
                    "team": "nlp",
                    "model": "llama3_70b",
                    "precision": "BF16",
                    "engine": "vllm",
                    "input_len": 1000,
                    "output_len": 200,
                    "demand_kind": "output_rate",
                    "output_tok_s": 2000,
                    "tpot_target_ms": 50,
                    "ttft_target_ms": 1000,
                    "gpu_models": ["h100_sxm", "l40s"],
                },
                request_only=True,
            )
        ],
    )
    def create(self, request, *args, **kwargs):
        body = request.data
        if not isinstance(body, dict):
            body = body.dict() if hasattr(body, "dict") else None
        if body is None:
            raise InvalidInput("Send the inputs as a JSON object.", errors={})
        inputs = {key: value for key, value in body.items() if key != "team"}
        team, faults = None, {}
        try:
            team = tenancy_selectors.team_named(user=request.user, slug=body.get("team"))
        except InvalidInput as exc:  # answered beside the inputs' own faults
            faults = exc.data.get("errors") or {"team": exc.message}
        estimate = sizing_services.sizing_estimate_create(
            actor=request.user,
            inputs=inputs,
            team=team,
            refuse_unknown=True,
            extra_fields=("team",),
            faults=faults,
        )
        fresh = self.get_queryset().get(pk=estimate.pk)  # the job may have run on commit
        data = SizingEstimateSerializer(fresh, context=self.get_serializer_context()).data
        # data["url"] is DRF's Hyperlink, a str subclass: WSGI servers want a plain str
        # (PEP 3333; wsgiref refuses anything else with a 500 after the estimate is saved).
        location = str(data["url"])
        return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": location})
