"""GET / in headless Chromium (Debian's `chromium`, driven by Playwright): the page shows
the model's name, streams a reply, reports context use and tok/s, and its stop button
ends a reply and frees the server's slot."""

from __future__ import annotations

import shutil
import time

import pytest

from tests.integration.serve.conftest import http, need_serve_extra, running_server, smollm2_path

need_serve_extra()
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no chromium browser installed (apt-get install chromium)", allow_module_level=True)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def server():
    from onnxexec.serve import ServeConfig

    cfg = ServeConfig(model=str(smollm2_path()), n_ctx=256, parallel=1)
    with running_server(cfg) as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page()
        pg.set_default_timeout(120_000)
        sync_api.expect.set_options(timeout=120_000)  # a loaded 2-core machine is slow
        pg.goto(server + "/")
        yield pg
        browser.close()


def in_flight(url: str) -> float:
    line = next(
        x
        for x in http("GET", url + "/metrics").text.splitlines()
        if x.startswith("onnxexec:requests_in_flight ")
    )
    return float(line.split()[1])


def test_page_streams_a_reply(page, server):
    expect = sync_api.expect
    expect(page.locator("#model")).to_have_text(smollm2_path().name)
    expect(page.locator("#nctx")).to_have_text("256")
    page.fill("#maxtok", "6")
    page.fill("#input", "Name a color.")
    page.click("#send")
    expect(page.locator(".msg.user")).to_have_text("Name a color.")
    expect(page.locator("#send")).to_be_enabled()
    reply = page.locator(".msg.assistant").last.inner_text()
    assert reply.strip()
    assert int(page.locator("#ctx").inner_text()) > 6  # prompt + reply tokens
    assert float(page.locator("#tps").inner_text()) > 0


def test_stop_button_ends_the_reply(page, server):
    expect = sync_api.expect
    page.fill("#maxtok", "200")
    page.fill("#input", "Write a very long story about a dragon.")
    page.click("#send")
    expect(page.locator("#stop")).to_be_enabled()
    bubble = page.locator(".msg.assistant").last
    expect(bubble).not_to_have_text("")  # streaming has begun
    page.click("#stop")
    expect(page.locator("#send")).to_be_enabled()
    t0 = time.monotonic()
    while in_flight(server) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert in_flight(server) == 0  # the aborted stream freed its slot
    assert "error" not in (bubble.get_attribute("class") or "")
