"""Launch commands and native programs read from shell scripts, Makefiles, READMEs, Dockerfiles
and Procfiles (`launches`, `programs`), and CUDA executables of CMake files (`programs`), through
the real per-file scanner."""

from __future__ import annotations

import json
import random

from hypothesis import given
from hypothesis import strategies as st

from scanning import scan_text


def _launches(name: str, text: str) -> list[tuple]:
    res = scan_text(text, name=name)
    assert res.kind == "launch" and not res.diagnostics
    return [(r["line"], r["launcher"], r["target"], r["kind"], r["args"]) for r in res.facts["launches"]]


def _programs(name: str, text: str) -> list[tuple]:
    res = scan_text(text, name=name)
    return [(p["line"], p["name"], p["sources"], p["tool"]) for p in res.facts["programs"]]


SCRIPT = """\
#!/usr/bin/env bash
#SBATCH --nodes=2
set -euo pipefail
# python commented_out.py --never
export CUDA_VISIBLE_DEVICES=0,1
cd "$(dirname "$0")" && python train.py --epochs 2 > log.txt 2>&1
python3 -u pkg/train.py --lr 1e-3  # trailing comment
python -m pkg.train --use_flash_attn
torchrun --nproc_per_node=8 --standalone train.py \\
    --attn_impl flash \\
    --bf16
python -m torch.distributed.run --nproc_per_node 8 $ROOT/scripts/pretrain.py --x
python -m torch.distributed.launch --use_env -m pkg.train
accelerate launch --config_file configs/fsdp.yaml --multi_gpu train.py --fp16
deepspeed --num_gpus 8 train.py --deepspeed ds_config.json
srun --ntasks 8 python train.py
mpirun -np 8 -x NCCL_DEBUG=INFO python train.py
composer -n 8 train.py
lightning run model --accelerator cuda train.py
OMP_NUM_THREADS=1 python "${REPO_DIR}/tools/finetune.py" "${ARGS[@]}"
bash -c "python -mpkg.main --x 1"
"""


def test_shell_script_launches():
    assert _launches("scripts/train.sh", SCRIPT) == [
        (6, "python", "train.py", "script", ["--epochs", "2"]),
        (7, "python", "pkg/train.py", "script", ["--lr", "1e-3"]),
        (8, "python", "pkg.train", "module", ["--use_flash_attn"]),
        (9, "torchrun", "train.py", "script", ["--attn_impl", "flash", "--bf16"]),
        (12, "torch.distributed.run", "scripts/pretrain.py", "script", ["--x"]),
        (13, "torch.distributed.launch", "pkg.train", "module", []),
        (14, "accelerate", "train.py", "script", ["--fp16"]),
        (15, "deepspeed", "train.py", "script", ["--deepspeed", "ds_config.json"]),
        (16, "python", "train.py", "script", []),
        (17, "python", "train.py", "script", []),
        (18, "composer", "train.py", "script", []),
        (19, "lightning", "train.py", "script", []),
        (20, "python", "tools/finetune.py", "script", ["${ARGS[@]}"]),
        (21, "python", "pkg.main", "module", ["--x", "1"]),
    ]
    facts = scan_text(SCRIPT, name="scripts/train.sh").facts
    assert [r.get("wrapper") for r in facts["launches"] if r["line"] in (16, 17)] == ["srun", "mpirun"]


def test_shell_look_alikes_are_not_launches():
    text = """\
pip install torch
python -c "import torch; print(torch.__version__)"
python setup.py install
python -m pip install -e .
python -m pytest tests/
echo python train.py
python $SCRIPT --fp16
python "${DIR}/${NAME}.py"
# torchrun train.py
accelerate config
python - <<EOF
print("hi")
EOF
"""
    assert _launches("run.bash", text) == []


def test_every_shell_suffix_is_a_launch_file():
    for name in ("a.sh", "a.bash", "a.zsh", "job.slurm", "job.sbatch"):
        assert _launches(name, "python train.py\n") == [(1, "python", "train.py", "script", [])]


MAKEFILE = """\
PYTHON ?= python3
NVCC := $(CUDA_PATH)/bin/nvcc
CUDA_OUTPUT_FILE = -o $@
# python not_this.py
train:
\t@$(PYTHON) train.py --config configs/base.yaml
dist: data
\ttorchrun --nproc_per_node 8 train.py \\
\t\t--fp16
\techo python fake.py
train_gpt2cu: train_gpt2.cu common.cuh
\t$(NVCC) -O3 $^ -lcublas $(CUDA_OUTPUT_FILE)
gpu_bench: bench.cu
\t$(NVCC) -O3 -o gpu_bench bench.cu
kernels.o: kernels.cu
\t$(NVCC) -c kernels.cu -o kernels.o
libops.so: ops.cu
\t$(NVCC) --shared -Xcompiler -fPIC -o libops.so ops.cu
notes: python train.py
"""


def test_makefile_recipes_launch_and_build_programs():
    assert _launches("Makefile", MAKEFILE) == [
        (6, "python", "train.py", "script", ["--config", "configs/base.yaml"]),
        (8, "torchrun", "train.py", "script", ["--fp16"]),
    ]
    assert _programs("Makefile", MAKEFILE) == [
        (12, "train_gpt2cu", ["train_gpt2.cu"], "nvcc"),
        (14, "gpu_bench", ["bench.cu"], "nvcc"),
    ]
    assert _launches("build/rules.mk", "run:\n\tpython -m pkg.train\n") == [(2, "python", "pkg.train", "module", [])]


def test_nvcc_in_a_shell_script():
    text = """\
NVCC=/usr/local/cuda/bin/nvcc
$NVCC -O3 -arch=sm_80 -o train train.cu kernels/*.cu -lcublas
nvcc -c x.cu -o x.o
nvcc --shared -o libx.so x.cu
nvcc -o libtool.so tool.cu
/usr/local/cuda/bin/nvcc main.cpp attention.cu
"""
    assert _programs("build.sh", text) == [
        (2, "train", ["train.cu", "kernels/*.cu"], "nvcc"),
        (6, "a.out", ["main.cpp", "attention.cu"], "nvcc"),
    ]


README_MD = """\
# Project

Train with `python train.py`, or echo python train.py in prose.

python prose_line.py --is-not-code

```bash
$ pip install -r requirements.txt
$ torchrun --nproc_per_node 8 train.py \\
    --attn_impl flash
# python commented.py
```

1. Then:

   ```
   accelerate launch train.py --bf16
   ```

Indented block:

    python -m pkg.finetune --lora

~~~sh
!python colab_train.py
~~~
"""


def test_readme_code_blocks_only():
    assert _launches("README.md", README_MD) == [
        (9, "torchrun", "train.py", "script", ["--attn_impl", "flash"]),
        (17, "accelerate", "train.py", "script", ["--bf16"]),
        (22, "python", "pkg.finetune", "module", ["--lora"]),
        (25, "python", "colab_train.py", "script", []),
    ]
    assert _launches("docs/README", "Run:\n\n    python train.py\n") == [(3, "python", "train.py", "script", [])]
    assert _launches("README.txt", "python train.py at the prompt\n") == []


def test_readme_rst_code_blocks():
    text = """\
Usage
=====

python prose.py is not code.

.. code-block:: bash

   python train.py --cfg a.yaml

Or simply::

    deepspeed train.py

Done, python after.py
"""
    assert _launches("README.rst", text) == [
        (8, "python", "train.py", "script", ["--cfg", "a.yaml"]),
        (12, "deepspeed", "train.py", "script", []),
    ]


def test_dockerfile_and_procfile():
    docker = """\
FROM pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
# RUN python never.py
RUN pip install -r requirements.txt && \\
    python setup.py install
RUN python prepare.py --download
ENTRYPOINT ["torchrun", "--nproc_per_node", "8", "train.py"]
CMD python -m pkg.serve
"""
    assert _launches("Dockerfile", docker) == [
        (5, "python", "prepare.py", "script", ["--download"]),
        (6, "torchrun", "train.py", "script", []),
        (7, "python", "pkg.serve", "module", []),
    ]
    assert _launches("docker/train.Dockerfile", "CMD [\"python\", \"train.py\"]\n") == [
        (1, "python", "train.py", "script", [])]
    assert _launches("Procfile", "worker: python train.py --fp16\nweb: gunicorn app:app\n") == [
        (1, "python", "train.py", "script", ["--fp16"])]


def test_a_readme_that_is_not_utf8_still_yields_its_commands():
    res = scan_text("caf\xe9\n\n    python train.py\n".encode("latin-1"), name="README.md")
    assert not res.diagnostics
    assert [r["target"] for r in res.facts["launches"]] == ["train.py"]


def test_launches_are_sorted_by_line_and_deterministic():
    lines = [f"python step{i}.py --n {i}" for i in range(40)]
    text = "\n".join(lines) + "\n"
    first = scan_text(text, name="run.sh").facts
    assert [r["line"] for r in first["launches"]] == list(range(1, 41))
    shuffled = lines[:]
    random.Random(7).shuffle(shuffled)
    again = scan_text("\n".join(shuffled) + "\n", name="run.sh").facts
    assert sorted(r["target"] for r in again["launches"]) == sorted(r["target"] for r in first["launches"])
    assert [r["line"] for r in again["launches"]] == list(range(1, 41))
    assert scan_text(text, name="run.sh").facts == first


def test_unbalanced_quotes_and_binary_noise_never_fail():
    res = scan_text('python train.py --name "unterminated\n\x01\x02 torchrun\n', name="odd.sh")
    assert not res.diagnostics
    assert [r["target"] for r in res.facts["launches"]] == ["train.py"]


def test_cmake_cuda_executables_are_programs():
    text = """\
cmake_minimum_required(VERSION 3.18)
project(trainer LANGUAGES CXX)  # add_executable(fake fake.cu)
set(KERNELS attention.cu "layer norm.cu")
file(GLOB OPS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/ops/*.cu)
add_executable(train_gpt2
    ${CMAKE_CURRENT_SOURCE_DIR}/train_gpt2.cpp
    ${KERNELS})
add_executable(tokenizer tokenizer.cpp)
cuda_add_executable(bench bench.cpp)
add_executable(profile profile.cpp)
target_sources(profile PRIVATE ${OPS})
add_library(ops SHARED ops.cu)
add_executable(alias ALIAS train_gpt2)
"""
    res = scan_text(text, name="CMakeLists.txt")
    assert res.facts["programs"] == [
        {"name": "train_gpt2", "line": 5, "sources": ["train_gpt2.cpp", "${KERNELS}"], "tool": "cmake", "cuda": True},
        {"name": "bench", "line": 9, "sources": ["bench.cpp"], "tool": "cmake", "cuda": False},
        {"name": "profile", "line": 10, "sources": ["profile.cpp", "${OPS}"], "tool": "cmake", "cuda": True},
    ]
    assert res.facts["cmake_build"] is True  # the existing facts are unchanged


def test_cmake_project_with_cuda_language_makes_every_executable_a_program():
    for head in ("project(llm LANGUAGES CXX CUDA)", "project(llm CUDA CXX)", "project(llm)\nenable_language(CUDA)"):
        res = scan_text(head + "\nadd_executable(train train.cpp)\n", name="cmake/targets.cmake")
        assert [(p["name"], p["cuda"]) for p in res.facts["programs"]] == [("train", False)], head
    assert scan_text("project(tool CXX)\nadd_executable(tool main.cpp)\n", name="CMakeLists.txt").facts["programs"] == []


_SHELLISH = st.lists(st.sampled_from([
    "python", "python3", "-m", "-c", "-u", "torchrun", "accelerate", "launch", "deepspeed", "srun", "env", "X=1",
    "train.py", "$DIR/", "pkg.train", "--nproc_per_node", "8", "--fp16", "nvcc", "-o", "a.cu", "-shared", "$(NVCC)",
    "$@", "$^", "\\\n", "\n", "\n\t", ";", "&&", "|", ">", "2>&1", "'", '"', "#", "```", "::", "    ", "$(", ")", ":",
]), max_size=40)


@given(_SHELLISH, st.sampled_from(["run.sh", "Makefile", "README.md", "README.rst", "Dockerfile", "Procfile",
                                   "c.yaml", "c.json", "c.toml"]))
def test_arbitrary_command_soup_never_breaks_the_scan(words, name):
    res = scan_text(" ".join(words), name=name, dedent=False)
    assert not [d for d in res.diagnostics if d.kind != "syntax-error"], res.diagnostics
    json.dumps(res.facts)
    for r in res.facts.get("launches", ()):
        assert set(r) >= {"line", "launcher", "target", "kind", "args"} and r["kind"] in ("script", "module")


def test_makefile_with_hidden_output_flag_and_conditional_objects():
    """llm.c's layout: `-o $@` hides in a variable, objects come from a conditional variable."""
    text = """\
NVCC := $(shell which nvcc 2>/dev/null)
NVCC_FLAGS = --threads=0 -t=0 --use_fast_math -std=c++17 -O3
BUILD_DIR = build
ifeq ($(USE_CUDNN), 1)
  NVCC_CUDNN = $(BUILD_DIR)/cudnn_att.o
  $(info using cuDNN)
endif
CUDA_OUTPUT_FILE = -o $@
train_gpt2: train_gpt2.c
\t$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@
$(BUILD_DIR)/cudnn_att.o: llmc/cudnn_att.cpp
\t$(NVCC) -c $(NVCC_FLAGS) $< -o $@
train_gpt2cu: train_gpt2.cu $(NVCC_CUDNN)
\t$(NVCC) $(NVCC_FLAGS) $^ $(NVCC_LDFLAGS) $(CUDA_OUTPUT_FILE)
"""
    assert _programs("Makefile", text) == [(14, "train_gpt2cu", ["train_gpt2.cu", "$(NVCC_CUDNN)"], "nvcc")]


def test_a_c_link_of_objects_nvcc_compiled_is_a_cuda_program():
    from neuron_ready.sources.launch import launch_facts

    darknet_like = (
        "NVCC=nvcc\nCC=gcc\nEXEC=darknet\nQ ?= @\n"
        "$(EXEC): $(OBJS)\n\t$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS)\n"
        "$(SLIB): $(OBJS)\n\t$(CC) $(CFLAGS) -shared $^ -o $@\n"
        "obj/%.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n"
        "obj/%.o: %.cu\n\t$(Q)$(NVCC) $(ARCH) -c $< -o $@\n"
        "test_all: $(TESTS)\n\t$(CC) $^ -o test_all\n"
    )
    progs = launch_facts("Makefile", darknet_like)["programs"]
    assert [(p["name"], p["line"], p["tool"]) for p in progs] == [("darknet", 6, "make")]
    assert progs[0]["sources"] == ["**/*.cu"]
    # the same link with no CUDA compiled anywhere is a C program, not ours to port
    cpu_only = darknet_like.replace("obj/%.o: %.cu\n\t$(Q)$(NVCC) $(ARCH) -c $< -o $@\n", "")
    assert launch_facts("Makefile", cpu_only)["programs"] == []
