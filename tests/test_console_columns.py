"""Listings read in columns: `litjudge judges` printed `qwen2.5-coder-1.5b` past its 14-character
column, pushing that row's model, architecture and license out of line with the others."""
from __future__ import annotations

from litjudge.engine.app.console.cli import main
from litjudge.engine.app.console.columns import aligned


def _in_columns(block: str, header: list[str]) -> None:
    """Every line of `block` has a cell starting where each of the header's names starts, after a gap."""
    lines = block.splitlines()
    starts, at = [], 0
    for name in header:
        at = lines[0].index(name, at)
        starts.append(at)
    for line in lines[1:]:
        for c in starts[1:]:
            assert line[c - 2:c] == "  " and line[c] != " ", (c, "\n".join(lines))


def test_judges_and_protocols_print_their_columns_in_line(capsys):
    assert main(["judges"]) == 0
    judges, backends = capsys.readouterr().out.strip().split("\n\n")
    _in_columns(judges, ["judge", "model", "architecture", "kind", "license"])
    _in_columns(backends, ["backend", "judges it runs", "from"])
    assert any(line.startswith("qwen2.5-coder-1.5b  ") for line in judges.splitlines())
    assert main(["protocols"]) == 0
    protocols, loaders = capsys.readouterr().out.strip().split("\n\n")
    _in_columns(protocols, ["protocol", "version", "reads", "modes", "from"])
    _in_columns(loaders, ["dataset loader", "gives", "from"])


def test_a_cell_wider_than_its_header_widens_its_column():
    assert aligned(["a", "b", "c"], [["long-name", "x", "y"], ["s", "xx", "z"]]) == [
        "a          b   c", "long-name  x   y", "s          xx  z"]
