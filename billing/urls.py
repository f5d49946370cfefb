from django.urls import path

from billing import views
from billing.budgets import views as budget_views
from billing.tokenflow import views as tokenflow_views

app_name = "billing"

urlpatterns = [
    path("", views.costs_index, name="costs"),
    path("budgets/", budget_views.budget_list_page, name="budget-list"),
    path("token-flow/<slug:team>/", tokenflow_views.token_flow, name="token-flow"),
    path("budgets/new/", budget_views.budget_create_page, name="budget-create"),
    path("budgets/<int:pk>/edit/", budget_views.budget_edit_page, name="budget-edit"),
    path("budgets/<int:pk>/delete/", budget_views.budget_delete_page, name="budget-delete"),
    path("finance/<str:month>/", views.finance_month, name="finance-month"),
    path("<slug:team>/<str:month>/", views.team_month, name="team-month"),
]
