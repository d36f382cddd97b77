"""Trace mode (`neuron-ready trace`): data.py holds the plain records, run.py runs the model on fake
tensors (the only module that imports torch), ops.py judges the ops by the catalog and merge.py sets
the status of static findings. Importing this package imports no torch."""
