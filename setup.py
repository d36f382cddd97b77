"""The package list, found by setuptools rather than written by hand: the source folders keep the
names the design gives them (analyzer/, rules/) and install as neuron_ready and neuron_ready.rules
(package-dir in pyproject.toml); every package under analyzer/ is found. Everything else is in
pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=["neuron_ready", *(f"neuron_ready.{p}" for p in find_packages("analyzer")), "neuron_ready.rules"])
