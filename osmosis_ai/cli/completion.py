"""Shell completion scripts for ``osmosis``, written from the real parser so they cannot drift from it.

:func:`command_tree` walks the parser with every command's options loaded; :func:`render` writes a
bash, zsh or fish script that completes the commands, sub-commands, options and option choices of
that tree (and file names where an option or argument takes a path). The script holds the tree
itself: pressing Tab never starts Python.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")
PROGRAMS = ("osmosis", "osmosis-ai", "osmosis_ai")


@dataclass
class Option:
    flags: list[str]
    help: str
    takes_value: bool
    choices: list[str] | None


@dataclass
class Node:
    """One command of the tree: ``path`` is the words that reach it (``osmosis eval cache``)."""

    path: str
    help: str = ""
    commands: dict[str, Node] = field(default_factory=dict)
    options: list[Option] = field(default_factory=list)
    positional_choices: list[str] = field(default_factory=list)
    takes_files: bool = False  # a positional argument without choices (a path, an id)


def _help(text: str | None) -> str:
    if not text or text == argparse.SUPPRESS:
        return ""
    text = re.sub(r"%\([^)]*\)s", "", text).replace("%%", "%")
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77].rstrip() + "..."


def command_tree(parser: argparse.ArgumentParser, path: str = "osmosis", help: str = "") -> Node:
    """The commands, options and choices of ``parser`` and of every sub-parser below it."""
    node = Node(path, help)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                node.commands[name] = command_tree(sub, f"{path} {name}", _help(helps.get(name)))
        elif action.option_strings:
            if action.help == argparse.SUPPRESS:
                continue
            choices = [str(c) for c in action.choices] if action.choices is not None else None
            node.options.append(
                Option(list(action.option_strings), _help(action.help), action.nargs != 0, choices)
            )
        elif action.choices is not None:
            node.positional_choices.extend(str(c) for c in action.choices)
        else:
            node.takes_files = True
    return node


def _nodes(root: Node) -> list[Node]:
    out = [root]
    for child in root.commands.values():
        out.extend(_nodes(child))
    return out


def _sq(text: str) -> str:
    """``text`` as a single-quoted shell word (bash, zsh; fish uses the same rule for ``'``)."""
    return "'" + text.replace("'", "'\\''") + "'"


def _fish_sq(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _path_steps(root: Node) -> list[str]:
    """Every ``"<path> <word>"`` that leads from one command to a sub-command."""
    return [f"{node.path} {name}" for node in _nodes(root) for name in node.commands]


def render_bash(root: Node) -> str:
    steps = "|".join(f'"{step}"' for step in _path_steps(root))
    values_with_choices = []
    values_free = []
    words = []
    for node in _nodes(root):
        for option in node.options:
            if not option.takes_value:
                continue
            keys = "|".join(f'"{node.path} {flag}"' for flag in option.flags)
            if option.choices:
                values_with_choices.append(
                    f'        {keys}) COMPREPLY=($(compgen -W {_sq(" ".join(option.choices))} -- "$cur")); return 0 ;;'
                )
            else:
                values_free.append(keys)
        flags = [flag for option in node.options for flag in option.flags]
        names = list(node.commands) + node.positional_choices
        words.append(
            f'        "{node.path}") commands={_sq(" ".join(names))}; options={_sq(" ".join(flags))} ;;'
        )
    free = (
        f"        {'|'.join(values_free)}) return 0 ;;  # a path or a value: the shell's default completion"
        if values_free
        else ""
    )
    return f"""# bash completion for osmosis (written by `osmosis completion bash`).
# Load it with:  source <(osmosis completion bash)   (or save it in your bash-completion directory)
_osmosis() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local cmdpath="osmosis" word i commands="" options=""
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case "$cmdpath $word" in
        {steps}) cmdpath="$cmdpath $word" ;;
        esac
    done
    case "$cmdpath $prev" in
{chr(10).join(values_with_choices)}
{free}
    esac
    case "$cmdpath" in
{chr(10).join(words)}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$commands" -- "$cur"))
    fi
    return 0
}}
complete -o default -F _osmosis {" ".join(PROGRAMS)}
"""


def _zsh_item(name: str, help: str) -> str:
    return _sq(name.replace(":", "\\:") + (":" + help if help else ""))


def render_zsh(root: Node) -> str:
    steps = "|".join(_sq(step) for step in _path_steps(root))
    value_cases = []
    free = []
    node_cases = []
    for node in _nodes(root):
        for option in node.options:
            if not option.takes_value:
                continue
            keys = "|".join(_sq(f"{node.path} {flag}") for flag in option.flags)
            if option.choices:
                value_cases.append(
                    f"    ({keys}) compadd -- {' '.join(_sq(c) for c in option.choices)}; return ;;"
                )
            else:
                free.append(keys)
        commands = [_zsh_item(name, child.help) for name, child in node.commands.items()]
        commands += [_zsh_item(choice, "") for choice in node.positional_choices]
        options = [_zsh_item(flag, option.help) for option in node.options for flag in option.flags]
        files = "_files" if node.takes_files else "return 1"
        node_cases.append(
            f"    ({_sq(node.path)})\n      commands=({' '.join(commands)})\n      options=({' '.join(options)})\n      files={files} ;;"
        )
    free_case = f"    ({'|'.join(free)}) _files; return ;;" if free else ""
    return f"""#compdef {" ".join(PROGRAMS)}
# zsh completion for osmosis (written by `osmosis completion zsh`).
# Load it with:  source <(osmosis completion zsh)   (after compinit), or save it as _osmosis in your $fpath
_osmosis() {{
  local cmdpath="osmosis" prev="${{words[CURRENT-1]}}" files="return 1" i
  local -a commands options
  for (( i = 2; i < CURRENT; i++ )); do
    case "$cmdpath ${{words[i]}}" in
      ({steps}) cmdpath="$cmdpath ${{words[i]}}" ;;
    esac
  done
  case "$cmdpath $prev" in
{chr(10).join(value_cases)}
{free_case}
  esac
  case "$cmdpath" in
{chr(10).join(node_cases)}
  esac
  if [[ "$PREFIX" == -* ]]; then
    _describe -t options option options
  else
    _describe -t commands command commands || eval $files
  fi
}}
if [[ "${{funcstack[1]}}" == _osmosis ]]; then
  _osmosis "$@"
else
  compdef _osmosis {" ".join(PROGRAMS)}
fi
"""


def render_fish(root: Node) -> str:
    steps = " ".join(_fish_sq(step) for step in _path_steps(root))
    lines = [
        "# fish completion for osmosis (written by `osmosis completion fish`).",
        "# Load it with:  osmosis completion fish | source   (or save it as ~/.config/fish/completions/osmosis.fish)",
        "function __osmosis_path",
        "    set -l cmdpath osmosis",
        "    for word in (commandline -opc)[2..-1]",
        '        if contains -- "$cmdpath $word" ' + steps,
        '            set cmdpath "$cmdpath $word"',
        "        end",
        "    end",
        '    echo "$cmdpath"',
        "end",
    ]
    for program in PROGRAMS:
        lines.append(f"complete -c {program} -f")
        for node in _nodes(root):
            condition = f"-n {_fish_sq(f'test (__osmosis_path) = {_sq(node.path)}')}"
            for name, child in node.commands.items():
                lines.append(
                    f"complete -c {program} {condition} -a {_fish_sq(name)} -d {_fish_sq(child.help)}"
                )
            if node.positional_choices:
                lines.append(
                    f"complete -c {program} {condition} -a {_fish_sq(' '.join(node.positional_choices))}"
                )
            if node.takes_files:
                lines.append(f"complete -c {program} {condition} -F")
            for option in node.options:
                spec = []
                for flag in option.flags:
                    if flag.startswith("--"):
                        spec.append(f"-l {flag[2:]}")
                    elif len(flag) == 2:
                        spec.append(f"-s {flag[1:]}")
                    else:
                        spec.append(f"-o {flag[1:]}")
                if option.takes_value:
                    spec.append(f"-x -a {_fish_sq(' '.join(option.choices))}" if option.choices else "-r -F")
                lines.append(f"complete -c {program} {condition} {' '.join(spec)} -d {_fish_sq(option.help)}")
    return "\n".join(lines) + "\n"


RENDERERS = {"bash": render_bash, "zsh": render_zsh, "fish": render_fish}


def render(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script of ``shell`` (one of :data:`SHELLS`) for ``parser``."""
    return RENDERERS[shell](command_tree(parser))
