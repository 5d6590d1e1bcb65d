"""The command line's parameter types: every value is checked where click converts it, so bad
input is one line naming its option (`Error: Invalid value for '--option': ...`, exit status
2) before any model loads. torch-free."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import click


def interval(low: float | None, high: float | None, low_open: bool = False, high_open: bool = False) -> str:
    """"[1, inf)", "(0, 1]" ..."""
    left = "-inf" if low is None else f"{low:g}"
    right = "inf" if high is None else f"{high:g}"
    return f"{'(' if low_open or low is None else '['}{left}, {right}{')' if high_open or high is None else ']'}"


def in_interval(x: float, low: float | None, high: float | None, low_open: bool, high_open: bool) -> bool:
    return (math.isfinite(x) and (low is None or (x > low if low_open else x >= low))
            and (high is None or (x < high if high_open else x <= high)))


class Number(click.ParamType):
    """An int or a finite float in an interval: `Number(int, 1)` is a positive integer,
    `Number(float, 0, 1, low_open=True)` a number in (0, 1]."""

    def __init__(self, kind: type = int, low: float | None = None, high: float | None = None, low_open: bool = False,
                 high_open: bool = False) -> None:
        self.kind, self.low, self.high, self.low_open, self.high_open = kind, low, high, low_open, high_open
        self.name = "integer" if kind is int else "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        value = (click.INT if self.kind is int else click.FLOAT).convert(value, param, ctx)
        if not in_interval(value, self.low, self.high, self.low_open, self.high_open):
            what = "in" if self.kind is int else "finite and in"
            shown = value if self.kind is int else f"{value:g}"
            self.fail(f"must be {what} {interval(self.low, self.high, self.low_open, self.high_open)}, got {shown}",
                      param, ctx)
        return value


POSITIVE = Number(int, 1)
NONNEGATIVE = Number(int, 0)
PROBABILITY = Number(float, 0, 1)
UNIT_OPEN_LOW = Number(float, 0, 1, low_open=True)  # (0, 1]: top-p, lenience


class NumberList(click.ParamType):
    """Comma-separated numbers, "1,0.5,0.3" -> (1.0, 0.5, 0.3): at least one, finite, each in an
    interval; optionally integers, distinct, or strictly increasing. empty_ok: '' is ()."""

    name = "list"

    def __init__(self, kind: type = float, low: float | None = None, high: float | None = None,
                 low_open: bool = False, distinct: bool = False, increasing: bool = False, empty_ok: bool = False,
                 what: str = "numbers") -> None:
        self.kind, self.low, self.high, self.low_open = kind, low, high, low_open
        self.distinct, self.increasing, self.empty_ok, self.what = distinct, increasing, empty_ok, what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple:
        if isinstance(value, tuple):
            return value
        try:
            numbers = tuple(float(x) for x in str(value).split(",") if x.strip())
        except ValueError:
            self.fail(f"expected comma-separated numbers, got {value!r}", param, ctx)
        if not numbers:
            if self.empty_ok:
                return ()
            self.fail("expected at least one number", param, ctx)
        if not all(math.isfinite(x) for x in numbers):
            self.fail(f"numbers must be finite, got {value!r}", param, ctx)
        kind = "integers" if self.kind is int else "numbers"
        if (self.kind is int and any(x != int(x) for x in numbers)) or \
                not all(in_interval(x, self.low, self.high, self.low_open, False) for x in numbers):
            self.fail(f"{self.what} must be comma-separated {kind} in {interval(self.low, self.high, self.low_open)}, "
                      f"got {value!r}", param, ctx)
        if self.distinct and len(set(numbers)) != len(numbers):
            self.fail(f"{self.what} must be distinct, got {value!r}", param, ctx)
        if self.increasing and list(numbers) != sorted(set(numbers)):
            self.fail(f"{self.what} must be strictly increasing, got {value!r}", param, ctx)
        return tuple(int(x) for x in numbers) if self.kind is int else numbers


class Checked(click.ParamType):
    """A number (kind int or float) or a comma-separated list of numbers (`many`, at most
    `max_len`), then a check of the library's (e.g. `specdec.simulator.checks`), whose
    SpecdecError becomes the option's one-line error."""

    def __init__(self, check: Callable[[Any], Any], kind: type = float, many: bool = False,
                 max_len: int | None = None) -> None:
        self.check, self.kind, self.many, self.max_len = check, kind, many, max_len
        self.name = "list" if many else ("integer" if kind is int else "float")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from specdec.errors import SpecdecError

        if self.many and not isinstance(value, tuple):
            try:
                value = tuple(float(part) for part in str(value).split(","))
            except ValueError:
                self.fail(f"expected comma-separated numbers such as 0.9,0.8,0.7, got {value!r}", param, ctx)
            if self.max_len is not None and len(value) > self.max_len:
                self.fail(f"at most {self.max_len} values, got {len(value)}", param, ctx)
        elif not self.many:
            value = (click.INT if self.kind is int else click.FLOAT).convert(value, param, ctx)
        try:
            self.check(value)
        except SpecdecError as exc:
            self.fail(str(exc), param, ctx)
        return value


class Utf8Text(click.ParamType):
    """Text the shell passed as valid UTF-8 (it may pass any bytes)."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            str(value).encode("utf-8")
        except UnicodeEncodeError:
            self.fail("is not valid UTF-8 text", param, ctx)
        return value


class DrafterSpecType(click.ParamType):
    """A drafter spec (`specdec.reference.drafters.spec`, optionally LABEL=SPEC when `labelled`):
    its grammar and that the files it names exist, checked without loading anything. Converts to
    the spec text (labelled: (label, spec))."""

    name = "drafter"

    def __init__(self, labelled: bool = False) -> None:
        self.labelled = labelled

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from specdec.errors import SpecdecError
        from specdec.reference.drafters.spec import DrafterSpec, split_label

        if isinstance(value, tuple):
            return value
        label, text = split_label(value) if self.labelled else (value, value)
        try:
            spec = DrafterSpec.parse(text)
            for path in spec.model_paths:
                check_model_path(path)
            for path in spec.paths:
                if not Path(path).exists():
                    raise SpecdecError(f"{spec.kind}:{spec.arg}: {path}: no such file or folder")
            for path in spec.model_paths:
                if Path(path).is_dir() and not (Path(path) / "config.json").is_file():
                    raise SpecdecError(f"{path!r} is not a Hugging Face model folder (no config.json there)")
            if spec.ngram_paths:
                from specdec.ngram.model import resolve_arpa
                for path in spec.ngram_paths:
                    resolve_arpa(path)
            spec.preflight()
        except (SpecdecError, OSError) as exc:
            self.fail(str(exc), param, ctx)
        return (label, text) if self.labelled else text


def check_model_path(path: str) -> None:
    """A .gguf file's header checked (`specdec.reference.model.gguf.check_gguf`, no tensor read);
    any other path must not be a file (a model folder is checked by the command's preflight).
    Raises SpecdecError / OSError with one line."""
    from specdec.errors import SpecdecError
    from specdec.reference.model.gguf import check_gguf, is_gguf

    if is_gguf(path):
        check_gguf(path)
    elif Path(path).is_file():
        raise SpecdecError(f"{path!r} is a file: expected a model folder or a .gguf file")


class PromptsFile(click.ParamType):
    """A prompts file read and checked as it is parsed (found, UTF-8, at least one prompt, every
    JSON line a prompt object: `specdec.reference.data.prompt_sources.read_prompts_file`), so a
    bad one is refused before the tokenizer or any model loads. Converts to the path text."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from specdec.errors import SpecdecError
        from specdec.reference.data.prompt_sources import read_prompts_file

        try:
            read_prompts_file(str(value))
        except SpecdecError as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


class ModelPath(click.ParamType):
    """A model: a local Hugging Face folder or a .gguf file (`check_model_path`)."""

    name = "path"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from specdec.errors import SpecdecError

        try:
            check_model_path(str(value))
        except (SpecdecError, OSError) as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


class Workloads(click.ParamType):
    """`code,edit` or `all`: embedded workload names (`specdec.reference.data.workloads`)."""

    name = "workloads"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, ...]:
        from specdec.errors import SpecdecError
        from specdec.reference.data.workloads import parse_workloads

        if isinstance(value, tuple):
            return value
        try:
            return parse_workloads(str(value))
        except SpecdecError as exc:
            self.fail(str(exc), param, ctx)


class Device(click.ParamType):
    """cpu, cuda or cuda:N (whether this machine has that GPU is checked with the placement)."""

    name = "device"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if text not in ("cpu", "cuda") and not (text.startswith("cuda:") and text[5:].isdigit()):
            self.fail(f"unknown device {text!r}: use cpu, cuda or cuda:N", param, ctx)
        return text


class DeviceMap(click.ParamType):
    """A device map for accelerate: a strategy name, a JSON object or a .json file holding one
    (`specdec.reference.model.placement.parse_device_map`)."""

    name = "map"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from specdec.errors import SpecdecError
        from specdec.reference.model.placement import parse_device_map

        if not isinstance(value, str):
            return value
        try:
            return parse_device_map(value)
        except SpecdecError as exc:
            self.fail(str(exc), param, ctx)


class Rollback(click.ParamType):
    """BiLD's alpha_RB: a number of nats, inf (none, off) or argmax (`specdec.reference.bild.rollback`);
    many: a comma-separated list of them."""

    name = "rollback"

    def __init__(self, many: bool = False) -> None:
        self.many = many

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from specdec.errors import SpecdecError
        from specdec.reference.bild.rollback import parse_rollback

        if not isinstance(value, str):
            return value
        try:
            if self.many:
                return tuple(parse_rollback(r) for r in value.split(",") if r.strip())
            return parse_rollback(value)
        except SpecdecError as exc:
            self.fail(str(exc), param, ctx)


class Renamed(click.Option):
    """An option with old spellings kept as aliases: they still parse, --help shows only the
    current name (`old` lists the aliases)."""

    def __init__(self, param_decls: list[str], old: tuple[str, ...] = (), **attrs: Any) -> None:
        names = [d for d in param_decls if d.startswith("-")]
        rest = [d for d in param_decls if not d.startswith("-")]
        super().__init__([*names, *old, *rest], **attrs)
        self.old = set(old)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        opts, self.opts = self.opts, [o for o in self.opts if o not in self.old]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = opts
