"""Attention explorer: Streamlit entry point (shared sidebar, then the chosen page)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from installed packages and local folders only
# torch's OpenMP threads sleep between parallel regions instead of spinning: the same numbers, and a new sentence
# costs the server ~0.05 CPU s instead of ~0.15-0.3 (python -m bench load); set before torch is first imported
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import streamlit as st  # noqa: E402

from attention_explorer.explorer.run import memo  # noqa: E402

memo.limit_malloc_arenas()  # before the sessions' script threads allocate: they share two heaps

from attention_explorer.explorer import navigation  # noqa: E402
from attention_explorer.explorer.app import cached, gpu, shelf, state  # noqa: E402
from attention_explorer.explorer.app.callbacks import bound, change_model, example_label, loadable, use_example  # noqa: E402
from attention_explorer.explorer.figures.labels import markdown_literal  # noqa: E402
from attention_explorer.explorer.run import caps  # noqa: E402
from attention_explorer.explorer.views.unreadable import put_aside_notice  # noqa: E402
from attention_explorer.models import registry  # noqa: E402

PAGES = Path(__file__).parent / "explorer" / "pages"

state.init(st.session_state)
if state.URL_PRESENT in st.query_params and state.URL_USED not in st.session_state:  # a new session's address
    state.keep(st.session_state, state.PRESENT, st.query_params[state.URL_PRESENT] == "1")
st.set_page_config(
    page_title="Attention explorer",
    layout="wide",
    initial_sidebar_state="collapsed" if st.session_state[state.PRESENT] else "auto",
)
state.restore_focus(st.session_state)  # the lesson's focus outlives page switches
try:
    limits = caps.current()  # the teacher's caps (serve --max-tokens, --models, --memory-budget), read once
except ValueError as e:  # a bad environment variable: said plainly, not a traceback on every page
    st.error(markdown_literal(f"This server's settings cannot be read: {e}"), icon=":material/error:")
    st.caption("Whoever runs this server can fix the value and start it again (attention-explorer serve --help).")
    st.stop()
gpu.warn_at_start()  # a device asked for (serve --device, EXPLORER_DEVICE) that this machine lacks: said, then the CPU


# Less padding above the page than Streamlit's 6rem, and round a page's title than its 1rem: a step's first figure
# fits on a 900 px screen under the title and its then-and-now line
PAGE_CSS = (
    "<style>.stMainBlockContainer { padding-top: 4.5rem; } .stMainBlockContainer h2 { padding-top: 0.25rem; }</style>"
)
# Presenter mode: body text 20 px (Streamlit's default is 16), headings to match
PRESENTER_CSS = """<style>
.stMainBlockContainer p, .stMainBlockContainer li, .stMainBlockContainer label,
.stMainBlockContainer [data-testid="stCaptionContainer"], .stMainBlockContainer [data-testid="stPageLink"] span,
.stMainBlockContainer button, .stMainBlockContainer input, .stMainBlockContainer [data-baseweb="select"] {
  font-size: 20px !important;
}
.stMainBlockContainer h1 { font-size: 2.4rem; }
.stMainBlockContainer h2 { font-size: 2.1rem; }
.stMainBlockContainer h3 { font-size: 1.7rem; }
</style>"""

# Pages that a training loop keeps running: Stop must end that script run, so they run whole, not as a fragment
WHOLE_RUN = {"train"}


@st.fragment
def show(page: st.Page) -> None:
    """The page as a fragment: its own pickers rerun only the page, not the sidebar and navigation above it. A change
    the rest must show (the page set the model or sentence; a click opens another page) reruns everything."""
    if st.session_state.get(state.DRILL_TO) or state.sidebar(st.session_state) != st.session_state.get(state.SHOWN):
        st.rerun(scope="app")
    page._can_be_called = True  # Streamlit runs a page once per script run; a fragment rerun is another such run
    st.session_state.pop(state.INTRO_BOX, None)  # a fold from an earlier run is on no page of this one
    page.run()


# One table of pages (explorer/lesson/__init__.py), by menu. The menus sit in the header, so on a 900 px projector
# the sidebar holds the model, the sentence, Max tokens and the examples above the fold.
pages = {
    menu: [
        st.Page(
            PAGES / f"{entry.stem}.py",
            title=entry.label,
            icon=f":material/{entry.icon}:",
            default=entry is navigation.OVERVIEW,
        )
        for entry in entries
    ]
    for menu, entries in navigation.MENUS.items()
}
page = st.navigation(pages, position="top")
if drilled := st.session_state.pop(state.DRILL_TO, None):  # a click on the last run opens another page
    st.switch_page(drilled)
st.session_state[state.PAGE] = page.url_path
notices = []
offered = cached.model_keys()
if state.URL_USED not in st.session_state:  # a new session: open what the address asks for
    listed = {key: registry.MODELS[key] for key in offered if key in registry.MODELS}
    notices = state.apply_url(st.session_state, st.query_params.to_dict(), listed, page.url_path, registry.MODELS)

if st.session_state[state.MODEL] not in offered:  # a model trained here and since replaced, or one not offered
    opened = state.default_model(offered)
    if opened != state.DEFAULT_MODEL and st.session_state[state.TEXT] == state.DEFAULT_TEXT:  # its own example
        state.keep(st.session_state, state.TEXT, cached.described(opened).examples[0])
    state.keep(st.session_state, state.MODEL, opened)
loaded, problem = loadable(st.session_state[state.MODEL])
most_tokens = limits.tokens(loaded.max_tokens) if loaded is not None else None
if most_tokens is not None and st.session_state[state.MAX_TOKENS] > most_tokens:  # opened by address, or over the cap
    state.keep(st.session_state, state.MAX_TOKENS, most_tokens)

with st.sidebar:
    st.title("Attention explorer")
    titles = {key: cached.described(key).title for key in offered}  # bound now: this session's list
    st.selectbox(
        "Model",
        list(titles),
        index=list(titles).index(st.session_state[state.MODEL]),  # the default a redrawn widget falls back to
        format_func=titles.__getitem__,
        key=state.widget(state.MODEL),
        on_change=change_model,
    )
    st.caption(cached.described(st.session_state[state.MODEL]).description)
    if gone := shelf.left_out():  # which ones, and their estimates, are for whoever started the server: its log
        st.caption(shelf.left_out_note(len(gone)))
    st.text_area(
        "Sentence",
        max_chars=state.MAX_TEXT,
        height=110,
        help="Several lines or a whole paragraph. Press Ctrl+Enter (Cmd+Enter on a Mac), or click outside the box, "
        "to run the model.",
        **bound(state.TEXT),
    )
    st.caption("Ctrl+Enter runs the model.")
    if len(st.session_state[state.TEXT]) > state.URL_MAX_TEXT:
        st.caption(f"Over {state.URL_MAX_TEXT:,} characters: the page's address leaves this sentence out.")
    st.toggle(
        "Presenter mode",
        help="Large text for a projector, the sidebar folded away (open it again with the arrow at the top left). "
        "Also ?present=1 in the address.",
        **bound(state.PRESENT),
    )
    if loaded is not None:  # else the model list above still works, and the page below says what is wrong
        st.number_input(
            "Max tokens",
            min_value=3,
            max_value=most_tokens,
            step=1,
            **bound(state.MAX_TOKENS),
        )
        if why := limits.stops_at(loaded.max_tokens):
            st.caption(why)
        st.selectbox(
            "Or pick an example",
            ["", *loaded.examples],
            key=state.EXAMPLE,
            on_change=use_example,
            format_func=example_label,
        )

if loaded is None:
    st.error(markdown_literal(problem), icon=":material/error:")
    st.caption("Pick another model in the sidebar; everything else keeps working.")
    st.stop()
# this script's module stays in sys.modules["__main__"] until the next run of any session: it names no model
del loaded

st.query_params.from_dict(state.address(st.session_state))  # the address now names what is shown
for notice in notices:
    st.warning(markdown_literal(notice), icon=":material/link_off:")
put_aside_notice()  # the model's example stands in for a sentence it cannot read: one click back to it
st.html(PAGE_CSS)  # fixed style sheets, no user text in them
if st.session_state[state.PRESENT]:
    st.html(PRESENTER_CSS)
st.session_state[state.SHOWN] = state.sidebar(st.session_state)
try:
    if page.url_path in WHOLE_RUN:
        st.session_state.pop(state.INTRO_BOX, None)
        page.run()
    else:
        show(page)
    cached.prepare_reference()  # the first page is drawn: the reference's imports can start
finally:  # what this run freed goes back to the system (under 1 ms; without it freed pages stay in the heap)
    memo.release_memory()
