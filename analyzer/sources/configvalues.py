"""Precision chosen in a training config (YAML, JSON, TOML) rather than in code: `param_dtype: fp16`,
`mixed_precision: fp16`, DeepSpeed's `"fp16": {"enabled": true}`, `grad_scaler: true`.

A trainer that reads such a file trains in FP16 with loss scaling however clean its Python looks.
A file counts as a training config when one of its keys is a training setting (a learning rate, an
optimizer, epochs or steps, a batch size): an export or inference config that names fp16 is not
one. Works on configs.py's `values` ([dotted_key, value, line]); no parsing of its own.
"""

from __future__ import annotations

import re

MATCHER = "config_precision"
_TRAINING = re.compile(
    r"(?i)^(lr|learning_rate|base_lr|optimi[sz]er|optim|epochs?|num_epochs|max_epochs|max_steps|train_steps"
    r"|num_train_epochs|train_batch_size|batch_size|per_device_train_batch_size|gradient_accumulation_steps"
    r"|warmup_steps|weight_decay|trainer|training|train)$"
)
_DTYPE_KEYS = frozenset({
    "param_dtype", "dtype", "compute_dtype", "mixed_precision", "precision", "amp_dtype", "torch_dtype",
    "reduce_dtype", "buffer_dtype", "autocast_dtype", "train_dtype", "model_dtype",
})
_FP16_VALUES = frozenset({"fp16", "float16", "half", "torch.float16", "16", "16-mixed", "16-true", "16_mixed"})
_FP16_FLAGS = frozenset({"fp16", "use_fp16", "half", "use_half", "half_precision", "amp_fp16"})
_SCALER_FLAGS = frozenset({
    "grad_scaler", "use_grad_scaler", "gradscaler", "scaler", "use_scaler", "loss_scaler", "dynamic_loss_scale",
    "loss_scaling", "use_loss_scaling",
})


def precision_settings(values: list) -> list[tuple[int, str]]:
    """(line, `key: value`) of each FP16 or loss-scaling setting of a training config."""
    if not any(_TRAINING.match(seg) for key, _, _ in values for seg in str(key).split(".")):
        return []
    out = []
    for key, value, line in values:
        segs = str(key).lower().split(".")
        leaf = segs[-1]
        fp16 = (leaf in _DTYPE_KEYS and str(value).lower() in _FP16_VALUES and value is not True) or (
            value is True and (leaf in _FP16_FLAGS or (leaf == "enabled" and len(segs) > 1 and segs[-2] == "fp16"))
        )
        if fp16 or (value is True and leaf in _SCALER_FLAGS):
            out.append((line, f"{key}: {str(value).lower() if isinstance(value, bool) else value}"))
    return out
