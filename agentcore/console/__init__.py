"""The web console: runs, their timelines, approvals and contract health in a browser.

``create_app(store=..., agents=..., authenticate=...)`` returns an ASGI app (Starlette) with
a JSON API under ``/api`` and server-rendered pages; ``agentcore serve`` runs it with
uvicorn. Needs the ``agentcore[console]`` extra. Nothing here is imported by
``import agentcore`` or the command line until ``agentcore serve`` runs.
"""

from ._app import create_app
from ._auth import Authenticate, TokenLogin

__all__ = ["Authenticate", "TokenLogin", "create_app"]
