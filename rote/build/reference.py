"""The parameter reference page (``book/parameters.md``'s :data:`MARKER`), generated at staging from the
declarations: every chapter parameter (field, rule, default, chapters) and every run parameter (field,
the valid values read from the ``__post_init__`` checks, default per profile, chapters), each with an
example command checked like the command line checks it, without running anything (:func:`check_example`).
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

from ..fmt import md_cell

MARKER = "<!-- rote:parameters -->"  # book/parameters.md: replaced at staging by parameters_page()
EXAMPLE_PROFILE = "quick"  # `rote run`'s default profile: the examples are checked on it
RUN = ["python", "-m", "rote", "run"]

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
    from ..config import make_config
    from .arguments import UsageError, pairs, parser
    from .driver import resolve_parameters

    words = shlex.split(command)
    if words[:3] != RUN[:3]:
        raise UsageError(f"not a rote command: {command}")
    args = parser().parse_args(words[3:])
    params = pairs(args.param)
    if args.command == "run":
        resolve_parameters(args.chapter, args.profile, params)
    elif args.command == "train" and args.task:
        make_config(args.task, args.profile, **params)
    else:
        raise UsageError(f"an example is `rote run CHAPTER` or `rote train --task TASK`: {command}")
    return args


def _forms(value) -> list[str]:
    """How a value is written after ``-p NAME`` ("a,b" or JSON for a list, JSON, true/false)."""
    if isinstance(value, (list, tuple)):
        plain = all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)
        return ([",".join(str(v) for v in value)] if plain else []) + [json.dumps(list(value))]
    return [json.dumps(value) if isinstance(value, (bool, dict)) else str(value)]


def _choices(valid: str) -> list[str]:
    """The values a valid-values text names: 'quoted' words, or the list after "one of"."""
    quoted = re.findall(r"'([^']+)'", valid)
    if quoted or not valid.startswith("one of "):
        return quoted
    return [w.strip() for w in valid[len("one of "):].split(",")]


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
    from ..config import ConfigError

    for value in _candidates(name, default, valid) + ([default] if default is not None else []):
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
    from ..chapters.params import CHAPTER_PARAMS
    from .driver import chapters

    return [n for n in chapters() if n in CHAPTER_PARAMS]


def _type_text(field) -> str:
    """A run configuration field's type as written."""
    return field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))


def _value_text(value) -> str:
    return "None" if value is None else json.dumps(value) if isinstance(value, (bool, list, dict, str)) else str(value)


def _default_text(declared) -> str:
    """A chapter parameter's default; for None, what it stands for per profile where declared (once if alike)."""
    per_profile = {p: _value_text(v) for p, v in declared.profile_defaults().items()}
    if not per_profile:
        return _value_text(declared.default)
    if len(set(per_profile.values())) == 1:
        return f"None: {next(iter(per_profile.values()))}"
    return "None: " + "; ".join(f"{p} {v}" for p, v in per_profile.items())


def chapter_rows() -> list[Row]:
    """One row per chapter parameter and distinct declaration, a name's declarations in book order."""
    from ..chapters.params import chapter_params

    groups: dict[tuple, list[str]] = {}
    first: dict[tuple, object] = {}
    for chapter in _declared():
        for d in chapter_params(chapter).declared().values():
            key = (d.name, d.type, d.valid, _default_text(d))
            groups.setdefault(key, []).append(chapter)
            first.setdefault(key, d.default)
    order = list(dict.fromkeys(key[0] for key in groups))
    rows = []
    for key in sorted(groups, key=lambda k: order.index(k[0])):
        name, type_text, valid, default_text = key
        prefix = [*RUN, groups[key][0]]
        if name == "profile":  # given with --profile, not -p
            example = next((shlex.join([*prefix, "--profile", p]) for p in _choices(valid) if p != first[key]), "")
        elif name == "settings":  # the build's: --seeds and the $ROTE_* folders (rote.settings), not -p
            example = shlex.join([*prefix, "--seeds", "1"])
        else:
            example = _example(prefix, name, first[key], valid)
        rows.append(Row(name, type_text, valid, (default_text,), tuple(groups[key]), example))
    return rows


def chapter_checks() -> list[tuple[str, list[str]]]:
    """(chapter, checks) per chapter with checks across fields: each declared ``at_most`` as "name <= bound",
    and a ``check_together`` override's docstring."""
    from ..chapters.params import ChapterParams, chapter_params

    out = []
    for chapter in _declared():
        declared = chapter_params(chapter)
        checks = [f"`{d.name} <= {d.at_most}`" for d in declared.declared().values() if d.at_most]
        method = declared.check_together
        doc = method.__doc__ if method is not ChapterParams.check_together else None  # the override's own
        if checks or doc:
            out.append((chapter, checks + ([" ".join(doc.split())] if doc else [])))
    return out


# -- run parameters ------------------------------------------------------------------------------
def _calls(function, *names: str) -> list[ast.Call]:
    """The calls of the functions ``names`` (every call where none) in ``function``'s source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and (not names or n.func.id in names)]


def _inline(cls, node):
    """``self.x`` -> ``x``, and a one-``return`` property -> its expression: a check in settable fields."""
    class Inline(ast.NodeTransformer):
        def visit_Attribute(self, node):
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                return self.generic_visit(node)
            prop = inspect.getattr_static(cls, node.attr, None)
            if isinstance(prop, property):
                body = [n for n in ast.parse(textwrap.dedent(inspect.getsource(prop.fget))).body[0].body
                        if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
                if len(body) == 1 and isinstance(body[0], ast.Return):
                    return self.visit(body[0].value)
            return ast.Name(id=node.attr, ctx=ast.Load())

    return Inline().visit(node)


def _text(part, given: dict[str, str]) -> str:
    """A piece of a check's message: its text, a helper's argument (``given``), or ``{expression}``."""
    if isinstance(part, ast.Constant):
        return str(part.value)
    if not isinstance(part, ast.FormattedValue):
        return ""  # a message that is not text
    expression = ast.unparse(part.value)
    return given.get(expression, "{" + expression + "}")


def _checks(function, given: dict[str, str] | None = None) -> list[tuple[ast.expr, str]]:
    """(condition, message) of each ``_check`` in ``function``, following the module's helpers that call it
    (``given``: a helper's constant arguments, written into its messages)."""
    module = sys.modules[function.__module__]
    out = []
    for call in _calls(function):
        helper = getattr(module, call.func.id, None)
        if call.func.id == "_check" and len(call.args) == 2:
            message = call.args[1]
            parts = message.values if isinstance(message, ast.JoinedStr) else [message]
            out.append((call.args[0], "".join(_text(p, given or {}) for p in parts)))
        elif (inspect.isfunction(helper) and helper.__module__ == module.__name__
              and "_check(" in inspect.getsource(helper)):
            params = inspect.signature(helper).parameters
            out += _checks(helper, {p: str(a.value) for p, a in zip(params, call.args) if isinstance(a, ast.Constant)})
    return out


MUST_BE = re.compile(r"^(?P<names>\w+(?:(?:, | and )\w+)*) must be (?P<what>.+)$")


def declared_ranges(cls) -> tuple[dict[str, list[str]], list[str]]:
    """What a configuration's ``__post_init__`` checks say: field -> valid values ("n_train must be >= 1"
    -> ">= 1"), and the conditions of the checks across fields, as code."""
    from ..noise import kinds_text

    per_field: dict[str, list[str]] = {}
    together: list[str] = []
    fields = {f.name for f in dataclasses.fields(cls)}
    table_values = {"kinds_text()": kinds_text(described=True)}  # a check's message that names the noise kinds
    for condition, text in _checks(cls.__post_init__, table_values):
        text = re.sub(r"(\w+)=\{self\.\1\}", r"\1", text)  # "in [1, n_relations={self.n_relations}]"
        text = re.sub(r" \(\{self\.\w+\}\)", "", text)  # "d_model ({self.d_model}) must be divisible by ..."
        found = MUST_BE.match(text.split(", got ", 1)[0])
        names = re.split(r", | and ", found.group("names")) if found else []
        if found and "{" not in found.group(0) and names and all(n in fields for n in names):
            for n in names:
                per_field.setdefault(n, []).append(found.group("what"))
        else:
            together.append(ast.unparse(_inline(cls, condition)))
    return per_field, together


def _readers(tasks: tuple[str, ...], name: str) -> list[str]:
    """The chapters that take a run parameter (``overrides`` and one of ``tasks``); none for a seed."""
    from ..chapters.params import chapter_params
    from ..config import TASKS
    from ..plan import SEED_NAMES

    if name in SEED_NAMES:
        return []
    return [c for c in _declared() if "overrides" in chapter_params(c).defaults()
            and set(chapter_params(c).defaults().get("tasks") or TASKS) & set(tasks)]


def _run_row(field, tasks: tuple[str, ...], ranges: dict[str, list[str]]) -> Row:
    """A run parameter's row: its values per profile (per task where they differ), checks and example."""
    from ..chapters.params import chapter_params
    from ..config import PROFILE_PARAMS, PROFILES
    from ..plan import SEED_NAMES

    per_profile = []
    for profile in PROFILES:
        text = {t: v if isinstance(v, str) else _value_text(v)
                for t, v in ((t, PROFILE_PARAMS[profile][t].get(field.name, field.default)) for t in tasks)}
        per_profile.append(next(iter(text.values())) if len(set(text.values())) == 1
                           else ", ".join(f"{t} {v}" for t, v in text.items()))
    valid = "; ".join(ranges.get(field.name, [])) or f"any {_type_text(field)} (not checked)"
    if field.name in SEED_NAMES:
        valid += ("; no chapter takes it: a chapter's seed parameter (`seeds`, `seed`) sets it "
                  "(seed s: data_seed = noise_seed = model_seed = s)")
    readers = _readers(tasks, field.name)
    with_runs = [c for c in readers if "seeds" in chapter_params(c).defaults()]  # the example's chapter
    prefix = [*RUN, (with_runs or readers)[0]] if readers else ["python", "-m", "rote", "train", "--task", tasks[0]]
    default = PROFILE_PARAMS[EXAMPLE_PROFILE][tasks[0]].get(field.name, field.default)
    return Row(field.name, _type_text(field), valid, tuple(per_profile), tuple(readers),
               _example(prefix, field.name, default, valid))


def run_sections() -> list[tuple[str, str, list[Row], list[str]]]:
    """(title, class name, rows, checks across fields) per part of the run configuration."""
    from ..config import DATA_CONFIGS, TASKS, ModelConfig, TrainConfig

    parts = [(f"{task.upper()} data", DATA_CONFIGS[task], (task,)) for task in TASKS]
    out = []
    for title, cls, tasks in parts + [("Model", ModelConfig, TASKS), ("Training", TrainConfig, TASKS)]:
        ranges, together = declared_ranges(cls)
        out.append((title, cls.__name__, [_run_row(f, tasks, ranges) for f in dataclasses.fields(cls)], together))
    return out


# -- the page ------------------------------------------------------------------------------------
# Each table in a container: "full-width" lets it use the page's right margin on a wide screen (the
# theme's class, as rote.build.site.widen_tables uses it), "rote-reference" sets its type (book/_static/rote.css).
TABLE_OPEN = ":::{container} full-width rote-reference"


def _chapter_links(names) -> str:
    from .driver import chapters

    return ", ".join(f"{{doc}}`{n} <{chapters()[n].stem}>`" for n in names) if names else "none"


@functools.lru_cache(maxsize=None)
def parameters_page() -> str:
    """The generated part of the parameter reference page (once per process)."""
    from ..config import PROFILES

    lines = ["## Chapter parameters", "",
             "Set with `python -m rote run CHAPTER -p NAME VALUE` (the profile with `--profile`). A list is "
             "written `a,b` or as JSON, a dict as JSON. A parameter that chapters declare differently has one "
             "row per declaration.", "",
             TABLE_OPEN, "| parameter (type) | valid values | default | chapters | example |", "|:--|:--|:--|:--|:--|"]
    lines += [f"| `{r.name}` (`{md_cell(r.type)}`) | {md_cell(r.valid)} | `{md_cell(r.defaults[0])}` "
              f"| {_chapter_links(r.chapters)} | `{md_cell(r.example)}` |" for r in chapter_rows()]
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
                         + " | ".join(f"`{md_cell(d)}`" for d in r.defaults) + f" | `{md_cell(r.example)}` |")
        lines += [":::", *(["", "Checked together: " + "; ".join(f"`{md_cell(t)}`" for t in together) + "."]
                           if together else []), ""]
    return "\n".join(lines) + "\n"
