"""What extraction costs on this machine, measured the way a user meets it: one JSON line each.

``extract``: pages/s and ms per page of the shipped ``fast`` model (``extract_batch`` in chunks
of 32, one thread) and of ``trafilatura.extract`` on the same pages in this process, rounds
interleaved (best round and all rounds), for Dragnet test, wcxb_dev and fundus, and their ratio;
also each one's CPU ms per page (best round) and that ratio, which a noisy shared machine
disturbs less.
``cli``: one real page through ``python -m scrapy_grownup extract PAGE -o OUT`` and through
trafilatura's command line (the page on its standard input), each in a fresh process: wall
seconds (median and min of ``--cli-runs``) and peak RSS. ``jobs``: ``extract DIR --jobs 1``
against ``--jobs 2`` over ``--site-pages`` page files, start-up included. ``crawl``: the same
real pages served on loopback, crawled with Scrapy alone and with the add-on (model ``fast``),
each crawl in a fresh process: seconds (Scrapy's ``elapsed_time_seconds``) and the CPU ms per
page of each process role, spider open to close: the crawl's own process, the page workers
(``grownup-worker``) and the model process (``grownup-model``); every page must be an item or
a counted drop. ``projection``: the pages/s those per-page CPU costs project for ``--cores``
cores, without a GPU and with one.

The command-line tools and crawls run with this shell's environment (their own thread
defaults); only the in-process ``extract`` measurement is pinned to one thread.

    python benchmarks/cost.py [--only extract cli jobs crawl projection] [--pages N]
                              [--rounds R] [--site-pages N] [--repeat K] [--cores 16]
                              [--model fast] [--model-process]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import crawl_index, dataset_pages, pin_single_core, served_site

ROOT = Path(__file__).resolve().parents[1]
USER_ENV = dict(os.environ, HF_HUB_OFFLINE="1")  # what the tools and crawls run with
sys.path.insert(0, str(ROOT))
SETS = {"dragnet_test": ("dragnet", "test"), "wcxb_dev": ("wcxb_dev", None),
        "fundus": ("fundus", None)}
SECTIONS = ("extract", "cli", "jobs", "crawl", "projection")
CHUNK = 32


def emit(line: dict) -> None:
    print(json.dumps(line), flush=True)


def load_set(label: str, limit: int | None) -> list[bytes] | None:
    """The pages of one set, or None (and a line saying so) where it is not available."""
    from scrapy_grownup.data.datasets import DatasetNotAvailable

    name, split = SETS[label]
    try:
        return [body for _id, body in dataset_pages(name, split, limit)]
    except DatasetNotAvailable as exc:
        emit({"benchmark": "extract", "set": label, "unavailable": str(exc)})
        return None


def real_pages(count: int) -> list[tuple[str, bytes]]:
    """``count`` pages taken in turn from Dragnet test and wcxb_dev (those available)."""
    from scrapy_grownup.data.datasets import DatasetNotAvailable

    sets = []
    for label in ("dragnet_test", "wcxb_dev"):
        try:
            sets.append(dataset_pages(*SETS[label], count))
        except DatasetNotAvailable:
            pass
    return [page for group in zip(*sets) for page in group][:count]


# -- extract ----------------------------------------------------------------------------------
def measure_extract(args) -> None:
    import trafilatura

    from scrapy_grownup import ArticleExtractor

    fast = ArticleExtractor.from_pretrained("fast", device="cpu", threads=1)

    def run_fast(pages):
        fast.featurizer.encoder.clear_cache()  # every round embeds its strings anew
        found = 0
        for i in range(0, len(pages), CHUNK):
            found += sum(a is not None for a in fast.extract_batch(pages[i:i + CHUNK],
                                                                   errors="skip"))
        return found

    def run_trafilatura(pages):
        return sum(trafilatura.extract(page) is not None for page in pages)

    runners = {"fast": run_fast, "trafilatura": run_trafilatura}
    for label in SETS:
        pages = load_set(label, args.pages)
        if not pages:
            continue
        for run in runners.values():  # imports and first-call set-up, not measured
            run(pages[:1])
        seconds: dict[str, list[float]] = {name: [] for name in runners}
        cpu: dict[str, list[float]] = {name: [] for name in runners}
        found = {}
        for _round in range(args.rounds):
            for name, run in runners.items():
                start, start_cpu = time.perf_counter(), time.process_time()
                found[name] = run(pages)
                seconds[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
        line = {"benchmark": "extract", "set": label, "pages": len(pages),
                "rounds": args.rounds, "threads": 1}
        for name, values in seconds.items():
            line[f"{name}_pages_per_s"] = round(len(pages) / min(values), 2)
            line[f"{name}_ms_per_page"] = round(1000 * min(values) / len(pages), 3)
            line[f"{name}_rounds_pages_per_s"] = [round(len(pages) / s, 2) for s in values]
            # CPU time: what a shared machine's other tenants and stolen time leave out
            line[f"{name}_cpu_ms_per_page"] = round(1000 * min(cpu[name]) / len(pages), 3)
            line[f"{name}_articles"] = found[name]
        line["ratio_fast_to_trafilatura"] = round(
            line["fast_pages_per_s"] / line["trafilatura_pages_per_s"], 3)
        line["ratio_cpu_fast_to_trafilatura"] = round(
            line["trafilatura_cpu_ms_per_page"] / line["fast_cpu_ms_per_page"], 3)
        emit(line)


# -- command line -----------------------------------------------------------------------------
def timed_run(command: list[str], out: Path | None = None,
              stdin: Path | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one run of ``command`` in a fresh process, reading
    ``stdin``; ``out``, the file it writes, is removed first (no run resumes another)."""
    for path in (out, out and out.with_name(out.name + ".progress.json")):
        if path is not None and path.exists():
            path.unlink()
    time_bin = shutil.which("time", path="/usr/bin:/bin")
    with tempfile.NamedTemporaryFile(suffix=".time") as report, \
            open(stdin or os.devnull, "rb") as source:
        prefix = [time_bin, "-f", "%M", "-o", report.name] if time_bin else []
        start = time.perf_counter()
        proc = subprocess.Popen(prefix + command, env=USER_ENV, stdin=source,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak = 0 if time_bin else poll_peak_rss(proc.pid)
        _stdout, stderr = proc.communicate()
        wall = time.perf_counter() - start
        if proc.returncode:
            raise RuntimeError(f"{command} exited {proc.returncode}: {stderr.decode()[-2000:]}")
        if time_bin:
            peak = int(Path(report.name).read_text().split()[-1]) * 1024
    return wall, peak / 2**20


def poll_peak_rss(pid: int) -> int:
    """Peak RSS in bytes of ``pid`` and its children together, polled until it exits."""
    import psutil

    peak, proc = 0, psutil.Process(pid)
    while proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
        try:
            peak = max(peak, sum(p.memory_info().rss
                                 for p in [proc, *proc.children(recursive=True)]))
        except psutil.Error:
            pass
        time.sleep(0.01)
    return peak


def trafilatura_cli() -> list[str]:
    script = Path(sys.executable).with_name("trafilatura")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from trafilatura.cli import main; main()"]


def measure_cli(args) -> None:
    pages = real_pages(1)
    if not pages:
        emit({"benchmark": "cli", "unavailable": "no Dragnet or wcxb_dev pages"})
        return
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        page, out = tmp / "page.html", tmp / "out.jsonl"
        page.write_bytes(pages[0][1])
        commands = {
            "grownup": [sys.executable, "-m", "scrapy_grownup", "extract", str(page),
                        "-o", str(out)],
            "trafilatura": trafilatura_cli(),  # one page: its HTML on standard input
        }
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.cli_runs):  # interleaved, so load changes hit both alike
            runs["grownup"].append(timed_run(commands["grownup"], out=out))
            runs["trafilatura"].append(timed_run(commands["trafilatura"], stdin=page))
    line = {"benchmark": "cli", "page": pages[0][0], "page_bytes": len(pages[0][1]),
            "runs": args.cli_runs}
    for name, values in runs.items():
        walls = [wall for wall, _ in values]
        line[f"{name}_wall_s_median"] = round(statistics.median(walls), 3)
        line[f"{name}_wall_s_min"] = round(min(walls), 3)
        line[f"{name}_peak_mib"] = round(max(peak for _, peak in values), 1)
    line["ratio_wall_grownup_to_trafilatura"] = round(
        line["grownup_wall_s_median"] / line["trafilatura_wall_s_median"], 2)
    emit(line)


def measure_jobs(args) -> None:
    pages = real_pages(args.site_pages)
    if not pages:
        emit({"benchmark": "jobs", "unavailable": "no Dragnet or wcxb_dev pages"})
        return
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        site = tmp / "pages"
        site.mkdir()
        for i, (_id, body) in enumerate(pages):
            (site / f"page-{i}.html").write_bytes(body)
        out = tmp / "out.jsonl"
        walls: dict[int, list[float]] = {1: [], 2: []}
        articles = {}
        for _ in range(args.repeat):  # interleaved, so load changes hit both alike
            for jobs, values in walls.items():
                command = [sys.executable, "-m", "scrapy_grownup", "extract", str(site),
                           "-o", str(out), "--jobs", str(jobs)]
                values.append(timed_run(command, out)[0])
                articles[jobs] = len(out.read_text(encoding="utf-8").splitlines())
    one, two = (statistics.median(walls[jobs]) for jobs in (1, 2))
    emit({"benchmark": "jobs", "pages": len(pages), "repeat": args.repeat,
          "jobs1_wall_s": round(one, 2), "jobs2_wall_s": round(two, 2),
          "jobs1_runs_s": [round(w, 2) for w in walls[1]],
          "jobs2_runs_s": [round(w, 2) for w in walls[2]],
          "jobs1_pages_per_s": round(len(pages) / one, 1),
          "jobs2_pages_per_s": round(len(pages) / two, 1),
          "speedup_jobs2": round(one / two, 2),
          "articles": articles})


# -- crawl ------------------------------------------------------------------------------------
ROLES = {"crawl_process": None, "worker": "grownup-worker", "model": "grownup-model"}


def crawl_child(config: dict) -> None:
    """One crawl in this (fresh) process; writes the figures as JSON."""
    stats = crawl_index(config["start_url"], config["settings"], child_cpu=True)
    Path(config["out"]).write_text(json.dumps({
        "seconds": stats["elapsed_time_seconds"],
        "pages": stats.get("downloader/response_status_count/200", 0),
        "items": stats.get("item_scraped_count", 0),
        "dropped": {key.rsplit("/", 1)[1]: value for key, value in stats.items()
                    if key.startswith("grownup/dropped/")},
        "cpu_seconds": {"crawl_process": stats.get("bench/crawl_process_cpu_seconds"),
                        **{key.rsplit("/", 1)[1]: value for key, value in stats.items()
                           if key.startswith("bench/child_cpu_seconds/")}},
        # the workers' own count: CPU on each page, start-up and waiting left out
        "worker_cpu_ms_per_page": stats.get("grownup/worker_cpu_ms_per_page"),
    }))


def crawl_once(tmp: Path, start_url: str, settings: dict) -> dict:
    out = tmp / f"run-{time.monotonic_ns()}.json"
    config = {"start_url": start_url, "settings": settings, "out": str(out)}
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child",
                    json.dumps(config)], check=True, env=USER_ENV, cwd=ROOT)
    return json.loads(out.read_text())


def cpu_ms_per_page(runs: list[dict]) -> dict[str, float]:
    """Median CPU ms per page (per HTML response) of each role, and of any other child
    process by its name."""
    names = {name for run in runs for name in run["cpu_seconds"]}
    return {name: round(statistics.median(
        1000 * (run["cpu_seconds"].get(name) or 0) / run["pages"] for run in runs), 2)
        for name in sorted(names)}


def measure_crawl(args) -> dict | None:
    pages = real_pages(args.site_pages)
    if not pages:
        emit({"benchmark": "crawl", "unavailable": "no Dragnet or wcxb_dev pages"})
        return None
    settings = {
        "scrapy": {"ITEM_PIPELINES": {}},
        "addon": {"ADDONS": {"scrapy_grownup.Addon": 500}, "GROWNUP_MODEL": args.model,
                  **({"GROWNUP_MODEL_PROCESS": True} if args.model_process else {})},
    }
    runs: dict[str, list[dict]] = {name: [] for name in settings}
    with served_site(pages) as (tmp, start_url):
        for _ in range(args.repeat):  # interleaved, so load changes hit both alike
            for name, values in settings.items():
                runs[name].append(crawl_once(tmp, start_url, values))
    line = {"benchmark": "crawl", "pages": len(pages), "repeat": args.repeat,
            "model": args.model, "model_process": args.model_process}
    for name, values in runs.items():
        line[f"{name}_seconds"] = round(statistics.median(r["seconds"] for r in values), 3)
        line[f"{name}_runs_s"] = [round(r["seconds"], 3) for r in values]
        line[f"{name}_responses"] = values[-1]["pages"]  # the pages and the index page
        line[f"{name}_items"] = values[-1]["items"]
        line[f"{name}_cpu_ms_per_page"] = cpu_ms_per_page(values)
    line["addon_worker_own_cpu_ms_per_page"] = round(statistics.median(
        r["worker_cpu_ms_per_page"] or 0 for r in runs["addon"]), 2)
    line["ratio_addon_to_scrapy"] = round(line["addon_seconds"] / line["scrapy_seconds"], 2)
    line["addon_dropped"] = runs["addon"][-1]["dropped"]
    # every page an item or a counted drop: what is neither, in each add-on run
    line["addon_unaccounted"] = [r["pages"] - r["items"] - sum(r["dropped"].values())
                                 for r in runs["addon"]]
    roles = line["addon_cpu_ms_per_page"]
    line["addon_role_cpu_ms_per_page"] = {role: roles.get(name or role, 0.0)
                                          for role, name in ROLES.items()}
    emit(line)
    return line["addon_role_cpu_ms_per_page"]


def project(roles: dict[str, float], cores: int) -> None:
    crawl_ms, worker_ms, model_ms = (roles[role] for role in ROLES)

    def rate(ms: float, n: int = 1) -> float | None:  # None: no bound (no such cost)
        return round(1000 * n / ms, 1) if ms > 0 else None

    def lowest(*names: str) -> float | None:
        return min((bounds[n] for n in names if bounds[n] is not None), default=None)

    bounds = {"cpu_cores": rate(worker_ms + model_ms, cores), "crawl_process": rate(crawl_ms),
              "gpu_cores": rate(worker_ms, cores), "model_process": rate(model_ms)}
    emit({"benchmark": "projection", "cores": cores, "cpu_ms_per_page": roles,
          "without_gpu_pages_per_s": lowest("cpu_cores", "crawl_process"),
          "without_gpu_one_model_process_pages_per_s": lowest(
              "cpu_cores", "crawl_process", "model_process"),
          "with_gpu_pages_per_s": lowest("gpu_cores", "model_process", "crawl_process"),
          "bounds_pages_per_s": bounds,
          "assumes": (f"this machine's CPU ms per page, scaling linearly to {cores} cores; "
                      "the crawl process is one core. Without a GPU the workers' and the "
                      "model's work share all cores (one_model_process: the model's work "
                      "stays in one process, one core). With a GPU the workers have the "
                      "cores and the model process's CPU ms per page stands for its "
                      "GPU-side cost, one page after another. Server, network and disk "
                      "cost nothing")})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--pages", type=int, default=None,
                        help="extract: at most this many pages of each set (default: all)")
    parser.add_argument("--rounds", type=int, default=3, help="extract: rounds, interleaved")
    parser.add_argument("--cli-runs", type=int, default=5, help="cli: runs of each tool")
    parser.add_argument("--site-pages", type=int, default=300,
                        help="jobs and crawl: real pages (Dragnet test and wcxb_dev in turn)")
    parser.add_argument("--repeat", type=int, default=3, help="jobs and crawl: runs of each")
    parser.add_argument("--cores", type=int, default=16, help="projection: cores")
    parser.add_argument("--model", default="fast", help="crawl: GROWNUP_MODEL of the add-on")
    parser.add_argument("--model-process", action="store_true",
                        help="crawl: GROWNUP_MODEL_PROCESS = True (the workers share a model "
                             "process, as on a GPU), not the page workers holding the model")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        crawl_child(json.loads(args.child))
        return 0
    if "projection" in args.only and "crawl" not in args.only:
        parser.error("projection needs crawl")
    pin_single_core()  # this process only: before numpy loads; children get USER_ENV
    for section, measure in (("extract", measure_extract), ("cli", measure_cli),
                             ("jobs", measure_jobs)):
        if section in args.only:
            measure(args)
    if "crawl" in args.only:
        roles = measure_crawl(args)
        if roles and "projection" in args.only:
            project(roles, args.cores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
