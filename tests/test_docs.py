"""The documentation keeps its promises: the README stays a short front page whose examples run,
every ``GROWNUP_*`` setting has an entry in the settings reference, and the site builds.

README code blocks, by their fence:

- ```python: run as a script in a folder holding ``page.html`` (a copy of
  ``tests/golden/news_jsonld.html``), offline, on the CPU.
- ```python title="FILE": a fragment of a project file (``settings.py``, a spider); compiled,
  not run.
- ```sh: each command is checked. ``grownup ...`` and ``python -m scrapy_grownup ...`` run in
  that folder (as ``python -m scrapy_grownup`` with this interpreter). ``pip install``,
  ``make`` and ``scrapy crawl`` are not run; their package extras and make targets must exist.
  Any other command fails the test.
- A block preceded by ``<!-- docs-test: not run (why) -->`` is not run: its ``grownup``
  commands must name a real sub-command and options its ``--help`` lists.
- ```text and other languages are not checked.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SETTINGS_PAGE = DOCS / "settings.md"
PAGE = ROOT / "tests" / "golden" / "news_jsonld.html"
MAX_README_LINES = 400
NOT_RUN = "<!-- docs-test: not run"
# Words that date a text by the session that wrote it; user pages say what holds now.
UNDATED_PHRASES = ("this release", "last release", "previous release", "earlier release",
                   "this session", "earlier session", "an earlier session")

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`\n]*)\n(?P<body>.*?)\n"
                   r"(?P=indent)(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass
class Block:
    language: str
    info: str
    body: str
    line: int  # 1-based line of the opening fence
    not_run: bool

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.language or 'no language'} block)"


def code_blocks(text: str) -> list[Block]:
    blocks = []
    for match in FENCE.finditer(text):
        info = match.group("info").strip()
        before = text[:match.start()].rstrip().splitlines()
        previous = before[-1].strip() if before else ""
        indent = match.group("indent")
        body = "\n".join(line.removeprefix(indent)
                         for line in match.group("body").splitlines())
        blocks.append(Block(language=info.split()[0].lower() if info else "", info=info,
                            body=body, line=text.count("\n", 0, match.start()) + 1,
                            not_run=previous.startswith(NOT_RUN)))
    return blocks


BLOCKS = code_blocks(README.read_text(encoding="utf-8"))
PYTHON = [b for b in BLOCKS if b.language == "python"]
SHELL = [b for b in BLOCKS if b.language in ("sh", "bash", "shell", "console")]


def shell_commands(block: Block) -> list[list[str]]:
    """The block's commands as argument lists: continuation lines joined, comments dropped,
    ``a && b`` split in two."""
    joined = re.sub(r"\\\n\s*", " ", block.body)
    commands = []
    for line in joined.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            pytest.fail(f"{block.where}: cannot parse {line!r}: {exc}")
        current: list[str] = []
        for word in words + ["&&"]:
            if word == "&&":
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(word)
    return commands


def grownup_arguments(words: list[str]) -> list[str] | None:
    """The arguments of a ``grownup`` / ``python -m scrapy_grownup`` command, else None."""
    if words[:1] == ["grownup"]:
        return words[1:]
    if words[:3] == ["python", "-m", "scrapy_grownup"]:
        return words[3:]
    return None


def _env() -> dict:
    env = dict(os.environ)
    # offline, on the CPU (auto then loads fast), the package from this checkout
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    return env


def _run(args: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess:
    result = subprocess.run(args, check=False, cwd=cwd, env=_env(), capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, (
        f"{what} failed with status {result.returncode}:\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    """A folder holding the page the README's examples read."""
    shutil.copy(PAGE, tmp_path / "page.html")
    return tmp_path


# -- (a) a front page, not a log ----------------------------------------------------------------
def test_readme_is_at_most_400_lines():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, (
        f"README.md has {lines} lines (at most {MAX_README_LINES}): move measurements to "
        "docs/research/ and reference material to docs/")


def test_readme_and_user_pages_are_not_dated_by_a_session():
    pages = [README] + sorted(DOCS.glob("*.md"))
    found = []
    for page in pages:
        text = page.read_text(encoding="utf-8").lower()
        found += [f"{page.relative_to(ROOT)}: {phrase!r}" for phrase in UNDATED_PHRASES
                  if phrase in text]
    assert not found, "say what holds, or date it in docs/research/: " + "; ".join(found)


def test_readme_links_point_at_files_that_exist():
    text = README.read_text(encoding="utf-8")
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (ROOT / target.split("#")[0]).exists():
            missing.append(target)
    assert not missing, f"README links to missing files: {missing}"


def test_readme_has_the_two_make_commands_and_the_speed_placeholder():
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
    assert "<!-- speed -->" in text


# -- (b) the README's examples run --------------------------------------------------------------
def test_readme_has_examples_of_each_kind():
    assert any(not b.not_run and "title=" not in b.info for b in PYTHON)
    assert any("title=" in b.info for b in PYTHON)
    assert any(grownup_arguments(words) for b in SHELL for words in shell_commands(b))


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: f"line{b.line}")
def test_readme_python_block(block: Block, workdir: Path):
    if block.not_run or "title=" in block.info:
        compile(block.body, block.where, "exec")  # a project file's fragment: valid Python
        return
    script = workdir / f"readme_line{block.line}.py"
    script.write_text(block.body + "\n", encoding="utf-8")
    _run([sys.executable, str(script)], workdir, block.where)


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.MULTILINE))


def _extras() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf-8")
    return set(parser["options.extras_require"])


def _check_not_run(words: list[str], where: str) -> None:
    """A command that is shown, not run: it must be well-formed and name what exists."""
    if words[0] == "make":
        targets = _makefile_targets()
        assert all(t in targets for t in words[1:]), f"{where}: no make target in {words}"
    elif words[:2] == ["pip", "install"] or words[:4] == ["python", "-m", "pip", "install"]:
        for word in words:
            for spec in re.findall(r"scrapy-grownup\[([^\]]+)\]|^\.\[([^\]]+)\]", word):
                for extra in filter(None, ",".join(spec).split(",")):
                    assert extra in _extras(), f"{where}: no extra [{extra}] in setup.cfg"
    elif words[:2] == ["scrapy", "crawl"]:
        assert len(words) >= 3 and not words[2].startswith("-"), f"{where}: no spider named"
    elif words[0] == "cd":
        assert len(words) == 2, f"{where}: {words}"
    else:
        pytest.fail(f"{where}: {shlex.join(words)!r} is neither a grownup command nor one the "
                    "test knows to leave alone (pip install, make, scrapy crawl, cd)")


@pytest.mark.parametrize("block", SHELL, ids=lambda b: f"line{b.line}")
def test_readme_shell_block(block: Block, workdir: Path):
    for words in shell_commands(block):
        where = f"{block.where}: {shlex.join(words)}"
        args = grownup_arguments(words)
        if args is None:
            _check_not_run(words, where)
            continue
        if block.not_run:
            # a real sub-command (``grownup lab evaluate``, or a nested one such as ``grownup lab
            # evaluate``), and options its --help lists
            leading = []
            for word in args:
                if word.startswith("-") or len(leading) == 2:
                    break
                leading.append(word)
            for size in range(len(leading), 0, -1):
                result = subprocess.run(
                    [sys.executable, "-m", "scrapy_grownup", *leading[:size], "--help"],
                    check=False, cwd=workdir, env=_env(), capture_output=True, text=True,
                    timeout=180)
                if result.returncode == 0:
                    break
            assert result.returncode == 0, f"{where}: no such command\n{result.stderr[-2000:]}"
            for option in (a.split("=")[0] for a in args if a.startswith("--")):
                assert re.search(re.escape(option) + r"(?![\w-])", result.stdout), \
                    f"{where}: no option {option} in its --help"
            continue
        _run([sys.executable, "-m", "scrapy_grownup", *args], workdir, where)


# -- (c) every setting has an entry in the settings reference -----------------------------------
def _setting_sections() -> dict[str, str]:
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    parts = re.split(r"^###\s+`(GROWNUP_[A-Z0-9_]+)`\s*$", text, flags=re.MULTILINE)
    return {name: re.split(r"^#{1,3}\s", body, maxsplit=1, flags=re.MULTILINE)[0]
            for name, body in zip(parts[1::2], parts[2::2])}


def _all_defaults() -> dict[str, object]:
    from scrapy_grownup.crawl.settings import DEFAULTS
    from scrapy_grownup.warc.settings import WARC_DEFAULTS

    return {**DEFAULTS, **WARC_DEFAULTS}


def test_every_setting_has_an_entry_with_its_default():
    sections = _setting_sections()
    problems = []
    for name, default in _all_defaults().items():
        body = sections.get(name)
        if body is None:
            problems.append(f"{name}: no '### `{name}`' entry")
            continue
        found = re.search(r"\*\*Default:\*\*\s*`([^`]*)`", body)
        if found is None or found.group(1) != repr(default):
            problems.append(f"{name}: default should read `{default!r}`, not "
                            f"{found.group(1) if found else 'missing'}")
        for label in ("Type", "Example"):
            if f"**{label}:**" not in body:
                problems.append(f"{name}: no **{label}:** line")
    assert not problems, "docs/settings.md:\n" + "\n".join(problems)


def test_the_settings_reference_names_no_setting_that_is_gone():
    stale = set(_setting_sections()) - set(_all_defaults())
    assert not stale, f"docs/settings.md documents settings the package does not read: {stale}"


def test_the_settings_summary_table_has_every_default():
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(GROWNUP_[A-Z0-9_]+)` \| `([^`]*)` \|", text, re.MULTILINE))
    assert rows == {name: repr(value) for name, value in _all_defaults().items()}


# -- (d) the site builds ------------------------------------------------------------------------
def test_mkdocs_build_strict(tmp_path: Path):
    try:
        import mkdocs  # noqa: F401
        import mkdocstrings_handlers.python  # noqa: F401
    except ImportError:
        pytest.skip("mkdocs not installed: pip install -e .[docs]")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
         str(tmp_path / "site")],
        check=False, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-6000:]}"
