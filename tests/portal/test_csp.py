"""Content-Security-Policy (issue 27, item 10): scripts only from the portal's static files or
inline with the page's nonce; no inline event handlers anywhere in the templates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
PAGES = ["/", "/dashboard/", "/idle/", "/timeline/", "/requests/", "/gpus/"]


def _directives(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {
        part.split()[0]: part.split()[1:] for part in (p.strip() for p in header.split(";")) if part
    }


@pytest.mark.parametrize("url", PAGES)
def test_pages_send_a_policy_and_their_inline_scripts_carry_its_nonce(admin_page, url):
    response = admin_page.get(url)
    assert response.status_code == 200
    policy = _directives(response)
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    script_src = policy["script-src"]
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
    nonces = [s for s in script_src if s.startswith("'nonce-")]
    html = response.content.decode()
    inline = re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>", html)
    json_data = [a for a in inline if 'type="application/json"' in a]
    executable = [a for a in inline if a not in json_data]
    if executable:
        [nonce] = nonces
        assert all(f'nonce="{nonce[7:-1]}"' in attrs for attrs in executable), executable


def test_no_template_has_an_inline_event_handler_or_a_script_without_nonce():
    handler = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)
    bare_script = re.compile(r"<script(?![^>]*\b(?:src|nonce)=)(?![^>]*application/json)[^>]*>")
    offenders = [
        str(path.relative_to(TEMPLATES))
        for path in TEMPLATES.rglob("*.html")
        if handler.search(text := path.read_text(encoding="utf-8")) or bare_script.search(text)
    ]
    assert offenders == []


def test_the_api_docs_page_has_no_inline_script(admin_page):
    response = admin_page.get("/api/docs/")
    assert response.status_code == 200
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>\s*\S", response.content.decode())
