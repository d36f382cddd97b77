"""Which files are scanned: .gitignore (nested, negated), default and user excludes, symlinks."""

from __future__ import annotations

import os

from neuron_ready.discover import discover, explicit_files


def _touch(root, rel, text="x = 1\n"):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _rels(found):
    return [j.rel for j in found.jobs]


def test_gitignore_nested_and_negated(tmp_path):
    _touch(tmp_path, ".gitignore", "*.log\ngenerated/\nsecret_*.py\n")
    _touch(tmp_path, "a.py")
    _touch(tmp_path, "generated/g.py")
    _touch(tmp_path, "secret_x.py")
    _touch(tmp_path, "sub/.gitignore", "!secret_keep.py\nlocal.py\n")
    _touch(tmp_path, "sub/secret_keep.py")
    _touch(tmp_path, "sub/local.py")
    _touch(tmp_path, "sub/ok.py")
    assert _rels(discover(tmp_path)) == ["a.py", "sub/ok.py", "sub/secret_keep.py"]
    assert "generated/g.py" in _rels(discover(tmp_path, use_gitignore=False))


def test_default_excludes_virtualenvs_and_user_globs(tmp_path):
    for rel in ["keep.py", ".git/hooks/x.py", "node_modules/m.py", "build/b.py", "dist/d.py",
                "pkg.egg-info/p.py", "__pycache__/c.py", "myenv/lib/site.py", "third_party/t.py", "docs/conf.py"]:
        _touch(tmp_path, rel)
    _touch(tmp_path, "myenv/pyvenv.cfg", "home = /usr\n")
    assert _rels(discover(tmp_path, excludes=["third_party/", "docs/*.py"])) == ["keep.py"]


def test_file_kinds(tmp_path):
    for rel in ["a.py", "n.ipynb", "k.cu", "h.cuh", "x.cpp", "CMakeLists.txt", "cmake/cuda.cmake",
                "requirements.txt", "requirements/dev.txt", "environment.yml", "Pipfile", "setup.cfg",
                "pyproject.toml", "README.md", "data.csv", "img.png"]:
        _touch(tmp_path, rel)
    kinds = {j.rel: j.kind for j in discover(tmp_path).jobs}
    assert kinds == {
        "a.py": "python", "n.ipynb": "notebook", "k.cu": "native", "h.cuh": "native", "x.cpp": "native",
        "CMakeLists.txt": "cmake", "cmake/cuda.cmake": "cmake", "requirements.txt": "deps",
        "requirements/dev.txt": "deps", "environment.yml": "deps", "Pipfile": "deps", "setup.cfg": "deps",
        "pyproject.toml": "deps", "README.md": "launch",
    }


def test_launch_and_config_kinds_come_from_the_name(tmp_path):
    launch = ["run.sh", "a.bash", "b.zsh", "job.slurm", "job.sbatch", "Makefile", "makefile", "GNUmakefile",
              "rules.mk", "README", "docs/README.rst", "sub/README.txt", "readme.md", "Dockerfile",
              "docker/Dockerfile.gpu", "train.dockerfile", "Procfile"]
    config = ["configs/base.yaml", "conf.yml", "ds_config.json", "train.toml", ".github/workflows/ci.yml"]
    other = ["environment.yml", "pyproject.toml", "package-lock.json", "web/yarn-lock.json", "tsconfig.json",
             "recipe/meta.yaml", "notes.md", "data.jsonl", "README.html", "run.sh.txt"]
    for rel in launch + config + other:
        _touch(tmp_path, rel, "{}\n")
    kinds = {j.rel: j.kind for j in discover(tmp_path).jobs}
    assert {r for r, k in kinds.items() if k == "launch"} == set(launch)
    assert {r for r, k in kinds.items() if k == "config"} == set(config)
    assert kinds["environment.yml"] == kinds["pyproject.toml"] == "deps"


def test_data_files_get_no_config_job(tmp_path):
    _touch(tmp_path, "records.json", '\ufeff  \n[{"a": 1}, {"a": 2}]\n')
    _touch(tmp_path, "settings.json", '{"lr": 1}\n')
    _touch(tmp_path, "big.yaml", "k: " + "x" * (256 * 1024) + "\n")
    _touch(tmp_path, "big.json", '{"k": "' + "x" * (256 * 1024) + '"}\n')
    _touch(tmp_path, "small.yaml", "k: v\n")
    _touch(tmp_path, "broken.json", '{"a": \n')
    assert _rels(discover(tmp_path)) == ["broken.json", "settings.json", "small.yaml"]
    found = explicit_files(tmp_path, [tmp_path / "records.json", tmp_path / "big.yaml", tmp_path / "settings.json"])
    assert _rels(found) == ["settings.json"]


def test_symlinks_are_never_followed(tmp_path):
    root = tmp_path / "repo"
    _touch(root, "real/mod.py")
    outside = _touch(tmp_path, "outside/evil.py")
    os.symlink(outside, root / "link_out.py")
    os.symlink(tmp_path / "outside", root / "dir_out")
    os.symlink(root / "real", root / "alias")  # inside: scanned once, where it lives
    os.symlink(root / "loop_b", root / "loop_a")
    os.symlink(root / "loop_a", root / "loop_b")
    os.symlink(root, root / "real" / "up")  # a directory loop
    os.symlink(root / "missing.py", root / "dangling.py")
    found = discover(root)
    assert _rels(found) == ["real/mod.py"]
    diags = {d.path: d.message for d in found.diagnostics}
    assert "outside the scanned tree" in diags["link_out.py"]
    assert "outside the scanned tree" in diags["dir_out"]
    assert "loop" in diags["loop_a"] and "loop" in diags["loop_b"]
    assert "broken" in diags["dangling.py"]
    assert "alias" not in diags and "real/up" not in diags


def test_order_does_not_depend_on_creation_order(tmp_path):
    names = [f"m{i}.py" for i in range(30)]
    a, b = tmp_path / "a", tmp_path / "b"
    for n in names:
        _touch(a, n)
    for n in reversed(names):
        _touch(b, n)
    assert _rels(discover(a)) == _rels(discover(b)) == sorted(names)


def test_a_gitignore_never_hides_a_tracked_file(tmp_path):
    """A committed models/.gitignore of `*` hid models/net.py from the scan (and from CI)."""
    import subprocess

    _touch(tmp_path, "train.py")
    _touch(tmp_path, "models/net.py")
    _touch(tmp_path, "models/.gitignore", "*\n")
    _touch(tmp_path, "models/local_scratch.py")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-f", "train.py", "models/net.py", "models/.gitignore"], cwd=tmp_path, check=True)
    assert _rels(discover(tmp_path)) == ["models/net.py", "train.py"]  # untracked and ignored: still skipped
    assert _rels(discover(tmp_path / "models")) == ["net.py"]


def test_a_fifo_is_a_diagnostic_not_a_hang(tmp_path):
    from neuron_ready.discover import explicit_files

    _touch(tmp_path, "a.py")
    os.mkfifo(tmp_path / "pipe.py")
    found = discover(tmp_path)
    assert _rels(found) == ["a.py"]
    assert [(d.path, d.kind) for d in found.diagnostics] == [("pipe.py", "unreadable")]
    assert "not a regular file" in found.diagnostics[0].message
    named = explicit_files(tmp_path, [tmp_path / "pipe.py", tmp_path / "a.py"])
    assert _rels(named) == ["a.py"] and named.diagnostics[0].path == "pipe.py"


def test_a_symlink_named_explicitly_is_not_followed_out_of_the_tree(tmp_path):
    from neuron_ready.discover import explicit_files

    outside = _touch(tmp_path, "outside/secret.py", "import torch\ntorch.cuda.synchronize()\n")
    root = tmp_path / "repo"
    _touch(root, "inside.py")
    (root / "link.py").symlink_to(outside)
    (root / "alias.py").symlink_to(root / "inside.py")
    found = explicit_files(root, [root / "link.py", root / "alias.py"])
    assert _rels(found) == ["alias.py"]
    assert [(d.path, d.kind) for d in found.diagnostics] == [("link.py", "symlink")]
