"""Every sort link of every filtered list page (:func:`pools.web.pages.filtered_list`) names a
key its FilterSet sorts by: since an ``ordering`` the list does not have is a 400, a header
linking to one would break the page it is on."""

from __future__ import annotations

import re
from html import unescape

import pytest

pytestmark = pytest.mark.django_db

LISTS = [
    "/requests/",
    "/allocations/",
    "/nodes/",
    "/gpus/",
    "/gpu-models/",
    "/maintenance/",
    "/overrides/",
    "/clusters/",
    "/advisor/",
    "/sizing/estimates/",
    "/teams/nlp/waiting/",
]
# the lists whose headers sort (``{% sort_header %}``); the others have no sort link
SORTABLE = {"/allocations/", "/nodes/", "/gpus/", "/gpu-models/", "/maintenance/", "/clusters/",
            "/advisor/", "/teams/nlp/waiting/"}  # fmt: skip
SORT_LINK = re.compile(r'<a href="(\?[^"]*ordering=[^"]*)"')


@pytest.mark.parametrize("url", LISTS)
def test_each_sort_link_and_its_reverse_answers_200(admin_page, team, url):
    page = admin_page.get(url)
    assert page.status_code == 200
    links = {unescape(link) for link in SORT_LINK.findall(page.content.decode())}
    assert bool(links) == (url in SORTABLE)

    for link in sorted(links):
        once = admin_page.get(url + link)
        assert once.status_code == 200, link
        for back in {unescape(b) for b in SORT_LINK.findall(once.content.decode())}:
            assert admin_page.get(url + back).status_code == 200, back
