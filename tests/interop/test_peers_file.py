"""The peers file: what is accepted, how a target is matched, and clear errors for the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from interop.peers import PeersConfigError, peer_allowance, peers_from_settings, peers_load, peers_parse


def parse(peers: dict[str, Any], **environ: str) -> Any:
    return peers_parse({"peers": peers}, source="peers.json", environ=environ)


def test_a_full_entry_with_defaults_and_variables() -> None:
    book = parse(
        {
            "garraia": {"url": "http://127.0.0.1:3888/", "dialect": "garraia"},
            "lab": {"url": "HTTPS://Hermes.Lab.Example/agent", "token": "${LAB_TOKEN}", "max_turns": 4, "timeout": 30},
        },
        LAB_TOKEN="s3cret-lab-token",
    )
    garraia, lab = book.peers
    assert (garraia.url, garraia.origin, garraia.dialect, garraia.token) == (
        "http://127.0.0.1:3888",
        "http://127.0.0.1:3888",
        "garraia",
        "",
    )
    # A field the entry leaves out takes the peers file's default.
    assert (garraia.max_turns, garraia.timeout, garraia.max_chars, garraia.stop_marker) == (8, 120.0, 8000, "<<END>>")
    assert (lab.url, lab.origin, lab.dialect, lab.token) == (
        "https://hermes.lab.example:443/agent",
        "https://hermes.lab.example:443",
        "auto",
        "s3cret-lab-token",
    )
    assert (lab.max_turns, lab.timeout) == (4, 30.0)
    assert book.allowlist == ["http://127.0.0.1:3888", "https://hermes.lab.example:443"]
    assert book.secret_values() == {"s3cret-lab-token"}


def test_targets_match_by_name_or_by_exact_origin() -> None:
    book = parse(
        {
            "one": {"url": "http://10.0.0.5:8000/one"},
            "two": {"url": "http://10.0.0.5:8000/two"},
            "solo": {"url": "https://solo.lab:8443"},
        }
    )
    assert book.find("solo").name == "solo"
    assert book.find("https://solo.lab:8443/a2a/jsonrpc").name == "solo"
    assert book.find("https://SOLO.lab:8443").name == "solo"
    assert book.find("http://10.0.0.5:8000/two/a2a").name == "two"
    assert book.find("http://10.0.0.5:8000/three") is None  # ambiguous origin, no path match
    for stranger in (
        "http://solo.lab:8443",
        "https://solo.lab",
        "https://solo.lab:8444",
        "https://evil.lab:8443",
        "https://solo.lab.evil.example:8443",
        "ftp://solo.lab:8443",
        "not a url",
        "SOLO",
    ):
        assert book.find(stranger) is None, stranger


@pytest.mark.parametrize(
    ("peers", "message"),
    [
        ({"lab": {"url": "http://x", "colour": "red"}}, 'unknown field "colour"'),
        ({"lab": {}}, '"url" is required'),
        ({"lab": {"url": "ftp://x"}}, "not an http:// or https:// URL"),
        ({"lab": {"url": "http://user:pass@x"}}, "carries credentials in the URL"),
        ({"lab": {"url": "http://x/?a=1"}}, "drop its query"),
        ({"lab": {"url": "http://x", "dialect": "grpc"}}, '"dialect" is one of a2a, garraia, auto'),
        ({"lab": {"url": "http://x", "max_turns": 0}}, '"max_turns" must be a positive number'),
        ({"lab": {"url": "http://x", "token": "${UNSET_LAB_TOKEN}"}}, "UNSET_LAB_TOKEN is not set"),
        ({"bad name": {"url": "http://x"}}, "a peer name is"),
    ],
)
def test_bad_entries_are_refused_with_the_reason(peers: dict[str, Any], message: str) -> None:
    with pytest.raises(PeersConfigError, match=message.replace("?", r"\?")):
        parse(peers)


def test_the_file_itself(settings: Settings, tmp_path: Path) -> None:
    settings.HERMES_A2A_PEERS = str(tmp_path / "missing.json")
    with pytest.raises(PeersConfigError, match="does not exist"):
        peers_from_settings()
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(PeersConfigError, match="not valid JSON"):
        peers_load(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"mcpServers": {}}))
    with pytest.raises(PeersConfigError, match='an object under "peers"'):
        peers_load(wrong)
    settings.HERMES_A2A_PEERS = ""
    assert not peers_from_settings()


def test_a_peers_share_and_rate_come_from_its_entry_or_the_defaults(settings: Settings, tmp_path: Path) -> None:
    path = tmp_path / "peers.json"
    path.write_text(
        json.dumps({"peers": {"lab": {"url": "http://127.0.0.1:9", "budget_share": 0.05, "rate_limit": 4}}})
    )
    settings.HERMES_A2A_PEERS = str(path)

    lab = peer_allowance("lab", rate_counted_here=True)
    other = peer_allowance("other", rate_counted_here=True)

    assert (lab.actor, lab.share, lab.rate_limit) == ("peer:lab", 0.05, 4)
    assert (other.share, other.rate_limit) == (settings.HERMES_PEER_BUDGET_SHARE, settings.HERMES_A2A_RATE_LIMIT)
    # Over A2A the server counts a peer's messages itself; admission does not count them twice.
    assert peer_allowance("lab", rate_counted_here=False).rate_limit is None
    for entry, message in (
        ({"budget_share": 1.5}, '"budget_share" is a share of the daily budget, between 0 and 1'),
        ({"budget_share": "half"}, '"budget_share" is a share'),
        ({"rate_limit": 0}, '"rate_limit" must be a positive number'),
    ):
        with pytest.raises(PeersConfigError, match=message):
            parse({"lab": {"url": "http://127.0.0.1:9", **entry}})


def test_a_peer_may_agree_on_its_own_stop_marker() -> None:
    book = parse({"lab": {"url": "https://lab.example", "stop_marker": " [[DONE]] "}})

    assert book.peers[0].stop_marker == "[[DONE]]"
    with pytest.raises(PeersConfigError, match='"stop_marker" must be a non-empty string'):
        parse({"lab": {"url": "https://lab.example", "stop_marker": " "}})
