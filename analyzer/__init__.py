"""neuron-ready: how hard is it to move this PyTorch training code to AWS Trainium, and does it pay back?"""

__version__ = "0.1.0"
