"""A stand-in OAuth2 server for the fast suite: a real local HTTP server (ScriptedServer) with OIDC
discovery and a client-credentials token endpoint that checks the client's secret.

The `secured` suite runs the same flows against a real OAuth2 server (NAV's mock-oauth2-server,
tests/integration/oauth2.py); this one starts in milliseconds and lets a test revoke tokens.
`on_issue(token)` is called with every token issued (e.g. to make a FakeBroker accept it).
"""

from __future__ import annotations

import secrets
from urllib.parse import parse_qs

from tests.admin.scripted import ScriptedServer

ISSUER_PATH = "/realm"


class OAuth2StandIn:
    def __init__(self, client_id: str, client_secret: str, *, lifetime: int = 3600, on_issue=None, ssl_context=None):
        self.client_id, self.client_secret, self.lifetime = client_id, client_secret, lifetime
        self.on_issue = on_issue
        self.issued: list[str] = []
        self.forms: list[dict] = []
        self.server = ScriptedServer(self.handle, ssl_context=ssl_context)
        self.issuer = self.server.url + ISSUER_PATH

    def handle(self, request):
        if request.method == "GET" and request.path == ISSUER_PATH + "/.well-known/openid-configuration":
            return (
                200,
                {},
                {
                    "issuer": self.issuer,
                    "token_endpoint": self.issuer + "/oauth/token",
                    "grant_types_supported": ["client_credentials"],
                },
            )
        if request.method == "POST" and request.path == ISSUER_PATH + "/oauth/token":
            form = {k: v[0] for k, v in parse_qs(request.body.decode()).items()}
            self.forms.append(form)
            if (
                form.get("grant_type") != "client_credentials"
                or form.get("client_id") != self.client_id
                or form.get("client_secret") != self.client_secret
            ):
                return 401, {}, {"error": "invalid_client", "error_description": "Client authentication failed"}
            token = "oauth2-" + secrets.token_urlsafe(24)
            self.issued.append(token)
            if self.on_issue:
                self.on_issue(token)
            return (
                200,
                {"Cache-Control": "no-store"},
                {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime},
            )
        return 404, {}, {"error": "not_found"}

    def close(self):
        self.server.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
