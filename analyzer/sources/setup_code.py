"""Code that runs once, before or beside the training step: the ast readers codefacts.py uses to mark
model construction and checkpoint input/output (context.py then labels what only they call as
host-side: a dynamic shape, a host read, an unsupported op or float64 there costs nothing on the
device, while device plumbing and custom kernels there still need their port).

- Construction: a module's `__init__` builds its parameters and constant buffers on the host,
  before `.to(device)` (a DCT kernel built with `torch.fft`, a float64 beta schedule cast to float32
  by `register_buffer`). context.py decides that the class is an `nn.Module`.
- Checkpoint input/output: functions named for it (`load_state_dict`, `_load_from_state_dict`,
  `load_checkpoint`, `checkpoint_filter_fn`, `from_pretrained`, `save_model`, `Model.save`) run once
  per load or save, not per step. Activation checkpointing (`checkpoint(fn, x)`,
  `checkpoint_sequential`, `apply_activation_checkpointing`) runs in the step and is no such name.
- Kept references: what such a function stores for later rather than calls now (`self.attn_fn =
  flash_attn`, `Block(act=gelu)`, `lambda x: helper(x)`, `return helper`), and what any function
  returns for later (a factory of callables): those run where they are called, in the step.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .vocab import ast_chain as _chain

# Words that name a checkpoint's contents; with one of them, a function reads or writes a checkpoint.
_STATE_WORDS = frozenset({"ckpt", "pretrained", "statedict"})
# Verbs of checkpoint input/output, read with `checkpoint`, `weights`, `model`, `optimizer` ...
_IO_VERBS = frozenset({"load", "save", "resume", "restore", "filter", "remap", "convert", "consolidate", "read", "write"})
_READ_VERBS = frozenset({"load", "restore", "resume", "read", "from", "filter"})
_IO_OBJECTS = frozenset({"checkpoint", "checkpoints", "weights", "model", "optimizer", "params", "state", "shard",
                         "shards"})


def _words(name: str) -> list[str]:
    """The words of a snake_case name, `state_dict` as one: `_load_state_dict_post` -> load, statedict, post."""
    return [w for w in name.lower().replace("state_dict", "statedict").split("_") if w]


def checkpoint_io(name: str) -> bool:
    """A function named for reading or writing a checkpoint: `load_state_dict`, `load_pretrained`,
    `save_checkpoint`, `checkpoint_filter_fn`, `load_optimizer`, a bare `load`/`save`; not
    activation checkpointing (`checkpoint`, `checkpoint_sequential`) nor `load_balancing_loss`."""
    words = _words(name)
    if not words:
        return False
    if _STATE_WORDS & set(words):
        return True
    if len(words) == 1:
        return words[0] in ("load", "save")
    return bool(_IO_VERBS & set(words)) and bool(_IO_OBJECTS & set(words))


def checkpoint_writes(name: str) -> bool:
    """A checkpoint function named for writing one (`save_model`, `Model.save`,
    `convert_optimizer_state_dict_to_fp16`: a verb of writing, or a state dict with no verb of reading)
    rather than reading one (`load_state_dict`, `from_pretrained`, `checkpoint_filter_fn`) or converting
    a live model (`convert_weights_to_fp16`): a dtype it sets is the file's, not the model's."""
    words = set(_words(name))
    if words & _READ_VERBS:
        return False
    return bool(words & {"save", "write", "consolidate"}) or bool(words & {"statedict", "ckpt", "checkpoint", "checkpoints"})


def kept_refs(node: ast.FunctionDef, ref_of: Callable[[list[str]], str | None]) -> list[str]:
    """References a function keeps for later rather than calls now: values stored in an attribute or
    an item (`self.fn = f`), passed to a call (`Block(act=f)`, `partial(f)`), returned or yielded, and
    everything inside a lambda. A name assigned to a local and called there (`fn = linear_schedule;
    fn(t)`, `kernel = {'2': k2}; kernel[t](n)`) is called now."""
    out: set[str] = set()
    for st in _own_statements(node.body):
        t = type(st)
        if t in (ast.Assign, ast.AnnAssign, ast.AugAssign) and st.value is not None:
            targets = st.targets if t is ast.Assign else [st.target]
            if all(type(x) is ast.Name for x in targets):
                _handed(st.value, ref_of, out)  # a local: called here, unless handed to a call
            else:
                _values(st.value, ref_of, out)
        elif t is ast.Return and st.value is not None:
            _values(st.value, ref_of, out)
        else:
            for child in ast.iter_child_nodes(st):
                if type(child) is ast.Expr and type(child.value) in (ast.Yield, ast.YieldFrom):
                    _values(child.value, ref_of, out)
                elif isinstance(child, ast.expr):
                    _handed(child, ref_of, out)
    return sorted(out)


def returned_refs(node: ast.FunctionDef, ref_of: Callable[[list[str]], str | None]) -> list[str]:
    """What a function returns for later (`return {'gelu': gelu}[name]`, `return partial(f)`,
    `return lambda x: helper(x)`): those run where its result is called, not where it is."""
    out: set[str] = set()
    for st in _own_statements(node.body):
        if type(st) is ast.Return and st.value is not None:
            _values(st.value, ref_of, out)
    return sorted(r for r in out if not r.startswith("a:"))


def _values(expr: ast.AST, ref_of, out: set[str], inside: bool = False) -> None:
    """References an expression yields as values (not the callees it calls now)."""
    stack = [(expr, inside)]
    while stack:
        n, inside = stack.pop()
        t = type(n)
        if t is ast.Lambda:
            stack.append((n.body, True))
            continue
        if t in (ast.Name, ast.Attribute):
            parts = _chain(n)
            if parts is not None:
                ref = ref_of(parts)
                if ref is not None:
                    out.add(ref)
                continue
        if t is ast.Call and not inside:
            # the callee runs now; what it is handed is kept
            stack.extend((a, False) for a in n.args)
            stack.extend((k.value, False) for k in n.keywords)
            if type(n.func) not in (ast.Name, ast.Attribute):
                stack.append((n.func, False))
            continue
        stack.extend((c, inside) for c in ast.iter_child_nodes(n))


def _handed(expr: ast.AST, ref_of, out: set[str]) -> None:
    """References an expression hands to the calls it makes, and what its lambdas name."""
    for n in ast.walk(expr):
        if type(n) is ast.Call:
            for a in [*n.args, *(k.value for k in n.keywords)]:
                _values(a, ref_of, out)
        elif type(n) is ast.Lambda:
            _values(n.body, ref_of, out, True)


def _own_statements(stmts: list[ast.stmt]):
    """The statements of a function body and of the blocks in it, not of nested functions or classes."""
    stack = [stmts]
    while stack:
        for st in stack.pop():
            yield st
            if type(st) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                continue
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(st, field, None)
                if type(sub) is list:
                    stack.append(sub)
            for h in getattr(st, "handlers", ()):
                stack.append(h.body)
            for c in getattr(st, "cases", ()):
                stack.append(c.body)
