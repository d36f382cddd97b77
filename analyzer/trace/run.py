"""Trace mode's run: the only module that imports torch (the CLI imports it only for `neuron-ready trace`).

How a model is traced:

1. The user's factory runs under a FakeTensorMode, so parameters and inputs are fake tensors:
   shapes, dtypes and strides without storage. A 70B-parameter model costs no weight memory.
2. The model runs forward, and with `--train` backward from a loss, on those fake tensors while an
   OpRecorder (a TorchDispatchMode) sees every aten op. This is the same op stream `make_fx`
   records into an FX graph, post-autograd and before functionalisation; the recorder only skips
   building the graph, which makes it about three times faster (docs/trace.md). Backward ops
   are dispatched by the autograd engine; each is attributed to the forward line that created
   its autograd node, through the node's sequence number (as aot_autograd does).
3. Each op is attributed to the innermost frame of the user's code (under the root, not torch,
   the standard library or neuron-ready), with its column from the code object's positions.
4. The ShapeEnv gives data-dependent sizes unbacked symbols (`u0`), as torch.export does. When
   Python code branches on one (`if x.sum() > 0:`), export would stop; here the branch is
   recorded with the user's line and the trace continues down one arm (the symbol gets a hint,
   the mechanism `draft_export` uses with real values), so the rest of the model is still traced.
5. Graph breaks come from TorchDynamo as `torch._dynamo.explain` reports them, run in a forked
   child process on the second core while the parent records ops.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import logging
import multiprocessing
import os
import sys
import sysconfig
import traceback
import warnings
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv, free_unbacked_symbols
from torch.utils._python_dispatch import TorchDispatchMode

from .data import InputSpec, OpUse, Site, TraceEvent, TraceRequest, TraceResult, TraceSetupError

# A branch on tensor data inside a loop would repeat forever on fake values: stop after this many.
MAX_DECISIONS_PER_LINE = 16
# Hints for data-dependent values; a branch `if n > 0` on such a value follows the "true" arm.
INT_HINT, FLOAT_HINT = 1, 1.0
HF_INPUTS = "input_ids:int64[1,128] labels:int64[1,128]"
_MISSING = object()


class LoopOnData(Exception):
    """A data-dependent branch repeated MAX_DECISIONS_PER_LINE times at one line (a loop on data)."""

    def __init__(self, site: Site | None):
        super().__init__(f"a loop on tensor data repeated {MAX_DECISIONS_PER_LINE} times; the trace stopped")
        self.site = site


# ------------------------------------------------------------------------------------------ frames


class Frames:
    """Decides which source files are the user's and turns frames into Sites."""

    LIBRARY, USER, INSTALLED = 0, 1, 2

    def __init__(self, root: Path):
        self.root = os.path.realpath(root)
        self.roots = (self.root + os.sep, os.path.abspath(root) + os.sep)  # real and as named
        torch_dir = os.path.dirname(os.path.realpath(torch.__file__))
        ours = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the whole neuron_ready package
        paths = sysconfig.get_paths()
        self.library = tuple(p + os.sep for p in (torch_dir, os.path.join(os.path.dirname(torch_dir), "functorch"), ours))
        # In a virtual environment platstdlib contains site-packages: installed code is told apart first.
        self.stdlib = tuple(p.rstrip(os.sep) + os.sep for p in {paths.get("stdlib"), paths.get("platstdlib")} if p)
        self._tier: dict[str, int] = {}
        self._display: dict[str, str] = {}
        self._positions: dict[Any, list] = {}
        self._sites: dict[tuple, Site] = {}
        self._last: Any = None
        self.executed: dict[str, set[int]] = {}
        self.stop: set = set()  # code objects of our own entry points: no user frame lies above them

    def tier(self, filename: str) -> int:
        t = self._tier.get(filename)
        if t is None:
            t = self._tier[filename] = self._classify(filename)
        return t

    def _classify(self, filename: str) -> int:
        if not filename or filename.startswith("<"):
            return self.LIBRARY
        real = os.path.realpath(filename)
        if real.startswith(self.library):
            return self.LIBRARY
        parts = real.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            return self.INSTALLED
        if real.startswith(self.stdlib):
            return self.LIBRARY
        if real == self.root or real.startswith(self.root + os.sep):
            return self.USER
        return self.INSTALLED

    def display(self, filename: str) -> str:
        """Root-relative for the user's files; relative to its sys.path entry for installed code."""
        d = self._display.get(filename)
        if d is None:
            real = os.path.realpath(filename)
            if self.tier(filename) == self.USER:
                d = os.path.relpath(real, self.root)
            else:
                bases = [os.path.realpath(p) for p in sys.path if p]
                base = max((b for b in bases if real.startswith(b + os.sep)), key=len, default=os.path.dirname(real))
                d = os.path.relpath(real, base)
            d = self._display[filename] = d.replace(os.sep, "/")
        return d

    def _site(self, frame) -> Site:
        code, lasti = frame.f_code, frame.f_lasti
        key = (code, lasti)
        site = self._sites.get(key)
        if site is None:
            line, column = frame.f_lineno, 1
            if hasattr(code, "co_positions"):  # Python 3.11+: the column of the running instruction
                pos = self._positions.get(code)
                if pos is None:
                    pos = self._positions[code] = list(code.co_positions())
                i = lasti // 2
                if 0 <= i < len(pos) and pos[i][0] == line and pos[i][2] is not None:
                    column = pos[i][2] + 1
            name = getattr(code, "co_qualname", code.co_name)
            site = self._sites[key] = Site(self.display(code.co_filename), line, column, name,
                                          self.tier(code.co_filename) == self.USER)
        return site

    def current(self, depth: int = 2) -> Site | None:
        """The innermost user frame of the running stack (installed code if there is none), and
        note every user function on the stack as executed."""
        f = sys._getframe(depth)
        installed = None
        while f is not None and f.f_code not in self.stop:
            t = self.tier(f.f_code.co_filename)
            if t == self.USER:
                if f is not self._last:
                    self._last = f
                    self._note_executed(f)
                return self._site(f)
            if t == self.INSTALLED and installed is None:
                installed = f
            f = f.f_back
        return self._site(installed) if installed is not None else None

    def _note_executed(self, f) -> None:
        while f is not None and f.f_code not in self.stop:
            code = f.f_code
            if self.tier(code.co_filename) == self.USER:
                self.executed.setdefault(self.display(code.co_filename), set()).add(code.co_firstlineno)
            f = f.f_back

    def from_summaries(self, frames: list) -> Site | None:
        """The innermost user frame of a list of traceback.FrameSummary (a traceback or a
        TorchDynamo user stack)."""
        installed = None
        for fs in reversed(frames):
            t = self.tier(fs.filename)
            if t == self.USER or (t == self.INSTALLED and installed is None):
                site = Site(self.display(fs.filename), fs.lineno or 0, (getattr(fs, "colno", None) or 0) + 1,
                            fs.name, t == self.USER)
                if t == self.USER:
                    return site
                installed = site
        return installed

    def from_exception(self, e: BaseException) -> Site | None:
        return self.from_summaries(traceback.extract_tb(e.__traceback__))


# Plain Python errors in the user's call or code: the trace did not run, so it reports nothing.
USER_ERRORS = (TypeError, NameError, KeyError, IndexError, ValueError, AttributeError, ImportError, ZeroDivisionError)


def _first_line(e: BaseException, limit: int = 200) -> str:
    """`Type: first line of the message`, with the working directory taken out of paths in it."""
    text = str(e).strip().splitlines()
    msg = f"{type(e).__name__}: {text[0].strip()}" if text else type(e).__name__
    for base in {os.getcwd(), os.path.realpath(os.getcwd())}:
        msg = msg.replace(base + os.sep, "")
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


# ------------------------------------------------------------------------------------------ shapes


class HintingShapeEnv(ShapeEnv):
    """A ShapeEnv whose data-dependent symbols carry hints, so a branch on tensor data is recorded
    (with the user's line) instead of stopping the trace. Every guard that needed a hint is one
    that torch.export would have refused (GuardOnDataDependentSymNode)."""

    def __init__(self, frames: Frames, **kwargs):
        super().__init__(**kwargs)
        self.frames = frames
        self.decisions: dict[Site | None, list] = {}
        self.guard_sites: list[tuple[Any, Site | None]] = []  # (sympy expression, site)

    def create_unbacked_symint(self, *args, **kwargs):
        s = super().create_unbacked_symint(*args, **kwargs)
        self.set_real_tensor_prop_unbacked_vals(s.node.expr, INT_HINT)
        return s

    def create_unbacked_symfloat(self, *args, **kwargs):
        s = super().create_unbacked_symfloat(*args, **kwargs)
        self.set_real_tensor_prop_unbacked_vals(s.node.expr, FLOAT_HINT)
        return s

    def create_unbacked_symbool(self, *args, **kwargs):
        s = super().create_unbacked_symbool(*args, **kwargs)
        self.set_real_tensor_prop_unbacked_vals(s.node.expr, INT_HINT)
        return s

    def _log_real_tensor_propagation(self, orig_expr, unsound_result) -> None:  # noqa: D401 - torch hook
        site = self.frames.current()
        seen = self.decisions.setdefault(site, [])
        seen.append((str(orig_expr), str(unsound_result)))
        if len(seen) >= MAX_DECISIONS_PER_LINE:
            raise LoopOnData(site)

    def _log_guard(self, prefix, g, forcing_spec) -> None:
        super()._log_guard(prefix, g, forcing_spec)
        self.guard_sites.append((g, self.frames.current()))


# ------------------------------------------------------------------------------------------ recording


def _op_name(func) -> str | None:
    """aten::sort (default overload) / aten::sort.stable; None for ops that are not computation."""
    ns = getattr(func, "namespace", "")
    if ns == "prim":
        return None
    packet = func._schema.name
    overload = func._overloadname
    return packet if overload == "default" else f"{packet}.{overload}"


class OpRecorder(TorchDispatchMode):
    """Counts every aten op with its site, phase and dtype facts (see OpUse)."""

    def __init__(self, frames: Frames):
        super().__init__()
        self.frames = frames
        self.phase: str | None = None  # None while building (coverage only), forward, loss, backward
        self.uses: dict[OpUse, int] = {}
        self.seq_sites: dict[int, Site | None] = {}
        self.skip: range = range(0)  # autograd sequence numbers of our own loss reduction
        self._names: dict[Any, str | None] = {}
        self._facts: dict[tuple, frozenset[str]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = self._names.get(func, _MISSING)
        if name is _MISSING:
            name = self._names[func] = _op_name(func)
        phase = self.phase
        if name is None or phase is None or phase == "loss":
            if phase is None and name is not None:
                self.frames.current()  # the factory: which user functions ran
            return func(*args, **kwargs)
        try:
            out = func(*args, **kwargs)
        except Exception:  # e.g. a custom op without a fake implementation: count it, then stop
            site = self.frames.current() if phase == "forward" else None
            use = OpUse(name, site, phase)
            self.uses[use] = self.uses.get(use, 0) + 1
            raise
        if phase == "backward":
            node = torch._C._current_autograd_node()
            seq = node._sequence_nr() if node is not None else -1
            if seq in self.skip:
                return out
            site = self.seq_sites.get(seq)
        else:
            site = self.frames.current()
            self.seq_sites.setdefault(torch.autograd._get_sequence_nr() - 1, site)
        use = OpUse(name, site, phase, self._facts_of(args, kwargs, out))
        self.uses[use] = self.uses.get(use, 0) + 1
        return out

    def _facts_of(self, args, kwargs, out) -> frozenset[str]:
        first = None
        f64 = cplx = False
        outs = out if isinstance(out, (list, tuple)) else (out,)
        for group in (args, kwargs.values(), outs):
            for a in group:
                items = a if isinstance(a, (list, tuple)) else (a,)
                for t in items:
                    if isinstance(t, torch.Tensor):
                        d = t.dtype
                        if first is None and group is not outs:
                            first = d
                        if d is torch.float64:
                            f64 = True
                        elif d.is_complex:
                            cplx = True
        dynamic = _new_data_dependent_size(args, kwargs, outs)
        key = (first, f64, cplx, dynamic)
        facts = self._facts.get(key)
        if facts is None:
            s = set()
            if first is not None and not first.is_floating_point and not first.is_complex:
                s.add("bool" if first is torch.bool else "integer")
            if f64:
                s.add("float64")
            if cplx:
                s.add("complex")
            if dynamic:
                s.add("dynamic")
            facts = self._facts[key] = frozenset(s)
        return facts


def _new_data_dependent_size(args, kwargs, outs) -> bool:
    """Does a result have a data-dependent size (an unbacked symbol) that no argument had? Ops
    downstream of `nonzero` inherit its size; only the op that introduces one is dynamic. (Sizes
    are compared, not creation counters: a fake tensor memoises `nonzero` of the same mask.)"""
    if not any(isinstance(t, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in t.shape) for t in outs):
        return False
    produced = free_unbacked_symbols([t for t in outs if isinstance(t, torch.Tensor)])
    return bool(produced) and bool(produced - free_unbacked_symbols((args, list(kwargs.values()))))


# ------------------------------------------------------------------------------------------ the factory


def _import_target(target: str, frames: Frames):
    """MODULE:FACTORY or path/to/file.py:FACTORY -> (the callable, its label)."""
    mod_part, sep, attr = target.rpartition(":")
    if not sep or not mod_part or not attr:
        raise TraceSetupError(f"cannot read {target!r}: expected MODULE:FACTORY or path/to/file.py:FACTORY (or hf:CONFIG.json)")
    if mod_part.endswith(".py") or "/" in mod_part or os.sep in mod_part:
        path = Path(mod_part)
        if not path.is_file():
            raise TraceSetupError(f"no such file: {mod_part}")
        base = path.resolve().parent
        parts = [] if path.stem == "__init__" else [path.stem]
        while (base / "__init__.py").is_file():  # a file inside a package imports as part of it
            parts.insert(0, base.name)
            base = base.parent
        if not parts:
            raise TraceSetupError(f"cannot import {mod_part}: name the package's module, not __init__.py")
        module_name = ".".join(parts)
        sys.path.insert(0, str(base))
    else:
        module_name = mod_part
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except SyntaxError as e:
        where = f" ({frames.display(e.filename)}:{e.lineno})" if e.filename else ""
        raise TraceSetupError(f"cannot import {mod_part}: SyntaxError: {e.msg}{where}") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - user code may raise anything
        raise TraceSetupError(f"cannot import {mod_part}: {_first_line(e)}{_where(frames, e)}") from None
    obj: Any = module
    for piece in attr.split("."):
        try:
            obj = getattr(obj, piece)
        except AttributeError:
            raise TraceSetupError(f"{mod_part} has no attribute {attr!r}") from None
    if not callable(obj):
        raise TraceSetupError(f"{mod_part}:{attr} is a {type(obj).__name__}, not a callable that returns a model")
    return obj, attr


def _where(frames: Frames, e: BaseException) -> str:
    site = frames.from_exception(e)
    return f" ({site})" if site is not None else ""


def _hf_factory(config_path: str):
    """hf:CONFIG.json: a Hugging Face model built from a local config file, no download."""
    path = Path(config_path)
    if not path.is_file():
        raise TraceSetupError(f"no such file: {config_path}")
    try:
        import transformers
    except ImportError:
        raise TraceSetupError("hf:CONFIG.json needs Hugging Face transformers: pip install transformers") from None
    try:
        config_dict = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TraceSetupError(f"cannot read {config_path}: {e}") from None
    if not isinstance(config_dict, dict) or "model_type" not in config_dict:
        raise TraceSetupError(f"{config_path}: a Hugging Face config needs a 'model_type' key")
    try:
        config = transformers.AutoConfig.for_model(**config_dict)
    except (ValueError, KeyError, TypeError) as e:
        raise TraceSetupError(f"{config_path}: {_first_line(e)}") from None
    causal = any(str(a).endswith("ForCausalLM") for a in (config_dict.get("architectures") or []))

    def build():
        auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
        return auto.from_config(config)

    return build, "from_config", causal


def _spec_tensor(spec: InputSpec, dynamic: bool, env: ShapeEnv):
    dtype = getattr(torch, spec.dtype)
    shape = _symbolic_shape(spec.name or "input", spec.shape, dynamic, env)
    return torch.empty(shape, dtype=dtype)


def _symbolic_shape(name: str, shape: tuple, dynamic: bool, env: ShapeEnv) -> tuple:
    """--dynamic: dim 0 (batch) of every input, and dim 1 (sequence) of 2-D and 3-D inputs, become
    symbols with the given sizes as hints; sizes 0 and 1 stay static, as PyTorch specialises them."""
    if not dynamic:
        return tuple(shape)
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    dims = {0} | ({1} if len(shape) in (2, 3) else set())
    out = []
    for i, size in enumerate(shape):
        if i in dims and size >= 2:
            source = ConstantSource(f"{name}.size({i})")
            sym = env.create_symbol(size, source, dynamic_dim=DimDynamic.DYNAMIC)
            out.append(env.create_symintnode(sym, hint=size, source=source))
        else:
            out.append(size)
    return tuple(out)


def _split_factory_output(out, label: str):
    if isinstance(out, torch.nn.Module):
        return out, None, None
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.nn.Module):
        if len(out) == 2:
            inputs = out[1]
            if isinstance(inputs, dict):
                return out[0], (), dict(inputs)
            if isinstance(inputs, torch.Tensor):
                return out[0], (inputs,), {}
            if isinstance(inputs, (tuple, list)):
                return out[0], tuple(inputs), {}
        if len(out) == 3 and isinstance(out[1], (tuple, list)) and isinstance(out[2], dict):
            return out[0], tuple(out[1]), dict(out[2])
    kind = type(out).__name__
    raise TraceSetupError(
        f"{label}() returned {kind}, expected a torch.nn.Module, (module, inputs) or (module, args, kwargs)"
    )


def _describe_inputs(args, kwargs) -> list[str]:
    """As --inputs spells them; a symbolic (--dynamic) size shows its hint with a star: [8*,2048*]."""
    def size(d) -> str:
        return f"{d.node.hint}*" if isinstance(d, torch.SymInt) else str(d)

    def one(name, t):
        if not isinstance(t, torch.Tensor):
            return f"{name + ':' if name else ''}{type(t).__name__}"
        dims = ",".join(size(d) for d in t.shape)
        return f"{name + ':' if name else ''}{str(t.dtype).replace('torch.', '')}[{dims}]"
    return [one(None, a) for a in args] + [one(k, v) for k, v in kwargs.items()]


# ------------------------------------------------------------------------------------------ the loss


def _loss_of(out):
    """The scalar the backward pass starts from: the model's own loss when it returns one (a
    scalar, or a `loss` field as Hugging Face outputs have), else the sum of every floating-point
    output that needs a gradient."""
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        return loss
    if isinstance(out, torch.Tensor) and out.dim() == 0 and out.requires_grad:
        return out
    leaves = torch.utils._pytree.tree_leaves(out if not hasattr(out, "to_tuple") else out.to_tuple())
    parts = [t.sum() for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad and
             (t.is_floating_point() or t.is_complex())]
    if not parts:
        return None
    total = parts[0].real if parts[0].is_complex() else parts[0]
    for p in parts[1:]:
        total = total + (p.real if p.is_complex() else p)
    return total


# ------------------------------------------------------------------------------------------ graph breaks


def _graph_breaks(model, args, kwargs, frames: Frames, mode) -> dict:
    """Graph breaks as torch._dynamo.explain finds them (the reason each captured graph ended), with
    a backend that hands back fresh fake outputs instead of running each graph again: the code
    between graphs still runs, and the analysis costs a third less than explain itself."""
    import torch._dynamo

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(getattr(gm, "compile_subgraph_reason", None))
        output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        values = [getattr(a, "meta", {}).get("example_value") for a in output]
        if not all(isinstance(v, torch.Tensor) and all(isinstance(d, int) for d in v.shape) for v in values):
            return gm.forward

        def outputs(*_):
            with mode:
                return tuple(torch.empty_strided(v.shape, v.stride(), dtype=v.dtype) for v in values)

        return outputs

    torch._dynamo.reset()
    try:
        torch._dynamo.optimize(backend, nopython=False)(model)(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - report, never crash the trace
        return {"status": f"failed: {_first_line(e)}", "site": frames.from_exception(e)}
    finally:
        torch._dynamo.reset()
    breaks: dict[tuple, int] = {}
    for r in graphs:
        if r is None or not getattr(r, "graph_break", True):
            continue
        lines = [ln.strip() for ln in str(r.reason).strip().splitlines() if ln.strip()]
        message = lines[0] if lines else "graph break"
        if message.startswith("generic_jump"):  # Dynamo's name for a jump on a tensor value
            message = "a branch on a tensor value (data-dependent jump)"
        detail = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Explanation:")), "")
        key = (message, frames.from_summaries(list(r.user_stack or [])), detail)
        breaks[key] = breaks.get(key, 0) + 1
    return {"status": "ran", "graph_count": len(graphs),
            "breaks": [(m, s, d, n) for (m, s, d), n in breaks.items()]}


def _graph_breaks_child(conn, model, args, kwargs, frames, mode) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = _graph_breaks(model, args, kwargs, frames, mode)
        except BaseException as e:  # noqa: BLE001 - the parent must always get an answer
            result = {"status": f"failed: {_first_line(e)}", "site": None}
    conn.send(result)
    conn.close()


class _BreakAnalysis:
    """The graph-break analysis in a forked child (the second core) while the parent records ops;
    in-process afterwards where fork is unavailable."""

    def __init__(self, model, args, kwargs, frames: Frames, mode):
        self.inputs = (model, args, kwargs, frames, mode)
        self.proc = self.conn = None
        if "fork" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("fork")
            self.conn, child = ctx.Pipe(duplex=False)
            sys.stdout.flush()
            sys.stderr.flush()
            self.proc = ctx.Process(target=_graph_breaks_child, args=(child, *self.inputs), daemon=True)
            self.proc.start()
            child.close()

    def result(self) -> dict:
        if self.proc is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return _graph_breaks(*self.inputs)
        try:
            result = self.conn.recv()
        except EOFError:
            self.proc.join()
            result = {"status": f"failed: the analysis process ended with exit code {self.proc.exitcode}", "site": None}
        self.proc.join()
        return result


# ------------------------------------------------------------------------------------------ tracing


def run_trace(request: TraceRequest) -> TraceResult:
    """Build the model on fake tensors, run it forward (and backward) recording every aten op,
    and collect graph breaks. Raises TraceSetupError for a factory or inputs that cannot be used;
    anything that goes wrong while the model runs becomes a trace-error event instead."""
    frames = Frames(request.root)
    frames.stop = {run_trace.__code__, _run.__code__}  # not the CLI's or the test runner's frames
    env = HintingShapeEnv(frames)
    mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
    recorder = OpRecorder(frames)
    result = TraceResult(target=request.target, train=request.train, dynamic=request.dynamic)
    specs = list(request.inputs)
    quiet = contextlib.ExitStack()
    quiet.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    quiet.enter_context(_torch_logs_off())
    # User code may print; the report goes to stdout, so its output is swallowed.
    quiet.enter_context(contextlib.redirect_stdout(io.StringIO()))
    with quiet:
        if request.target.startswith("hf:"):
            factory, label, causal = _hf_factory(request.target[3:])
            if not specs:
                from .data import parse_inputs

                specs = parse_inputs([HF_INPUTS if causal else HF_INPUTS.split()[0]])
        else:
            factory, label = _import_target(request.target, frames)
        with mode, recorder:
            try:
                built = factory()
            except TraceSetupError:
                raise
            except (Exception, SystemExit) as e:  # noqa: BLE001 - user code may raise anything
                raise TraceSetupError(f"{label}() raised {_first_line(e)}{_where(frames, e)}") from None
            model, args, kwargs = _split_factory_output(built, label)
            if specs:
                args = tuple(_spec_tensor(s, request.dynamic, env) for s in specs if not s.name)
                kwargs = {s.name: _spec_tensor(s, request.dynamic, env) for s in specs if s.name}
            elif args is None:
                raise TraceSetupError(
                    f"{label}() returned a model without example inputs: pass --inputs NAME:DTYPE[DIMS] "
                    "(e.g. --inputs input_ids:int64[8,2048])"
                )
            elif request.dynamic:
                args = tuple(_dynamic_like(a, f"arg{i}", env) for i, a in enumerate(args))
                kwargs = {k: _dynamic_like(v, k, env) for k, v in kwargs.items()}
        model.train(request.train)
        result.model = type(model).__name__
        result.parameters = sum(int(p.numel()) for p in model.parameters())
        result.inputs = _describe_inputs(args, kwargs)
        breaks = _BreakAnalysis(model, args, kwargs, frames, mode) if request.graph_breaks else None
        _run(model, args, kwargs, request.train, mode, recorder, frames, result)
        if breaks is not None:
            _add_breaks(result, breaks.result())
    result.uses = recorder.uses
    for site, decisions in env.decisions.items():
        expr, value = decisions[0]
        result.events.append(TraceEvent("data-dependent-branch", "Python branches on a tensor value", site,
                                        len(decisions), f"traced as if {expr} is {value}"))
    if request.dynamic:
        import sympy

        # In terms of the inputs (input_ids.size(0)), not of symbols whose numbering varies.
        names = {sym: sympy.Symbol(sources[0].name) for sym, sources in env.var_to_sources.items() if sources}
        seen = set()
        for g, site in env.guard_sites:
            expr = str(g.xreplace(names))
            key = (expr, site)
            if key not in seen:
                seen.add(key)
                result.shape_guards.append({"guard": expr, **({"path": site.path, "line": site.line} if site else {})})
    result.executed = frames.executed
    result.loaded = _loaded_user_files(frames)
    return result


@contextlib.contextmanager
def _torch_logs_off():
    """torch logs warnings of its own (e.g. a guard it could not evaluate while the trace stops a
    loop); the report says what matters, so they stay off while user code runs."""
    loggers = [logging.getLogger(n) for n in list(logging.root.manager.loggerDict) if n.split(".")[0] == "torch"]
    loggers.append(logging.getLogger("torch"))
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _dynamic_like(value, name: str, env: ShapeEnv):
    if not isinstance(value, torch.Tensor):
        return value
    return torch.empty(_symbolic_shape(name, tuple(value.shape), True, env), dtype=value.dtype)


def _run(model, args, kwargs, train: bool, mode, recorder: OpRecorder, frames: Frames, result: TraceResult) -> None:
    try:
        with mode, recorder, torch.set_grad_enabled(train):
            recorder.phase = "forward"
            out = model(*args, **kwargs)
            result.forward_done = True
            if not train:
                return
            recorder.phase = "loss"
            start = torch.autograd._get_sequence_nr()
            loss = _loss_of(out)
            if loss is None:
                result.stopped = TraceEvent("trace-error", "no output of the model needs a gradient; backward not traced", None)
                return
            seed = torch.ones_like(loss)
            recorder.skip = range(start, torch.autograd._get_sequence_nr())
            recorder.phase = "backward"
            torch.autograd.backward(loss, seed)
            result.backward_done = True
    except LoopOnData as e:  # reported as the branch on data it is (NR1506), with its count
        result.stopped = TraceEvent("data-dependent-branch", str(e), e.site)
    except Exception as e:  # noqa: BLE001 - what the trace cannot capture is a finding, not a crash
        result.stopped = TraceEvent("trace-error", _first_line(e), frames.from_exception(e))
        if type(e) in USER_ERRORS:  # exactly these: torch's own errors subclass some of them
            result.user_error = True
            return
        result.events.append(result.stopped)
    finally:
        recorder.phase = None


def _add_breaks(result: TraceResult, found: dict) -> None:
    result.graph_breaks = found["status"]
    result.graph_count = found.get("graph_count", 0)
    for message, site, detail, count in found.get("breaks", []):
        result.events.append(TraceEvent("graph-break", message, site, count, detail))


def _loaded_user_files(frames: Frames) -> set[str]:
    out = set()
    for module in list(sys.modules.values()):
        f = getattr(module, "__file__", None)
        if isinstance(f, str) and f.startswith(frames.roots) and frames.tier(f) == Frames.USER:
            out.add(frames.display(f))
    return out


def make_fx_joint_graph(model, args: tuple, kwargs: dict | None = None):
    """The reference capture: make_fx of forward + torch.autograd.grad over the parameters, the
    joint graph the recorder's op stream stands for. Slower (it builds the FX graph); the tests
    compare the two and the benchmark times it. Call it with fake model and inputs, under their mode."""
    from torch.fx.experimental.proxy_tensor import make_fx

    params = dict(model.named_parameters())

    def step(params, args, kwargs):
        loss = _loss_of(torch.func.functional_call(model, params, args, kwargs))
        return torch.autograd.grad(loss, list(params.values()))

    return make_fx(step)(params, args, kwargs or {}).graph


def graph_op_counts(graph) -> dict[str, int]:
    """Op name (as the recorder names them) -> count, for an FX graph's call_function nodes."""
    counts: dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "call_function" and hasattr(node.target, "_schema"):
            name = _op_name(node.target)
            if name is not None:
                counts[name] = counts.get(name, 0) + 1
    return counts
