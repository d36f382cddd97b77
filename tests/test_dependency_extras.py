"""Each dependency format keeps the optional extra or group a requirement is listed in (context.py
makes it opt-in or off the path); core dependencies keep none."""

from __future__ import annotations

import textwrap

from neuron_ready.context import dev_requirements_file
from neuron_ready.sources.deps import parse_dependencies


def extras(kind: str, text: str) -> dict[str, str]:
    return {r.name: r.extra for r in parse_dependencies(kind, textwrap.dedent(text)) if r.name}


def test_pyproject_extras_groups_and_poetry():
    got = extras("pyproject", """\
        [project]
        dependencies = ["torch"]
        [project.optional-dependencies]
        quant = ["bitsandbytes"]
        [dependency-groups]
        test = ["pytest"]
        [tool.poetry.dependencies]
        python = "^3.10"
        einops = "*"
        [tool.poetry.dev-dependencies]
        ruff = "*"
        [tool.poetry.group.flash.dependencies]
        flash-attn = "*"
        """)
    assert got == {"torch": "", "bitsandbytes": "quant", "pytest": "test", "einops": "", "ruff": "dev",
                   "flash-attn": "flash"}


def test_setup_cfg_and_pipfile():
    assert extras("setup.cfg", """\
        [options]
        install_requires =
            torch
        tests_require = pytest
        [options.extras_require]
        fp8 =
            transformer-engine
        """) == {"torch": "", "pytest": "tests", "transformer-engine": "fp8"}
    assert extras("pipfile", """\
        [packages]
        torch = "*"
        [dev-packages]
        deepspeed = "*"
        """) == {"torch": "", "deepspeed": "dev"}


def test_setup_py_requirements_carry_their_extra():
    reqs = parse_dependencies("setup.py", "", [(3, "torch", ""), (4, "xformers", "fast"), (5, "pytest", "tests")])
    assert [(r.name, r.extra) for r in reqs] == [("torch", ""), ("xformers", "fast"), ("pytest", "tests")]


def test_development_requirements_files_by_name():
    for path in ("requirements-dev.txt", "requirements_test.txt", "requirements/docs.txt", "dev-requirements.in"):
        assert dev_requirements_file(path), path
    for path in ("requirements.txt", "requirements-gpu.txt", "requirements/train.txt", "devices.py"):
        assert not dev_requirements_file(path), path


def test_requirements_files_named_for_an_extra_beside_the_plain_one():
    from neuron_ready.context import requirements_extra

    paths = {"requirements.txt", "requirements-sd.txt", "requirements-train.txt", "requirements/requirements.txt",
             "requirements/requirements-inf.txt", "other/requirements-flash.txt"}
    assert requirements_extra("requirements-sd.txt", paths) == "sd"
    assert requirements_extra("requirements/requirements-inf.txt", paths) == "inf"
    assert requirements_extra("requirements/requirements-inf.txt", {"requirements.txt"}) == "inf"  # the root's plain file
    assert requirements_extra("requirements.txt", paths) == ""
    assert requirements_extra("requirements-train.txt", paths) == ""  # the training install itself
    assert requirements_extra("other/requirements-flash.txt", paths) == ""  # no plain file beside it
