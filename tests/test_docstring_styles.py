"""Tool docstrings in every common style: the model reads the summary and each argument's
description, never Returns, Raises, Examples or Yields."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, get_args

import pytest

from agentcore import Agent, Tool, ToolContext, tool
from agentcore.adapters import ScriptedModel
from agentcore.contracts import Dialect, compile_action_schema, compile_wire_schema
from agentcore.errors import ToolDefinitionError
from agentcore.testing import finish

SUMMARY = (
    "Find a customer's orders. Use when the user asks about their orders.\n\n"
    "Orders older than a year are archived and not found."
)
ARGS = {
    "customer_id": 'the customer\'s id, e.g. "C-17".',
    "status": "only orders in this status.",
    "limit": "at most this many orders.",
}
# Words that appear only in the sections the model must not read.
HIDDEN = ("newest first", "no such customer", "LookupError", ">>>", "Returns", "Raises")


def search_orders_google(customer_id: str, status: str | None = None, limit: int = 10) -> list[str]:
    """Find a customer's orders. Use when the user asks about their orders.

    Orders older than a year are archived and not found.

    Args:
        customer_id (str): the customer's id,
            e.g. "C-17".
        status: only orders in this status.
        limit: at most this many orders.

    Returns:
        The order ids, newest first.

    Raises:
        LookupError: no such customer.

    Examples:
        >>> search_orders("C-17")
        ['O-1']
    """
    return [customer_id, str(status), str(limit)]


def search_orders_numpy(customer_id: str, status: str | None = None, limit: int = 10) -> list[str]:
    """Find a customer's orders. Use when the user asks about their orders.

    Orders older than a year are archived and not found.

    Parameters
    ----------
    customer_id : str
        the customer's id,
        e.g. "C-17".
    status : str, optional
        only orders in this status.
    limit : int
        at most this many orders.

    Returns
    -------
    list of str
        The order ids, newest first.

    Raises
    ------
    LookupError
        no such customer.

    Examples
    --------
    >>> search_orders("C-17")
    ['O-1']
    """
    return [customer_id, str(status), str(limit)]


def search_orders_sphinx(customer_id: str, status: str | None = None, limit: int = 10) -> list[str]:
    """Find a customer's orders. Use when the user asks about their orders.

    Orders older than a year are archived and not found.

    :param customer_id: the customer's id,
        e.g. "C-17".
    :type customer_id: str
    :param status: only orders in this status.
    :param int limit: at most this many orders.
    :returns: The order ids, newest first.
    :rtype: list[str]
    :raises LookupError: no such customer.
    """
    return [customer_id, str(status), str(limit)]


def search_orders_epydoc(customer_id: str, status: str | None = None, limit: int = 10) -> list[str]:
    """Find a customer's orders. Use when the user asks about their orders.

    Orders older than a year are archived and not found.

    @param customer_id: the customer's id,
        e.g. "C-17".
    @type customer_id: str
    @param status: only orders in this status.
    @param limit: at most this many orders.
    @return: The order ids, newest first.
    @rtype: list[str]
    @raise LookupError: no such customer.
    """
    return [customer_id, str(status), str(limit)]


STYLES: dict[str, Callable[..., list[str]]] = {
    "google": search_orders_google,
    "numpy": search_orders_numpy,
    "sphinx": search_orders_sphinx,
    "epydoc": search_orders_epydoc,
}


def _make(fn: Callable[..., Any], **options: Any) -> Tool:  # Any: the decorator's options
    return tool(effect="read", name="search_orders", **options)(fn)


def _descriptions(node: object) -> Iterator[str]:
    """Every ``description`` in a JSON Schema, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():  # pyright: ignore[reportUnknownVariableType]  # JSON
            if key == "description" and isinstance(value, str):
                yield value
            yield from _descriptions(value)
    elif isinstance(node, list):
        for item in node:  # pyright: ignore[reportUnknownVariableType]  # JSON
            yield from _descriptions(item)


def _shown(made: Tool) -> str:
    """Everything the model is shown about ``made`` in one step: the system text and the
    messages of a real run's request, and the action schema compiled for every dialect."""
    model = ScriptedModel([finish()])
    Agent(tools=[made], model=model, store="memory://").run_sync("Find C-17's orders")
    (request,) = model.requests
    wires = [compile_wire_schema(request.schema, d).schema for d in get_args(Dialect)]
    return json.dumps(
        [
            request.system,
            [m.content for m in request.messages],
            request.schema.json_schema(),
            wires,
        ],
        ensure_ascii=False,
    )


# --------------------------------------------------------------------------- the four styles


@pytest.mark.parametrize("style", STYLES)
def test_every_style_gives_the_same_description_and_arguments(style: str) -> None:
    made = _make(STYLES[style])
    assert made.spec.description == SUMMARY
    props = made.spec.args_schema["properties"]
    assert {name: props[name].get("description") for name in ARGS} == ARGS


@pytest.mark.parametrize("style", STYLES)
def test_every_style_shows_the_model_the_same_schema(style: str) -> None:
    """The compiled action schema of each style is the Google one, byte for byte."""
    google = compile_action_schema([_make(search_orders_google).spec]).json_schema()
    schema = compile_action_schema([_make(STYLES[style]).spec]).json_schema()
    assert schema == google
    found = list(_descriptions(schema))
    assert SUMMARY in found
    assert all(text in found for text in ARGS.values())


@pytest.mark.parametrize("style", STYLES)
def test_returns_raises_and_examples_reach_the_model_in_no_style(style: str) -> None:
    shown = _shown(_make(STYLES[style]))
    assert "Orders older than a year are archived" in shown  # the request does show the tool
    for text in (*HIDDEN, ":param", "@param", "----------", "Parameters"):
        assert text not in shown, (style, text)


def test_a_docstring_without_args_sends_no_other_section() -> None:
    def now() -> str:
        """Tell the current time in UTC.

        Returns:
            The time, newest first.

        Raises:
            LookupError: no such customer.

        Examples:
            >>> now()
            '12:00'
        """
        return "12:00"

    def ticks(n: int) -> Iterator[int]:
        """Count up to n.

        Parameters
        ----------
        n : int
            how far to count.

        Yields
        ------
        int
            each number, newest first.
        """
        yield from range(n)

    made = _make(now)
    assert made.spec.description == "Tell the current time in UTC."
    shown = _shown(made)
    assert "Tell the current time in UTC." in shown
    assert not [text for text in HIDDEN if text in shown]
    counted = tool(effect="read")(ticks)
    assert counted.spec.description == "Count up to n."
    assert counted.spec.args_schema["properties"]["n"]["description"] == "how far to count."
    assert "newest first" not in json.dumps(counted.spec.args_schema)


def test_a_plain_docstring_is_the_description_as_written() -> None:
    """No section: every line is sent, including lines that open with ':' or '@' in prose."""

    def lookup(order_id: str) -> str:
        """Look up an order.

        :class:`Order` objects come back whole.
        @mentions in the notes are kept.
        """
        return order_id

    assert _make(lookup).spec.description == (
        "Look up an order.\n\n:class:`Order` objects come back whole.\n"
        "@mentions in the notes are kept."
    )


# --------------------------------------------------------------------------- other forms


def test_numpy_names_sharing_a_description_and_google_keyword_args() -> None:
    def area(width: float, height: float, *, unit: str = "m") -> float:
        """Compute an area.

        Parameters
        ----------
        width, height : float
            the sides, in ``unit``.
        unit : str
            the unit of length.
        """
        return width * height

    def move(x: float, *, speed: float = 1.0) -> float:
        """Move along x.

        Args:
            x: where to.

        Keyword Args:
            speed: how fast.
        """
        return x * speed

    props = _make(area).spec.args_schema["properties"]
    assert [props[n]["description"] for n in ("width", "height", "unit")] == [
        "the sides, in ``unit``.",
        "the sides, in ``unit``.",
        "the unit of length.",
    ]
    props = _make(move).spec.args_schema["properties"]
    assert (props["x"]["description"], props["speed"]["description"]) == ("where to.", "how fast.")


def test_paragraphs_of_an_argument_are_kept_and_its_lines_joined() -> None:
    def send(body: str) -> str:
        """Send a message.

        Args:
            body: the text,
                plain.

                Markdown is not rendered.
        """
        return body

    described = _make(send).spec.args_schema["properties"]["body"]["description"]
    assert described == "the text, plain.\n\nMarkdown is not rendered."


def test_crlf_and_tab_docstrings_read_as_lf_and_spaces() -> None:
    def lf(x: int) -> int:
        return x

    def crlf(x: int) -> int:
        return x

    lf.__doc__ = "Do it.\n\nMore.\n\nArgs:\n    x: the x.\n"
    crlf.__doc__ = lf.__doc__.replace("\n", "\r\n").replace("    ", "\t")
    assert _make(crlf).spec.args_schema == _make(lf).spec.args_schema
    assert _make(crlf).spec.description == _make(lf).spec.description == "Do it.\n\nMore."


def test_context_and_secret_parameters_may_be_documented() -> None:
    def charge(amount: float, ctx: ToolContext) -> float:
        """Charge the card.

        Args:
            amount: how much.
            ctx: the run's context (not shown to the model).
        """
        return amount

    made = _make(charge)
    assert list(made.spec.args_schema["properties"]) == ["amount"]
    assert "run's context" not in _shown(made)


# --------------------------------------------------------------------------- hostile docstrings


@pytest.mark.parametrize("doc", [None, "", "   \n\t  "])
def test_an_empty_docstring_asks_for_a_description(doc: str | None) -> None:
    def silent(x: int) -> int:
        return x

    silent.__doc__ = doc
    with pytest.raises(ToolDefinitionError, match="'silent' has no description: add a docstring"):
        tool(effect="read")(silent)


@pytest.mark.parametrize(
    "doc",
    [
        "\n    Args:\n        x: the x.\n\n    Returns:\n        x again.\n    ",
        "\n    Args:\n        x: the x.\n    ",  # one section: every line after the first indented
        "\n    Parameters\n    ----------\n    x : int\n        the x.\n    ",
        "\n    :param x: the x.\n    ",
    ],
    ids=["google", "google-one-section", "numpy", "sphinx"],
)
def test_a_docstring_of_sections_only_needs_a_description_and_keeps_its_arguments(
    doc: str,
) -> None:
    def sections(x: int) -> int:
        return x

    sections.__doc__ = doc
    with pytest.raises(ToolDefinitionError, match="'sections' has no description"):
        tool(effect="read")(sections)
    made = tool(effect="read", description="Echo x.")(sections)
    assert made.spec.description == "Echo x."
    assert made.spec.args_schema["properties"]["x"]["description"] == "the x."


@pytest.mark.parametrize(
    "doc",
    [
        "Find.\n\nArgs:\n    customer: the id.\n",
        "Find.\n\nParameters\n----------\ncustomer : str\n    the id.\n",
        "Find.\n\n:param customer: the id.\n",
        "Find.\n\n@param customer: the id.\n",
    ],
    ids=["google", "numpy", "sphinx", "epydoc"],
)
def test_a_described_argument_the_function_lacks_is_named(doc: str) -> None:
    def find(customer_id: str, limit: int = 10) -> str:
        return customer_id

    find.__doc__ = doc
    with pytest.raises(
        ToolDefinitionError,
        match=r"'find': its docstring describes 'customer', not among its parameters "
        r"\(customer_id, limit\): rename",
    ):
        tool(effect="read")(find)


def test_a_numpy_line_without_its_colon_is_an_unknown_name() -> None:
    def find(x: int) -> int:
        """Find.

        Parameters
        ----------
        x int
        """
        return x

    with pytest.raises(ToolDefinitionError, match="describes 'x int', not among its parameters"):
        tool(effect="read")(find)


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (
            "Find.\n\nArgs:\n    x the x, no colon\n",
            "as Google style: Expected a colon in 'x the x",
        ),
        ("Find.\n\nArgs:\n\nReturns:\n    r\n", 'as Google style: No specification for "Args"'),
        ("Find.\n\nArgs:\n    x: one.\n\n    two.\n", "Expected a colon in 'two.'"),
        ("Find.\n\n:param: the x.\n", "as reST style: Expected one or two arguments"),
        ("Find.\n\n:param x\n", 'as reST style: Error parsing meta information near ":param x"'),
        ("Find.\n\n@param x\n", "as Epydoc style: Error parsing meta information"),
        # Epydoc's reader takes ASCII names only: a clear refusal, not a silent loss.
        ("Find.\n\n@param größe: taille.\n", "as Epydoc style: Error parsing meta"),
    ],
    ids=[
        "no-colon",
        "empty-section",
        "unindented-paragraph",
        "rest-no-name",
        "rest-no-colon",
        "epydoc-no-colon",
        "epydoc-non-ascii",
    ],
)
def test_a_malformed_section_is_refused_with_what_to_fix(doc: str, problem: str) -> None:
    def find(x: int) -> int:
        return x

    find.__doc__ = doc
    with pytest.raises(ToolDefinitionError) as caught:
        tool(effect="read")(find)
    message = str(caught.value)
    assert message.startswith("Tool 'find': its docstring cannot be read (")
    assert problem in message
    assert "write each argument as 'name: what it is'" in message


def test_non_ascii_docstrings_in_every_style() -> None:
    summary = "Chercher les « commandes » — 注文を検索する。"

    def google(größe: int, 名前: str) -> str:  # noqa: PLC2401, N803  # non-ASCII names
        """Chercher les « commandes » — 注文を検索する。

        Args:
            größe: taille en cm, ≥ 0.
            名前: 顧客の名前。
        """
        return 名前 * größe

    def numpy(größe: int, 名前: str) -> str:  # noqa: PLC2401, N803  # non-ASCII names
        """Chercher les « commandes » — 注文を検索する。

        Parameters
        ----------
        größe : int
            taille en cm, ≥ 0.
        名前 : str
            顧客の名前。
        """
        return 名前 * größe

    def sphinx(größe: int, 名前: str) -> str:  # noqa: PLC2401, N803  # non-ASCII names
        """Chercher les « commandes » — 注文を検索する。

        :param größe: taille en cm, ≥ 0.
        :param 名前: 顧客の名前。
        """
        return 名前 * größe

    for fn in (google, numpy, sphinx):
        made = _make(fn)
        props = made.spec.args_schema["properties"]
        assert made.spec.description == summary
        assert (props["größe"]["description"], props["名前"]["description"]) == (
            "taille en cm, ≥ 0.",
            "顧客の名前。",
        )


@pytest.mark.parametrize("style", ["google", "sphinx"])
def test_a_huge_docstring_is_read_whole(style: str) -> None:
    prose = "\n".join(f"Line {i} of the manual, with a colon: here." for i in range(20_000))
    long_arg = " ".join(f"word{i}" for i in range(50_000))

    def manual(topic: str, page: int = 1) -> str:
        return topic * page

    if style == "google":
        fields = f"Args:\n    topic: {long_arg}\n    page: which page.\n\nReturns:\n    text."
    else:
        fields = f":param topic: {long_arg}\n:param page: which page.\n:returns: text."
    manual.__doc__ = f"Read the manual.\n\n{prose}\n\n{fields}\n"
    made = _make(manual)
    assert made.spec.description == f"Read the manual.\n\n{prose}"
    props = made.spec.args_schema["properties"]
    assert (props["topic"]["description"], props["page"]["description"]) == (
        long_arg,
        "which page.",
    )


@pytest.mark.parametrize(
    "description",
    [
        "Research an order and report.",
        "Research an order and report.\nUse it for questions about one order.",
        "Research an order.\n@return a summary, in prose.\n\nReturns:\n    a summary.",
    ],
)
def test_a_sub_agent_description_is_sent_as_given(description: str) -> None:
    """A sub-agent's description is text, not a docstring: every line of it reaches the
    model, and its ``task`` argument keeps its own description."""

    def lookup(order_id: str) -> str:
        """Look up an order.

        Args:
            order_id: the order's id.
        """
        return order_id

    child = Agent(tools=[_make(lookup)], model=ScriptedModel([]), store="memory://")
    research = child.as_tool("research", description)
    assert research.spec.description == description
    props = research.spec.args_schema["properties"]
    assert props["task"]["description"].startswith("what the sub-agent is to do")
    assert "Args:" not in _shown(research)
