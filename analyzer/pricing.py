"""The pricing catalog (pricing.toml, shipped in the wheel): instances, accelerators and dated prices.

Each price has a date and a source; a missing price is a missing price, never a guess. Problems are
ConfigError one-liners (exit code 2) that say what to pass instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources

from .config import PRICINGS, ConfigError
from .tomlcheck import TomlSyntaxError, parse, unknown_keys
FAMILIES = ("gpu", "trainium")
# Every catalog price is Linux on-demand (or reserved, spot) in this region, in this currency.
REGION = "us-east-1"
CURRENCY = "USD"
# Trainium generations the native target (TorchNeuron, PyTorch >= 2.10) runs on; trn1 is XLA only.
NATIVE_TRAINIUM = ("trn2", "trn3")
INSTANCE_FIELDS = ("name", "family", "accelerator", "accelerators", "accelerator_memory_gib", "prices", "note")
PRICE_FIELDS = ("usd", "date", "source", "low", "high")
_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


@dataclass(frozen=True)
class Price:
    usd: float  # per instance-hour
    date: str
    source: str
    low: float | None = None  # observed range (spot)
    high: float | None = None


@dataclass(frozen=True)
class Instance:
    name: str
    family: str
    accelerator: str
    accelerators: int
    accelerator_memory_gib: float
    prices: dict[str, Price] = field(default_factory=dict)
    note: str = ""


def _fail(origin: str, where: str, problem: str) -> ConfigError:
    return ConfigError(f"{origin}: {where}: {problem}")


def parse_pricing(text: str, origin: str = "pricing.toml") -> dict[str, Instance]:
    try:
        data = parse(text)
    except TomlSyntaxError as e:
        raise ConfigError(f"{origin}: invalid TOML: {e}") from None
    out: dict[str, Instance] = {}
    for i, raw in enumerate(data.get("instance", [])):
        name = raw.get("name")
        where = f"instance {name!r}" if isinstance(name, str) else f"instance #{i + 1}"
        if not isinstance(name, str) or not name:
            raise _fail(origin, where, "needs a name")
        if name in out:
            raise _fail(origin, where, "duplicate name")
        unknown = unknown_keys(raw, INSTANCE_FIELDS)
        if unknown:
            raise _fail(origin, where, f"unknown field {sorted(unknown)[0]!r}")
        if raw.get("family") not in FAMILIES:
            raise _fail(origin, where, f"family must be one of {', '.join(FAMILIES)}")
        count = raw.get("accelerators")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise _fail(origin, where, "accelerators must be a whole number >= 1")
        memory = raw.get("accelerator_memory_gib")
        if not isinstance(memory, (int, float)) or isinstance(memory, bool) or memory <= 0:
            raise _fail(origin, where, "accelerator_memory_gib must be a positive number")
        prices = {}
        for kind, p in (raw.get("prices") or {}).items():
            pw = f"{where} price {kind!r}"
            if kind not in PRICINGS:
                raise _fail(origin, pw, f"must be one of {', '.join(PRICINGS)}")
            unknown = unknown_keys(p, PRICE_FIELDS)
            if unknown:
                raise _fail(origin, pw, f"unknown field {sorted(unknown)[0]!r}")
            usd = p.get("usd")
            if not isinstance(usd, (int, float)) or isinstance(usd, bool) or usd <= 0:
                raise _fail(origin, pw, "usd must be a positive number (USD per instance-hour)")
            if not isinstance(p.get("date"), str) or not _DATE.match(p["date"]):
                raise _fail(origin, pw, "date must be YYYY-MM or YYYY-MM-DD")
            if not isinstance(p.get("source"), str) or not p["source"].strip():
                raise _fail(origin, pw, "needs a source")
            low, high = p.get("low"), p.get("high")
            if (low is None) != (high is None) or (low is not None and not low <= usd <= high):
                raise _fail(origin, pw, "low and high come together and bracket usd")
            prices[kind] = Price(float(usd), p["date"], p["source"], low, high)
        out[name] = Instance(name, raw["family"], str(raw.get("accelerator", "")), count, float(memory), prices,
                             str(raw.get("note", "")))
    return out


_CATALOG: dict[str, Instance] | None = None


def load_pricing() -> dict[str, Instance]:
    global _CATALOG
    if _CATALOG is None:
        text = resources.files("neuron_ready").joinpath("pricing.toml").read_text(encoding="utf-8")
        _CATALOG = parse_pricing(text, "neuron_ready/pricing.toml")
    return _CATALOG


def lookup(name: str, family: str, pricing: str, flag: str, catalog: dict[str, Instance] | None = None) -> tuple[Instance, Price]:
    """The instance and its price, or a one-line error that says which flag to pass instead."""
    catalog = catalog if catalog is not None else load_pricing()
    inst = catalog.get(name)
    if inst is None:
        known = ", ".join(sorted(n for n, i in catalog.items() if i.family == family))
        raise ConfigError(f"unknown {family.replace('gpu', 'GPU').replace('trainium', 'Trainium')} instance {name!r} "
                          f"(the pricing catalog knows {known}); or pass {flag} USD-per-hour ({flag[2:]} in [tool.neuron-ready.workload])")
    if inst.family != family:
        raise ConfigError(f"{name} is a {inst.family} instance, not a {family} one")
    price = inst.prices.get(pricing)
    if price is None:
        have = ", ".join(inst.prices) or "none"
        raise ConfigError(f"{name} has no published {pricing} price in the pricing catalog (it has: {have}); "
                          f"pass {flag} USD-per-hour ({flag[2:]} in [tool.neuron-ready.workload])")
    return inst, price
