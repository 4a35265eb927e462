"""Figures read from the tools' own output: dd's summary line, ioping's raw statistics, fio's JSON.

Nothing here runs a tool (stdlib only); each parser raises ValueError naming what it expected, so a
changed output format fails the run with a message instead of a wrong figure.
"""

import json
import re
import statistics
from typing import NamedTuple

# dd's last line (LC_ALL=C), e.g. "104857600 bytes (105 MB, 100 MiB) copied, 0.0649327 s, 1.6 GB/s"; below
# 1000 bytes the parenthesis is left out ("512 bytes copied, ...") and one byte is "1 byte copied".
_DD_SUMMARY = re.compile(
    r"^(?P<bytes>\d+) bytes?(?: \([^)]*\))? copied, (?P<seconds>[0-9.eE+-]+) s, "
    r"(?P<rate>[0-9.]+|[Ii]nf(?:inity)?) (?P<unit>[kMGTPEZYRQ]?)B/s$"
)
# dd writes rates with SI prefixes, powers of 1000 (coreutils' human_SI); the metric is in MB/s.
_SI_TO_MB = {"": 1e-6, "k": 1e-3, "M": 1.0, "G": 1e3, "T": 1e6, "P": 1e9, "E": 1e12, "Z": 1e15, "Y": 1e18}


class DdResult(NamedTuple):
    bytes: int
    seconds: float
    mb_per_s: float  # bytes / seconds / 1e6: dd's own rate (its formula, its figures), to full precision
    printed_mb_per_s: float  # the rate dd printed, in MB/s: two or three significant digits ("1.6 GB/s")
    summary: str  # the line both were read from


def _printed_rate(rate, unit):
    """dd's printed rate in MB/s and the size of its last digit (the rounding it may hide)."""
    decimals = len(rate.partition(".")[2])
    return float(rate) * _SI_TO_MB[unit], 10.0**-decimals * _SI_TO_MB[unit]


def parse_dd(text):
    """dd's summary line (the last one that matches) -> DdResult; ValueError if there is none.

    The rate is dd's bytes over dd's seconds, in decimal MB/s as dd defines it, rather than the rate dd
    prints, which is rounded to two or three digits (2097152 bytes in 0.00203714 s prints "1.0 GB/s",
    1029.5 MB/s); the printed rate must agree with it to its last digit, or the line was misread."""
    for line in reversed((text or "").strip().splitlines()):
        match = _DD_SUMMARY.match(line.strip())
        if match is None:
            continue
        summary, rate, unit = line.strip(), match["rate"], match["unit"]
        if unit not in _SI_TO_MB:
            raise ValueError(f"dd printed a rate in an unknown unit {unit}B/s: {summary!r}")
        copied, seconds = int(match["bytes"]), float(match["seconds"])
        if not (rate[0].isdigit() and seconds > 0):
            raise ValueError(f"dd finished too fast to time ({summary!r}): write a larger size with --dd-sizes-mb")
        printed, last_digit = _printed_rate(rate, unit)
        mb_per_s = copied / seconds / 1e6
        if abs(printed - mb_per_s) > last_digit + 1e-9 * mb_per_s:
            raise ValueError(
                f"dd's rate {rate} {unit}B/s does not match its {copied} bytes in {seconds} s "
                f"({mb_per_s:.6g} MB/s): {summary!r}"
            )
        return DdResult(copied, seconds, mb_per_s, printed, summary)
    raise ValueError(
        "dd printed no summary line like '1048576 bytes (1.0 MB, 1.0 MiB) copied, 0.003 s, 366 MB/s' "
        f"(was it run with LC_ALL=C?); its output: {(text or '').strip()[-300:]!r}"
    )


class IopingResult(NamedTuple):
    """ioping's raw statistics (-B, man ioping "RAW STATISTICS"), times in nanoseconds."""

    requests: int  # (1) requests in the statistics (the warm-up request is not)
    run_ns: int  # (2) running time of those requests
    iops: float  # (3) requests per second
    bytes_per_s: float  # (4) transfer speed
    min_ns: int  # (5)
    avg_ns: int  # (6)
    max_ns: int  # (7)
    mdev_ns: int  # (8) standard deviation
    total_requests: int  # (9) warm-up and too slow/fast requests included
    total_ns: int  # (10) total running time
    # Each request's time, where ioping printed a raw line per request (-p 1) before its statistics.
    request_ns: tuple = ()

    @property
    def latency_us(self):
        return self.avg_ns / 1000

    @property
    def median_latency_us(self):
        """The median request's time: one slow request (a flush of someone else's writes) moves the mean of ten
        by tens of percent, the median hardly; None where the requests were not printed one by one."""
        return statistics.median(self.request_ns) / 1000 if self.request_ns else None


def _raw_lines(text):
    """ioping -B's raw statistics lines, ten integers each, in the order printed."""
    for line in (text or "").strip().splitlines():
        fields = line.split()
        if len(fields) == 10 and all(field.isdigit() for field in fields):
            yield line.strip(), [int(field) for field in fields]


def parse_ioping_batch(text):
    """The last line of ten integers in ioping -B's output -> IopingResult; ValueError if none or no request.

    With -p 1 ioping first prints one raw line per request (its count 1): their times are the result's
    request_ns, and their number must be the statistics' own count of requests."""
    lines = list(_raw_lines(text))
    if lines:
        line, fields = lines[-1]
        result = IopingResult(*fields)
        if result.requests == 0:
            raise ValueError(
                f"ioping timed no request ({line!r}): give it more requests or time (--ioping-count, --ioping-deadline)"
            )
        per_request = [fields for _line, fields in lines[:-1]]
        if not per_request:
            return result
        if any(fields[0] != 1 for fields in per_request) or len(per_request) != result.requests:
            raise ValueError(
                f"ioping printed {len(per_request)} raw lines before its statistics of {result.requests} requests, "
                f"expected one line per request (-p 1): {line!r}"
            )
        return result._replace(request_ns=tuple(fields[5] for fields in per_request))
    raise ValueError(
        "ioping -B printed no raw statistics line (10 integers: requests, time, iops, speed, min, avg, max, "
        f"mdev, total requests, total time); its output: {(text or '').strip()[-300:]!r}"
    )


class FioResult(NamedTuple):
    profile: str  # the job's name
    direction: str  # read or write: the side of the job that did the I/O
    bandwidth_mb_per_s: float  # bw_bytes / 1e6
    iops: float
    clat_mean_us: float  # mean completion latency
    io_bytes: int


def _json_object_in(text):
    """The first JSON object in text: fio may print warnings before its JSON."""
    start = (text or "").find("{")
    if start < 0:
        raise ValueError(f"fio printed no JSON (run with --output-format=json): {(text or '').strip()[-300:]!r}")
    value, _ = json.JSONDecoder().raw_decode(text[start:])
    return value


def parse_fio_json(text):
    """fio --output-format=json -> [FioResult], one per job, in the order fio ran them."""
    try:
        report = _json_object_in(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"fio's JSON output does not parse: {error}") from None
    results = []
    for job in report.get("jobs", []):
        name = job.get("jobname")
        if job.get("error"):
            raise ValueError(f"fio job {name!r} failed with error {job['error']}")
        sides = [side for side in ("read", "write") if job.get(side, {}).get("io_bytes", 0) > 0]
        if len(sides) != 1:
            raise ValueError(f"fio job {name!r} must read or write, one of the two, got I/O on {sides or 'neither'}")
        stats = job[sides[0]]
        try:
            results.append(
                FioResult(
                    name,
                    sides[0],
                    stats["bw_bytes"] / 1e6,
                    float(stats["iops"]),
                    stats["clat_ns"]["mean"] / 1000,
                    int(stats["io_bytes"]),
                )
            )
        except KeyError as missing:
            raise ValueError(
                f"fio job {name!r} has no {missing} in its {sides[0]} statistics (fio 3.0 or later is needed)"
            ) from None
    if not results:
        raise ValueError("fio's JSON output has no job")
    return results
