"""A tiny MCP server (stdio) for agentcore's tests: a ledger of refunds, written with the SDK.

Its ``refund`` tool appends one JSON line per call to the file named by ``LEDGER_FILE``
(fsynced, so a line is there even if the client dies right after): the order and the
``_meta`` the request carried, where agentcore puts the call's idempotency key and fencing
token.
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import Context, MCPServer

LEDGER = os.environ["LEDGER_FILE"]

server: MCPServer = MCPServer("ledger")


@server.tool(description="Refund an order and record it in the ledger.")
def refund(order_id: str, ctx: Context) -> str:
    meta = dict(ctx.request_context.meta or {})
    with open(LEDGER, "a") as ledger:
        ledger.write(json.dumps({"order_id": order_id, "meta": meta}) + "\n")
        ledger.flush()
        os.fsync(ledger.fileno())
    return f"refunded {order_id}"


if __name__ == "__main__":
    server.run()
