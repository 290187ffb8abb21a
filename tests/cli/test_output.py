"""The console of the commands: plain text off a terminal, ANSI colours when forced, literal (escaped)
user text, builtin ``print`` keywords honoured; and the ``Error:`` line."""

from __future__ import annotations

import io

import pytest

from osmosis_ai.cli import output
from osmosis_ai.cli.output import RICH_AVAILABLE, Console


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


def test_plain_print_takes_the_keywords_of_the_builtin_print():
    out, other = io.StringIO(), io.StringIO()
    console = Console(file=out)
    console.print("a", "b", 3, sep=", ", end=";")
    console.print("x", "y", sep="")
    console.print("elsewhere", file=other, flush=True)
    console.print("rich-only keywords are ignored", markup=False, highlight=False)
    assert out.getvalue() == "a, b, 3;xy\nrich-only keywords are ignored\n"
    assert other.getvalue() == "elsewhere\n"


@pytest.mark.skipif(not RICH_AVAILABLE, reason="needs rich")
def test_rich_print_takes_sep_and_end_too():
    out = io.StringIO()
    Console(file=out, force_terminal=True, no_color=False).print("a", "b", sep="-", end="|")
    assert "a-b|" in out.getvalue()


def test_the_error_line(capsys):
    output.error(ValueError("it broke [badly]"))
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "Error: it broke [badly]\n")


def test_the_compatibility_import_path_is_the_same_console():
    from osmosis_ai.rollout import console as compat

    assert (compat.Console, compat.console, compat.RICH_AVAILABLE) == (
        Console,
        output.console,
        RICH_AVAILABLE,
    )


def test_a_forced_progress_bar_draws_on_stderr_and_goes_away(capsys):
    with output.progress_bar(3, "Judging", enabled=True) as advance:
        for _ in range(3):
            advance()
    captured = capsys.readouterr()
    assert captured.out == ""
    with output.progress_bar(3, "Judging", enabled=False) as advance:
        advance()
    assert capsys.readouterr() == ("", "")
    assert output.wants_progress(True, 1) and not output.wants_progress(False, 10)


def test_the_progress_bar_labels_its_times_and_shows_the_running_score_and_failures() -> None:
    from rich.console import Console as RichConsole

    screen = io.StringIO()
    rich = RichConsole(file=screen, force_terminal=True, width=160, color_system=None)
    with output.progress_bar(4, "eval", enabled=True, rich=rich) as advance:
        advance(score=1.0)
        advance(score=0.0)
        advance(failed=True)
    drawn = screen.getvalue()
    assert "elapsed" in drawn and "left" in drawn
    assert "3/4" in drawn and "mean 0.500, 1 failed" in drawn
