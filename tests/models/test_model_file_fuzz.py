"""Model files read with bounds: thousands of truncated, bit-flipped and huge-count variants of a real (tiny) GGUF file
and a real safetensors folder, each read by the doors a user's file goes through (models.gguf.architecture, which the
Ours vs transformers page reads first; models.pretrained.load_path, which the CLI, the API and the app's
EXPLORER_MODELS use), each finishing in time with one clear error (GGUFError / ModelFolderError naming the file) or a
load; nothing hangs and no other exception type escapes. Seeded (random.Random), so every run reads the same files.
Plus the bugs found by hand, each as its own test."""

from __future__ import annotations

import json
import random
import shutil
import signal
import struct
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from attention_explorer.models import gguf
from attention_explorer.models.gguf_header import header
from attention_explorer.models.pretrained import ModelFolderError, load_path
from tests.folders import make_llama_folder
from tests.gguf_file import write_gguf

SEED = 52
# how long one variant may take: an error comes at once (well under a second of CPU); a whole load of the tiny model,
# on a busy shared machine, in a few; HANG is the wall-clock alarm that turns a hang into a failure of this test
ERROR_CPU_S = 1.0
HANG_S = 30.0
HUGE = (2**64 - 1, 2**63, 2**62, 2**60, 2**40, 2**32, 2**31)
TINY = dict(hidden_size=32, heads=2, kv_heads=1, intermediate=32, layers=1, positions=16)


class Hung(Exception):
    pass


@contextmanager
def alarm(seconds: float):
    """A Hung exception in this thread if the block runs longer than `seconds` (a loop over a hostile count)."""

    def ring(*_):
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """A tiny Llama folder (safetensors) and the same model as a GGUF file (F32 matrices: every bit of a weight is a
    float32's); their bytes."""
    root = tmp_path_factory.mktemp("fuzz")
    folder = make_llama_folder(root / "llama", **TINY)
    path = write_gguf(folder, root / "tiny.gguf", kind="F32")
    return folder, path.read_bytes(), (folder / "model.safetensors").read_bytes()


def gguf_counts(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of every count and length in a GGUF header: the tensor and metadata counts, each key's and
    string's length, each array's length and item type, each value's type, each tensor's name length, number of
    dimensions, dimensions and offset (read with the reader under test's own walk, recording where it read)."""
    from attention_explorer.models import gguf_header

    found: list[tuple[int, int]] = []

    class Recording(gguf_header._Header):
        def number(self, size, what):
            found.append((self.at, size))
            return super().number(size, what)

    path = Path("/dev/shm" if Path("/dev/shm").is_dir() else "/tmp") / f"fuzz-{id(found)}.gguf"
    path.write_bytes(data)
    try:
        reader = Recording(path)
        tensors, count = reader.start()
        fields = reader.metadata(count)
        reader.tensors(tensors, fields.get("general.alignment", gguf_header.Field(4, None, 32)).value)
        reader.close()
    finally:
        path.unlink()
    return found


def variants(data: bytes, counts: list[tuple[int, int]], n: int, header_end: int, rng: random.Random):
    """(name, bytes): truncations (the first 400 lengths, then n / 4 samples of the rest), n single bit flips (most in
    the header, where a flip changes what is read; some in the weights), huge values in n / 4 of the counts and
    lengths (the first ten always: the file's own counts and the first keys')."""
    cuts = set(range(0, min(header_end, 400))) | set(rng.sample(range(len(data)), min(n // 4, len(data))))
    for cut in sorted(cuts):
        yield f"truncated to {cut}", data[:cut]
    for _ in range(n):
        at = rng.randrange(header_end) if rng.random() < 0.9 else rng.randrange(len(data))
        flipped = bytearray(data)
        flipped[at] ^= 1 << rng.randrange(8)
        yield f"bit flipped at {at}", bytes(flipped)
    for at, width in counts[:10] + rng.sample(counts[10:], min(n // 4, len(counts) - 10)):
        for value in rng.sample(HUGE, 3):
            changed = bytearray(data)
            changed[at : at + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
            yield f"{value} written at {at}", bytes(changed)


def read(what: str, action) -> tuple[str, float]:
    """Run one reading under the alarm: ("ok" or the error's first line, CPU seconds); any other exception fails."""
    start = time.process_time()
    try:
        with alarm(HANG_S):
            action()
    except (gguf.GGUFError, ModelFolderError) as e:
        spent = time.process_time() - start
        message = str(e)
        assert "\n" not in message.strip(), f"{what}: more than one line: {message!r}"
        assert spent < ERROR_CPU_S, f"{what}: the error took {spent:.2f} CPU s: {message}"
        return message, spent
    except Hung:
        pytest.fail(f"{what}: hung")
    except Exception as e:  # noqa: BLE001 -- the point of the test: no other type may escape
        pytest.fail(f"{what}: {type(e).__name__}: {e}")
    return "ok", time.process_time() - start


def loaded(result) -> None:
    model, tokenizer, _ = result
    assert model.config.vocab_size == tokenizer.vocab_size


def test_gguf_variants_give_a_clear_error_or_a_load(originals, tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))
    _, data, _ = originals
    counts = gguf_counts(data)
    header_end = max(at + width for at, width in counts)
    rng, outcomes, path = random.Random(SEED), {"ok": 0, "error": 0}, tmp_path / "variant.gguf"
    started = time.monotonic()
    for i, (what, variant) in enumerate(variants(data, counts, 560, header_end, rng)):
        path.write_bytes(variant)
        read(what, lambda: gguf.architecture(path))
        # the full load for a sample of them (the dequantized cache makes each a folder on disk)
        whole = i % 5 == 0
        message, _ = read(what, lambda: loaded(load_path(path)) if whole else gguf.describe(path))  # noqa: B023
        outcomes["ok" if message == "ok" else "error"] += 1
        if message != "ok":
            assert str(path) in message, f"{what}: the error does not name the file: {message}"
    total = sum(outcomes.values())
    print(f"GGUF: {total} variants of {len(data)} bytes, {outcomes}, {time.monotonic() - started:.1f} s")
    assert total > 1500 and outcomes["error"] > total / 2 and outcomes["ok"] > 0


def test_safetensors_variants_give_a_clear_error_or_a_load(originals, tmp_path):
    folder, _, data = originals
    copy = tmp_path / "folder"
    shutil.copytree(folder, copy)
    length = int.from_bytes(data[:8], "little")
    counts = [(0, 8)]  # the header's length; the rest of the header is JSON, mutated as text below
    rng, outcomes = random.Random(SEED), {"ok": 0, "error": 0}
    started = time.monotonic()
    produced = list(variants(data, counts * 40, 600, 8 + length, rng))
    produced += list(json_variants(data, length, rng))
    for what, variant in produced:
        (copy / "model.safetensors").write_bytes(variant)
        message, _ = read(what, lambda: loaded(load_path(copy)))
        outcomes["ok" if message == "ok" else "error"] += 1
        if message != "ok":
            assert "model.safetensors" in message or str(copy) in message, f"{what}: {message}"
    total = sum(outcomes.values())
    print(f"safetensors: {total} variants of {len(data)} bytes, {outcomes}, {time.monotonic() - started:.1f} s")
    assert total > 1000 and outcomes["error"] > total / 2


def json_variants(data: bytes, length: int, rng: random.Random):
    """The safetensors header's JSON with one tensor's shape, offsets or dtype replaced by a huge, negative or
    mistyped value (each re-encoded with the right header length)."""
    head = json.loads(data[8 : 8 + length])
    body = data[8 + length :]
    names = [n for n in head if n != "__metadata__"]
    replacements = {
        "shape": [[2**62], [2**40, 2**40], [-1], ["8"], 7, [1.5], []],
        "data_offsets": [[0, 2**63], [-4, 0], [10, 2], [0], "0,4", [0, len(body) + 4]],
        "dtype": ["F33", 3, None, "I64"],
    }
    for field, values in replacements.items():
        for value in values:
            for name in rng.sample(names, min(4, len(names))):
                changed = json.loads(json.dumps(head))
                changed[name][field] = value
                raw = json.dumps(changed).encode()
                yield f"{name}.{field} = {value!r}", struct.pack("<Q", len(raw)) + raw + body


# the bugs found by reading the code, each kept shut by name


def raw_gguf(tmp_path: Path, *parts: bytes) -> Path:
    path = tmp_path / "hostile.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<I", 3) + b"".join(parts))
    return path


def quick(action) -> str:
    """The GGUFError the action raises, within a second of CPU, as one line."""
    start = time.process_time()
    with alarm(HANG_S), pytest.raises(gguf.GGUFError) as raised:
        action()
    assert time.process_time() - start < ERROR_CPU_S
    assert "\n" not in str(raised.value)
    return str(raised.value)


@pytest.mark.parametrize("reader", [gguf.architecture, gguf.describe])
def test_a_24_byte_file_declaring_2_62_fields_is_refused_at_once(tmp_path, reader):
    path = raw_gguf(tmp_path, struct.pack("<QQ", 0, 2**62))
    assert "the metadata count is 4611686018427387904" in quick(lambda: reader(path))


@pytest.mark.parametrize("reader", [gguf.architecture, gguf.describe])
def test_an_array_of_2_60_items_is_refused_at_once(tmp_path, reader):
    key = b"general.name"
    path = raw_gguf(tmp_path, struct.pack("<QQQ", 0, 1, len(key)), key, struct.pack("<IIQ", 9, 0, 2**60))
    assert "the length of general.name is 1152921504606846976" in quick(lambda: reader(path))


@pytest.mark.parametrize("length", [2**40, 2**63, 2**64 - 1])
def test_a_key_length_past_the_file_is_refused(tmp_path, length):
    path = raw_gguf(tmp_path, struct.pack("<QQQ", 0, 1, length), b"general.architecture")
    assert "the length of metadata key #0" in quick(lambda: gguf.architecture(path))


def test_embedding_length_stored_as_a_string_is_named(originals, tmp_path, monkeypatch):
    import gguf as gguf_package

    folder, _, _ = originals
    as_text = lambda writer, n: writer.add_string(f"{writer.arch}.embedding_length", str(n))
    monkeypatch.setattr(gguf_package.GGUFWriter, "add_embedding_length", as_text)
    path = write_gguf(folder, tmp_path / "text.gguf")
    message = quick(lambda: gguf.describe(path))
    assert message == f"{path}'s llama.embedding_length is not an integer (value type 8)"
    with pytest.raises(ModelFolderError, match="llama.embedding_length is not an integer"):
        load_path(path)


def test_a_pickled_bin_refused_by_weights_only_is_a_model_folder_error(originals, tmp_path):
    folder, _, _ = originals
    copy = tmp_path / "pickled"
    shutil.copytree(folder, copy)
    (copy / "model.safetensors").unlink()
    torch.save({"weight": torch.zeros(2), "code": Path("/")}, copy / "pytorch_model.bin")  # a PosixPath: refused
    with pytest.raises(ModelFolderError, match=r"cannot read pytorch_model\.bin in .*pickled"):
        load_path(copy)


def test_the_real_header_reads_within_bounds(originals):
    """The walk under test reads the tiny file's header to the end: every field, the tensor table."""
    folder, data, _ = originals
    found = header(Path(folder.parent / "tiny.gguf"))
    assert found["general.architecture"].value == "llama" and found["llama.embedding_length"].value == 32


@pytest.fixture
def hostile(tmp_path) -> Path:
    """The 24-byte GGUF that declares 2**62 metadata fields (models.gguf's own reader looped over zeros forever)."""
    return raw_gguf(tmp_path, struct.pack("<QQ", 0, 2**62))


def test_the_cli_says_one_line_and_exits_2(hostile, capsys):
    from attention_explorer.explorer.__main__ import main

    with alarm(HANG_S):
        assert main(["export", "--model", str(hostile), "--text", "a b"]) == 2
    said = capsys.readouterr().err.strip()
    assert said.startswith("error: ") and "\n" not in said and str(hostile) in said and "metadata count" in said


def test_the_api_raises_one_value_error(hostile):
    import attention_explorer as ae

    with alarm(HANG_S), pytest.raises(ValueError, match=r"metadata count is 4611686018427387904") as raised:
        ae.run(hostile, "a b")
    assert str(hostile) in str(raised.value) and "\n" not in str(raised.value)


def test_the_app_names_the_file_and_keeps_serving(hostile, monkeypatch):
    from attention_explorer.models import registry
    from tests.app import new_app
    from tests.figdata import plain

    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"hostile={hostile}"}))
    with alarm(HANG_S):
        at = new_app().run()
        at.sidebar.selectbox[0].set_value("folder:hostile").run()
    assert not at.exception
    said = plain(at.error[0].value)
    assert "could not be loaded" in said and "metadata count is 4611686018427387904" in said
