"""A class across replicas, for real on loopback: `attention-explorer serve --replicas 2` (nginx in front of two app
processes) and twelve browsers, each its own visitor with its own sentence, page and choices. Every request of one
browser (the page, static files, the websocket, media, downloads) reaches one replica; both replicas serve visitors;
a download and a shared address work through the proxy. Then one replica is killed by its PID: its visitors reconnect
to the other and get their sentence, page and choices back from the address, while nginx and the other replica go on
serving."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from attention_explorer import replicas
from bench import harness, proc
from bench.harness import FINISHED_RUNS, RUN_COUNTER, SETTLED, TIMEOUT_MS
from bench.replicas import access_log, proxy_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

VISITORS = 12
AGENT = "Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome attention-explorer-visitor-{}"
# the heatmap as drawn: its title ("Layer 3, head 2"), its key labels and its weights
DRAWN = """() => { const plot = document.querySelectorAll('.js-plotly-plot')[0];
    return [plot.layout.title.text, plot.data[0].x, plot.data[0].z]; }"""


def sentence(i: int) -> str:
    return f"Visitor {i} reads a short line."


def choice(i: int) -> tuple[int, int]:
    """(layer, head) visitor i picks, counted from 1 as the pickers are."""
    return 1 + i % 6, 1 + (5 * i) % 12


class Visitor:
    """One browser: its own context (cookies), its user agent naming it in nginx's log, and every response's
    X-Replica header as (time.time(), url, replica)."""

    def __init__(self, browser, i: int):
        self.i = i
        self.agent = AGENT.format(i)
        self.context = browser.new_context(viewport={"width": 1200, "height": 900}, user_agent=self.agent)
        self.context.set_default_timeout(TIMEOUT_MS)
        self.context.set_default_navigation_timeout(TIMEOUT_MS)
        self.context.add_init_script(RUN_COUNTER)
        self.responses: list[tuple[float, str, str | None]] = []
        self.context.on("response", lambda r: self.responses.append((time.time(), r.url, r.headers.get("x-replica"))))
        self.page = self.context.new_page()

    def replicas_seen(self, since: float = 0.0, until: float = float("inf")) -> set[str | None]:
        return {replica for at, _, replica in self.responses if since <= at < until}

    def drawn(self) -> tuple[str, list, np.ndarray]:
        title, x, z = self.page.evaluate(DRAWN)
        return title, x, harness.figure_array(z).astype(np.float32)


def pick(page, picker: str, n: int) -> None:
    select = page.get_by_test_id("stMain").get_by_role("combobox", name=picker.capitalize(), exact=True)
    if select.input_value() == f"{picker} {n}":
        return  # already shown: choosing it again reruns nothing
    select.click()
    with harness.rerun(page):
        page.get_by_role("option", name=f"{picker} {n}", exact=True).click()


def visit(visitor: Visitor, url: str) -> None:
    """Open the heatmap page, type a sentence as a person does, pick a layer and a head."""
    page = visitor.page
    harness.open_app(page, f"{url}/attention")
    harness.type_sentence(page, sentence(visitor.i))
    layer, head = choice(visitor.i)
    pick(page, "layer", layer)
    pick(page, "head", head)
    page.wait_for_function(
        "([l, h]) => { const q = new URLSearchParams(location.search);"
        " return q.get('layer') == l && q.get('head') == h }",
        arg=[layer, head],
        timeout=TIMEOUT_MS,
    )
    wait_for_head(page, layer, head)


def wait_for_head(page, layer: int, head: int) -> None:
    """Until the heatmap's title names this head (in bold: "<b>Layer 3, head 2</b>")."""
    page.wait_for_function(
        "(named) => document.querySelector('.js-plotly-plot')?.layout?.title?.text?.includes(named)",
        arg=f"Layer {layer}, head {head}</b>",
        timeout=TIMEOUT_MS,
    )


def csv_download(page) -> list[list[str]]:
    """The heatmap's CSV, downloaded as a person does (its button's address is media the replica holds)."""
    page.locator(".st-key-attention_heatmap_download button").first.click()
    button = page.get_by_test_id("stDownloadButton").filter(has_text="CSV").locator("button")
    button.first.wait_for(state="visible", timeout=TIMEOUT_MS)
    with page.expect_download() as event:
        button.first.click()
    rows = list(csv.reader(io.StringIO(Path(event.value.path()).read_text())))
    page.keyboard.press("Escape")
    return rows


def test_a_class_across_two_replicas_behind_nginx_survives_one_killed(browser):
    try:
        replicas.find_nginx()
    except replicas.ReplicaError:
        pytest.skip("nginx is not installed (make test installs it when run as root)")
    with proxy_server(2) as front:
        (a, pid_a), (b, pid_b) = front.replicas.items()
        visitors = [Visitor(browser, i) for i in range(VISITORS)]
        try:
            for visitor in visitors:
                visit(visitor, front)
            # every response of one browser came from one replica, named by nginx; both replicas have visitors
            on = {}
            for visitor in visitors:
                seen = visitor.replicas_seen()
                assert len(seen) == 1 and seen <= {a, b}, (visitor.i, seen)
                on[visitor.i] = seen.pop()
            assert set(on.values()) == {a, b}, on
            print(f"visitors per replica: {a}: {list(on.values()).count(a)}, {b}: {list(on.values()).count(b)}")
            drawn = {v.i: v.drawn() for v in visitors}
            for v in visitors:
                layer, head = choice(v.i)
                assert f"Layer {layer}, head {head}</b>" in drawn[v.i][0]
                assert harness.sentence_box(v.page).input_value() == sentence(v.i)

            # a download through the proxy, from a visitor of each replica: the weights drawn
            for replica in (a, b):
                v = next(v for v in visitors if on[v.i] == replica)
                rows = csv_download(v.page)
                _, x, z = drawn[v.i]
                assert rows[0] == ["series", "query (attending)", "key (attended to)", "weight"]
                assert len(rows) == 1 + len(x) ** 2
                np.testing.assert_array_equal(np.array([r[3] for r in rows[1:]], dtype=np.float32), z.ravel())
                assert v.replicas_seen() == {replica}

            # a shared address opens the same view in a new browser, through the proxy
            shared = Visitor(browser, "shared")
            try:
                harness.open_app(shared.page, visitors[0].page.url)
                title, x, z = drawn[0]
                shared.page.wait_for_function(
                    f"() => document.querySelector('.js-plotly-plot')?.layout?.title?.text === {json.dumps(title)}",
                    timeout=TIMEOUT_MS,
                )
                assert harness.sentence_box(shared.page).input_value() == sentence(0)
                assert shared.drawn()[1] == x
                np.testing.assert_array_equal(shared.drawn()[2], z)
            finally:
                shared.context.close()

            # one replica killed by its PID: its visitors reconnect to the other with everything back
            victims = [v for v in visitors if on[v.i] == a]
            others = [v for v in visitors if on[v.i] == b]
            addresses = {v.i: v.page.url for v in visitors}
            runs = {v.i: v.page.evaluate(FINISHED_RUNS) for v in victims}
            killed_at = time.time()
            os.kill(pid_a, signal.SIGKILL)
            print(f"killed {a} (pid {pid_a}) with {len(victims)} visitors")
            for v in victims:
                v.page.wait_for_function(SETTLED, arg=runs[v.i])  # a run on the other replica, asked by the page
                layer, head = choice(v.i)
                wait_for_head(v.page, layer, head)
                assert v.page.url == addresses[v.i]  # the same page and address
                assert harness.sentence_box(v.page).input_value() == sentence(v.i)
                title, x, z = v.drawn()
                assert (title, x) == drawn[v.i][:2]
                np.testing.assert_array_equal(z, drawn[v.i][2])
                assert v.replicas_seen(since=killed_at) == {b}
                assert v.page.get_by_test_id("stException").count() == 0
            # the other replica's visitors go on: a new sentence is run and drawn
            harness.type_sentence(others[0].page, "A new line after the fall.")
            harness.wait_for_tokens(others[0].page, ["[CLS]", "a", "new", "line", "after", "the", "fall", ".", "[SEP]"])
            assert others[0].replicas_seen() == {b}
            assert proc.alive(front.nginx) and proc.alive(pid_b) and front.process.poll() is None
            assert not proc.alive(pid_a)
        finally:
            for v in visitors:
                v.context.close()

        # nginx's own log, websockets included (a websocket's line is written when it closes): each visitor's every
        # request went to their replica; a killed replica's visitors' requests after the kill went to the other
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while True:
            log = access_log(front)
            streams = {r.agent for r in log if r.request.startswith("GET /_stcore/stream")}
            if all(v.agent in streams for v in visitors) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for v in visitors:
            mine = [r for r in log if r.agent == v.agent]
            assert any(r.request.startswith("GET /_stcore/stream") for r in mine), v.i
            if on[v.i] == b:
                assert {r.upstreams for r in mine} == {(b,)}, v.i
            else:
                assert {r.upstreams[0] for r in mine if r.start < killed_at} == {a}, v.i
                assert {r.served_by for r in mine if r.start >= killed_at} == {b}, v.i
                assert any(r.request.startswith("GET /_stcore/stream") and r.start >= killed_at for r in mine)
    assert not proc.alive(front.nginx) and not proc.alive(pid_b)  # all stopped with the command
    assert not front.prefix.exists()
