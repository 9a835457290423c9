"""The teacher's caps: token caps, model lists and memory sizes read from the environment, each bad value a one-line
error; `attention-explorer serve` turns its flags into those variables and refuses a bad one before Streamlit starts."""

from __future__ import annotations

import os

import pytest

from attention_explorer import cli
from attention_explorer.explorer.run import caps
from attention_explorer.explorer.run.caps import Caps

GIB = 2**30
KNOWN = ("minilm", "smollm2", "translate", "folder:mine")


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("12GB", 12 * 10**9),
        ("12gb", 12 * 10**9),
        ("12G", 12 * GIB),
        ("1.5GiB", 3 * GIB // 2),
        ("8000MB", 8 * 10**9),
        ("512MiB", 512 * 2**20),
        (" 2 TB ", 2 * 10**12),
        ("4096", 4096),
        ("50%", 8 * GIB),
        ("100%", 16 * GIB),
        ("12.5 %", 2 * GIB),
    ],
)
def test_a_memory_size_is_read_in_bytes_and_a_share_of_the_total(text, size):
    assert caps.parse_memory(text, 16 * GIB) == size


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("12XB", "'12XB' is not a memory size like 12GB, 12G, 8000MB, 1.5GiB or 50%"),
        ("", "'' is not a memory size"),
        ("-1GB", "'-1GB' is not a memory size"),
        ("twelve", "'twelve' is not a memory size"),
        ("150%", "'150%' is not a share of the memory from above 0% to 100%"),
        ("0%", "'0%' is not a share of the memory"),
        ("0GB", "'0GB' is no memory at all"),
    ],
)
def test_a_bad_memory_size_is_one_line_saying_what_a_size_looks_like(text, message):
    with pytest.raises(ValueError) as error:
        caps.parse_memory(text, 16 * GIB)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_the_total_memory_is_this_machines_at_most():
    total = caps.total_memory()
    assert 0 < total <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_a_model_list_keeps_the_teachers_order_and_drops_repeats():
    assert caps.parse_models(" translate, minilm,,translate ,folder:mine", KNOWN) == (
        "translate",
        "minilm",
        "folder:mine",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("minilm,gpt-9", "unknown model 'gpt-9'; choose from minilm, smollm2, translate, folder:mine"),
        (" , ", "names no model; give keys separated by commas, e.g. minilm,translate"),
    ],
)
def test_an_unknown_model_is_named_with_the_known_ones(text, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        caps.parse_models(text, KNOWN)


@pytest.mark.parametrize("text", ["2", "0", "-5", "12.5", "many", "", "１２"])
def test_a_token_cap_is_a_whole_number_from_three(text):
    with pytest.raises(ValueError, match="is not a whole number of tokens from 3 up"):
        caps.parse_tokens(text)


def test_the_environment_sets_every_cap_and_names_the_variable_of_a_bad_one():
    environ = {"EXPLORER_MAX_TOKENS": "512", "EXPLORER_MODELS": "smollm2,minilm", "EXPLORER_MEMORY_BUDGET": "25%"}
    assert caps.from_environ(environ, KNOWN, 16 * GIB) == Caps(512, ("smollm2", "minilm"), 4 * GIB)
    assert caps.from_environ({"EXPLORER_MAX_TOKENS": " "}, KNOWN) == Caps(None, None, None)  # blank: no cap
    with pytest.raises(ValueError, match="^EXPLORER_MODELS: unknown model 'gpt-9'; choose from minilm, "):
        caps.from_environ({"EXPLORER_MODELS": "gpt-9"}, KNOWN)
    with pytest.raises(ValueError, match="^EXPLORER_MAX_TOKENS: '2' is not"):
        caps.from_environ({"EXPLORER_MAX_TOKENS": "2"}, KNOWN)


def test_without_known_keys_the_list_is_checked_against_the_catalogue_the_environment_builds(gpt2_folder):
    environ = {"EXPLORER_MODEL_FOLDERS": f"tiny={gpt2_folder}", "EXPLORER_MODELS": "folder:tiny,translate"}
    assert caps.from_environ(environ).models == ("folder:tiny", "translate")
    with pytest.raises(ValueError, match="'folder:tiny'"):
        caps.from_environ({"EXPLORER_MODELS": "folder:tiny"})


def test_the_caps_cap_tokens_say_why_and_offer_the_listed_models_in_order():
    capped = Caps(max_tokens=100, models=("translate", "minilm"))
    assert (capped.tokens(512), capped.tokens(64)) == (100, 64)
    assert capped.stops_at(512) == (
        "At most 100 tokens here: this server's cap for each visitor (serve --max-tokens); the model itself reads up "
        "to 512."
    )
    assert capped.stops_at(100) is None and capped.stops_at(64) is None  # the model's own limit: nothing to explain
    assert capped.offered({"minilm": 1, "smollm2": 2, "translate": 3}) == ["translate", "minilm"]
    assert Caps().offered({"minilm": 1, "smollm2": 2}) == ["minilm", "smollm2"] and Caps().tokens(512) == 512


def test_current_reads_the_environment_again_once_its_cache_is_cleared(monkeypatch):
    monkeypatch.setenv("EXPLORER_MAX_TOKENS", "64")
    caps.current.cache_clear()
    try:
        assert caps.current().max_tokens == 64
        monkeypatch.setenv("EXPLORER_MAX_TOKENS", "80")
        assert caps.current().max_tokens == 64  # once per process
        caps.current.cache_clear()
        assert caps.current().max_tokens == 80
    finally:
        monkeypatch.delenv("EXPLORER_MAX_TOKENS")
        caps.current.cache_clear()


def environment(*argv: str, **environ: str) -> dict[str, str]:
    return cli.serve_environment(cli.serve_parser().parse_args(list(argv)), environ)


def test_serve_flags_set_the_variables_and_override_the_environment():
    env = environment("--max-tokens", "256", "--models", "translate, minilm", EXPLORER_MAX_TOKENS="512")
    assert (env["EXPLORER_MAX_TOKENS"], env["EXPLORER_MODELS"]) == ("256", "translate,minilm")
    assert "EXPLORER_MEMORY_BUDGET" not in env
    assert environment("--memory-budget", " 12GB")["EXPLORER_MEMORY_BUDGET"] == "12GB"


def test_without_a_flag_the_variable_passes_through_as_make_run_gives_it():
    env = environment(EXPLORER_MAX_TOKENS="512", EXPLORER_MODELS="minilm", EXPLORER_MEMORY_BUDGET="50%", HOME="/x")
    assert (env["EXPLORER_MAX_TOKENS"], env["EXPLORER_MODELS"], env["EXPLORER_MEMORY_BUDGET"]) == (
        "512",
        "minilm",
        "50%",
    )
    assert env["HOME"] == "/x" and env["HF_HUB_OFFLINE"] == "1"


def test_models_added_with_model_can_be_listed(gpt2_folder):
    env = environment("--model", f"tiny={gpt2_folder}", "--models", "folder:tiny,minilm")
    assert env["EXPLORER_MODELS"] == "folder:tiny,minilm"
    assert env["EXPLORER_MODEL_FOLDERS"] == f"tiny={gpt2_folder.resolve()}"


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--max-tokens", "2"], {}, "error: --max-tokens: '2' is not a whole number of tokens from 3 up"),
        (["--models", "minilm,gpt-9"], {}, "error: --models: unknown model 'gpt-9'; choose from minilm, smollm2, "),
        (["--memory-budget", "lots"], {}, "error: --memory-budget: 'lots' is not a memory size like 12GB"),
        ([], {"EXPLORER_MODELS": "gpt-9"}, "error: EXPLORER_MODELS: unknown model 'gpt-9'; choose from minilm, "),
        ([], {"EXPLORER_MEMORY_BUDGET": "200%"}, "error: EXPLORER_MEMORY_BUDGET: '200%' is not a share of the memory"),
        (["--model", "/no/such/folder"], {}, "error: --model '/no/such/folder': /no/such/folder is not a model folder"),
    ],
)
def test_serve_refuses_a_bad_value_in_one_line_before_streamlit_starts(capsys, monkeypatch, argv, environ, message):
    for name, value in environ.items():
        monkeypatch.setenv(name, value)

    def started(*_):  # a value let through would otherwise replace this test process with Streamlit
        raise AssertionError("serve started Streamlit")

    monkeypatch.setattr(cli.os, "execve", started)
    monkeypatch.setattr(cli.subprocess, "call", started)
    assert cli.serve(argv) == 2  # as argparse exits; a good value would have started Streamlit in this process
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(message) and captured.err.count("\n") == 1
