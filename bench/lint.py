#!/usr/bin/env python3
"""Benchmark ``torchspec lint`` against a plain PyYAML + jsonschema baseline.

    python bench/lint.py                      # 1,000 files, 5 runs each
    python bench/lint.py --files 200 --repeat 3
    python bench/lint.py --keep /tmp/specs    # keep the generated files there
    python bench/lint.py --json bench/out/lint.json

It writes N realistic spec files (1-3 roles, env, args, resources, mounts,
params and templates in some) into a folder, then times, in one run and each
several times (the median is reported; every command runs once untimed first
so that caches are warm):

  lint         torchspec lint FOLDER
  baseline     python -c: yaml.load(CSafeLoader) + ONE compiled
               Draft202012Validator(schemas/appdef.schema.json).iter_errors
               for each file
  cjs          check-jsonschema --schemafile schemas/appdef.schema.json FILES
               (from the `bench` extra; skipped with a note when missing)
  version      torchspec --version
  lint-one     torchspec lint examples/hello.yaml
  lint-templated  torchspec lint ONE generated file with templates (Jinja imported: information only)
  import-yaml  python -c "import yaml"

then, with --memory-files N (default 10,000; 0 skips it), generates N more
files and runs lint (in one process, -j 1) and the baseline once on them,
reading each one's peak resident memory from the kernel (wait4's ru_maxrss):
lint's must stay flat in the number of files, within 1.5x the baseline's on
the same files.  (From 64 files on, lint itself divides the files among one
process per CPU: the timed rows above are that, what a user gets.)

It prints the ratios against their targets with PASS or MISS. The targets are
goals for the implementation, not assertions: the script exits 0 whatever the
timings (pass --fail-on-miss to exit 1 on a MISS), and no test times anything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import find_torchspec, fmt_s

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "schemas" / "appdef.schema.json"

# --------------------------------------------------------------------------
# Spec generator
# --------------------------------------------------------------------------

IMAGES = [
    "ghcr.io/pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
    "pytorch/pytorch:2.2.2-cuda12.1-cudnn8-runtime",
    "ghcr.io/acme/resnet-trainer:1.4",
    "ghcr.io/acme/data-tools:2024.05",
    "123456789012.dkr.ecr.us-west-2.amazonaws.com/llm/train:0.9.3",
    "us-docker.pkg.dev/acme-ml/serving/ranker:2024-06-01",
    "registry.internal:5000/recsys/dlrm:nightly",
    "/home/ml/pytorch_trainer",
    ".",
]
# Named resources from TorchX's AWS registry (torchx.specs.named_resources_aws)
NAMED_RESOURCES = ["aws_t3.medium", "aws_m5.2xlarge", "aws_p3.2xlarge", "aws_p3.8xlarge"]
SCRIPTS = ["train.py", "main.py", "pretrain.py", "finetune.py", "eval.py", "src/train_main.py"]
DATASETS = ["s3://acme-datasets/imagenet", "gs://acme-ml/c4/en", "/data/criteo", "hf://wikitext-103", "/mnt/fsx/laion"]
ENV_POOL = [
    ("LOGLEVEL", ["INFO", "DEBUG", "WARNING"]),
    ("NCCL_DEBUG", ["WARN", "INFO"]),
    ("NCCL_SOCKET_IFNAME", ["eth0", "ens5"]),
    ("NCCL_IB_DISABLE", ["0", "1"]),
    ("OMP_NUM_THREADS", ["1", "4", "8"]),
    ("TORCH_DISTRIBUTED_DEBUG", ["OFF", "INFO", "DETAIL"]),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", ["1"]),
    ("CUDA_DEVICE_MAX_CONNECTIONS", ["1"]),
    ("PYTHONUNBUFFERED", ["1"]),
    ("HF_HOME", ["/cache/huggingface"]),
    ("AWS_REGION", ["us-west-2", "us-east-1"]),
    ("WANDB_PROJECT", ["resnet", "llm-pretrain", "dlrm"]),
    ("WANDB_MODE", ["offline", "online"]),
    ("MLFLOW_TRACKING_URI", ["http://mlflow.ml.svc:5000"]),
    ("DATA_ROOT", ["/data", "/mnt/fsx", "/datasets"]),
    ("CHECKPOINT_DIR", ["/checkpoints", "s3://acme-ckpt/runs"]),
    ("TOKENIZERS_PARALLELISM", ["false"]),
    ("MALLOC_ARENA_MAX", ["2"]),
]
ROLE_NAMES = {
    "ddp": ["trainer"],
    "ps": ["trainer", "ps", "reader"],
    "serve": ["server", "router", "metrics"],
    "etl": ["reader", "worker", "writer"],
    "eval": ["evaluator", "tb"],
}
TEAMS = ["ml-platform", "recsys", "vision", "nlp", "research"]
HEADER_NOTES = [
    "# Owned by the training infra on-call; page them before changing resources.",
    "# Checkpoints go to the shared volume; the job resumes from the newest one.",
    "# Keep num_replicas in step with the rendezvous --nnodes flag.",
    "# Retries: REPLICA restarts one failed worker, ROLE restarts the whole role.",
    "# Images are pinned by tag; bump them together with requirements.lock.",
    "# Named resources come from the AWS registry (aws_*).",
]

_PLAIN = re.compile(r"^[A-Za-z_./][A-Za-z0-9_./=:,@+-]*$")
_SPECIAL = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def q(value: str) -> str:
    """A YAML scalar for a string: plain when safe, else double-quoted."""
    if _PLAIN.match(value) and value.lower() not in _SPECIAL and not value.endswith(":") and ": " not in value:
        return value
    return json.dumps(value)


@dataclass
class Param:
    name: str
    type: str
    default: object
    extra: dict = field(default_factory=dict)
    help: str = ""


def _param_block(params: list[Param]) -> list[str]:
    out = ["params:"]
    for p in params:
        out.append(f"  {p.name}:")
        out.append(f"    type: {p.type}")
        dflt = p.default
        out.append(f"    default: {q(dflt) if isinstance(dflt, str) else json.dumps(dflt)}")
        for k, v in p.extra.items():
            out.append(f"    {k}: {json.dumps(v)}")
        if p.help:
            out.append(f"    help: {q(p.help)}")
    return out


def _resource_lines(rng: random.Random, gpu_expr: str | None) -> list[str]:
    r = rng.random()
    if r < 0.3 and gpu_expr is None:
        return [f"    resource: {rng.choice(NAMED_RESOURCES)}"]
    cpu = rng.choice([2, 4, 8, 16, 32, 48, 96])
    mem = cpu * rng.choice([2048, 4096, 8192])
    gpu = gpu_expr if gpu_expr is not None else str(rng.choice([0, 0, 1, 2, 4, 8]))
    if r < 0.55:
        return [f"    resource: {{cpu: {cpu}, gpu: {gpu}, memMB: {mem}}}"]
    out = ["    resource:", f"      cpu: {cpu}", f"      gpu: {gpu}", f"      memMB: {mem}"]
    if rng.random() < 0.3:
        out += ["      capabilities:", f"        node.kubernetes.io/instance-type: {rng.choice(['p3.8xlarge', 'p4d.24xlarge', 'g5.12xlarge'])}"]
    if rng.random() < 0.2:
        out += ["      devices:", f"        vpc.amazonaws.com/efa: {rng.choice([1, 2, 4])}"]
    return out


def _mount_lines(rng: random.Random) -> list[str]:
    n = rng.choice([0, 0, 1, 1, 2, 3])
    if not n:
        return []
    out = ["    mounts:"]
    # distinct kinds, so no two mounts of a role share a destination
    for i, kind in enumerate(rng.sample(["bind", "volume", "bind-str", "volume-str", "device"], n)):
        if kind == "bind":
            out += ["      - type: bind", f"        src_path: /data/shard{i}", f"        dst_path: /data/shard{i}"]
            if rng.random() < 0.5:
                out.append("        read_only: true")
        elif kind == "volume":
            out += ["      - type: volume", f"        src: {rng.choice(['checkpoints', 'datasets', 'cache'])}-{i}", f"        dst_path: /mnt/vol{i}"]
        elif kind == "bind-str":
            ro = ",readonly" if rng.random() < 0.5 else ""
            out.append(f"      - type=bind,src=/scratch/{i},dst=/scratch{ro}")
        elif kind == "volume-str":
            out.append(f"      - type=volume,src=pvc-{i},dst=/pvc{i}")
        else:
            out += ["      - type: device", "        src_path: /dev/fuse"]
            if rng.random() < 0.5:
                out.append("        permissions: rw")
    return out


def generate_spec(rng: random.Random, index: int, schema_ref: str) -> str:
    """One realistic single-document YAML spec (valid: lint should be clean)."""
    kind = rng.choice(list(ROLE_NAMES))
    templated = rng.random() < 0.6
    nroles = rng.choice([1, 2, 2, 3, 3]) if kind != "ddp" else 1
    role_names = ROLE_NAMES[kind][:nroles]

    params: list[Param] = []
    if templated:
        params.append(Param("nnodes", "integer", rng.choice([1, 2, 4, 8]), {"min": 1}, "number of nodes"))
        params.append(Param("nproc", "integer", rng.choice([1, 2, 4, 8]), {"min": 1, "max": 8}, "processes per node"))
        if rng.random() < 0.6:
            params.append(Param("lr", "number", rng.choice([0.1, 0.01, 0.001, 3e-4]), {"min": 0}, "learning rate"))
        if rng.random() < 0.5:
            params.append(Param("backend", "string", "nccl", {"choices": ["gloo", "nccl"]}))
        if rng.random() < 0.4:
            params.append(Param("debug", "boolean", False, {}, "verbose logging"))
    pnames = {p.name for p in params}

    lines = [f"# yaml-language-server: $schema={schema_ref}"]
    lines.append(f"# generated by bench/lint.py (spec {index}, kind {kind})")
    lines += rng.sample(HEADER_NOTES, rng.randint(0, 3))
    if templated:
        lines.append(f"#   torchspec render <this file> -p nnodes={rng.choice([2, 4, 16])}")
    app = f"{kind}-{rng.choice(['resnet', 'bert', 'dlrm', 'llama', 'vit', 'ranker'])}-{index}"
    lines.append(f"name: {q(app + '-{{ nnodes }}n')}" if templated else f"name: {app}")
    if rng.random() < 0.5:
        lines += ["metadata:", f"  team: {rng.choice(TEAMS)}", f"  owner: {rng.choice(['alice', 'bob', 'carol', 'dan'])}"]
    if params:
        lines += _param_block(params)
    lines.append("roles:")

    for ri, rname in enumerate(role_names):
        main = ri == 0
        lines.append(f"  # {rname}")
        lines.append(f"  - name: {rname}")
        lines.append(f"    image: {q(rng.choice(IMAGES))}")
        script = rng.choice(SCRIPTS)
        if main and templated:
            lines.append("    entrypoint: bash")
            lines.append("    args:")
            lines.append("      - -c")
            cmd = (
                "python -m torch.distributed.run --nnodes={{ nnodes }} --nproc_per_node={{ nproc }}"
                " --rdzv_backend=c10d --rdzv_endpoint=$${${rank0_env}}:29500 --rdzv_id=${app_id} " + script
            )
            if "lr" in pnames:
                cmd += " --lr={{ lr }}"
            if "backend" in pnames:
                cmd += " --dist-backend={{ backend }}"
            if "debug" in pnames:
                cmd += "{% if debug %} --verbose{% endif %}"
            cmd += f" --data={rng.choice(DATASETS)}"
            lines.append(f"      - {q(cmd)}")
        else:
            lines.append(f"    entrypoint: {rng.choice(['python', 'python3', '/usr/bin/python3'])}")
            args = [script if main else f"{rname}_main.py"]
            args += [f"--data={rng.choice(DATASETS)}", f"--batch-size={rng.choice([32, 64, 128, 256])}"]
            args += rng.sample([
                "--epochs=" + str(rng.choice([1, 10, 90])),
                "--workers=" + str(rng.choice([2, 4, 8])),
                "--seed=" + str(rng.randint(0, 9999)),
                "--amp",
                "--log-interval=50",
                "--output=/checkpoints/${app_id}",
                "--replica=${replica_id}",
                "--resume",
            ], rng.randint(0, 6))
            if rng.random() < 0.5:
                lines.append("    args: [" + ", ".join(q(a) for a in args) + "]")
            else:
                lines.append("    args:")
                lines += [f"      - {q(a)}" for a in args]
        env = rng.sample(ENV_POOL, rng.randint(2, 9))
        lines.append("    env:")
        for k, vals in env:
            lines.append(f"      {k}: {q(rng.choice(vals))}")
        if main and templated and rng.random() < 0.5:
            lines.append('      RANK0_HOST_VAR: "${rank0_env}"')
        if "debug" in pnames and main:
            # a single {{ expr }} keeps its native type, so yield words, not digits
            lines.append("      LOG_MODE: \"{{ 'debug' if debug else 'info' }}\"")
        if main and templated:
            lines.append('    num_replicas: "{{ nnodes }}"')
        else:
            nrep = rng.choice([1, 1, 2, 4, 10])
            lines.append(f"    num_replicas: {nrep}")
            if nrep > 1 and rng.random() < 0.3:
                lines.append(f"    min_replicas: {rng.randint(1, nrep)}")
        if rng.random() < 0.7:
            lines.append(f"    max_retries: {rng.choice([0, 1, 3, 5])}")
            lines.append(f"    retry_policy: {rng.choice(['APPLICATION', 'REPLICA', 'ROLE'])}")
        gpu_expr = '"{{ nproc }}"' if (main and templated) else None
        lines += _resource_lines(rng, gpu_expr)
        if rng.random() < 0.6:
            lines.append("    port_map:")
            ports = rng.sample([("c10d", 29500), ("tensorboard", 6006), ("http", 8080), ("grpc", 50051), ("metrics", 9090)], rng.randint(1, 3))
            lines += [f"      {n}: {p}" for n, p in ports]
        lines += _mount_lines(rng)
        if rng.random() < 0.2:
            lines += [
                "    metadata:",
                "      kubernetes.pod_patch:",
                "        spec:",
                "          tolerations:",
                "            - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}",
            ]
    return "\n".join(lines) + "\n"


def generate(folder: Path, count: int, seed: int) -> list[Path]:
    """Write ``count`` specs of 40-120 lines each into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    schema_ref = SCHEMA.as_uri()
    paths = []
    for i in range(count):
        for _ in range(1000):  # draw until the size is in range (a few tries)
            text = generate_spec(rng, i, schema_ref)
            if 40 <= text.count("\n") <= 120:
                break
        else:
            raise RuntimeError("spec generator cannot reach 40-120 lines")
        sub = folder / f"team{i % 10}"
        sub.mkdir(exist_ok=True)
        path = sub / (f"spec{i:04d}" + (".yml" if i % 7 == 3 else ".yaml"))
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------

BASELINE = r"""
import json, pathlib, sys
import yaml, jsonschema
try:
    Loader = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml
    Loader = yaml.SafeLoader
with open(sys.argv[1], "rb") as f:
    validator = jsonschema.Draft202012Validator(json.load(f))
errors = files = 0
for p in sorted(pathlib.Path(sys.argv[2]).rglob("*")):
    if p.suffix in (".yaml", ".yml"):
        with open(p, "rb") as f:
            doc = yaml.load(f, Loader=Loader)
        files += 1
        errors += sum(1 for _ in validator.iter_errors(doc))
print(f"baseline: {files} files, {errors} schema errors")
"""


# Exit codes that mean a command did its work (lint exits 1 when it finds
# problems; check-jsonschema likewise); anything else makes its timing moot.
OK_EXIT = {"lint": (0, 1), "baseline": (0,), "cjs": (0, 1), "version": (0,), "lint-one": (0, 1),
           "lint-templated": (0, 1), "import-yaml": (0,)}


def find_tool(name: str) -> str | None:
    bindir = Path(sys.executable).parent
    local = bindir / (name + (".exe" if os.name == "nt" else ""))
    return str(local) if local.exists() else shutil.which(name)


@dataclass
class Result:
    name: str
    cmd: list[str]
    times: list[float] = field(default_factory=list)
    rc: int | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def run_once(cmd: list[str], env: dict) -> tuple[float, int, str]:
    elapsed, rc, out, _ = run_measured(cmd, env)
    return elapsed, rc, out


def run_measured(cmd: list[str], env: dict) -> tuple[float, int, str, int]:
    """Seconds, exit code, output and peak resident memory (bytes, from the kernel's wait4) of one run."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                            stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so that Popen does not wait again
    proc.stdout.close()
    return elapsed, proc.returncode, out.decode("utf-8", "replace"), usage.ru_maxrss * 1024


def peak_memory(ts: list[str], folder: Path, env: dict) -> dict[str, int]:
    """Peak resident bytes of one lint and one baseline run over ``folder``; exits on a failed run.

    Lint runs in one process (``-j 1``), as the baseline does: with more, each
    forked process's resident set counts the pages it shares with the others.
    """
    peaks = {}
    for name, cmd in (("lint", ts + ["lint", "-j", "1", str(folder)]),
                      ("baseline", [sys.executable, "-c", BASELINE, str(SCHEMA), str(folder)])):
        _, rc, out, rss = run_measured(cmd, env)
        if rc not in OK_EXIT[name]:
            raise SystemExit(f"bench: {name} over {folder} exited {rc}: {out[-800:]}")
        peaks[name] = rss
    return peaks


def measure(results: list[Result], repeats: dict[str, int], env: dict) -> None:
    """Interleave the commands round by round, so that drift in the
    machine's speed spreads over all of them alike."""
    rounds = max(repeats.values())
    for r in range(rounds):
        for res in results:
            if r < repeats[res.name]:
                t, rc, _ = run_once(res.cmd, env)
                res.times.append(t)
                res.rc = rc
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr)


_CODE = re.compile(r"^TS\d{3}$")


def _count_coded(node: object) -> int:
    """Objects in a JSON report that carry a diagnostic code."""
    if isinstance(node, dict):
        own = 1 if isinstance(node.get("code"), str) and _CODE.match(node["code"]) else 0
        return own + sum(_count_coded(v) for k, v in node.items() if k != "code")
    if isinstance(node, list):
        return sum(_count_coded(v) for v in node)
    return 0


def count_diagnostics(ts: list[str], folder: Path, text_out: str, env: dict) -> tuple[int, str]:
    """How many diagnostics lint reports on the generated folder: from
    `lint -o json` when that works, else lines of the text report that
    name a code."""
    try:
        proc = subprocess.run(ts + ["lint", "-o", "json", str(folder)], capture_output=True, env=env,
                              cwd=REPO, stdin=subprocess.DEVNULL, timeout=600)
        if proc.returncode in (0, 1):
            return _count_coded(json.loads(proc.stdout)), "counted from -o json"
    except (ValueError, subprocess.SubprocessError, OSError):
        pass
    lines = [ln for ln in text_out.splitlines() if re.search(r"\bTS\d{3}\b", ln)]
    return len(lines), "counted from the text report"


#: lint's peak resident memory over the most files, at most this times the baseline's over the same files
MEMORY_TARGET = 1.5


def report_memory(memory: dict[int, dict[str, int]], report: dict) -> int:
    """Print the peak-memory rows and the verdict (lint / baseline on the most files); 1 on a MISS."""
    mib = 1024 * 1024
    print(f"\n{'peak resident memory':28} {'lint':>9} {'baseline':>9}")
    for count, peaks in sorted(memory.items()):
        print(f"{str(count) + ' files':28} {peaks['lint'] / mib:6.1f} MiB {peaks['baseline'] / mib:6.1f} MiB")
    few, most = min(memory), max(memory)
    if most > few:
        growth = (memory[most]["lint"] - memory[few]["lint"]) / (most - few)
        print(f"lint's growth: {growth / 1024:.2f} KiB a file from {few} to {most} files")
    value = memory[most]["lint"] / memory[most]["baseline"]
    ok = value <= MEMORY_TARGET
    report["memory"] = {str(n): peaks for n, peaks in memory.items()}
    report["ratios"][f"lint peak memory / baseline ({most} files)"] = {"value": value, "target": f"<= {MEMORY_TARGET}",
                                                                       "pass": ok}
    print(f"{'lint / baseline memory':28} {value:7.2f} {'<= ' + str(MEMORY_TARGET):>8}  {'PASS' if ok else 'MISS'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000, help="number of spec files to generate (default 1000)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of each command; the median is reported (default 5)")
    ap.add_argument("--cjs-repeat", type=int, default=None, help="timed runs of check-jsonschema (default: min(repeat, 3); it is slow)")
    ap.add_argument("--memory-files", type=int, default=10000,
                    help="files for the peak-memory check, lint against the baseline (default 10000; 0 skips it)")
    ap.add_argument("--keep", metavar="DIR", help="generate the files into DIR and keep them (default: a temp folder, removed)")
    ap.add_argument("--seed", type=int, default=20240601, help="generator seed (default fixed, so runs compare)")
    ap.add_argument("--runner", choices=["auto", "script", "module"], default="auto",
                    help="run torchspec as the console script beside sys.executable, or as `python -m torchspec` (default auto: the script if present)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit 1 when a target is missed (off by default: timings vary by machine)")
    args = ap.parse_args(argv)
    if args.files < 1 or args.repeat < 1:
        ap.error("--files and --repeat must be at least 1")

    ts = find_torchspec(args.runner)
    if ts is None:
        print("bench: cannot run torchspec: no `torchspec` script beside", sys.executable,
              "and no torchspec/__main__.py; install the project (pip install -e '.[bench]')", file=sys.stderr)
        return 2
    if not SCHEMA.exists():
        print(f"bench: {SCHEMA} is missing", file=sys.stderr)
        return 2

    env = dict(os.environ, NO_COLOR="1", TERM="dumb", COLUMNS="120")
    env.pop("FORCE_COLOR", None)
    # Compare like with like: installed libraries (yaml, jsonschema) import from bytecode,
    # so compile torchspec too, even where PYTHONDONTWRITEBYTECODE would stop Python doing it.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "torchspec")], check=False)

    tmp = None
    if args.keep:
        folder = Path(args.keep).resolve()
        if folder.exists() and any(folder.iterdir()):
            print(f"bench: {folder} is not empty; give an empty or new folder to --keep", file=sys.stderr)
            return 2
    else:
        tmp = tempfile.TemporaryDirectory(prefix="torchspec-bench-")
        folder = Path(tmp.name)
    try:
        t0 = time.perf_counter()
        files = generate(folder, args.files, args.seed)
        nlines = [p.read_text().count("\n") for p in files]
        print(f"generated {len(files)} specs in {folder} ({min(nlines)}-{max(nlines)} lines, "
              f"{sum(nlines)} in all) in {time.perf_counter() - t0:.2f} s")

        py = sys.executable
        one = files[0]
        results = [
            Result("lint", ts + ["lint", str(folder)]),
            Result("baseline", [py, "-c", BASELINE, str(SCHEMA), str(folder)]),
        ]
        cjs = find_tool("check-jsonschema")
        if cjs:
            results.append(Result("cjs", [cjs, "--schemafile", str(SCHEMA)] + [str(p) for p in files]))
        else:
            print("note: check-jsonschema is not installed (pip install -e '.[bench]'); skipping that comparison")
        results += [
            Result("version", ts + ["--version"]),
            Result("lint-one", ts + ["lint", str(REPO / "examples" / "hello.yaml")]),  # the issue's: no templates
            Result("lint-templated", ts + ["lint", str(one)]),  # a generated spec with templates: imports Jinja
            Result("import-yaml", [py, "-c", "import yaml"]),
        ]

        # Untimed first run of each: warms caches, and shows what each reports.
        print("warm-up runs:")
        lint_diags = None
        for res in results:
            t, rc, out = run_once(res.cmd, env)
            res.rc = rc
            if res.name == "lint":
                lint_diags, how = count_diagnostics(ts, folder, out, env)
                print(f"  lint: exit {rc}, {lint_diags} diagnostics reported over {len(files)} files ({how})")
                if rc != 0 or lint_diags:
                    shown = out.strip().splitlines()[:15]
                    print("    " + "\n    ".join(shown))
                    print("    (a clean generator should give exit 0 and no diagnostics)")
            elif res.name == "baseline":
                print(f"  {out.strip() or f'baseline: exit {rc}'}")
            elif res.name == "cjs":
                last = out.strip().splitlines()[-1:] or [""]
                print(f"  check-jsonschema: exit {rc}: {last[0][:100]}")
            elif res.name == "version":
                print(f"  torchspec --version: exit {rc}: {out.strip()[:80]}")
            elif res.name in ("lint-one", "lint-templated") and rc != 0:
                print(f"  lint {Path(res.cmd[-1]).name}: exit {rc}")

        cjs_repeat = args.cjs_repeat if args.cjs_repeat is not None else min(args.repeat, 3)
        repeats = {r.name: args.repeat for r in results}
        if "cjs" in repeats:
            repeats["cjs"] = max(1, cjs_repeat)
        print(f"timing ({args.repeat} runs each" + (f", check-jsonschema {repeats['cjs']}" if "cjs" in repeats else "") + ") ...")
        measure(results, repeats, env)
        memory: dict[int, dict[str, int]] = {}
        if args.memory_files > 0:
            memory[len(files)] = peak_memory(ts, folder, env)
            with tempfile.TemporaryDirectory(prefix="torchspec-bench-memory-") as many:
                t0 = time.perf_counter()
                generate(Path(many), args.memory_files, args.seed)
                print(f"generated {args.memory_files} specs for the memory check in {time.perf_counter() - t0:.1f} s")
                memory[args.memory_files] = peak_memory(ts, Path(many), env)
    finally:
        if tmp is not None:
            tmp.cleanup()

    by = {r.name: r for r in results}
    labels = {
        "lint": f"torchspec lint <{args.files} files>",
        "baseline": "baseline: CSafeLoader + jsonschema",
        "cjs": "check-jsonschema <files>",
        "version": "torchspec --version",
        "lint-one": "torchspec lint examples/hello.yaml",
        "lint-templated": "torchspec lint <one templated file>",
        "import-yaml": 'python -c "import yaml"',
    }
    print()
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} cpus; torchspec runs as: {' '.join(ts)}")
    print(f"{'command':40} {'median':>11} {'min':>11} {'runs':>5} {'exit':>5}")
    print("-" * 76)
    for r in results:
        print(f"{labels[r.name]:40} {fmt_s(r.median):>11} {fmt_s(min(r.times)):>11} {len(r.times):>5} {r.rc:>5}")

    ratios = [
        ("lint / baseline", "lint", "baseline", "<=", 1.5),
        ("check-jsonschema / lint", "cjs", "lint", ">=", 8.0),
        ("version / import-yaml", "version", "import-yaml", "<=", 1.5),
        ("lint-one / import-yaml", "lint-one", "import-yaml", "<=", 1.5),
    ]
    print()
    print(f"{'ratio':28} {'value':>7} {'target':>8}  verdict")
    print("-" * 56)
    misses = 0
    report = {"files": args.files, "repeat": args.repeat, "seed": args.seed, "lint_diagnostics": lint_diags,
              "python": platform.python_version(), "cpus": os.cpu_count(), "runner": ts,
              "times": {r.name: {"median": r.median, "min": min(r.times), "runs": r.times, "exit": r.rc} for r in results},
              "ratios": {}}
    for label, a, b, op, target in ratios:
        if a not in by or b not in by:
            print(f"{label:28} {'-':>7} {op + ' ' + str(target):>8}  SKIP (not measured)")
            continue
        value = by[a].median / by[b].median
        broken = [n for n in (a, b) if by[n].rc not in OK_EXIT[n]]
        ok = (value <= target if op == "<=" else value >= target) and not broken
        misses += not ok
        report["ratios"][label] = {"value": value, "target": f"{op} {target}", "pass": ok}
        verdict = f"INVALID ({', '.join(broken)} failed: exit {by[broken[0]].rc})" if broken else ("PASS" if ok else "MISS")
        print(f"{label:28} {value:7.2f} {op + ' ' + str(target):>8}  {verdict}")
    if memory:
        misses += report_memory(memory, report)
    if lint_diags:
        print(f"\nwarning: lint reported {lint_diags} diagnostics on generated specs that should be clean")
    if by["lint"].rc not in (0, None):
        print(f"warning: torchspec lint exited {by['lint'].rc} on the generated specs")

    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"results written to {out}")
    return 1 if (args.fail_on_miss and misses) else 0


if __name__ == "__main__":
    sys.exit(main())
