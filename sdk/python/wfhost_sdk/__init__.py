"""wfhost-sdk for Python: write a wfhost block worker or action handler.

A complete worker (``app.py``)::

    from wfhost_sdk import BlockContext, Payload, Worker, WorkerOutput, export_worker, segment

    @export_worker
    class Hello(Worker):
        def run(self, ctx: BlockContext, payload: Payload) -> WorkerOutput:
            payload.append(segment("GREETING", f"hello from {ctx.block_id}"))
            return WorkerOutput(payload, "SIGNAL:SUCCESS")

``wfhost plugin build`` turns the project into a component with
componentize-py; the classes here are plain Python, so the plugin's logic
is tested natively (``python3 -m unittest``) without any WebAssembly.
The bridge to the component's bindings is ``wfhost_sdk._worker_export``
and ``wfhost_sdk._action_handler_export``, used only inside the build.

Errors are data: raise :class:`PluginError` (``code``, ``message``) to
fail the block with that error; any other exception fails it with the
code ``python-exception``.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Union

from . import log

__all__ = [
    "ActionHandler",
    "Artifact",
    "BlockContext",
    "BlockRef",
    "Call",
    "CallTarget",
    "ContextSegment",
    "End",
    "EngineCommand",
    "Fail",
    "Gate",
    "Jump",
    "Payload",
    "PluginError",
    "Return",
    "RunView",
    "Statistics",
    "Worker",
    "WorkerOutput",
    "declared_signals",
    "export_action_handler",
    "export_worker",
    "log",
    "segment",
]


class PluginError(Exception):
    """A failure the plugin reports: a short stable ``code`` (e.g.
    ``bad-config``) and a human-readable ``message``."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class ContextSegment:
    """One ordered piece of the execution payload."""

    id: str
    kind: str
    content: str


Payload = List[ContextSegment]

_next_segment = itertools.count()


def segment(kind: str, content: str) -> ContextSegment:
    """A new segment with a generated id (``<kind>-<n>``, unique within
    this component instance)."""
    return ContextSegment(f"{kind.lower()}-{next(_next_segment)}", kind, content)


@dataclass
class Artifact:
    """The latest structured output (JSON text) of an earlier block."""

    block_id: str
    content: str


def _parse(text: str, code: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise PluginError(code, f"{what}: {e}") from None


@dataclass
class BlockContext:
    """Everything the host tells a worker about the block it executes
    (the WIT record ``block-context``; JSON fields are text)."""

    workflow_id: str
    execution_id: str
    node_id: str
    block_id: str
    step_index: int
    attempt: int
    previous_block_id: Optional[str]
    static_memory: str
    inherited_memory: str
    artifacts: List[Artifact]
    config: str
    inputs: str
    file_restrictions: Optional[List[str]]
    workspace_dir: str
    system_prompt: str
    assembled_context: str

    def config_json(self) -> Any:
        """The block's ``config``, parsed (``None`` when unset)."""
        return _parse(self.config, "bad-config", "block config")

    def inputs_json(self) -> dict:
        """The run's inputs, parsed (``{}`` for a run without inputs)."""
        return _parse(self.inputs, "bad-inputs", "run inputs")

    def static_memory_json(self) -> dict:
        """The node's ``static_memory``, parsed."""
        return _parse(self.static_memory, "bad-static-memory", "static memory")

    @classmethod
    def for_test(cls, block_id: str, config: Any = None, inputs: Optional[dict] = None) -> "BlockContext":
        """A context for native tests of plugin logic: node ``main``,
        first attempt, the given config and run inputs."""
        return cls(
            workflow_id="test-workflow",
            execution_id="test-execution",
            node_id="main",
            block_id=block_id,
            step_index=0,
            attempt=1,
            previous_block_id=None,
            static_memory="{}",
            inherited_memory="{}",
            artifacts=[],
            config=json.dumps(config),
            inputs=json.dumps(inputs or {}),
            file_restrictions=None,
            workspace_dir=".",
            system_prompt="",
            assembled_context="",
        )


@dataclass
class Statistics:
    """Counters for the run's statistics."""

    tokens_used: int = 0
    lines_written: int = 0


@dataclass
class WorkerOutput:
    """What a worker returns: the new payload, the signal that selects the
    block's transition, optional structured output (JSON text) and
    statistics."""

    payload: Payload
    signal: str
    structured_output: Optional[str] = None
    statistics: Statistics = field(default_factory=Statistics)

    def with_structured_output(self, value: Any) -> "WorkerOutput":
        """Attach structured output: JSON text, or a value serialized."""
        self.structured_output = value if isinstance(value, str) else json.dumps(value)
        return self

    def with_statistics(self, tokens_used: int, lines_written: int) -> "WorkerOutput":
        self.statistics = Statistics(tokens_used, lines_written)
        return self


@dataclass
class BlockRef:
    """A block address; without a node, a block of the current node."""

    node: Optional[str]
    block: str

    @classmethod
    def parse(cls, target: str) -> "BlockRef":
        """``block`` or ``node.block``."""
        node, dot, block = target.partition(".")
        return cls(node, block) if dot else cls(None, target)


@dataclass
class CallTarget:
    node: str
    return_to: Optional[BlockRef] = None


@dataclass
class Jump:
    """Continue at another block."""

    target: BlockRef

    @classmethod
    def to(cls, target: str) -> "Jump":
        return cls(BlockRef.parse(target))


@dataclass
class Call:
    """Call a node as a subroutine."""

    target: CallTarget

    @classmethod
    def node(cls, node: str, return_to: Optional[str] = None) -> "Call":
        return cls(CallTarget(node, BlockRef.parse(return_to) if return_to else None))


@dataclass
class Return:
    """Pop the return stack and continue at the return address."""


@dataclass
class End:
    """Finish the run successfully."""


@dataclass
class Fail:
    """Finish the run as failed."""

    reason: str


@dataclass
class Gate:
    """Pause the run at a human gate."""

    prompt: str


EngineCommand = Union[Jump, Call, Return, End, Fail, Gate]


@dataclass
class RunView:
    """A read-only view of the run, given to action handlers."""

    workflow_id: str
    execution_id: str
    node_id: str
    block_id: str
    signal: str
    step_index: int
    return_stack: List[str]

    @classmethod
    def for_test(cls, signal: str = "SIGNAL:SUCCESS", block_id: str = "start") -> "RunView":
        return cls("test", "test-run", "main", block_id, signal, 0, [])


class Worker:
    """A block worker: subclass it, implement :meth:`run`, decorate the
    class with :func:`export_worker`."""

    def run(self, ctx: BlockContext, payload: Payload) -> WorkerOutput:
        raise NotImplementedError


class ActionHandler:
    """A transition action interpreter: implement :meth:`interpret`,
    decorate the class with :func:`export_action_handler`."""

    def interpret(self, action: str, run: RunView) -> EngineCommand:
        raise NotImplementedError


_exported: dict = {}


def _export(kind: str, base: type) -> Callable[[type], type]:
    def register(cls: type) -> type:
        if not issubclass(cls, base):
            raise TypeError(f"{cls.__name__} must subclass wfhost_sdk.{base.__name__}")
        _exported[kind] = cls
        return cls

    return register


export_worker = _export("worker", Worker)
export_worker.__doc__ = "Make this class the component's block worker."
export_action_handler = _export("action-handler", ActionHandler)
export_action_handler.__doc__ = "Make this class the component's action handler."


def exported(kind: str) -> type:
    """The class exported as ``kind`` (``worker`` or ``action-handler``)."""
    try:
        return _exported[kind]
    except KeyError:
        decorator = "export_worker" if kind == "worker" else "export_action_handler"
        raise LookupError(f"app.py exports no {kind}: decorate its class with @wfhost_sdk.{decorator}") from None


def declared_signals(manifest: str = "wfhost-plugin.toml") -> List[str]:
    """The signals ``wfhost-plugin.toml`` declares (``signals``): what
    ``plugin build`` records in the component for ``wfhost validate``. For
    tests that check a worker returns only declared signals."""
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        return _signals_line(manifest)
    with open(manifest, "rb") as f:
        return list(tomllib.load(f).get("signals", []))


def _signals_line(manifest: str) -> List[str]:
    """``signals = [...]`` read without tomllib (Python < 3.11): the list
    on one line, its strings double-quoted, as ``plugin new`` writes it."""
    with open(manifest, encoding="utf-8") as f:
        for line in f:
            key, eq, value = line.partition("=")
            if eq and key.strip() == "signals":
                return list(json.loads(value.split("#")[0].strip()))
    return []
