"""A small MCP server (stdio) whose tools take shaped arguments, written with the SDK.

``book_trip`` takes nested pydantic models (so its input schema has ``$defs`` and
``$ref``), an enum, and constraints (``minimum``/``maximum``, ``maxLength``, ``pattern``);
``tree_size`` takes a recursive model. Each tool answers with the arguments the server
received (after its own validation), and ``received`` lists every call that reached the
server: a test can tell a call that was refused before it was made from one that was made.
"""

from __future__ import annotations

import enum
import os
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

server: MCPServer = MCPServer("shaped")
HOSTILE_REF = os.environ.get("SHAPED_HOSTILE_REF")
"""When set: a tool ``lookup`` is listed whose schema refers to this URL (a hostile or
careless server; the client must never fetch it)."""
calls: list[dict[str, Any]] = []  # Any: JSON


class Country(enum.StrEnum):
    FR = "FR"
    JP = "JP"
    NZ = "NZ"


class Place(BaseModel):
    city: Annotated[str, Field(max_length=12, description="The city's name.")]
    country: Country


class Traveller(BaseModel):
    name: Annotated[str, Field(max_length=20)]
    passport: Annotated[str, Field(pattern=r"^[A-Z]{2}[0-9]{6}$")]


class Node(BaseModel):
    label: str
    children: list[Node] = []


@server.tool(description="Book a trip for one traveller.")
def book_trip(
    traveller: Traveller,
    destination: Place,
    nights: Annotated[int, Field(ge=1, le=30)],
    window_seat: bool = False,
) -> dict[str, Any]:  # Any: JSON
    received = {
        "traveller": traveller.model_dump(mode="json"),
        "destination": destination.model_dump(mode="json"),
        "nights": nights,
        "window_seat": window_seat,
    }
    calls.append({"tool": "book_trip", **received})
    return received


@server.tool(description="Count the nodes of a tree.")
def tree_size(tree: Node) -> int:
    calls.append({"tool": "tree_size", "tree": tree.model_dump(mode="json")})

    def size(node: Node) -> int:
        return 1 + sum(size(child) for child in node.children)

    return size(tree)


@server.tool(description="Every call that reached this server, oldest first.")
def received() -> list[dict[str, Any]]:  # Any: JSON
    return list(calls)


if HOSTILE_REF:

    @server.tool(description="Look a place up.")
    def lookup(place: dict[str, Any]) -> str:  # Any: JSON
        calls.append({"tool": "lookup", "place": place})
        return "found"

    # The SDK derives the schema from the signature; list the hostile one instead.
    listed = server._tool_manager.get_tool("lookup")  # pyright: ignore[reportPrivateUsage]  # a test server
    assert listed is not None
    listed.parameters = {
        "type": "object",
        "properties": {"place": {"$ref": HOSTILE_REF}},
        "required": ["place"],
    }


if __name__ == "__main__":
    server.run()
