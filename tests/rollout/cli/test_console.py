"""The rollout Console: plain text off a terminal, ANSI colours when forced, literal (escaped) user text."""

from __future__ import annotations

import io

from osmosis_ai.rollout.console import RICH_AVAILABLE, Console


def test_plain_output_off_a_terminal():
    out = io.StringIO()
    console = Console(file=out)
    assert not console.is_tty and not console.use_rich
    console.print("hello", "world", style="bold red")
    console.separator("title", width=20)
    console.panel("Box", "line one\nline [red]two[/red]")
    console.table([["a", 1], ["bbb", 22]], headers=["name", "n"], title="T")
    text = out.getvalue()
    assert "hello world\n" in text
    assert "\033[" not in text
    assert "title" in text and "─" in text
    assert "│ line [red]two[/red]" in text  # markup shown literally
    assert "name  n" in text and "bbb   22" in text


def test_ansi_fallback_and_rich_on_a_forced_terminal():
    plain = Console(file=io.StringIO(), force_terminal=True, no_color=True)
    assert plain.format_styled("x", "bold green") == "x"
    coloured = Console(file=io.StringIO(), force_terminal=True)
    if RICH_AVAILABLE:
        assert coloured.use_rich
        out = io.StringIO()
        Console(file=out, force_terminal=True).panel("T", "[bold]not markup[/bold]")
        assert "[bold]not markup[/bold]" in out.getvalue()
        assert coloured.run_rich(lambda rich_console: None)
    assert Console(file=io.StringIO(), force_terminal=False).format_styled("x", "red") == "x"
    assert (
        Console(file=io.StringIO(), force_terminal=True).format_styled("x", "red bold")
        == "\033[31;1mx\033[0m"
    )


def test_print_error_goes_to_stderr(capsys):
    Console().print_error("Broken [thing]")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Broken [thing]" in captured.err
