"""The provider-neutral wire pieces: tool names the providers accept, results as text."""

from __future__ import annotations

import re

import pytest

from adapters.models._wire import ToolNames, result_text, wire_name
from runtime.errors import ConfigError, ProtocolError
from runtime.messages import ToolResultMessage
from runtime.tools import ToolSpec

WIRE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def test_names_the_providers_accept_go_out_unchanged() -> None:
    assert wire_name("read_file") == "read_file"
    assert wire_name("a-b_C9") == "a-b_C9"


@pytest.mark.parametrize("name", ["files.read", "x" * 128, "a.b.c", "db.v2-query"])
def test_other_names_are_rewritten_into_the_wire_grammar_the_same_way_every_time(
    name: str,
) -> None:
    wire = wire_name(name)
    assert WIRE.fullmatch(wire)
    assert wire == wire_name(name)
    assert wire != wire_name(name + "x")


def test_tool_names_map_back_and_unknown_names_pass_through() -> None:
    names = ToolNames([ToolSpec("files.read"), ToolSpec("add")])
    assert names.from_wire(names.to_wire("files.read")) == "files.read"
    assert names.from_wire("add") == "add"
    assert names.from_wire("not_offered") == "not_offered"


def test_two_tools_that_would_share_a_wire_name_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="rename"):
        ToolNames([ToolSpec("files.read"), ToolSpec(wire_name("files.read"))])


def test_results_are_strings_as_they_are_and_other_values_as_json() -> None:
    assert result_text(ToolResultMessage("c", "t", "as is")) == "as is"
    assert result_text(ToolResultMessage("c", "t", {"n": [1, "ü"]})) == '{"n": [1, "ü"]}'
    assert result_text(ToolResultMessage("c", "t", None)) == "null"
    with pytest.raises(ProtocolError, match="not JSON"):
        result_text(ToolResultMessage("c", "t", {1, 2}))
