"""Whether the frameworks use oneDNN, for the record's metadata.

Each function imports its framework itself: call it only after the framework was imported
(threads are fixed at import), and never from code that must stay framework-free.
"""

import re


def tensorflow_onednn():
    """TensorFlow's own verdict (TF_ENABLE_ONEDNN_OPTS and CPU defaults); private API, so guarded."""
    try:
        from tensorflow.python.util import _pywrap_util_port

        return {"enabled": bool(_pywrap_util_port.IsMklEnabled())}
    except (ImportError, AttributeError):
        return {"enabled": None}


def torch_onednn():
    import torch

    version = re.search(r"MKL-DNN v([\w.]+)", torch.__config__.show())
    return {
        "enabled": torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled,
        "version": version.group(1) if version else None,
    }
