"""The built-in rule catalog (TOML files), shipped as package data of neuron_ready.rules."""
