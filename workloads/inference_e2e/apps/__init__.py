"""The apps of inference_e2e: one module each, behind the interface of base.py."""
