"""Build (once per machine) and install the interop server: llama-cpp-python compiled for any x86-64-v3 host.

Why a build of our own: llama-cpp-python is published as source only, and a default build compiles ggml with
`-march=native`. On a host that advertises AVX-512 and AMX (a VM on a recent Xeon) that binary runs AMX
kernels for the Q4_1 test model and segfaulted on its first chat completion; the same binary copied to an
older host would die of an illegal instruction. So the build is portable: `GGML_NATIVE=OFF` and every
instruction set beyond x86-64-v3 (AVX2, FMA, F16C, BMI2; every x86-64 CPU since 2013-2015 and every hosted CI
runner) switched off by name — AVX-512 and its extensions, AVX-VNNI, AMX — and the built libraries are
disassembled to prove that no AVX-512 (zmm) or AMX (tmm, tile) instruction is left in them.

Why a cache of our own: pip's wheel cache is keyed by what was downloaded, not by `CMAKE_ARGS`, so a native
wheel built once would be reused silently for a portable request (and the other way round). The wheel is
built with pip's cache off and kept under `~/.cache/research-dispatch/interop/<name>-<version>-<flags hash>/`
($XDG_CACHE_HOME is honoured): a clean clone on the same machine installs it in seconds, and a change of the
version or of any flag builds a new one.

    python scripts/dev/interop_build.py .venv-interop 'llama-cpp-python[server]==0.3.36' '-DGGML_NATIVE=OFF ...'

Only the standard library: it runs before any environment of the project exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

#: What the libraries may not contain: AVX-512 works on zmm registers (and k mask registers), AMX on tmm
#: tiles. objdump's AT&T syntax names them with a % sign.
FORBIDDEN = re.compile(r"%zmm\d|%k[1-7]\b|%tmm\d|\btile(loadd|stored|zero|release)|\btdpb[su]{2}d\b|\btdpbf16ps\b")
#: The instruction sets the default flags keep, as /proc/cpuinfo names them: a host without one of them
#: gets one clear line, not an illegal-instruction crash in the middle of a test.
REQUIRED_CPU_FLAGS = {"-DGGML_AVX2=ON": "avx2", "-DGGML_FMA=ON": "fma", "-DGGML_F16C=ON": "f16c",
                      "-DGGML_BMI2=ON": "bmi2", "-DGGML_AVX=ON": "avx", "-DGGML_SSE42=ON": "sse4_2"}
PIP = ("-m", "pip", "--disable-pip-version-check")


@dataclass(frozen=True)
class Build:
    """One requested build: the requirement (`name[extras]==version`) and the CMake arguments."""

    requirement: str
    cmake_args: str

    @property
    def name(self) -> str:
        return re.split(r"[\[=<>!~ ]", self.requirement, maxsplit=1)[0]

    @property
    def extras(self) -> str:
        found = re.search(r"\[[^\]]*\]", self.requirement)
        return found.group(0) if found else ""

    @property
    def pinned(self) -> str:
        """The requirement without its extras: what is built."""
        return self.requirement.replace(self.extras, "")

    @property
    def key(self) -> str:
        """The cache key: the pinned requirement and the flags (order and spacing normalised)."""
        flags = " ".join(sorted(self.cmake_args.split()))
        digest = hashlib.sha256(f"{self.pinned}\n{flags}".encode()).hexdigest()[:16]
        version = self.pinned.split("==", 1)[1] if "==" in self.pinned else "unpinned"
        return f"{self.name}-{version}-{digest}"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "research-dispatch" / "interop"


def missing_cpu_flags(build: Build) -> list[str]:
    """The instruction sets the flags require that this host does not advertise (Linux only; else none)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    line = re.search(r"^flags\s*:(.*)$", cpuinfo, re.M)
    flags = set(line.group(1).split()) if line else set()
    return sorted(need for arg, need in REQUIRED_CPU_FLAGS.items() if arg in build.cmake_args.split()
                  and need not in flags)


def forbidden_instructions(wheel: Path) -> list[str]:
    """Each shared library of the wheel with the first AVX-512 or AMX instruction objdump finds in it."""
    if shutil.which("objdump") is None:
        print("interop: objdump not found; the built libraries were not disassembled", file=sys.stderr)
        return []
    found: list[str] = []
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if not re.search(r"\.so(\.\d+)*$", member):
                continue
            path = Path(archive.extract(member, scratch))
            listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], check=True,
                                     capture_output=True, text=True).stdout
            hit = next((line.strip() for line in listing.splitlines() if FORBIDDEN.search(line)), None)
            if hit:
                found.append(f"{member}: {hit}")
    return found


def build_wheel(build: Build, target: Path) -> Path:
    """Compile the wheel into a scratch directory beside `target`, check it, then move it in place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{build.key}-", dir=target.parent))
    try:
        env = dict(os.environ, CMAKE_ARGS=build.cmake_args, FORCE_CMAKE="1")
        # every core for the compile (CMake builds serially with its Makefile generator unless told)
        env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        started = time.monotonic()
        print(f"interop: compiling {build.pinned} with CMAKE_ARGS='{build.cmake_args}' (10+ minutes the first "
              f"time on 2 cores; cached in {target})", flush=True)
        subprocess.run([sys.executable, *PIP, "wheel", "--quiet", "--no-deps", "--no-cache-dir",
                        "--no-binary", build.name, "--wheel-dir", str(scratch), build.pinned], env=env, check=True)
        wheel = next(scratch.glob("*.whl"))
        bad = forbidden_instructions(wheel)
        if bad:
            raise SystemExit("interop: the portable build still holds host-only instructions:\n  " + "\n  ".join(bad))
        record = {"requirement": build.pinned, "cmake_args": build.cmake_args, "wheel": wheel.name,
                  "build_seconds": round(time.monotonic() - started)}
        (scratch / "build.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        scratch.chmod(0o755)  # mkdtemp made it private; the cache is the machine's
        try:
            scratch.rename(target)
        except OSError:  # another clone built the same key meanwhile: theirs is as good as ours
            if not (target / "build.json").is_file():
                raise
        print(f"interop: built in {record['build_seconds']} s", flush=True)
        return target
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def cached_wheel(build: Build) -> Path:
    """The wheel of this build: from the cache, built first if it is not there (a complete entry has build.json)."""
    target = cache_root() / build.key
    if not (target / "build.json").is_file():
        shutil.rmtree(target, ignore_errors=True)
        build_wheel(build, target)
    else:
        print(f"interop: {build.pinned} from the cache ({target}), built with CMAKE_ARGS='{build.cmake_args}'",
              flush=True)
    record = json.loads((target / "build.json").read_text())
    return target / str(record["wheel"])


def install(venv_dir: Path, build: Build) -> None:
    """Install the cached wheel (with its extras) into `venv_dir`, unless it already holds this build."""
    stamp = venv_dir / ".interop-build"
    if stamp.is_file() and stamp.read_text().strip() == build.key:
        return
    missing = missing_cpu_flags(build)
    if missing:
        raise SystemExit(f"interop: this host lacks {', '.join(missing)}, which the build flags require; "
                         "set INTEROP_CMAKE_ARGS (Makefile) to switch them off")
    wheel = cached_wheel(build)
    if venv_dir.exists():
        shutil.rmtree(venv_dir)
    venv.create(venv_dir, with_pip=True)
    python = venv_dir / "bin" / "python"
    subprocess.run([str(python), *PIP, "install", "--quiet", f"{wheel}{build.extras}"], check=True)
    stamp.write_text(build.key + "\n")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    install(Path(argv[0]), Build(requirement=argv[1], cmake_args=argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
