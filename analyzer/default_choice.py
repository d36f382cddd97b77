"""A GPU-only library the default configuration selects (docs/contexts.md "Chosen by default").

`if loss_fn == 'fused_crossentropy': from flash_attn... import CrossEntropyLoss` with `loss_fn`
defaulting to 'fused_crossentropy', or `attention_implementations.register('flash', func=flash_attn_fn)`
with `attn_impl` defaulting to 'flash': the training job calls the library unless someone changes
the setting, so it is not an optional integration to gate (effort.py), even when every use sits in a
function or behind an import whose `except` raises. When the same setting has another value whose
branch or registered entry uses no GPU code (`torch_crossentropy`, `torch`), the port is switching the
default to it and validating: a switch task; otherwise the library is swapped.

Each such finding gets `default_option` (the setting), `default_choice` (the test, in words) and
`default_alternative` (whether the setting has a value without GPU code)."""

from __future__ import annotations

from .context import UNKNOWN, Defaults, _feature, _same, cuda_branch, innermost_region, setting_arm
from .model import GPU_CODE_CATEGORIES, Finding
from .sources.codefacts import regions_out

# codefacts' conditions a capability decides (`HAS_FLASH`, a CUDA check): not a setting a user picks
_CAPABILITY = (["cap"], ["cuda"], ["not", ["cuda"]])
# codefacts' conditions that read a setting: an option, a parameter, a config field, an environment variable
_SETTING = (["opt"], ["param"], ["field"], ["env"])


def default_choices(findings: list[Finding], info_by: dict, defaults: Defaults) -> None:
    gpu_lines: dict[str, list[tuple[int, str]]] = {}
    for f in findings:
        if f.category in GPU_CODE_CATEGORIES and f.context in ("step", "opt-in", "evaluation"):
            gpu_lines.setdefault(f.path, []).append((f.line, f.scope))
    for f in findings:
        if f.context != "step" or f.category != "gpu-library" or f.fallback:
            continue
        code = (info_by[f.path].facts.get("code") or {}) if f.path in info_by else {}
        if not code:
            continue
        choice = (_branch_choice(code, f, defaults, gpu_lines.get(f.path, ()))
                  or _registered_choice(code, f, defaults, gpu_lines.get(f.path, ())))
        if choice is not None:
            option, words, alternative = choice
            f.details.update(default_option=option, default_choice=words, default_alternative=alternative)


def _setting_test(cond: list) -> bool:
    """A test of a setting a user picks a value of: `impl == 'flash'`, `impl in ('a', 'b')`,
    `use_flash` (an option, parameter, field or environment variable, possibly negated)."""
    if cond[:1] == ["not"]:
        return _setting_test(cond[1])
    if cond[:1] == ["cmp"] and cond[1] in ("Eq", "NotEq"):
        sides = cond[2:4]
        return (any(s[:1] == ["lit"] and isinstance(s[1], str) for s in sides)
                and any(s[:1] in _SETTING for s in sides))
    if cond[:1] == ["in"]:
        return cond[1][:1] in _SETTING
    return cond[:1] in _SETTING


def _branch_choice(code: dict, f: Finding, defaults: Defaults, gpu: list) -> tuple[str, str, bool] | None:
    """The innermost branch around the finding that a setting's default takes, and whether the
    branch beside it (the setting's other values) runs without GPU code."""
    regions = code.get("regions", ())
    inner = setting_arm(code, f.line, f.column)
    if inner is None:
        inner = innermost_region(code, f.line)
    if inner is None:
        return None
    for i, region in regions_out(regions, inner):
        cond, branch = region[2], region[3]
        if cond in _CAPABILITY or (len(region) > 6 and region[6]) or cuda_branch(region) or not _setting_test(cond):
            continue
        v = defaults.evaluate(cond, f.path)
        if v is UNKNOWN or bool(v) != (branch == "body"):
            continue
        other = next((j for j, r in enumerate(regions) if j != i and r[2] == cond and r[4] == region[4]
                      and r[5] == region[5] and r[3] != branch and r[0] <= r[1]), None)
        alternative = other is not None and other not in set(code.get("gives_up", ())) and not any(
            regions[other][0] <= line <= regions[other][1] for line, _scope in gpu)
        why = defaults.describe(cond, f.path)
        return _feature(cond), f"{region[5]}" + (f" ({why})" if why else ""), alternative
    return None


def _registered_choice(code: dict, f: Finding, defaults: Defaults, gpu: list) -> tuple[str, str, bool] | None:
    """The function holding the finding is registered under the key the setting's default picks
    (`register('flash', func=flash_attn_fn)` with attn_impl defaulting to 'flash'), and whether an
    entry registered under another key runs without GPU code."""
    top = (f.scope or "").split(".", 1)[0]
    if not top:
        return None
    regs = code.get("registrations", ())
    for registry, key, ref, _where in regs:
        if ref != f"l:{top}":
            continue
        choice = _registry_setting(defaults, registry)
        if choice is None or not _same(choice[1], key):
            continue
        others = [r[2] for r in regs if r[0] == registry and not _same(r[1], key)]
        if others:  # registered here: an alternative when none of them holds GPU code
            gpu_scopes = {(s or "").split(".", 1)[0] for _line, s in gpu}
            alternative = not any(r.startswith("l:") and r[2:] in gpu_scopes for r in others)
        else:  # entries registered in other files: the keys say another value exists
            alternative = len(defaults.registry_keys.get(registry, ())) > 1
        return choice[0], f"{choice[0]} == {key!r} (the default: `{top}` is registered under it)", alternative
    return None


def _registry_setting(defaults: Defaults, registry: str) -> tuple[str, object] | None:
    """(setting, default) that picks the registry's entry (Defaults.registry_choice); when several
    settings default to one of its keys, the one whose default is a key of this registry alone
    (`attn_impl` = 'flash' beside `fc_type` = 'torch', also a key of the registry of layers)."""
    choice = defaults.registry_choice(registry)
    if choice is not None or defaults.registry_tests.get(registry):
        return choice
    keys = defaults.registry_keys.get(registry, ())
    own = []
    for name, value in sorted(defaults.options.items()):
        if type(value) is str and value in keys and not any(
                value in other for reg, other in defaults.registry_keys.items() if reg != registry):
            own.append(name)
    if len(own) != 1:
        return None
    value = defaults.option(own[0])
    return None if value is UNKNOWN else (own[0], value)
