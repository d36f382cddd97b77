"""What each function of a Python file refers to, and under which conditions: the per-file half of
function-level reachability (analyzer/context.py is the other half).

Read from Python's own `ast` tree, which the scan parses once per file anyway (the screen, or the
syntax check of files no rule can match), so it costs a walk, never a second parse. Everything here
is a plain JSON-able record cached with the file's result:

- `defs`: every function and class, by the scope name findings carry (`Class.method`,
  `outer.inner`): [line, end line, kind ("f" function, "m" method, "c" class), markers]. Markers say
  what a porting engineer reads from the name and shape: `eval` (evaluation, inference, export),
  `host` (Dataset items, collate and worker functions: runs on the CPU), `hook` (a framework calls it
  by name), `trains` (calls backward or steps an optimizer), `registered` (a decorator registers it),
  `construct` (an `__init__`) and `checkpoint` (named for reading or writing a checkpoint,
  `setup_code.checkpoint_io`): code that runs once, outside the step.
- `refs`: per scope, what it may call: `q:<qualified name>` (resolved through the file's imports),
  `l:<name>` (a top-level name of this file), `a:<name>` (an attribute or method name on some object:
  resolved later by name among the classes that are reached), each with the index of the innermost
  condition region it sits in (-1 for none).
- `regions`: conditions on configuration (`if args.fused_softmax:`, `if os.environ.get("X") == "1":`,
  `if not self.training:`): [first line, last line, condition, branch ("body"/"else"), parent region,
  text, GPU branch of a capability check with a PyTorch path beside it, runs only on a CUDA device
  (`if x.is_cuda:`, `if device_type == "cuda":`, the rest of a function after
  `if not torch.cuda.is_available(): return`, with the return branch's lines as a hole)]; each arm
  of a conditional expression on an option (`A if use_x else B`) or on a device check
  (`torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []`, `device_arms`) is a region
  that holds no line (first line after last), for the references in it; a device check's arms also
  carry their span ([line, column, end line, end column], after the hole's place) for the findings.
  A condition is a small tree (see `_cond`) that context.py evaluates against the defaults found
  anywhere in the repository; whatever it cannot read is ["?"] (unknown: never a gate).
- `host_paths`: [CUDA branch region, other branch region] of each CUDA check whose other branch
  computes a result itself, neither raising, asserting nor exiting (`if x.is_cuda: return
  torch.ops.lib.op(x) else: return scipy_path(x)`, or the early `if not x.is_cuda: return f(x)`):
  what the CUDA branch alone calls has a host path (cpu_twins.py reads it with `refs`).
- `cuda_optional`: CUDA-only regions with no alternative that nothing after them needs (a cache
  warm-up, `f = torch.compile(f)`, a value set before refined, the rest of `__init__` after
  `if not torch.cuda.is_available(): return`): skipped on Trainium with nothing lost (`_refines`);
  `cuda_optional_lines`, a CUDA move the class undoes before use anyway (`_moved_anyway`).
- `device_tests`: CUDA-only regions (branches, arms, the rest after an early return) whose test reads
  a device, tensor or process group that already exists (`if self._device.type == "cuda":`,
  `if x.is_cuda:`, `use_ids = dist.get_backend() == "nccl"`) rather than asking what is available
  (`torch.cuda.is_available()`), and whose other path names no device of its own (`device_test`):
  the device was chosen elsewhere; on Trainium the region is simply not taken. A membership in a
  literal set of GPU device types (`DEVICE_TYPE in ("cuda", "hip")`) is such a test like `==`, a
  `match` arm `case "cuda":` is a region like the branch of that `if` (`match_`), and a module
  constant bound once from a call or imported is read, not chosen (`_outer_choices`, `_rebound`).
- `gives_up`: branches of a test on a setting that only raise, assert or exit (`else: raise
  ValueError(...)`): no value of the setting runs there (default_choice.py).
- `options`: defaults a user does not have to set: argparse `add_argument`, click options, absl
  flags, dataclass / attrs / pydantic / `*Config` fields and `__init__` keyword defaults of config
  classes: [name, value, line].
- `decorated`: [first decorator line, def line, name] of decorated top-level functions.
- `keyed`: [key, name] of top-level functions a registering decorator files under a string key
  (`@register_op("kl_loss_and_grad", impl_name="nvidia-triton")`).
- `calls`: per function, the `q:`/`l:` names its own body calls (constructs) outside any if, loop,
  try or match statement: what it always runs. `installs`: per function, the names it assigns onto
  an attribute of an imported module (`modeling_llama.LlamaMLP = LigerSwiGLUMLP`, a monkey patch).
- `registries` and `lookups`: tables of callables chosen by name (`{"flash": flash_fwd, ...}`; one
  level nested, `{"mlp": {"grouped": GroupedMLP}}`, by key path joined with KEY_PATH) and where a
  reached scope picks from one (`TABLE[cfg.attn]`, `TABLE[cfg.kind][cfg.impl]`: ["path", key, key]).
- `bindings`: the file's top-level import bindings (so `from .ops import x` in a package's
  `__init__` is followed), `stars` (modules its `from .conv import *` re-exports), `imports` per scope, `flags` (module-level names assigned from a
  condition), `neuron` (the file already targets Neuron or XLA).
- what calls pass, for parameter flags (docs/contexts.md "Keyword options"): `passed`, per callee
  (the call's `q:`/`l:` reference; `m:NAME` for a method called by name on an object the facts
  cannot follow, `model_class.build(...)`, whose keywords set only a function of that name; "" when
  the call names nothing else), each distinct
  call as [positional values (their count when none is readable), {keyword: value}, 1 when it
  spreads `*args`/`**kwargs` else 0] (a value
  is a literal, a forwarded setting or parameter, or "?"; a callee with more than `_MAX_CALLS` distinct calls
  ends with None: more calls than recorded); `signatures`, per function, its parameters with a
  default: [name, position (-1 keyword-only), first and last line of the default]; `handed`, the
  `q:`/`l:` names used other than as a call's function (a callback, an alias, a base class). These
  three are kept as compact JSON text (`packed`) until the context pass reads them (`unpacked`):
  as objects they were a fifth of the facts a scan holds in memory (docs/lab/performance.md, run T).
- `kept` (per construction or checkpoint function: the references it stores or hands on for later
  rather than calls once, `setup_code.kept_refs`) and `returns` (per function: the references it
  returns, a factory of callables); `lambdas`, the line spans of the lambdas written in a
  construction or checkpoint function (their bodies run when called, not there).
- settings one hop away (docs/contexts.md): `predicates` (short helper functions over their
  parameter's settings, as conditions), `attributes` (what each class's `__init__` sets an instance
  attribute to, for `self.net.looped`), `registrations` (`REG.register("key", func=f)`), and module
  dicts of defaults (`ffn_config_defaults = {...}`) among the `options`.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection, Iterator, Sequence

from .compilefacts import compile_sites
from .imports import absolute
from .inference_only import (asserts_no_grad, backward_only_raises, backward_refusals, drives_trained_model, refuses_gradients,
                             switches_to_eval)
from .pyindex import CAPABILITY
from .setup_code import checkpoint_io, kept_refs, returned_refs
from .vocab import OPTIMIZER_RECEIVER
from .vocab import ast_chain as _chain
from .vocab import defaulted_params, from_import

# Names of functions that evaluate, infer, export or visualise rather than train.
EVAL_NAME = re.compile(
    r"(?i)^_*(evaluate|evaluation|eval|validate|validation|valid|predict|prediction|inference|infer|generate"
    r"|sample|sampling|export|visuali[sz]e|plot|demo|benchmark)(_\w*)?$"
    r"|^_*\w+_(eval|evaluate|evaluation|validation|validate|predict|prediction|inference|export|generate)$"
    r"|^_*(\w+_)?(validation|test|predict|prediction)_step(_end)?$|^on_(validation|test|predict)\w*$|^test_\w+$"
    r"|^val_dataloader$"
)
# Tests that hold only while a model is exported (TorchScript, tracing, ONNX), never in the eager step.
EXPORT_MODES = frozenset({"is_scripting", "is_tracing", "is_in_onnx_export"})
# Functions that run in the data pipeline on the host.
HOST_NAME = re.compile(r"(?i)collat|^_*(pre)?process\w*|^_*tokeni[sz]e\w*|^worker_init\w*|^_*load_(data|dataset)\w*")
HOST_METHODS = frozenset({"__getitem__", "__getitems__", "__iter__", "__next__", "__len__"})
# Classes that run a trained model, never train it: prediction, validation, export.
EVAL_CLASS = re.compile(r"(?:Predictor|Validator|Evaluator|Exporter|Inferencer|Inference|Benchmark)$")
HOST_CLASS = re.compile(r"(?i)(dataset|datamodule|collat|sampler|tokeni[sz]er|preprocess|augment|transform)s?$")
HOST_KEYWORDS = frozenset({"collate_fn", "worker_init_fn", "transform", "transforms", "target_transform"})
# Methods a framework calls by name (nn.Module, Lightning, Trainer subclasses, datasets).
HOOK_NAME = re.compile(
    r"^(forward|__\w+__|\w*_step(_end)?|on_\w+|configure_\w+|setup|teardown|prepare_\w*|\w*_dataloader"
    r"|compute_loss|training_step|reset_parameters|_init_weights|_reset_parameters|backward|extra_repr|hook\w*)$"
)
CONFIG_ROOTS = frozenset({
    "args", "arguments", "opt", "opts", "option", "options", "config", "conf", "cfg", "hparams", "hp", "params",
    "flags", "FLAGS", "training_args", "train_args", "model_args", "data_args", "script_args", "settings",
    "hyperparams", "cmd_args", "parsed_args", "train_config", "model_config", "trainer_config",
})
CONFIG_CLASS = re.compile(r"(Config|Cfg|Configuration|Args|Arguments|Options|Params|Settings|Hparams|HParams)$")
NEURON_MODULES = ("torch_neuronx", "torch_xla", "neuronx_distributed", "neuronxcc", "nki", "libneuronxla",
                  "optimum.neuron", "neuronx_distributed_training")
_NEURON_DEVICE = re.compile(r"""["'](neuron|xla)(:\d+)?["']""")
_ENV = frozenset({"os.environ.get", "os.getenv", "os.environ.setdefault"})
MAIN = "<main>"  # the scope of a module's `if __name__ == "__main__":` block
_MAX_REFS = 400  # per scope: a generated table of thousands of names is not a call graph
_LINE_END = re.compile(r"\r\n?|\n")
_POSITIONAL = (ast.Constant, ast.Name, ast.Attribute, ast.UnaryOp, ast.IfExp)
_MAX_CALLS = 256  # distinct calls of one callee per file recorded; more end with None ("and others")


def _literal(node: ast.AST):
    if type(node) is ast.Constant and type(node.value) in (str, int, float, bool, type(None)):
        return node.value
    if type(node) is ast.UnaryOp and type(node.op) is ast.USub and type(node.operand) is ast.Constant:
        v = node.operand.value
        return -v if type(v) in (int, float) else ...
    if type(node) is ast.IfExp:  # `"float16" if probe() else "float16"`: both arms give one value
        body = _literal(node.body)
        return body if body is not ... and _literal(node.orelse) == body else ...
    return ...  # Ellipsis: not a literal


def _text(node: ast.AST, limit: int = 80) -> str:
    try:
        s = " ".join(ast.unparse(node).split())
    except Exception:  # noqa: BLE001 - unparse of odd trees: no text rather than no facts
        return ""
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _key_chain(node: ast.AST) -> list[str] | None:
    """`block_args['ffn_config']['ffn_type']` -> ["block_args", "ffn_config", "ffn_type"]: names,
    attributes and string keys; None for anything else."""
    out: list[str] = []
    while True:
        t = type(node)
        if t is ast.Subscript and type(key := _literal(node.slice)) is str:
            out.append(key)
            node = node.value
        elif t is ast.Attribute:
            out.append(node.attr)
            node = node.value
        elif t is ast.Name:
            out.append(node.id)
            return out[::-1]
        else:
            return None


# Joins the keys of a nested table's entry (`{'mlp': {'grouped': GroupedMLP}}` -> "mlp\x1fgrouped").
KEY_PATH = "\x1f"


def regions_out(regions: Sequence, index: int) -> Iterator[tuple[int, list]]:
    """The region at `index` and the regions around it, innermost out: (index, region). A region's
    parent is its field 4 (-1 at the top); at most 50 are walked, so facts read from a cache that
    somebody edited into a cycle cannot hang a scan."""
    for _ in range(50):
        if not 0 <= index < len(regions):
            return
        yield index, regions[index]
        index = regions[index][4]
# A module-level dict literal of defaults merged into a configuration (`ffn_config_defaults = {...}`).
_DEFAULTS_TABLE = re.compile(r"(?i)(^|_)defaults?$|^defaults?_")


class _Facts:
    def __init__(self, module_name: str, is_package: bool) -> None:
        self.module_name = module_name
        self.is_package = is_package
        self.bindings: dict[str, str] = {}  # top-level name -> qualified name (imports)
        self.stars: list[str] = []  # modules a top-level `from m import *` re-exports, in order
        self.local: set[str] = set()  # top-level defs and classes
        # names of the scope being walked bound once to a PyTorch object it constructs (`opt =
        # torch.optim.SGD(...)`): `opt.step` is that class's method, never a project method named `step`
        self.made: dict[str, str] = {}
        self.defs: dict[str, list] = {}
        self.refs: dict[str, dict[str, list[int]]] = {}
        # per scope, the names of `a:` references made on `self`/`cls` (with the class) and on anything else
        self.on_self: dict[str, tuple[str, set[str]]] = {}
        self.on_other: dict[str, set[str]] = {}
        self.imports: dict[str, list[str]] = {}
        self.regions: list[list] = []
        self.options: list[list] = []
        self.registries: dict[str, dict[str, list[str]]] = {}
        self.lookups: dict[str, list[list]] = {}
        self.decorated: list[list] = []  # [first decorator line, def line, name] of top-level functions
        self.calls: dict[str, set[str]] = {}  # per function: project names it calls outside any condition
        self.installs: dict[str, list[str]] = {}  # per function: names it assigns onto an imported module
        self.flags: dict[str, list] = {}
        self.aliases: dict[str, str] = {}
        self.passed: dict[str, list] = {}  # callee reference -> distinct calls (module docstring)
        self.signatures: dict[str, list] = {}
        self.handed: set[str] = set()
        self.param_owners: dict[str, str] = {}  # option parameter or `self.x` -> the function it is a parameter of
        self.registrations: list[list] = []  # [registry, key, callable's ref, scope of the call]
        self.keyed: list[list] = []  # [key, name]: `@register_op("kl_div", ...)` on a top-level def
        self.custom_ops: dict[str, str] = {}  # "ns.name" of a `@custom_op("ns::name")` -> the function
        self.attributes: dict[str, list] = {}  # instance attribute -> what each class sets it to (class_attributes)
        self.members: set[str] = set()  # the enclosing class's other objects (`_members`)
        # configuration objects by their annotation (`margs: Arguments`, `self.margs = margs`): `_config_objects`
        self.config_params: set[str] = set()
        self.config_members: set[str] = set()
        # `self.rope = config.attn_config['rope']` in `__init__`, `n = getattr(cfg, "x", 0) or 0` at a
        # function's top, each assigned once: the name holds that configuration read (`_config_reads`)
        self.config_reads: dict[str, list] = {}
        self.predicates: dict[str, list] = {}  # qualified name -> helper predicate (`predicate`)
        self.host_values: set[str] = set()
        self.kept: dict[str, list[str]] = {}  # construction and checkpoint functions: references kept for later
        self.returns: dict[str, list[str]] = {}  # per function: references it returns (a factory of callables)
        self.lambdas: dict[str, list[list[int]]] = {}  # construction and checkpoint functions: lambda line spans
        self.host_paths: list[list[int]] = []  # [CUDA branch region, host branch region] (module docstring)
        self.cuda_optional: list[int] = []  # CUDA-only regions nothing after them needs (`_refines`)
        self.probe_tests: list[list] = []  # [region, reference]: CUDA-only when the function called is a CUDA probe
        self.probe_via: dict[str, str] = {}  # function -> the function whose answer it passes on (`cuda_probe`)
        self.gives_up: list[int] = []  # branches of a setting's test that only raise, assert or exit
        self.cuda_optional_lines: list[list[int]] = []  # [first, last] line of a CUDA move undone anyway (`_moved_anyway`)
        self.device_tests: list[int] = []  # CUDA-only regions whose test reads an existing device (`device_test`)
        self.held: dict[str, dict[str, str]] = {}  # class -> attribute its `__init__` builds -> the class's reference
        self.neuron = False
        self.neuron_scopes: set[str] = set()  # functions whose own imports or devices are Neuron/XLA
        self.main_guard = 0
        self.main_span: list[int] = []
        self.top_trains = False  # module-level code runs a trainer, or a step or backward in a loop
        self.top_steps_once = False  # module-level code steps or calls backward, but in no loop (a smoke test)
        self.main_trains = False  # the `__main__` block itself trains
        self.text: str | None = None  # the source, when given (`_Walk.column`)
        self.lines: list[str] | None = None  # its lines, split only when a column needs them

    # ------------------------------------------------------------------ resolution

    def note_by_name(self, scope: str, cls: str | None, parts: list[str], name: str) -> None:
        """Where an `a:` reference of `scope` was made: on `self`/`cls` of the method's class
        (`self._communicate_shapes(...)`), or on any other object (`obj.step()`)."""
        if cls is not None and parts[0] in ("self", "cls") and parts[1] == name:
            self.on_self.setdefault(scope, (cls, set()))[1].add(name)
        else:
            self.on_other.setdefault(scope, set()).add(name)

    def self_only(self) -> dict[str, list]:
        """scope -> [class, names] of the `a:` references a method makes only on `self` or `cls` (never
        on another object, nor as a string): what they call is a method of its class's hierarchy."""
        out = {}
        for scope, (cls, names) in sorted(self.on_self.items()):
            refs, other = self.refs.get(scope, {}), self.on_other.get(scope, set())
            only = sorted(n for n in names if n not in other and f"s:{n}" not in refs and f"a:{n}" in refs)
            if only:
                out[scope] = [cls, only]
        return out

    def value_ref(self, node: ast.AST) -> str | None:
        """The qualified or local name a module-level value is (`mlp.GroupedMLP`, `flash_fwd`), not an
        attribute known only by its name: an entry of a table of callables, or an alias."""
        parts = _chain(node)
        ref = self.ref_of(parts, None) if parts else None
        return ref if ref is not None and not ref.startswith("a:") else None

    def ref_of(self, parts: list[str], cls: str | None, nested=()) -> str | None:
        head = parts[0]
        for scope, names in reversed(nested):
            if head in names:
                return "l:" + ".".join([scope, *parts])
        if head in ("self", "cls") and cls is not None and len(parts) > 1:
            return "a:" + parts[1]
        if len(parts) > 1 and head in self.made:
            return "q:" + ".".join([self.made[head], *parts[1:]])
        q = self.bindings.get(head)
        if q is not None:
            return "q:" + ".".join([q, *parts[1:]])
        if head in self.local:
            return "l:" + ".".join(parts)
        if len(parts) > 1:
            return "a:" + parts[-1]
        return None

    # ------------------------------------------------------------------ conditions

    def cond(self, node: ast.AST, params: dict[str, object]) -> list:
        """A condition as a small tree: ["opt", name], ["field", name] (a field of a configuration object
        known by its annotation), ["env", NAME], ["lit", v], ["not", c],
        ["and"/"or", c...], ["cmp", op, c, c], ["in", c, [values]], ["fails", what] (a test that the
        step failed: `"out of memory" in str(e)`, or a handler for `OverflowError`), ["accel", "rocm"]
        (a test that holds only in a ROCm build: rocm_test), ["?"]."""
        t = type(node)
        if t is ast.BoolOp:
            return ["and" if type(node.op) is ast.And else "or", *(self.cond(v, params) for v in node.values)]
        if t is ast.UnaryOp and type(node.op) is ast.Not:
            return ["not", self.cond(node.operand, params)]
        if t in (ast.Name, ast.Attribute, ast.Call, ast.Compare) and (version := torch_version_test(node)):
            return version
        if (oom := _oom_test(node)) is not None:
            return ["fails", "out of memory"] if oom else ["not", ["fails", "out of memory"]]
        if rocm_test(node):
            return ["accel", "rocm"]
        if t is ast.Compare and len(node.ops) == 1:
            op = type(node.ops[0]).__name__
            right = node.comparators[0]
            if op in ("In", "NotIn") and type(right) is ast.Name and right.id == "os":
                return ["?"]
            if op in ("In", "NotIn") and _chain(right) == ["os", "environ"]:
                name = _literal(node.left)
                c = ["env", name] if type(name) is str else ["?"]
                return c if op == "In" else ["not", c]
            if op in ("In", "NotIn") and type(right) is ast.Name and (right.id in self.local or right.id in self.bindings):
                # `cfg['ffn_type'] in ffns_with_megablocks`: one of the names a registry's `.register("key", ...)`
                # calls give it (context.py reads the keys from the whole project)
                c = ["inreg", self.cond(node.left, params), right.id]
                return c if op == "In" else ["not", c]
            if op in ("In", "NotIn") and type(right) in (ast.Tuple, ast.List, ast.Set):
                values = [_literal(e) for e in right.elts]
                if any(v is ... for v in values):
                    return ["?"]
                c = ["in", self.cond(node.left, params), values]
                return c if op == "In" else ["not", c]
            if op in ("Eq", "NotEq", "Is", "IsNot", "Gt", "GtE", "Lt", "LtE"):
                return ["cmp", op, self.cond(node.left, params), self.cond(right, params)]
            return ["?"]
        lit = _literal(node)
        if lit is not ...:
            return ["lit", lit]
        if t is ast.Call:
            parts = _chain(node.func)
            if parts:
                q = self.bindings.get(parts[0], parts[0])
                full = ".".join([q, *parts[1:]])
                if full in _ENV and node.args:
                    name = _literal(node.args[0])
                    default = _literal(node.args[1]) if len(node.args) > 1 else None
                    return ["env", name, default] if type(name) is str and default is not ... else ["?"]
                if parts == ["getattr"] and len(node.args) >= 2:
                    name = _literal(node.args[1])
                    root = _chain(node.args[0])
                    if type(name) is str and root and self.config_root([*root, name]):
                        default = _literal(node.args[2]) if len(node.args) > 2 else None
                        return ["opt", name, default] if default is not ... else ["opt", name]
                if parts == ["isinstance"] and len(node.args) == 2 and not node.keywords:
                    return self.type_test(node.args[1])
                if parts[-1] == "is_grad_enabled" and not node.args:
                    return ["train"]  # `torch.is_grad_enabled()`: True in the training step
                if parts[-1] in EXPORT_MODES and not node.args:
                    return ["not", ["train"]]  # `torch.jit.is_scripting()`: False in the eager training step
                if parts[-1] in ("int", "bool", "float", "str", "lower", "strip", "upper") and (node.args or parts[-1] in ("lower", "strip", "upper")):
                    inner = node.args[0] if node.args else node.func.value if type(node.func) is ast.Attribute else None
                    if inner is not None:
                        return ["conv", parts[-1], self.cond(inner, params)]
            if type(node.func) is ast.Attribute and node.func.attr in ("lower", "strip", "upper") and not node.args:
                return ["conv", node.func.attr, self.cond(node.func.value, params)]
            if (parts and len(parts) == 1 and not node.keywords and (parts[0] in self.bindings or parts[0] in self.local)
                    and not CAPABILITY.search(parts[0])):
                # `is_native_diffusion(cfg)`: a helper predicate of the project, evaluated one level deep
                # (context.py) with its arguments: a configuration object or a condition
                q = self.bindings.get(parts[0]) or f"{self.module_name}.{parts[0]}"
                return ["pred", q, [["cfgobj"] if _config_object(a) else self.cond(a, params) for a in node.args]]
            return ["?"]
        if t is ast.Subscript:
            if _chain(node.value) == ["os", "environ"]:
                name = _literal(node.slice)
                return ["env", name, None] if type(name) is str else ["?"]
            keys = _key_chain(node)  # `self.config.ffn_config['ffn_type']`: a configuration value by its key
            if keys and len(keys) >= 2 and not keys[0].endswith("kwargs") and self.config_root(keys):
                return ["opt", keys[-1]]
            return ["?"]
        parts = _chain(node)
        if parts:
            if parts[-1] == "training" and len(parts) >= 2:
                return ["train"]  # `self.training` / `model.training`: True in the training job
            if len(parts) >= 2 and self.config_root(parts):
                return ["opt", parts[-1]]
            if ((len(parts) == 2 and parts[0] in self.config_params)
                    or (len(parts) == 3 and parts[0] == "self" and parts[1] in self.config_members)):
                return ["field", parts[-1]]  # `margs.mlp_impl`, `margs: Arguments`: that class's field (context.py)
            if len(parts) == 2 and parts[0] == "self" and "self." + parts[1] in params:
                key = "self." + parts[1]  # `self.x = x` in __init__: x's default
                return _param_cond(_param_of(params, key), self.param_owners.get(key))
            if len(parts) == 2 and parts[0] == "self" and "self." + parts[1] in self.config_reads:
                return self.config_reads["self." + parts[1]]  # `self.rope = config.attn_config['rope']` in __init__
            if len(parts) == 2 and parts[0] == "self" and (_FLAG_PARAM.search(parts[1]) or _EXPORT_SWITCH.search(parts[1])):
                return ["opt", parts[1]]  # `self.use_flash = config.use_flash` in __init__
            if len(parts) == 3 and parts[0] == "self" and parts[1] in self.members:
                return ["oattr", parts[2]]  # `self.net.looped`: as the project's classes set `looped` (context.py)
            if len(parts) == 1:
                if parts[0] in params:
                    return _param_cond(_param_of(params, parts[0]), self.param_owners.get(parts[0]))
                if parts[0] in self.config_reads:
                    return self.config_reads[parts[0]]  # `n = getattr(cfg, "n", 0) or 0` at the function's top
                return ["flag", parts[0]]
        return ["?"]

    def type_test(self, types: ast.AST) -> list:
        """`isinstance(x, BitsandbytesPrecision)`: ["isa", class name, reference]; a tuple of classes
        is one test per class. True only when the project builds such an object (context.py)."""
        out = []
        for t in types.elts if type(types) is ast.Tuple else [types]:
            parts = _chain(t)
            if not parts:
                return ["?"]
            out.append(["isa", parts[-1], self.ref_of(parts, None)])
        return out[0] if len(out) == 1 else ["or", *out]

    @staticmethod
    def config_root(parts: list[str]) -> bool:
        """`args.x`, `self.args.x`, `self.config.x`, `cfg.model.x`: a read of a configuration value."""
        names = parts[:-1]
        if names and names[0] in ("self", "cls"):
            names = names[1:]
        return bool(names) and (names[0] in CONFIG_ROOTS or names[-1] in CONFIG_ROOTS
                                or names[0].endswith(("config", "args", "cfg", "_opts")))


def _runs_trainer(node: ast.Call) -> bool:
    """`trainer.fit(...)`, `engine.train()`, `Trainer(...)`: a trainer, which loops over the data itself."""
    f = node.func
    if type(f) is ast.Attribute:
        recv = _chain(f.value) if f.attr in ("fit", "train") else None
        return bool(recv) and bool(re.search(r"(?i)trainer|engine|runner", recv[-1]))
    return type(f) is ast.Name and f.id.endswith("Trainer")


def _is_trains_call(node: ast.Call) -> bool:
    if _runs_trainer(node):
        return True
    f = node.func
    if type(f) is ast.Attribute:
        if f.attr == "backward":
            recv = _chain(f.value)  # `torch.autograd.backward(...)` in an autograd Function is not a loop
            return not (recv and recv[-1] in ("autograd", "ctx")) and not (type(f.value) is ast.Name and f.value.id == "super")
        if f.attr == "step":
            recv = _chain(f.value)
            return bool(recv) and bool(OPTIMIZER_RECEIVER.search(recv[-1]))
        parts = _chain(f)
        return bool(parts) and len(parts) >= 2 and parts[-2] == "optim" and parts[-1][:1].isupper()
    return type(f) is ast.Name and f.id in ("Adam", "AdamW", "SGD")


def code_facts(tree: ast.Module, module_name: str, is_package: bool, text: str | None = None) -> dict:
    """The function-level facts of one parsed file (see the module docstring); `text`, its source,
    lets a fact skip a walk the text rules out."""
    fx = _Facts(module_name, is_package)
    fx.text = text
    _bind_top(fx, tree)
    _Walk(fx).run(tree)
    out = {
        "defs": fx.defs,
        "refs": {s: [[ref, region] for ref, regions in sorted(r.items()) for region in sorted(regions)]
                 for s, r in fx.refs.items() if r},
        "imports": {s: _least_gated(m) for s, m in fx.imports.items() if m},
        "regions": fx.regions,
        "options": fx.options,
        "bindings": fx.bindings,
        "main_guard": fx.main_guard,
        "main_span": fx.main_span,
        "top_trains": fx.top_trains,
    }
    for key, value in (("registries", fx.registries), ("lookups", fx.lookups), ("flags", fx.flags), ("aliases", fx.aliases),
                       ("registrations", fx.registrations), ("keyed", fx.keyed), ("custom_ops", fx.custom_ops),
                       ("attributes", fx.attributes), ("predicates", fx.predicates),
                       ("passed", {k: v for k, v in sorted(fx.passed.items())}), ("signatures", fx.signatures),
                       ("handed", sorted(fx.handed)),
                       ("host_values", sorted(fx.host_values)), ("host_paths", fx.host_paths),
                       ("cuda_optional", fx.cuda_optional), ("cuda_optional_lines", fx.cuda_optional_lines),
                       ("probe_tests", fx.probe_tests), ("probe_via", fx.probe_via),
                       ("gives_up", fx.gives_up), ("device_tests", fx.device_tests),
                       ("calls", {k: sorted(v) for k, v in sorted(fx.calls.items())}),
                       ("installs", {k: sorted(set(v)) for k, v in sorted(fx.installs.items())}), ("decorated", fx.decorated),
                       ("kept", fx.kept), ("returns", fx.returns), ("lambdas", fx.lambdas), ("held", fx.held),
                       ("self_only", fx.self_only()), ("stars", fx.stars)):
        if value:
            out[key] = packed(value) if key in PACKED else value
    if fx.neuron:
        out["neuron"] = True
    if fx.neuron_scopes:
        out["neuron_scopes"] = sorted(fx.neuron_scopes)
    if compiles := compile_sites(tree, fx.bindings, text):
        out["compiles"] = compiles  # what torch.compile is applied to (compilefacts.py)
    if fx.main_trains:
        out["main_trains"] = True
    if fx.top_steps_once and not fx.top_trains:
        out["top_steps_once"] = True
    return out


PACKED = frozenset({"passed", "signatures", "handed"})  # facts only the context pass reads, kept as text


def packed(value) -> str:
    """A fact kept as JSON text: one string in memory instead of thousands of small lists and dicts."""
    return json.dumps(value, separators=(",", ":"))


def unpacked(code: dict, key: str, empty=None):
    """A `packed` fact of one file's code facts as objects; `empty` (None: {}) when the file has none."""
    text = code.get(key)
    return json.loads(text) if text else ({} if empty is None else empty)


def _bind_top(fx: _Facts, tree: ast.Module) -> None:
    """Top-level import bindings and definitions (also inside module-level if/try blocks)."""
    stack = [tree.body]
    while stack:
        for node in stack.pop():
            t = type(node)
            if t is ast.Import:
                for a in node.names:
                    fx.bindings[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif t is ast.ImportFrom:
                mod = absolute(node.module or "", node.level, fx.module_name, fx.is_package)
                imported = [(a.name, a.asname) for a in node.names]
                for a in node.names:
                    if a.name != "*":
                        fx.bindings[a.asname or a.name] = from_import(mod, a.name, imported)[0]
                    elif mod and mod not in fx.stars:
                        fx.stars.append(mod)
            elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                fx.local.add(node.name)
            elif t is ast.If:
                stack.append(node.body)
                stack.append(node.orelse)
            elif t is ast.Try or t.__name__ == "TryStar":
                stack.append(node.body)
                stack.extend(h.body for h in node.handlers)
                stack.append(node.orelse)
            elif t in (ast.Assign, ast.AnnAssign):
                targets = node.targets if t is ast.Assign else [node.target]
                for tg in targets:
                    if type(tg) is ast.Name:
                        fx.local.add(tg.id)
    for name in list(fx.bindings):
        fx.local.discard(name)


def _is_neuron_module(module: str) -> bool:
    return bool(module) and any(module == m or module.startswith(m + ".") for m in NEURON_MODULES)


class _Walk:
    """One pass over the tree with a stack of scopes and of condition regions."""

    def __init__(self, fx: _Facts) -> None:
        self.fx = fx
        self.scope = ""  # the scope name findings use
        self.cls: str | None = None  # the enclosing class of a method
        self.region = -1
        self.params: dict[str, object] = {}
        self.attrs: dict[str, list] = {}  # "self.x" -> [parameter, default] of the enclosing class's __init__
        self.config_class = False  # inside a dataclass-like configuration class
        self.in_try = 0  # module-level statements under try: capability checks, not configuration
        self.in_test = False  # reading an `if` statement's test (its regions come after it)
        self.nest = 0  # if/for/while/try/match statements around the current one, in this function
        self.loops = 0  # for/while statements around the current one (module-level code: `top_trains`)
        self.cuda_locals: frozenset[str] = frozenset()  # locals holding a CUDA check in this function
        self.cuda_aliases: frozenset[str] = frozenset()  # "name()" for a module's import of a CUDA check
        self.names_cuda = True  # the file's text says "cuda" or "nccl": every CUDA check (`cuda_check`) does
        self.options = 0  # `if` statements around this one whose test reads an option (`if self.tpu:`)
        self.nested: list[tuple[str, set[str]]] = []  # enclosing functions and the defs inside them
        self.cuda_attrs: frozenset[str] = frozenset()  # "self.x" holding a CUDA check in the enclosing class
        self.refused: frozenset[str] = frozenset()  # tests under which the enclosing autograd Function's backward raises
        self.scopes: list[ast.AST] = []  # the enclosing function, else the module (`_refines` reads it)
        self.callees: set[int] = set()  # the function nodes of the calls met so far (`handed` leaves them out)
        self.type_only: frozenset[str] = frozenset()  # locals of this function that only list a type test's classes
        self.device_reads: frozenset[str] = frozenset()  # cuda_locals set from a test of an existing device
        self.chosen: dict[int, frozenset[str]] = {}  # per scope: names set from a device choice (`_chosen_names`)
        self.enclosing: dict[int, ast.AST] = {}  # function node -> the function or module around it (`chosen_names`)

    def run(self, tree: ast.Module) -> None:
        self.scopes.append(tree)
        # `from torch.cuda import is_available as cuda_available`: calling the name asks the check
        self.cuda_aliases = frozenset(f"{name}()" for name, ref in self.fx.bindings.items() if ref in _CHECK_CALLS)
        self.cuda_locals = self.cuda_aliases
        self.names_cuda = self.fx.text is None or "cuda" in self.fx.text or "nccl" in self.fx.text
        self.fx.made = _made_locals(tree.body, _assign_counts(tree.body), self.fx.bindings)
        self.body(tree.body)

    # ------------------------------------------------------------------ statements

    def body(self, stmts: list[ast.stmt]) -> None:
        for st in stmts:
            self.stmt(st)

    def stmt(self, st: ast.stmt) -> None:
        t = type(st)
        fx = self.fx
        if t in (ast.FunctionDef, ast.AsyncFunctionDef):
            self.function(st)
        elif t is ast.ClassDef:
            self.klass(st)
        elif t is ast.If:
            self.nest += 1
            option = self.option_test(st.test)
            self.options += option
            self.if_(st)
            self.options -= option
            self.nest -= 1
        elif (op := self.registration(st)) is not None:
            # `op.register_autograd(backward, setup_context=setup)`: the callbacks run when `op` does
            saved, self.scope = self.scope, op
            self.expr_children(st)
            self.scope = saved
        elif t is ast.Import or t is ast.ImportFrom:
            if t is ast.Import:
                mods = [a.name for a in st.names]
            else:
                mod = absolute(st.module or "", st.level, fx.module_name, fx.is_package)
                mods = [mod] + ([f"{mod}.{a.name}" for a in st.names if a.name != "*"] if mod else [])
            if any(_is_neuron_module(m) for m in mods):
                self.note_neuron()
            fx.imports.setdefault(self.scope, []).extend([m, self.region] for m in mods if m)
            if self.scope:  # a function-level import binds a name for this function only
                imported = [(a.name, a.asname) for a in st.names]
                for a in st.names:
                    if a.name != "*" and t is ast.ImportFrom:
                        fx.bindings.setdefault(a.asname or a.name, from_import(mods[0], a.name, imported)[0])
        else:
            table = t in (ast.Assign, ast.AnnAssign) and not self.scope and self.top_assign(st)
            if t is ast.AnnAssign and self.cls is not None and self.scope == self.cls:
                self.field(st)
            # a table's entries are chosen by name, not called by building the table; a list of classes
            # only a type test reads names them and builds none
            listed = t is ast.Assign and type(st.targets[0]) is ast.Name and st.targets[0].id in self.type_only
            if t is ast.Assign and self.scope:
                self.install(st)
            if not table and not listed:
                self.expr_children(st)
            is_try = t is ast.Try or t.__name__ == "TryStar"
            self.in_try += is_try
            loop = t in (ast.For, ast.AsyncFor, ast.While)
            compound = is_try or loop or t.__name__ == "Match"
            self.nest += compound
            self.loops += loop
            parent = self.region
            if t is ast.For and not st.orelse and _over_cuda_devices(st.iter):
                # `for i in range(torch.cuda.device_count()):` runs no iteration without CUDA
                fx.regions.append([st.lineno, st.end_lineno or st.lineno, ["cuda"], "body", parent,
                                   _text(st.iter), False, True])
                self.region = len(fx.regions) - 1
            elif t is ast.For and not st.orelse and (bound := _range_bound(st.iter)) is not None:
                # `for i in range(cfg.base_layers):` runs no iteration while the setting is 0: its body is
                # a branch taken only when it is above 0
                c = fx.cond(bound, self.params)
                if c != ["?"] and _has_config(c):
                    fx.regions.append([st.lineno, st.end_lineno or st.lineno, ["cmp", "Gt", c, ["lit", 0]], "body",
                                       parent, f"{_text(bound)} > 0", False, False])
                    self.region = len(fx.regions) - 1
            for field in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(st, field, None)
                if type(sub) is list:
                    for s in sub:
                        if type(s) is ast.ExceptHandler and s.body and (failed := recovery_handler(s)):
                            # `except OverflowError:` runs only after the step failed: recovery, off by default
                            self.region = self.recovery(s.body[0].lineno, s.end_lineno or s.lineno, failed, parent)
                            self.body(s.body)
                            self.region = parent
                        elif type(s) is ast.ExceptHandler:
                            self.body(s.body)
                        elif isinstance(s, ast.stmt):
                            self.stmt(s)
            self.region = parent
            if is_try:
                self.caught_query(st)
            self.in_try -= is_try
            if t.__name__ == "Match":
                self.match_(st)
            self.loops -= loop
            self.nest -= compound

    def install(self, st: ast.Assign) -> None:
        """`modeling_llama.LlamaMLP = LigerSwiGLUMLP` in a function: the project name is installed
        into an imported module (a monkey patch), so the library picks it for that module's users."""
        fx = self.fx
        onto = [tg for tg in st.targets if type(tg) is ast.Attribute]
        heads = [(_chain(tg) or [""])[0] for tg in onto]
        if not any(h in fx.bindings and h not in ("self", "cls") for h in heads):
            return
        parts = _chain(st.value)
        ref = fx.ref_of(parts, None) if parts else None
        if ref is not None and ref.startswith(("q:", "l:")):
            fx.installs.setdefault(self.scope, []).append(ref)

    def registration(self, st: ast.stmt) -> str | None:
        """The function whose method a module-level statement calls (`combine_op.register_autograd(...)`,
        `op.register_fake(fn)`): what the call hands over is that function's, not the module's."""
        if self.scope or type(st) is not ast.Expr or type(st.value) is not ast.Call:
            return None
        func = st.value.func
        if type(func) is not ast.Attribute or type(func.value) is not ast.Name:
            return None
        d = self.fx.defs.get(func.value.id)
        return func.value.id if d is not None and d[2] == "f" else None

    def expr_children(self, st: ast.stmt) -> None:
        for field in st._fields:
            if field in ("body", "orelse", "finalbody", "handlers", "cases"):
                continue
            v = getattr(st, field)
            if isinstance(v, ast.AST):
                self.expr(v)
            elif type(v) is list:
                for x in v:
                    if isinstance(x, ast.expr) or type(x) is ast.withitem or type(x) is ast.keyword:
                        self.expr(x)

    def function(self, node: ast.FunctionDef) -> None:
        fx = self.fx
        for d in node.decorator_list:
            self.expr(d)
        name = f"{self.scope}.{node.name}" if self.scope else node.name
        kind = "m" if self.cls is not None and self.scope == self.cls else "f"
        if node.decorator_list and not self.scope:
            fx.decorated.append([node.decorator_list[0].lineno, node.lineno, name])
            for d in node.decorator_list:  # `@ffns.register('mptmlp')`
                parts = _chain(d.func) if type(d) is ast.Call else None
                if parts and len(parts) == 2 and parts[1] == "register" and d.args and type(_literal(d.args[0])) is str:
                    fx.registrations.append([parts[0], _literal(d.args[0]), "l:" + name, ""])
                if parts and "regist" in parts[-1].lower() and d.args and type(_literal(d.args[0])) is str:
                    fx.keyed.append([_literal(d.args[0]), name])  # context.py `dispatched`: looked up by that key
        markers = self.markers(node, kind)
        fx.defs[name] = [node.lineno, node.end_lineno or node.lineno, kind, markers]
        if not self.scope and (pred := predicate(node)) is not None and _reads_setting(pred[1]):
            fx.predicates[f"{fx.module_name}.{name}"] = pred
        if sig := _signature(node):
            fx.signatures[name] = sig
        saved = (self.scope, self.region, self.params, self.nest, self.cuda_locals, fx.config_params, fx.param_owners,
                 self.type_only, fx.config_reads, fx.made)
        self.scope, self.region, self.nest = name, -1, 0
        fx.config_params = _config_objects(node)[0]
        inner, rebound = _statement_names(node)
        self.type_only = _type_only_locals(node, rebound)
        fx.made = _made_locals(node.body, rebound, fx.bindings, _param_names(node))
        aliases = {a for a in self.cuda_aliases if a[:-2] not in rebound and a[:-2] not in inner}
        self.cuda_locals = _cuda_locals(node.body, rebound, node.args, (self.cuda_attrs if self.cls else frozenset()) | aliases)
        if self.names_cuda:
            self.cuda_locals |= _false_off_cuda_locals(node, rebound, self.cuda_locals)
        self.enclosing[id(node)] = self.scopes[-1]
        saved_reads, self.device_reads = self.device_reads, _device_reads(node, self.cuda_locals, rebound,
                                                                          lambda: self.chosen_names(node))
        probe = cuda_probe(node, self.cuda_locals, self.negated_probe)
        if probe is True:
            markers.append("cuda_probe")  # its callers' tests are CUDA checks (context.py `probe_tests`)
        elif probe:
            fx.probe_via[name] = probe  # a probe when the function it asks first is one (context.py)
        self.scopes.append(node)
        own = _option_params(node, rebound, required=True)
        attrs = self.attrs if self.cls is not None else {}
        self.params = {**attrs, **own}
        # whose parameter each one is: a keyword passed at a call overrides the callee's alone (context.py)
        fx.param_owners = {**{k: f"{self.cls}.__init__" for k in attrs}, **{k: name for k in own}}
        self.params.update(_local_aliases(node.body, self.params, rebound, fx.param_owners))
        fx.config_reads = {**{k: v for k, v in fx.config_reads.items() if k not in rebound and k not in self.params},
                           **_config_locals(fx, node.body, rebound, self.params)}
        self.nested.append((name, inner))
        ref_of = lambda parts: fx.ref_of(parts, self.cls, self.nested)  # noqa: E731
        if "construct" in markers or "checkpoint" in markers:
            fx.kept[name] = kept_refs(node, ref_of)  # what it stores for the step, rather than calls once
            spans = [[n.lineno, n.end_lineno or n.lineno] for n in ast.walk(node) if type(n) is ast.Lambda]
            if spans:
                fx.lambdas[name] = spans  # their bodies run when called, maybe in the step
        returned = returned_refs(node, ref_of)
        if returned:
            fx.returns[name] = returned
        if kind == "m":
            table = self.returned_table(node)
            if table:
                fx.registries[name] = table  # `YOLO.task_map`: a table of classes by task
        # a function named as a parameter's default (`filter_logits_fn=top_k`) runs when this one does
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.expr(default)
        if kind == "m" and node.name == "__init__" and self.cls and CONFIG_CLASS.search(self.cls.rsplit(".", 1)[-1]):
            for pname, value in _all_param_defaults(node):
                fx.options.append([pname, value, node.lineno])
        if kind == "m" and node.name == "cuda" and node.body:
            # `def cuda(self, device=None)`: the type's own `.cuda()`, run when a caller asks for a CUDA
            # device (that call is the caller's own finding): on Trainium nobody calls it, like a
            # branch on a device that already exists (PyG's `Data.cuda`, a Module mixin's override)
            start = node.body[0].lineno
            fx.regions.append([start, node.end_lineno or start, ["cuda"], "body", -1,
                               f"{self.cls}.cuda()", False, True])
            self.region = len(fx.regions) - 1
            fx.device_tests.append(self.region)
        self.function_body(node.body, node.end_lineno or node.lineno, probe)
        self.nested.pop()
        self.scopes.pop()
        (self.scope, self.region, self.params, self.nest, self.cuda_locals, fx.config_params, fx.param_owners,
         self.type_only, fx.config_reads, fx.made) = saved
        self.device_reads = saved_reads

    def option_test(self, test: ast.AST) -> bool:
        """An `if` whose test reads a setting (`if self.tpu:`, `if args.xla:`), not a capability
        check (`if is_torch_xla_available():`, `if HAS_XLA:`) nor the `__main__` guard."""
        names = _test_names(test)
        if not names or "__name__" in names or "TYPE_CHECKING" in names:
            return False
        return not any(CAPABILITY.search(n) for n in names)

    def note_neuron(self) -> None:
        """A Neuron/XLA import or device here: the file targets Neuron when it happens in module code,
        the function when it happens in a function (a lazy import), and neither behind a setting
        (`if self.tpu: import torch_xla`: an opt-in XLA mode beside a CUDA default)."""
        if self.options:
            return
        if self.scope and self.scope != MAIN:
            self.fx.neuron_scopes.add(self.scope)
        else:
            self.fx.neuron = True

    def returned_table(self, node: ast.FunctionDef) -> dict[str, list[str]] | None:
        """`def task_map(self): return {"detect": {"model": DetectionModel, ...}, "pose": {...}}`: a method
        whose body returns a table of project names keyed by strings (the task, backend or mode a
        setting picks); each key's entry holds the references of its value."""
        body = node.body
        if body and type(body[0]) is ast.Expr and type(body[0].value) is ast.Constant:
            body = body[1:]  # the docstring
        if len(body) != 1 or type(body[0]) is not ast.Return or type(body[0].value) is not ast.Dict:
            return None
        table: dict[str, list[str]] = {}
        for k, v in zip(body[0].value.keys, body[0].value.values):
            key = _literal(k) if k is not None else ...
            if type(key) is not str:
                return None
            refs: list[str] = []
            stack = [v]
            while stack:  # the outermost name of each dotted chain (`yolo.detect.DetectionTrainer`)
                n = stack.pop()
                parts = _chain(n) if type(n) in (ast.Name, ast.Attribute) else None
                if parts:
                    ref = self.fx.ref_of(parts, self.cls, self.nested)
                    if ref is not None and not ref.startswith("a:") and ref not in refs:
                        refs.append(ref)
                    continue
                stack.extend(ast.iter_child_nodes(n))
            if refs:
                table[key] = sorted(refs)
        return table or None

    def function_body(self, stmts: list[ast.stmt], end: int, probe: bool | str = False) -> None:
        """A function's statements. `if not torch.cuda.is_available(): return ...` at its top level
        leaves the rest of the function to CUDA devices alone (the early return dominates it): the
        rest, with the test (the device check itself), is a CUDA-only region; the return branch is not.
        In a CUDA probe function (`cuda_probe`) that rest only answers the question on a GPU: off CUDA
        the function answers False, which is what its callers need, so nothing after it is lost."""
        fx = self.fx
        for i, st in enumerate(stmts):
            before = len(fx.regions)
            self.stmt(st)
            if _cuda_return(st) and len(fx.regions) > before:
                self.cuda_return(st, before, stmts[i + 1:], end, probe)
            elif (type(st) is ast.Try or type(st).__name__ == "TryStar") and (early := self.try_return(st, before)):
                # `try: ... if not torch.cuda.is_available(): return ...`: the rest of the `try` runs only on
                # CUDA, and so does the rest of the function when every handler only returns or raises
                k, ret = early
                exits = all(len(h.body) == 1 and type(h.body[0]) in (ast.Return, ast.Raise) for h in st.handlers)
                whole = exits and not st.orelse and not st.finalbody
                rest = st.body[k + 1:] + (list(stmts[i + 1:]) if whole else [])
                stop = end if whole else max(getattr(x, "end_lineno", x.lineno) for x in st.body)
                outer = self.region
                self.cuda_return(st.body[k], ret, rest, stop, probe)
                if not whole:
                    self.region = outer
            elif ((type(st) is ast.Try or type(st).__name__ == "TryStar") and st.body and type(st.body[-1]) is ast.Return
                    and st.handlers and not st.orelse and not st.finalbody and i + 1 < len(stmts)
                    and all(failures := [recovery_handler(h) for h in st.handlers])):
                # `try: return self._forward(x) except RuntimeError as e: if "out of memory" not in str(e):
                # raise`: the rest of the function runs only after the step ran out of memory
                self.region = self.recovery(stmts[i + 1].lineno, end, ", ".join(dict.fromkeys(failures)), self.region)
            elif (type(st) is ast.If and not st.orelse and type(st.body[-1]) is ast.Return and len(fx.regions) > before
                    and fx.regions[before][0] == st.lineno and _option_only(fx.regions[before][2])):
                # `if not self.use_aux: return x`: the rest of the function runs only when the test is false
                c, ret = fx.regions[before][2], fx.regions[before]
                negated = c[0] == "not"
                rest_start = (st.end_lineno or st.lineno) + 1
                fx.regions.append([rest_start, end, c[1] if negated else c, "body" if negated else "else", self.region,
                                   _text(st.test.operand if negated and type(st.test) is ast.UnaryOp else st.test), False, False])
                self.region = len(fx.regions) - 1
            elif (type(st) is ast.If and not st.orelse and type(st.body[-1]) is ast.Return and capability_test(st.test)
                    and (ref := self.negated_probe(st.test)) is not None):
                # `if not _is_triton_available(): return ...`: the rest runs only on CUDA when the function
                # it asks is a CUDA probe (context.py marks it); in a probe asking it, nothing is lost
                hole = [st.body[0].lineno, st.end_lineno or st.lineno]
                fx.regions.append([st.lineno, end, ["cap"], "body", self.region, f"if {_text(st.test)}: return",
                                   False, False, hole])
                self.region = len(fx.regions) - 1
                fx.probe_tests.append([self.region, ref])
                if probe == ref:
                    fx.cuda_optional.append(self.region)

    def recovery(self, start: int, end: int, failed: str, parent: int) -> int:
        """A region of recovery code, run only when the step failed with `failed`: ["fails", what]."""
        text = "the step runs out of memory" if failed == "out of memory" else f"{failed} is raised"
        self.fx.regions.append([start, end, ["fails", failed], "body", parent, text, False, False])
        return len(self.fx.regions) - 1

    def caught_query(self, st: ast.Try) -> None:
        """`try: cc = torch.cuda.get_device_capability() ... except (RuntimeError, AssertionError):
        return False`: a CUDA query that raises without CUDA (`_RAISES_OFF_CUDA`), made by a top-level
        statement of the `try` body, with handlers that catch what a missing CUDA raises and do not give
        up. Off CUDA that statement raises and the handler answers instead, so it and the rest of the
        body run only on CUDA: a CUDA-only region (the probe is its own guard)."""
        if not st.handlers or not all(_catches_missing_cuda(h) and not _gives_up(h.body) for h in st.handlers):
            return
        for k, x in enumerate(st.body):
            if type(x) in (ast.Assign, ast.AnnAssign, ast.Return, ast.Expr) and x.value is not None \
                    and _queries_cuda(x.value):
                end = max(getattr(y, "end_lineno", y.lineno) for y in st.body)
                self.fx.regions.append([x.lineno, end, ["cuda"], "body", self.region,
                                        f"{_text(x.value)} raises without CUDA (caught)", False, True])
                return
            if type(x) not in (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom, ast.Expr):
                return  # a branch or a loop first: the query may not be reached

    def cuda_return(self, st: ast.If, ret_index: int, rest: list[ast.stmt], end: int, probe: bool | str) -> None:
        """`if not torch.cuda.is_available(): return ...` (`_cuda_return`, its regions from `ret_index`
        on): the test and everything after it up to `end` (`rest`) is a CUDA-only region, the return
        branch a hole in it; the regions of the statements after it nest in it."""
        fx = self.fx
        ret = fx.regions[ret_index]
        ret[0] = st.body[0].lineno  # the return branch starts after the test ...
        fx.regions.append([st.lineno, end, ["cuda"], "body", self.region,
                           f"if {_text(st.test)}: return", False, True, [ret[0], ret[1]]])  # ... and is not CUDA-only
        self.region = len(fx.regions) - 1
        if self.device_test(st.test, st.body):  # `if device.type != "cuda": return`
            fx.device_tests.append(self.region)
        if probe:
            fx.cuda_optional.append(self.region)  # `if not torch.cuda.is_available(): return False`
        elif _computes(st.body):  # `if not x.is_cuda: return f(x)`: the return branch is a host path
            fx.host_paths.append([self.region, ret_index])
        elif _refines(rest, self.scopes[-1], st.lineno, end):
            fx.cuda_optional.append(self.region)  # a bare return, and the rest only refines

    def try_return(self, st: ast.Try, before: int) -> tuple[int, int] | None:
        """(position in the `try` body, index of its return branch's region) of the first `if not
        torch.cuda.is_available(): return ...` among the top-level statements of a `try` (its regions
        are among those added since `before`), else None."""
        for k, x in enumerate(st.body):
            if _cuda_return(x):
                for j in range(before, len(self.fx.regions)):
                    region = self.fx.regions[j]
                    if region[0] == x.lineno and region[3] == "body" and region[4] == self.region:
                        return k, j
                return None
        return None

    def markers(self, node: ast.FunctionDef, kind: str) -> list[str]:
        out = []
        decos = [(_chain(d.func if type(d) is ast.Call else d) or [""])[-1] for d in node.decorator_list]
        nograd = any(d in ("no_grad", "inference_mode") for d in decos)
        # a no-grad loop over a data loader is an evaluation loop; a no-grad kernel wrapper is not
        loops = nograd and any(type(n) in (ast.For, ast.AsyncFor) and _loader_loop(n.iter) for n in ast.walk(node))
        # an op that refuses gradients, or a function wrapped by a decorator named for evaluation
        # (`@eval_decorator`: switches the model to eval mode around it), is inference-only
        eval_deco = any("eval" in re.split(r"[_\W]+", d.lower()) for d in decos)
        if EVAL_NAME.match(node.name) or loops or eval_deco or refuses_gradients(node):
            out.append("eval")
        owner = self.cls.rsplit(".", 1)[-1] if kind == "m" and self.cls else ""
        if (node.name in HOST_METHODS or HOST_NAME.search(node.name) or (owner and HOST_CLASS.search(owner))
                or node.name in self.fx.host_values):
            out.append("host")
        if kind == "m" and HOOK_NAME.match(node.name):
            out.append("hook")
        if node.decorator_list and all((self.fx.ref_of(_chain(d.func if type(d) is ast.Call else d) or ["?"], None)
                                        or "").startswith("q:triton.") for d in node.decorator_list):
            out.append("triton")  # `@triton.autotune(...) @triton.jit`: compiles the function, registers nothing
        # `@register("name")`, `@registry.register_module()`, `@register_model`: registered for lookup by name
        if any("regist" in d.lower() for d in decos):
            out.append("registered")
        for d in node.decorator_list:
            op = _literal(d.args[0]) if type(d) is ast.Call and d.args else None
            if (type(op) is str and op.count("::") == 1 and kind == "f" and not self.scope
                    and not re.search(r"(?i)fake|abstract|meta", _text(d.func))):
                # `@torch.library.custom_op("flash_attn::_fwd", ...)` (or a wrapper of it): called as
                # `torch.ops.flash_attn._fwd`, a name no import resolves (context.py `Graph.resolve`);
                # a fake (meta) implementation registered for it computes shapes only
                self.fx.custom_ops.setdefault(op.replace("::", "."), node.name)
        if _rewrites_weights(node):
            out.append("surgery")
        if kind == "m" and node.name == "__init__":
            out.append("construct")  # builds the object once; context.py asks whether it is a module
        if checkpoint_io(node.name):
            out.append("checkpoint")
        return out

    def klass(self, node: ast.ClassDef) -> None:
        fx = self.fx
        for d in node.decorator_list:
            self.expr(d)
        bases = []
        for b in node.bases:  # a base named in a class statement is not constructed: an edge when the class is
            parts = _chain(b)
            if parts:
                bases.append(fx.ref_of(parts, None) or "")
                if bases[-1][:2] in ("q:", "l:"):
                    fx.handed.add(bases[-1])  # a subclass's `super().__init__(...)` calls it unseen
        name = f"{self.scope}.{node.name}" if self.scope else node.name
        markers = []
        if HOST_CLASS.search(node.name) or any(re.search(r"(Dataset|Sampler|DataModule)$", b) for b in bases):
            markers.append("host")
        if EVAL_CLASS.search(node.name) or backward_only_raises(node) or drives_trained_model(node):
            markers.append("eval")  # a prediction class, an autograd Function with no backward, a mask generator
        if any(type(d) is ast.Call and "regist" in _text(d.func).lower() for d in node.decorator_list):
            markers.append("registered")
        external = [b for b in bases if b.startswith("q:") and b.split(".")[0][2:] not in ("typing", "abc", "enum")]
        fx.defs[name] = [node.lineno, node.end_lineno or node.lineno, "c", markers, bases, bool(external)]
        decos = {(_chain(d.func if type(d) is ast.Call else d) or [""])[-1] for d in node.decorator_list}
        config_like = bool(decos & {"dataclass", "define", "s", "attrs", "frozen", "mutable", "dataclass_transform"}) \
            or bool(CONFIG_CLASS.search(node.name)) or any(b.endswith(("BaseModel", "BaseSettings")) for b in bases)
        saved = (self.scope, self.cls, self.region, self.config_class, self.attrs, fx.members, fx.config_members,
                 fx.config_reads)
        self.scope, self.cls, self.region = name, name, -1
        self.config_class = config_like
        self.attrs = _init_attributes(node)
        counts = _attribute_counts(node)
        saved_cuda, self.cuda_attrs = self.cuda_attrs, _cuda_attributes(node, counts)
        saved_refused, self.refused = self.refused, backward_refusals(node)
        fx.cuda_optional_lines.extend(_moved_anyway(node))
        # `self.use_kernel = use_kernel` after `use_kernel = default(use_kernel, CHECK)`: the device check, not the option
        self.attrs = {k: v for k, v in self.attrs.items() if k not in self.cuda_attrs}
        held: dict[str, str] = {}
        fx.members = _members(fx, node, held)
        if held:
            fx.held[name] = held
        init = _init_of(node)
        fx.config_members = _config_objects(init)[1] if init is not None else set()
        fx.config_reads = _config_attributes(fx, init, counts, self.attrs) if init is not None else {}
        for attr, entry in class_attributes(node, self.attrs).items():
            have = fx.attributes.setdefault(attr, [])
            if entry not in have:
                have.append(entry)
        self.body(node.body)
        (self.scope, self.cls, self.region, self.config_class, self.attrs, fx.members, fx.config_members,
         fx.config_reads) = saved
        self.cuda_attrs, self.refused = saved_cuda, saved_refused

    def field(self, st: ast.AnnAssign) -> None:
        """A dataclass-like field default: `use_flash: bool = False`, `x: int = field(default=3)`."""
        if not getattr(self, "config_class", False) or type(st.target) is not ast.Name or st.value is None:
            return
        value = _literal(st.value)
        if value is ... and type(st.value) is ast.Call:
            for kw in st.value.keywords:
                if kw.arg == "default":
                    value = _literal(kw.value)
        if value is not ...:
            self.fx.options.append([st.target.id, value, st.lineno])

    def top_assign(self, st) -> bool:
        """`USE_TRITON = os.environ.get("USE_TRITON", "0") == "1"`: a module-level flag; `TABLE = {...}`."""
        targets = st.targets if type(st) is ast.Assign else [st.target]
        if len(targets) != 1 or type(targets[0]) is not ast.Name or st.value is None:
            return False
        name = targets[0].id
        value = st.value
        if self.in_try and type(value) is not ast.Dict:
            return False  # `try: import triton; HAS_TRITON = True except ...`: a capability, not a setting
        if type(value) is ast.Dict and _DEFAULTS_TABLE.search(name):
            for k, v in zip(value.keys, value.values):  # `{'ffn_type': 'mptmlp'}`: each key's default
                key, val = (_literal(k) if k is not None else ...), _literal(v)
                if type(key) is str and val is not ...:
                    self.fx.options.append([key, val, k.lineno])
        pairs = list(zip(value.keys, value.values)) if type(value) is ast.Dict else []
        if type(value) is ast.Call and _chain(value.func) == ["dict"] and not value.args and value.keywords:
            pairs = [(ast.Constant(kw.arg), kw.value) for kw in value.keywords if kw.arg]  # `dict(top_p=top_p)`
        if pairs and all(k is not None and _literal(k) is ... and _chain(k) for k, _v in pairs):
            # `MAPPING = {nn.Linear: IntLinear, nn.Embedding: IntEmbedding}`: a table keyed by types or
            # other names, looked up with an object's type; keyed by the name's text, like a registry
            table = {".".join(_chain(k)): [ref] for k, v in pairs if (ref := self.fx.value_ref(v)) is not None}
            if len(table) == len(pairs) >= 2:
                self.fx.registries[name] = table
                return True
        if pairs:
            table = {}
            for k, v in pairs:
                key = _literal(k) if k is not None else ...
                if type(key) is not str:
                    continue
                if type(v) is ast.Dict:
                    # `{'mlp': {'grouped': GroupedMLP, 'sparse': SparseMLP}, ...}`: one level of nesting, an
                    # entry per key path (`TABLE[cfg.kind][cfg.impl]` picks one); a nested dict that holds
                    # anything else (`{'small': {'dim': 512, 'block': Block}}`) is data, and so is the table
                    inner = self.nested_table(key, v)
                    if inner is None:
                        table = {}
                        break
                    table.update(inner)
                    continue
                ref = self.fx.value_ref(v)
                if ref is not None:
                    table[key] = [ref]
            if table and len(table) >= 2:
                self.fx.registries[name] = table
                return True
        parts = _chain(value)
        if parts and len(parts) > 1:
            ref = self.fx.value_ref(value)
            if ref is not None:
                self.fx.aliases[name] = ref  # `attn = AttnFunction.apply`: calling `attn` calls that
                if ref.startswith("q:torch.ops."):
                    # `fwd = torch.ops.lib.fwd` names the registered function, as `fwd = _fwd` would
                    _add_ref(self.fx.refs.setdefault(self.scope, {}), ref, self.region)
                return True
        c = self.fx.cond(value, {})
        if c != ["?"] and c[0] != "flag" and not _CAPABILITY_FLAG.search(name):
            self.fx.flags[name] = c
        return False

    def nested_table(self, key: str, value: ast.Dict) -> dict[str, list[str]] | None:
        """The entries of a table nested in a table under `key`, by key path; None unless every key is
        a string and every value a project name."""
        out: dict[str, list[str]] = {}
        for k, v in zip(value.keys, value.values):
            inner = _literal(k) if k is not None else ...
            ref = self.fx.value_ref(v)
            if type(inner) is not str or ref is None:
                return None
            out[key + KEY_PATH + inner] = [ref]
        return out

    def if_(self, node: ast.If) -> None:
        fx = self.fx
        test = node.test
        parts = _chain(test)
        if parts and parts[-1] == "TYPE_CHECKING":
            return  # never runs: its imports bind names for types only
        self.in_test = True
        self.expr(test)
        self.in_test = False
        if type(test) is ast.Compare and _chain(test.left) == ["__name__"] and _literal(test.comparators[0]) == "__main__":
            if not self.scope:
                # Runs only when the file is the program (an entry), not when it is imported: its own scope.
                fx.main_guard = node.lineno
                fx.main_span = [node.lineno, max(getattr(s, "end_lineno", s.lineno) for s in node.body)]
                self.scope = MAIN
                self.body(node.body)
                self.scope = ""
            else:
                self.body(node.body)
            self.body(node.orelse)
            return
        c = _cuda_cond(test, fx.cond(test, self.params), self.cuda_locals)
        config = c != ["?"] and _has_config(c)
        forward_only = bool(self.refused) and self.scope.startswith(f"{self.cls}.forward") and ast.dump(test) in self.refused
        if asserts_no_grad(node.body) or forward_only or switches_to_eval(node.body):
            # `if store is not None: assert not k.requires_grad`: a branch that runs only without autograd
            # (a KV-cache decode branch), `forward`'s branch for a case its backward refuses, and a branch
            # that opens with `model.eval()` (a sample every N steps) are not the training step; their else is
            c, config = (["and", ["not", ["train"]], c] if config else ["not", ["train"]]), True
        # `if use_triton: kernel(x) else: torch_path(x)`: what the kernel branch calls has a PyTorch path
        # beside it (a fallback, followed across calls by context.py), switch or not.
        kernel_branch = self.capability_guard(node)
        cuda = cuda_check(test, self.cuda_locals)
        # `if torch.cuda.is_available(): ... else: raise NotImplementedError`: CUDA is required, so the
        # CUDA branch is the only path and never skipped (the device check itself still reads it)
        cuda_only = cuda if cuda and not _gives_up(node.orelse if cuda == "body" else node.body) else None
        # `if _is_triton_available():`: a CUDA check when the project function it calls is a CUDA probe
        # (known across files: context.py reads `probe_tests`); the branch that would run only on CUDA
        probe = None
        if cuda is None and (probe := self.probe_test(test)) is not None:
            if (_gives_up(node.orelse if probe[1] == "body" else node.body) or (probe[1] == "else" and not node.orelse)
                    or not (config or kernel_branch or capability_test(test))):
                probe = None  # a region only for a test named for a capability: not every `if f():`
        if not config and kernel_branch is None and cuda is None and probe is None:
            self.body(node.body)
            self.body(node.orelse)
            return
        if not config:
            # an unknown condition: never a gate, only the fallback mark; a CUDA check also says which
            # branch runs only on a CUDA device (`["cuda"]`: the body; `["not", ["cuda"]]`: the else)
            c = ["cap"] if cuda is None else ["cuda"] if cuda == "body" else ["not", ["cuda"]]
        text = _text(test)
        parent = self.region
        body_end = max((getattr(s, "end_lineno", s.lineno) for s in node.body), default=node.lineno)
        # the branch that runs only on a CUDA device, whatever decides the test (`if device_type == "cuda"`
        # reads a local, yet the branch is skipped on Trainium all the same)
        fx.regions.append([node.lineno, body_end, c, "body", parent, text, kernel_branch == "body", cuda_only == "body"])
        self.region = body = len(fx.regions) - 1
        reads = cuda_only is not None and self.device_test(test, node.orelse if cuda_only == "body" else node.body)
        if reads and cuda_only == "body":
            fx.device_tests.append(body)
        if probe is not None and probe[1] == "body":
            fx.probe_tests.append([body, probe[0]])
        if config and _gives_up(node.body):
            fx.gives_up.append(body)
        if cuda_only == "body" and _refines(node.body, self.scopes[-1], node.lineno, body_end, node.orelse):
            fx.cuda_optional.append(body)
        self.body(node.body)
        self.region = parent
        if node.orelse:
            start = node.orelse[0].lineno
            end = max(getattr(s, "end_lineno", s.lineno) for s in node.orelse)
            fx.regions.append([start, end, c, "else", parent, text, kernel_branch == "else", cuda_only == "else"])
            self.region = other = len(fx.regions) - 1
            if reads and cuda_only == "else":
                fx.device_tests.append(other)
            if probe is not None and probe[1] == "else":
                fx.probe_tests.append([other, probe[0]])
            if config and _gives_up(node.orelse):
                fx.gives_up.append(other)
            self.body(node.orelse)
            # the branch that runs off CUDA computes a result itself (cuda_only: it does not give up)
            if cuda_only and _computes(node.orelse if cuda_only == "body" else node.body):
                fx.host_paths.append([body, other] if cuda_only == "body" else [other, body])
        self.region = parent

    def match_(self, st: ast.stmt) -> None:
        """`match device_type: case "cuda": ... case _: ...`: the arm for CUDA (`case "cuda":`, `case
        "cuda" | "hip":`) is the branch of `if device_type == "cuda":` and the other arms its else, one
        region each; the arm runs only on a CUDA device unless every other path gives up (a `case _:`
        that raises). Its test is `device_test`ed as that `if` (the other arms are its other path)."""
        fx = self.fx
        parent = self.region
        cuda = [i for i, case in enumerate(st.cases) if _cuda_pattern(case.pattern)]
        if not cuda:
            for case in st.cases:
                self.body(case.body)
            return
        # the equivalent test (`device_type == "cuda"`, `device_type in ("cuda", "hip")` for the first CUDA
        # arm), for the condition, `device_test` and the region's text
        pattern = st.cases[cuda[0]].pattern
        values = [p.value for p in pattern.patterns] if type(pattern).__name__ == "MatchOr" else [pattern.value]
        op, right = (ast.Eq(), values[0]) if len(values) == 1 else (ast.In(), ast.Tuple(elts=values, ctx=ast.Load()))
        test = ast.copy_location(ast.Compare(left=st.subject, ops=[op], comparators=[right]), st)
        c = _cuda_cond(test, fx.cond(test, self.params), self.cuda_locals)
        if c == ["?"] or not _has_config(c):
            c = ["cuda"]
        text = f"match {_text(st.subject)}: case {' | '.join(_text(v) for v in values)}"
        wildcard = any(type(case.pattern).__name__ == "MatchAs" and case.pattern.pattern is None and case.guard is None
                       for case in st.cases)
        for i, case in enumerate(st.cases):
            others = [s for j, other in enumerate(st.cases) if j != i for s in other.body]
            start = case.pattern.lineno
            end = max((getattr(s, "end_lineno", s.lineno) for s in case.body), default=start)
            if i in cuda:
                rest = [other.body for j, other in enumerate(st.cases) if j not in cuda]
                only = not (wildcard and rest and all(_gives_up(b) for b in rest))
                fx.regions.append([start, end, c, "body", parent, text, False, only])
                self.region = len(fx.regions) - 1
                if only and self.device_test(test, others):
                    fx.device_tests.append(self.region)
            else:
                fx.regions.append([start, end, c, "else", parent, text, False, False])
                self.region = len(fx.regions) - 1
            self.body(case.body)
            self.region = parent

    def device_test(self, test: ast.AST, other) -> bool:
        """`device_test` in this scope, for a CUDA-only region whose other path (statements or an
        expression) is `other`: that path must name no device of its own (`_names_device`)."""
        scope = self.scopes[-1]
        return (device_test(test, self.cuda_locals, self.device_reads, lambda: self.chosen_names(scope))
                and not _names_device(other))

    def chosen_names(self, scope: ast.AST) -> frozenset[str]:
        """`_chosen_names` of a scope, computed once (`device_test` and `_device_reads` both ask), with
        the names it reads from the scope around it (a module constant, an enclosing function's local)
        that are chosen there (`_outer_choices`)."""
        if id(scope) not in self.chosen:
            outer = self.enclosing.get(id(scope))
            self.chosen[id(scope)] = _chosen_names(scope) | (
                _outer_choices(scope, self.chosen_names(outer)) if outer is not None else _rebound(scope))
        return self.chosen[id(scope)]

    def option_arms(self, n: ast.IfExp) -> bool:
        """`codebook = Euclidean if not use_cosine_sim else CosineSim`: a class or function chosen by an
        option is an alternative like an `if` branch; each arm's references sit in a region of its own
        that holds no line, with the arm's span (`span`) for the findings inside it (context.py
        `setting_arm`). A capability test (`fused(x) if HAS_TRITON else x + y`) marks its kernel arm
        as `if_` marks the kernel branch."""
        fx = self.fx
        # a name holding a CUDA check (`use_ids = dist.get_backend() == "nccl"`) reads as that check, as in `if_`
        c = _cuda_cond(n.test, fx.cond(n.test, self.params), self.cuda_locals)
        kernel = capability_test(n.test)  # `fused(x) if HAS_TRITON else x + y`: the kernel arm has a PyTorch path beside it
        if c == ["?"] or not _has_config(c):
            if not kernel:
                return False
            if self.device_arms(n):
                return True  # a device check's arms keep their rule (`device_arms`)
            c = ["cap"]  # an unknown capability test, as `if_` marks it: never a gate, only the fallback
        self.expr(n.test)
        line = n.lineno
        not_test = type(n.test) is ast.UnaryOp and type(n.test.op) is ast.Not
        negated = c[0] == "not" and not_test
        arms = ((n.body, c, "body", n.test), (n.orelse, c[1], "body", n.test.operand) if negated else (n.orelse, c, "else", n.test))
        parent = self.region
        for arm, cond, branch, test in arms:
            mark = kernel and arm is (n.orelse if not_test else n.body)
            fx.regions.append([line + 1, line, cond, branch, parent, _text(test), mark, False, None, self.span(arm)])
            self.region = len(fx.regions) - 1
            self.expr(arm)
            self.region = parent
        return True

    def device_arms(self, n: ast.IfExp) -> bool:
        """`torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []`: a device check in a
        conditional expression is one as in an `if` statement (`if_`): the arm the test picks only on a
        CUDA device (the body; the else of `a if not torch.cuda.is_available() else b`) runs only there,
        and the other arm is its PyTorch path (a value: it neither raises nor exits). The same tests
        count: `cuda_check`'s, and a call of a project function named for a capability (`probe_test`:
        CUDA-only once context.py knows the function is a CUDA probe). Each arm is a region that holds no
        line (its references only) and carries its span, [line, column, end line, end column] (1-based
        columns, as findings give them): context.py judges the findings inside the span like those of
        the statement's branch; the test itself (the probe) is in neither arm."""
        fx = self.fx
        side = cuda_check(n.test, self.cuda_locals)
        probe = self.probe_test(n.test) if side is None and capability_test(n.test) else None
        if side is None and probe is None:
            return False
        if probe is not None:
            side = probe[1]
        kernel = capability_test(n.test)
        c = ["cap"] if probe is not None else ["cuda"] if side == "body" else ["not", ["cuda"]]
        self.expr(n.test)
        text, line, parent = _text(n.test), n.lineno, self.region
        index = {}
        for arm, branch in ((n.body, "body"), (n.orelse, "else")):
            fx.regions.append([line + 1, line, c, branch, parent, text, kernel and branch == side,
                               probe is None and branch == side, None, self.span(arm)])
            self.region = index[branch] = len(fx.regions) - 1
            if probe is not None and branch == side:
                fx.probe_tests.append([self.region, probe[0]])
            elif branch == side and self.device_test(n.test, n.orelse if side == "body" else n.body):
                fx.device_tests.append(self.region)
            self.expr(arm)
            self.region = parent
        other = n.orelse if side == "body" else n.body
        if probe is None and type(other) not in (ast.Name, ast.Constant):
            # the other arm computes a result itself (`_computes`): what the CUDA arm alone calls has a host path
            fx.host_paths.append([index[side], index["else" if side == "body" else "body"]])
        return True

    def device_operands(self, n: ast.BoolOp) -> bool:
        """`x.device.type == "cuda" and torch.cuda.current_device() != x.device.index`: the operands after
        a CUDA check in a conjunction (after its negation in a disjunction: `not x.is_cuda or ...`) are
        evaluated only on a CUDA device, Python's short circuit, like the body of `if x.is_cuda:`. They
        are one arm as `device_arms` makes them: a region that holds no line, with their span; a test
        of a device that already exists (`device_test`) is recorded as one. Inside an `if` test too:
        the operands run before the branch is chosen, whatever the branch holds."""
        side = "body" if type(n.op) is ast.And else "else"
        k = next((i for i, v in enumerate(n.values[:-1]) if cuda_check(v, self.cuda_locals) == side), None)
        if k is None:
            return False
        fx, check, rest = self.fx, n.values[k], n.values[k + 1:]
        for v in n.values[:k + 1]:
            self.expr(v)
        span = self.span(rest[0])
        last = self.span(rest[-1])
        span[2:] = last[2:]
        parent = self.region
        fx.regions.append([n.lineno + 1, n.lineno, ["cuda"], "body", parent, _text(check), False, True, None, span])
        self.region = len(fx.regions) - 1
        if self.device_test(check, ast.Constant(value=False)):
            fx.device_tests.append(self.region)
        for v in rest:
            self.expr(v)
        self.region = parent
        return True

    def span(self, arm: ast.AST) -> list[int]:
        """An arm's span, [line, column, end line, end column] (1-based columns, as findings give them)."""
        end = arm.end_lineno or arm.lineno
        return [arm.lineno, self.column(arm.lineno, arm.col_offset) + 1, end, self.column(end, arm.end_col_offset or 0)]

    def column(self, line: int, offset: int) -> int:
        """The 0-based character column of ast's byte offset on `line` (they differ after a non-ASCII
        character; without the source text, the byte offset)."""
        text = self.fx.text
        if text is None or offset == 0:
            return offset
        if self.fx.lines is None:
            self.fx.lines = _LINE_END.split(text)  # ast's line ends, not str.splitlines' (form feeds)
        lines = self.fx.lines
        return len(lines[line - 1].encode()[:offset].decode(errors="replace")) if 0 < line <= len(lines) else offset

    def negated_probe(self, test: ast.AST) -> str | None:
        """The reference of the project function `if not f():` asks (see `probe_test`)."""
        if type(test) is not ast.UnaryOp or type(test.op) is not ast.Not or type(test.operand) is not ast.Call:
            return None
        p = self.probe_test(test)
        return p[0] if p is not None and p[1] == "else" else None

    def probe_test(self, test: ast.AST) -> tuple[str, str] | None:
        """(reference, branch) when an `if` test is a call of a project function (`_is_triton_available()`,
        `xformers._is_triton_available()`) that decides it on its own: "body" for the call, a
        conjunction with it or `TYPE_CHECKING or` it (False at run time), "else" for its negation."""
        t = type(test)
        if t is ast.UnaryOp and type(test.op) is ast.Not:
            inner = self.probe_test(test.operand)
            return None if inner is None else (inner[0], "else" if inner[1] == "body" else "body")
        if t is ast.BoolOp:
            rest = [v for v in test.values if not (type(test.op) is ast.Or and _chain(v) and _chain(v)[-1] == "TYPE_CHECKING")]
            if type(test.op) is ast.Or and len(rest) == 1:
                return self.probe_test(rest[0])
            if type(test.op) is ast.And:
                found = [p for v in rest if (p := self.probe_test(v)) is not None and p[1] == "body"]
                return found[0] if found else None
            return None
        if t is ast.Call and not test.keywords and type(test.func) in (ast.Name, ast.Attribute):
            parts = _chain(test.func)
            ref = self.fx.ref_of(parts, self.cls, self.nested) if parts else None
            return (ref, "body") if ref is not None and ref[:2] in ("l:", "q:") else None
        return None

    def capability_guard(self, node: ast.If) -> str | None:
        """"body" or "else": the branch of a capability check (`if HAS_TRITON`, `if x.is_cuda`,
        `if not use_kernel`) that runs a GPU path while the other branch is a working alternative (it
        neither raises nor exits); None when the test is no capability check or has no alternative."""
        test = node.test
        negated = type(test) is ast.UnaryOp and type(test.op) is ast.Not
        if not node.orelse or _gives_up(node.orelse) or _gives_up(node.body):
            return None  # asked first: cheaper than reading the test
        if not capability_test(test):
            return None
        return "else" if negated else "body"

    # ------------------------------------------------------------------ expressions

    def expr(self, node: ast.AST) -> None:
        fx = self.fx
        refs = fx.refs.setdefault(self.scope, {})
        stack = [node]
        while stack:
            n = stack.pop()
            t = type(n)
            if t is ast.Call:
                self.call(n, refs)
                f = n.func
                if type(f) is ast.Name and f.id in _TYPE_TESTS and len(n.args) == 2 and not n.keywords:
                    stack.append(n.args[0])  # `isinstance(s, DeepSpeedStrategy)` tests a type, runs none of its code
                    continue
            elif t is ast.Lambda:
                pass
            elif t is ast.IfExp and not self.in_test and ((self.scope and self.option_arms(n)) or self.device_arms(n)):
                continue
            elif t is ast.BoolOp and self.device_operands(n):
                continue
            if t is ast.Name and type(n.ctx) is not ast.Load:
                continue  # `f = None` rebinds the name (an import guard's fallback): it runs none of `f`'s code
            if t is ast.Name or t is ast.Attribute:
                parts = _chain(n)
                if parts is not None:
                    ref = fx.ref_of(parts, self.cls, self.nested)
                    if ref is not None:
                        _add_ref(refs, ref, self.region)
                        if ref[:2] in ("q:", "l:") and type(n.ctx) is ast.Load and id(n) not in self.callees:
                            fx.handed.add(ref)  # a callback or an alias: called where the facts cannot see
                        elif ref[:2] == "a:":
                            fx.note_by_name(self.scope, self.cls, parts, ref[2:])
                    if t is ast.Attribute and len(parts) > 2:
                        _add_ref(refs, "a:" + parts[-1], self.region)  # `self.model.encode`: by name too
                        fx.note_by_name(self.scope, None, parts, parts[-1])
                    continue
            elif t is ast.Constant and type(n.value) is str:
                if _NEURON_DEVICE.fullmatch(repr(n.value)) or n.value in ("neuron", "xla"):
                    self.note_neuron()
                elif n.value.isidentifier() and len(n.value) > 2:
                    _add_ref(refs, "s:" + n.value, self.region)  # getattr(self, "name"), hooks by name
                continue
            elif t is ast.Compare and any(type(o) in (ast.In, ast.NotIn) for o in n.ops):
                # `args.impl not in TABLE[args.kind]`: tests the inner table's keys, runs none of its entries
                stack.append(n.left)
                for o, r in zip(n.ops, n.comparators):
                    stack.extend([r.value, r.slice] if type(o) in (ast.In, ast.NotIn) and type(r) is ast.Subscript else [r])
                continue
            elif t is ast.Subscript:
                keys, root = [n.slice], n.value
                if type(root) is ast.Subscript and type(root.value) is ast.Name:
                    keys, root = [root.slice, n.slice], root.value  # `TABLE[cfg.kind][cfg.impl]`: a key path
                parts = _chain(root)
                if parts and len(parts) == 1 and _table_name(parts[0]) and (parts[0] in fx.local or parts[0] in fx.bindings):
                    c = [fx.cond(k, self.params) for k in keys]
                    fx.lookups.setdefault(self.scope, []).append([parts[0], c[0] if len(c) == 1 else ["path", *c], self.region])
                    stack.extend([*keys, root])
                    continue
                elif parts and len(parts) == 2 and parts[0] == "self" and self.cls is not None:
                    # `self.task_map[self.task]`: a table method asked for the instance's setting, which
                    # is read under its own name (`task: detect` in the configuration)
                    key = _chain(n.slice)
                    c = ["opt", key[-1]] if key and len(key) == 2 and key[0] == "self" else fx.cond(n.slice, self.params)
                    if c[0] == "opt":
                        fx.lookups.setdefault(self.scope, []).append(["a:" + parts[1], c, self.region])
            for child in ast.iter_child_nodes(n):
                stack.append(child)

    def call(self, n: ast.Call, refs: dict) -> None:
        fx = self.fx
        if _is_trains_call(n):
            if not self.scope:
                # a training job repeats its step: one backward or step outside any loop, with no
                # trainer run, is an installation check or a demo (`python -m bitsandbytes`)
                if self.loops or _runs_trainer(n):
                    fx.top_trains = True
                else:
                    fx.top_steps_once = True
            elif self.scope == MAIN:
                fx.main_trains = True
            d = fx.defs.get(self.scope)
            if d is not None and "trains" not in d[3]:
                d[3].append("trains")
        for kw in n.keywords:
            if kw.arg in HOST_KEYWORDS:
                parts = _chain(kw.value)
                if parts:
                    fx.host_values.add(parts[-1])
        parts = _chain(n.func)
        self.callees.add(id(n.func))
        self.note_passed(n, fx.ref_of(parts, self.cls, self.nested) if parts else None)
        if parts and self.scope and self.scope != MAIN and self.region == -1 and not self.nest:
            ref = fx.ref_of(parts, self.cls, self.nested)
            if ref is not None and ref[:2] in ("q:", "l:"):
                fx.calls.setdefault(self.scope, set()).add(ref)
        if parts and parts[-1] == "add_argument" and n.args:
            self.argparse(n)
        elif parts and parts[-1] == "option" and n.args:
            self.click_option(n)
        elif parts and len(parts) >= 2 and parts[-2] == "flags" and parts[-1].startswith("DEFINE_") and len(n.args) >= 2:
            name, value = _literal(n.args[0]), _literal(n.args[1])
            if type(name) is str and value is not ...:
                fx.options.append([name, value, n.lineno])
        elif parts and parts[-1] == "set_defaults":
            for kw in n.keywords:
                value = _literal(kw.value)
                if kw.arg and value is not ...:
                    fx.options.append([kw.arg, value, n.lineno])
        elif parts and parts[-1] == "get" and len(parts) == 2 and len(n.args) >= 1:
            if _table_name(parts[0]) and (parts[0] in fx.local or parts[0] in fx.bindings):
                fx.lookups.setdefault(self.scope, []).append([parts[0], fx.cond(n.args[0], self.params), self.region])
        elif parts == ["getattr"] and len(n.args) == 2:
            self.class_by_name(n)
        elif parts and len(parts) == 2 and parts[1] == "register" and n.args and type(_literal(n.args[0])) is str:
            # `ffns.register('torch_dmoe', func=build_torch_dmoe)`: an entry of a registry chosen by name
            fn = next((k.value for k in n.keywords if k.arg in ("func", "fn", "obj")), n.args[1] if len(n.args) > 1 else None)
            ref = fx.ref_of(_chain(fn), self.cls, self.nested) if fn is not None and _chain(fn) else None
            if ref is not None and ref[:2] in ("q:", "l:"):
                fx.registrations.append([parts[0], _literal(n.args[0]), ref, self.scope])

    def note_passed(self, n: ast.Call, ref: str | None) -> None:
        """What a call passes, under its callee (module docstring): every call of a project-resolvable
        name (what it leaves out matters too), and the keywords of any other call."""
        callee = ref if ref is not None and ref[:2] in ("q:", "l:") else ""
        if not callee and not any(kw.arg for kw in n.keywords):
            return
        resolvable = bool(callee)
        if not callee and type(n.func) is ast.Attribute:
            callee = f"m:{n.func.attr}"  # a method called by name on an object the facts cannot follow
        star = int(any(type(a) is ast.Starred for a in n.args) or any(kw.arg is None for kw in n.keywords))
        # by position, only what can be a literal or a forwarded name (the walk stays cheap on big calls)
        positional = [self.passed_value(a) if type(a) in _POSITIONAL else "?" for a in n.args] if resolvable else []
        record = [positional if any(v != "?" for v in positional) else len(positional),
                  {kw.arg: self.passed_value(kw.value) for kw in n.keywords if kw.arg is not None}, star]
        calls = self.fx.passed.setdefault(callee, [])
        if record in calls or (calls and calls[-1] is None):
            return
        calls.append(record if len(calls) < _MAX_CALLS else None)

    def passed_value(self, node: ast.AST):
        lit = _literal(node)
        return lit if lit is not ... else self.forwarded(node)

    def forwarded(self, value: ast.AST):
        """`f(x=x)` or `f(x=self.x)` forwarding an option parameter of the caller: that parameter
        (context.py follows it to its own callers, a bounded number of levels); `f(x=args.x)`: that
        configuration value; "?" otherwise."""
        c = self.fx.cond(value, {})
        if c[0] in ("opt", "field"):
            return {"opt": c[1], **({"default": c[2]} if len(c) > 2 else {})}
        parts = _chain(value)
        if parts and len(parts) <= 2:
            key = ".".join(parts)
            if key in self.params and (len(parts) == 1 or parts[0] == "self"):
                entry = _param_of(self.params, key)
                if entry[0] == _OTHER:
                    return "?"
                out = {"param": entry[0], "default": entry[-1]}  # the default callers of entry[0] would pass
                if len(entry) > 2:
                    out["value"] = entry[1]  # `self.x = x is not None`: what the attribute holds at that default
                if (owner := self.fx.param_owners.get(key)) is not None:
                    out["owner"] = owner
                return out
        return "?"

    def class_by_name(self, n: ast.Call) -> None:
        """`getattr(litgpt.model, config.mlp_class_name)`: a class of a project module chosen by a
        configuration string, a table of alternatives whose entries are the module's classes."""
        owner = _chain(n.args[0])
        q = self.fx.bindings.get(owner[0]) if owner else None
        if q is None:
            return
        key = self.fx.cond(n.args[1], self.params)
        field = _chain(n.args[1])
        if key == ["?"] and self.config_class and field and len(field) == 2 and field[0] == "self":
            key = ["opt", field[1]]  # a config class reading its own field: that field's default
        if key != ["?"]:
            module = ".".join([q, *owner[1:]])
            self.fx.lookups.setdefault(self.scope, []).append(["module:" + module, key, self.region, _text(n.args[1])])

    def argparse(self, n: ast.Call) -> None:
        names = [_literal(a) for a in n.args]
        longs = [s for s in names if type(s) is str and s.startswith("--")]
        plain = [s for s in names if type(s) is str and not s.startswith("-")]
        kws = {k.arg: k.value for k in n.keywords if k.arg}
        dest = _literal(kws["dest"]) if "dest" in kws else ...
        name = dest if type(dest) is str else (longs[0][2:] if longs else plain[0] if plain else None)
        if not name:
            return
        action = _literal(kws["action"]) if "action" in kws else None
        if "default" in kws:
            value = _literal(kws["default"])
        elif action == "store_true":
            value = False
        elif action == "store_false":
            value = True
        else:
            value = None
        if value is not ...:
            self.fx.options.append([name.replace("-", "_"), value, n.lineno])

    def click_option(self, n: ast.Call) -> None:
        names = [_literal(a) for a in n.args]
        longs = [s for s in names if type(s) is str and s.startswith("--")]
        if not longs:
            return
        kws = {k.arg: k.value for k in n.keywords if k.arg}
        first = longs[0][2:].split("/")[0]
        if "default" in kws:
            value = _literal(kws["default"])
        elif "is_flag" in kws and _literal(kws["is_flag"]) is True:
            value = False
        else:
            value = None
        if value is not ...:
            self.fx.options.append([first.replace("-", "_"), value, n.lineno])


def _least_gated(imports: list[list]) -> list[list]:
    """[module, region] pairs, one per module: an import also made outside any region is unconditional."""
    best: dict[str, int] = {}
    for mod, region in imports:
        if mod not in best or region == -1:
            best[mod] = region
    return [[m, best[m]] for m in sorted(best)]


_TYPE_TESTS = frozenset({"isinstance", "issubclass"})


def _add_ref(refs: dict[str, list[int]], ref: str, region: int) -> None:
    """A reference, with the condition regions it is made under (both branches of an `if` may make
    it); one that is also made outside any region counts as unconditional."""
    old = refs.get(ref)
    if old is None:
        if len(refs) < _MAX_REFS:
            refs[ref] = [region]
    elif region == -1:
        refs[ref] = [-1]
    elif old != [-1] and region not in old and len(old) < 4:
        old.append(region)


def _config_object(node: ast.AST) -> bool:
    """`cfg`, `self.cfg`, `args`, `self.axolotl_cfg`: a configuration object passed as a whole."""
    parts = _chain(node)
    return bool(parts) and not parts[-1].endswith("kwargs") and _Facts.config_root([*parts, ""])


_MAX_PREDICATE = 8  # statements of a helper predicate: a short function, not a procedure


def predicate(node: ast.FunctionDef) -> list | None:
    """A helper predicate's value as a condition over its arguments, or None when it is no predicate:
    a short body of local assignments, `if TEST: return VALUE` guards and a final `return`. A
    parameter's setting (`p.x`, `p["x"]`, `p.get("x", d)`, `getattr(p, "x", d)`, a local bound to
    `p.get`) is ["arg", index, "x"(, default)], the parameter itself ["arg", index, None]; the guards
    nest as ["ifx", test, value, rest]. What it cannot read is ["?"] (unknown: never a gate)."""
    body = node.body[1:] if node.body and type(node.body[0]) is ast.Expr and type(node.body[0].value) is ast.Constant else node.body
    a = node.args
    if a.vararg or a.kwarg or not body or len(body) > _MAX_PREDICATE or type(body[-1]) is not ast.Return:
        return None
    params = [x.arg for x in a.posonlyargs + a.args]
    local: dict[str, ast.AST] = {}
    guards: list[tuple[ast.AST, ast.AST]] = []
    for st in body[:-1]:
        if type(st) is ast.Assign and len(st.targets) == 1 and type(st.targets[0]) is ast.Name and st.targets[0].id not in local:
            local[st.targets[0].id] = st.value
        elif type(st) is ast.If and not st.orelse and len(st.body) == 1 and type(st.body[0]) is ast.Return:
            guards.append((st.test, st.body[0].value))
        else:
            return None
    conv = _PredicateReader(params, local)
    out = conv.cond(body[-1].value)
    for test, value in reversed(guards):
        out = ["ifx", conv.cond(test), conv.cond(value), out]
    return [params, out]


def _reads_setting(c: list) -> bool:
    """Whether a predicate's condition reads a setting of a parameter (["arg", i, "x"])."""
    if c[:1] == ["arg"]:
        return c[2] is not None
    return any(_reads_setting(x) for x in c[1:] if type(x) is list and x and type(x[0]) is str)


class _PredicateReader:
    """Conditions of a predicate's body over its parameters (see `predicate`)."""

    def __init__(self, params: list[str], local: dict[str, ast.AST]) -> None:
        self.params, self.local, self.depth = params, local, 0

    def setting(self, node: ast.AST):
        """["arg", i, key(, default)] for a read of a parameter's setting, else None."""
        t = type(node)
        if t is ast.Attribute and type(node.value) is ast.Name and node.value.id in self.params:
            return ["arg", self.params.index(node.value.id), node.attr]
        if t is ast.Subscript and type(node.value) is ast.Name and node.value.id in self.params and type(k := _literal(node.slice)) is str:
            return ["arg", self.params.index(node.value.id), k]
        if t is not ast.Call or node.keywords:
            return None
        f = node.func
        if _chain(f) == ["getattr"]:  # getattr(p, "x"[, default])
            owner, rest = (node.args[0] if node.args else None), node.args[1:]
        elif type(f) is ast.Attribute and f.attr == "get":  # p.get("x"[, default])
            owner, rest = f.value, node.args
        elif type(f) is ast.Name:  # get("x"), `get` a local bound to p.get
            owner, rest = self.getter(f.id), node.args
        else:
            return None
        if type(owner) is not ast.Name or owner.id not in self.params or not 1 <= len(rest) <= 2:
            return None
        key = _literal(rest[0])
        default = [_literal(rest[1])] if len(rest) == 2 else []
        if type(key) is not str or (default and default[0] is ...):
            return None
        return ["arg", self.params.index(owner.id), key, *default]

    def getter(self, name: str) -> ast.AST | None:
        """The parameter whose `get` a local is bound to (`get = cfg.get`, either arm of an if-expression)."""
        v = self.local.get(name)
        for arm in ([v.body, v.orelse] if type(v) is ast.IfExp else [v]):
            if type(arm) is ast.Attribute and arm.attr == "get" and type(arm.value) is ast.Name and arm.value.id in self.params:
                return arm.value
        return None

    def cond(self, node: ast.AST) -> list:
        t = type(node)
        if (found := self.setting(node)) is not None:
            return found
        lit = _literal(node)
        if lit is not ...:
            return ["lit", lit]
        if t is ast.Name:
            if node.id in self.params:
                return ["arg", self.params.index(node.id), None]
            if node.id in self.local and self.depth < 4:
                self.depth += 1
                try:
                    return self.cond(self.local[node.id])
                finally:
                    self.depth -= 1
            return ["?"]
        if t is ast.BoolOp:
            return ["and" if type(node.op) is ast.And else "or", *(self.cond(v) for v in node.values)]
        if t is ast.UnaryOp and type(node.op) is ast.Not:
            return ["not", self.cond(node.operand)]
        if t is ast.Compare and len(node.ops) == 1:
            op = type(node.ops[0]).__name__
            if op in ("Eq", "NotEq", "Is", "IsNot", "Gt", "GtE", "Lt", "LtE"):
                return ["cmp", op, self.cond(node.left), self.cond(node.comparators[0])]
            if op in ("In", "NotIn") and type(node.comparators[0]) in (ast.Tuple, ast.List, ast.Set):
                values = [_literal(e) for e in node.comparators[0].elts]
                if all(v is not ... for v in values):
                    c = ["in", self.cond(node.left), values]
                    return c if op == "In" else ["not", c]
        return ["?"]


def _table_name(name: str) -> bool:
    """`ATTENTION_FUNCTIONS`, `MODEL_REGISTRY`: a module-level table by its conventional spelling."""
    return name.isupper() and len(name) > 2


_LOADER = re.compile(r"(?i)loader|dataset|batches|^data$|val|eval|test")


def _statement_names(node: ast.AST) -> tuple[set[str], dict[str, int]]:
    """Names of the functions and classes defined directly in a function's body (in its blocks too,
    not inside the nested definitions themselves), and how often its statements assign each plain
    name (a parameter rebound in the body no longer holds its default): statements only, never expressions."""
    out: set[str] = set()
    assigned: dict[str, int] = {}
    stack = [node.body]
    while stack:
        for st in stack.pop():
            t = type(st)
            if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                out.add(st.name)
                continue
            targets = st.targets if t is ast.Assign else [st.target] if t in (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor) else ()
            for tg in targets:
                for e in [tg] if type(tg) is ast.Name else getattr(tg, "elts", ()):
                    if type(e) is ast.Name:
                        assigned[e.id] = assigned.get(e.id, 0) + 1
            stack.extend(_blocks(st))
    return out, assigned


def _type_only_locals(node: ast.FunctionDef, assigned: dict[str, int]) -> frozenset[str]:
    """Locals assigned once, at the function's top level, a list or tuple of names that only a type
    test reads (`strategies = [DDPStrategy, DeepSpeedStrategy]` ... `isinstance(s, tuple(strategies))`):
    like a class named in the test itself, naming them runs none of their code."""
    lists = {st.targets[0].id for st in node.body
             if type(st) is ast.Assign and len(st.targets) == 1 and type(st.targets[0]) is ast.Name
             and assigned.get(st.targets[0].id) == 1 and type(st.value) in (ast.List, ast.Tuple)
             and st.value.elts and all(_chain(e) for e in st.value.elts)}
    if not lists:
        return frozenset()
    tested: set[int] = set()
    names: list[ast.Name] = []
    for n in ast.walk(node):
        if type(n) is ast.Call and type(n.func) is ast.Name and n.func.id in _TYPE_TESTS and len(n.args) == 2:
            t = n.args[1]
            if type(t) is ast.Call and _chain(t.func) == ["tuple"] and len(t.args) == 1:
                t = t.args[0]
            tested.add(id(t))
        elif type(n) is ast.Name and n.id in lists and type(n.ctx) is ast.Load:
            names.append(n)
    return frozenset(lists - {n.id for n in names if id(n) not in tested})


def _loader_loop(it: ast.AST) -> bool:
    while type(it) is ast.Call:  # enumerate(loader), tqdm(loader)
        it = it.args[0] if it.args else it.func
    parts = _chain(it)
    return bool(parts) and bool(_LOADER.search(parts[-1]))


def _rewrites_weights(node: ast.FunctionDef) -> bool:
    """Weight surgery: a loop over a model's modules that assigns parameter values through `.data`
    (merging, re-initialising or post-processing a trained model; the step updates weights through
    an optimizer instead). Loops and assignments are statements: read through statement blocks only."""
    for loop in _statements(node.body):
        if type(loop) is not ast.For or type(loop.iter) is not ast.Call:
            continue
        if (_chain(loop.iter.func) or [""])[-1] not in ("named_modules", "modules"):
            continue
        for st in _statements(loop.body + loop.orelse):
            if type(st) is ast.Assign and any(type(t) is ast.Attribute and t.attr == "data" for t in st.targets):
                return True
    return False


def _statements(stmts: list[ast.stmt]):
    """Every statement in `stmts` and in the blocks nested in them (function and class bodies too):
    what ast.walk finds of statements, without entering an expression (none holds a statement)."""
    stack = [stmts]
    while stack:
        for st in stack.pop():
            yield st
            stack.extend(_blocks(st))


def _assign_counts(body: list[ast.stmt]) -> dict[str, int]:
    """How often the statements of a module body assign each plain name (as _statement_names does
    for a function), and a definition or import of the name counts as one more."""
    holder = ast.Module(body=body, type_ignores=[])
    inner, assigned = _statement_names(holder)
    for name in inner:
        assigned[name] = assigned.get(name, 0) + 1
    for st in body:
        if type(st) in (ast.Import, ast.ImportFrom):
            for a in st.names:
                key = (a.asname or a.name).split(".")[0]
                assigned[key] = assigned.get(key, 0) + 1
    return assigned


def _made_locals(body: list[ast.stmt], assigned: dict[str, int], bindings: dict[str, str],
                 params: set[str] = frozenset()) -> dict[str, str]:
    """Names a body binds exactly once, by a plain assignment, to a PyTorch class it constructs
    (`opt = torch.optim.SGD(...)`, `scaler = GradScaler()` after `from torch.amp import GradScaler`):
    name -> the class's qualified name. A capitalised last name is a class; a factory function
    (`build_optimizer(cfg)`) says nothing of what it returns. PyTorch's classes are never the
    project's (unless the project is PyTorch, where the name resolves to its own class), so
    `opt.step()` runs `torch.optim.SGD.step`, not every project method called `step` (a decoder's)."""
    out: dict[str, str] = {}
    for st in _own_statements(body):
        if (type(st) is ast.Assign and len(st.targets) == 1 and type(st.targets[0]) is ast.Name
                and type(st.value) is ast.Call and assigned.get(st.targets[0].id) == 1
                and st.targets[0].id not in params):
            parts = _chain(st.value.func)
            q = bindings.get(parts[0]) if parts else None
            if q is not None:
                full = ".".join([q, *parts[1:]])
                if full.startswith("torch.") and parts[-1][:1].isupper():
                    out[st.targets[0].id] = full
    return out


def _own_statements(stmts: list[ast.stmt]):
    """Every statement of a body and of the blocks nested in it, in source order, and each nested
    definition itself but nothing inside it: what a function's own code binds (_statements goes
    into nested definitions too)."""
    for st in stmts:
        yield st
        if type(st) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            for block in _blocks(st):
                yield from _own_statements(block)


def _blocks(st: ast.stmt):
    """The statement blocks directly inside a statement (bodies, branches, handlers, cases)."""
    for field in ("body", "orelse", "finalbody"):
        sub = getattr(st, field, None)
        if type(sub) is list:
            yield sub
    for h in getattr(st, "handlers", ()):
        yield h.body
    for case in getattr(st, "cases", ()):
        yield case.body


# The CUDA checks a call asks (`cuda_check`), by their qualified names (an import may rename them).
_CHECK_CALLS = frozenset({"torch.cuda.is_available", "torch.cuda.is_initialized"})
# CUDA queries that raise without a CUDA device (the lazy CUDA init fails: AssertionError on a CPU
# build of torch, RuntimeError on a CUDA build without a driver); `is_available()` and `device_count()`
# answer False and 0 instead.
_RAISES_OFF_CUDA = frozenset({"get_device_capability", "get_device_name", "get_device_properties", "current_device"})
# Exceptions whose handler catches both: bare `except:`, `Exception`, `BaseException`, or a tuple with both.
_MISSING_CUDA = frozenset({"RuntimeError", "AssertionError"})


def _catches_missing_cuda(h: ast.ExceptHandler) -> bool:
    if h.type is None:
        return True
    names = {(_chain(e) or [""])[-1] for e in (h.type.elts if type(h.type) is ast.Tuple else [h.type])}
    return bool(names & {"Exception", "BaseException"}) or _MISSING_CUDA <= names


# What a training step raises only when it fails: a loss scaler's overflow, a NaN check, memory. A
# handler for them is recovery, not the step. Not ImportError, nor RuntimeError or Exception in general:
# those handlers are often the path a device without CUDA takes.
_FAILURES = frozenset({"OverflowError", "FloatingPointError", "MemoryError", "OutOfMemoryError", "KeyboardInterrupt"})
_OOM_TEXT = re.compile(r"(?i)out of memory")


def _oom_test(node: ast.AST) -> bool | None:
    """`"out of memory" in str(e)` (True), `... not in str(e).lower()` (False): a test of an error's
    message for a failure to allocate; None for any other test."""
    if type(node) is not ast.Compare or len(node.ops) != 1 or type(node.ops[0]) not in (ast.In, ast.NotIn):
        return None
    text = _literal(node.left)
    if type(text) is not str or not _OOM_TEXT.search(text):
        return None
    return type(node.ops[0]) is ast.In


def recovery_handler(h: ast.ExceptHandler) -> str | None:
    """The failures a handler recovers from (`OverflowError`), when it catches nothing else; or
    `out of memory` for one that re-raises every other error first (`except RuntimeError as e: if
    "out of memory" not in str(e): raise`). None for any other handler."""
    if h.type is not None:
        names = [(_chain(e) or [""])[-1] for e in (h.type.elts if type(h.type) is ast.Tuple else [h.type])]
        if names and all(n in _FAILURES for n in names):
            return ", ".join(f"`{n}`" for n in names)
    first = h.body[0] if h.body else None
    if (type(first) is ast.If and _oom_test(first.test) is False and not first.orelse
            and len(first.body) == 1 and type(first.body[0]) is ast.Raise):
        return "out of memory"
    return None


def _queries_cuda(value: ast.AST) -> bool:
    """A value that calls a CUDA query raising off CUDA (`_RAISES_OFF_CUDA`) unconditionally: not
    inside a conditional expression, a boolean operator's later operands, a lambda or a comprehension."""
    stack = [value]
    while stack:
        n = stack.pop()
        t = type(n)
        if t in (ast.Lambda, ast.IfExp, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp):
            continue
        if t is ast.BoolOp:
            stack.append(n.values[0])
            continue
        if t is ast.Call and (_chain(n.func) or [])[-2:-1] == ["cuda"] and _chain(n.func)[-1] in _RAISES_OFF_CUDA:
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _cuda_return(st: ast.stmt) -> bool:
    """`if not torch.cuda.is_available(): return ...` (no else): the rest after it runs only on CUDA."""
    return (type(st) is ast.If and not st.orelse and type(st.body[-1]) is ast.Return
            and cuda_check(st.test) == "else")


def _gives_up(stmts: list[ast.stmt]) -> bool:
    for st in stmts:
        if type(st) in (ast.Raise, ast.Assert):
            return True
        if type(st) is ast.Expr and type(st.value) is ast.Call:
            parts = _chain(st.value.func)
            if parts and parts[-1] in ("exit", "_exit", "quit"):
                return True
    return False


def _computes(stmts: list[ast.stmt]) -> bool:
    """A branch that computes a result: it returns or assigns a computed value (not a bare name or
    constant: `return x` or `out = None` passes its input through) or updates a tensor in place
    (`out.copy_(...)`), anywhere in its blocks. `pass`, a bare `return` or a warning compute nothing."""
    for st in _statements(stmts):
        t = type(st)
        value = st.value if t in (ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign) else None
        if value is not None and type(value) not in (ast.Name, ast.Constant):
            return True
        if t is ast.Expr and type(st.value) is ast.Call and type(st.value.func) is ast.Attribute:
            attr = st.value.func.attr
            if attr.endswith("_") and not attr.startswith("_"):
                return True
    return False


_CAPABILITY_FLAG = re.compile(r"(?i)^_*(has|have|is|can)_|available|installed|supported|^_*(triton|cuda|flash)")


def _has_config(c: list) -> bool:
    if not c:
        return False
    if c[0] in ("opt", "field", "env", "flag", "param", "train", "oattr", "arg", "pred", "isa", "torchver", "fails",
                "accel"):
        return True
    return any(_has_config(x) for x in c[1:] if type(x) is list)


def _test_names(test: ast.AST) -> list[str]:
    """The names and attribute names a condition reads (`is_triton_available`, `tpu` of `self.tpu`),
    in no particular order (a stack, not ast.walk's generators: every `if` of every file asks)."""
    out: list[str] = []
    stack = [test]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is ast.Name:
            out.append(n.id)
            continue
        if t is ast.Attribute:
            out.append(n.attr)
            stack.append(n.value)
            continue
        for field in n._fields:
            v = getattr(n, field, None)
            if isinstance(v, ast.AST):
                stack.append(v)
            elif type(v) is list:
                stack.extend(x for x in v if isinstance(x, ast.AST))
    return out


def capability_test(test: ast.AST) -> bool:
    """A test that asks what is installed or available (`HAS_TRITON`, `is_bnb_available()`, `x.is_cuda`)."""
    return any(CAPABILITY.search(n) for n in _test_names(test))


def _kinds(c: list) -> set[str]:
    """The kinds of node a condition tree holds (`opt`, `param`, `cmp`, `?`, ...)."""
    kinds: set[str] = set()
    stack = [c]
    while stack:
        x = stack.pop()
        kinds.add(x[0])
        stack.extend(y for y in x[1:] if type(y) is list and y and type(y[0]) is str)
    return kinds


def _option_only(c: list) -> bool:
    """A condition on options alone (parameters, configuration, environment): no module flag, whose
    value may stand for an installed library, and no `self.training`."""
    kinds = _kinds(c)
    return bool(kinds & {"param", "opt", "field", "env", "oattr", "pred"}) and not kinds & {"flag", "train", "?", "cap", "cuda"}


# `self.onnx_trace`, `self.exporting`: a switch for the export or inference path (context.py's EVAL_OPTION).
_EXPORT_SWITCH = re.compile(r"(?i)(^|_)(onnx|export|exporting|inference)(_|$)")
_FLAG_PARAM = re.compile(r"(?i)^(use|enable|with|fused?|apply)_\w+|_(kernel|impl|implementation|backend)$|^(backend|impl|implementation|kernel|attn_\w+|fused)$")


# Parameters that say how the model is being run, not which features a user picked.
_RUN_STATE_PARAM = re.compile(r"(?i)^(training|train|is_training|requires_grad|mode)$")


REQUIRED = "<required>"  # the "default" of a required `bool` parameter: what its callers pass (context.py)

# A flag named for a PyTorch version (`TORCH_2_4`, `_TORCH_GREATER_EQUAL_2_4`,
# `is_torch_greater_or_equal_than_2_4`): a test of the installed torch, judged against the target's
# (context.py `Defaults.torch_range`).
_TORCH_FLAG = re.compile(r"(?i)^_?(?:is_)?torch(?:_version)?_?(?P<op>greater_or_equal|greater_equal|at_least|geq|ge|"
                         r"less_equal|less_than|less|lt|le|greater|gt|)_?(?:than_)?(?P<major>\d+)_(?P<minor>\d+)(?:_\d+)?$")
_TORCH_FLAG_OPS = {"": "GtE", "greater_or_equal": "GtE", "greater_equal": "GtE", "at_least": "GtE", "geq": "GtE",
                   "ge": "GtE", "less_equal": "LtE", "le": "LtE", "less_than": "Lt", "less": "Lt", "lt": "Lt",
                   "greater": "Gt", "gt": "Gt"}
_VERSION_OPS = {">=": "GtE", ">": "Gt", "<": "Lt", "<=": "LtE", "==": "Eq"}


# Words of a name that tests for a ROCm build besides `rocm`/`hip` itself (`IS_HIP_EXTENSION`,
# `is_rocm_available()`, `USE_ROCM`, `BUILD_FOR_HIP`).
_ROCM_TEST_WORDS = frozenset({"is", "use", "using", "with", "build", "built", "for", "has", "on", "extension",
                              "platform", "available", "enabled", "torch", "backend", "target", "running", "device"})


def rocm_test(node: ast.AST) -> bool:
    """A test that holds only in a ROCm (AMD GPU) build of PyTorch or of the project: `torch.version.hip`,
    `IS_ROCM`, `IS_HIP_EXTENSION` (torch.utils.cpp_extension), `is_hip()`, `is_rocm_available()`, with no
    argument. The job runs on CUDA GPUs today and on Trainium after the port, never on ROCm, so what only
    such a test guards is another accelerator's code (context.py costs it like a `rocm/` folder)."""
    if type(node) is ast.Call:
        if node.args or node.keywords:
            return False
        node = node.func
    t = type(node)
    last = node.id if t is ast.Name else node.attr if t is ast.Attribute else ""
    if "hip" not in last.lower() and "rocm" not in last.lower():
        return False  # asked of every condition node: most never name either
    parts = _chain(node)
    if not parts:
        return False
    if parts[-2:] == ["version", "hip"]:
        return True
    words = [w for w in parts[-1].lower().strip("_").split("_") if w]
    return (sum(w in ("rocm", "hip") for w in words) == 1
            and all(w in ("rocm", "hip") or w in _ROCM_TEST_WORDS for w in words) and len(words) > 1
            or words in (["rocm"], ["hip"]) and type(node) is ast.Name and node.id.isupper())


def torch_version_test(node: ast.AST) -> list | None:
    """["torchver", op, "2.4"] for a test of the installed PyTorch's version: a flag named for one
    (`TORCH_2_4`), `is_torch_greater_or_equal("2.4")`, `is_torch_version(">=", "2.4")`,
    `check_version(TORCH_VERSION, "2.4.0")`, `version.parse(torch.__version__) >= version.parse("2.4")`,
    `torch.__version__ >= "2.4"`; None for anything else."""
    parts = _chain(node)
    if parts and (m := _TORCH_FLAG.match(parts[-1])):
        return ["torchver", _TORCH_FLAG_OPS[m["op"].lower()], f"{m['major']}.{m['minor']}"]
    if type(node) is ast.Call and (parts := _chain(node.func)):
        args = [_literal(a) for a in node.args]
        if parts[-1] == "is_torch_greater_or_equal" and args and type(args[0]) is str:
            return ["torchver", "GtE", args[0]]
        if parts[-1] == "is_torch_version" and len(args) == 2 and args[0] in _VERSION_OPS and type(args[1]) is str:
            return ["torchver", _VERSION_OPS[args[0]], args[1]]
        if (parts[-1] == "check_version" and len(node.args) >= 2 and _torch_version(node.args[0])
                and type(args[1]) is str and args[1][:1].isdigit()):
            return ["torchver", "GtE", args[1]]
    if type(node) is ast.Compare and len(node.ops) == 1 and _torch_version(node.left):
        op, right = type(node.ops[0]).__name__, node.comparators[0]
        if type(right) is ast.Call and len(right.args) == 1:
            right = right.args[0]  # `version.parse("2.4")`
        ver = _literal(right)
        if op in ("GtE", "Gt", "Lt", "LtE") and type(ver) is str and ver[:1].isdigit():
            return ["torchver", op, ver]
    return None


def _torch_version(node: ast.AST) -> bool:
    """`torch.__version__`, `TORCH_VERSION`, `version.parse(torch.__version__)`, `Version(torch.__version__)`."""
    if type(node) is ast.Call and len(node.args) == 1:
        node = node.args[0]
    parts = _chain(node)
    return bool(parts) and (parts[-2:] == ["torch", "__version__"] or parts[-1] in ("TORCH_VERSION", "_TORCH_VERSION"))


def _option_params(node: ast.FunctionDef, rebound: Collection[str] = frozenset(),
                   required: bool = False) -> dict[str, object]:
    """Parameters whose literal default is a setting a user turns on: any name with a default of
    False, 0, or a string, and a switch-like name (`use_*`, `*_impl`, `backend`) with any literal
    default. A None default on another name is an optional input (`mask=None`, `labels=None`: a
    tensor the step passes, often positionally), never a gate, unless its annotation lists the
    names it may take (`quantize: Literal["bnb.nf4", "bnb.fp4"] | None = None`). Run-state words
    (`training`, `mode`) and parameters the body rebinds are left out. With `required`, a parameter
    annotated `bool` without a default is one too, its value what every call passes (REQUIRED)."""
    out: dict[str, object] = {}
    if required:
        defaulted = {id(arg) for arg, _d, _at in defaulted_params(node.args)}
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            ann = arg.annotation
            if (id(arg) not in defaulted and type(ann) is ast.Name and ann.id == "bool"
                    and arg.arg not in rebound and not _RUN_STATE_PARAM.match(arg.arg)):
                out[arg.arg] = REQUIRED
    for arg, default, _at in defaulted_params(node.args):
        name, value = arg.arg, _literal(default)
        if value is ... or name in rebound or _RUN_STATE_PARAM.match(name):
            continue
        if (_FLAG_PARAM.search(name) or type(value) in (bool, str) or (type(value) in (int, float) and value == 0)
                or (value is None and _named_choice(arg.annotation))):
            out[name] = value
    return out


def _named_choice(ann: ast.AST | None) -> bool:
    """An annotation that lists the names a setting may take, so never a tensor nor a path:
    `Literal["bnb.nf4", "bnb.fp4"]`, alone or with None (`Literal[...] | None`, `Optional[Literal[...]]`,
    `Union[Literal[...], None]`). A bare `str` may be a path or a name the job always passes: not read."""
    t = type(ann)
    if t is ast.BinOp and type(ann.op) is ast.BitOr:
        sides = (ann.left, ann.right)
        return all(_named_choice(x) or _literal(x) is None for x in sides) and any(_named_choice(x) for x in sides)
    if t is not ast.Subscript:
        return False
    parts = _chain(ann.value)
    args = ann.slice.elts if type(ann.slice) is ast.Tuple else [ann.slice]
    if not parts:
        return False
    if parts[-1] == "Literal":
        return all(type(_literal(a)) is str for a in args)
    if parts[-1] in ("Optional", "Union"):
        return all(_named_choice(a) or _literal(a) is None for a in args) and any(_named_choice(a) for a in args)
    return False


def _local_aliases(stmts: list[ast.stmt], params: dict[str, object], assigned: dict[str, int],
                   owners: dict[str, str]) -> dict[str, object]:
    """`z = self.attn_z_loss`, `a, b = x.shape[1], self.b` at a function's top level, each local
    assigned once: the local holds what the option parameter or attribute holds (and `owners`
    learns whose parameter that is)."""
    out: dict[str, object] = {}
    for st in stmts:
        if type(st) is not ast.Assign or len(st.targets) != 1:
            continue
        tg, value = st.targets[0], st.value
        pairs = [(tg, value)] if type(tg) is ast.Name else list(zip(tg.elts, value.elts)) \
            if type(tg) is ast.Tuple and type(value) is ast.Tuple and len(tg.elts) == len(value.elts) else []
        for t, v in pairs:
            parts = _chain(v)
            if type(t) is not ast.Name or assigned.get(t.id) != 1 or not parts or len(parts) > 2:
                continue
            key = ".".join(parts)
            if key in params and (len(parts) == 1 or parts[0] == "self"):
                out[t.id] = _param_of(params, key)
                if key in owners:
                    owners[t.id] = owners[key]
    return out


_OTHER = "@oattr"  # an `__init__` attribute copied from another object's (`self.x = net.x`): [_OTHER, "x"]


def _param_cond(entry: list, owner: str | None = None) -> list:
    """The condition a parameter, attribute or alias entry stands for: ["param", name, value at the
    default, raw default, the function it is a parameter of] (the last two only when the owner is
    known; older facts: ["param", name, value(, raw default)])."""
    if entry[0] == _OTHER:
        return ["oattr", entry[1]]
    if owner is None:
        return ["param", *entry]
    return ["param", entry[0], entry[1], entry[-1], owner]


def class_attributes(node: ast.ClassDef, attrs: dict[str, list]) -> dict[str, list | None]:
    """What a class sets each instance attribute to, for readers on other objects (`self.net.looped`):
    "x" -> [parameter, value at its default(, raw default)] when `__init__` sets it from an option
    parameter (`_init_attributes`), None when from anything else or by a property of its own; copying
    or a property that only forwards another object's attribute of the same name (`self.looped =
    net.looped`, `return self.net.looped`) adds nothing."""
    out: dict[str, list | None] = {}
    init = _init_of(node)
    for st in init.body if init is not None else ():
        targets = st.targets if type(st) is ast.Assign else [st.target] if type(st) in (ast.AnnAssign, ast.AugAssign) else ()
        for tg in targets:
            parts = _chain(tg)
            if parts and len(parts) == 2 and parts[0] == "self":
                entry = attrs.get("self." + parts[1])
                if entry == [_OTHER, parts[1]]:
                    continue  # `self.looped = net.looped`: forwards, like the property below
                out[parts[1]] = entry if entry is not None and entry[0] != _OTHER else None
    for st in node.body:
        if type(st) is ast.FunctionDef and any(_chain(d) == ["property"] for d in st.decorator_list):
            body = [b for b in st.body if not (type(b) is ast.Expr and type(b.value) is ast.Constant)]
            ret = _chain(body[0].value) if len(body) == 1 and type(body[0]) is ast.Return and body[0].value else None
            if not (ret and len(ret) == 3 and ret[0] == "self" and ret[2] == st.name):
                out[st.name] = None
    return out


def _init_of(node: ast.ClassDef) -> ast.FunctionDef | None:
    return next((st for st in node.body if type(st) is ast.FunctionDef and st.name == "__init__"), None)


def _param_names(node: ast.FunctionDef) -> set[str]:
    return {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}


def _members(fx: _Facts, node: ast.ClassDef, held: dict[str, str] | None = None) -> set[str]:
    """Other objects a class holds: `self.net = net` (an `__init__` parameter) or `self.net =
    Decoder(...)` (a class this file defines or imports from outside torch), at the top level of its
    `__init__`; their attributes (`self.net.looped`) read as the project's classes set them. `held`
    receives attribute -> reference of the ones it builds (`rotary_embedding` -> `l:RotaryEmbedding`)."""
    init = _init_of(node)
    if init is None:
        return set()
    params = _param_names(init) - {"self"}
    out: set[str] = set()
    for st in init.body:
        if type(st) is not ast.Assign or len(st.targets) != 1 or not (target := _chain(st.targets[0])):
            continue
        v = st.value
        ref = fx.ref_of(_chain(v.func), None) if type(v) is ast.Call and _chain(v.func) else None
        built = ref is not None and (ref.startswith("l:") or (ref.startswith("q:") and ref[2:].split(".")[0] != "torch"))
        if len(target) == 2 and target[0] == "self" and ((type(v) is ast.Name and v.id in params) or built):
            out.add(target[1])
            if built and held is not None:
                held[target[1]] = ref
    return out


def _config_objects(node: ast.FunctionDef) -> tuple[set[str], set[str]]:
    """Parameters annotated with a configuration class (`args: Arguments`, `cfg: "ModelConfig"`),
    and the attributes the function stores them in at its top level (`self.args = args`): objects
    whose attributes are that class's fields."""
    params = set()
    for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
        ann = a.annotation
        if type(ann) is ast.Constant and type(ann.value) is str:
            name = ann.value.rsplit(".", 1)[-1]
        else:
            name = (_chain(ann) or [""])[-1] if ann is not None else ""
        if name and CONFIG_CLASS.search(name):
            params.add(a.arg)
    stored = set()
    for st in node.body if params else ():
        if type(st) is ast.Assign and len(st.targets) == 1 and type(st.value) is ast.Name and st.value.id in params:
            target = _chain(st.targets[0])
            if target and len(target) == 2 and target[0] == "self":
                stored.add(target[1])
    return params, stored


def _param_of(params: dict[str, object], key: str) -> list:
    """[parameter, value at its default(, the raw default when they differ)] for a name or `self.x`:
    a parameter's own entry is its default; an attribute's or a local alias's is already this list."""
    v = params[key]
    return v if type(v) is list else [key, v]


def _init_attributes(node: ast.ClassDef) -> dict[str, list]:
    """`self.x = x`, `self.x = bool(x)`, `self.x = x is not None` among the top-level statements
    of a class's `__init__`, x an option parameter (see `_option_params`): "self.x" -> [x, value at
    x's default]. An attribute assigned twice there is left out (its value is not the default's)."""
    init = _init_of(node)
    if init is None:
        return {}
    params = _option_params(init)
    init_params = _param_names(init)
    out: dict[str, list] = {}
    seen: set[str] = set()
    for st in init.body:
        if type(st) is not ast.Assign or len(st.targets) != 1:
            continue
        target = _chain(st.targets[0])
        if not target or len(target) != 2 or target[0] != "self":
            continue
        key = "self." + target[1]
        value, got = st.value, None
        if type(value) is ast.Call and _chain(value.func) == ["bool"] and len(value.args) == 1 and not value.keywords:
            value = value.args[0]  # the same truth value as the parameter's
        if type(value) is ast.Name and value.id in params:
            got = [value.id, params[value.id]]
        elif (type(value) is ast.Attribute and type(value.value) is ast.Name and value.value.id != "self"
              and value.value.id in init_params and not _Facts.config_root([value.value.id, value.attr])):
            got = [_OTHER, value.attr]  # `self.add_head = net.add_head`: the attribute of the object passed in
        elif (type(value) is ast.Compare and len(value.ops) == 1 and type(value.ops[0]) in (ast.Is, ast.IsNot)
              and type(value.left) is ast.Name and _literal(value.comparators[0]) is None):
            name = value.left.id
            default = _default_of_param(init, name)
            if default is not ... and not _RUN_STATE_PARAM.match(name):
                got = [name, (default is None) == (type(value.ops[0]) is ast.Is), default]  # callers pass `default`
        if key in seen:
            out.pop(key, None)
        elif got is not None:
            out[key] = got
        seen.add(key)
    return out


def _default_of_param(node: ast.FunctionDef, name: str):
    return next((v for n, v in _all_param_defaults(node) if n == name), ...)


def _signature(node: ast.FunctionDef) -> list[list]:
    """Parameters with a default: [name, position among the positional parameters (-1 keyword-only),
    first line, last line of the default expression]."""
    return [[arg.arg, at, d.lineno, d.end_lineno or d.lineno] for arg, d, at in defaulted_params(node.args)]


def _all_param_defaults(node: ast.FunctionDef) -> list[tuple[str, object]]:
    out = []
    for arg, default, _at in defaulted_params(node.args):
        v = _literal(default)
        if v is not ...:
            out.append((arg.arg, v))
    return out


def _names_cuda(node: ast.AST) -> bool:
    v = _literal(node)
    return type(v) is str and (v == "cuda" or v.startswith("cuda:"))


def _names_nccl(node: ast.AST) -> bool:
    """"nccl", or the enum's spelling of it (`dist.Backend.NCCL`)."""
    if type(node) is ast.Attribute and node.attr == "NCCL":
        return (_chain(node) or [""])[-2:-1] == ["Backend"]
    return _literal(node) == "nccl"


def _cuda_locals(stmts: list[ast.stmt], assigned: dict[str, int], args: ast.arguments | None = None,
                 known: Collection[str] = frozenset()) -> frozenset[str]:
    """Locals assigned once in a function, at its top level or in a block of it (a branch, a `try`;
    not in a nested definition), from a CUDA check or a value that defaults to one (`any_cuda =
    any(t.is_cuda for t in (q, k, v))`, `use_kernel = default(use_kernel, torch.cuda.is_available())`,
    Composer's `is_cuda_available = torch.cuda.is_available() and torch.cuda.is_initialized()` inside
    an `if`), and parameters that default to one (`use_cuda=torch.cuda.is_available()`), with `known`
    (the class's CUDA attributes): testing the local tests the device by default. One binding in the
    whole function means every read sees that check. Walked in source order, so a local defined from
    an earlier one counts."""
    out = set(known)
    if args is not None:
        out.update(a.arg for a, d, _at in defaulted_params(args) if not assigned.get(a.arg) and _cuda_value(d, out))
    for st in _own_statements(stmts):
        if type(st) is ast.Assign and len(st.targets) == 1 and type(st.targets[0]) is ast.Name:
            name = st.targets[0].id
            if assigned.get(name) == 1 and _cuda_value(st.value, out):
                out.add(name)
    return frozenset(out)


def _false_off_cuda_locals(node: ast.FunctionDef, assigned: dict[str, int], known: Collection[str]) -> frozenset[str]:
    """Locals every binding of which, anywhere in the function (a `try` or a branch too, not a nested
    definition), is a CUDA check (`_cuda_value`) or a False, None or 0 literal, one at least a check
    (`cuda_ok = False`, then in a `try`: `cuda_ok = torch.cuda.is_available()`, in its handler
    `cuda_ok, cc = False, None`): off CUDA the local is never true, so testing it tests the device.
    Any other binding (a loop target, `with ... as`, `:=`, `+=`) makes the local a plain one."""
    if all(k < 2 for k in assigned.values()):
        return frozenset()  # no name bound twice (most functions): asked before any walk
    values: dict[str, list[ast.AST]] = {}
    for st in _statements(node.body):
        t = type(st)
        if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) or t is not ast.Assign:
            continue
        for tg in st.targets:
            if type(tg) is ast.Name:
                values.setdefault(tg.id, []).append(st.value)
            elif type(tg) in (ast.Tuple, ast.List):
                elts = st.value.elts if type(st.value) in (ast.Tuple, ast.List) and len(st.value.elts) == len(tg.elts) else None
                for i, e in enumerate(tg.elts):
                    if type(e) is ast.Name:
                        values.setdefault(e.id, []).append(elts[i] if elts is not None else st.value)
    out = set()
    for name, vs in values.items():
        if len(vs) < 2 or assigned.get(name) != len(vs) or name in known:
            continue
        checks = [v for v in vs if _cuda_value(v, known)]
        if checks and all(v in checks or _literal(v) in (False, None, 0) for v in vs):
            out.add(name)
    if out:  # a binding `_statement_names` does not count (`with ... as x`, `(x := ...)`) leaves it plain
        for n in ast.walk(node):
            if type(n) is ast.NamedExpr and type(n.target) is ast.Name:
                out.discard(n.target.id)
            elif type(n) is ast.withitem and n.optional_vars is not None:
                out.difference_update(x.id for x in ast.walk(n.optional_vars) if type(x) is ast.Name)
    return frozenset(out)


def _range_bound(it: ast.AST) -> ast.AST | None:
    """`range(n)`: the count `n` of iterations (None for any other iterable)."""
    if type(it) is ast.Call and _chain(it.func) == ["range"] and len(it.args) == 1 and not it.keywords:
        return it.args[0]
    return None


def cuda_probe(node: ast.FunctionDef, cuda_locals: Collection[str] = (), via=None) -> bool | str:
    """A function that answers False (or None) whenever CUDA is absent, in the default configuration:
    every `return` gives a truth value (a bool or None literal, a comparison, a CUDA check, `not`,
    `and`/`or` of such), and either its body is one `return` of a CUDA check (`return HAVE_TRITON and
    torch.cuda.is_available()`), or a top-level `if not torch.cuda.is_available(): return False` is
    reached first: only a docstring, local assignments and `if <setting>: return ...` (an override
    the user sets, `if os.environ.get("X_ENABLE_TRITON", "0") == "1": return True`) come before it.
    With `via` (a test -> the reference of the project function it negates, `if not
    _is_triton_available():`), that reference when such a test decides instead: a probe when that
    function is one (context.py follows it across files)."""
    body = node.body[1:] if node.body and type(node.body[0]) is ast.Expr and type(node.body[0].value) is ast.Constant else node.body
    answer = _answers_false_off_cuda(body, cuda_locals, via) if body else False
    if not answer:
        return False
    stack: list[ast.AST] = list(body)  # the shape holds: every return must give a truth value
    while stack:
        n = stack.pop()
        t = type(n)
        if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
            continue
        if t is ast.Return and (n.value is None or not _truth_value(n.value, cuda_locals)):
            return False
        stack.extend(ast.iter_child_nodes(n))
    return answer


def _answers_false_off_cuda(body: list[ast.stmt], cuda_locals: Collection[str], via=None) -> bool | str:
    if len(body) == 1 and type(body[0]) is ast.Return:
        return body[0].value is not None and cuda_check(body[0].value, cuda_locals) == "body"
    for st in body:
        t = type(st)
        if t is ast.If and not st.orelse and len(st.body) == 1 and type(st.body[0]) is ast.Return:
            falsy = st.body[0].value is not None and _literal(st.body[0].value) in (False, None)
            if cuda_check(st.test, cuda_locals) == "else":
                return falsy
            if via is not None and (ref := via(st.test)) is not None:
                return ref if falsy else False
            if _option_only(_Facts("", False).cond(st.test, {})):
                continue  # an override the user turns on
            return False
        if t is ast.Assign and all(type(x) is ast.Name for x in st.targets):
            continue
        return False
    return False


def _truth_value(v: ast.AST, cuda_locals: Collection[str]) -> bool:
    t = type(v)
    if t is ast.Constant:
        return v.value is None or type(v.value) is bool
    if t is ast.Compare or cuda_check(v, cuda_locals) is not None:
        return True
    if t is ast.UnaryOp and type(v.op) is ast.Not:
        return True
    if t is ast.BoolOp:
        return all(_truth_value(x, cuda_locals) or type(x) in (ast.Name, ast.Attribute) for x in v.values)
    return False


def _over_cuda_devices(it: ast.AST) -> bool:
    """`range(torch.cuda.device_count())`: one iteration per CUDA device, none on Trainium."""
    bound = _range_bound(it)
    return type(bound) is ast.Call and (_chain(bound.func) or [])[-2:] == ["cuda", "device_count"]


def _cuda_cond(test: ast.AST, c: list, cuda_locals: Collection[str]) -> list:
    """`c` with each name that holds a CUDA check (`self.use_cuda_kernel`, `any_cuda`) read as the
    device check it is, not as the option or flag of that name."""
    t = type(test)
    if t in (ast.Name, ast.Attribute) and cuda_check(test, cuda_locals) == "body":
        return ["cuda"]
    if t is ast.BoolOp and len(c) == len(test.values) + 1:
        return [c[0], *(_cuda_cond(v, sub, cuda_locals) for v, sub in zip(test.values, c[1:]))]
    if t is ast.UnaryOp and type(test.op) is ast.Not and c[:1] == ["not"]:
        return ["not", _cuda_cond(test.operand, c[1], cuda_locals)]
    return c


def _cuda_value(node: ast.AST, known: Collection[str]) -> bool:
    """A value that is a CUDA check, or an unset option's default that is one: `default(x, CHECK)`
    (a helper named for defaults), `x if x is not None else CHECK`, `x or CHECK`."""
    t = type(node)
    if cuda_check(node, known) == "body":
        return True
    if t is ast.Call and len(node.args) == 2 and not node.keywords and "default" in ((_chain(node.func) or [""])[-1]).lower():
        return type(node.args[0]) in (ast.Name, ast.Attribute) and _cuda_value(node.args[1], known)
    if t is ast.IfExp:
        names = [a for a in (node.body, node.orelse) if type(a) in (ast.Name, ast.Attribute)]
        return len(names) == 1 and _cuda_value(node.orelse if names[0] is node.body else node.body, known)
    if t is ast.BoolOp and type(node.op) is ast.Or:
        return all(type(v) in (ast.Name, ast.Attribute) for v in node.values[:-1]) and _cuda_value(node.values[-1], known)
    return False


def _attribute_counts(node: ast.ClassDef) -> dict[str, int]:
    """How often the class's statements (every method's) assign each `self.x`."""
    count: dict[str, int] = {}
    for st in _statements(node.body):
        targets = st.targets if type(st) is ast.Assign else [st.target] if type(st) in (ast.AugAssign, ast.AnnAssign) else ()
        for tg in targets:
            parts = _chain(tg) if type(tg) is ast.Attribute else None
            if parts and len(parts) == 2 and parts[0] == "self":
                count["self." + parts[1]] = count.get("self." + parts[1], 0) + 1
    return count


# What a configuration read may be made of: settings, literals, and the operators that combine them.
_CONFIG_READ_KINDS = frozenset({"opt", "field", "env", "lit", "or", "and", "not", "conv", "cmp", "in"})


def _config_read(c: list) -> bool:
    """A condition that reads settings alone (`config.attn_config['rope']`, `getattr(cfg, "x", 0) or
    0`, `args.x == "y"`): at least one setting, nothing else (no parameter, flag or unknown)."""
    kinds = _kinds(c)
    return kinds <= _CONFIG_READ_KINDS and bool(kinds & {"opt", "field", "env"})


def _config_value(fx: "_Facts", value: ast.AST) -> list | None:
    """The configuration read a value is, or None (a literal alone is a constant, not a setting)."""
    c = fx.cond(value, {})
    return c if _config_read(c) else None


def _config_attributes(fx: "_Facts", init: ast.FunctionDef, counts: dict[str, int],
                       attrs: dict[str, list]) -> dict[str, list]:
    """`self.rope = config.attn_config['rope']` among the top-level statements of `__init__`, the
    attribute assigned nowhere else in the class: "self.rope" -> that read's condition, so `if
    self.rope:` anywhere in the class reads the setting (as `self.x = x` reads a parameter's default).
    Attributes set from a parameter keep their own rule (`_init_attributes`)."""
    out: dict[str, list] = {}
    for st in init.body:
        if type(st) is not ast.Assign or len(st.targets) != 1 or type(st.targets[0]) is not ast.Attribute:
            continue
        parts = _chain(st.targets[0])
        key = "self." + parts[1] if parts and len(parts) == 2 and parts[0] == "self" else ""
        if key and counts.get(key) == 1 and key not in attrs and (c := _config_value(fx, st.value)) is not None:
            out[key] = c
    return out


def _config_locals(fx: "_Facts", stmts: list[ast.stmt], assigned: dict[str, int],
                   params: dict[str, object]) -> dict[str, list]:
    """`quant_noise = getattr(cfg, "quant_noise", 0) or 0` at a function's top level, the local
    assigned once and no option parameter: the local holds that configuration read."""
    out: dict[str, list] = {}
    for st in stmts:
        if type(st) is not ast.Assign or len(st.targets) != 1 or type(st.targets[0]) is not ast.Name:
            continue
        name = st.targets[0].id
        if assigned.get(name) == 1 and name not in params and (c := _config_value(fx, st.value)) is not None:
            out[name] = c
    return out


def _cuda_attributes(node: ast.ClassDef, count: dict[str, int]) -> frozenset[str]:
    """`self.cuda = torch.cuda.is_available() and not cfg.cpu` at the top level of a class's
    `__init__` (from a CUDA check, or from a local or parameter holding one), assigned nowhere else in
    the class (`count`: `_attribute_counts`): testing `self.cuda` anywhere in the class tests the
    device ("self.cuda")."""
    init = _init_of(node)
    if init is None:
        return frozenset()
    local = _cuda_locals(init.body, _statement_names(init)[1], init.args)
    out: set[str] = set()
    for st in init.body:
        if type(st) is ast.Assign and len(st.targets) == 1 and type(st.targets[0]) is ast.Attribute:
            parts = _chain(st.targets[0])
            key = "self." + parts[1] if parts and len(parts) == 2 and parts[0] == "self" else ""
            if key and count.get(key) == 1 and _cuda_value(st.value, local | out):
                out.add(key)
    return frozenset(out)


# Calls a CUDA-only branch may make for their side effects alone: logging and printing.
_LOG_CALL = re.compile(r"(?i)^(print\w*|warn\w*|log\w*|info|debug|warning)$")


def _refines(stmts: list[ast.stmt], scope: ast.AST, start: int, end: int, orelse: list[ast.stmt] = ()) -> bool:
    """A CUDA-only branch nothing after it needs, so Trainium skips it with nothing lost: with no
    alternative (no else, or an else that only sets what the branch sets to None: the feature is off
    without CUDA), its statements only bind locals read nowhere else, re-assign a name or attribute
    that already holds a value before the branch (`flex_attention = torch.compile(flex_attention)`,
    `self.cuda_config = None` before), log, or call the object's own methods for their effect (a
    cache warm-up: `self._pe(1, device, h, w)`). A value that picks a device (`device = "cuda"`,
    `torch.device(...)`) kept after the branch, a return, or any other call keeps it a concern."""
    off = set()
    for st in orelse:
        if not (type(st) is ast.Assign and len(st.targets) == 1 and _literal(st.value) is None):
            return False
        off.add(_text(st.targets[0]))
    if not stmts:
        return False
    assigns: list[tuple[ast.AST, ast.AST]] = []  # (target, value): judged by what the scope does around the branch
    for st in _statements(stmts):
        t = type(st)
        if t in (ast.If, ast.Pass) or (t is ast.For and type(st.target) is ast.Name):
            continue
        if t is ast.Expr and type(st.value) is ast.Call:
            parts = _chain(st.value.func) or []
            if (len(parts) == 2 and parts[0] == "self") or (parts and _LOG_CALL.match(parts[-1])):
                continue
            return False
        if t in (ast.Assign, ast.AnnAssign, ast.AugAssign) and (t is not ast.Assign or len(st.targets) == 1):
            target = st.targets[0] if t is ast.Assign else st.target
            if type(target) in (ast.Name, ast.Attribute) and st.value is not None:
                assigns.append((target, st.value))
                continue
        return False
    if not assigns:
        return True
    before: set[str] = set(off)
    read_outside: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(scope, False)]
    while stack:  # one walk of the scope, only for a branch that assigns
        n, nested = stack.pop()
        line = getattr(n, "lineno", None)
        outside = line is None or not start <= line <= end
        t = type(n)
        if outside and t in (ast.Name, ast.Attribute) and type(n.ctx) is ast.Load:
            read_outside.add(_text(n))
        elif line is not None and line < start and not nested:  # bound before the branch, in this scope
            if t in (ast.Name, ast.Attribute) and type(n.ctx) is ast.Store:
                before.add(_text(n))
            elif t in (ast.Import, ast.ImportFrom):
                before.update((a.asname or a.name).split(".")[0] for a in n.names)
        inner = nested or (n is not scope and t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
        stack.extend((c, inner) for c in ast.iter_child_nodes(n))
    function = type(scope) is not ast.Module
    for target, value in assigns:
        name = _text(target)
        if function and type(target) is ast.Name and name not in read_outside:
            continue  # a local of the branch
        if name not in before or _places_on_cuda(value):
            return False  # a value only the branch gives, or a device choice kept after it
    return True


def _moved_anyway(node: ast.ClassDef) -> list[list[int]]:
    """`self.freqs = freqs.to("cuda") if torch.cuda.is_available() else freqs` in a class that moves
    `self.freqs` to an input's device before using it (`self.freqs = self.freqs.to(q.device)`): the
    CUDA move is undone on any device, so Trainium loses nothing by skipping it ([first, last] lines)."""
    moves: dict[str, list[int]] = {}
    follows: set[str] = set()
    for st in _statements(node.body):
        if type(st) is not ast.Assign or len(st.targets) != 1:
            continue
        target, value = _text(st.targets[0]), st.value
        if type(value) is ast.IfExp and cuda_check(value.test) == "body" and type(value.body) is ast.Call \
                and type(value.body.func) is ast.Attribute and _text(value.body.func.value) == _text(value.orelse) \
                and _places_on_cuda(value.body):
            moves[target] = [st.lineno, st.end_lineno or st.lineno]
        elif (type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr == "to"
              and _text(value.func.value) == target and len(value.args) == 1
              and type(value.args[0]) is ast.Attribute and value.args[0].attr == "device"):
            follows.add(target)  # `self.freqs = self.freqs.to(q.device)`
    return [span for target, span in sorted(moves.items()) if target in follows]


def _places_on_cuda(value: ast.AST) -> bool:
    """A value that names the CUDA device or moves something to a device (`"cuda"`, `torch.device(...)`,
    `x.cuda()`, `x.to(device)`): a device choice the code after the branch goes on using."""
    for n in ast.walk(value):
        if _names_cuda(n) or (type(n) is ast.Call and (_chain(n.func) or [""])[-1] in ("cuda", "device", "to")):
            return True
    return False


# What names a device or backend in another path (`else "cpu"`): a choice made where CUDA is absent.
_DEVICE_WORDS = frozenset({"cpu", "cuda", "mps", "xpu", "npu", "hpu", "xla", "meta", "gloo", "nccl", "mpi"})


def device_test(test: ast.AST, cuda_locals: Collection[str] = (), reads: Collection[str] = (),
                chosen=lambda: frozenset()) -> bool:
    """Whether a CUDA check (`cuda_check`) holds only by reading a device, tensor or process group
    that already exists (`self._device.type == "cuda"`, `x.is_cuda`, `"cuda" in str(x.device)`,
    `dist.get_backend() == "nccl"`, a local set from one: `reads`), not by asking what is available
    (`torch.cuda.is_available()`, a local, attribute or parameter set from such a probe, or a name
    the scope sets from a device choice: `chosen()`, `_chosen_names`). Such a device was chosen
    elsewhere: on Trainium it is a Neuron device and the branch is simply not taken. A conjunction
    counts when one CUDA part of it is such a test (the branch needs that part true)."""
    t = type(test)
    if t is ast.Name:
        return test.id in reads
    if t is ast.UnaryOp and type(test.op) is ast.Not:
        return device_test(test.operand, cuda_locals, reads, chosen)
    if t is ast.BoolOp:
        side = "body" if type(test.op) is ast.And else "else"
        return any(cuda_check(v, cuda_locals) == side and device_test(v, cuda_locals, reads, chosen) for v in test.values)
    if t is ast.Attribute:
        return test.attr == "is_cuda"
    if t is ast.Call and type(test.func) is ast.Name and test.func.id in ("any", "all") and len(test.args) == 1:
        arg = test.args[0]
        return type(arg) in (ast.GeneratorExp, ast.ListComp) and device_test(arg.elt, cuda_locals, reads, chosen)
    if t is ast.Call and type(test.func) is ast.Attribute and test.func.attr == "startswith":
        return _reads_device(test.func.value, chosen)
    if t is ast.Compare and len(test.ops) == 1:
        left, right = test.left, test.comparators[0]
        if type(test.ops[0]) in (ast.In, ast.NotIn):
            # `"cuda" in str(x.device)`; `DEVICE_TYPE in ("cuda", "hip")` reads its left side
            return _reads_device(left if _gpu_values(right) else right, chosen)
        return _reads_device(left if _literal(left) is ... else right, chosen)
    return False


def _reads_device(node: ast.AST, chosen) -> bool:
    """A value read from an existing device or process group: `x.device.type`, `x.device`,
    `str(x.device)`, `dist.get_backend()`, or a name the scope does not set from a device choice
    (`device_type` taken from the device); an option (`args.device`) is a choice, not a read."""
    t = type(node)
    if t is ast.Name:
        return node.id not in chosen()
    if t is ast.Attribute:
        parts = _chain(node)
        if parts is not None and _Facts.config_root(parts):
            return False
        return node.attr == "type" or (node.attr == "device" and _chain(node.value) != ["self"])
    if t is ast.Call:
        parts = _chain(node.func) or [""]
        if parts == ["str"] and len(node.args) == 1:
            return _reads_device(node.args[0], chosen)
        return parts[-1] == "get_backend"
    return False


def _chooses_device(value: ast.AST) -> bool:
    """A value that picks CUDA or asks whether it is there: a "cuda" or "nccl" literal,
    `torch.cuda.is_available()`, `torch.cuda.device_count()`."""
    for n in ast.walk(value):
        if _names_cuda(n) or _names_nccl(n):
            return True
        if type(n) is ast.Call and (_chain(n.func) or [])[-2:] in (["cuda", "is_available"], ["cuda", "device_count"]):
            return True
    return False


def _chosen_names(scope: ast.AST) -> frozenset[str]:
    """Names a function or module sets from a device choice (`device = "cuda" if
    torch.cuda.is_available() else "cpu"`, a parameter defaulting to "cuda"): comparing one with
    "cuda" asks what was chosen there, as the probe itself would. Nested functions and classes are
    not entered."""
    out: set[str] = set()
    if type(scope) in (ast.FunctionDef, ast.AsyncFunctionDef):
        out.update(a.arg for a, d, _at in defaulted_params(scope.args) if _chooses_device(d))
    stack = [scope.body]
    while stack:
        for st in stack.pop():
            t = type(st)
            if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                continue
            if t in (ast.Assign, ast.AnnAssign) and st.value is not None and _chooses_device(st.value):
                targets = st.targets if t is ast.Assign else [st.target]
                out.update(n.id for tg in targets for n in ast.walk(tg) if type(n) is ast.Name)
            stack.extend(_blocks(st))
    return frozenset(out)


def _outer_choices(scope: ast.FunctionDef, outer: frozenset[str]) -> frozenset[str]:
    """The names of `outer` (chosen in the scope around a function) that the function does not bind
    itself (parameters, assignments, nested definitions): it reads them from there."""
    if not outer:
        return outer
    inner, assigned = _statement_names(scope)
    a = scope.args
    own = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} | {x.arg for x in (a.vararg, a.kwarg) if x}
    return frozenset(n for n in outer if n not in own and n not in assigned and n not in inner)


def _rebound(module: ast.AST) -> frozenset[str]:
    """Names a module's own statements assign more than once (`DEVICE = get_device()`, later `DEVICE
    = ...` in a branch): the module decides their value, they are no constant bound once."""
    if type(module) is not ast.Module:
        return frozenset()
    return frozenset(n for n, k in _statement_names(module)[1].items() if k > 1)


def _device_reads(node: ast.FunctionDef, cuda_locals: Collection[str], assigned: dict[str, int],
                  chosen) -> frozenset[str]:
    """The function's CUDA locals (`_cuda_locals`) assigned once, at its top level, from a test of
    an existing device (`use_ids = initialized and dist.get_backend() == "nccl"`): testing one is
    that test (`device_test`). `chosen()` gives the function's `_chosen_names`."""
    out: set[str] = set()
    for st in node.body:
        if type(st) is ast.Assign and len(st.targets) == 1 and type(st.targets[0]) is ast.Name:
            name = st.targets[0].id
            if name in cuda_locals and assigned.get(name) == 1 and device_test(st.value, cuda_locals, out, chosen):
                out.add(name)
    return frozenset(out)


def _names_device(other) -> bool:
    """Whether another path (statements or an expression) names a device or backend itself (`else
    "cpu"`, `torch.device(...)`): there a device is chosen where CUDA is absent. A comparison with
    one (`elif device_type == "xpu":`) tests the device again; it chooses nothing."""
    stack = list(other) if type(other) is list else [other]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is ast.Compare:
            continue
        if t is ast.Constant and type(n.value) is str and n.value.split(":")[0] in _DEVICE_WORDS:
            return True
        if t is ast.Call and (_chain(n.func) or [""])[-1] == "device":
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def cuda_check(test: ast.AST, cuda_locals: Collection[str] = ()) -> str | None:
    """"body" when an `if` test holds only on a CUDA device (`x.is_cuda`, `torch.cuda.is_available()`,
    any value compared with "cuda" (`x.device.type == "cuda"`, `device_type == "cuda"`),
    `"cuda" in str(device)`, `str(device).startswith("cuda")`, a process group on NCCL, CUDA's own
    backend (`backend == "nccl"`, `dist.get_backend() == "nccl"`), or a conjunction with one),
    "else" for its negation; None otherwise. On Trainium that branch is skipped."""
    t = type(test)
    if t is ast.Name and test.id in cuda_locals:
        return "body"
    if t is ast.Attribute and type(test.value) is ast.Name and f"{test.value.id}.{test.attr}" in cuda_locals:
        return "body"  # `self.cuda`, set once from a CUDA check in `__init__`
    if t is ast.UnaryOp and type(test.op) is ast.Not:
        inner = cuda_check(test.operand, cuda_locals)
        return {"body": "else", "else": "body"}.get(inner or "")
    if t is ast.BoolOp and type(test.op) is ast.And:
        return "body" if any(cuda_check(v, cuda_locals) == "body" for v in test.values) else None
    if t is ast.BoolOp and type(test.op) is ast.Or:
        # `not torch.cuda.is_available() or not flash`: false only on a CUDA device
        return "else" if any(cuda_check(v, cuda_locals) == "else" for v in test.values) else None
    if t is ast.Attribute and test.attr == "is_cuda":
        return "body"
    if t is ast.Call and type(test.func) is ast.Name and test.func.id in ("any", "all") and len(test.args) == 1:
        # `any(t.is_cuda for t in tensors)`: some (or every) input is on a CUDA device
        arg = test.args[0]
        elt = arg.elt if type(arg) in (ast.GeneratorExp, ast.ListComp) else None
        return "body" if elt is not None and cuda_check(elt, cuda_locals) == "body" else None
    if t is ast.Call:
        parts = _chain(test.func) or []
        if type(test.func) is ast.Attribute and test.func.attr == "startswith" and len(test.args) == 1:
            return "body" if _names_cuda(test.args[0]) else None
        # `torch.cuda.is_initialized()` is True only once CUDA was set up on a CUDA device; a name bound to
        # either by a module's import is in `cuda_locals` with its call (`"cuda_available()"`)
        if len(parts) == 1 and f"{parts[0]}()" in cuda_locals and not test.args:
            return "body"
        return "body" if parts[-2:] in (["cuda", "is_available"], ["cuda", "is_initialized"]) else None
    if t is ast.Compare and len(test.ops) == 1:
        op, left, right = type(test.ops[0]), test.left, test.comparators[0]
        if op in (ast.Eq, ast.NotEq) and (_names_cuda(right) or _names_cuda(left) or _names_nccl(right) or _names_nccl(left)):
            return "body" if op is ast.Eq else "else"
        if op in (ast.In, ast.NotIn) and (_names_cuda(left) or _gpu_values(right)):
            # `"cuda" in str(device)`, `device_type in ("cuda", "hip")`: a membership counts like `==`
            return "body" if op is ast.In else "else"
    return None


def _cuda_pattern(pattern: ast.AST) -> bool:
    """A `case` pattern that matches CUDA's device type alone or among other GPUs' (`case "cuda":`,
    `case "cuda" | "hip":`, `_gpu_values`)."""
    name = type(pattern).__name__
    if name == "MatchValue":
        return _names_cuda(pattern.value)
    if name == "MatchOr":
        values = [p.value for p in pattern.patterns if type(p).__name__ == "MatchValue"]
        return len(values) == len(pattern.patterns) and _gpu_values(ast.Tuple(elts=values))
    return False


# Device types and backends of GPUs other than Trainium's: a value among them is never a Neuron device.
_GPU_WORDS = frozenset({"cuda", "hip", "rocm", "xpu", "mps", "musa", "mlu", "npu", "hpu", "nccl"})


def _gpu_values(node: ast.AST) -> bool:
    """A literal tuple, list or set of GPU device types or backends with CUDA's among them (`("cuda",
    "hip")`, `{"cuda"}`): a value in it is never a CPU, XLA or Neuron device, so the test holds only on a
    GPU, like `== "cuda"`."""
    if type(node) not in (ast.Tuple, ast.List, ast.Set) or not node.elts:
        return False
    values = [_literal(e) for e in node.elts]
    return (all(type(v) is str and v.split(":")[0] in _GPU_WORDS for v in values)
            and any(v.split(":")[0] in ("cuda", "nccl") for v in values))
