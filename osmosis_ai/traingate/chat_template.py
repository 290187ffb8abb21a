"""A model's own chat template, rendered the way ``transformers``' ``apply_chat_template`` renders it.

Templates come from a local HuggingFace model directory: ``tokenizer_config.json``'s ``chat_template``
(one string, or a list of ``{"name", "template"}``), ``chat_template.jinja`` and the named templates in
``additional_chat_templates/NAME.jinja``. They are untrusted code, so they run in Jinja's immutable
sandbox with the globals and filters templates rely on (``raise_exception``, ``strftime_now``, a
``tojson`` that does not HTML-escape, ``namespace``, ``{% generation %}``) and the special tokens
(``bos_token``, ``eos_token``...) of the config as variables. Only ``jinja2`` is needed, imported
when a template is first loaded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from osmosis_ai.traingate.errors import TrainGateError

Message = dict[str, Any]

SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
# Names a message's reasoning arrives under; templates read ``reasoning_content`` (gpt-oss ones ``thinking``).
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
TEMPLATE_FILE = "chat_template.jinja"
NAMED_TEMPLATE_DIR = "additional_chat_templates"
CONFIG_FILE = "tokenizer_config.json"


def token_text(value: Any) -> str | None:
    """The text of a special token as configs store it: a string or an ``AddedToken`` dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def read_config(directory: Path) -> dict[str, Any]:
    """``tokenizer_config.json`` of ``directory`` (``{}`` when there is none)."""
    path = directory / CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TrainGateError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise TrainGateError(f"{path} is not a JSON object")
    return data


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TrainGateError(f"cannot read chat template {path}: {exc}") from exc


def find_templates(directory: Path, config: Mapping[str, Any]) -> dict[str, str]:
    """Every template of a model directory by name; a single template is named ``"default"``."""
    templates: dict[str, str] = {}
    raw = config.get("chat_template")
    if isinstance(raw, str):
        templates["default"] = raw
    elif isinstance(raw, list):
        for entry in raw:
            if isinstance(entry, Mapping) and isinstance(entry.get("template"), str):
                templates[str(entry.get("name"))] = str(entry["template"])
    jinja_file = directory / TEMPLATE_FILE
    if jinja_file.is_file():
        templates["default"] = _read_text(jinja_file)
    named = directory / NAMED_TEMPLATE_DIR
    if named.is_dir():
        for path in sorted(named.glob("*.jinja")):
            templates[path.stem] = _read_text(path)
    return templates


def normalize_messages(messages: Sequence[Any]) -> list[Message]:
    """Plain copies the template may read: ``None`` values dropped, reasoning under every name it is read by."""
    normalized = []
    for message in messages:
        if not isinstance(message, Mapping):
            raise TrainGateError(f"a chat message must be a JSON object, got {message!r:.80}")
        plain = {key: value for key, value in message.items() if value is not None}
        reasoning = next((plain[k] for k in REASONING_FIELDS if plain.get(k) is not None), None)
        if reasoning is not None:
            plain = {"thinking": reasoning, **plain, "reasoning_content": reasoning}
        normalized.append(plain)
    return normalized


def _environment() -> Any:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` marks assistant text for masks; rendering keeps the body."""

        tags = {"generation"}  # noqa: RUF012 - jinja reads a plain set

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return str(caller())

    class SafeNamespace(jinja2.utils.Namespace):
        """A ``namespace()`` that refuses underscore names, so templates cannot reach interpreter internals."""

        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for name in attrs:
                SafeNamespace.check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            SafeNamespace.check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def check(name: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"a template cannot set {name!r} on a namespace")

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.globals["dict"] = lambda *args, **kwargs: dict(*args, **kwargs)
    env.globals["namespace"] = SafeNamespace
    return env


class ChatTemplate:
    """One model's chat templates plus the special-token variables they render with.

    ``render`` picks the template like ``apply_chat_template``: ``name`` when given, else ``tool_use``
    for a conversation with tools if the model has one, else ``default``.
    """

    def __init__(
        self, templates: Mapping[str, str], *, variables: Mapping[str, str] | None = None, source: str = ""
    ) -> None:
        if not templates:
            raise TrainGateError(
                f"no chat template in {source or 'the model directory'}: add chat_template to "
                f"{CONFIG_FILE} or a {TEMPLATE_FILE}, or pass --chat-template FILE"
            )
        self.templates = dict(templates)
        self.variables = dict(variables or {})
        self.source = source
        self._compiled: dict[str, Any] = {}

    @classmethod
    def from_directory(cls, directory: str | Path, *, override: str | Path | None = None) -> ChatTemplate:
        """The templates of a HuggingFace model directory; ``override`` (a ``.jinja`` file) replaces them."""
        folder = Path(directory)
        config = read_config(folder)
        variables = {
            name: text for name in SPECIAL_TOKEN_NAMES if (text := token_text(config.get(name))) is not None
        }
        if override is not None:
            path = Path(override)
            if not path.is_file():
                raise TrainGateError(f"chat template file not found: {path}")
            return cls({"default": _read_text(path)}, variables=variables, source=str(path))
        return cls(find_templates(folder, config), variables=variables, source=str(folder))

    def source_of(self, name: str | None = None, *, tools: bool = False) -> str:
        """The template text ``render`` would use."""
        return self.templates[self._pick(name, tools)]

    def _pick(self, name: str | None, tools: bool) -> str:
        if name is not None:
            if name not in self.templates:
                raise TrainGateError(
                    f"no chat template named {name!r} in {self.source}; it has {sorted(self.templates)}"
                )
            return name
        if tools and "tool_use" in self.templates:
            return "tool_use"
        if "default" in self.templates:
            return "default"
        if len(self.templates) == 1:
            return next(iter(self.templates))
        raise TrainGateError(
            f"{self.source} has several chat templates ({sorted(self.templates)}) and none named 'default'"
        )

    def _template(self, name: str) -> Any:
        compiled = self._compiled.get(name)
        if compiled is None:
            import jinja2

            try:
                compiled = _environment().from_string(self.templates[name])
            except jinja2.TemplateError as exc:
                raise TrainGateError(
                    f"chat template {name!r} of {self.source} does not compile: {exc}"
                ) from exc
            self._compiled[name] = compiled
        return compiled

    def render(
        self,
        messages: Sequence[Any],
        *,
        tools: Sequence[Message] | None = None,
        add_generation_prompt: bool = False,
        name: str | None = None,
        **variables: Any,
    ) -> str:
        """The text the template makes of ``messages`` (``tools`` given as OpenAI tool schemas)."""
        import jinja2

        template = self._template(self._pick(name, tools is not None))
        context = {**self.variables, **variables}
        try:
            return str(
                template.render(
                    messages=normalize_messages(messages),
                    tools=None if tools is None else list(tools),
                    documents=None,
                    add_generation_prompt=add_generation_prompt,
                    **context,
                )
            )
        except jinja2.TemplateError as exc:
            raise TrainGateError(
                f"the chat template of {self.source} refused the conversation: {exc}"
            ) from exc
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise TrainGateError(
                f"the chat template of {self.source} failed on the conversation: {type(exc).__name__}: {exc}"
            ) from exc
