"""Throughput samples of a one-core pinned cell as the results callback writes them, for the tests of rounds, the
answer, run until decided, inject and calibrate, which build campaigns of known answers from them."""


def throughput_sample(platform, value, repeat, timestamp, experiment="smoke", variant="", **labels):
    """A ``throughput`` sample of ``PLATFORM/1/pin/cpu`` in round ``repeat``; ``labels`` are added (a None value
    leaves its label out), ``variant`` goes into the cell id between the scenario and the round."""
    scenario = f"{platform}/1/pin/cpu"
    return {
        "metric": "throughput",
        "value": value,
        "unit": "images/sec",
        "timestamp": timestamp,
        "labels": {
            "experiment": experiment,
            "workload": "cnn_train",
            "platform": platform,
            "scaleup": 1,
            "cpu_config": "pin",
            "processor": "cpu",
            "mode": "single",
            "repeat": repeat,
            "scenario": scenario,
            **{name: label for name, label in labels.items() if label is not None},
            "cell": "|".join(part for part in (scenario, variant, f"r{repeat}") if part),
        },
    }
