"""`neuron-ready fix`: rewrite what the scan reports into device-agnostic PyTorch.

A catalog rule names its fix (`fix = "safe"` or `"unsafe"`) and one codemod below. The codemods
(codemods.py, written with libcst) rewrite through the node the scanner matched, so `fix` changes
exactly what `scan` reports. This module holds only their names: loading the catalog must not
load libcst.

Safe: the result behaves the same on a CUDA machine and runs on any other accelerator (Trainium's
`neuron` device) and on the CPU. Unsafe: it changes numerics or behaviour; applied only when asked.
"""

FIX_KINDS = ("safe", "unsafe")

CODEMODS = {
    "device_string": "a literal `'cuda'` device becomes the accelerator's type, `DEVICE.type`",
    "to_device": "`.cuda()` becomes `.to(DEVICE)`",
    "accelerator": "a `torch.cuda` device call becomes its `torch.accelerator` equivalent, guarded where the CPU has none",
    "nccl_backend": "`'nccl'` becomes `torch.distributed.get_default_backend_for_device(DEVICE)`",
    "autocast": "`torch.cuda.amp.autocast(...)` becomes `torch.autocast(DEVICE.type, ...)`",
    "drop_statement": "the statement is removed (its comments stay)",
    "bfloat16": "FP16 (`torch.float16`, `torch.half`, `.half()`, `'float16'`) becomes BF16",
}
