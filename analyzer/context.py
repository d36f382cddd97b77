"""Where a finding runs: the context every finding carries, and why.

reach.py answers "can this module be imported from a training entry point?". A porting engineer
asks "does this line run on the device, in the training step, in the default configuration?". This
module answers the second question from the per-file code facts (sources/codefacts.py):

- `step`: runs in the training job as configured by default: the must-port estimate.
- `host`: runs in the data pipeline on the CPU (Dataset items, collate and worker functions), or
  once outside the step (a module's construction, checkpoint loading and saving, and what only they
  call: `setup_only`); a dynamic shape or an unsupported op there is not a device concern. Listed,
  not costed.
- `opt-in`: runs only when a configuration value, command-line option or environment variable turns
  it on (`only when args.fused_softmax`), when a table of alternatives is asked for a name other than
  the default, or on another accelerator (`ascend/`, `rocm/`, ...). Costed per feature, apart.
- `evaluation`: reached only from evaluation, inference, export or visualisation code. Its own
  small estimate.
- `neuron-native`: in a file that already targets Neuron or XLA (imports torch_neuronx, torch_xla,
  neuronx_distributed, nki, ... or uses the `neuron`/`xla` device): the port is done there.
- `off-path`: not run by the training job at all (reach.py's reasons, or no call reaches it).

With training entry points, calls are followed function by function: an entry's module code, the
functions it calls (through the imports the scan resolved), the classes it constructs (their
`__init__`, `forward`, hooks a framework calls), methods called by name on objects whose class is
reached, callbacks handed over as values. Each edge keeps the weakest label it passed: a call under
a condition that is off by default makes everything behind it opt-in; a call into an evaluation
function makes it evaluation; a call into a Dataset's `__getitem__` makes it host-side. What the
analysis cannot see keeps the module-level answer: registered by a decorator, a table lookup whose
key it cannot read, a scope name it cannot find. It never drops a finding: it re-labels it.
"""

from __future__ import annotations

import ast
import functools
import heapq
import posixpath
import re
from dataclasses import dataclass, field

from .model import CONTEXTS, GPU_CODE_CATEGORIES, Finding  # noqa: F401 - CONTEXTS is the contract
from .reach import EXCLUDED_DIRS
from .reach import exercises as _exercises_options
from .sources.codefacts import KEY_PATH, MAIN, REQUIRED, regions_out, unpacked
from .sources.setup_code import checkpoint_writes
from .sources.vocab import HOST_CATEGORIES


def split_node(node: str) -> tuple[str, str]:
    """A call-graph node `rel::scope` as (rel, scope); a module's own node has the scope "". A scope is
    a dotted Python name and never holds `::`, so the last `::` separates: a file or folder named
    `a::b` (hostile or not) keeps its whole path."""
    rel, sep, scope = node.rpartition("::")
    return (rel, scope) if sep else (node, "")


def node_text(node: str) -> str:
    """A node as a reader writes it: `path:scope`, or the path alone for module code."""
    rel, scope = split_node(node)
    return f"{rel}:{scope}" if scope else rel


def by_name(target: str) -> bool:
    """Whether an edge's target is a method called by name on an object (`a:step`), not a node: a node
    always holds `::`, so a file named `a:x.py` is never taken for one."""
    return target.startswith("a:") and "::" not in target


STEP, HOST, EVAL, OPTIN, UNREACHED = 0, 1, 2, 3, 9
_LABEL_CONTEXT = {STEP: "step", HOST: "host", EVAL: "evaluation", OPTIN: "opt-in"}
# Rules whose edit the port needs wherever the line runs, once or not: FP16 and AMP settings decide how
# the step computes (a GradScaler built in `__init__` scales every step's loss, `.half()` there makes
# the step FP16), and `torch.save` of device state becomes `xm.save` on the XLA path.
ONCE_STILL_PORTED = frozenset({"NR1201", "NR1202", "NR1203", "NR1204", "NR1205", "NR1206", "NR1230", "NR1404"})
STORAGE_PRECISION = frozenset({"NR1205"})  # FP16 in code that writes a checkpoint is the file's format
# The PyTorch versions each target runs (neuron-facts.md: TorchNeuron from PyTorch 2.10, 2.9 the last
# XLA-based release; torch-neuronx training began on 2.1): a branch for an older PyTorch never runs.
TORCH_RANGES = {"native": ((2, 10, 0), None), "xla": ((2, 1, 0), (2, 9, 99))}
# Categories whose constructs are Neuron's own in a file that already targets Neuron or XLA.
NEURON_CATEGORIES = frozenset({"device", "distributed", "precision", "compile", "host-sync", "dynamic-shape",
                               "unsupported-op", "dependency", "custom-cuda"})
OTHER_ACCELERATORS = {
    "ascend": "Ascend NPUs", "npu": "Ascend NPUs", "torch_npu": "Ascend NPUs", "rocm": "AMD GPUs (ROCm)",
    "hip": "AMD GPUs (ROCm)", "amd": "AMD GPUs (ROCm)", "xpu": "Intel GPUs (XPU)", "intel": "Intel GPUs (XPU)",
    "mps": "Apple GPUs (MPS)", "metal": "Apple GPUs (MPS)", "hpu": "Intel Gaudi (HPU)", "gaudi": "Intel Gaudi (HPU)",
    "habana": "Intel Gaudi (HPU)", "mlu": "Cambricon MLUs", "musa": "Moore Threads GPUs",
}


def accelerator_feature(name: str) -> str:
    """The opt-in feature of another accelerator's code: "AMD GPUs (ROCm)" -> `amd-gpus`."""
    return name.split(" (")[0].lower().replace(" ", "-")


# Features that are another accelerator's code: listed apart, never costed (never_costed).
ACCELERATOR_FEATURES = frozenset(accelerator_feature(n) for n in OTHER_ACCELERATORS.values())
# Features of code that runs only on a place, not behind a setting (cuda_only, runs_only_on,
# chosen_cuda_builds, native.py's build gates): an optional library's feature never takes one.
PLACE_FEATURES = frozenset({"cuda", "cuda-build", "complex", "platform", "workaround"}) | ACCELERATOR_FEATURES
# What an ["accel", name] condition (codefacts `rocm_test`) tests, by its feature name.
ACCEL_TESTS = {"amd-gpus": "true only in a ROCm build, for AMD GPUs"}
# A gate naming a place the code runs (a CUDA device, a CUDA build, another platform, complex data)
# starts so (place_gate); a gate naming a setting a user may turn on starts "only when".
PLACE_GATE = "only on "


def place_gate(where: str) -> str:
    """The gate of code that runs only on a place: `only on a CUDA device (...)` (never_costed)."""
    return PLACE_GATE + where


def never_costed(f: Finding) -> bool:
    """Opt-in code no Trainium job runs, whatever the user turns on: another accelerator's code and
    what runs only on a place (place_gate: `only on a CUDA device (...)`, `only on a build that sets
    WITH_CUDA`). Listed in the opt-in table, never costed there, and not added by `--include-opt-in
    all` (report.py); judged per finding, so one feature name holding both kinds costs only the other."""
    return f.details.get("feature") in ACCELERATOR_FEATURES or (f.gate or "").startswith(PLACE_GATE)


# Folders of evaluation code. `generation/` holds what decodes with a trained model (samplers, logits
# warpers, beam search); a folder named for a serving engine is its plugin (`optimum/neuron/vllm/`).
SERVING_ENGINES = ("vllm", "sglang", "tgi", "text_generation_server", "text-generation-inference", "tensorrt_llm",
                   "triton_server", "jetstream", "torchserve", "lmdeploy")
EVAL_PATH = re.compile(r"(?i)^(eval|evals|evaluation|evaluate|inference|infer|export|exporters?|demo|demos"
                       r"|visuali[sz]ation|serving|serve|deploy|generation|" + "|".join(map(re.escape, SERVING_ENGINES)) + ")$")
# Files of evaluation code: named for it (`predict.py`, `inference_utils.py`), or for the kind of class
# they hold after a prefix (`sam2_video_predictor.py`, `coco_evaluator.py`, `onnx_exporter.py`).
EVAL_FILE = re.compile(r"(?i)^(eval|evaluate|evaluation|evaluators?|validators?|predictors?|exporters?|inference|infer"
                       r"|export|predict|demo|serve|serving)(_\w*)?\.py$|^\w+_(predictors?|evaluators?|exporters?)\.py$")
# Developer tools kept in a package: profilers and benchmarks measure a model, they do not train it
# (`natten/profiler.py`, `xformers/profiler/`, `torch_geometric/profile/`, `sam2/benchmark.py`). The
# `benchmarks/` folders beside a package are already excluded (reach.py); these live inside it.
DEV_TOOL_DIR = re.compile(r"(?i)^(profile|profilers?|profiling(_\w+)?|bench)$")
DEV_TOOL_FILE = re.compile(r"(?i)^(profile|profilers?|profiling|benchmarks?|bench)(_\w*)?\.py$"
                           r"|^\w+_(profilers?|profiling|benchmarks?)\.py$")
# Options whose switch selects evaluation rather than a feature.
EVAL_OPTION = re.compile(r"(?i)(^|_)(eval|evaluate|evaluation|validate|validation|val|test|predict|inference|infer|generate"
                         r"|onnx|export|exporting)(_|$)")
UNKNOWN = object()


class Off:
    """The defaults of a setting that disagree only among values that leave it off (`False` in one
    configuration class, `None` in another): a truthiness test (`if cfg.x:`) is False on either, a
    comparison with a value that is on (`== "hidden_states"`) is False too; anything that could tell
    the off values apart (`is None`, `== False`, a table lookup) stays unknown."""

    __slots__ = ("values",)

    def __init__(self, values: list) -> None:
        self.values = values

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return " or ".join(_show(v) for v in self.values)


def _off_value(v) -> bool:
    return v is None or v is False or v == "" or (type(v) in (int, float) and v == 0)


def known(v):
    """A value that names one default: an Off set is unknown where the off values differ."""
    return UNKNOWN if isinstance(v, Off) else v
_FORWARD_LEVELS = 4  # callers followed for a forwarded keyword (`f(x=x)`): more is unknown
_FORWARD_BUDGET = 400  # parameters looked at for one question: past it, unknown
# Methods whose call, matched by name on any reached class, is evidence that a script trains.
TRAINING_METHOD = re.compile(r"(?i)train|^fit$|finetune|^run$|^main$|^launch$")
FALLBACK_CATEGORIES = frozenset({"custom-cuda", "triton", "gpu-library", "device"})
PACKAGING_FILES = frozenset({"setup.py", "conftest.py", "noxfile.py", "fabfile.py"})
_IMPLICIT = ("__init__", "__post_init__", "__call__", "__new__", "__enter__", "__exit__")


@dataclass
class Gate:
    feature: str  # the switch a user turns on: an option, a variable, a table key, an accelerator
    text: str  # "only when args.fused_softmax (default False)"
    kind: str = "opt-in"  # or "evaluation"


@dataclass
class Context:
    """The analysis' answers: a context per finding, and notes on what it could not resolve."""

    function_level: bool = False
    neuron_entries: bool = False  # every training entry already targets Neuron or XLA
    compiled: bool = False  # the training path calls torch.compile outside any switch that is off
    library: bool = False  # labels from a library's surface (no entry): unreached keeps the module answer
    contrib_core: set[str] = field(default_factory=set)  # library mode: `contrib/` folders the core imports
    starts: list[str] = field(default_factory=list)
    core: set[str] = field(default_factory=set)  # library mode: files other modules import unconditionally
    demos: dict[str, str] = field(default_factory=dict)  # library mode: module -> why its `__main__` block is a demo
    unreferenced: dict[str, str] = field(default_factory=dict)  # library mode: private function nothing names -> why
    subprojects: dict[str, str] = field(default_factory=dict)  # folder of a separate distribution -> its build file
    fallback_only: set[str] = field(default_factory=set)  # reached only through GPU branches with a PyTorch path
    auto_fallback: set[str] = field(default_factory=set)  # ... of which a capability check alone decides
    cuda_only: set[str] = field(default_factory=set)  # reached in the step only through CUDA-only branches
    setup_only: set[str] = field(default_factory=set)  # called in the step only by construction or checkpoint code
    notes: list[str] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)  # node -> label (function level only)
    gates: dict[str, Gate] = field(default_factory=dict)  # node -> the gate that made it opt-in
    parents: dict[str, str] = field(default_factory=dict)  # node -> the node it was first reached from
    graph: "Graph | None" = field(default=None, repr=False)  # kept for compile_scope.py

    def path_to(self, node: str, limit: int = 12) -> list[str]:
        """How the training entry reaches a node: entry first."""
        out = [node]
        while out[-1] in self.parents and len(out) < limit:
            out.append(self.parents[out[-1]])
        return [node_text(n) for n in reversed(out)]


# ------------------------------------------------------------------------------------------ defaults


class Defaults:
    """The value a user gets without setting anything: argparse, click, absl and config-class
    defaults, values of configuration files, module-level flags, and parameter defaults no call site
    overrides. A name with two different defaults in the repository is unknown."""

    def __init__(self, infos) -> None:
        values: dict[str, list] = {}
        files: dict[str, list] = {}
        self.flags: dict[tuple[str, str], list] = {}
        self.passed: dict[str, list] = {}  # keyword -> (file, value, called name) of calls no callee is resolved for
        self._calls: list[tuple[str, dict]] = []  # (file, code facts): `passed`, read when indexed
        self._handed: list[tuple[str, str]] = []  # (file, reference) named other than as a call's function
        self._signatures: dict[str, dict] = {}  # file -> its `signatures`, read on first use
        self._loose: set[str] = set()  # names referred to by name alone (`obj.f`, `getattr(m, "f")`)
        self._graph = None  # the resolver (Graph.resolve), once attached
        self._handed_nodes: set[str] = set()
        self._budget = _FORWARD_BUDGET
        self._by_owner: dict[tuple[str, str], list] | None = None  # (function node, parameter) -> (file, value)
        self.torch_range: tuple | None = None  # the target's PyTorch versions (TORCH_RANGES), once known
        self._calls_to: dict[str, list] = {}  # function node -> parameters each call passes (None: unknown)
        self._indexed = False  # the four call indexes above are built on first use, once the graph is attached
        self._passed_any: dict[str, list] = {}  # keyword -> (file, value) of every call
        self._all_def_names: frozenset[str] | None = None  # names of the project's defs, once asked
        self.registry_keys: dict[str, set] = {}  # registry name -> the keys `.register("key", ...)` gives it
        self.registry_tests: dict[str, set] = {}  # registry name -> settings tested for membership in it
        self.attributes: dict[str, list] = {}  # instance attribute -> what the project's classes set it to
        self.predicates: dict[str, list] = {}  # function name -> [(qualified name, predicate)] (codefacts.predicate)
        self.file_values: dict[str, list] = {}  # setting -> values configuration files outside tests give it
        self._isa: dict[str, tuple] = {}  # class name -> (value of `isinstance(x, C)`, why), once asked
        self._isa_sites: dict[str, list] = {}  # class name -> (file, region) of each mention outside tests
        self._isa_open: set[str] = set()  # class names a project class derives from or a configuration file names
        self._isa_built: set[str] | None = None  # names the project calls (builds) outside tests; None: not indexed
        for info in infos:
            code = info.facts.get("code") or {}
            for attr, entries in (code.get("attributes") or {}).items():
                have = self.attributes.setdefault(attr, [])
                have.extend(e for e in entries if e not in have)
            for name, pred in (code.get("predicates") or {}).items():
                self.predicates.setdefault(name.rsplit(".", 1)[-1], []).append((name, pred))
            for registry, key, *_rest in code.get("registrations", ()):
                self.registry_keys.setdefault(registry, set()).add(key)
            for region in code.get("regions", ()):
                for registry, setting in _membership_tests(region[2]):
                    self.registry_tests.setdefault(registry, set()).add(setting)
            for name, value, _line in code.get("options", ()):
                values.setdefault(name, []).append(value)
            for key, value, _line in info.facts.get("values", ()):  # YAML/JSON/TOML configuration files
                files.setdefault(str(key).rsplit(".", 1)[-1], []).append(value)
                if not _exercises_options(info.rel):
                    self.file_values.setdefault(str(key).rsplit(".", 1)[-1], []).append(value)
            for name, cond in (code.get("flags") or {}).items():
                self.flags[(info.rel, name)] = cond
            if _exercises_options(info.rel):
                continue  # tests and benchmarks pass every option by design: not what a user's job runs
            if "passed" in code:
                self._calls.append((info.rel, code))
            self._handed.extend((info.rel, ref) for ref in unpacked(code, "handed", ()))
            for d in (code.get("defs") or {}).values():  # a subclass calls its base's `__init__` unseen
                self._handed.extend((info.rel, b) for b in (d[4] if len(d) > 4 else ()) if b[:2] in ("q:", "l:"))
            for refs in (code.get("refs") or {}).values():
                self._loose.update(r[0][2:] for r in refs if r[0][:2] in ("a:", "s:"))
        # What the code declares (argparse, config classes) is what a user gets without setting anything;
        # configuration files speak only for names the code gives no default (`task: detect` in a
        # cfg/default.yaml), since example and test configurations are what a user may choose.
        for k, v in files.items():
            values.setdefault(k, v)
        self.options = {k: (v[0] if all(_same(v[0], x) for x in v) else UNKNOWN) for k, v in values.items()}
        # defaults that differ only among off values (`default=False` here, `default=None` there)
        self.off = {k: Off(sorted({repr(x): x for x in v}.values(), key=repr)) for k, v in values.items()
                    if self.options[k] is UNKNOWN and all(_off_value(x) for x in v)}
        self.launched: dict[str, object] = {}  # options the training entry's launch commands set
        self.bindings = {info.rel: (info.facts.get("code") or {}).get("bindings", {}) for info in infos}

    def launch_options(self, launches: list[list[str]]) -> None:
        """What the launch commands of the training entry set (`python train.py --fp16 --attn flash`):
        the configuration a user actually runs. Commands that disagree leave the option unknown."""
        seen: dict[str, list] = {}
        for args in launches:
            for name, value in _parse_args(args).items():
                seen.setdefault(name, []).append(value)
        self.launched = {k: (v[0] if all(_same(v[0], x) for x in v) else UNKNOWN) for k, v in seen.items()}
        self._isa = {}  # type tests are judged again on these settings (where the classes are named stays)

    def option(self, name: str, fallback=UNKNOWN):
        if name in self.launched:
            return self.launched[name]
        v = self.options.get(name, UNKNOWN)
        if v is UNKNOWN:
            v = self.options.get(name.lstrip("_"), fallback)
        return v

    def setting(self, cond: list, rel: str):
        """The value a setting that picks a table's entry has in the training job: its default
        (`mlp_impl: str = 'sparse'` in a configuration dataclass) when nothing in the project sets it
        otherwise, UNKNOWN when a call passes the keyword with another value
        (`Arguments(mlp_impl='grouped')`, outside tests) or a configuration file gives another."""
        if cond[:1] == ["field"]:
            cond = ["opt", cond[1]]
        value = known(self.evaluate(cond, rel))
        if cond[:1] != ["opt"] or value is UNKNOWN or cond[1] in self.launched:
            return value
        name = cond[1]
        if not self.passes_default(name, value) or any(not _same(value, v) for v in self.file_values.get(name, ())):
            return UNKNOWN
        return value

    def predicate_body(self, cond: list) -> list | None:
        """A call of a helper predicate (`is_native_diffusion(cfg)`) as its body's condition with the
        call's arguments in place of its parameters (one level: a predicate's own calls are unknown);
        None when the function is no predicate of the project or its name is ambiguous."""
        q, args = cond[1], cond[2]
        found = self.predicates.get(q.rsplit(".", 1)[-1], [])
        exact = [p for name, p in found if name == q or name.endswith("." + q) or q.endswith("." + name)]
        pred = exact[0] if len(exact) == 1 else found[0][1] if len(found) == 1 else None
        return None if pred is None else _substitute(pred[1], args)

    def attribute(self, name: str, depth: int = 0):
        """Another object's attribute (`self.net.looped`): the value every class of the project that
        sets it gives it by default (`self.looped = looped`, `looped=False`); UNKNOWN when one sets it
        from anything else, they disagree, or a caller turns the keyword on."""
        values = []
        for entry in self.attributes.get(name, ()):
            if entry is None or not self.passes_default(entry[0], entry[-1], depth):
                return UNKNOWN
            values.append(entry[1])
        return values[0] if values and all(_same(values[0], v) for v in values) else UNKNOWN

    def registry_choice(self, registry: str) -> tuple[str, object] | None:
        """(setting, default) that picks a registry's entry: the one setting the project tests for
        membership in it (`cfg['ffn_type'] in ffns_with_megablocks`), else the one option whose default
        is one of its keys (`ffn_type` defaults to 'mptmlp', registered in `ffns`); None when unknown."""
        keys = self.registry_keys.get(registry, ())
        settings = sorted(self.registry_tests.get(registry, ()))
        if not settings:
            settings = sorted(k for k, v in self.options.items() if type(v) is str and v in keys)
        if len(settings) != 1:
            return None
        value = self.option(settings[0])
        return None if value is UNKNOWN else (settings[0], value)

    def registry_gate(self, registry: str, key: str) -> Gate | None:
        """The gate of a registry's entry that the default setting does not pick."""
        choice = self.registry_choice(registry)
        if choice is None or _same(choice[1], key):
            return None
        return Gate(key, f"only when {choice[0]} == {key!r} (the default is {_show(choice[1])})")

    def evaluate(self, cond: list, rel: str, depth: int = 0):
        """True/False/None/a value, or UNKNOWN."""
        op = cond[0]
        if op == "lit":
            return cond[1]
        if op == "train":
            return True
        if op == "opt":
            v = self.option(cond[1], cond[2] if len(cond) > 2 else UNKNOWN)
            return self.off.get(cond[1], v) if v is UNKNOWN and cond[1] not in self.launched else v
        if op == "field":  # `margs.mlp_impl`, `margs: Arguments`: the field's default unless the project sets it
            return self.setting(cond, rel)
        if op == "env":
            return cond[2] if len(cond) > 2 else None
        if op == "param":
            # a keyword parameter (or `self.x` set from one in __init__, whose raw default is cond[3]) of
            # the function cond[4]: its default, unless a call that reaches it passes something else
            raw = cond[3] if len(cond) > 3 else cond[2]
            owner = f"{rel}::{cond[4]}" if len(cond) > 4 and cond[4] else None
            v = self.param_value(cond[1], raw, depth, owner)
            if v is UNKNOWN or _same(v, REQUIRED):
                return UNKNOWN  # a required parameter some call leaves unknown (or no call passes)
            return cond[2] if _same(v, raw) else v if _same(cond[2], raw) else UNKNOWN
        if op == "flag":
            if depth > 3:
                return UNKNOWN
            inner = self.flags.get((rel, cond[1]))
            if inner is None:
                return UNKNOWN
            return self.evaluate(inner, rel, depth + 1)
        if op == "not":
            v = self.evaluate(cond[1], rel, depth)
            return UNKNOWN if v is UNKNOWN else not v
        if op in ("and", "or"):
            vals = [self.evaluate(c, rel, depth) for c in cond[1:]]
            if op == "and":
                if any(v is not UNKNOWN and not v for v in vals):
                    return False
                return UNKNOWN if any(v is UNKNOWN for v in vals) else vals[-1]
            if any(v is not UNKNOWN and v for v in vals):
                return True
            return UNKNOWN if any(v is UNKNOWN for v in vals) else vals[-1]
        if op == "conv":
            v = known(self.evaluate(cond[2], rel, depth))
            if v is UNKNOWN:
                return UNKNOWN
            try:
                if cond[1] == "int":
                    return int(v)
                if cond[1] == "float":
                    return float(v)
                if cond[1] == "bool":
                    return bool(v)
                if cond[1] == "str":
                    return str(v)
                if v is None:
                    return UNKNOWN
                return getattr(str(v), cond[1])()
            except (TypeError, ValueError):
                return UNKNOWN
        if op == "pred":
            body = self.predicate_body(cond)
            return UNKNOWN if body is None else self.evaluate(body, rel, depth)
        if op == "ifx":  # `if TEST: return VALUE` guards of a helper predicate, then the rest
            t = self.evaluate(cond[1], rel, depth)
            return UNKNOWN if t is UNKNOWN else self.evaluate(cond[2] if t else cond[3], rel, depth)
        if op == "torchver":
            return self.torch_version(cond[1], cond[2])
        if op == "fails":
            return False  # the step failed (codefacts `recovery`): not in a run that trains as configured
        if op == "accel":
            return False  # a ROCm build (codefacts `rocm_test`): the job runs on CUDA GPUs or Trainium
        if op == "oattr":
            return self.attribute(cond[1], depth)
        if op == "isa":
            return self.built_by_default(cond[1], cond[2] if len(cond) > 2 else None)
        if op == "inreg":
            v, keys = known(self.evaluate(cond[1], rel, depth)), self.registry_keys.get(cond[2])
            return UNKNOWN if v is UNKNOWN or not keys else any(_same(v, k) for k in keys)
        if op == "in":
            v = self.evaluate(cond[1], rel, depth)
            if isinstance(v, Off) and any(_off_value(x) for x in cond[2]):
                return UNKNOWN
            return UNKNOWN if v is UNKNOWN else any(_same(v, x) for x in cond[2])
        if op == "cmp":
            a, b = self.evaluate(cond[2], rel, depth), self.evaluate(cond[3], rel, depth)
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            if isinstance(a, Off) or isinstance(b, Off):
                # only an equality with a value that is on tells: every off value differs from it
                other = b if isinstance(a, Off) else a
                if cond[1] not in ("Eq", "NotEq") or isinstance(other, Off) or _off_value(other):
                    return UNKNOWN
                return cond[1] == "NotEq"
            try:
                return {"Eq": lambda: _same(a, b), "NotEq": lambda: not _same(a, b), "Is": lambda: a is b,
                        "IsNot": lambda: a is not b, "Gt": lambda: a > b, "GtE": lambda: a >= b,
                        "Lt": lambda: a < b, "LtE": lambda: a <= b}[cond[1]]()
            except TypeError:
                return UNKNOWN
        return UNKNOWN

    def torch_version(self, op: str, version: str):
        """A test of the installed PyTorch's version (codefacts `torch_version_test`) on the target: True
        or False when every PyTorch the target runs answers it alike (`torch >= 2.4` on TorchNeuron,
        2.10 or later: True), UNKNOWN otherwise or with no target."""
        if self.torch_range is None:
            return UNKNOWN
        try:
            v = tuple(int(x) for x in (version.split(".") + ["0", "0"])[:3])
        except ValueError:
            return UNKNOWN
        lo, hi = self.torch_range
        holds = {"GtE": (lo >= v, hi is not None and hi < v), "Gt": (lo > v, hi is not None and hi <= v),
                 "Lt": (hi is not None and hi < v, lo >= v), "LtE": (hi is not None and hi <= v, lo > v)}.get(op)
        if holds is None:
            return UNKNOWN
        return True if holds[0] else False if holds[1] else UNKNOWN

    def built_by_default(self, name: str, ref: str | None = None):
        """`isinstance(x, C)`: False when the project (tests and benchmarks aside) builds the class `C`
        and names it only inside branches that are off by default (`plugins =
        BitsandbytesPrecision(...)` under `if quantize is not None:`): no such object exists in the
        default job. UNKNOWN when any mention is outside such a branch (module code, a table, a
        string, a shipped configuration file), when the project never calls it (objects the user's
        model or a library hands over: `PreTrainedModel`), for PyTorch's and Python's own types, or
        when a class of the project derives from it."""
        if ref is None or ref.startswith(("q:torch.", "q:builtins.", "q:typing.", "q:collections.")):
            return UNKNOWN
        if self._isa_built is None:
            self._index_type_tests()
        if name in self._isa:
            return self._isa[name][0]
        self._isa[name] = (UNKNOWN, "")  # a test met again while judging its own sites
        value, why = UNKNOWN, ""
        sites = self._isa_sites.get(name)
        if sites and name not in self._isa_open and name in self._isa_built and self._graph is not None:
            gates = [region_gate(self._graph.code[rel], region, rel, self) if region >= 0 else None
                     for rel, region in sites]
            if all(g is not None and g.kind == "opt-in" for g in gates):
                value, why = False, f"`{name}` is built {gates[0].text}"
        self._isa[name] = (value, why)
        return value

    def _index_type_tests(self) -> None:
        """Where the project names each class an `isinstance` test asks about: (file, region) of every
        mention outside tests, and the names left open (a base of a project class, a value of a
        configuration file)."""
        self._isa_sites, self._isa_open = {}, set()
        self._isa_built = {ref[2:].rsplit(".", 1)[-1] for _rel, code in self._calls  # called somewhere
                           for ref in unpacked(code, "passed") if ref[:2] in ("q:", "l:")}
        if self._graph is None:
            return
        asked: set[str] = set()
        for code in self._graph.code.values():
            for region in code.get("regions", ()):
                asked.update(n for k, n in _names(region[2]) if k == "isa")
        if not asked:
            return
        for rel, code in sorted(self._graph.code.items()):
            for d in (code.get("defs") or {}).values():
                bases = (b[2:].rsplit(".", 1)[-1] for b in (d[4] if len(d) > 4 else ()))
                self._isa_open.update(b for b in bases if b in asked)
            if _exercises_options(rel):
                continue
            for refs in (code.get("refs") or {}).values():
                for ref, region in refs:
                    name = ref[2:].rsplit(".", 1)[-1]
                    if name in asked:
                        self._isa_sites.setdefault(name, []).append((rel, region))
        self._isa_open.update(n for values in self.file_values.values() for v in values
                              if type(v) is str and (n := v.rsplit(".", 1)[-1]) in asked)

    def attach(self, graph: "Graph") -> None:
        """Resolve calls with the graph's resolution: a keyword passed at a call then overrides the
        parameter of the function the call resolves to, not every parameter of that name."""
        self._graph = graph
        self._handed_nodes = {n for rel, ref in self._handed for n in graph.resolve(rel, ref)}
        self._indexed = False
        self._isa, self._isa_built = {}, None  # where the classes of type tests are named: indexed on first use

    def _index_calls(self) -> None:
        """Index the `passed` facts by the parameter each call sets: under the function a call resolves
        to when a graph is attached, by keyword alone otherwise."""
        self._indexed = True
        self.passed, self._passed_any, self._calls_to = {}, {}, {}
        self._all_def_names = None
        self._by_owner = {} if self._graph is not None else None
        for rel, ref, calls in ((rel, ref, calls) for rel, code in self._calls
                                for ref, calls in sorted(unpacked(code, "passed").items())):
            owner = self._callee(rel, ref)
            # positions name parameters of a function or a class's constructor (after `self`); a method
            # called through its class may be a classmethod or a staticmethod: by keyword only
            init = bool(owner) and owner.endswith(".__init__") and ref.rsplit(".", 1)[-1] != "__init__"
            plain = bool(owner) and (init or self._graph.def_of(owner)[2] == "f")
            sig = {p[1]: p[0] for p in self.signature(owner)} if plain else {}
            bound = 1 if init else 0
            for call in calls:
                if call is None:  # more calls than the facts hold: what they pass is not known
                    if owner:
                        self._calls_to.setdefault(owner, []).append(None)
                    continue
                given = dict(call[1])
                for i, value in enumerate(call[0] if type(call[0]) is list else ["?"] * call[0]):
                    if i + bound in sig:
                        given.setdefault(sig[i + bound], value)
                for kw, value in given.items():
                    self._passed_any.setdefault(kw, []).append((rel, value))
                    if owner:
                        self._by_owner.setdefault((owner, kw), []).append((rel, value))
                    elif kw in call[1]:
                        self.passed.setdefault(kw, []).append((rel, value, ref.rpartition(":")[2].rsplit(".", 1)[-1]))
                if owner:
                    self._calls_to.setdefault(owner, []).append(None if call[2] else set(given))

    def _def_names(self) -> frozenset[str]:
        """The names of the project's functions, methods and classes (the last part of each)."""
        if self._all_def_names is None:
            code = self._graph.code if self._graph is not None else {}
            self._all_def_names = frozenset(scope.rsplit(".", 1)[-1] for c in code.values() for scope in c.get("defs", {}))
        return self._all_def_names

    @staticmethod
    def _names_of(node: str) -> set[str]:
        """The names a call of the function node goes by: its own, and a constructor's class name."""
        parts = split_node(node)[1].split(".")
        return {parts[-1], parts[-2]} if parts[-1] == "__init__" and len(parts) > 1 else {parts[-1]}

    def _callee(self, rel: str, ref: str) -> str | None:
        """The function node a call's reference resolves to (a class: its own `__init__`); None when
        there is no resolver, no single target, or a class without an `__init__` of its own."""
        if self._graph is None or not ref:
            return None
        nodes = self._graph.resolve(rel, ref)
        if len(nodes) != 1:
            return None
        d = self._graph.def_of(nodes[0])
        if d is None or ref[2:].rsplit(".", 1)[-1] != split_node(nodes[0])[1].rsplit(".", 1)[-1]:
            return None  # `Fn.apply(...)`, an alias: an attribute of the class or another name, not its constructor
        if d[2] == "c":
            init = nodes[0] + ".__init__"
            return init if self._graph.def_of(init) is not None else None
        return nodes[0]

    def signature(self, node: str) -> list:
        """The function node's parameters with a default (codefacts `signatures`); [] without a graph."""
        rel, scope = split_node(node)
        if self._graph is None:
            return []
        if rel not in self._signatures:
            self._signatures[rel] = unpacked(self._graph.code.get(rel, {}), "signatures")
        return self._signatures[rel].get(scope, [])

    def always_passed(self, node: str, name: str) -> bool:
        """Whether the parameter's default never runs: at least one call in the project (tests aside)
        resolves to the function, every one passes the parameter (by keyword or position, no `*args`
        or `**kwargs` spread), and nothing refers to the function in a way the facts cannot follow (by
        name on an object, as a string, as a value handed on, as a base class)."""
        if not self._indexed:
            self._index_calls()
        calls = self._calls_to.get(node)
        if not calls or any(c is None or name not in c for c in calls):
            return False
        rel, scope = split_node(node)
        own = scope.removesuffix(".__init__")  # a class's constructor: the class is what is handed around
        d = self._graph.def_of(f"{rel}::{own}") if self._graph else None
        if d is None or "registered" in d[3] or "hook" in d[3] or own.rsplit(".", 1)[-1] in self._loose:
            return False
        return f"{rel}::{own}" not in self._handed_nodes

    def param_value(self, name: str, default, depth: int = 0, owner: str | None = None, path: tuple = ()):
        """The value the parameter `name` (of the function node `owner`, when known) has in the
        training job: what every call passes, plus its default unless every call passes it; UNKNOWN
        when they differ. Calls resolved to another function leave it alone; calls no function is
        resolved for count for every parameter of that name. A value a resolved call forwards from
        its caller's own parameter (`f(x=x)`) is that parameter's value, followed `_FORWARD_LEVELS`
        levels of callers (a wrapper, the class that builds it, ...); one an unresolved call forwards
        keeps the name-wide rule: the caller's default, another name followed two levels."""
        self._budget = _FORWARD_BUDGET if not path else self._budget - 1  # `path` is empty for a new question
        if self._budget < 0:
            return UNKNOWN  # a web of wrappers too wide to follow
        if not self._indexed:
            self._index_calls()
        tied = owner is not None and self._by_owner is not None
        if tied:
            # an unresolved call by the name of some project function (`model_class.build_inner_model(...)`)
            # calls a function of that name: it sets the parameter of `owner` only when `owner` has that name
            names = self._names_of(owner)
            wide = [(r, v) for r, v, called in self.passed.get(name, [])
                    if called in names or called not in self._def_names()]
        else:
            wide = self._passed_any.get(name, [])
        own = self._by_owner.get((owner, name), []) if tied else []
        # a required parameter has no default: every call passes it, but a call that passes it by a
        # position the facts do not map (they map defaulted parameters) leaves its value unknown
        required = _same(default, REQUIRED)
        if required and tied and self._calls_to.get(owner) and not self.always_passed(owner, name):
            return UNKNOWN
        seen = [] if required or (own and self.always_passed(owner, name)) else [default]
        for rel, v, follow in [*((r, v, False) for r, v in wide), *((r, v, True) for r, v in own)]:
            if type(v) is dict and "opt" in v:  # `f(x=args.x)`: what the configuration sets
                v = self.option(v["opt"], v.get("default", UNKNOWN))
            elif type(v) is dict:
                # a resolved call's forwarded parameter is followed to its function's own callers; an
                # unresolved call's keeps the name-wide rule (the same name: its default; another: two levels)
                caller = f"{rel}::{v['owner']}" if follow and v.get("owner") else None
                if caller is not None and ((caller, v["param"]) == (owner, name) or (caller, v["param"]) in path):
                    continue  # a recursive call, or a cycle of wrappers, passing the parameter on as it is
                if caller is None and v["param"] == name:
                    v = v["default"]
                elif depth >= (_FORWARD_LEVELS if caller else 2):
                    return UNKNOWN
                else:
                    got = self.param_value(v["param"], v["default"], depth + 1, caller, (*path, (owner, name)))
                    v = got if "value" not in v else v["value"] if _same(got, v["default"]) else UNKNOWN
            elif v == "?":
                return UNKNOWN
            if v is UNKNOWN:
                return UNKNOWN
            seen.append(v)
        return seen[0] if seen and all(_same(seen[0], x) for x in seen) else UNKNOWN

    def passes_default(self, name: str, default, depth: int = 0, owner: str | None = None) -> bool:
        """Whether the parameter `name` keeps `default` in the training job (see `param_value`)."""
        return _same(self.param_value(name, default, depth, owner), default)

    def describe(self, cond: list, rel: str) -> str:
        """The defaults a condition was judged on: "default False"."""
        names = sorted(set(_names(cond)))
        parts = []
        seen: set[str] = set()
        for kind, name in names:
            if kind == "opt":
                v = self.option(name, _opt_fallback(cond, name))  # `getattr(cfg, "x", 0)`: 0 when nothing declares x
                v = self.off.get(name, v) if v is UNKNOWN and name not in self.launched else v
                parts.append(f"{name} defaults to {_show(v)}")
            elif kind == "param":
                default = _param_default(cond, name)
                if _same(default, REQUIRED):
                    parts.append(f"{name} is {_show(self.evaluate(_param_of_cond(cond, name), rel))} at every call")
                else:
                    parts.append(f"{name} defaults to {_show(default)}")
            elif kind == "pred":
                for call in _calls_of(cond, name):
                    body = self.predicate_body(call)
                    if body is not None and (why := self.describe(body, rel)) and why not in parts:
                        parts.append(why)
            elif kind == "isa":
                if self._isa and name in self._isa and self._isa[name][0] is not UNKNOWN and (why := self._isa[name][1]) not in parts:
                    parts.append(why)
            elif kind == "oattr":
                params = sorted({e[0] for e in self.attributes.get(name, ()) if e is not None})
                parts.append(f"{'/'.join(params) or name} defaults to {_show(self.attribute(name))}")
            elif kind == "fails":
                parts.append("error recovery: runs only after the training step failed")
            elif kind == "accel":
                parts.append(f"{ACCEL_TESTS[name]}; the job runs on NVIDIA GPUs or Trainium")
            elif kind == "torchver" and self.torch_range is not None:
                lo, hi = self.torch_range
                parts.append(f"PyTorch on this target is {lo[0]}.{lo[1]} or later" if hi is None
                             else f"PyTorch on this target is {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}")
            elif kind == "env":
                parts.append(f"${name} unset")
            elif kind == "flag":
                inner = self.flags.get((rel, name))
                if inner is not None and name not in seen:
                    seen.add(name)
                    v = self.evaluate(inner, rel)
                    parts.append(f"{name} is {_show(v)}" + (f": {self.describe(inner, rel)}" if self.describe(inner, rel) else ""))
        return "; ".join(parts)


def _parse_args(args: list[str]) -> dict[str, object]:
    """`--fused-softmax --lr 3e-4 --attn=flash` -> {fused_softmax: True, lr: 0.0003, attn: "flash"}."""
    out: dict[str, object] = {}
    i = 0
    while i < len(args):
        a = str(args[i])
        i += 1
        if not a.startswith("--") or len(a) < 3:
            continue
        key, eq, value = a[2:].partition("=")
        key = key.replace("-", "_")
        if not eq:
            if i < len(args) and not str(args[i]).startswith("-"):
                value = str(args[i])
                i += 1
            else:
                out[key] = True
                continue
        out[key] = _scalar(value)
    return out


def _scalar(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text if "$" not in text else UNKNOWN


def _names(cond: list):
    if not cond:
        return
    if cond[0] in ("opt", "env") and len(cond) > 1 and isinstance(cond[1], str):
        yield cond[0], cond[1]
    elif cond[0] == "field":
        yield "opt", cond[1]
    elif cond[0] in ("flag", "param", "oattr", "isa"):
        yield cond[0], cond[1]
    elif cond[0] == "torchver":
        yield "torchver", "torch-version"
        return
    elif cond[0] == "fails":
        yield "fails", "error-recovery"
        return
    elif cond[0] == "accel":
        yield "accel", accelerator_feature(OTHER_ACCELERATORS[cond[1]])
        return
    elif cond[0] == "pred":
        yield "pred", cond[1]  # the helper's name (describe() reads its body); its arguments are no settings
        return
    for x in cond[1:]:
        if isinstance(x, list):
            yield from _names(x)


def _calls_of(cond: list, name: str):
    """The calls of the helper predicate `name` in a condition."""
    if cond[:2] == ["pred", name]:
        yield cond
    elif cond[:1] != ["pred"]:
        for x in cond[1:]:
            if isinstance(x, list) and x and isinstance(x[0], str):
                yield from _calls_of(x, name)


def _substitute(cond: list, args: list) -> list:
    """A predicate's condition with its parameters replaced: a parameter by the argument's condition,
    a setting of a configuration object passed whole (`["cfgobj"]`) by that option."""
    if cond[:1] == ["arg"]:
        arg = args[cond[1]] if cond[1] < len(args) else ["?"]
        if cond[2] is None:
            return arg
        return ["opt", cond[2], *cond[3:]] if arg == ["cfgobj"] else ["?"]
    return [_substitute(x, args) if isinstance(x, list) and x and isinstance(x[0], str) else x for x in cond]


def _membership_tests(cond: list):
    """(registry, setting) of each `setting in REGISTRY` in a condition."""
    if cond[:1] == ["inreg"] and cond[1][:1] in (["opt"], ["field"]):
        yield cond[2], cond[1][1]
    for x in cond[1:]:
        if isinstance(x, list) and x and isinstance(x[0], str):
            yield from _membership_tests(x)


def _opt_fallback(cond: list, name: str):
    """The default a read of the setting `name` in a condition gives when nothing declares it
    (`getattr(cfg, "x", 0)`: ["opt", "x", 0]); UNKNOWN without one."""
    if cond[:2] == ["opt", name] and len(cond) > 2:
        return cond[2]
    for x in cond[1:]:
        if isinstance(x, list) and x and isinstance(x[0], str) and (v := _opt_fallback(x, name)) is not UNKNOWN:
            return v
    return UNKNOWN


def _param_of_cond(cond: list, name: str) -> list:
    """The ["param", name, ...] test inside a condition."""
    if cond[:2] == ["param", name]:
        return cond
    for x in cond[1:]:
        if isinstance(x, list) and (found := _param_of_cond(x, name)):
            return found
    return []


def _param_default(cond: list, name: str):
    """The default of the parameter `name` in a condition (the raw default of an attribute set from it)."""
    found = _param_of_cond(cond, name)
    return (found[3] if len(found) > 3 else found[2]) if found else UNKNOWN


def _feature(cond: list) -> str:
    names = list(_names(cond))
    for kind, name in names:
        if kind == "accel":  # `not SKIP_BUILD and IS_ROCM`: the accelerator is what the branch is for
            return name
    for kind, name in names:
        return name.rsplit(".", 1)[-1] if kind == "pred" else name
    return "condition"


def _show(v) -> str:
    return "unknown" if v is UNKNOWN else repr(v) if isinstance(v, str) else str(v)


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (isinstance(a, bool) and isinstance(b, bool) and a == b)
    return a == b


# ------------------------------------------------------------------------------------------ regions


_NEGATED_OPS = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
                ast.NotIn: ast.In, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt}


def negated(text: str) -> str:
    """The test of an `else` branch as a reader would write it: `not use_cache` for `if use_cache`,
    `impl == 'local'` for `if impl != 'local'`, `x` for `if not x`; `not (...)` around anything longer."""
    try:
        expr = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"not ({text})"
    if type(expr) is ast.UnaryOp and type(expr.op) is ast.Not:
        return ast.unparse(expr.operand)
    if type(expr) is ast.Compare and len(expr.ops) == 1:
        return ast.unparse(ast.Compare(expr.left, [_NEGATED_OPS[type(expr.ops[0])]()], expr.comparators))
    if type(expr) in (ast.Name, ast.Attribute, ast.Call, ast.Subscript):
        return f"not {text.strip()}"
    return f"not ({text})"


def region_gate(code: dict, index: int, rel: str, defaults: Defaults) -> Gate | None:
    """The first region around `index` (innermost out) that is not taken by default, as a gate."""
    for _i, region in regions_out(code.get("regions", ()), index):
        cond, branch, text = region[2], region[3], region[5]
        v = defaults.evaluate(cond, rel)
        names = [n for _, n in _names(cond)]
        if v is UNKNOWN and branch == "body" and cond[0] != "not" and names and all(EVAL_OPTION.search(n) for n in names):
            # `if self.onnx_trace:` whose default is not readable: its name says what the branch is for
            return Gate("evaluation", f"only when {text} (named for evaluation or export)", "evaluation")
        if v is not UNKNOWN:
            taken = bool(v) if branch == "body" else not bool(v)
            if not taken:
                evaluation = cond[0] == "train" or _has_train(cond) or any(EVAL_OPTION.search(n) for n in names)
                when = text if branch == "body" else negated(text)
                why = defaults.describe(cond, rel)
                return Gate(_feature(cond) if not evaluation else "evaluation",
                            f"only when {when}" + (f" ({why})" if why else ""),
                            "evaluation" if evaluation else "opt-in")
    return None


# codefacts' conditions a capability decides: an unknown test (`cap`) and a CUDA device check; and
# the branch of a CUDA check that runs only on a CUDA device.
_CAPABILITY_CONDS = (["cap"], ["cuda"], ["not", ["cuda"]])
_CUDA_ONLY_BRANCHES = ((["cuda"], "body"), (["not", ["cuda"]], "else"))


def cuda_branch(region: list, line: int | None = None) -> bool:
    """A region that runs only on a CUDA device (codefacts marks it; older facts say it by the
    condition), holding `line` when one is given (the return branch of an early return is a hole)."""
    marked = region[7] if len(region) > 7 else (region[2], region[3]) in _CUDA_ONLY_BRANCHES
    hole = region[8] if len(region) > 8 else None
    return bool(marked) and not (line is not None and hole and hole[0] <= line <= hole[1])


def in_cuda_branch(code: dict, index: int) -> bool:
    """Whether a region, or one around it, runs only on a CUDA device."""
    return any(cuda_branch(region) for _i, region in regions_out(code.get("regions", ()), index))


def in_fallback(code: dict, index: int) -> str | None:
    """Whether a region (or one around it) is the GPU branch of a check with a PyTorch path beside it:
    "auto" for a capability check (false on Trainium by itself: `HAS_TRITON`, `x.is_cuda`), "switch"
    for a setting that is on by default (`use_triton_kernel=True`: someone must turn it off)."""
    for _i, region in regions_out(code.get("regions", ()), index):
        if len(region) > 6 and region[6]:
            # a kernel branch that runs only on a CUDA device (`if x.is_cuda and self.use_kernel:`,
            # `if self.use_cuda_kernel:` defaulting to `torch.cuda.is_available()`) is skipped by itself
            return "auto" if region[2] in _CAPABILITY_CONDS or cuda_branch(region) else "switch"
    return None


def _has_train(cond: list) -> bool:
    return cond[:1] == ["train"] or any(isinstance(x, list) and _has_train(x) for x in cond[1:])


def innermost_region(code: dict, line: int, keep=lambda region: True) -> int | None:
    """The index of the innermost region holding `line` (of those `keep` accepts)."""
    best, best_span = None, None
    for i, region in enumerate(code.get("regions", ())):
        start, end = region[0], region[1]
        if start <= line <= end and keep(region) and (best_span is None or end - start <= best_span):
            best, best_span = i, end - start
    return best


def arm_region(code: dict, line: int, column: int, keep=lambda region: True) -> int | None:
    """The innermost arm of a conditional expression (a region with a span, codefacts `option_arms`,
    `device_arms`) whose span holds (line, column), of those `keep` accepts: `a if TORCH_2_4 else b`
    is the one-line form of `if TORCH_2_4: a else: b`, its arms regions like the statement's branches.
    An arm holds no statement, so it is inside every line region around it."""
    best, best_span = None, None
    for i, region in enumerate(code.get("regions", ())):
        span = region[9] if len(region) > 9 else None
        if span and (span[0], span[1]) <= (line, column) <= (span[2], span[3]) and keep(region):
            size = (span[2] - span[0], span[3] - span[1])
            if best_span is None or size < best_span:
                best, best_span = i, size
    return best


def setting_arm(code: dict, line: int, column: int | None) -> int | None:
    """The innermost arm around (line, column) of a conditional expression on a setting or version
    (not a device check: `cuda_only` judges those arms, as the statement's CUDA branch)."""
    if column is None:
        return None
    return arm_region(code, line, column, lambda region: region[2] not in _CAPABILITY_CONDS and not cuda_branch(region))


def line_gate(code: dict, line: int, rel: str, defaults: Defaults, column: int | None = None) -> Gate | None:
    """The gate of the innermost condition region holding `line` (and `column`: an arm of a
    conditional expression on a setting is one, `setting_arm`)."""
    best = setting_arm(code, line, column)
    if best is None:
        best = innermost_region(code, line)
    return region_gate(code, best, rel, defaults) if best is not None else None


def chosen_gate(code: dict, lines: list[int], rel: str, defaults: Defaults, what: str) -> Gate | None:
    """A keyword's value chosen only by assignments under conditions that are off by default
    (`if use_flash_attention_2: impl = "flash_attention_2"` before `attn_implementation=impl`): the
    keyword asks for the library only when the first of them is on."""
    gates = [line_gate(code, line, rel, defaults) for line in lines]
    if not gates or None in gates:
        return None
    first = gates[0]
    return Gate(first.feature, f"{first.text}: the branch that gives `{what}` its value (line {lines[0]})", first.kind)


# ------------------------------------------------------------------------------------------ graph


def _named(test):
    """A class's own bases tested by their last dotted name (`nn.Module` -> `Module`)."""
    return lambda d: any(test(b[2:].rsplit(".", 1)[-1]) for b in d[4])


class Graph:
    """Function-level nodes (`rel::scope`, "" for a module's own code) and their labelled edges,
    resolved lazily while the labels propagate."""

    def __init__(self, infos, modules: dict[str, list[str]], defaults: Defaults) -> None:
        self.code = {i.rel: (i.facts.get("code") or {}) for i in infos if i.kind in ("python", "notebook")}
        self.modules = modules
        self.defaults = defaults
        self.methods: dict[str, list[tuple[str, str]]] = {}  # method name -> (rel, "Class.method")
        self.class_methods: dict[tuple[str, str], list[str]] = {}
        self.host_names: set[str] = set()
        self._custom_ops: dict[str, list[str]] | None = None
        for rel, code in self.code.items():
            self.host_names.update(code.get("host_values", ()))
            for name, d in code.get("defs", {}).items():
                if d[2] == "m":
                    cls, _, meth = name.rpartition(".")
                    self.methods.setdefault(meth, []).append((rel, name))
                    self.class_methods.setdefault((rel, cls), []).append(name)
        self.alternatives: dict[str, Gate] = {}  # library mode: node -> "the user picks it" gate
        self.entry_files: frozenset[str] = frozenset()  # entries mode: a developer tool named as the entry trains
        self._resolved: dict[tuple[str, str], list[str]] = {}
        self._edges: dict[str, list] = {}
        self._imports: dict[tuple[str, str], list[str]] = {}
        self._table_keys: dict[str, tuple[object, str]] | None = None
        self._modules: dict[str, bool] = {}
        self._framework: dict[str, bool] = {}
        self._optimizers: dict[str, bool] = {}
        self._setup_calls: dict[str, frozenset] = {}
        self._by_name: dict[str, list] | None = None
        self._eval_held: set[str] | None = None
        self._subclasses: dict[str, list[str]] | None = None  # class node -> project classes naming it a base
        self._families: dict[tuple[str, str], tuple] = {}  # (class node, name) -> self_targets
        defaults.attach(self)
        self._probe_tests()

    def _probe_tests(self) -> None:
        """Mark as CUDA-only the branches of tests that call a CUDA probe function of the project
        (codefacts `cuda_probe`: `_is_triton_available()` answers False whenever CUDA is absent), in
        whichever file it is defined: `if _is_triton_available():` then runs only on a CUDA device,
        like `if torch.cuda.is_available():`. The regions are this scan's facts, marked once."""
        probes = {f"{rel}::{name}" for rel, code in self.code.items()
                  for name, d in code.get("defs", {}).items() if "cuda_probe" in d[3]}
        via = [(rel, name, ref) for rel, code in self.code.items() for name, ref in code.get("probe_via", {}).items()]
        for _ in range(3):  # `_should_use_triton` asks `_is_triton_available()` first: a probe too
            more = {f"{rel}::{name}" for rel, name, ref in via if probes.intersection(self.resolve(rel, ref))} - probes
            if not more:
                break
            probes |= more
        if not probes:
            return
        for rel, code in self.code.items():
            for index, ref in code.get("probe_tests", ()):
                if probes.intersection(self.resolve(rel, ref)):
                    region = code["regions"][index]
                    region.extend([False] * (8 - len(region)))
                    region[7] = True

    # ------------------------------------------------------------------ names

    def files_of(self, module: str, importer: str) -> list[str]:
        from .reach import _closest

        rels = self.modules.get(module)
        return _closest(importer, rels) if rels else []

    def resolve(self, rel: str, ref: str, depth: int = 0) -> list[str]:
        """Nodes a `q:` or `l:` reference of file `rel` names."""
        key = (posixpath.dirname(rel) if ref.startswith("q:") else rel, ref)
        hit = self._resolved.get(key)
        if hit is not None:
            return hit
        out: list[str] = []
        if ref.startswith("l:"):
            out = self._in_file(rel, ref[2:].split("."), depth)
        elif ref.startswith("q:torch.ops.") and ref.count(".") >= 3:
            # `torch.ops.flash_attn._fwd`: the function a `@custom_op("flash_attn::_fwd")` registered
            out = self.custom_ops().get(".".join(ref[len("q:torch.ops."):].split(".")[:2]), [])  # `.default`: an overload
        elif ref.startswith("q:") and depth < 5:
            parts = ref[2:].split(".")
            for i in range(len(parts), 0, -1):
                files = self.files_of(".".join(parts[:i]), rel)
                if not files:
                    continue
                rest = parts[i:]
                for f in files:
                    if not rest:
                        out.append(f"{f}::")
                        continue
                    found = self._in_file(f, rest, depth)
                    if not found:
                        bound = self.code.get(f, {}).get("bindings", {}).get(rest[0])
                        if bound:
                            found = self.resolve(f, "q:" + ".".join([bound, *rest[1:]]), depth + 1)
                    out.extend(found)
                break
        self._resolved[key] = out
        return out

    def custom_ops(self) -> dict[str, list[str]]:
        """"ns.name" -> the nodes of the functions registered as that torch.library op."""
        if self._custom_ops is None:
            self._custom_ops = {}
            for rel, code in sorted(self.code.items()):
                for op, name in sorted(code.get("custom_ops", {}).items()):
                    self._custom_ops.setdefault(op, []).append(f"{rel}::{name}")
        return self._custom_ops

    def _in_file(self, rel: str, parts: list[str], depth: int = 0) -> list[str]:
        """The definition a dotted name in a file names: `Class.method`, `func`; an inherited attribute
        of a class names the class. An attribute of a function (`op.register_fake`) calls nothing."""
        defs = self.code.get(rel, {}).get("defs", {})
        name = ".".join(parts)
        if name in defs:
            return [f"{rel}::{name}"]
        owner = ".".join(parts[:-1])
        if len(parts) > 1 and defs.get(owner, [None, None, None])[2] == "c":
            return [f"{rel}::{owner}"]  # `Fn.apply`, `Model.from_pretrained`: inherited, they use the class
        alias = self.code.get(rel, {}).get("aliases", {}).get(parts[0])
        if alias and depth < 4:  # `attn = AttnFunction.apply` at module level
            return self.resolve(rel, alias, depth + 1)
        return []

    def symbol(self, rel: str, name: str, depth: int = 0) -> list[str]:
        """The definitions `name` names in file `rel` as its users import it: the file's own function,
        class or method (`Class.method`), what a top-level import binds to it (a package's
        `from .rendering import rasterization`) or re-exports with `*`, or a submodule (`pkg:ops`)."""
        parts = name.split(".")
        found = self._in_file(rel, parts)
        code = self.code.get(rel, {})
        if not found and parts[0] in code.get("bindings", {}):
            found = self.resolve(rel, "q:" + ".".join([code["bindings"][parts[0]], *parts[1:]]))
        for mod in code.get("stars", ()) if depth < 4 else ():  # `from .conv import *`: the first that has it
            if found:
                break
            for f in self.files_of(mod, rel):
                found = found or self.symbol(f, name, depth + 1)
        if not found and rel.endswith("/__init__.py"):
            found = self.resolve(rel, "q:" + ".".join([*_package_of(self.modules, rel), *parts]))
        if len(parts) > 1:  # `Trainer.train` inherited from a project base: that base's method
            found = [(self._first_def(self._linear(n), parts[-1]) or n) if self.is_class(n) else n for n in found]
        return sorted(set(found))

    # ------------------------------------------------------------------ edges

    def def_of(self, node: str) -> list | None:
        rel, scope = split_node(node)
        return self.code.get(rel, {}).get("defs", {}).get(scope) if scope else None

    def is_class(self, node: str) -> bool:
        d = self.def_of(node)
        return d is not None and d[2] == "c"

    def target_label(self, node: str) -> int:
        d = self.def_of(node)
        if d is None:
            rel, scope = split_node(node)
            if not scope and developer_tool(rel) and rel not in self.entry_files:
                return EVAL  # a profiler's or benchmark's module code measures a model, as its functions do
            return STEP
        markers = d[3]
        scope = node.rpartition("::")[2]
        name = scope.rsplit(".", 1)[-1]
        if d[2] == "m":  # a method of a prediction or export class evaluates, whoever calls it
            owner = self.def_of(node.rpartition(".")[0])
            if owner is not None and "eval" in owner[3]:
                return EVAL
        if "eval" in markers:
            return EVAL
        rel = split_node(node)[0]
        if developer_tool(rel) and rel not in self.entry_files:
            return EVAL  # a profiler's or benchmark's functions, and what only they call
        if "host" in markers or name in self.host_names:
            return HOST
        if host_path(rel):
            return HOST  # a function of the data pipeline by its place (`data/`, `transforms/`): what only it calls is host-side too
        return STEP

    def setup_node(self, node: str) -> str:
        """What a node runs once for, outside the step: "construction" (a module's `__init__`),
        "checkpoint" (named for loading or saving one), else ""."""
        d = self.def_of(node)
        if d is None:
            return ""
        if "checkpoint" in d[3]:
            return "checkpoint"
        owner = node.rpartition(".")[0]
        if "construct" in d[3] and (self.module_class(owner) or self.optimizer_class(owner)):
            return "construction"
        return ""

    def module_class(self, node: str) -> bool:
        """The class is a torch module: a base named `Module`, `*Module` (`nn.Module`, `LightningModule`)
        or `PreTrainedModel`, directly or through the project's own classes."""
        return self._derives(node, self._modules, _named(
            lambda last: last.endswith("Module") or last in ("PreTrainedModel", "ModelMixin")))

    def optimizer_class(self, node: str) -> bool:
        """The class is an optimizer (`torch.optim.Optimizer`, `*Optimizer`), directly or through the
        project's own classes: built once before training; its `step` runs in the step."""
        return self._derives(node, self._optimizers, _named(lambda last: last.endswith("Optimizer")))

    def framework_class(self, node: str) -> bool:
        """The class derives from a library class (`nn.Module`, `LightningModule`, `Trainer`), directly
        or through the project's own classes: the library calls its hooks (`forward`, `training_step`)
        by name. A subclass of a project model overrides `forward`, and that override is what runs."""
        return self._derives(node, self._framework, lambda d: bool(d[5]))

    def _derives(self, node: str, cache: dict[str, bool], direct, depth: int = 0) -> bool:
        """`direct(def)` holds for the class or for one of its bases, followed through the project."""
        hit = cache.get(node)
        if hit is not None:
            return hit
        d = self.def_of(node)
        out = False
        if d is not None and d[2] == "c" and depth < 8:
            cache[node] = False  # a cycle of bases derives from nothing
            out = direct(d)
            rel = split_node(node)[0]
            for base in d[4] if not out else ():
                if base.startswith(("q:", "l:")) and any(
                        self._derives(t, cache, direct, depth + 1) for t in self.resolve(rel, base)):
                    out = True
                    break
        cache[node] = out
        return out

    def self_class(self, rel: str, scope: str, name: str) -> str | None:
        """The class node whose methods `self.name(...)` in `scope` asks, when the scope asks that name
        only of `self` or `cls` (codefacts `self_only`: never of another object, nor as a string)."""
        entry = self.code.get(rel, {}).get("self_only", {}).get(scope)
        return f"{rel}::{entry[0]}" if entry and name in entry[1] else None

    def self_targets(self, cls: str, name: str) -> tuple[list[str], list[tuple[str, str]]]:
        """What `self.name(...)` in a method of `cls` runs, in the project: the definition `cls` itself
        has or inherits (the first in its bases' order), run whenever the caller runs; and for each
        project subclass that defines or inherits (from a mixin it lists) its own, (subclass node,
        method node), run only when that subclass is reached. Both empty when no class of the
        hierarchy defines it (an attribute holding a callable, a method of a library base)."""
        key = (cls, name)
        hit = self._families.get(key)
        if hit is not None:
            return hit
        ups = self._linear(cls)
        own = self._first_def(ups, name)
        down: list[tuple[str, str]] = []
        for sub in self._subclasses_of(cls):
            m = self._first_def([k for k in self._linear(sub) if k not in ups], name)
            if m is not None:
                down.append((sub, m))
        out = ([own] if own else [], sorted(down))
        self._families[key] = out
        return out

    def _first_def(self, classes: list[str], name: str) -> str | None:
        for k in classes:
            r, c = split_node(k)
            d = self.code.get(r, {}).get("defs", {}).get(f"{c}.{name}")
            if d is not None and d[2] == "m":
                return f"{k}.{name}"
        return None

    def _linear(self, cls: str) -> list[str]:
        """The class and its project bases, nearest first (breadth first: an approximation of the MRO)."""
        out, todo = [cls], [cls]
        while todo and len(out) < 64:
            cur = todo.pop(0)
            d = self.def_of(cur)
            for base in self._class_bases(split_node(cur)[0], d) if d is not None else ():
                if base not in out:
                    out.append(base)
                    todo.append(base)
        return out

    def _subclasses_of(self, cls: str) -> list[str]:
        """The project classes deriving from `cls`, directly or not."""
        if self._subclasses is None:
            self._subclasses = {}
            for rel, code in sorted(self.code.items()):
                for scope, d in sorted(code.get("defs", {}).items()):
                    if d[2] == "c":
                        for base in self._class_bases(rel, d):
                            self._subclasses.setdefault(base, []).append(f"{rel}::{scope}")
        out, todo = [], [cls]
        while todo and len(out) < 256:
            for sub in self._subclasses.get(todo.pop(), ()):
                if sub not in out and sub != cls:
                    out.append(sub)
                    todo.append(sub)
        return sorted(out)

    def _class_bases(self, rel: str, d: list) -> list[str]:
        """The project classes a class definition names as its bases, in order."""
        return [t for base in d[4] if base.startswith(("q:", "l:"))
                for t in self.resolve(rel, base) if (bd := self.def_of(t)) is not None and bd[2] == "c"]

    def setup_calls(self, node: str) -> frozenset:
        """What a construction or checkpoint function calls once, there: the functions and methods
        its references name, except classes (constructed now, run in the step), what it stores or
        hands on for later (`kept`), functions that define functions or return references (factories
        of callables) and names read as strings (hooks looked up by name)."""
        hit = self._setup_calls.get(node)
        if hit is not None:
            return hit
        out: set[str] = set()
        if self.setup_node(node):
            rel, scope = split_node(node)
            code = self.code.get(rel, {})
            kept = set(code.get("kept", {}).get(scope, ()))
            for ref, _region in code.get("refs", {}).get(scope, ()):
                if ref in kept or ref.startswith("s:"):
                    continue
                if ref.startswith("a:"):
                    out.add(ref)
                    cls = self.self_class(rel, scope, ref[2:])
                    own, down = self.self_targets(cls, ref[2:]) if cls is not None else ((), ())
                    out.update(own)  # `self.f()`: the edges `_edges_of` makes of it
                    if down:
                        out.add((cls, ref[2:]))
                    continue
                for target in self.resolve(rel, ref):
                    if not self._factory(target):
                        out.add(target)
        hit = self._setup_calls[node] = frozenset(out)
        return hit

    def referrers(self, node: str) -> list[str]:
        """The nodes whose references name `node` (a name index over every reference, built once)."""
        if self._by_name is None:
            self._by_name = {}
            for rel, code in self.code.items():
                for scope, refs in code.get("refs", {}).items():
                    for ref, _region in refs:
                        if ref.startswith(("q:", "l:")):
                            self._by_name.setdefault(ref.rsplit(".", 1)[-1].rpartition(":")[2], []).append((rel, scope, ref))
        name = node.rpartition("::")[2].rsplit(".", 1)[-1]
        return sorted({f"{rel}::{scope}" for rel, scope, ref in self._by_name.get(name, ())
                       if node in self.resolve(rel, ref)})

    def called_in_evaluation_only(self, node: str) -> bool:
        """A module class whose every instance is built into an attribute of another class at the top
        of its `__init__` (`self.rotary_embedding = RotaryEmbedding(...)`), named nowhere else, whose
        attributes are used only in evaluation code (every `self.rotary_embedding(...)` in the
        KV-cache branch `if store is not None: assert not k.requires_grad`): its `forward` runs only
        there, whoever built it."""
        if self._eval_held is None:
            holders: dict[str, list[tuple[str, str, str]]] = {}
            for rel, code in sorted(self.code.items()):
                for owner, held in code.get("held", {}).items():
                    for attr, ref in held.items():
                        for t in self.resolve(rel, ref):
                            holders.setdefault(t, []).append((rel, owner, attr))
            uses: dict[str, list[tuple[str, str, int]]] = {}
            named: set[str] = set()  # attributes also named as strings (`getattr(self, "rotary_embedding")`)
            based: set[str] = set()  # classes another class derives from
            for rel, code in sorted(self.code.items()):
                for scope, refs in code.get("refs", {}).items():
                    for ref, region in refs:
                        if ref.startswith("a:"):
                            uses.setdefault(ref[2:], []).append((rel, scope, region))
                        elif ref.startswith("s:"):
                            named.add(ref[2:])
                for d in code.get("defs", {}).values():
                    if d[2] == "c":
                        for b in d[4]:
                            if b[:2] in ("q:", "l:"):
                                based.update(self.resolve(rel, b))
            out = set()
            for cls, sites in sorted(holders.items()):
                inits = {f"{rel}::{owner}.__init__" for rel, owner, _attr in sites}
                if cls in based or any(r not in inits for r in self.referrers(cls)):
                    continue  # subclassed, or built or handed somewhere else
                ok = True
                for rel, owner, attr in sites:
                    if attr in named:
                        ok = False
                    for urel, scope, region in uses.get(attr, ()):
                        if not ok:
                            break
                        if f"{urel}::{scope}" in inits:
                            continue  # the assignment itself
                        g = region_gate(self.code[urel], region, urel, self.defaults) if region >= 0 else None
                        ok = g is not None and g.kind == "evaluation"
                if ok:
                    out.add(cls)
            self._eval_held = out
        return node in self._eval_held

    def _factory(self, node: str) -> bool:
        """A class, or a function that returns callables for later: what it names runs in the step."""
        d = self.def_of(node)
        if d is None or d[2] == "c":
            return True
        rel, scope = split_node(node)
        code = self.code.get(rel, {})
        if any(name.startswith(scope + ".") for name in code.get("defs", {})):
            return True  # it defines functions: it may hand them out
        return any(self.resolve(rel, ref) for ref in code.get("returns", {}).get(scope, ()))

    def edges(self, node: str) -> list:
        """(target node or "a:name", edge label, gate, fallback, only on a CUDA device) for everything
        `node` may run; computed once per node (entry detection and the propagations walk the same
        edges)."""
        hit = self._edges.get(node)
        if hit is None:
            hit = self._edges[node] = list(self._edges_of(node))
        return hit

    def edges_changed(self) -> None:
        """The defaults changed: edge labels must be judged again (resolution stays)."""
        self._edges.clear()
        self._table_keys = None

    def table_key(self, method: str) -> tuple[object, str]:
        """(default key, setting name) with which the project asks a table method
        (`self.task_map[self.task]`) for an entry: UNKNOWN unless every lookup agrees."""
        if self._table_keys is None:
            seen: dict[str, list] = {}
            for rel, code in sorted(self.code.items()):
                for _scope, looks in sorted(code.get("lookups", {}).items()):
                    for table, key, *_rest in looks:
                        if table.startswith("a:"):
                            seen.setdefault(table[2:], []).append((known(self.defaults.evaluate(key, rel)), _feature(key)))
            self._table_keys = {
                name: (vals[0] if all(v[0] is not UNKNOWN and _same(vals[0][0], v[0]) for v in vals) else (UNKNOWN, ""))
                for name, vals in seen.items()}
        return self._table_keys.get(method, (UNKNOWN, ""))

    def _table_method_edges(self, rel: str, scope: str, table: dict[str, list[str]]):
        """A method that returns a table of classes by name, asked for the configured entry: the
        default key's entry runs, the others are opt-in (`only when task == 'pose'`); when the
        default cannot be read, every entry runs (the module-level answer)."""
        value, setting = self.table_key(scope.rsplit(".", 1)[-1])
        if value is UNKNOWN or not any(_same(value, k) for k in table):
            return
        for name, refs in sorted(table.items()):
            chosen = _same(value, name)
            g = None if chosen else Gate(name, f"only when {setting} == {name!r} (the default is {_show(value)})")
            for ref in refs:
                for target in self.resolve(rel, ref):
                    yield target, STEP if chosen else OPTIN, g, None, False

    def _edges_of(self, node: str):
        rel, scope = split_node(node)
        code = self.code.get(rel)
        if code is None:
            return
        gate_cache: dict[int, Gate | None] = {}

        def gate_of(region: int) -> Gate | None:
            if region < 0:
                return None
            if region not in gate_cache:
                gate_cache[region] = region_gate(code, region, rel, self.defaults)
            return gate_cache[region]

        table = code.get("registries", {}).get(scope) if "." in scope else None
        picked = list(self._table_method_edges(rel, scope, table)) if table else []
        yield from picked
        in_table = {r for refs in table.values() for r in refs} if picked else set()
        registered = self.registered_gates(code, scope)
        for ref, region in code.get("refs", {}).get(scope, ()):
            if ref in in_table:
                continue  # judged per entry above
            g = gate_of(region) or registered.get(ref)
            label = STEP if g is None else (EVAL if g.kind == "evaluation" else OPTIN)
            fb = in_fallback(code, region) if region >= 0 else None
            cu = region >= 0 and in_cuda_branch(code, region)
            cls = self.self_class(rel, scope, ref[2:]) if ref.startswith("a:") else None
            own, down = self.self_targets(cls, ref[2:]) if cls is not None else ((), ())
            if own or down:  # `self.f()`: f of this class's hierarchy, not of any class
                for target in own:
                    yield target, label, g, fb, cu
                if down:  # a subclass's own: runs when that subclass is reached (`propagate`)
                    yield (cls, ref[2:]), label, g, fb, cu
            elif ref.startswith(("a:", "s:")):
                yield "a:" + ref[2:], label, g, fb, cu
            else:
                for target in self.resolve(rel, ref):
                    yield target, label, g, fb, cu
        for mod, region in code.get("imports", {}).get(scope, ()):
            g = gate_of(region)
            label = STEP if g is None else (EVAL if g.kind == "evaluation" else OPTIN)
            fb = in_fallback(code, region) if region >= 0 else None
            cu = region >= 0 and in_cuda_branch(code, region)
            for target in self.import_targets(rel, mod):
                yield target, label, g, fb, cu
        for table, key, region, *text in code.get("lookups", {}).get(scope, ()):
            g = gate_of(region)
            base = STEP if g is None else (EVAL if g.kind == "evaluation" else OPTIN)
            fb = in_fallback(code, region) if region >= 0 else None
            cu = region >= 0 and in_cuda_branch(code, region)
            for target, label, gg in self.lookup_edges(rel, table, key, base, g, text[0] if text else ""):
                yield target, label, gg, fb, cu
        d = code.get("defs", {}).get(scope) if scope else None
        if d is not None and d[2] == "c":
            for meth in self.class_methods.get((rel, scope), ()):
                m = meth.rsplit(".", 1)[-1]
                if m in _IMPLICIT or ("hook" in code["defs"][meth][3] and self.framework_class(node)):
                    called = m in ("forward", "__call__") and self.called_in_evaluation_only(node)
                    yield f"{rel}::{meth}", EVAL if called else STEP, None, None, False
            for base in d[4]:
                if base.startswith(("q:", "l:")):
                    for target in self.resolve(rel, base):
                        yield target, STEP, None, None, False
        if not scope:  # importing a module registers what its decorators register
            for name, dd in code.get("defs", {}).items():
                if "registered" in dd[3]:
                    g = registered.get("l:" + name)
                    yield f"{rel}::{name}", STEP if g is None else OPTIN, g, None, False

    def registered_gates(self, code: dict, scope: str) -> dict[str, Gate]:
        """ref -> gate of the callables this scope registers under a key the default setting does not
        pick (`ffns.register('torch_dmoe', func=build_torch_dmoe)` while ffn_type defaults to 'mptmlp')."""
        out: dict[str, Gate] = {}
        chosen: set[str] = set()
        for registry, key, ref, where in code.get("registrations", ()):
            if where == scope:
                g = self.defaults.registry_gate(registry, key)
                if g is None:
                    chosen.add(ref)
                else:
                    out.setdefault(ref, g)
        return {r: g for r, g in out.items() if r not in chosen}  # also registered under the default: it runs

    def import_targets(self, rel: str, module: str) -> list[str]:
        from .reach import _module_prefixes, _resolve

        key = (posixpath.dirname(rel), module)  # _resolve picks files by the importer's folder
        hit = self._imports.get(key)
        if hit is None:
            hit = self._imports[key] = [f"{f}::" for f in _resolve(_module_prefixes(module, self.modules), rel)]
        return hit

    def lookup_edges(self, rel: str, table: str, key: list, base: int, gate: Gate | None, text: str = ""):
        """A table of alternatives asked for a name: the default key's entry at the lookup's label,
        the others opt-in; every entry when the key cannot be read (the module-level answer). A
        class of a module chosen by name (`getattr(model, config.mlp_class_name)`) is the same."""
        owner, entries = self.table(rel, table)
        if not entries:
            return
        if table.startswith("module:"):
            values = [(_feature(key), known(self.defaults.evaluate(key, rel)))]
        else:  # `TABLE[cfg.kind][cfg.impl]`: a value per key of the path, each left unread when set elsewhere
            values = [(_feature(c), self.defaults.setting(c, rel)) for c in (key[1:] if key[:1] == ["path"] else [key])]
        for name, refs in sorted(entries.items()):
            path = name.split(KEY_PATH)
            # the keys the default settings rule out (a value that cannot be read rules out nothing)
            off = [(s, k, v) for (s, v), k in zip(values, path) if v is not UNKNOWN and not _same(v, k)]
            if not off:
                label, g = base, gate
            elif len(path) > 1 or len(values) > 1:
                label = max(base, OPTIN)
                when = " and ".join(f"{s} == {k!r}" for s, k, _v in off)
                why = "; ".join(f"{s} defaults to {_show(v)}" for s, _k, v in off)
                g = gate or Gate("+".join(k for _s, k, _v in off), f"only when {when} ({why})")
            else:
                label = max(base, OPTIN)
                value = values[0][1]
                when = f"{text or _feature(key)} == {name!r}" if table.startswith("module:") else f"{table} selects {name!r}"
                g = gate or Gate(name, f"only when {when} (the default is {_show(value)})")
            for ref in refs:
                for target in self.resolve(owner, ref):
                    yield target, label, g

    def table(self, rel: str, name: str) -> tuple[str, dict]:
        if name.startswith("module:"):  # the classes a module defines, by name
            for f in self.files_of(name[7:], rel)[:1]:
                defs = self.code.get(f, {}).get("defs", {})
                return f, {c: [f"l:{c}"] for c, d in defs.items() if d[2] == "c" and "." not in c}
            return rel, {}
        code = self.code.get(rel, {})
        if name in code.get("registries", {}):
            return rel, code["registries"][name]
        bound = code.get("bindings", {}).get(name)
        if bound and "." in bound:
            mod, _, attr = bound.rpartition(".")
            for f in self.files_of(mod, rel):
                t = self.code.get(f, {}).get("registries", {}).get(attr)
                if t:
                    return f, t
        return rel, {}


def propagate(graph: Graph, entries: list[str], skip_fallback: str | None = None,
              seeds: dict[str, int] | None = None) -> tuple[dict[str, int], dict[str, Gate], dict[str, str]]:
    """The best label of every node reachable from the entries: a label never improves along a
    path (step < host < evaluation < opt-in), and a node keeps the best path's label. `seeds` start
    more nodes at a label of their own; `skip_fallback="setup"` leaves out what construction and
    checkpoint code calls once."""
    label: dict[str, int] = {}
    gates: dict[str, Gate] = {}
    parent: dict[str, str] = {}  # node -> the node it was reached from (for `reached_via`)
    name_label: dict[str, int] = {}
    name_gate: dict[str, Gate | None] = {}
    down_label: dict[str, int] = {}  # a subclass's override of a `self.f()` call -> its best label
    down_gate: dict[str, Gate | None] = {}
    pending: dict[str, list[str]] = {}  # subclass node -> those overrides, relaxed once it is reached
    heap: list[tuple[int, str]] = []

    def relax(node: str, lab: int, gate: Gate | None, via: str = "") -> None:
        if lab < label.get(node, UNREACHED):
            label[node] = lab
            if via:
                parent[node] = via
            if gate is not None:
                gates[node] = gate
            else:
                gates.pop(node, None)
            heapq.heappush(heap, (lab, node))

    alternatives = graph.alternatives
    for e in entries:
        alt = alternatives.get(e)
        if alt is not None and alt.kind == "evaluation":
            relax(e, EVAL, None)  # a library's inference utility (`semantic_search`): the evaluation path
            continue
        relax(e, OPTIN if alt else graph.target_label(e), alt)  # an evaluation method starts as one
    for node, lab in sorted((seeds or {}).items()):
        relax(node, lab, None)
    while heap:
        lab, node = heapq.heappop(heap)
        if lab != label.get(node):
            continue
        here_gate = gates.get(node)
        for target, edge_label, gate, fb, cu in graph.edges(node):
            if skip_fallback == "setup":
                if target in graph.setup_calls(node):
                    continue  # called once by construction or checkpoint code
            elif skip_fallback == "cuda":
                if cu:
                    continue  # a branch that runs only on a CUDA device: what only it reaches, Trainium skips
            elif fb and skip_fallback and (skip_fallback == "any" or fb == skip_fallback):
                continue  # the GPU branch of a check with a PyTorch path: what only it reaches is a fallback
            if type(target) is tuple:  # `self.f()`: the override of each subclass, once it is reached
                new = max(lab, edge_label)
                for sub, m in graph.self_targets(*target)[1]:
                    if new < down_label.get(m, UNREACHED):
                        down_label[m] = new
                        down_gate[m] = gate if edge_label == new and gate is not None else here_gate
                        pending.setdefault(sub, []).append(m)
                        if label.get(sub, UNREACHED) < UNREACHED:
                            relax(m, max(new, label[sub], graph.target_label(m)), down_gate[m] or gates.get(sub), node)
                continue
            if by_name(target):
                name = target[2:]
                new = max(lab, edge_label)
                if new < name_label.get(name, UNREACHED):
                    name_label[name] = new
                    name_gate[name] = gate if edge_label == new and gate is not None else here_gate
                    for rel, meth in graph.methods.get(name, ()):
                        cls_node = f"{rel}::{meth.rpartition('.')[0]}"
                        cl = label.get(cls_node, UNREACHED)
                        if cl < UNREACHED:
                            m = f"{rel}::{meth}"
                            relax(m, max(new, cl, graph.target_label(m)), name_gate[name] or gates.get(cls_node), node)
                continue
            new = max(lab, edge_label, graph.target_label(target))
            g = here_gate if here_gate is not None else gate  # the outermost switch names the feature
            alt = alternatives.get(target)
            if alt is not None and alt.kind == "evaluation":
                new = max(new, EVAL)
            elif alt is not None and new < OPTIN:
                new, g = OPTIN, alt  # one of a library's alternatives: the user picks it
            relax(target, new, g, node)
        for m in pending.get(node, ()):  # a reached subclass: its overrides `self.f()` already called
            relax(m, max(down_label[m], lab, graph.target_label(m)), down_gate.get(m) or here_gate, node)
        d = graph.def_of(node)
        if d is not None and d[2] == "c":  # a reached class: its methods already called by name
            rel, scope = split_node(node)
            for meth in graph.class_methods.get((rel, scope), ()):
                nl = name_label.get(meth.rsplit(".", 1)[-1], UNREACHED)
                if nl < UNREACHED:
                    m = f"{rel}::{meth}"
                    relax(m, max(nl, lab, graph.target_label(m)), name_gate.get(meth.rsplit(".", 1)[-1]) or here_gate, node)
    return label, gates, parent


def _package_of(modules: dict[str, list[str]], rel: str) -> list[str]:
    """The dotted name of the package whose `__init__.py` is rel."""
    names = sorted(m for m, rels in modules.items() if rel in rels)
    return names[0].split(".") if names else []


def named_symbols(graph: Graph, reach) -> tuple[list[str], set[str]]:
    """The nodes each `--entry module:name` names, recorded on reach for the report, and the classes
    the user picked with them (a named class, the class of `Class.method`, and their project bases).
    A name that resolves to nothing in any of its files is an error, not a silent module-level scan."""
    from .reach import EntryError

    out: list[str] = []
    classes: set[str] = set()
    for spec, (files, _) in sorted(getattr(reach, "symbols", {}).items()):
        name = spec.rpartition(":")[2]
        nodes = sorted({n for rel in files for n in graph.symbol(rel, name)})
        if not nodes:
            where = ", ".join(files[:3]) + (" …" if len(files) > 3 else "")
            raise EntryError(f"entry {spec!r}: {where} defines or imports no function, class or module `{name}`")
        reach.symbols[spec] = (files, [node_text(n) for n in nodes])
        out += nodes
        owner = name.rpartition(".")[0]  # `Trainer.fit`: the user constructs the class, then calls the method
        for node in (sorted({n for rel in files for n in graph.symbol(rel, owner)}) if owner else nodes):
            if graph.is_class(node):
                classes.update(graph._linear(node))
                if owner:
                    out.append(node)
    for node in sorted(classes & set(out)):  # what a training loop calls on it unnamed (an optimizer's `step`)
        rel, scope = split_node(node)
        out += [f"{rel}::{m}" for m in graph.class_methods.get((rel, scope), ()) if _called_by_framework(graph, node, m)]
    return out, classes


def setup_only(graph: Graph, ctx: Context) -> set[str]:
    """Step nodes that only construction or checkpoint code calls (a helper of a module's `__init__`
    that builds a constant, a resize a checkpoint filter applies): the labels again without those
    calls, every class the first pass reached kept at its label, since a class built once runs its
    `forward` in the step."""
    if not any(graph.setup_node(n) for n in ctx.labels):
        return set()
    seeds = {n: lab for n, lab in ctx.labels.items() if (d := graph.def_of(n)) is not None and d[2] == "c"}
    once = propagate(graph, ctx.starts, skip_fallback="setup", seeds=seeds)[0]
    return {n for n, lab in ctx.labels.items() if lab == STEP and once.get(n, UNREACHED) > STEP}


def setup_reason(node: str, line: int, graph: Graph, ctx: Context) -> str:
    """Why a step node's `line` runs once, outside the step ("" when it does not): construction or
    checkpoint code (not the body of a lambda written there), itself or the one the training path
    reaches it through. A library's code no start reaches (the module-level answer) runs once when
    every reference to it is a call of such code."""
    kind = graph.setup_node(node)
    rel, scope = split_node(node)
    if kind and any(a <= line <= b for a, b in graph.code.get(rel, {}).get("lambdas", {}).get(scope, ())):
        return ""
    if not kind and ctx.library and node not in ctx.labels:
        callers = graph.referrers(node)
        if callers and all(node in graph.setup_calls(c) for c in callers):
            names = ", ".join(f"`{c.rpartition('::')[2]}`" for c in callers[:3])
            return f"called only by model construction or checkpoint code ({names}): runs once on the host, not in the step"
    if not kind and node in ctx.setup_only:
        via, seen = ctx.parents.get(node), 0
        while via is not None and not graph.setup_node(via) and seen < 12:
            via, seen = ctx.parents.get(via), seen + 1
        caller = f" (`{via.rpartition('::')[2]}`)" if via is not None and graph.setup_node(via) else ""
        if caller and graph.optimizer_class(via.rpartition(".")[0]):
            return f"called only when the optimizer is built{caller}: runs once on the host, before training"
        return (f"called only by model construction or checkpoint code{caller}: runs once on the host, "
                "not in the step")
    name = node.rpartition("::")[2]
    if kind == "construction" and graph.optimizer_class(node.rpartition(".")[0]):
        return f"runs once when the optimizer is built (`{name}`), on the host before training"
    if kind == "construction":
        return f"runs once when the module is built (`{name}`), on the host before it moves to the device"
    if kind == "checkpoint":
        return f"runs once per checkpoint load or save (`{name}`), not in the step"
    return ""


def _once_applies(f: Finding, node: str, graph: Graph) -> bool:
    """Whether running once makes this finding host-side: a value computed there (a shape, a host
    read, an op, float64), not an object built there that works in the step (`nn.EmbeddingBag`,
    `GradScaler`: the class is named) nor a setting of the step's precision; FP16 only where a
    checkpoint is written, as its file's format."""
    if f.symbol.rsplit(".", 1)[-1][:1].isupper():
        return False
    if f.rule in STORAGE_PRECISION:
        name = node.rpartition("::")[2].rsplit(".", 1)[-1]
        return graph.setup_node(node) == "checkpoint" and checkpoint_writes(name)
    return f.rule not in ONCE_STILL_PORTED


def _calls_compile(graph: Graph, node: str) -> bool:
    rel, scope = split_node(node)
    code = graph.code.get(rel, {})
    for ref, region in code.get("refs", {}).get(scope, ()):
        if ref in ("q:torch.compile", "q:torch._dynamo.optimize") and region_gate(code, region, rel, graph.defaults) is None:
            return True
    return False


def library_roots(graph: Graph, rels: list[str]) -> list[str]:
    """Module nodes, and every function and class of these files that nothing in the project names
    (by resolved reference, attribute or string name, table entry or base class): a library's surface."""
    referenced: set[str] = set()
    names: set[str] = set()
    for rel in rels:
        if developer_tool(rel):
            continue  # a profiler or benchmark measures the library's functions: they stay its surface
        code = graph.code.get(rel, {})
        for scope, refs in code.get("refs", {}).items():
            if scope == MAIN:
                continue  # a library module's `__main__` block is a demo run as a script: it uses nothing
            for ref, _region in refs:
                if ref.startswith(("a:", "s:")):
                    names.add(ref[2:])
                else:
                    referenced.update(graph.resolve(rel, ref))
        for table in code.get("registries", {}).values():
            for refs in table.values():
                for ref in refs:
                    referenced.update(graph.resolve(rel, ref))
    lazy = _lazy_modules(graph, rels)
    roots = [f"{rel}::" for rel in rels if f"{rel}::" not in lazy]
    for rel in rels:
        for name, d in graph.code.get(rel, {}).get("defs", {}).items():
            node = f"{rel}::{name}"
            if node in referenced or (d[2] == "m" and name.rsplit(".", 1)[-1] in names):
                continue
            if "." in name:
                continue  # methods run through their class (hooks, names); nested defs with their parent
            roots.append(node)
    return roots


_CONFIG_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def unreferenced_helpers(graph: Graph, infos) -> dict[str, str]:
    """A library's private top-level functions (`_chunk_scan_fwd_wip`, `_dense_to_sparse`) whose name
    nothing in the project names: node -> why it is off-path. A user does not call a library's
    private functions, and the library itself never names this one: no reference in any Python file
    or notebook (a call, an attribute or a string: `getattr(mod, "_f")`, `__all__`), no import into
    an `__init__.py` (a re-export), no word of a config file (`_target_: pkg.mod._f`), no decorator
    (`@implements(aten.add.Tensor)` registers it), no dunder (`__getattr__`). References from its
    own body, from other such functions, or from tests and benchmarks (a reference implementation
    only a test compares against, gsplat's `_isect_tiles`) do not count. A Triton kernel is such a
    function too (its decorators, `@triton.jit`, `@triton.autotune`, compile it and register nothing):
    one only a dead launcher launches (mamba-ssm's `_chunk_scan_fwd_kernel_wip`) is dead with it.
    Public functions stay the library's surface: a user may call one nothing in the library calls
    (`mamba3_siso_step`, in the README)."""
    scopes: dict[str, set[tuple[str, str]]] = {}  # name -> (file, top-level scope) that names it

    def named(name: str, rel: str, scope: str) -> None:
        scopes.setdefault(name, set()).add((rel, scope.split(".", 1)[0]))

    for rel, code in graph.code.items():
        for scope, refs in code.get("refs", {}).items():
            for ref, _region in refs:
                named(ref[2:].rsplit(".", 1)[-1], rel, scope)
        for table in code.get("registries", {}).values():
            for refs in table.values():
                for ref in refs:
                    named(ref[2:].rsplit(".", 1)[-1], rel, "")
        for alias in code.get("aliases", {}).values():
            named(alias[2:].rsplit(".", 1)[-1], rel, "")
        if rel.rsplit("/", 1)[-1] == "__init__.py":  # `from .ops import _f` in a package: a re-export
            for local, target in code.get("bindings", {}).items():
                named(local, rel, "")
                named(target.rsplit(".", 1)[-1], rel, "")
    config: set[str] = set()
    for info in infos:
        if info.kind == "config":
            for key, value, _line in info.facts.get("values", ()):
                config.update(_CONFIG_WORD.findall(f"{key} {value}" if type(value) is str else str(key)))
    candidates: dict[str, str] = {}
    for rel, code in sorted(graph.code.items()):
        decorated = {name for _start, _line, name in code.get("decorated", ())}
        for name, d in code.get("defs", {}).items():
            if (d[2] == "f" and "." not in name and name.startswith("_") and not name.startswith("__")
                    and len(name) > 2 and (name not in decorated or "triton" in d[3]) and "registered" not in d[3]
                    and name not in config and name.strip("_") != "main"):
                candidates[f"{rel}::{name}"] = name
    dead = set(candidates)
    while True:  # a helper only dead helpers, tests or benchmarks name is dead too
        keep = {node for node in dead
                if any(f"{rel}::{scope}" not in dead and not _exercises_options(rel)
                       for rel, scope in scopes.get(candidates[node], ()))}
        if not keep:
            break
        dead -= keep
    out = {}
    for node in sorted(dead):
        name = candidates[node]
        tests = sorted({rel for rel, _scope in scopes.get(name, ()) if _exercises_options(rel)})
        out[node] = (f"named only by tests and benchmarks ({', '.join(tests[:2])}{', ...' if len(tests) > 2 else ''}): "
                     f"`{name}`, a private function of the library that no library code calls (a reference "
                     "implementation or test helper)" if tests else
                     f"defined but never referenced in the repository: `{name}` (a private function "
                     "of the library that no code, `__all__`, re-export or config names)")
    return out


def _lazy_modules(graph: Graph, rels: list[str]) -> set[str]:
    """Module nodes the library imports only inside functions (`from .triton_flash_attn import
    flash_attn_forward` in the CUDA path's `forward`), never from module code: the library itself
    leaves them out until such a function runs, so their module code runs with it, not on import."""
    eager: set[str] = set()
    lazy: set[str] = set()
    for rel in rels:
        for scope, mods in graph.code.get(rel, {}).get("imports", {}).items():
            for mod, *_ in mods:
                (eager if not scope or scope == MAIN else lazy).update(graph.import_targets(rel, mod))
    return lazy - eager


def gated_only_names(graph: Graph, rels: list[str]) -> set[str]:
    """Method names the library itself calls, every time behind a switch its default leaves off or
    an evaluation test (`if self.affine_param: self.update_affine(x)`, affine_param defaulting to
    False): the class decides when they run, so they are its internals, not its surface. A name
    with any call outside such a branch, anywhere in the library, keeps its methods public (calls
    by name cannot say which class they mean). api_methods keeps the methods a framework calls."""
    gated: set[str] = set()
    open_: set[str] = set()
    for rel in rels:
        if developer_tool(rel):
            continue
        code = graph.code.get(rel, {})
        cache: dict[int, bool] = {}
        for scope, refs in code.get("refs", {}).items():
            if scope == MAIN:
                continue
            for ref, region in refs:
                if not ref.startswith(("a:", "s:")):
                    continue
                name = ref[2:]
                if region < 0:
                    open_.add(name)
                    continue
                if region not in cache:
                    cache[region] = region_gate(code, region, rel, graph.defaults) is not None
                (gated if cache[region] else open_).add(name)
    return gated - open_


_OPTIMIZER_PROTOCOL = frozenset({"step", "zero_grad"})


def _called_by_framework(graph: Graph, cls_node: str, meth: str) -> bool:
    """A method the framework or the user's training loop calls without the library naming it: a hook
    (`forward`, `backward`, `training_step`: codefacts' HOOK_NAME) or an optimizer's `step`."""
    rel, _ = split_node(cls_node)
    short = meth.rsplit(".", 1)[-1]
    d = graph.code.get(rel, {}).get("defs", {}).get(meth)
    return bool(d and "hook" in d[3]) or (short in _OPTIMIZER_PROTOCOL and graph.optimizer_class(cls_node))


def api_methods(graph: Graph, roots: list[str], internal: set[str] = frozenset()) -> list[str]:
    """The public methods of a library's root classes: what a user calls (`predictor.propagate()`),
    except those the library calls only behind a switch (`internal`, `gated_only_names`): they run
    as their calls say. A method of an alternative is that alternative's feature."""
    out = []
    for node in roots:
        d = graph.def_of(node)
        if d is None or d[2] != "c":
            continue
        rel, scope = split_node(node)
        for meth in graph.class_methods.get((rel, scope), ()):
            short = meth.rsplit(".", 1)[-1]
            if not short.startswith("_") and (short not in internal or _called_by_framework(graph, node, meth)):
                m = f"{rel}::{meth}"
                out.append(m)
                if node in graph.alternatives:
                    graph.alternatives.setdefault(m, graph.alternatives[node])
    return out


FAMILY_MIN = 3  # a base class with this many subclasses in the project is a family a user picks one of
# What every model is built from, not a choice: subclasses of these are parts, not alternatives.
CAMEL_WORD = re.compile(r"[A-Z][a-z0-9]+|[A-Z]+(?![a-z])")
BUILDING_BLOCK = re.compile(r"^(torch\.nn\.|torch\.autograd\.|nn\.|typing\.|abc\.|enum\.|dataclasses\.|builtins\.|"
                            r"object$|Exception$|[A-Za-z]*Error$|torch\.utils\.data\.|collections\.)")


def dispatched(graph: Graph, rels: list[str]) -> set[str]:
    """The registered functions the library picks itself: the only one a registering decorator files
    under its key (`@register_op("kl_loss_and_grad", ...)`, codefacts `keyed`; another accelerator's
    folder aside, never the default there), where library code names that key outside the
    decorators (`dispatch("kl_loss_and_grad", ...)`): a lookup by name that can find nothing else.
    Several under one key are alternatives a dispatcher chooses among, as before."""
    under: dict[str, list[str]] = {}
    for rel in rels:
        if accelerator_of(rel) is None:
            for key, name in graph.code.get(rel, {}).get("keyed", ()):
                under.setdefault(key, []).append(f"{rel}::{name}")
    files = {key: {n.rpartition("::")[0] for n in nodes} for key, nodes in under.items()}
    named: set[str] = set()
    for rel in rels:
        for scope, refs in graph.code.get(rel, {}).get("refs", {}).items():
            for ref, _region in refs:
                key = ref[2:]
                if ref[:2] == "s:" and key in under and (scope or rel not in files[key]):
                    named.add(key)  # (a decorator's own key sits in its file's module scope)
    return {nodes[0] for key, nodes in under.items() if len(nodes) == 1 and key in named}


def alternatives(graph: Graph, rels: list[str], roots: list[str]) -> dict[str, Gate]:
    """A library's alternatives, of which a user picks one: the subclasses of a project base class
    that has at least FAMILY_MIN of them (tuners, losses, strategies, model variants), and what a
    decorator registers for lookup by name (`@register_model`). Each is an opt-in feature named for
    itself; the shared code (the base, the utilities every alternative uses) stays the default.
    Classes nothing in the library constructs whose names end in the same word (`*Loss`) are one
    family too."""
    family: dict[str, list[str]] = {}
    out: dict[str, Gate] = {}
    picked = dispatched(graph, rels)
    for rel in sorted(rels):
        for name, d in graph.code.get(rel, {}).get("defs", {}).items():
            node = f"{rel}::{name}"
            if d[2] == "c":
                for base in d[4]:
                    if not base.startswith(("q:", "l:")):
                        continue
                    targets = graph.resolve(rel, base)
                    for b in targets:
                        bd = graph.def_of(b)
                        if bd is not None and bd[2] == "c" and b != node:
                            family.setdefault(b, []).append(node)
                    if not targets and base.startswith("q:") and not BUILDING_BLOCK.match(base[2:]):
                        family.setdefault(base, []).append(node)  # optimizers, schedulers, callbacks of a framework
            if "registered" in d[3] and "." not in name and node not in picked:
                out[node] = Gate(name, f"only when the user picks `{name}` by name (registered by a decorator)")
    # Classes nothing in the library constructs, named as kinds of one thing (`*Loss`, `*Evaluator`,
    # `*Optimizer`): the user constructs the one they want.
    for node in roots:
        d = graph.def_of(node)
        if d is not None and d[2] == "c":
            words = CAMEL_WORD.findall(node.rpartition("::")[2].rsplit(".", 1)[-1])
            if len(words) > 1:
                family.setdefault(f"*{words[-1]}", []).append(node)
    used = used_by_code(graph, rels)
    for base, members in family.items():
        n = len(set(members))
        if n < FAMILY_MIN:
            continue
        bname = base.rpartition("::")[2] if "::" in base else base[2:] if base[:2] == "q:" else base
        kind = f"classes named `{bname}`" if bname.startswith("*") else f"subclasses of `{bname}`"
        for m in members:
            if m in used:
                continue  # the library's own code builds it: a part of what runs, not the user's pick
            cname = m.rpartition("::")[2]
            out.setdefault(m, Gate(cname, f"only when the user picks `{cname}` (one of {n} {kind})"))
    return out


# Words of a library's functions that a user calls beside the training step, never inside it: on a
# trained model or its outputs (search, retrieval, clustering, visualisation, exporting the result:
# the evaluation path) or once before training (mining a dataset, initialising weights: opt-in).
# Only a function nothing in the library calls is judged by its name; what it calls keeps the label
# of any other path to it. Not `save` (a checkpoint is saved inside the training job), `knn`/
# `neighbors` (a graph network builds its kNN graph in `forward`) nor `convert` (converting a model
# for training: `convert_to_random_ltd`).
INFERENCE_WORDS = frozenset({"search", "retrieval", "retrieve", "rerank", "reranking", "clustering", "community",
                             "heatmap", "visualize", "visualise", "visualization", "visualisation", "plot",
                             "interpretability", "export"})
PREPARATION_WORDS = frozenset({"mine", "mining"})
INIT_WORDS, WEIGHT_WORDS = frozenset({"init", "initialize", "initialise"}), frozenset({"weights", "params", "parameters"})


def library_utilities(graph: Graph, roots: list[str]) -> dict[str, Gate]:
    """A library's top-level functions that nothing in it calls and whose name says they run beside
    training (`semantic_search`, `community_detection`, `mine_hard_negatives`,
    `initialize_lora_eva_weights`), or that rewrite a model's weights through `.data` in a loop over
    its modules (`reduce_intruder_dimension`: weight surgery on a trained model): the evaluation
    path, or an opt-in feature named for the function."""
    out: dict[str, Gate] = {}
    for node in roots:
        d = graph.def_of(node)
        name = node.rpartition("::")[2]
        if d is None or d[2] != "f" or "." in name:
            continue
        words = set(name.lower().strip("_").split("_"))
        if words & INFERENCE_WORDS:
            out[node] = Gate("evaluation", f"`{name}` is a utility a user calls on a trained model",
                             "evaluation")
        elif words & PREPARATION_WORDS:
            out[node] = Gate(name, f"only when the user calls `{name}` (prepares a dataset before training)")
        elif words & INIT_WORDS and words & WEIGHT_WORDS:
            out[node] = Gate(name, f"only when the user calls `{name}` (a one-time initialisation before training)")
        elif "surgery" in d[3]:
            out[node] = Gate(name, f"only when the user calls `{name}` (rewrites a model's weights outside the step)")
    return out


def core_modules(graph: Graph, rels: list[str]) -> set[str]:
    """Files another module of the library imports in its own module code, outside any condition:
    importing the package imports them, so what they import unconditionally is no optional
    integration (`from flash_attn import ...` at the top of the model a trainer imports)."""
    out: set[str] = set()
    for rel in rels:
        for mod, region in graph.code.get(rel, {}).get("imports", {}).get("", ()):
            if region == -1:
                out.update(t[:-2] for t in graph.import_targets(rel, mod) if t[:-2] != rel)
    return out


def used_by_code(graph: Graph, rels: list[str]) -> set[str]:
    """Classes the library's own functions construct outside any condition
    (`self.attn = CausalSelfAttention(...)` in a decoder layer), and what they install into an imported
    module (`modeling_llama.LlamaMLP = LigerSwiGLUMLP`): the library picks them, so they run with
    their caller, never as an alternative of the user's. Naming a class as a value does not count
    (`OptimInfo(opt_class=AdamP)` registers an alternative), nor does module-level code or the
    class's own methods (a class constructing itself picks nothing)."""
    out: set[str] = set()
    for rel in rels:
        code = graph.code.get(rel, {})
        # what a function installs into an imported module (`modeling_llama.LlamaMLP = LigerSwiGLUMLP`)
        # is the library's pick for that module's users too, whatever condition the patch sits under:
        # the condition gates it as the reference's region says
        for scope, refs in [*code.get("calls", {}).items(), *code.get("installs", {}).items()]:
            for ref in refs:
                for target in graph.resolve(rel, ref):
                    t_rel, t_scope = split_node(target)
                    if t_scope and not (t_rel == rel and (scope == t_scope or scope.startswith(t_scope + "."))):
                        out.add(target)
    return out


def subcommands(graph: Graph, rel: str, func: str) -> list[tuple[str, str]]:
    """(name, node) of each command a console script's function dispatches from a table of project
    functions it hands over or looks up (`CLI({"pretrain": pretrain_fn, "generate": generate_fn})`,
    `COMMANDS[args.command]()`): the user runs one subcommand at a time, so each is a program."""
    code = graph.code.get(rel, {})
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    tables = [ref[2:] for ref, _region in code.get("refs", {}).get(func, ()) if ref.startswith("l:")]
    tables += [t for t, *_rest in code.get("lookups", {}).get(func, ())]
    for table in tables:
        owner, entries = graph.table(rel, table) if not table.startswith("module:") else (rel, {})
        if table in seen or not entries:
            continue
        seen.add(table)
        for name, refs in sorted(entries.items()):
            out += [(name, target) for ref in refs for target in graph.resolve(owner, ref) if split_node(target)[1]]
    return out


def trains_from(graph: Graph, rel: str, limit: int = 20000, start: str | None = None) -> str | None:
    """The first function that trains (calls backward, steps an optimizer, runs a Trainer) that a
    file's own code (or `start`) reaches by unconditional calls; None when none does."""
    starts = [start] if start else [f"{rel}::", f"{rel}::{MAIN}"]
    seen = set(starts)
    todo = list(starts)
    names: set[str] = set()
    classes: set[str] = set()
    while todo and len(seen) < limit:
        node = todo.pop(0)
        d = graph.def_of(node)
        if d is not None and "trains" in d[3]:
            return node
        if d is not None and d[2] == "c":
            classes.add(node)
            r, scope = split_node(node)
            for meth in graph.class_methods.get((r, scope), ()):
                if meth.rsplit(".", 1)[-1] in names and f"{r}::{meth}" not in seen:
                    seen.add(f"{r}::{meth}")
                    todo.append(f"{r}::{meth}")
        for target, label, _gate, _fb, _cu in graph.edges(node):
            if label != STEP or type(target) is tuple:  # a subclass's override: no evidence of its own
                continue
            if by_name(target):
                name = target[2:]
                if name in names or not TRAINING_METHOD.search(name):
                    continue  # by name, only a training method counts as evidence (`.step` may be a beam search)
                names.add(name)
                for r, meth in graph.methods.get(name, ()):
                    m = f"{r}::{meth}"
                    if f"{r}::{meth.rpartition('.')[0]}" in classes and m not in seen:
                        seen.add(m)
                        todo.append(m)
                continue
            if target not in seen and graph.target_label(target) == STEP:
                seen.add(target)
                todo.append(target)
    code = graph.code.get(rel, {})
    return f"{rel}::" if code.get("top_trains") else None


# ------------------------------------------------------------------------------------------ findings


def accelerator_of(path: str) -> str | None:
    """Code for another accelerator: a folder (or a file stem) named for it."""
    parts = path.split("/")
    for p in parts[:-1]:
        # A folder named for it, or with it as one word of its name (`_ascend`, `triton_ascend`,
        # `flash_attn_triton_amd`): a backend folder per accelerator.
        for word in [p.lower()] + re.split(r"[_\-.]+", p.lower()):
            name = OTHER_ACCELERATORS.get(word)
            if name:
                return name
    stem = parts[-1].rsplit(".", 1)[0].lower()
    for key, name in OTHER_ACCELERATORS.items():
        if len(key) > 2 and (stem.endswith("_" + key) or stem.startswith(key + "_")):
            return name
    return None


# Folders of plugins a user enables by name (`plugins:` in a YAML config, `precision="bf16-mixed"`):
# each entry under them is a plugin, loaded only when asked for; the folder's own modules (the
# plugin manager, the base class) stay on the default path.
PLUGIN_DIR = re.compile(r"(?i)^(integrations|plugins)$")


def plugin_of(path: str) -> str | None:
    """The plugin a file belongs to: the first folder or module under a `plugins/` or
    `integrations/` folder (`integrations/liger/...` -> `liger`), when it is not the folder's own code."""
    parts = path.split("/")
    for i, p in enumerate(parts[:-2]):
        if PLUGIN_DIR.match(p):
            return parts[i + 1]
    return None


# `contrib/`: contributed code kept beside a library's maintained core (`torch_geometric.contrib`, the
# old `tf.contrib`): a user imports a module of it by name; the library's own code does not run it.
CONTRIB_DIR = re.compile(r"(?i)^contrib$")


def contrib_of(path: str) -> tuple[str, str] | None:
    """(the `contrib/` folder, the contributed module as a dotted name) of a file under one
    (`torch_geometric/contrib/nn/models/rbcd_attack.py` -> `torch_geometric/contrib`,
    `torch_geometric.contrib.nn.models.rbcd_attack`); None outside one and for the folder's own `__init__.py`."""
    parts = path.split("/")
    for i, p in enumerate(parts[:-1]):
        if CONTRIB_DIR.match(p):
            if not [x for x in parts[i + 1:] if x != "__init__.py"]:
                return None
            return "/".join(parts[:i + 1]), ".".join(x for x in parts if x != "__init__.py").removesuffix(".py")
    return None


def contrib_dependencies(graph: "Graph") -> set[str]:
    """The `contrib/` folders the library cannot import without (`_imported_by_root`: module code
    outside the folder imports one of its modules): those are part of the core, not contributions."""
    folders = {c[0] for rel in graph.code if (c := contrib_of(rel)) is not None}
    return {d for d in folders if _imported_by_root(graph, d, list(graph.code))}


BUILD_FILES = ("pyproject.toml", "setup.py")


def in_package(rel: str, rels) -> bool:
    """Whether a file sits in a Python package folder (an `__init__.py` beside it): a `setup.py`
    there is a module the package imports (`trainer/setup.py`), not a build script."""
    folder = rel.rpartition("/")[0]
    return bool(folder) and f"{folder}/__init__.py" in rels


def nested_distributions(rels) -> dict[str, str]:
    """Folders below the root with a build file of their own (`liger_cute_kernels/pyproject.toml`)
    that are no Python package themselves (no `__init__.py`: `trainer/setup.py` in a package is a
    module): each is a separate distribution, built and installed on its own; the root's install
    leaves it out. Folder -> its build file; the innermost wins for a file."""
    rels = set(rels)
    out = {}
    for rel in sorted(rels):
        folder, _, name = rel.rpartition("/")
        if folder and name in BUILD_FILES and not in_package(rel, rels):
            out.setdefault(folder, rel)
    return out


def subproject_of(path: str, subprojects: dict[str, str]) -> str | None:
    """The innermost separate distribution (nested_distributions) a file belongs to."""
    folder = path
    while "/" in folder:
        folder = folder.rpartition("/")[0]
        if folder in subprojects:
            return folder
    return None


def _imported_by_root(graph: "Graph", folder: str, rels) -> bool:
    """Whether code outside a separate distribution imports one of its modules in module code, so
    the root package cannot even import without it: then it is a dependency, not an option."""
    prefix = folder + "/"
    own = {name for name, files in graph.modules.items() if any(f.startswith(prefix) for f in files)}
    if not own:
        return False
    for rel in rels:
        if rel.startswith(prefix):
            continue
        for mod, region in graph.code.get(rel, {}).get("imports", {}).get("", ()):
            if region < 0 and mod in own:
                return True
    return False


HOST_DIR = re.compile(r"(?i)^(data|datasets?|dataloaders?|loaders?|transforms?|augmentations?|augment|preprocessing|preprocess)$")
HOST_FILE = re.compile(r"(?i)^(data|dataset|datasets|dataloader|transforms?|augment\w*|collat\w*|preprocess\w*|tokeni[sz]\w*)\.py$")


def _placed(path: str, folder: re.Pattern, file: re.Pattern) -> bool:
    """A folder on the path matches `folder`, or the file's name matches `file`."""
    parts = path.split("/")
    return any(folder.match(p) for p in parts[:-1]) or bool(file.match(parts[-1]))


def host_path(path: str) -> bool:
    """The data pipeline by its place: `data/`, `datasets/`, `transforms/`, `preprocess*.py`, ..."""
    return _placed(path, HOST_DIR, HOST_FILE)


def evaluation_path(path: str) -> bool:
    return _placed(path, EVAL_PATH, EVAL_FILE) or developer_tool(path)


@functools.lru_cache(maxsize=4096)
def developer_tool(path: str) -> bool:
    """A profiler or benchmark module (DEV_TOOL_DIR, DEV_TOOL_FILE): the evaluation path, and what
    only it calls too; never a detected training entry (reach.py), though `--entry` still names one."""
    return _placed(path, DEV_TOOL_DIR, DEV_TOOL_FILE)


def neuron_file(code: dict, facts: dict) -> bool:
    """The file targets Neuron or XLA: its module code imports a Neuron/XLA module or names the
    device (outside a setting's `if`: codefacts.note_neuron). Without code facts (a file too
    complex to analyse), any import of one says so."""
    if code:
        return bool(code.get("neuron"))
    from .sources.codefacts import NEURON_MODULES

    return any(m == n or m.startswith(n + ".") for m in facts.get("imports", ()) for n in NEURON_MODULES)


def neuron_scope(code: dict, scope: str) -> bool:
    """The finding's function (or one around it) imports a Neuron/XLA module itself or names the
    device: that function is the XLA path (`def get_tpu_device(): import torch_xla ...`)."""
    scopes = code.get("neuron_scopes") or ()
    return bool(scope) and any(scope == s or scope.startswith(s + ".") for s in scopes)


def decorated_at(code: dict, line: int) -> str | None:
    """The top-level function or class whose decorators span `line`."""
    for start, def_line, name in code.get("decorated", ()):
        if start <= line < def_line:
            return name
    return None


def running_scope(f: Finding, code: dict) -> str:
    """The scope whose running makes a finding a concern: a kernel's decorator runs at its definition,
    its body when launched; `@custom_op(device_types="cuda")` and `@autocast("cuda", enabled=False)`
    act where the function they decorate runs, not where it is defined."""
    scope = f.scope
    kernel = f.details.get("kernel")
    if kernel and f"{scope}.{kernel}".lstrip(".") in code.get("defs", {}):
        return f"{scope}.{kernel}".lstrip(".")
    if not scope and f.category in ("custom-cuda", "precision"):
        return decorated_at(code, f.line) or scope
    return scope


def node_of(code: dict, rel: str, scope: str) -> str | None:
    """The innermost definition of a finding's scope that the facts know, as a node."""
    defs = code.get("defs", {})
    parts = scope.split(".") if scope else []
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        if name in defs:
            return f"{rel}::{name}"
    return f"{rel}::" if not scope else None


def markers_of(code: dict, scope: str) -> set[str]:
    """Markers of every definition around a scope (a method of a Dataset is host code)."""
    defs = code.get("defs", {})
    parts = scope.split(".") if scope else []
    out: set[str] = set()
    for i in range(1, len(parts) + 1):
        d = defs.get(".".join(parts[:i]))
        if d is not None:
            out.update(m for m in d[3] if m in ("eval", "host"))
    return out


def analyse(infos, reach, findings: list[Finding], housekeeping: set[str] = frozenset(), target: str = "") -> Context:
    """Set `context` (and `gate`, `context_reason`) on every finding reach put on the path; findings
    reach set aside are `off-path`."""
    from .reach import UNREACHED as UNREACHED_REASON, module_names

    infos = sorted(infos, key=lambda i: i.rel)  # deterministic whatever the scan order
    info_by = {i.rel: i for i in infos}
    # the graph entry detection built (same files, same module names), else one built here
    graph = reach.graph if isinstance(getattr(reach, "graph", None), Graph) else None
    defaults = graph.defaults if graph is not None else Defaults(infos)
    ctx = Context()
    # A training path that starts in Neuron code (every entry already targets Neuron or XLA) is ported.
    ctx.neuron_entries = bool(reach.entries) and all(
        neuron_file((info_by[e].facts.get("code") or {}), info_by[e].facts) for e in reach.entries if e in info_by)
    graph = ctx.graph = graph or Graph(infos, module_names(sorted(info_by)), defaults)
    if TORCH_RANGES.get(target) != defaults.torch_range:  # entry detection ran without the target
        defaults.torch_range = TORCH_RANGES.get(target)
        graph.edges_changed()
    entries = [e for e in reach.entries if e in graph.code]
    launches = [list(launch.get("args") or ()) for i in infos for launch in i.facts.get("launches", ())
                if any(t in entries for t in _launch_targets_of(launch, i.rel, graph.modules, info_by))]
    if launches:
        defaults.launch_options(launches)
        graph.edges_changed()  # their labels were judged on the defaults before the launch options
    if reach.mode == "entries" and entries:
        graph.entry_files = frozenset(entries)
        symbols, picked = named_symbols(graph, reach)
        # a file named with a symbol is imported, not run: its `__main__` block stays a demo
        named = getattr(reach, "symbols", {})
        by_symbol = {rel for files, _ in named.values() for rel in files}
        functions = [f"{rel}::{scope}" for rel, scope in getattr(reach, "entry_functions", ())]
        nodes = [f"{e}::" for e in entries] + [f"{e}::{MAIN}" for e in entries if e not in by_symbol] + functions + symbols
        if named:  # a library used through the calls its user names: its other alternatives stay the user's pick
            # judged over the library as library mode sees it: a module the entry's imports do not
            # reach (a lazily imported `monkey_patch`) still names, constructs and installs its classes
            on = [r for r in graph.code if reach.reasons.get(r, "") in ("", UNREACHED_REASON)]
            graph.alternatives = {n: g for n, g in alternatives(graph, on, library_roots(graph, on)).items()
                                  if n not in picked and n not in symbols}
        ctx.labels, ctx.gates, ctx.parents = propagate(graph, nodes)
        ctx.function_level = True
        ctx.starts = nodes
    elif reach.mode == "library":
        # No entry: the library's surface is every module and every function or class nothing in it
        # calls; labels then still say what only a switch, an evaluation or a fallback reaches.
        on = [r for r in graph.code if not reach.reasons.get(r)]
        roots = library_roots(graph, on)
        graph.alternatives = alternatives(graph, on, roots)
        for node, gate in library_utilities(graph, roots).items():
            graph.alternatives.setdefault(node, gate)
        ctx.starts = roots + api_methods(graph, roots, gated_only_names(graph, on))
        ctx.labels, ctx.gates, ctx.parents = propagate(graph, ctx.starts)
        ctx.library = True
        ctx.core = core_modules(graph, on)
        ctx.demos = dict(getattr(reach, "demos", None) or {})
        ctx.unreferenced = unreferenced_helpers(graph, infos)
        ctx.contrib_core = contrib_dependencies(graph)
    if ctx.labels:
        solid = propagate(graph, ctx.starts, skip_fallback="any")[0]
        ctx.fallback_only = {n for n, lab in ctx.labels.items() if lab == STEP and solid.get(n, UNREACHED) > STEP}
        # of those, reached past a capability check alone: Trainium takes the PyTorch path by itself
        auto = propagate(graph, ctx.starts, skip_fallback="switch")[0]
        ctx.auto_fallback = {n for n in ctx.fallback_only if auto.get(n, UNREACHED) == STEP}
        # reached in the step only through branches that run on a CUDA device alone (`wrap_with_cuda_graph`
        # returns the eager function unless the device is CUDA): Trainium never runs them
        off_cuda = propagate(graph, ctx.starts, skip_fallback="cuda")[0]
        ctx.cuda_only = {n for n, lab in ctx.labels.items() if lab == STEP and off_cuda.get(n, UNREACHED) > STEP}
        ctx.setup_only = setup_only(graph, ctx)
        ctx.compiled = any(lab == STEP and _calls_compile(graph, node) for node, lab in ctx.labels.items())
    ctx.subprojects = {d: b for d, b in nested_distributions(info_by).items() if not _imported_by_root(graph, d, info_by)}
    ext_labels = extension_labels(graph, reach, ctx) if ctx.labels else {}
    for f in findings:
        if f.on_path is False:
            # An evaluation or export tool nothing imports is still the evaluation path (not tests or docs).
            evaluation = f.details.get("off_path_reason") == UNREACHED_REASON and evaluation_path(f.path)
            f.context = "evaluation" if evaluation else "off-path"
            continue
        ext = reach.extension_of.get(f.path) or reach.build_site(f.path, f.line, f.category == "custom-cuda")
        if ext in ext_labels and plugin_of(f.path) is None and subproject_of(f.path, ctx.subprojects) is None:
            # a plugin's or a separate distribution's own extension is theirs
            label_native(f, ext, ext_labels[ext], ctx)
            continue
        label_finding(f, info_by.get(f.path), graph, defaults, ctx)
        if f.path in ctx.core and f.category == "gpu-library" and f.context == "step" and not f.scope and not f.fallback:
            f.details["core_import"] = True  # effort.py: a library the package cannot import without
    blocked: list = []  # CUDA-only branches a finding that is not housekeeping keeps a concern
    cuda_only(findings, info_by, housekeeping, ctx, blocked)
    cuda_autocast_reads(findings, info_by)
    first_party_headers(findings, set(info_by))
    build_scripts(findings, info_by)
    chosen_cuda_builds(findings, info_by)
    other_accelerator_builds(findings, info_by, reach, defaults)
    optional_modules(findings, info_by, graph.modules)
    optional_dependencies(findings, {n for e in reach.extensions if e.name for n in (e.name, e.name.rsplit('.', 1)[-1])},
                          set(info_by))
    runs_only_on(findings)
    if target != "xla":  # torch.manual_seed seeds PrivateUse1 (`neuron`), not an XLA device
        seeded_by_torch(findings, info_by)
    on_host_values(findings)
    dtype_keys(findings)
    chosen_by_option(findings, defaults)
    autocast_off(findings)  # after chosen_by_option: an option's gate stays the one shown
    unused_defaults(findings, defaults)
    from .default_choice import default_choices  # it reads this module's defaults and regions

    default_choices(findings, info_by, defaults)
    cuda_only_after_gates(blocked, housekeeping)
    return ctx


# Extras, dependency groups and requirements files for developing the project, not for training it.
DEV_EXTRA = re.compile(r"(?i)^(dev|devel|develop|development|test|tests|testing|docs?|documentation|lint|linting|"
                       r"quality|style|format|typing|types|mypy|ci|check|checks|bench|benchmarks?|pre-?commit|"
                       r"notebooks?)$")
_WORDS = re.compile(r"[^A-Za-z0-9]+")


def dev_requirements_file(path: str) -> bool:
    """`requirements-dev.txt`, `requirements_test.txt`, `requirements/docs.txt`, `dev-requirements.in`."""
    from .sources.deps import dependency_kind

    if dependency_kind(path) != "requirements":
        return False
    parts = path.split("/")
    words = _WORDS.split(parts[-1].rsplit(".", 1)[0]) + ([parts[-2]] if len(parts) > 1 else [])
    return any(DEV_EXTRA.match(w) for w in words if w)


# Names a requirements file beside `requirements.txt` may carry that still mean the install for training.
_TRAINING_SET = re.compile(r"(?i)^(train|training|base|core|runtime|common|main|prod|production|install|full|"
                           r"all|gpu|cuda)$")
_NAMED_SET = re.compile(r"(?i)^requirements[-_.](.+)\.(txt|in)$")


def requirements_extra(path: str, paths: set[str]) -> str:
    """The extra a requirements file is named for: `requirements-sd.txt` (or
    `requirements/requirements-sd.txt`) beside the project's plain `requirements.txt` is the set a
    user installs for `sd`, as setup.py's `extras_require={"sd": fetch("requirements-sd.txt")}` does;
    "" for the plain file, a file with no plain one beside it, and a name that is the training
    install itself (`requirements-train.txt`, `requirements-gpu.txt`)."""
    folder, _, name = path.rpartition("/")
    m = _NAMED_SET.match(name)
    if not m or _TRAINING_SET.match(m.group(1)):
        return ""
    plain = {posixpath.join(folder, "requirements.txt"), posixpath.join(folder, "requirements.in")}
    if posixpath.basename(folder).lower() in ("requirements", "reqs"):
        plain.add(posixpath.join(posixpath.dirname(folder), "requirements.txt"))
    return m.group(1) if plain & paths else ""


def optional_dependencies(findings: list[Finding], built: set[str] = frozenset(), paths: set[str] = frozenset()) -> None:
    """What a Trainium install does not have, so the fallback runs. A GPU library imported under
    `try/except ImportError` (a handler that neither raises nor exits) or `if is_x_available():`, and
    used behind that guard, runs only when the user installs it: an opt-in feature named for the
    library (`only when flash_attn is installed`). A GPU package listed only in an optional extra (or
    a requirements file named for one: requirements_extra) is the opt-in feature `extra:<name>`; in a
    development extra (dev, test, docs, lint, ...) or a requirements-dev file it is not training at
    all, whatever imports it (the import is costed). An unconditional import of the same library on
    the training path keeps both must-port: the training job needs it (for a package only an extra
    installs, only an import in module code says so: a function that imports it when called is the
    project's own way of leaving it out of the default install, and its uses are costed where they
    are); so does being an extension
    this repository builds (`built`: flash-attn's own `flash_attn_2_cuda`). The guarded import
    statement itself (`guarded_import`) is opt-in even then: skipped when the library is absent, it
    is the guard the remedies ask for, and the library's cost sits with its unguarded uses."""
    needed = [f for f in findings if f.context == "step" and f.category != "dependency" and not f.fallback
              and not f.details.get("guarded_import")]
    # PyTorch itself is never optional (`try: from torch.nn.attention.flex_attention import ...`): the job imports it
    required = {_module_root(f.symbol) for f in needed} | {"torch"}
    # What the job cannot even import without: module code, not a function that imports it when called.
    loaded = {_module_root(f.symbol) for f in needed if not f.scope}
    for f in findings:
        if f.context != "step":
            continue
        lib = f.details.get("optional_library")
        extra = f.details.get("extra")
        guarded_import = f.details.get("guarded_import")
        if lib and (guarded_import or (f.fallback and lib not in required)) and lib not in built:
            f.context, f.gate = "opt-in", f"only when {lib} is installed (imported under a guard with a fallback)"
            # a library named like a place feature (cuda-python's `cuda`) keeps a name of its own
            f.details["feature"] = lib if lib not in PLACE_FEATURES else f"lib:{lib}"
            f.details["context_reason"] = f"`{lib}` is optional: without it the fallback runs"
        elif f.category == "dependency":
            named = "" if extra else requirements_extra(f.path, paths)
            extra = extra or named
            if (extra and DEV_EXTRA.match(extra)) or (not extra and dev_requirements_file(f.path)):
                # what a developer installs: a training job that imports it is costed at the import
                f.context = "off-path"
                f.details["context_reason"] = (f"listed only in the development extra [{extra}]" if extra
                                               else "listed only in a development requirements file") \
                    + ": not installed for training"
            elif extra and _module_root(f.symbol) not in loaded:
                f.context = "opt-in"
                f.gate = (f"only when installed from {f.path}" if named
                          else f"only when installed with the [{extra}] extra")
                f.details["feature"] = f"extra:{extra}"
                f.details["context_reason"] = (f"listed only in {f.path}, the requirements of `{extra}`" if named
                                               else f"listed only in the optional extra [{extra}]")


def optional_modules(findings: list[Finding], info_by: dict, modules: dict[str, list[str]]) -> None:
    """A project module every import of which sits behind an import guard (sources/optional_imports.py:
    `if is_bnb_available(): from .bnb import Linear8bitLt`) is never imported without the library:
    its own top-level GPU-library and Triton imports are guarded imports too (optional_dependencies)."""
    guarded: set[str] = set()
    plain: set[str] = set()
    for info in info_by.values():
        only = set((info.facts.get("code") or {}).get("guarded_imports", ()))
        guarded |= only
        plain.update(m for m in info.facts.get("imports", ()) if m not in only)
    files = {rel for m in guarded - plain for rel in modules.get(m, ())}
    for f in findings:
        if (f.path in files and f.context == "step" and not f.scope and f.category in ("gpu-library", "triton")
                and f.snippet.startswith(("import ", "from "))):
            f.details["optional_library"] = _module_root(f.symbol)
            f.details["guarded_import"] = True


def _module_root(symbol: str) -> str:
    """The import name a symbol or a package name starts with: `flash-attn` and `flash_attn.ops` give flash_attn."""
    return symbol.lstrip(".").split(".", 1)[0].replace("-", "_").lower()


def cuda_only(findings: list[Finding], info_by: dict, housekeeping: set[str], ctx: Context | None = None,
              blocked: list | None = None) -> None:
    """Device housekeeping (synchronize, memory statistics, TF32 and cuDNN flags, CUDA graphs) in a
    branch that runs only on a CUDA device (`if x.is_cuda:`, `if torch.cuda.is_available():`, the rest
    of a function after `if device.type != "cuda": return`), or in a function the step reaches only
    through such branches, is skipped on Trainium and nothing is lost: it is listed as CUDA-only,
    never costed. A branch that also places data or picks the device (`device = "cuda"`) stays a
    concern, and so does its test, unless nothing after the branch needs it (codefacts
    `cuda_optional`: a cache warm-up, `f = torch.compile(f)`, a value set before refined): then its
    test and its body are skipped on Trainium with nothing lost, whatever their rules. When the test
    reads a device, tensor or process group that already exists (codefacts `device_tests`: `if
    self._device.type == "cuda":`, `use_ids = dist.get_backend() == "nccl"`), not what is available,
    its device and distributed findings only re-express that device for CUDA: the device was chosen
    elsewhere, on Trainium the branch is not taken, and they are opt-in too (kernels, GPU libraries
    and precision keep the rules above)."""
    groups: dict[tuple[str, object], list[Finding]] = {}
    for f in findings:
        code = (info_by[f.path].facts.get("code") or {}) if f.path in info_by else {}
        if f.context not in ("step", "opt-in", "evaluation") or not code:
            continue
        r = cuda_arm(code, f.line, f.column)
        if r is None:
            r = innermost_region(code, f.line, lambda region: cuda_branch(region, f.line))
        if any(a <= f.line <= b for a, b in code.get("cuda_optional_lines", ())) and f.context == "step":
            f.context, f.gate = "opt-in", place_gate("a CUDA device (a move to CUDA the class undoes before use)")
            f.details["feature"] = "cuda"
            f.details["context_reason"] = "a CUDA move that the forward moves to the input's device anyway: skipped on Trainium"
        elif r is not None:
            groups.setdefault((f.path, r), []).append(f)
        elif ctx is not None and ctx.cuda_only and (node := node_of(code, f.path, running_scope(f, code))) in ctx.cuda_only:
            groups.setdefault((f.path, node), []).append(f)
    for (path, where), fs in sorted(groups.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        code = info_by[path].facts.get("code") or {}
        optional = isinstance(where, int) and _optional_cuda_branch(code, where)
        # the CUDA kernel path of a device check with a PyTorch path beside it (`if x.is_cuda and
        # self.use_cuda_kernel: ... else: torch_path(...)`), or what only such paths reach: Trainium runs
        # the PyTorch path and never this one, its kernels and GPU libraries included (a device check is
        # False there whatever is installed, unlike `if HAS_TRITON:`, whose kernels stay a fallback to
        # check); a device choice there (`self.device = torch.device("cuda")`) still picks the device
        beside = (_optional_cuda_branch(code, where, kernel=True) if isinstance(where, int)
                  else ctx is not None and where in ctx.auto_fallback)
        # a test of a device that already exists (`if self._device.type == "cuda":`, codefacts
        # `device_tests`): its device plumbing re-expresses that device; on Trainium nothing is chosen
        reads = isinstance(where, int) and _reads_device_region(code, where)
        plumbing = {id(f) for f in fs if reads and f.rule not in housekeeping and f.category in DEVICE_PLUMBING}
        # a finding already opt-in behind its own gate (`import vllm` under a guard) is off the default
        # path: it keeps nothing in the branch a concern
        if optional or all(f.rule in housekeeping or f.context == "opt-in" for f in fs):
            beside, plumbing = False, set()
        elif beside:
            plumbing = {id(f) for f in fs if f.fallback and id(f) in plumbing}  # beside moves the others itself
            fs = [f for f in fs if not f.fallback or f.category in GPU_CODE_CATEGORIES or f.rule in housekeeping
                  or id(f) in plumbing]
        elif reads:  # its plumbing and housekeeping; kernels and GPU libraries stay
            fs = [f for f in fs if id(f) in plumbing or f.rule in housekeeping]
            if not fs:
                continue
        else:
            if blocked is not None:
                blocked.append((code, where, fs))
            continue
        _mark_cuda_only(fs, code, where, optional, beside, plumbing)


def cuda_only_after_gates(blocked: list, housekeeping: set[str]) -> None:
    """The CUDA-only branches `cuda_only` left a concern for a finding that is not housekeeping,
    once the later passes have put that finding behind a gate of its own (an import of an optional
    GPU library: `optional_dependencies`): nothing the default path needs is left in the branch, so
    its housekeeping is skipped on Trainium like any other."""
    for code, where, fs in blocked:
        if any(f.context == "step" for f in fs) and all(f.rule in housekeeping or f.context == "opt-in" for f in fs):
            _mark_cuda_only(fs, code, where, False, False, set())


def _mark_cuda_only(fs: list[Finding], code: dict, where, optional: bool, beside: bool, plumbing: set[int]) -> None:
    """Make the must-port findings of a CUDA-only branch (`where`: a region, else a function node)
    opt-in behind that branch, with the reason `cuda_only` found for it."""
    if isinstance(where, int):
        gate = place_gate(f"a CUDA device (`{code['regions'][where][5]}`)")
    else:
        rel, scope = split_node(where)
        gate = place_gate(f"a CUDA device (`{scope or rel}` is reached only through CUDA-only branches)")
    probe = optional and ("cuda_probe" in _def_markers(code, fs[0].scope) or fs[0].scope in code.get("probe_via", {}))
    for f in fs:
        if f.context == "step":
            f.context, f.gate = "opt-in", gate
            f.details["feature"] = "cuda"
            f.details["context_reason"] = (
                "the rest of a CUDA probe function: off CUDA it answers False, which its callers act on"
                if probe else
                "a CUDA-only branch nothing after it needs (a warm-up, a compile, a refinement): skipped on Trainium"
                if optional else "the CUDA path of a device check with a PyTorch path beside it: skipped on Trainium"
                if beside and id(f) not in plumbing else
                "the test reads a device that already exists (chosen elsewhere) and this only re-expresses it "
                "for CUDA: on Trainium that device is a Neuron one, the branch is not taken and nothing is chosen"
                if id(f) in plumbing else "CUDA-only housekeeping behind a device check: skipped on Trainium")


# Reads of the CUDA autocast state: what a CUDA tensor is autocast to, whether CUDA autocast is on.
CUDA_AUTOCAST_READS = frozenset({"torch.get_autocast_gpu_dtype", "torch.is_autocast_cuda_enabled"})


def cuda_autocast_reads(findings: list[Finding], info_by: dict) -> None:
    """A read of the CUDA autocast state in a branch whose test reads a device or tensor that already
    exists (`if tensor.device.type == "cuda": dtype = torch.get_autocast_gpu_dtype()`, codefacts
    `device_tests`) is right for the CUDA tensors that take the branch; a Neuron tensor never takes it
    and nothing fails. The port adds the Neuron case only when the user turns on autocast on the
    Neuron device: opt-in behind that, like an autocast that switches autocast off. A read outside
    such a test, and precision that chooses (`.half()`, an autocast that turns autocast on), keep
    cuda_only's rules."""
    for f in findings:
        if f.context != "step" or f.symbol not in CUDA_AUTOCAST_READS or f.path not in info_by:
            continue
        code = info_by[f.path].facts.get("code") or {}
        r = cuda_arm(code, f.line, f.column)
        if r is None:
            r = innermost_region(code, f.line, lambda region: cuda_branch(region, f.line))
        if r is None or not _reads_device_region(code, r):
            continue
        f.context, f.gate = "opt-in", "only when autocast is turned on for the Neuron device (a read of the CUDA " \
                                      f"autocast state for CUDA tensors, `{code['regions'][r][5]}`)"
        f.details["feature"] = "neuron-autocast"
        f.details["context_reason"] = ("reads the CUDA autocast state only for a device or tensor that already "
                                       "exists and is CUDA: a Neuron tensor never takes the branch and nothing "
                                       "fails; the Neuron case is needed only when the user turns on Neuron autocast")


def cuda_arm(code: dict, line: int, column: int) -> int | None:
    """The innermost CUDA-only arm of a conditional expression (`torch.cuda.get_rng_state_all() if
    torch.cuda.is_available() else []`, codefacts `device_arms`) whose span holds (line, column): a
    region like the branch of `if torch.cuda.is_available():`, one expression wide."""
    return arm_region(code, line, column, cuda_branch)


def _def_markers(code: dict, scope: str) -> list:
    d = code.get("defs", {}).get(scope) if scope else None
    return d[3] if d is not None else []


# Finding categories that place data or address a device or process group (not kernels, GPU
# libraries, precision or host-side work): what a test of an existing device makes moot off CUDA.
DEVICE_PLUMBING = frozenset({"device", "distributed"})


def _reads_device_region(code: dict, index: int) -> bool:
    """Whether a CUDA-only region, or one around it, tests a device, tensor or process group that
    already exists (codefacts `device_tests`; older facts have none)."""
    tests = set(code.get("device_tests", ()))
    return bool(tests) and any(i in tests for i, _region in regions_out(code.get("regions", ()), index))


def _optional_cuda_branch(code: dict, index: int, kernel: bool = False) -> bool:
    """Whether a CUDA-only region, or a CUDA-only region around it, is one nothing after it needs
    (`kernel`: is the kernel branch of a device check with a PyTorch path beside it)."""
    optional = set(code.get("cuda_optional", ()))
    return any((i in optional) if not kernel else (len(region) > 6 and region[6] and cuda_branch(region))
               for i, region in regions_out(code.get("regions", ()), index))


def first_party_headers(findings: list[Finding], rels: set[str]) -> None:
    """A quoted `#include "cuda.h"` that names a file of the repository (beside the includer, or under
    one of its parent directories, as a project include path would find it) is the project's own
    header, not the CUDA toolkit's: a finding made only of such includes is no CUDA code at all."""
    for f in findings:
        names = f.details.get("quoted_includes")
        if not names or f.context == "off-path":
            continue
        parts = f.path.split("/")[:-1]
        dirs = ["/".join(parts[:n]) for n in range(len(parts), -1, -1)]
        own = [n for n in names if any(posixpath.normpath(posixpath.join(d, n)) in rels for d in dirs)]
        if len(own) == len(names):
            f.context, f.gate = "off-path", None
            f.details["context_reason"] = (f"{', '.join(f'`{n}`' for n in own)} is the project's own header "
                                           "(a file of the repository), not the CUDA toolkit's")


# A package's build script runs once, on the build host, when the package is installed.
_BUILD_KINDS = ("cuda", "cpp", "extension")


def build_scripts(findings: list[Finding], info_by: dict) -> None:
    """Device probes and settings in `setup.py` (or a file that declares setup-time extension builds)
    decide what to compile, on the build host: build configuration, not training code. The CUDA
    build itself (custom-cuda rules) and the dependencies it declares stay."""
    for f in findings:
        if f.context in ("off-path", "neuron-native") or f.category in ("custom-cuda", "dependency") \
                or not f.path.endswith(".py"):
            continue
        facts = info_by[f.path].facts if f.path in info_by else {}
        builds = [b for b in facts.get("builds", ()) if b.get("kind") in _BUILD_KINDS]
        if (f.path.rsplit("/", 1)[-1] == "setup.py" and not in_package(f.path, info_by)) or builds:
            f.context, f.gate = "off-path", None
            f.details.pop("feature", None)
            f.details["context_reason"] = "build script: runs on the build host when the package is built, not in training"


def other_accelerator_builds(findings: list[Finding], info_by: dict, reach, defaults: Defaults) -> None:
    """An extension a build script declares only under a test for another accelerator's build
    (`elif IS_ROCM:`, `if IS_HIP_EXTENSION:`: codefacts `rocm_test`) is that accelerator's build: its
    build line and the sources only it compiles are opt-in behind the same gate, as a `rocm/` folder
    is. The job never builds it, on NVIDIA GPUs today or on Trainium after the port."""
    gated: dict[str, Gate] = {}
    for e in reach.extensions:
        code = info_by[e.build].facts.get("code") if e.build in info_by else None
        gate = line_gate(code, e.line, e.build, defaults) if code else None
        if gate is not None and gate.feature in ACCEL_TESTS:
            gated[e.id] = gate
    if not gated:
        return
    for f in findings:
        if f.context != "step" or f.category != "custom-cuda":
            continue
        ext = reach.extension_of.get(f.path) or reach.build_site(f.path, f.line)
        gate = gated.get(ext)
        if gate is not None:
            f.context, f.gate = "opt-in", gate.text
            f.details["feature"] = gate.feature
            f.details["context_reason"] = (f"another accelerator's build: `{ext.split('#', 1)[0]}` is declared "
                                           "only under that test")


def chosen_cuda_builds(findings: list[Finding], info_by: dict) -> None:
    """A CUDA build that a build script chooses beside a CPU build of the same ops (builds.py
    `cuda_choices`: `Ext = CppExtension if suffix == "cpu" else CUDAExtension`, `extension =
    CUDAExtension` under `if torch.cuda.is_available() and CUDA_HOME ...` with a `CppExtension`
    default, and the call of the chosen class) is a build-time choice: a Neuron build host, with no
    CUDA, builds the CPU extension. Opt-in behind that choice; the CUDA kernels it would compile keep
    their own findings at their sources. An unconditional CUDA build, or one whose other case builds
    nothing (only an environment variable skips it), is no choice and stays."""
    for f in findings:
        if f.context != "step" or f.category != "custom-cuda" or f.path not in info_by:
            continue
        cpu = dict(info_by[f.path].facts.get("cuda_choices", ())).get(f.line)
        if cpu is None:
            continue
        name = f.path.rsplit("/", 1)[-1]
        f.context, f.gate = "opt-in", place_gate(f"a build that picks CUDA (`{name}` builds a `{cpu}` otherwise)")
        f.details["feature"] = "cuda-build"
        f.details["context_reason"] = (f"a build-time choice: `{name}` builds a `{cpu}` (CPU) extension of the same "
                                       "ops when it does not pick CUDA, as on a Neuron build host; the CUDA "
                                       "kernels keep their findings at their sources")


def runs_only_on(findings: list[Finding]) -> None:
    """What the scanner saw run only on some data or device (python.py `only_on`: a branch under
    `torch.is_complex(x)`, a CUDA backend flag set): opt-in and, like other devices' code, listed
    but never costed (place_gate, never_costed)."""
    for f in findings:
        where = f.details.get("only_on")
        if where and f.context == "step":
            f.context, f.gate = "opt-in", place_gate(where)
            f.details["feature"] = f.details.get("only_on_feature") or "condition"
            f.details["context_reason"] = f"runs only on {where}"


# `torch.cuda` seeding calls PyTorch queues until CUDA initialises (`_lazy_call`): off CUDA they never run.
LAZY_CUDA_SEEDS = frozenset({"torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.cuda.seed",
                             "torch.cuda.seed_all"})
TORCH_SEEDS = frozenset({"q:torch.manual_seed", "q:torch.random.manual_seed", "q:torch.seed", "q:torch.random.seed"})


def seeded_by_torch(findings: list[Finding], info_by: dict) -> None:
    """A CUDA seeding call (`torch.cuda.manual_seed_all(seed)`) in a function (or module code) that
    also calls `torch.manual_seed`: that call already seeds every device, the Neuron device included
    (`torch.manual_seed` seeds the accelerator's generator too), and the CUDA one is queued until
    CUDA initialises, so on Trainium it never runs. Listed as running only on a CUDA device, never
    costed; without `torch.manual_seed` beside it the finding stays (the Neuron device goes unseeded).
    The native target only: on the XLA path the device's generator is seeded through `xm.set_rng_state`."""
    for f in findings:
        if f.context != "step" or f.rule != "NR1015" or f.symbol not in LAZY_CUDA_SEEDS or f.path not in info_by:
            continue
        code = info_by[f.path].facts.get("code") or {}
        refs = {r for r, _region in (code.get("refs") or {}).get(f.scope or "", ())}
        if refs & TORCH_SEEDS:
            f.context, f.gate = "opt-in", place_gate("a CUDA device (`torch.manual_seed` beside it already seeds every "
                                                      "device; this call waits for CUDA to initialise)")
            f.details["feature"] = "cuda"
            f.details["context_reason"] = f"`{f.symbol}` is queued until CUDA initialises: harmless off CUDA"


def on_host_values(findings: list[Finding]) -> None:
    """A dynamic shape, host read, unsupported op or float64 on a value the scanner saw on the CPU
    (python.py `host_value`: `.cpu()`, `.numpy()`, a NumPy array, a torch factory given no device,
    `device="cpu"`) runs on the host, wherever its line is: host-side, not costed. What moved it
    there (`x.cpu()` in `forward`) reads a device tensor and keeps its own finding."""
    for f in findings:
        where = f.details.get("host_value")
        if where and f.context == "step" and f.category in HOST_CATEGORIES:
            f.context = "host"
            f.details["context_reason"] = f"operates on a value on the CPU (`{where}`), not on the device"


def dtype_keys(findings: list[Finding]) -> None:
    """A dtype that is the key of a table lookup or store (python.py `dtype_key`:
    `dtype2bytes[torch.float16] = 2`, `sizes[torch.half]`) names the dtype to find an entry; it
    computes nothing in that dtype and picks nothing: off the path, whatever the table holds. So is a
    precision hit in a method that overrides an `nn.Module` dtype cast and returns the base class's
    own (python.py `module_override`: `def double(self): ...; return super().double()`): it picks
    nothing on its own; a call of `.double()` on the module is the choice, flagged where it is made."""
    for f in findings:
        key, cast = f.details.get("dtype_key"), f.details.get("module_override")
        if (key or cast) and f.context in ("step", "host", "opt-in", "evaluation"):
            f.context, f.gate = "off-path", None
            f.details.pop("feature", None)
            f.details["context_reason"] = (
                f"the dtype is the key of a table entry (`{key}`): it names the dtype, computes nothing in it and "
                "picks nothing" if key else
                f"an override of `torch.nn.Module.{cast}` that forwards to it: it runs only where something calls "
                f"`.{cast}()` on the module, and that call is judged where it is made")


def autocast_off(findings: list[Finding]) -> None:
    """An autocast region that switches autocast off (python.py `autocast_off`:
    `@autocast("cuda", enabled=False)`, `with torch.cuda.amp.autocast(enabled=False):`) keeps its
    region out of CUDA autocast; on a Neuron device there is no CUDA autocast to leave, so it does
    nothing and nothing fails. Its edit (the device-type word) matters only when the user turns on
    autocast on the Neuron device, which must then also be kept out of the region: opt-in behind
    that, costed there. An autocast that turns autocast on stays must-port. One whose device type is
    the run's own device unless a test holds (python.py `autocast_follows`: `device_type = "cuda" if
    <test> else state.device.type`) autocasts on the Neuron device: opt-in behind that test."""
    for f in findings:
        code = f.details.get("autocast_off")
        follows = f.details.get("autocast_follows")
        if follows and f.context == "step":
            # `device_type = "cuda" if <test> else state.device.type`: the run's own device otherwise
            test, read = follows
            f.context, f.gate = "opt-in", f"only when `{test}` holds (otherwise it autocasts on `{read}`, the run's device)"
            f.details["feature"] = "condition"
            f.details["context_reason"] = (f"the device type is `{read}`, the device the run already uses, unless "
                                           f"`{test}`: on a Neuron device it autocasts on that device")
        elif code and f.context == "step":
            f.context, f.gate = "opt-in", "only when autocast is turned on for the Neuron device (the region only " \
                                          "switches CUDA autocast off)"
            f.details["feature"] = "neuron-autocast"
            f.details["context_reason"] = (f"`{code}` only switches CUDA autocast off around its region: on a "
                                           "Neuron device it does nothing and nothing fails; the device-type word "
                                           "is needed only when the user turns on Neuron autocast")


def chosen_by_option(findings: list[Finding], defaults: Defaults) -> None:
    """A precision a named option picks (python.py `chosen_by`: `if precision == "fp16":` beside a
    bfloat16 branch, `{"float16": torch.float16, ...}[args.dtype]`) is must-port when the option's
    default picks it, else opt-in behind that option: the user chooses, and BF16 is there."""
    for f in findings:
        name, when = f.details.get("chosen_by"), f.details.get("chosen_when") or []
        if not name or f.context != "step":
            continue
        default = defaults.option(name.removesuffix("()"))
        if when[:1] == ["!"]:  # the else of string tests: any other known default picks it, None too
            if default is not UNKNOWN and str(default) not in when[1:]:
                continue
            shown = "none of " + ", ".join(f"'{w}'" for w in when[1:])
        elif when == ["True"]:  # a flag named for FP16 (`if self.fp16_enabled():`)
            if default is True:
                continue
            shown = "true"
        elif default is not UNKNOWN and str(default) in when:
            continue
        else:
            shown = " or ".join(f"'{w}'" for w in when)
        f.context, f.gate = "opt-in", f"only when {name} is {shown} ({name} defaults to {_show(default)})"
        f.details["feature"] = name.removesuffix("()")
        f.details["context_reason"] = f"a precision the user picks with {name}; another choice is bfloat16"


# A finding on a use of a parameter (`device=device`): the CUDA value it names is the parameter's default.
_PARAM_USE = re.compile(r"^\w+=(\w+)$")


def unused_defaults(findings: list[Finding], defaults: Defaults) -> None:
    """A parameter default that never runs is not what the training job runs: a finding on the
    default expression itself (`def create_loader(device=torch.device('cuda'))`) or on a use that
    names the default's value (`torch.empty(..., device=device)` with `device='cuda'`) is off the
    path when every call of the function in the project passes that parameter (Defaults.always_passed:
    at least one call, all of them resolved). A function no project code calls keeps its finding."""
    for f in findings:
        if f.context not in ("step", "host", "opt-in", "evaluation") or not f.scope:
            continue
        node = f"{f.path}::{f.scope}"
        sig = defaults.signature(node)
        if not sig:
            continue
        names = [p[0] for p in sig if p[2] <= f.line <= p[3]]
        use = _PARAM_USE.match(f.symbol or "")
        if not names and use and any(p[0] == use.group(1) for p in sig):
            names = [use.group(1)]
        if names and all(defaults.always_passed(node, n) for n in names):
            f.context, f.gate = "off-path", None
            f.details.pop("feature", None)
            what = f.scope.removesuffix(".__init__")  # a class is called by its name
            f.details["context_reason"] = (f"every call of `{what}` passes {', '.join(f'`{n}`' for n in names)}: "
                                           "the default never runs")


def extension_labels(graph: Graph, reach, ctx: Context) -> dict[str, tuple[int, str]]:
    """Per compiled extension, the best label of the Python code that imports its module, and that
    code's node: its kernels run when that code does (a CUDA extension used only in post-processing
    is evaluation; one imported only behind a switch is opt-in). Extensions nothing imports by name
    keep the module-level answer."""
    importers: dict[str, list[str]] = {}
    for e in reach.extensions:
        if e.kind in ("cmake", "program", "load", "load_inline") or not e.name or "*" in e.name:
            continue
        importers[e.id] = []
        names = {e.name, e.name.rsplit(".", 1)[-1]} - {"_C", "C"}
        for rel, code in graph.code.items():
            for scope, mods in code.get("imports", {}).items():
                if any(m == e.name or m.rsplit(".", 1)[-1] in names for m, _r in mods):
                    importers[e.id].append(f"{rel}::{scope}")
    out: dict[str, tuple[int, str]] = {}
    for ext_id, nodes in importers.items():
        if nodes:
            best = min(nodes, key=lambda n: (ctx.labels.get(n, UNREACHED), n))
            out[ext_id] = (ctx.labels.get(best, UNREACHED), best)
    return out


def label_native(f: Finding, ext_id: str, label_node: tuple[int, str], ctx: Context) -> None:
    """A finding in an extension's sources or build takes the context of the code that imports it."""
    label, node = label_node
    where = node_text(node)
    if label == UNREACHED and ctx.library:
        label = STEP
    if label == UNREACHED:
        f.context = "off-path"
        f.details["context_reason"] = f"no call from the training entry reaches {where}, which imports `{ext_id}`"
        return
    f.context = _LABEL_CONTEXT.get(label, "step")
    if label == HOST:
        f.context = "step"  # CUDA kernels need CUDA wherever they are called from
    if f.context == "opt-in":
        gate = ctx.gates.get(node) or Gate("condition", "only under a condition that is off by default")
        f.gate, f.details["feature"] = gate.text, gate.feature
    if f.context == "step" and node in ctx.fallback_only and node in ctx.auto_fallback and not f.fallback:
        f.fallback = True
        f.details["fallback_at_caller"] = True
    if node in ctx.parents:
        f.details["reached_via"] = " > ".join(ctx.path_to(node)) + f" > {ext_id}"
    if f.context == "evaluation":
        f.details["context_reason"] = f"`{ext_id}` is imported only by evaluation code ({where})"


def _launch_targets_of(launch: dict, rel: str, modules, info_by) -> list[str]:
    from .reach import _launch_targets

    return _launch_targets(launch, rel, modules, info_by)


def _owner_class(node: str, ctx: Context, graph: Graph) -> str | None:
    """The innermost labelled class around a method node."""
    rel, scope = split_node(node)
    while "." in scope:
        scope = scope.rpartition(".")[0]
        d = graph.def_of(f"{rel}::{scope}")
        if d is not None and d[2] == "c" and f"{rel}::{scope}" in ctx.labels:
            return f"{rel}::{scope}"
    return None


def label_finding(f: Finding, info, graph: Graph, defaults: Defaults, ctx: Context) -> None:
    facts = info.facts if info is not None else {}
    code = facts.get("code") or {}
    context, gate, reason = "step", None, ""
    accel = accelerator_of(f.path)
    if accel is not None:
        context, gate = "opt-in", Gate(accelerator_feature(accel), place_gate(accel))
    elif code and neuron_file(code, facts) and f.category in NEURON_CATEGORIES:
        context, reason = "neuron-native", "this file already targets Neuron or XLA"
    elif code and neuron_scope(code, f.scope) and f.category in NEURON_CATEGORIES:
        context, reason = "neuron-native", "this function already targets Neuron or XLA"
    elif ctx.neuron_entries and f.category in NEURON_CATEGORIES:
        context, reason = "neuron-native", "the training entry already targets Neuron or XLA"
    elif plugin_of(f.path) is not None:
        name = plugin_of(f.path)
        context, gate = "opt-in", Gate(f"plugin:{name}", f"only when the plugin `{name}` is enabled (plugins are "
                                       "loaded by name from the configuration)")
    elif ctx.library and (contributed := contrib_of(f.path)) is not None and contributed[0] not in ctx.contrib_core:
        # library mode: nothing chose the contributed module; a user who imports it keeps it (`--include-opt-in`)
        module = contributed[1]
        context, gate = "opt-in", Gate(f"contrib:{module.rsplit('.', 1)[-1]}",
                                       f"only when the user imports the contributed module `{module}` "
                                       f"(`{contributed[0]}/` holds code outside the library's maintained core)")
    elif (folder := subproject_of(f.path, ctx.subprojects)) is not None:
        context, gate = "opt-in", Gate(f"subproject:{folder.rpartition('/')[2]}",
                                       f"only when the separate package in `{folder}/` is installed (it builds on its "
                                       f"own from {ctx.subprojects[folder]}; the root's install leaves it out)")
    else:
        label = STEP
        scope = running_scope(f, code)
        packaging = f.path.rsplit("/", 1)[-1] in PACKAGING_FILES  # run by pip, not imported by the trainer
        span = code.get("main_span") or []
        in_main = not scope and span and span[0] <= f.line <= span[1]
        once = ""  # runs once, in construction or checkpoint code
        demo = ""  # why a library module's `__main__` block is a demo
        if (ctx.function_level or ctx.library) and code and not packaging:
            node = f"{f.path}::{MAIN}" if in_main else node_of(code, f.path, scope)
            if node is not None and f.category in HOST_CATEGORIES and _once_applies(f, node, graph):
                once = setup_reason(node, f.line, graph, ctx)
            dead = ctx.unreferenced.get(f"{f.path}::{scope.split('.', 1)[0]}") if scope and ctx.unreferenced else None
            if dead:
                context, reason = "off-path", dead  # a private function nothing in the repository names
            elif node is not None:
                label = ctx.labels.get(node, UNREACHED)
                if label == UNREACHED and ctx.library:
                    # a library's code nothing calls is its surface: its class's label, else the module's answer
                    owner = _owner_class(node, ctx, graph)
                    label = ctx.labels[owner] if owner else STEP
                    # the demo of a library module (reach.library_demos): run by hand, never on import
                    demo = ctx.demos.get(f.path, "") if in_main else ""
                    if owner and label == OPTIN:
                        node = owner
                elif label == UNREACHED:
                    context = "off-path"
                    what = f"`{scope}`" if scope else ("its `__main__` block (imported, never run as a script)"
                                                       if in_main else "this module's code")
                    reason = f"no call from the training entry reaches {what}"
                if label == OPTIN:
                    gate = ctx.gates.get(node)
                if label != UNREACHED and node in ctx.parents:
                    f.details["reached_via"] = " > ".join(ctx.path_to(node))
                if label == STEP and node in ctx.fallback_only and not f.fallback and f.category in FALLBACK_CATEGORIES:
                    if node in ctx.auto_fallback:
                        f.fallback = True  # a capability check picks the PyTorch path on Trainium by itself
                        f.details["fallback_at_caller"] = True
                    else:
                        f.details["pytorch_path"] = True  # a setting picks the GPU path: switch, validate, optimise
        if context != "off-path":
            local = line_gate(code, f.line, f.path, defaults, f.column) if code else None
            if local is None and code and f.details.get("value_lines"):
                local = chosen_gate(code, f.details["value_lines"], f.path, defaults, f.symbol.split("=", 1)[0])
            markers = markers_of(code, scope) if code else set()
            if local is not None and local.kind == "evaluation":
                label = max(label, EVAL)
            elif local is not None:
                label, gate = max(label, OPTIN), (gate if label == OPTIN and gate else local)
            if "eval" in markers or (evaluation_path(f.path) and not (developer_tool(f.path) and f.path in graph.entry_files)):
                label = max(label, EVAL)
            if "host" in markers or (label == STEP and host_path(f.path)):
                label = max(label, HOST)
            elif label == STEP and once:
                label, reason = HOST, once  # a shape, host read, op or float64 computed once: no device cost
            if label == HOST and f.category not in HOST_CATEGORIES:
                label = STEP  # a CUDA call in a Dataset still needs CUDA
            if label == STEP and not demo and ctx.library and f.path.rsplit("/", 1)[-1] == "__main__.py":
                demo = ctx.demos.get(f.path, "")  # the package's `python -m` command, every line of it
                if demo:
                    label, reason = EVAL, f"the package's `__main__.py`, run only by {demo}, which importing the library never runs"
            if label == STEP and demo:
                label, reason = EVAL, (f"its `__main__` block, a demo run only when the file is run as a script: a "
                                       f"library module ({demo}), which importing never runs")
            context = _LABEL_CONTEXT.get(label, "step")
            if context == "opt-in" and gate is None:
                gate = Gate("condition", "only under a condition that is off by default")
            if context != "opt-in":
                gate = None
    f.context = context
    if gate is not None:
        f.gate = gate.text
        f.details["feature"] = gate.feature
    if reason:
        f.details["context_reason"] = reason
