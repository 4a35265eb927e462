"""The speech app's pre-processing: WAV bytes -> log-mel filterbank features, in numpy.

The steps and settings are those MLPerf's RNN-T reference documents (speech_recognition/rnnt,
rnnt.toml ``[input_eval]``): pre-emphasis 0.97; 20 ms Hann windows every 10 ms, zero-padded to a
512-point FFT (frames centred, the signal reflected at its ends); power spectrum plus the square of the
1e-5 dither; 80 mel filters (Slaney's mel scale and area normalisation, 0 to 8 kHz); natural log;
every 3 frames spliced into one of 240 features and only every third kept (30 ms a frame); each
feature normalised to zero mean and unit variance over the utterance. Imported by the app's
``preprocess``; numpy only, no framework.
"""

import io
import wave

import numpy as np

from ...datasets.librispeech import SAMPLE_RATE, wav_format_problem

PREEMPHASIS = 0.97
WINDOW = 320  # 20 ms
HOP = 160  # 10 ms
N_FFT = 512
MELS = 80
DITHER = 1e-5
SPLICE = 3
FEATURES = MELS * SPLICE  # the encoder's input width
NORMALISE_EPSILON = 1e-5
LOG_FLOOR = 1e-20


def decode_wav(data):
    """float32 samples in [-1, 1) of a 16 kHz mono 16-bit PCM WAV file's bytes; ValueError saying why not."""
    try:
        with wave.open(io.BytesIO(data), "rb") as audio:
            problem = wav_format_problem(audio.getframerate(), audio.getnchannels(), audio.getsampwidth())
            if problem:
                raise ValueError(f"WAV file {problem}")
            frames = audio.getnframes()
            pcm = audio.readframes(frames)
    except (wave.Error, EOFError) as error:
        raise ValueError(f"not a PCM WAV file ({error})") from None
    if len(pcm) != 2 * frames:
        raise ValueError(f"truncated WAV file: {len(pcm) // 2} of its {frames} samples are there")
    return np.frombuffer(pcm, "<i2").astype(np.float32) / 32768.0


def _hz_to_mel(hz):
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, np.float64)
    linear = hz / (200.0 / 3)
    step = np.log(6.4) / 27.0
    return np.where(hz >= 1000.0, 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / step, linear)


def _mel_to_hz(mel):
    mel = np.asarray(mel, np.float64)
    step = np.log(6.4) / 27.0
    return np.where(mel >= 15.0, 1000.0 * np.exp(step * (mel - 15.0)), mel * (200.0 / 3))


def mel_filterbank(mels=MELS, n_fft=N_FFT, rate=SAMPLE_RATE):
    """(mels, n_fft // 2 + 1) triangular filters, each scaled to unit area (Slaney normalisation)."""
    bins = np.linspace(0, rate / 2, n_fft // 2 + 1)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(rate / 2), mels + 2))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins - lower) / (centre - lower)
    falling = (upper - bins) / (upper - centre)
    filters = np.maximum(0.0, np.minimum(rising, falling))
    return (filters * (2.0 / (upper - lower))).astype(np.float32)


def _window():
    """The 20 ms symmetric Hann window, centred in the 512-point frame."""
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WINDOW) / (WINDOW - 1))
    padded = np.zeros(N_FFT, np.float32)
    left = (N_FFT - WINDOW) // 2
    padded[left : left + WINDOW] = hann
    return padded


_FILTERBANK = mel_filterbank()
_WINDOW = _window()


def frame_count(samples):
    """Feature frames of an utterance of ``samples`` samples, after splicing: ceil(ceil(samples / 160) / 3),
    MLPerf's sequence length (the frame centred past the last sample is dropped)."""
    hops = (samples + HOP - 1) // HOP
    return (hops + SPLICE - 1) // SPLICE


def log_mel(samples):
    """(frames, 240) float32 features of one utterance's samples (module docstring)."""
    emphasised = np.concatenate([samples[:1], samples[1:] - PREEMPHASIS * samples[:-1]])
    padded = np.pad(emphasised, N_FFT // 2, mode="reflect")
    count = 1 + (len(padded) - N_FFT) // HOP
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP][:count]
    spectrum = np.fft.rfft(frames * _WINDOW, axis=1)
    power = spectrum.real**2 + spectrum.imag**2 + DITHER**2
    energies = np.log(power.astype(np.float32) @ _FILTERBANK.T + LOG_FLOOR)  # (frames, mels)
    # Splice: frame t carries frames t, t+1, t+2 (zeros past the end); keep every third.
    spliced = np.zeros((count, FEATURES), np.float32)
    for offset in range(SPLICE):
        spliced[: count - offset, offset * MELS : (offset + 1) * MELS] = energies[offset:]
    spliced = spliced[::SPLICE][: frame_count(len(samples))]
    mean = spliced.mean(axis=0)
    std = spliced.std(axis=0, ddof=1) if len(spliced) > 1 else np.zeros_like(mean)
    return (spliced - mean) / (std + NORMALISE_EPSILON)


def features_of_wav(data):
    """WAV bytes -> (frames, 240) float32 log-mel features: the whole pre-processing of one request."""
    return log_mel(decode_wav(data))
