"""The attention explorer as one import name: its engine (`attention_explorer.models`), its runs, experiments and
figures (`attention_explorer.explorer`), the Streamlit app (`attention_explorer.app`), the console command
(`attention-explorer`, `attention_explorer.cli`) and a notebook API (`attention_explorer.api`):

    import attention_explorer as ae
    run = ae.run("minilm", "The cat sat on the mat")
    run.attention(0, 3)            # layer 0, head 3 (counted from 0): a numpy (T, T) array
    run.figure("heatmap", layer=0, head=3)

Installed from a wheel, `explorer/`, `models/` and `app.py` sit inside this package, so a user's own `models/` or
`explorer/` folder never shadows them. In a clone they sit beside this folder, at the repository's top level, and the
package reaches them there (below): the same import names either way.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
if not (_HERE / "explorer").is_dir():  # a clone: explorer/, models/ and app.py are the repository's top level
    __path__.append(str(_HERE.parent))  # noqa: F821 -- a package's own __path__

__version__ = "0.1.0"

# the notebook API, imported on first use: `import attention_explorer` stays quick (no torch until a run)
# (not "models": that name is the engine, attention_explorer.models, once anything has imported it)
_API = ("run", "show", "save", "list_models", "Run")
_CORPORA = ("corpus", "corpus_points")  # the API over many texts: attention_explorer.corpora


def __getattr__(name: str):
    if name in _API:
        from attention_explorer import api

        return getattr(api, name)
    if name in _CORPORA:
        from attention_explorer import corpora

        return getattr(corpora, name)
    raise AttributeError(f"module 'attention_explorer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, *_CORPORA])
