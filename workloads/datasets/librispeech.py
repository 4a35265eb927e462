"""LibriSpeech utterances as MLPerf's RNN-T reads them: 16 kHz mono 16-bit PCM WAV files and their transcripts.

Two layouts are read unchanged, DIR being the folder given as the data directory:

- MLPerf's converted dev-clean (``convert_librispeech.py`` of MLPerf inference's speech_recognition/rnnt): a
  manifest ``DIR/<name>-wav.json`` (MLPerf's is ``dev-clean-wav.json``), a JSON list whose entries hold
  ``files[0].fname`` (the WAV file, relative to DIR), ``files[0].duration`` in seconds and ``transcript``.
  Utterances are read in the manifest's order.
- LibriSpeech's own tree with its FLAC files converted to WAV (``sox X.flac -b 16 X.wav`` for each file):
  ``DIR/.../<speaker>/<chapter>/<speaker>-<chapter>-<utterance>.wav`` beside ``<speaker>-<chapter>.trans.txt``,
  whose lines are ``<speaker>-<chapter>-<utterance> TRANSCRIPT``. Utterances are read in the sorted order of
  their folders and ids. DIR may be ``LibriSpeech``, a subset such as ``LibriSpeech/dev-clean``, or above them.

A manifest wins where both are present. As MLPerf does, utterances longer than 15 s are left out.
Every WAV file must be RIFF PCM, 16 kHz, one channel, 2 bytes a sample; reading the headers needs the
standard library only, so that a workload can reject a bad ``--data-dir`` before it imports numpy.

``python -m workloads.datasets.librispeech --out DIR --utterances N`` writes N synthetic 15-second
utterances (the count of Samani et al.'s speech-recognition requests is 1,200) in both layouts at once:
``DIR/dev-clean-wav/<speaker>/<chapter>/*.wav`` with LibriSpeech's ``.trans.txt`` files (upper-case
transcripts, as LibriSpeech writes them) and MLPerf's manifest ``DIR/dev-clean-wav.json`` (lower case).
The audio is speech-like (voiced syllables with formants, noise bursts, pauses between words), so that
the features have the structure of speech; no model can recognise it, and none needs to.
"""

import json
import math
import os
import re
import sys
import wave
from typing import NamedTuple

from .base import DatasetError, generator_parser, layout_error, pseudo_words, run_generator

SAMPLE_RATE = 16000
CHANNELS = 1
SAMPLE_WIDTH = 2  # bytes: 16-bit PCM
MAX_SECONDS = 15.0  # MLPerf leaves longer utterances out
SUBSET = "dev-clean-wav"  # the generator's folder and manifest name, as MLPerf's conversion names them
MANIFEST_SUFFIX = "-wav.json"
TRANSCRIPT_SUFFIX = ".trans.txt"
UTTERANCE_ID = re.compile(r"^\d+-\d+-\d+$")
GENERATOR = "python -m workloads.datasets.librispeech"
EXPECTED = (
    f"a manifest <name>{MANIFEST_SUFFIX} (MLPerf's dev-clean-wav.json) or LibriSpeech folders "
    f"<speaker>/<chapter>/ holding <speaker>-<chapter>{TRANSCRIPT_SUFFIX} and <speaker>-<chapter>-<utterance>.wav "
    "(16 kHz mono 16-bit PCM)"
)


class Utterance(NamedTuple):
    path: str
    transcript: str  # lower case, as MLPerf's manifest holds it
    seconds: float


def wav_format_problem(rate, channels, width):
    """Why a WAV file with these parameters is not what the RNN-T reads, or None when it is."""
    problems = []
    if rate != SAMPLE_RATE:
        problems.append(f"sampled at {rate} Hz, not {SAMPLE_RATE} Hz")
    if channels != CHANNELS:
        problems.append(f"{channels} channels, not 1 (mono)")
    if width != SAMPLE_WIDTH:
        problems.append(f"{8 * width}-bit samples, not 16-bit")
    return ", ".join(problems) or None


def wav_seconds(path):
    """The duration of a 16 kHz mono 16-bit PCM WAV file; DatasetError naming the file when it is not one."""
    try:
        with wave.open(path, "rb") as audio:
            rate, channels, width, frames = (
                audio.getframerate(),
                audio.getnchannels(),
                audio.getsampwidth(),
                audio.getnframes(),
            )
    except FileNotFoundError:
        raise DatasetError(f"{path}: listed but missing") from None
    except (wave.Error, EOFError) as error:
        raise DatasetError(f"{path}: not a PCM WAV file ({error})") from None
    problem = wav_format_problem(rate, channels, width)
    if problem:
        raise DatasetError(
            f"{path}: {problem}; convert it first, e.g. sox {path} -r {SAMPLE_RATE} -c 1 -b 16 converted.wav"
        )
    declared = frames * channels * width
    if os.path.getsize(path) < declared + 44:  # 44: the smallest RIFF/fmt/data header
        raise DatasetError(f"{path}: truncated, its header declares {declared} bytes of samples")
    return frames / rate


def _manifest(data_dir):
    manifests = sorted(name for name in os.listdir(data_dir) if name.endswith(MANIFEST_SUFFIX))
    if len(manifests) > 1:
        raise DatasetError(f"{data_dir} holds several manifests ({', '.join(manifests)}); keep one")
    return os.path.join(data_dir, manifests[0]) if manifests else None


def _manifest_entries(path):
    """(wav path, transcript, duration) of each entry of an MLPerf manifest, in order."""
    try:
        with open(path, encoding="utf-8") as manifest:
            entries = json.load(manifest)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(f"{path}: not a JSON manifest ({error})") from None
    if not isinstance(entries, list):
        raise DatasetError(f"{path}: expected a JSON list of utterances, found {type(entries).__name__}")
    folder = os.path.dirname(path)
    for number, entry in enumerate(entries):
        try:
            first = entry["files"][0]
            fname, transcript = first["fname"], entry["transcript"]
            duration = float(first.get("duration", entry.get("original_duration", 0)))
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise DatasetError(
                f"{path}: entry {number} lacks files[0].fname, files[0].duration or transcript ({error!r})"
            ) from None
        yield os.path.join(folder, fname), transcript, duration


def _tree_entries(data_dir):
    """(wav path, transcript, None) of each utterance of LibriSpeech's tree under data_dir, in sorted order."""
    for folder, subfolders, files in os.walk(data_dir):
        subfolders.sort()
        for name in sorted(files):
            if not name.endswith(TRANSCRIPT_SUFFIX):
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, encoding="utf-8") as listing:
                    lines = listing.read().splitlines()
            except UnicodeDecodeError as error:
                raise DatasetError(f"{path}: not UTF-8 text ({error})") from None
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                utterance, _, transcript = line.partition(" ")
                if not UTTERANCE_ID.match(utterance) or not transcript.strip():
                    raise DatasetError(f"{path}:{number}: expected '<speaker>-<chapter>-<utterance> TRANSCRIPT'")
                yield os.path.join(folder, utterance + ".wav"), transcript.strip().lower(), None


def scan(data_dir, count):
    """The first ``count`` utterances of at most 15 s, each WAV file's header checked; DatasetError when
    the directory holds fewer or a file is not 16 kHz mono 16-bit PCM (the message names the file)."""
    if not os.path.isdir(data_dir):
        raise layout_error(f"data directory {data_dir} does not exist", data_dir, EXPECTED, GENERATOR)
    manifest = _manifest(data_dir)
    entries = _manifest_entries(manifest) if manifest else _tree_entries(data_dir)
    utterances, seen = [], 0
    for path, transcript, declared in entries:
        seen += 1
        if declared is not None and declared > MAX_SECONDS:
            continue  # skipped before opening, as MLPerf filters its manifest
        seconds = wav_seconds(path)
        if seconds <= MAX_SECONDS:
            utterances.append(Utterance(path, transcript, seconds))
            if len(utterances) == count:
                return utterances
    if not seen:
        raise layout_error("no utterances found", data_dir, EXPECTED, GENERATOR)
    raise DatasetError(
        f"{manifest or data_dir} lists {len(utterances)} utterances of at most {MAX_SECONDS:g} s, {count} are "
        f"needed; to write more: {GENERATOR} --out {data_dir} --utterances {count}"
    )


# --- the generator: speech-like audio and LibriSpeech's two layouts -----------------------------------------

# Common words mixed with made-up ones, so that transcripts read like text and use every letter.
_COMMON = (
    "the and of to a in that he was it his i with had as for you her but she not at him on be my they so "
    "all have this by from which were there said one we would when out what up no them an if could then "
    "into me very more little time about man some now over your only did like or great upon over know "
    "before after down should must never though jump quiz vex zeal"
).split()
_WORDS_PER_SECOND = 2.7  # LibriSpeech's reading rate
# Formant frequencies (Hz) of a few vowels: the resonances that make voiced speech.
_FORMANTS = ((730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240), (530, 1840, 2480), (570, 840, 2410))


def _synthetic_text(rng, words, seconds):
    count = max(1, int(round(seconds * _WORDS_PER_SECOND * rng.uniform(0.8, 1.2))))
    picks = []
    for _ in range(count):
        pool = _COMMON if rng.random() < 0.6 else words
        picks.append(pool[rng.integers(len(pool))])
    # An apostrophe now and then: the character set has one.
    if count > 3 and rng.random() < 0.5:
        position = rng.integers(count)
        picks[position] = picks[position] + "'s"
    return " ".join(picks)


def _synthetic_audio(rng, text, seconds):
    """int16 samples: one voiced syllable per two letters of each word, noise bursts, pauses between words."""
    import numpy as np

    total = int(round(seconds * SAMPLE_RATE))
    words = text.split()
    letters = sum(len(word) for word in words)
    pause = 0.25  # of the time goes to pauses between words
    per_letter = (1 - pause) * total / max(letters, 1)
    per_gap = pause * total / max(len(words), 1)
    signal = np.zeros(total, np.float32)
    f0 = rng.uniform(90, 220)  # the speaker's pitch
    position = int(per_gap / 2)
    for word in words:
        length = int(len(word) * per_letter)
        syllables = max(1, len(word) // 2)
        for index in range(syllables):
            start = position + index * length // syllables
            size = length // syllables
            if size < 32 or start + size > total:
                continue
            time = np.arange(size, dtype=np.float32) / SAMPLE_RATE
            pitch = f0 * (1 + 0.08 * np.sin(2 * np.pi * rng.uniform(1, 3) * time))
            phase = 2 * np.pi * np.cumsum(pitch) / SAMPLE_RATE
            formants = _FORMANTS[rng.integers(len(_FORMANTS))]
            voiced = np.zeros(size, np.float32)
            for harmonic in range(1, 16):
                frequency = harmonic * f0
                gain = sum(math.exp(-(((frequency - formant) / 150.0) ** 2)) for formant in formants) + 0.05
                voiced += gain / harmonic * np.sin(harmonic * phase)
            burst = size // 5  # a consonant: a short noise burst before the vowel
            voiced[:burst] = rng.normal(0, 0.3, burst)
            envelope = np.sin(np.pi * np.arange(size) / size) ** 0.5
            signal[start : start + size] += voiced * envelope
        position += length + int(per_gap)
    signal += rng.normal(0, 0.003, total).astype(np.float32)  # room noise
    signal *= 0.5 / max(float(np.abs(signal).max()), 1e-6)
    return (signal * 32767).astype("<i2")


def write_wav(path, samples):
    """Writes int16 samples as a 16 kHz mono 16-bit PCM WAV file."""
    with wave.open(path, "wb") as audio:
        audio.setnchannels(CHANNELS)
        audio.setsampwidth(SAMPLE_WIDTH)
        audio.setframerate(SAMPLE_RATE)
        audio.writeframes(samples.tobytes())


def generate(out_dir, count, seed=0, seconds=MAX_SECONDS, per_chapter=40):
    """Writes ``count`` utterances of ``seconds`` each in both layouts (module docstring); returns the manifest."""
    import numpy as np

    rng = np.random.default_rng(seed)
    words = pseudo_words(400, rng)
    entries = []
    chapters = {}
    for number in range(count):
        speaker, chapter = 1000 + number // (2 * per_chapter), 100000 + number // per_chapter
        utterance = f"{speaker}-{chapter}-{number % per_chapter:04d}"
        folder = f"{SUBSET}/{speaker}/{chapter}"  # "/" as in MLPerf's manifest
        os.makedirs(os.path.join(out_dir, folder), exist_ok=True)
        text = _synthetic_text(rng, words, seconds)
        samples = _synthetic_audio(rng, text, seconds)
        fname = f"{folder}/{utterance}.wav"
        write_wav(os.path.join(out_dir, fname), samples)
        chapters.setdefault(folder, []).append(f"{utterance} {text.upper()}")
        entries.append(
            {
                "files": [
                    {
                        "channels": CHANNELS,
                        "sample_rate": float(SAMPLE_RATE),
                        "bitrate": 8 * SAMPLE_WIDTH,
                        "duration": len(samples) / SAMPLE_RATE,
                        "num_samples": len(samples),
                        "encoding": "Signed Integer PCM",
                        "silent": False,
                        "fname": fname,
                        "speed": 1,
                    }
                ],
                "original_duration": len(samples) / SAMPLE_RATE,
                "original_num_samples": len(samples),
                "transcript": text,
            }
        )
    for folder, lines in chapters.items():
        speaker, chapter = folder.split("/")[-2:]
        with open(os.path.join(out_dir, folder, f"{speaker}-{chapter}{TRANSCRIPT_SUFFIX}"), "w") as listing:
            listing.write("\n".join(lines) + "\n")
    manifest = os.path.join(out_dir, SUBSET + ".json")
    with open(manifest, "w", encoding="utf-8") as out:
        json.dump(entries, out, indent=1)
    return manifest


def main(argv=None):
    parser = generator_parser(
        "librispeech",
        __doc__.split("\n")[0],
        "--utterances",
        1200,
        "15-second utterances to write (Samani et al. 2022: 1,200)",
    )
    parser.add_argument("--seconds", type=float, default=MAX_SECONDS, help="length of each utterance (at most 15)")
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be above 0 and at most {MAX_SECONDS:g}, got {args.seconds}")
    return run_generator(args, lambda: generate(args.out, args.utterances, args.seed, args.seconds))


if __name__ == "__main__":
    sys.exit(main())
