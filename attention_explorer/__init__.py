"""The attention explorer as one import name: its engine (`attention_explorer.models`), its runs, experiments and
figures (`attention_explorer.explorer`), the Streamlit app (`attention_explorer.app`) and a notebook API.

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
