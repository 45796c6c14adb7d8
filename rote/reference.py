"""The parameter reference page (``book/parameters.md``'s :data:`MARKER`), generated at staging from the
declarations: every chapter parameter (its dataclass field, rule, default, chapters) and every run
parameter (its configuration field, the valid values read from the ``__post_init__`` checks, its default
per profile, the chapters that take it), each with one example command checked like the command line
checks it, without running anything (:func:`check_example`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import re
import shlex
import sys
import textwrap
from dataclasses import dataclass

from .fmt import md_cell

MARKER = "<!-- rote:parameters -->"  # book/parameters.md: replaced at staging by parameters_page()
EXAMPLE_PROFILE = "quick"  # `rote run`'s default profile: the examples are checked on it

# Example values for parameters whose default names no value to start from (None: the chapter chooses;
# {}: no overrides). Each is checked (check_example) before it is shown, like every example.
EXAMPLE_VALUES = {"seeds": [0, 1], "sweep_ratios": [0.0, 0.1, 0.2], "widths": [64, 128], "noise_ratios": [0.05, 0.2],
                  "overrides": {"noise_ratio": 0.2}}


@dataclass(frozen=True)
class Row:
    """One row of the page: a parameter (``name``) as one declaration states it."""

    name: str
    type: str
    valid: str
    defaults: tuple[str, ...]  # one cell (a chapter parameter) or one per profile (a run parameter)
    chapters: tuple[str, ...]
    example: str


# -- checking an example ---------------------------------------------------------------------------
def check_example(command: str):
    """Parse and check ``command`` (``python -m rote run|train ...``) as the command line does before
    any work; the parsed arguments, or ``ConfigError`` / ``UsageError``."""
    from . import cli
    from .driver import resolve_parameters
    from .config import make_config

    words = shlex.split(command)
    if words[:3] != ["python", "-m", "rote"]:
        raise cli.UsageError(f"not a rote command: {command}")
    args = cli.parser().parse_args(words[3:])
    params = cli._params(args.param)
    if args.command == "run":
        resolve_parameters(args.chapter, args.profile, params)
    elif args.command == "train" and args.task:
        make_config(args.task, args.profile, **params)
    else:
        raise cli.UsageError(f"an example is `rote run CHAPTER` or `rote train --task TASK`: {command}")
    return args


def _forms(value) -> list[str]:
    """How a value is written after ``-p NAME`` ("a,b" or JSON for a list, JSON, true/false)."""
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, (list, tuple)):
        plain = all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)
        return ([",".join(str(v) for v in value)] if plain else []) + [json.dumps(list(value))]
    if isinstance(value, dict):
        return [json.dumps(value)]
    return [str(value)]


def _choices(valid: str) -> list[str]:
    """The values a valid-values text names: 'quoted' words, or the list after "one of"."""
    quoted = re.findall(r"'([^']+)'", valid)
    if quoted:
        return quoted
    return [w.strip() for w in valid[len("one of "):].split(",")] if valid.startswith("one of ") else []


def _candidates(name: str, default, valid: str) -> list:
    """Values to show in an example, best first: one derived from the default, else a listed one."""
    if name in EXAMPLE_VALUES and not default:
        return [EXAMPLE_VALUES[name]]
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [default * 2 if default else 1, default + 1, default - 1, default // 2]
    if isinstance(default, float):
        return [round(default * 2, 10), round(default / 2, 10), round(default + 0.1, 10)]
    if isinstance(default, str):
        return [c for c in _choices(valid) if c != default]
    if isinstance(default, list) and len(default) > 1:
        return [default[:-1]]
    if isinstance(default, dict):
        return [{k: v[:1] if isinstance(v, list) else v for k, v in default.items()}]
    return []


def _example(prefix: list[str], name: str, default, valid: str) -> str:
    """The first ``prefix -p NAME VALUE`` that :func:`check_example` accepts ("" when none)."""
    from .config import ConfigError

    values = _candidates(name, default, valid) + ([default] if default is not None else [])
    for value in values:
        for text in _forms(value):
            command = shlex.join([*prefix, "-p", name, text])
            try:
                check_example(command)
            except (ConfigError, ValueError, TypeError):
                continue
            return command
    return ""


# -- chapter parameters --------------------------------------------------------------------------
def _declared() -> list[str]:
    """The chapters with a parameter dataclass, in book order."""
    from .chapters.params import CHAPTER_PARAMS
    from .driver import chapters

    return [n for n in chapters() if n in CHAPTER_PARAMS]


def _type_text(field) -> str:
    return field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))


def _value_text(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, (list, dict, str)) else str(value)


def chapter_rows() -> list[Row]:
    """One row per chapter parameter and distinct declaration, in the chapters' (book) order."""
    from .chapters.params import chapter_params

    names = _declared()
    groups: dict[tuple, list[str]] = {}
    first: dict[tuple, object] = {}
    for chapter in names:
        cls = chapter_params(chapter)
        defaults = cls.defaults()
        for f in dataclasses.fields(cls):
            key = (f.name, _type_text(f), f.metadata["rule"].wanted, _value_text(defaults[f.name]))
            groups.setdefault(key, []).append(chapter)
            first.setdefault(key, defaults[f.name])
    order = {}
    for key in groups:
        order.setdefault(key[0], len(order))
    rows = []
    for key in sorted(groups, key=lambda k: order[k[0]]):  # stable: a name's declarations stay in book order
        name, type_text, valid, default_text = key
        chapters_of = tuple(groups[key])
        if name == "profile":  # given with --profile, not -p
            example = next((shlex.join(["python", "-m", "rote", "run", chapters_of[0], "--profile", p])
                            for p in _choices(valid) if p != first[key]), "")
        else:
            example = _example(["python", "-m", "rote", "run", chapters_of[0]], name, first[key], valid)
        rows.append(Row(name, type_text, valid, (default_text,), chapters_of, example))
    return rows


def chapter_checks() -> list[tuple[str, list[str]]]:
    """(chapter, checks) per ``check_together``: each ``at_most`` as "name <= bound", and its docstring."""
    from .chapters.params import ChapterParams, chapter_params

    out = []
    for chapter in _declared():
        method = chapter_params(chapter).check_together
        if method is ChapterParams.check_together:
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
        checks = [f"`{call.args[0].value} <= {call.args[2].value}`" for call in ast.walk(tree)
                  if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "at_most"
                  and len(call.args) == 4 and all(isinstance(call.args[i], ast.Constant) for i in (0, 2))]
        doc = method.__doc__  # the override's own (inspect.getdoc would inherit the base's)
        out.append((chapter, checks + ([" ".join(doc.split())] if doc else [])))
    return out


# -- run parameters ------------------------------------------------------------------------------
class _Inline(ast.NodeTransformer):
    """``self.x`` -> ``x``; a one-``return`` property -> its expression: a check in settable fields."""

    def __init__(self, cls):
        self.cls = cls

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            prop = inspect.getattr_static(self.cls, node.attr, None)
            if isinstance(prop, property):
                body = [n for n in ast.parse(textwrap.dedent(inspect.getsource(prop.fget))).body[0].body
                        if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
                if len(body) == 1 and isinstance(body[0], ast.Return):
                    return self.visit(body[0].value)
            return ast.Name(id=node.attr, ctx=ast.Load())
        return self.generic_visit(node)


def _message(node, given: dict[str, str]) -> str | None:
    """A check's message as text (f-string fields as ``{expression}``, or ``given``'s value)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if not isinstance(node, ast.JoinedStr):
        return None
    parts = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            parts.append(str(part.value))
        elif isinstance(part, ast.FormattedValue):
            inner = part.value
            parts.append(given[inner.id] if isinstance(inner, ast.Name) and inner.id in given
                         else "{" + ast.unparse(inner) + "}")
    return "".join(parts)


MUST_BE = re.compile(r"^(?P<names>\w+(?:(?:, | and )\w+)*) must be (?P<what>.+)$")


def _checks(function, cls, given: dict[str, str] | None = None) -> list[tuple[ast.expr, str | None]]:
    """(condition, message) of each ``_check`` in ``function``, following the module's helpers."""
    module = sys.modules[function.__module__]
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    out = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            continue
        if call.func.id == "_check" and len(call.args) == 2:
            out.append((call.args[0], _message(call.args[1], given or {})))
            continue
        helper = getattr(module, call.func.id, None)
        if inspect.isfunction(helper) and helper.__module__ == module.__name__ and "_check(" in inspect.getsource(helper):
            params = list(inspect.signature(helper).parameters)
            constants = {p: a.value for p, a in zip(params, call.args) if isinstance(a, ast.Constant)}
            out += _checks(helper, cls, {k: str(v) for k, v in constants.items()})
    return out


def declared_ranges(cls) -> tuple[dict[str, list[str]], list[str]]:
    """What a configuration's ``__post_init__`` checks say: field -> valid values ("n_train must be >= 1"
    -> ">= 1"), and the conditions of the checks across fields, as code."""
    per_field: dict[str, list[str]] = {}
    together: list[str] = []
    fields = {f.name for f in dataclasses.fields(cls)}
    for condition, message in _checks(cls.__post_init__, cls):
        text = message or ""
        text = re.sub(r"(\w+)=\{self\.\1\}", r"\1", text)  # "in [1, n_relations={self.n_relations}]"
        text = re.sub(r" \(\{self\.\w+\}\)", "", text)  # "d_model ({self.d_model}) must be divisible by ..."
        text = text.split(", got ", 1)[0]
        found = MUST_BE.match(text)
        names = re.split(r", | and ", found.group("names")) if found else []
        if found and "{" not in text and names and all(n in fields for n in names):
            for n in names:
                per_field.setdefault(n, []).append(found.group("what"))
        else:
            together.append(ast.unparse(_Inline(cls).visit(condition)))
    return per_field, together


def _readers(tasks: tuple[str, ...], name: str) -> list[str]:
    """The chapters that take a run parameter (``overrides`` and one of ``tasks``); none for a seed."""
    from .chapters.params import chapter_params
    from .config import TASKS
    from .plan import SEED_NAMES

    if name in SEED_NAMES:
        return []
    out = []
    for chapter in _declared():
        defaults = chapter_params(chapter).defaults()
        if "overrides" in defaults and set(defaults.get("tasks") or TASKS) & set(tasks):
            out.append(chapter)
    return out


def run_sections() -> list[tuple[str, str, list[Row], list[str]]]:
    """(title, class name, rows, checks across fields) per part of the run configuration."""
    from .chapters.params import chapter_params
    from .config import DATA_CONFIGS, PROFILE_PARAMS, PROFILES, TASKS, ModelConfig, TrainConfig
    from .plan import SEED_NAMES

    parts = [(f"{task.upper()} data", DATA_CONFIGS[task], (task,)) for task in TASKS]
    parts += [("Model", ModelConfig, TASKS), ("Training", TrainConfig, TASKS)]
    out = []
    for title, cls, tasks in parts:
        ranges, together = declared_ranges(cls)
        rows = []
        for f in dataclasses.fields(cls):
            per_profile = []
            for profile in PROFILES:
                values = {t: PROFILE_PARAMS[profile][t].get(f.name, f.default) for t in tasks}
                text = {t: v if isinstance(v, str) else _value_text(v) for t, v in values.items()}
                per_profile.append(next(iter(text.values())) if len(set(text.values())) == 1
                                   else ", ".join(f"{t} {v}" for t, v in text.items()))
            valid = "; ".join(ranges.get(f.name, [])) or f"any {_type_text(f)} (not checked)"
            if f.name in SEED_NAMES:
                valid += ("; no chapter takes it: a chapter's seed parameter (`seeds`, `seed`) sets it "
                          "(seed s: data_seed = noise_seed = model_seed = s)")
            readers = _readers(tasks, f.name)
            with_runs = [c for c in readers if "seeds" in chapter_params(c).defaults()]  # the example's chapter
            default = PROFILE_PARAMS[EXAMPLE_PROFILE][tasks[0]].get(f.name, f.default)
            prefix = (["python", "-m", "rote", "run", (with_runs or readers)[0]] if readers
                      else ["python", "-m", "rote", "train", "--task", tasks[0]])
            rows.append(Row(f.name, _type_text(f), valid, tuple(per_profile), tuple(readers),
                            _example(prefix, f.name, default, valid)))
        out.append((title, cls.__name__, rows, together))
    return out


# -- the page ------------------------------------------------------------------------------------
# Each table in a container: "full-width" lets it use the page's right margin on a wide screen (the
# theme's class, as rote.site.widen_tables uses it), "rote-reference" sets its type (book/_static/rote.css).
TABLE_OPEN = ":::{container} full-width rote-reference"


def _chapter_links(names) -> str:
    from .driver import chapters

    paths = chapters()
    return ", ".join(f"{{doc}}`{n} <{paths[n].stem}>`" for n in names) if names else "none"


@functools.lru_cache(maxsize=None)
def parameters_page() -> str:
    """The generated part of the parameter reference page (once per process)."""
    from .config import PROFILES

    lines = ["## Chapter parameters", "",
             "Set with `python -m rote run CHAPTER -p NAME VALUE` (the profile with `--profile`). A list is "
             "written `a,b` or as JSON, a dict as JSON. A parameter that chapters declare differently has one "
             "row per declaration.", "",
             TABLE_OPEN, "| parameter (type) | valid values | default | chapters | example |", "|:--|:--|:--|:--|:--|"]
    for r in chapter_rows():
        lines.append(f"| `{r.name}` (`{md_cell(r.type)}`) | {md_cell(r.valid)} | `{md_cell(r.defaults[0])}` "
                     f"| {_chapter_links(r.chapters)} | `{md_cell(r.example)}` |")
    lines.append(":::")
    checks = chapter_checks()
    if checks:
        lines += ["", "Checked together, beyond each value's own range:", ""]
        lines += [f"- {_chapter_links([c])}: {'; '.join(texts)}" for c, texts in checks]
    lines += ["", "## Run parameters", "",
              "The configuration of a trained run (`rote.config`). A chapter with an `overrides` parameter "
              "takes them with `-p NAME VALUE` and applies them to every run it loads (a value that no run "
              "of the chapter's tasks has is refused); `python -m rote train --task TASK -p NAME VALUE` "
              "trains one run. The defaults are each profile's (`--profile`), per task where the tasks "
              "differ; the valid values are the words of the configuration's own checks.", ""]
    for title, cls_name, rows, together in run_sections():
        readers = list(dict.fromkeys(c for r in rows for c in r.chapters))  # every chapter that takes one of them
        lines += [f"### {title} (`{cls_name}`)", "",
                  f"Chapters that take these parameters: {_chapter_links(readers)}.", "", TABLE_OPEN,
                  "| parameter (type) | valid values | " + " | ".join(PROFILES) + " | example |",
                  "|:--|:--|" + ":--|" * len(PROFILES) + ":--|"]
        for r in rows:
            valid = r.valid if list(r.chapters) == readers or "no chapter takes it" in r.valid else (
                f"{r.valid}; taken by {_chapter_links(r.chapters)}" if r.chapters else f"{r.valid}; no chapter takes it")
            lines.append(f"| `{r.name}` (`{md_cell(r.type)}`) | {md_cell(valid)} | "
                         + " | ".join(md_cell(d) for d in r.defaults) + f" | `{md_cell(r.example)}` |")
        lines.append(":::")
        if together:
            lines += ["", "Checked together: " + "; ".join(f"`{md_cell(t)}`" for t in together) + "."]
        lines.append("")
    return "\n".join(lines) + "\n"
