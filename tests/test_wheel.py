"""The built wheel is a working install: models inside, CLI and API extract a page offline.

The wheel is built from a copy of the package's sources (so no ``build/`` directory is left in
the checkout and nothing stale from an earlier build can slip in), installed without
dependencies into a fresh virtual environment (not editable), and used from a directory outside
the checkout. The new environment borrows torch & co. from this interpreter's site-packages
through a ``.pth`` file that lists those directories as plain paths: a path line in a ``.pth``
does not process the ``.pth`` files inside it, so this checkout's editable install stays out.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from importlib.util import find_spec
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "tests" / "golden" / "news_jsonld.html"
SENTENCE = "The council voted 7-2 on Tuesday to add protected bike lanes on three streets."
TITLE = "City council approves new bike lanes & parking rules"
# What a wheel is built from: the package and the project files setup.cfg names.
BUILD_FILES = ("setup.cfg", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in")
# What a plain install leaves out: the extras [torch], [gpu], [minilm] and [train].
HEAVY = ("torch", "torch_geometric", "transformers", "sentence_transformers")
NO_TORCH = (
    "class _NotInstalled:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    f"        if name.split('.')[0] in {HEAVY!r}:\n"
    "            raise ImportError(f'No module named {name!r} (GROWNUP_TEST_NO_TORCH)')\n"
    "sys.meta_path.insert(0, _NotInstalled())\n")


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, f"{cmd} failed ({result.returncode}):\n" \
        f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    missing = [m for m in ("pip", "setuptools", "wheel", "venv") if find_spec(m) is None]
    if missing:  # not imported here: importing setuptools in the test process alters distutils
        pytest.skip(f"building a wheel needs {', '.join(missing)}")
    tmp = tmp_path_factory.mktemp("wheel")
    env = _clean_env()

    source = tmp / "src"
    source.mkdir()
    for name in BUILD_FILES:
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "scrapy_grownup", source / "scrapy_grownup",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    build = _run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps",
                  "--no-build-isolation", "--no-index", "-w", str(dist), str(source)],
                 cwd=tmp, env=env)
    wheel = next(dist.glob("scrapy_grownup-*.whl"))

    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=env)
    python = venv / "bin" / "python"
    # Installed before the .pth below exists: pip then sees no other scrapy_grownup.
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
          "--no-index", "--no-compile", "-q", str(wheel)], cwd=tmp, env=env)
    purelib = Path(_run([str(python), "-c", "import sysconfig; "
                         "print(sysconfig.get_paths()['purelib'])"], env=env).stdout.strip())
    (purelib / "_grownup_test_dependencies.pth").write_text(
        "".join(p + "\n" for p in site.getsitepackages() if Path(p).is_dir()))
    # With GROWNUP_TEST_NO_TORCH set, the environment behaves as one where torch & co. were
    # never installed: importing them raises ImportError (what a plain install gives).
    (purelib / "_grownup_test_no_torch.pth").write_text(
        "import os, sys; exec(" + repr(NO_TORCH) + ") if os.environ.get('GROWNUP_TEST_NO_TORCH') "
        "else None\n")
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    shutil.copy2(PAGE, elsewhere / "page.html")
    return {"wheel": wheel, "build_log": build.stdout + build.stderr, "venv": venv,
            "python": python, "purelib": purelib, "cwd": elsewhere, "env": env}


def test_wheel_holds_every_runtime_asset_and_nothing_from_tests(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    for model in ("fast", "minilm"):
        for file in ("config.json", "model.safetensors", "block_rescorer.npz", "page_type.npz"):
            assert f"scrapy_grownup/assets/models/{model}/{file}" in names
    for file in ("config.json", "embeddings.safetensors", "tokenizer.json"):
        assert f"scrapy_grownup/assets/static-minilm/{file}" in names
    assert "scrapy_grownup/py.typed" in names  # type checkers read the package's hints
    assert not [n for n in names if n.startswith(("tests/", "example_project/", "benchmarks/"))
                or "__pycache__" in n or n.endswith(".pyc")]
    assert {n.split("/")[0] for n in names} == {"scrapy_grownup",
                                               installed["wheel"].name.split("-py")[0]
                                               + ".dist-info"}
    dist_info = installed["wheel"].name.split("-py")[0] + ".dist-info"
    with zipfile.ZipFile(installed["wheel"]) as wheel:
        licence = wheel.read(f"{dist_info}/licenses/LICENSE").decode()
        metadata = wheel.read(f"{dist_info}/METADATA").decode()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "License: Apache-2.0" in metadata or "License-Expression: Apache-2.0" in metadata
    assert "absent from the `packages` configuration" not in installed["build_log"]
    assert "scrapy_grownup.assets" not in installed["build_log"]


def test_installed_cli_extracts_a_page(installed):
    grownup = str(installed["venv"] / "bin" / "grownup")
    version = _run([grownup, "--version"], cwd=installed["cwd"], env=installed["env"]).stdout
    where = Path(version.split(" from ", 1)[1].rsplit(" (", 1)[0]).resolve()
    assert where.is_relative_to(installed["purelib"].resolve()), version
    out = installed["cwd"] / "articles.jsonl"
    result = _run([grownup, "extract", "page.html", "-o", str(out)], cwd=installed["cwd"],
                  env=installed["env"])
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 1, result.stderr
    assert rows[0]["title"] == TITLE and SENTENCE in rows[0]["text"]
    assert rows[0]["model"] == "fast"


def test_installed_api_extracts_a_page_from_the_new_environment(installed):
    script = (
        "import json, scrapy_grownup\n"
        "from scrapy_grownup import ArticleExtractor\n"
        "from scrapy_grownup.extractor import shipped_models\n"
        "article = ArticleExtractor.from_pretrained().extract(\n"
        "    open('page.html', 'rb').read(), url='https://riverside.example.com/x')\n"
        "print(json.dumps({'file': scrapy_grownup.__file__, 'models': shipped_models(),\n"
        "                  'title': article.title, 'text': article.text}))\n")
    result = _run([str(installed["python"]), "-c", script], cwd=installed["cwd"],
                  env=installed["env"])
    found = json.loads(result.stdout.strip().splitlines()[-1])
    module = Path(found["file"]).resolve()
    assert module.is_relative_to(installed["purelib"].resolve()), module
    assert not module.is_relative_to(ROOT)
    assert {"fast", "minilm"} <= set(found["models"])
    assert found["title"] == TITLE and SENTENCE in found["text"]


def test_the_wheel_requires_torch_only_for_its_extras(installed):
    dist_info = installed["wheel"].name.split("-py")[0] + ".dist-info"
    with zipfile.ZipFile(installed["wheel"]) as wheel:
        metadata = wheel.read(f"{dist_info}/METADATA").decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    heavy = [line for line in requires if any(name in line.lower() for name in
                                              ("torch", "sentence-transformers"))]
    assert heavy and all("extra ==" in line for line in heavy), heavy


def test_installed_without_torch_the_cli_and_the_api_extract_a_page(installed):
    env = dict(installed["env"], GROWNUP_TEST_NO_TORCH="1")
    blocked = subprocess.run([str(installed["python"]), "-c", "import torch"],
                             capture_output=True, text=True, env=env, timeout=60)
    assert blocked.returncode != 0 and "GROWNUP_TEST_NO_TORCH" in blocked.stderr
    grownup = str(installed["venv"] / "bin" / "grownup")
    out = installed["cwd"] / "no-torch.jsonl"
    result = _run([grownup, "extract", "page.html", "-o", str(out)], cwd=installed["cwd"],
                  env=env)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 1, result.stderr
    assert rows[0]["title"] == TITLE and SENTENCE in rows[0]["text"]
    script = ("from scrapy_grownup import ArticleExtractor\n"
              "a = ArticleExtractor.from_pretrained().extract(open('page.html', 'rb').read())\n"
              "print(a.title)\n")
    done = _run([str(installed["python"]), "-c", script], cwd=installed["cwd"], env=env)
    assert done.stdout.strip().splitlines()[-1] == TITLE
