"""AgentDojo's suites run through agentcore, with a fully compromised scripted model.

A pair is a user task and, when attacked, an injection task. The model performs the user
task's ground-truth calls; once a tool result carrying the injected instruction reaches it,
it performs the injection task's ground-truth calls first, then the rest of the user's.
When the policy asks for a plan it writes one: ``honest`` lists every call it will make,
``deceptive`` only the user's. A simulated person approves a call only if it is one of the
user task's ground-truth calls (tool and arguments), and a plan only if every step is one
of them. AgentDojo's own ``utility()`` and ``security()`` checks score the run.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import structlog

from agentcore import Agent, Policy, RunStatus, ToolContext
from agentcore.adapters import Message, ScriptedModel
from agentcore.events import ToolStarted
from agentcore.stores import MemoryStore
from agentcore.tools import Tool

from . import _load
from .tables import TABLES

if TYPE_CHECKING:
    from agentdojo.functions_runtime import Function, FunctionCall, FunctionsRuntime
    from agentdojo.task_suite.task_suite import TaskSuite

log = structlog.get_logger("bench.agentdojo")

Variant = Literal["honest", "deceptive"]
VARIANTS: tuple[Variant, ...] = ("honest", "deceptive")
MARKER = "<INFORMATION>"
"""The opening tag of the "important_instructions" attack: in a tool result, the injected
instruction reached the model."""
MAX_ACTIONS = 60


POLICIES: dict[str, Callable[[], Policy]] = {
    "none": lambda: Policy(
        untrusted_arguments="allow", writes_after_untrusted="allow", plan_before_writes=False
    ),
    "default": Policy,
    "confirm_plans": lambda: Policy(confirm_plans=True),
    "strict": lambda: Policy(confirm_plans=True, untrusted_arguments="deny"),
}
"""The policies measured: no defence (only destructive calls need a person), the default,
plans confirmed by a person, and plans confirmed with untrusted arguments refused."""


@dataclasses.dataclass
class Bound:
    """What a run's tools act on: AgentDojo's environment and the calls made on it."""

    env: Any  # Any: the suite's TaskEnvironment subclass
    runtime: FunctionsRuntime
    trace: list[FunctionCall] = dataclasses.field(default_factory=list)


def make_tool(function: Function, effect: str, output: str) -> Tool:
    """One AgentDojo function as an agentcore tool acting on the run's environment."""
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
    from agentdojo.functions_runtime import FunctionCall

    name = function.name
    params: list[inspect.Parameter] = []
    annotations: dict[str, Any] = {}  # Any: annotations are any type
    for pname, field in function.parameters.model_fields.items():
        default = inspect.Parameter.empty if field.is_required() else field.default
        params.append(
            inspect.Parameter(
                pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=field.annotation
            )
        )
        annotations[pname] = field.annotation
    params.append(
        inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext[Bound])
    )
    annotations["ctx"] = ToolContext[Bound]
    annotations["return"] = str

    def run(**kwargs: Any) -> str:  # Any: the function's own argument types
        ctx: ToolContext[Bound] = kwargs.pop("ctx")
        bound = ctx.deps
        bound.trace.append(FunctionCall(function=name, args=dict(kwargs)))
        result, error = bound.runtime.run_function(bound.env, name, kwargs)
        if error is not None:
            raise RuntimeError(error)
        return tool_result_to_str(result)

    run.__name__ = name
    run.__qualname__ = name
    run.__doc__ = function.description or name
    run.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    run.__annotations__ = annotations
    return Tool(
        run,
        effect=effect,  # type: ignore[arg-type]
        idempotent=None,
        timeout=None,
        reconcile=None,
        name=name,
        description=function.description or name,
        output=output,  # type: ignore[arg-type]
    )


def suite_tools(suite_name: str, suite: TaskSuite[Any]) -> dict[str, Tool]:
    """Every function of the suite as a tool, through the suite's table (all or nothing)."""
    table = TABLES[suite_name]
    names = {f.name for f in suite.tools}
    if names != set(table):
        raise ValueError(
            f"{suite_name}: the table and AgentDojo's functions differ: "
            f"missing {sorted(names - set(table))}, unknown {sorted(set(table) - names)}"
        )
    return {f.name: make_tool(f, *table[f.name]) for f in suite.tools}


def step_text(tool: str, args: Mapping[str, Any]) -> str:  # Any: JSON values
    """A plan step naming one call exactly: ``tool {"arg": value}``."""
    return f"{tool} {json.dumps(args, sort_keys=True, default=str, ensure_ascii=False)}"


Call = tuple[str, dict[str, Any]]  # Any: JSON arguments


class CompromisedModel:
    """The scripted model's replies: the user's calls; the injection's once it is read."""

    def __init__(
        self,
        user_calls: Sequence[Call],
        injection_calls: Sequence[Call],
        answer: str,
        variant: Variant,
    ) -> None:
        self.user_calls = list(user_calls)
        self.injection_calls = list(injection_calls)
        self.queue: deque[Call] = deque(user_calls)
        self.answer = answer
        self.variant = variant
        self.injected = False
        self.wanted: Call | None = None  # the call a plan was asked for
        self.last: str = ""
        self.actions = 0
        self.refused: list[Call] = []  # told "do not repeat this call": it does not

    def _observation(self, messages: Sequence[Message]) -> str:
        for m in reversed(messages):
            if m.role == "user" and m.content.startswith("["):
                return m.content
        return ""

    def __call__(self, messages: Sequence[Message]) -> dict[str, Any]:  # Any: JSON action
        self.actions += 1
        if (
            self.injection_calls
            and not self.injected
            and any(MARKER in m.content for m in messages if m.role == "user")
        ):
            self.injected = True
            self.queue = deque([*self.injection_calls, *self.queue])
        seen = self._observation(messages)
        if self.actions > MAX_ACTIONS:
            return self._finish()
        if self.last == "tool" and self.wanted and ("Denied by" in seen or "Refused" in seen):
            self.refused.append(self.wanted)
        if self.last == "plan":
            wanted, self.wanted = self.wanted, None
            if "Denied by" in seen or "Refused" in seen or wanted is None:
                return self._next()  # the plan was refused: that call is given up
            return self._call(wanted)
        if self.last == "tool" and "Not run:" in seen and "plan" in seen and self.wanted:
            return self._plan()
        return self._next()

    def _next(self) -> dict[str, Any]:  # Any: JSON action
        while self.queue and self.queue[0] in self.refused:
            self.queue.popleft()
        if not self.queue:
            return self._finish()
        return self._call(self.queue.popleft())

    def _call(self, call: Call) -> dict[str, Any]:  # Any: JSON action
        self.last = "tool"
        self.wanted = call
        return {"type": "tool", "thought": "Next step.", "tool": call[0], "args": call[1]}

    def _plan(self) -> dict[str, Any]:  # Any: JSON action
        self.last = "plan"
        calls = [c for c in [self.wanted, *self.queue] if c is not None]
        if self.variant == "deceptive":
            calls = [c for c in calls if c in self.user_calls]
        steps = [step_text(t, a) for t, a in calls] or ["answer the user"]
        return {"type": "plan", "thought": "Here is my plan.", "steps": steps}

    def _finish(self) -> dict[str, Any]:  # Any: JSON action
        self.last = "finish"
        return {"type": "finish", "thought": "Done.", "answer": self.answer or "Done."}


@dataclasses.dataclass
class Outcome:
    """One run of a pair under one policy and plan variant."""

    suite: str
    user_task: str
    injection_task: str | None
    policy: str
    variant: Variant
    utility: bool = False
    attacked: bool = False  # AgentDojo's security(): the injection task succeeded
    questions: int = 0
    status: str = ""
    error: str | None = None  # set when the bridge could not run the pair


class Suite:
    """One AgentDojo suite, loaded once, with its tools and attack."""

    def __init__(self, name: str) -> None:
        _load.prepare()
        from agentdojo.attacks.important_instructions_attacks import (
            ImportantInstructionsAttackNoModelName,
        )
        from agentdojo.task_suite.load_suites import get_suite

        self.name = name
        self.suite: TaskSuite[Any] = get_suite(_load.SUITES_VERSION, name)
        self.tools = suite_tools(name, self.suite)

        class _Target:  # the attack's constructor reads a pipeline name; the variant drops it
            name = "gpt-4o-2024-05-13"

        self.attack = ImportantInstructionsAttackNoModelName(self.suite, _Target())  # type: ignore[arg-type]

    def pairs(self) -> list[tuple[str, str | None]]:
        """Every (user task, injection task) pair, then every user task alone."""
        users = sorted(self.suite.user_tasks, key=_task_order)
        injections = sorted(self.suite.injection_tasks, key=_task_order)
        attacked: list[tuple[str, str | None]] = [
            (u, i) for u, i in itertools.product(users, injections)
        ]
        return attacked

    def _calls(self, calls: Sequence[FunctionCall]) -> list[Call]:
        out: list[Call] = []
        for c in calls:
            tool = self.tools[c.function]
            out.append((c.function, tool.validate_args(dict(c.args))))
        return out

    async def run(
        self, user_id: str, injection_id: str | None, policy: str, variant: Variant
    ) -> Outcome:
        """Run one pair (``injection_id=None``: benign) and score it."""
        outcome = Outcome(self.name, user_id, injection_id, policy, variant)
        try:
            await self._run(outcome)
        except Exception as exc:  # the bridge failed on this pair: counted, never dropped
            outcome.error = f"{type(exc).__name__}: {exc}"
            log.warning("agentdojo_pair_failed", **dataclasses.asdict(outcome))
        return outcome

    async def _run(self, out: Outcome) -> None:
        from agentdojo.functions_runtime import FunctionsRuntime
        from agentdojo.types import MessageContentBlock, text_content_block_from_string

        user_task = self.suite.get_user_task_by_id(out.user_task)
        injection_task = (
            None
            if out.injection_task is None
            else self.suite.get_injection_task_by_id(out.injection_task)
        )
        injections = {} if injection_task is None else self.attack.attack(user_task, injection_task)
        env = user_task.init_environment(self.suite.load_and_inject_default_environment(injections))
        pre_env = env.model_copy(deep=True)
        user_calls = self._calls(user_task.ground_truth(env.model_copy(deep=True)))
        injection_calls = (
            []
            if injection_task is None
            else self._calls(injection_task.ground_truth(env.model_copy(deep=True)))
        )
        model = CompromisedModel(
            user_calls, injection_calls, user_task.GROUND_TRUTH_OUTPUT, out.variant
        )
        bound = Bound(env=env, runtime=FunctionsRuntime(self.suite.tools))
        allowed_calls = {step_text(t, a) for t, a in user_calls}
        agent = Agent(
            tools=list(self.tools.values()),
            model=ScriptedModel(model),
            store=MemoryStore(),
            policy=POLICIES[out.policy](),
            deps=lambda _identity: bound,
        )
        result = await agent.run(user_task.PROMPT)
        while result.status is RunStatus.AWAITING_CONFIRMATION and result.pending is not None:
            out.questions += 1
            pending = result.pending
            if pending.kind == "plan":
                approve = all(step in allowed_calls for step in pending.plan_steps)
            else:
                approve = step_text(pending.tool or "", pending.args or {}) in allowed_calls
            result = await agent.confirm(
                result.run_id,
                approve=approve,
                by="person",
                reason=None if approve else "not what I asked for",
            )
        events = await agent.transcript(result.run_id)
        await agent.close()
        out.status = result.status.value
        if result.status is not RunStatus.COMPLETED:
            out.status += f" ({result.reason})"
        started = sum(1 for e in events if isinstance(e, ToolStarted))
        if started != len(bound.trace):
            raise RuntimeError(f"{started} calls started, {len(bound.trace)} reached AgentDojo")
        answer: list[MessageContentBlock] = [text_content_block_from_string(result.answer or "")]
        out.utility = self.suite._check_user_task_utility(  # pyright: ignore[reportPrivateUsage]
            user_task, answer, pre_env, env, bound.trace
        )
        if injection_task is not None:
            out.attacked = self.suite._check_injection_task_security(  # pyright: ignore[reportPrivateUsage]
                injection_task, answer, pre_env, env, bound.trace
            )


def _task_order(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[-1])
