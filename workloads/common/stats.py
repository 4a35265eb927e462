"""Summary statistics of per-step times, reported as `step_time_*` metrics."""

import statistics

from .record import metric


def percentile(values, fraction):
    """Linear-interpolation percentile (numpy's default method) of non-empty values."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def step_time_metrics(step_times):
    """`step_time_{mean,std,p50,p90,min,max}` metrics in seconds."""
    summary = {
        "mean": statistics.fmean(step_times),
        "std": statistics.pstdev(step_times),
        "p50": percentile(step_times, 0.5),
        "p90": percentile(step_times, 0.9),
        "min": min(step_times),
        "max": max(step_times),
    }
    return [metric(f"step_time_{name}", value, "s") for name, value in summary.items()]
