"""inference_e2e's SR app: LibriSpeech WAV files in MLPerf's and LibriSpeech's layouts, log-mel features, the RNN-T."""

import io
import json
import os
import shutil
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from workloads.datasets import librispeech
from workloads.datasets.base import DatasetError
from workloads.inference_e2e.apps import _audio, _rnnt
from workloads.inference_e2e.apps.base import get_app

SR = get_app("sr")
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """Three generated utterances of 1 s in both layouts (the study's are 15 s: the format is the same)."""
    folder = tmp_path_factory.mktemp("librispeech")
    librispeech.generate(str(folder), 3, seed=1, seconds=1.0)
    return folder


def test_generated_set_round_trips_through_both_layouts(speech, tmp_path):
    manifest = json.loads((speech / "dev-clean-wav.json").read_text())
    by_manifest = librispeech.scan(str(speech), 3)
    assert [os.path.relpath(u.path, speech) for u in by_manifest] == [e["files"][0]["fname"] for e in manifest]
    assert [u.transcript for u in by_manifest] == [e["transcript"] for e in manifest]
    assert all(u.seconds == 1.0 for u in by_manifest)
    assert set("".join(u.transcript for u in by_manifest)) <= set(_rnnt.LABELS)
    # Without the manifest, LibriSpeech's tree (.trans.txt beside the WAV files) gives the same utterances.
    tree = tmp_path / "LibriSpeech" / "dev-clean"
    shutil.copytree(speech / "dev-clean-wav", tree)
    assert [u._replace(path=os.path.relpath(u.path, tree)) for u in librispeech.scan(str(tmp_path), 3)] == [
        u._replace(path=os.path.relpath(u.path, speech / "dev-clean-wav")) for u in by_manifest
    ]
    requests = SR.load(str(speech), 2)
    assert [request.source for request in requests] == [u.path for u in by_manifest[:2]]
    assert requests[0].data == open(by_manifest[0].path, "rb").read()  # noqa: SIM115 - read once


def test_too_few_or_too_long_utterances_are_refused_with_the_generator(speech, tmp_path):
    with pytest.raises(DatasetError, match=r"lists 3 utterances.*--utterances 4"):
        SR.validate(str(speech), 4)
    with pytest.raises(DatasetError, match="no utterances found.*python -m workloads.datasets.librispeech"):
        SR.validate(str(tmp_path), 1)
    # MLPerf leaves utterances over 15 s out.
    long = tmp_path / "long"
    long.mkdir()
    librispeech.write_wav(str(long / "1-2-0000.wav"), np.zeros(16 * 16000, "<i2"))
    (long / "1-2.trans.txt").write_text("1-2-0000 A LONG ONE\n")
    with pytest.raises(DatasetError, match="0 utterances of at most 15 s"):
        SR.validate(str(long), 1)


def _copy_set(speech, tmp_path):
    target = tmp_path / "set"
    shutil.copytree(speech, target)
    return target, librispeech.scan(str(target), 3)


def test_a_wav_file_at_8_khz_is_named_with_the_reason(speech, tmp_path):
    folder, utterances = _copy_set(speech, tmp_path)
    bad = utterances[1].path
    with wave.open(bad, "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(2)
        audio.setframerate(8000)
        audio.writeframes(np.zeros(8000, "<i2").tobytes())
    with pytest.raises(DatasetError, match=rf"{bad}: sampled at 8000 Hz, not 16000 Hz; convert it first"):
        SR.validate(str(folder), 3)
    with pytest.raises(ValueError, match="sampled at 8000 Hz"):
        SR.preprocess(open(bad, "rb").read())  # noqa: SIM115


def test_truncated_stereo_and_foreign_files_are_named_with_the_reason(speech, tmp_path):
    folder, utterances = _copy_set(speech, tmp_path)
    data = open(utterances[0].path, "rb").read()  # noqa: SIM115
    with open(utterances[0].path, "wb") as out:
        out.write(data[:1000])
    with pytest.raises(DatasetError, match=rf"{utterances[0].path}: truncated"):
        SR.validate(str(folder), 1)
    with pytest.raises(ValueError, match="truncated WAV file"):
        SR.preprocess(data[:1000])
    with open(utterances[0].path, "wb") as out:
        out.write(b"ID3\x03 an mp3 file")
    with pytest.raises(DatasetError, match=rf"{utterances[0].path}: not a PCM WAV file"):
        SR.validate(str(folder), 1)
    with wave.open(utterances[0].path, "wb") as audio:
        audio.setnchannels(2)
        audio.setsampwidth(1)
        audio.setframerate(16000)
        audio.writeframes(bytes(3200))
    with pytest.raises(DatasetError, match="2 channels, not 1 \\(mono\\), 8-bit samples, not 16-bit"):
        SR.validate(str(folder), 1)
    os.remove(utterances[2].path)
    (folder / "dev-clean-wav.json").write_text("[{}]")
    with pytest.raises(DatasetError, match=r"dev-clean-wav.json: entry 0 lacks files\[0\].fname"):
        SR.validate(str(folder), 1)


def test_features_are_mlperf_shaped_and_hear_the_pitch():
    assert _audio.frame_count(240000) == 500  # 15 s: MLPerf's ceil(ceil(240000 / 160) / 3)
    time = np.arange(16000) / 16000
    tone = (0.3 * np.sin(2 * np.pi * 1000 * time) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as audio:
        audio.setnchannels(librispeech.CHANNELS)
        audio.setsampwidth(librispeech.SAMPLE_WIDTH)
        audio.setframerate(librispeech.SAMPLE_RATE)
        audio.writeframes(tone.tobytes())
    features = SR.preprocess(buffer.getvalue())
    assert features.shape == (_audio.frame_count(16000), 240) and features.dtype == np.float32
    assert np.allclose(features.mean(0), 0, atol=1e-4)
    # Before normalisation, the loudest mel filter of a 1 kHz tone is the one centred nearest 1 kHz.
    energies = np.log(
        np.abs(np.fft.rfft(tone[4000:4512] / 32768.0 * _audio._WINDOW)) ** 2 @ _audio._FILTERBANK.T + 1e-20
    )
    centres = np.argmax(_audio._FILTERBANK, axis=1) * 16000 / 512
    assert abs(centres[np.argmax(energies)] - 1000) < 100


def test_rnnt_transcribes_a_padded_batch_row_by_row_into_the_character_set(speech):
    requests = SR.load(str(speech), 2)
    features = [SR.preprocess(request.data) for request in requests]
    features[1] = features[1][:20]  # a shorter request: the batch is padded
    model = SR.build_model("small", seed=0, device="cpu")
    outputs = SR.infer(model, features)
    encoder_frames = [-(-len(rows) // 2) for rows in features]
    # One character per 60 ms encoder frame (apps/_rnnt.py), whatever the padding.
    assert [len(output) for output in outputs] == encoder_frames
    assert SR.infer(model, [features[1]]) == [outputs[1]]
    texts = [SR.postprocess(output) for output in outputs]
    assert all(set(text) <= set(_rnnt.LABELS) for text in texts) and len(texts[0]) == encoder_frames[0]
    assert SR.infer(SR.build_model("small", seed=0, device="cpu"), features) == outputs  # seeded
    assert SR.describe(model)["parameters"] == sum(p.numel() for p in model.parameters())


# In a fresh process, as the workload counts: torch's FLOP counter loads torch._dynamo, which cannot
# import beside the Ansible loaded in the test process (tests/unit/test_flops.py).
COUNT_FLOPS = """
import json, sys
import numpy as np
from workloads.inference_e2e.apps.base import get_app
from workloads.inference_e2e.apps import _rnnt
app = get_app("sr")
model = app.build_model("small", 0, "cpu")
features = np.random.default_rng(0).standard_normal((50, 240)).astype(np.float32)
print(json.dumps({"counted": app.forward_flops(model, features), "frames": len(features)}))
"""


def test_flops_count_the_encoder_and_every_decoding_step():
    process = subprocess.run([sys.executable, "-c", COUNT_FLOPS], cwd=REPO_ROOT, capture_output=True, text=True)
    assert process.returncode == 0, process.stderr
    result = json.loads(process.stdout)
    size, frames = _rnnt.SIZES["small"], result["frames"]
    hidden, prediction, joint = size.encoder_hidden, size.prediction_hidden, size.joint_hidden

    def lstm(inputs, width, layers, steps):
        return 2 * 4 * width * (inputs + width + (layers - 1) * 2 * width) * steps

    encoder = lstm(240, hidden, size.pre_layers, frames) + lstm(2 * hidden, hidden, size.post_layers, frames // 2)
    steps = frames // 2  # one character a 60 ms frame
    decoding = (
        2 * hidden * joint * steps  # the encoder's half of the joint, once a frame
        + steps * (2 * prediction * joint + 2 * joint * (len(_rnnt.LABELS) + 1))  # joint per step
        + (steps + 1) * (lstm(prediction, prediction, size.prediction_layers, 1) + 2 * prediction * joint)
    )
    assert result["counted"] == pytest.approx(encoder + decoding, rel=0.02)


def test_model_sizes_and_mlperfs_parameter_count():
    assert SR.sizes == tuple(_rnnt.SIZES) and SR.sizes[0] == "small"
    large = _rnnt.Rnnt(_rnnt.SIZES["large"])  # constructed, not run
    # MLPerf's README: "The model has 45.3 million parameters".
    assert round(sum(p.numel() for p in large.parameters()) / 1e6, 1) == 45.3
    tiny = _rnnt.build("tiny", 0)
    assert len(tiny(torch.zeros(1, 8, 240), torch.tensor([8]))[0]) == 4
