"""Conversions between the SDK's classes and the bindings componentize-py
generates (``wit_world.imports.types``), passed in as ``wit`` so that they
are tested natively with stand-ins."""

from __future__ import annotations

import os
import traceback
from typing import Any

from . import (
    Artifact,
    BlockContext,
    Call,
    ContextSegment,
    End,
    Fail,
    Gate,
    Jump,
    PluginError,
    Return,
    RunView,
    WorkerOutput,
    log,
)


def context_from(ctx: Any) -> BlockContext:
    fields = dict(vars(ctx))
    fields["artifacts"] = [Artifact(a.block_id, a.content) for a in ctx.artifacts]
    fields["file_restrictions"] = None if ctx.file_restrictions is None else list(ctx.file_restrictions)
    return BlockContext(**fields)


def payload_from(payload: Any) -> list:
    return [ContextSegment(s.id, s.kind, s.content) for s in payload]


def run_view_from(run: Any) -> RunView:
    fields = dict(vars(run))
    fields["return_stack"] = list(run.return_stack)
    return RunView(**fields)


def output_to(wit: Any, output: Any) -> Any:
    if not isinstance(output, WorkerOutput):
        raise PluginError("bad-output", f"the worker returned {type(output).__name__}, not a WorkerOutput")
    return wit.WorkerOutput(
        payload=[wit.ContextSegment(id=s.id, kind=s.kind, content=s.content) for s in output.payload],
        signal=output.signal,
        structured_output=output.structured_output,
        statistics=wit.Statistics(
            tokens_used=output.statistics.tokens_used,
            lines_written=output.statistics.lines_written,
        ),
    )


def _block_ref(wit: Any, ref: Any) -> Any:
    return wit.BlockRef(node=ref.node, block=ref.block)


def command_to(wit: Any, command: Any) -> Any:
    if isinstance(command, Jump):
        return wit.EngineCommand_Jump(_block_ref(wit, command.target))
    if isinstance(command, Call):
        back = command.target.return_to
        target = wit.CallTarget(node=command.target.node, return_to=None if back is None else _block_ref(wit, back))
        return wit.EngineCommand_Call(target)
    if isinstance(command, Return):
        return wit.EngineCommand_Return()
    if isinstance(command, End):
        return wit.EngineCommand_End()
    if isinstance(command, Fail):
        return wit.EngineCommand_Fail(command.reason)
    if isinstance(command, Gate):
        return wit.EngineCommand_Gate(command.prompt)
    raise PluginError("bad-command", f"the action handler returned {type(command).__name__}, not an engine command")


def error_to(wit: Any, error: BaseException) -> Any:
    """The WIT ``plugin-error`` for what the plugin raised; an exception
    other than :class:`PluginError` is logged with its traceback."""
    if isinstance(error, PluginError):
        return wit.PluginError(code=error.code, message=error.message)
    log.error("".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip())
    return wit.PluginError(code="python-exception", message=f"{type(error).__name__}: {error}")


def enter_workspace(directory: str) -> None:
    """Make the workspace the current directory, so relative paths work
    (a block without a readable workspace still runs)."""
    try:
        os.chdir(directory)
    except OSError:
        pass


def log_sink(wit_log: Any) -> Any:
    """The sink that writes through the ``wfhost:plugin/log`` import."""
    levels = {name: getattr(wit_log.Level, name.upper()) for name in log.LEVELS}
    return lambda level, message: wit_log.log(levels[level], message)
