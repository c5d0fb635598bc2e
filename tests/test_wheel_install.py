"""The wheel as a user installs it: built from the checkout, installed into a fresh
virtualenv, run from an empty folder outside the checkout (the bundled examples by name, the
README's tour and the guide's scripts), and installing only the ``wafersim`` namespace."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel (and installs it into a fresh virtualenv)

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
TOUR = [  # the README's commands, sized for a test
    ["examples"],
    ["run", "fc_digits", "steps=2", "--out", "out/fc"],
    ["compile", "gpt3-175b", "--batch", "8", "--pe-defect-prob", "0.02"],
    ["defects", "--preset", "wse2", "--defect-model", "clustered", "--defect-density-per-cm2",
     "1", "--alpha", "2", "--repair", "column_shift", "--seed", "7", "--out", "out/map.h5"],
    ["kernel", "gemm", "--algo", "summa", "--m", "64", "--k", "64", "--n", "64", "--grid", "4x4"],
]  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel pip builds from the checkout."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w",
                    str(dist)], check=True, capture_output=True, timeout=600)  # fmt: skip
    (found,) = dist.glob("wafersim-*.whl")
    return found


def test_the_wheel_installs_only_the_wafersim_namespace(wheel):
    """Every file of the wheel but its metadata lies under wafersim/: no top-level name of
    another project (fabric, kernels, compiler, ...) is taken."""
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"wafersim"}
    assert "wafersim/examples/models/gpt3-175b.yaml" in names
    assert "wafersim/memoryx/datasets/digits.csv.gz" in names
    assert "wafersim/py.typed" in names  # PEP 561: checkers read the package's annotations


@pytest.mark.slow
def test_the_wheel_runs_the_tour_and_the_guide_from_an_empty_folder(wheel, tmp_path):
    """A fresh virtualenv with the wheel runs the README's tour and every Python block of the
    README and the guide from a folder outside the checkout."""
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", str(wheel)], check=True, capture_output=True)  # fmt: skip
    # the dependencies come from this environment's packages (wafersim itself excluded: its
    # editable finder is not installed by a plain path entry)
    site = subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    )
    Path(site.strip(), "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": "", "MPLBACKEND": "Agg"}
    probe = [str(python), "-c", "import wafersim.fabric; print(wafersim.fabric.__file__)"]
    where = subprocess.check_output(probe, cwd=work, env=env, text=True)
    assert str(env_dir) in where  # the wheel's copy, not the checkout's
    for argv in TOUR:
        done = subprocess.run([str(env_dir / "bin" / "wafersim"), *argv], cwd=work, env=env,
                              capture_output=True, text=True, timeout=900)  # fmt: skip
        assert done.returncode == 0, f"{argv}: {done.stderr}"
    for doc in ("README.md", "docs/guide.md"):
        script = work / f"{Path(doc).stem}.py"
        script.write_text("\n".join(BLOCK.findall((ROOT / doc).read_text())))
        done = subprocess.run([str(python), str(script)], cwd=work, env=env,
                              capture_output=True, text=True, timeout=900)  # fmt: skip
        assert done.returncode == 0, f"{doc}: {done.stderr[-2000:]}"
