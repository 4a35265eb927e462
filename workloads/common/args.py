"""Argument types shared by the workloads' command lines (stdlib only)."""

import argparse
import json
import math


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def reject_non_finite(constant):
    raise ValueError(f"{constant} is not allowed in a result record")


def json_object(text):
    try:
        value = json.loads(text, parse_constant=reject_non_finite)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got invalid JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}")
    return value
