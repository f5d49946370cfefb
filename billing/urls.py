from django.urls import path

from billing import views

app_name = "billing"

urlpatterns = [
    path("", views.costs_index, name="costs"),
    path("finance/<str:month>/", views.finance_month, name="finance-month"),
    path("<slug:team>/<str:month>/", views.team_month, name="team-month"),
]
