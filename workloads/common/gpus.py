"""The GPUs a run was planned with, the GPUs it really used, and whether the two agree.

The cell plan sets ``PLATBENCH_EXPECTED_GPUS`` to compact JSON ``{"count": n, "pci_bus_ids": [...] or null}``
(bus ids in ``0000:3b:00.0`` form where the process sees the host's bus ids, null in guests);
unset, the run is a run by hand and nothing is checked.

``probe_devices()`` lists the GPUs this process used, each as
``{"index", "name", "uuid", "pci_bus_id", "driver", "cuda"}`` (``index``: the CUDA index the
process saw; unknown fields None):
- torch, when imported: the devices it initialized CUDA on and allocated memory on ([] when CUDA
  was never initialized: a run on CPU, even on a GPU host);
- TensorFlow, when imported: every GPU it made a device of (TensorFlow takes all it sees);
- neither imported (a launcher whose children do the work): the GPUs this process may hand on,
  from /proc/driver/nvidia narrowed by CUDA_VISIBLE_DEVICES.
The driver's own records (/proc/driver/nvidia) complete what a framework does not say (UUID,
driver version). Stdlib at import: frameworks are looked up in sys.modules, never imported here.
"""

import json
import os
import re
import sys
from typing import NamedTuple

EXPECTED_ENV = "PLATBENCH_EXPECTED_GPUS"
_BUS_ID = re.compile(r"([0-9a-f]{1,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])")
_DESC_BUS_ID = re.compile(r"pci bus id:\s*([0-9a-fA-F]+:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_DRIVER_VERSION = re.compile(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)*)\s")
_EXPECTED_SHAPE = '{"count": N, "pci_bus_ids": ["0000:3b:00.0", ...] or null}'


class ExpectedGpus(NamedTuple):
    count: int
    pci_bus_ids: list | None  # sorted, normalized; None: the bus ids are not checked (guests)


def normalize_bus_id(text):
    """``00000000:3B:00.0`` or ``0000:3b:00.0`` -> ``0000:3b:00.0``; None when it is no PCI address."""
    match = _BUS_ID.fullmatch(str(text).strip().lower())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus}:{device}.{function}"


def expected_from_env(environ):
    """The planned GPUs from PLATBENCH_EXPECTED_GPUS, or None when it is unset (no check).

    Raises ValueError saying what is wrong with a malformed value.
    """
    text = environ.get(EXPECTED_ENV)
    if text is None:
        return None

    def bad(why):
        return ValueError(
            f"{EXPECTED_ENV}={text!r} is not valid: {why}; expected {_EXPECTED_SHAPE}. The cell plan sets it; "
            f"unset it to run by hand without the device check"
        )

    try:
        value = json.loads(text)
    except ValueError:
        raise bad("it is not JSON") from None
    if not isinstance(value, dict) or set(value) != {"count", "pci_bus_ids"}:
        keys = sorted(value) if isinstance(value, dict) else type(value).__name__
        raise bad(f"it must be an object with exactly the keys count and pci_bus_ids (got {keys})")
    count, bus_ids = value["count"], value["pci_bus_ids"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise bad(f"count must be a whole number >= 0 (got {count!r})")
    if bus_ids is None:
        return ExpectedGpus(count, None)
    if not isinstance(bus_ids, list):
        raise bad(f"pci_bus_ids must be a list or null (got {bus_ids!r})")
    normalized = [normalize_bus_id(item) if isinstance(item, str) else None for item in bus_ids]
    wrong = [item for item, norm in zip(bus_ids, normalized, strict=True) if norm is None]
    if wrong:
        raise bad(f"{wrong[0]!r} is not a PCI address like 0000:3b:00.0")
    if len(set(normalized)) != len(normalized):
        raise bad("a bus id is listed twice")
    if len(normalized) != count:
        raise bad(f"count is {count} but {len(normalized)} bus id(s) are listed")
    return ExpectedGpus(count, sorted(normalized))


def _describe(device):
    name = device.get("name") or "an unnamed GPU"
    return f"{name} ({device.get('pci_bus_id') or 'bus id unknown'})"


def _seen(seen):
    if not seen:
        return "the run saw none"
    return f"the run saw {len(seen)}: " + ", ".join(_describe(device) for device in seen)


def mismatch(expected, seen, environ=None):
    """None when the devices ``seen`` are the ones ``expected``; else what differs, for the failed record."""
    if expected is None:
        return None
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    context = f"CUDA_VISIBLE_DEVICES={'unset' if visible is None else repr(visible)}"
    if environ.get("CUDA_DEVICE_ORDER"):
        context += f", CUDA_DEVICE_ORDER={environ['CUDA_DEVICE_ORDER']}"
    if expected.count == 0:
        planned = "the cell was planned without GPUs"
    else:
        buses = f" ({', '.join(expected.pci_bus_ids)})" if expected.pci_bus_ids else ""
        planned = f"the cell was planned with {expected.count} GPU(s){buses}"
    if len(seen) != expected.count:
        return f"{planned} but {_seen(seen)}; {context}"
    if expected.pci_bus_ids is None:
        return None
    seen_ids = [normalize_bus_id(device.get("pci_bus_id") or "") for device in seen]
    if None in seen_ids:
        return f"{planned} but the PCI bus id of a GPU it used could not be read ({_seen(seen)}); {context}"
    if sorted(seen_ids) != expected.pci_bus_ids:
        return f"{planned} but {_seen(seen)}; {context}"
    return None


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def driver_version(root="/"):
    """The NVIDIA kernel driver's version from /proc/driver/nvidia/version, or None."""
    first_line = (_read(os.path.join(root, "proc/driver/nvidia/version")) or "").partition("\n")[0]
    match = _DRIVER_VERSION.search(first_line + " ")
    return match.group(1) if match else None


def driver_gpus(root="/"):
    """{bus id: {"name", "uuid", "minor"}} of the GPUs the NVIDIA driver shows this process (a
    container sees only its own)."""
    directory = os.path.join(root, "proc/driver/nvidia/gpus")
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return {}
    gpus = {}
    for name in names:
        fields = {}
        for line in (_read(os.path.join(directory, name, "information")) or "").splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        bus_id = normalize_bus_id(fields.get("Bus Location") or name)
        if bus_id is None:
            continue
        uuid = fields.get("GPU UUID") or None
        minor = fields.get("Device Minor", "")
        gpus[bus_id] = {
            "name": fields.get("Model") or None,
            # The driver masks the UUID ("GPU-????????-...") to unprivileged readers on some versions.
            "uuid": None if uuid is None or "?" in uuid else uuid,
            "minor": int(minor) if minor.isdigit() else None,
        }
    return gpus


def visible_entries(environ):
    """CUDA_VISIBLE_DEVICES as a list of entries, cut at the first invalid one as CUDA does; None if unset."""
    text = environ.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return None
    entries = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


def stdlib_devices(environ=None, root="/"):
    """The GPUs this process may use, from the driver's records narrowed by CUDA_VISIBLE_DEVICES.

    Indexes in CUDA_VISIBLE_DEVICES count the GPUs in PCI order, which is CUDA's order when
    CUDA_DEVICE_ORDER=PCI_BUS_ID (the plan sets it on bm) or when there is one GPU.
    """
    environ = os.environ if environ is None else environ
    gpus = driver_gpus(root)
    ordered = sorted(gpus)
    entries = visible_entries(environ)
    if entries is not None:
        chosen = []
        for entry in entries:
            if entry.isdigit():
                bus_id = ordered[int(entry)] if int(entry) < len(ordered) else None
            else:
                bus_id = next((bus for bus in ordered if (gpus[bus]["uuid"] or "").startswith(entry)), None)
            if bus_id is None or bus_id in chosen:
                break  # CUDA stops at the first entry naming no (new) device
            chosen.append(bus_id)
        ordered = chosen
    driver = driver_version(root)
    return [
        {
            "index": index,
            "name": gpus[bus_id]["name"],
            "uuid": gpus[bus_id]["uuid"],
            "pci_bus_id": bus_id,
            "driver": driver,
            "cuda": None,
        }
        for index, bus_id in enumerate(ordered)
    ]


def _uuid_text(value):
    text = str(value or "").strip()
    if not text:
        return None
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def torch_devices(torch):
    """The CUDA devices this torch process initialized and allocated memory on, in index order."""
    if not torch.cuda.is_initialized():
        return []
    indexes = [index for index in range(torch.cuda.device_count()) if torch.cuda.max_memory_reserved(index) > 0]
    if not indexes:  # CUDA initialized but nothing allocated through torch: its current device
        indexes = [torch.cuda.current_device()]
    devices = []
    for index in indexes:
        properties = torch.cuda.get_device_properties(index)
        parts = [getattr(properties, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
        bus_id = f"{parts[0]:04x}:{parts[1]:02x}:{parts[2]:02x}.0" if all(isinstance(p, int) for p in parts) else None
        devices.append(
            {
                "index": index,
                "name": properties.name,
                "uuid": _uuid_text(getattr(properties, "uuid", None)),
                "pci_bus_id": bus_id,
                "driver": None,
                "cuda": torch.version.cuda,
            }
        )
    return devices


def _tensorflow_local_devices():
    from tensorflow.python.client import device_lib  # the one place TensorFlow states a GPU's PCI bus id

    return device_lib.list_local_devices()


def tensorflow_devices(tf, local_devices=_tensorflow_local_devices):
    """The GPUs TensorFlow made devices of (it takes every one it sees), in index order."""
    physical = tf.config.list_physical_devices("GPU")
    if not physical or not tf.config.list_logical_devices("GPU"):
        return []
    bus_ids = {}
    for local in local_devices():
        if local.device_type == "GPU":
            match = _DESC_BUS_ID.search(local.physical_device_desc)
            bus_ids[local.name.rsplit(":", 1)[-1]] = normalize_bus_id(match.group(1)) if match else None
    cuda = tf.sysconfig.get_build_info().get("cuda_version")
    devices = []
    for device in physical:
        index = device.name.rsplit(":", 1)[-1]
        details = tf.config.experimental.get_device_details(device)
        devices.append(
            {
                "index": int(index),
                "name": details.get("device_name"),
                "uuid": None,
                "pci_bus_id": bus_ids.get(index),
                "driver": None,
                "cuda": cuda,
            }
        )
    return devices


def _completed(devices, root):
    """Fills what the framework left unknown (UUID, name, driver) from the driver's records, by bus id."""
    gpus, driver = driver_gpus(root), driver_version(root)
    for device in devices:
        record = gpus.get(device["pci_bus_id"] or "", {})
        device["uuid"] = device["uuid"] or record.get("uuid")
        device["name"] = device["name"] or record.get("name")
        device["driver"] = device["driver"] or driver
    return devices


def probe_devices(modules=None, environ=None, root="/"):
    """The GPUs this process used (see the module docstring); [] on a machine without NVIDIA GPUs."""
    modules = sys.modules if modules is None else modules
    torch, tf = modules.get("torch"), modules.get("tensorflow")
    if torch is None and tf is None:
        return stdlib_devices(environ, root)
    devices = []
    if torch is not None:
        devices += torch_devices(torch)
    if tf is not None:
        known = {device["pci_bus_id"] for device in devices if device["pci_bus_id"]}
        devices += [device for device in tensorflow_devices(tf) if device["pci_bus_id"] not in known]
    return _completed(devices, root)
