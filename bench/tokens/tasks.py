"""The tasks measured: tools (one Python source for every framework) and the model's script.

Standard library only: the peers' interpreter imports it too.

A task is its operator instructions, the user's request, its tools and the model's decisions
as :class:`Step` s. Every framework gets the same tools, generated from one Python source
(:func:`tool_source`: the same names, type hints and Google-style docstrings, each tool
returning its scripted result as compact JSON text, the same bytes for every framework), and
the fake replays the same decisions (the same calls, arguments and thought text) for each.
A step with several calls is parallel calls for the peers (and agentcore with a batch); a
step without calls is the final answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TASKS", "Call", "Param", "Step", "Task", "ToolDef", "build_tools", "tool_source"]

_PY = {"str": "str", "int": "int", "float": "float", "bool": "bool"}


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # "str" | "int" | "float" | "bool"
    doc: str
    default: str | None = None  # Python literal source, when optional


@dataclass(frozen=True)
class ToolDef:
    name: str
    summary: str
    params: tuple[Param, ...]
    effect: str = "read"  # agentcore's effect: read | write | destructive
    idempotent: bool = True


@dataclass(frozen=True)
class Call:
    tool: str
    args: Mapping[str, Any]  # Any: JSON arguments
    result: Any  # Any: JSON result, returned as compact JSON text

    def key(self) -> str:
        return f"{self.tool}:{json.dumps(self.args, sort_keys=True)}"


@dataclass(frozen=True)
class Step:
    thought: str
    calls: tuple[Call, ...] = ()
    answer: str | None = None  # the final answer (a step without calls)


@dataclass(frozen=True)
class Task:
    name: str
    title: str
    instructions: str
    prompt: str
    tools: tuple[ToolDef, ...]
    steps: tuple[Step, ...]
    plan_thought: str = "A refund is a write: plan it first."
    plan_steps: tuple[str, ...] = ()
    max_steps: int | None = None  # agentcore's Budget(max_steps=...) when the default is short

    def results(self) -> dict[str, str]:
        """Each scripted call's result as the JSON text its tool returns."""
        return {
            c.key(): json.dumps(c.result, separators=(",", ":"))
            for s in self.steps
            for c in s.calls
        }


def tool_source(task: Task) -> str:
    """Python source of the task's tools: typed, with Google-style docstrings, each one
    returning ``_result(<name>, <its arguments>)``."""
    out: list[str] = []
    for t in task.tools:
        sig = ", ".join(
            f"{p.name}: {_PY[p.type]}" + (f" = {p.default}" if p.default is not None else "")
            for p in t.params
        )
        args_doc = "\n".join(f"        {p.name}: {p.doc}" for p in t.params)
        call = ", ".join(f"{p.name!r}: {p.name}" for p in t.params)
        doc = (
            f'    """{t.summary}\n\n    Args:\n{args_doc}\n    """'
            if t.params
            else (f'    """{t.summary}"""')
        )
        out.append(
            f"def {t.name}({sig}) -> str:\n{doc}\n    return _result({t.name!r}, {{{call}}})\n"
        )
    return "\n\n".join(out)


def build_tools(task: Task) -> list[Callable[..., str]]:
    """The task's tools as plain functions (in the task's order)."""
    results = task.results()

    def _result(name: str, args: dict[str, Any]) -> str:  # Any: JSON arguments
        key = f"{name}:{json.dumps(args, sort_keys=True)}"
        if key in results:
            return results[key]
        return json.dumps({"error": f"no scripted result for {key}"})

    namespace: dict[str, Any] = {"_result": _result}  # Any: exec namespace
    exec(tool_source(task), namespace)  # our own generated source
    return [namespace[t.name] for t in task.tools]


# ------------------------------------------------------------------------------------------
# The six-tool support task (issue 37's shape: seven model requests for a peer).

_CUSTOMER = {
    "customer_id": "CUS-48213",
    "name": "Maria Lindqvist",
    "email": "maria.lindqvist@example.com",
    "phone": "+46 70 555 01 23",
    "tier": "gold",
    "member_since": "2019-03-14",
    "country": "SE",
    "preferred_language": "en",
    "lifetime_value_eur": 4218.40,
    "open_tickets": 1,
    "marketing_opt_in": False,
    "notes": "Prefers email. Had a late delivery in 2024 that was compensated with a voucher.",
    "addresses": [
        {
            "type": "shipping",
            "line1": "Sveavägen 44",
            "city": "Stockholm",
            "postcode": "111 34",
            "country": "SE",
        }
    ],
}

_ORDERS = {
    "customer_id": "CUS-48213",
    "orders": [
        {
            "order_id": "ORD-99120",
            "placed": "2026-11-21",
            "status": "delivered",
            "total_eur": 189.90,
            "items": 2,
        },
        {
            "order_id": "ORD-98544",
            "placed": "2026-10-02",
            "status": "delivered",
            "total_eur": 64.50,
            "items": 1,
        },
        {
            "order_id": "ORD-97012",
            "placed": "2026-08-17",
            "status": "returned",
            "total_eur": 312.00,
            "items": 3,
        },
        {
            "order_id": "ORD-95530",
            "placed": "2026-05-30",
            "status": "delivered",
            "total_eur": 42.00,
            "items": 1,
        },
    ],
    "next_page": None,
}

_ORDER = {
    "order_id": "ORD-99120",
    "customer_id": "CUS-48213",
    "placed": "2026-11-21T14:02:11Z",
    "delivered": "2026-11-25T10:47:00Z",
    "status": "delivered",
    "payment": {"method": "card", "brand": "visa", "last4": "4242", "captured_eur": 189.90},
    "items": [
        {
            "sku": "KTL-2200-BLK",
            "name": "Electric kettle 1.7 L, black",
            "qty": 1,
            "unit_price_eur": 59.90,
            "condition_reported": "damaged on arrival: cracked lid hinge",
        },
        {
            "sku": "TST-4S-STL",
            "name": "Four-slice toaster, brushed steel",
            "qty": 1,
            "unit_price_eur": 119.00,
            "condition_reported": None,
        },
    ],
    "shipping": {"carrier": "PostNord", "tracking": "PN7781203345SE", "cost_eur": 11.00},
    "refunds": [],
    "photos_attached": ["IMG_2231.jpg", "IMG_2232.jpg"],
}

_POLICY = {
    "policy_id": "RF-2026-03",
    "applies_to": "damaged or defective items",
    "window_days": 30,
    "requires": ["order delivered within the window", "photo of the damage or defect"],
    "refund": "full item price to the original payment method; shipping refunded only when "
    "every item of the order is refunded",
    "return_required": False,
    "gold_tier": "no return needed for items under 100 EUR; refund issued at once",
    "limits": {"max_auto_refund_eur": 250.0, "above_limit": "escalate to a team lead"},
    "processing_days": "3-5 business days for card refunds",
}

_REFUND = {
    "refund_id": "RFD-30417",
    "order_id": "ORD-99120",
    "amount_eur": 59.90,
    "currency": "EUR",
    "method": "visa ending 4242",
    "status": "issued",
    "expected_by": "2026-12-10",
    "policy": "RF-2026-03",
}

_EMAIL = {
    "message_id": "MSG-7f3a91",
    "to": "maria.lindqvist@example.com",
    "status": "queued",
    "queued_at": "2026-12-05T09:12:40Z",
}

_EMAIL_BODY = (
    "Hello Maria,\n\nSorry that your kettle (order ORD-99120) arrived with a cracked lid "
    "hinge. We have refunded 59.90 EUR to your Visa card ending 4242 (refund RFD-30417); "
    "it should appear within 3-5 business days. You do not need to send the kettle back.\n\n"
    "Kind regards,\nCustomer Support"
)

SUPPORT = Task(
    name="support",
    title="six-tool support task",
    instructions=(
        "You are a customer support agent for an online home-appliance store. Be accurate "
        "and brief. Follow the refund policy exactly, never refund more than the policy "
        "allows, and always tell the customer by email what you did."
    ),
    prompt=(
        "Customer maria.lindqvist@example.com writes: 'My kettle from my last order arrived "
        "with a cracked lid. I attached photos. Can I get my money back?' Handle it."
    ),
    tools=(
        ToolDef(
            "lookup_customer",
            "Find a customer by email address.",
            (Param("email", "str", "the customer's email address."),),
        ),
        ToolDef(
            "list_orders",
            "List a customer's orders, newest first.",
            (
                Param("customer_id", "str", "the customer's id, e.g. CUS-1001."),
                Param("limit", "int", "how many orders to return.", "10"),
            ),
        ),
        ToolDef(
            "get_order",
            "Get one order with its items, payment, shipping and refunds.",
            (Param("order_id", "str", "the order id, e.g. ORD-1001."),),
        ),
        ToolDef(
            "check_refund_policy",
            "Read the refund policy that applies to a reason.",
            (Param("reason", "str", "why the customer wants a refund, e.g. 'damaged item'."),),
        ),
        ToolDef(
            "issue_refund",
            "Refund an amount to the order's original payment method.",
            (
                Param("order_id", "str", "the order to refund."),
                Param("amount_eur", "float", "the amount in euros."),
                Param("reason", "str", "the reason, recorded with the refund."),
            ),
            effect="write",
            idempotent=False,
        ),
        ToolDef(
            "send_email",
            "Send an email to a customer.",
            (
                Param("to", "str", "the recipient's address."),
                Param("subject", "str", "the subject line."),
                Param("body", "str", "the plain-text body."),
            ),
            effect="write",
            idempotent=False,
        ),
    ),
    steps=(
        Step(
            "Find the customer first.",
            (Call("lookup_customer", {"email": "maria.lindqvist@example.com"}, _CUSTOMER),),
        ),
        Step(
            "Find her last order.",
            (Call("list_orders", {"customer_id": "CUS-48213", "limit": 5}, _ORDERS),),
        ),
        Step(
            "Check the kettle in the latest order.",
            (Call("get_order", {"order_id": "ORD-99120"}, _ORDER),),
        ),
        Step(
            "Check what the policy allows for a damaged item.",
            (Call("check_refund_policy", {"reason": "damaged item"}, _POLICY),),
        ),
        Step(
            "Gold tier, under 100 EUR, photos attached: refund the kettle, no return.",
            (
                Call(
                    "issue_refund",
                    {"order_id": "ORD-99120", "amount_eur": 59.9, "reason": "damaged on arrival"},
                    _REFUND,
                ),
            ),
        ),
        Step(
            "Tell the customer.",
            (
                Call(
                    "send_email",
                    {
                        "to": "maria.lindqvist@example.com",
                        "subject": "Your refund for order ORD-99120",
                        "body": _EMAIL_BODY,
                    },
                    _EMAIL,
                ),
            ),
        ),
        Step(
            "Done.",
            answer="Refunded 59.90 EUR for the damaged kettle (ORD-99120, refund RFD-30417) "
            "and emailed the customer.",
        ),
    ),
    plan_steps=(
        "Refund 59.90 EUR for the kettle of ORD-99120",
        "Email the customer what was done",
    ),
)

# ------------------------------------------------------------------------------------------
# A one-tool lookup.

LOOKUP = Task(
    name="lookup",
    title="one-tool lookup",
    instructions="You answer questions about orders. Be brief.",
    prompt="Where is order ORD-99120?",
    tools=(SUPPORT.tools[2],),
    steps=(
        Step("Look the order up.", (Call("get_order", {"order_id": "ORD-99120"}, _ORDER),)),
        Step(
            "Known.",
            answer="ORD-99120 was delivered on 25 November by PostNord (PN7781203345SE).",
        ),
    ),
)

# ------------------------------------------------------------------------------------------
# A twelve-tool workspace task (one step with two parallel reads).


def _doc(doc_id: str, title: str, owner: str, text: str) -> dict[str, Any]:  # Any: JSON
    return {
        "doc_id": doc_id,
        "title": title,
        "owner": owner,
        "updated": "2026-12-03T16:20:00Z",
        "sharing": "team",
        "text": text,
    }


_Q4 = (
    "Q4 launch checklist. 1. Pricing page copy final by Dec 8 (owner: Lena). 2. Support "
    "macros for the new plan (owner: Omar), blocked on the pricing page. 3. Migration guide "
    "for existing customers (owner: Priya), draft done, needs review by engineering. "
    "4. Status page entry for the maintenance window on Dec 12, 02:00-04:00 UTC (owner: "
    "Jonas). 5. Launch email to 18,400 customers scheduled Dec 15, 09:00 CET; the segment "
    "excludes accounts in arrears. Risks: the billing migration must finish before the "
    "email; rollback plan in doc DOC-311."
)
_ROLLBACK = (
    "Rollback plan for the billing migration. If the migration job reports more than 0.5% "
    "failed accounts, pause the job, restore the snapshot taken at 01:55 UTC, re-enable the "
    "old billing worker and post in #launch. Decision owner: Jonas; backup: Priya. The "
    "snapshot restore takes about 25 minutes for 40 GB; the customer-facing impact is "
    "invoices delayed by up to one day. Tested on staging on Nov 28 (restore in 22 min)."
)

_WS_TOOLS = (
    ToolDef(
        "search_docs",
        "Search the team's documents by keywords.",
        (
            Param("query", "str", "keywords to look for."),
            Param("limit", "int", "the most results to return.", "5"),
        ),
    ),
    ToolDef("read_doc", "Read one document in full.", (Param("doc_id", "str", "the id."),)),
    ToolDef(
        "list_events",
        "List calendar events between two dates.",
        (
            Param("start", "str", "first day, YYYY-MM-DD."),
            Param("end", "str", "last day, YYYY-MM-DD."),
        ),
    ),
    ToolDef(
        "find_free_slot",
        "Find a free slot common to several people.",
        (
            Param("people", "str", "comma-separated email addresses."),
            Param("duration_min", "int", "the meeting's length in minutes."),
            Param("day", "str", "the day, YYYY-MM-DD."),
        ),
    ),
    ToolDef(
        "create_event",
        "Create a calendar event and invite people.",
        (
            Param("title", "str", "the event's title."),
            Param("start", "str", "start time, ISO 8601 with offset."),
            Param("duration_min", "int", "length in minutes."),
            Param("attendees", "str", "comma-separated email addresses."),
            Param("agenda", "str", "the agenda, plain text.", "''"),
        ),
        effect="write",
        idempotent=False,
    ),
    ToolDef(
        "list_tasks",
        "List open tasks on a project board.",
        (Param("project", "str", "the project's key, e.g. LAUNCH."),),
    ),
    ToolDef(
        "create_task",
        "Create a task on a project board.",
        (
            Param("project", "str", "the project's key."),
            Param("title", "str", "the task's title."),
            Param("assignee", "str", "the assignee's email address."),
            Param("due", "str", "due date, YYYY-MM-DD."),
        ),
        effect="write",
        idempotent=False,
    ),
    ToolDef(
        "update_task",
        "Change a task's status or assignee.",
        (
            Param("task_id", "str", "the task's id."),
            Param("status", "str", "todo, doing, blocked or done."),
        ),
        effect="write",
    ),
    ToolDef(
        "send_message",
        "Post a message in a team channel.",
        (
            Param("channel", "str", "the channel, e.g. #launch."),
            Param("text", "str", "the message."),
        ),
        effect="write",
        idempotent=False,
    ),
    ToolDef(
        "list_channel_messages",
        "Read a channel's latest messages.",
        (
            Param("channel", "str", "the channel."),
            Param("limit", "int", "how many messages.", "20"),
        ),
    ),
    ToolDef(
        "get_person",
        "Look up a colleague by name.",
        (Param("name", "str", "a first name, full name or email."),),
    ),
    ToolDef(
        "share_doc",
        "Share a document with someone.",
        (
            Param("doc_id", "str", "the document."),
            Param("email", "str", "who to share it with."),
            Param("role", "str", "viewer or editor."),
        ),
        effect="write",
    ),
)

_PEOPLE = ["lena@acme.example", "omar@acme.example", "priya@acme.example", "jonas@acme.example"]

WORKSPACE = Task(
    name="workspace",
    title="twelve-tool workspace task",
    instructions=(
        "You are the operations assistant of a software team. Use the workspace tools, "
        "prefer facts from documents over assumptions, and keep messages short."
    ),
    prompt=(
        "Find our Q4 launch checklist and its rollback plan, book a 30-minute launch "
        "readiness review with the checklist's owners on 2026-12-09, and post the time in "
        "#launch."
    ),
    tools=_WS_TOOLS,
    steps=(
        Step(
            "Find the checklist.",
            (
                Call(
                    "search_docs",
                    {"query": "Q4 launch checklist rollback", "limit": 5},
                    {
                        "results": [
                            {"doc_id": "DOC-307", "title": "Q4 launch checklist", "score": 0.93},
                            {
                                "doc_id": "DOC-311",
                                "title": "Rollback plan: billing migration",
                                "score": 0.88,
                            },
                            {"doc_id": "DOC-214", "title": "Q3 launch retro", "score": 0.41},
                        ]
                    },
                ),
            ),
        ),
        Step(
            "Read both documents.",
            (
                Call(
                    "read_doc",
                    {"doc_id": "DOC-307"},
                    _doc("DOC-307", "Q4 launch checklist", "lena@acme.example", _Q4),
                ),
                Call(
                    "read_doc",
                    {"doc_id": "DOC-311"},
                    _doc(
                        "DOC-311",
                        "Rollback plan: billing migration",
                        "jonas@acme.example",
                        _ROLLBACK,
                    ),
                ),
            ),
        ),
        Step(
            "Find a slot for the four owners.",
            (
                Call(
                    "find_free_slot",
                    {"people": ",".join(_PEOPLE), "duration_min": 30, "day": "2026-12-09"},
                    {
                        "day": "2026-12-09",
                        "timezone": "Europe/Berlin",
                        "slots": [
                            {
                                "start": "2026-12-09T10:30:00+01:00",
                                "end": "2026-12-09T11:00:00+01:00",
                            },
                            {
                                "start": "2026-12-09T15:00:00+01:00",
                                "end": "2026-12-09T15:30:00+01:00",
                            },
                        ],
                        "busy_counts": {"lena": 5, "omar": 3, "priya": 6, "jonas": 4},
                    },
                ),
            ),
        ),
        Step(
            "Book the first slot.",
            (
                Call(
                    "create_event",
                    {
                        "title": "Q4 launch readiness review",
                        "start": "2026-12-09T10:30:00+01:00",
                        "duration_min": 30,
                        "attendees": ",".join(_PEOPLE),
                        "agenda": "Checklist DOC-307 item by item; rollback plan DOC-311.",
                    },
                    {
                        "event_id": "EV-55821",
                        "status": "confirmed",
                        "link": "https://calendar.acme.example/e/EV-55821",
                        "invited": 4,
                    },
                ),
            ),
        ),
        Step(
            "Post the time.",
            (
                Call(
                    "send_message",
                    {
                        "channel": "#launch",
                        "text": "Launch readiness review: Wed Dec 9, 10:30-11:00 CET "
                        "(EV-55821). Agenda: DOC-307 and the rollback plan DOC-311.",
                    },
                    {"ok": True, "ts": "1765272600.000200", "channel": "#launch"},
                ),
            ),
        ),
        Step(
            "Done.",
            answer="Booked the readiness review for Dec 9, 10:30 CET (EV-55821) with Lena, "
            "Omar, Priya and Jonas, and posted it in #launch.",
        ),
    ),
    plan_thought="Booking and posting are writes: plan them.",
    plan_steps=("Book the review at the first free slot", "Post the time in #launch"),
)

# ------------------------------------------------------------------------------------------
# A 30-step run: triage 14 tickets one at a time (list, then read and tag each, then answer).

_TICKET_TOOLS = (
    ToolDef(
        "list_tickets",
        "List the open tickets of a queue.",
        (Param("queue", "str", "the queue's name, e.g. billing."),),
    ),
    ToolDef(
        "get_ticket",
        "Read one ticket with its latest messages.",
        (Param("ticket_id", "str", "the ticket's id."),),
    ),
    ToolDef(
        "tag_ticket",
        "Set a ticket's category and priority.",
        (
            Param("ticket_id", "str", "the ticket's id."),
            Param("category", "str", "refund, invoice, access, bug or other."),
            Param("priority", "str", "low, normal or high."),
        ),
        effect="write",
    ),
)

_SUBJECTS = [
    ("Charged twice for November", "refund", "high"),
    ("Invoice missing VAT number", "invoice", "normal"),
    ("Cannot log in after password reset", "access", "high"),
    ("Export to CSV drops accents", "bug", "normal"),
    ("Refund for cancelled annual plan", "refund", "normal"),
    ("Need invoices for Q3 in one PDF", "invoice", "low"),
    ("2FA codes arrive late", "access", "normal"),
    ("Dashboard shows wrong currency", "bug", "normal"),
    ("Downgrade and partial refund", "refund", "normal"),
    ("Company address wrong on invoice", "invoice", "low"),
    ("SSO login loops back to start", "access", "high"),
    ("Webhook retries flood our server", "bug", "high"),
    ("Card declined but money taken", "refund", "high"),
    ("How do I add a second admin?", "other", "low"),
]


def _ticket(i: int) -> dict[str, Any]:  # Any: JSON
    subject, _, _ = _SUBJECTS[i]
    return {
        "ticket_id": f"T-{5100 + i}",
        "subject": subject,
        "customer": f"customer{i + 1}@example.org",
        "plan": ["starter", "team", "business"][i % 3],
        "opened": f"2026-12-0{1 + i % 4}T0{i % 10}:15:00Z",
        "messages": [
            {
                "from": "customer",
                "text": f"{subject}. This started after the last update; we have tried "
                "the steps in your help centre and it still happens. Please advise, our "
                "finance team is waiting on this.",
            },
            {
                "from": "bot",
                "text": "Thanks, we have received your request and a person will answer "
                "within one business day.",
            },
        ],
    }


_triage: list[Step] = [
    Step(
        "List the queue.",
        (
            Call(
                "list_tickets",
                {"queue": "billing"},
                {
                    "queue": "billing",
                    "tickets": [
                        {"ticket_id": f"T-{5100 + i}", "subject": s[0]}
                        for i, s in enumerate(_SUBJECTS)
                    ],
                },
            ),
        ),
    )
]
for _i, (_subject, _category, _priority) in enumerate(_SUBJECTS):
    _tid = f"T-{5100 + _i}"
    _triage.append(Step(f"Read {_tid}.", (Call("get_ticket", {"ticket_id": _tid}, _ticket(_i)),)))
    _triage.append(
        Step(
            f"{_tid}: {_category}, {_priority}.",
            (
                Call(
                    "tag_ticket",
                    {"ticket_id": _tid, "category": _category, "priority": _priority},
                    {"ticket_id": _tid, "category": _category, "priority": _priority, "ok": True},
                ),
            ),
        )
    )
_triage.append(
    Step(
        "All tagged.",
        answer="Tagged 14 tickets: 4 refund, 3 invoice, 3 access, 3 bug, 1 other; 6 high.",
    )
)

TRIAGE = Task(
    name="triage30",
    title="30-step run (ticket triage)",
    instructions=(
        "You triage support tickets. Read each open ticket and tag it with one category and "
        "a priority. Work through the queue in order."
    ),
    prompt="Triage the open tickets of the billing queue.",
    tools=_TICKET_TOOLS,
    steps=tuple(_triage),
    plan_thought="Tagging is a write: plan it.",
    plan_steps=("Read each ticket", "Tag it with a category and priority"),
    max_steps=40,  # Budget()'s default is 25 steps; a user raises it for a longer run
)

TASKS: dict[str, Task] = {t.name: t for t in (SUPPORT, LOOKUP, WORKSPACE, TRIAGE)}


def write_tools(task: Task) -> frozenset[str]:
    return frozenset(t.name for t in task.tools if t.effect != "read")


def calls_of(steps: Sequence[Step]) -> list[Call]:
    return [c for s in steps for c in s.calls]
